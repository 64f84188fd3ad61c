"""OOM recovery end to end: a fake compiler that is SIGKILLed whenever another copy of it runs
at the same time (as two big LLVM links would be on a small machine). rocbuild must see the
memory kill, compile again with fewer jobs in the kept tree, finish, and remember the cap."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from rocbuild.cli.main import main
from tests.conftest import require_tool
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Like gcc: a driver that runs the real work in a child and reports the child's death.
FAKE_CC = textwrap.dedent('''\
    import os, signal, subprocess, sys, time
    lock_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(lock_dir, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", """
    import os, signal, sys, time
    lock_dir = sys.argv[1]
    me = os.path.join(lock_dir, str(os.getpid()))
    open(me, "w").close()
    try:
        for _ in range(10):
            others = [p for p in os.listdir(lock_dir) if p != str(os.getpid())]
            if others:
                os.kill(os.getpid(), signal.SIGKILL)   # "the OOM killer"
            time.sleep(0.05)
    finally:
        os.unlink(me)
    """, lock_dir])
    if child.wait() == -signal.SIGKILL:
        # the stale lock of the killed child goes too, as the kernel frees its memory
        for name in os.listdir(lock_dir):
            try: os.kill(int(name), 0)
            except OSError: os.unlink(os.path.join(lock_dir, name))
        print("fake-cc: fatal error: Killed signal terminated program cc1", flush=True)
        sys.exit(1)
    open(out, "w").write("object\\n")
    ''')


def project(tmp_path: Path) -> dict[str, str]:
    cc = tmp_path / "fake_cc.py"
    cc.write_text(FAKE_CC)
    lock = tmp_path / "running-compilers"
    objects = [f"o{i}" for i in range(6)]
    rules = "\n".join(
        f"add_custom_command(OUTPUT {o} COMMAND {sys.executable} {cc} {lock} {o} VERBATIM)"
        for o in objects)
    return {"CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(big NONE)
        """) + rules + textwrap.dedent(f"""
        add_custom_target(all_objects ALL DEPENDS {' '.join(objects)})
        install(FILES ${{CMAKE_CURRENT_BINARY_DIR}}/o0 DESTINATION share/big)
        """)}


def test_memory_kill_lowers_jobs_and_finishes(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = [*one_component_stack(tmp_path, "big", project(tmp_path),
                                  '[cmake]\n[resources]\ncompile_mem = "64MiB"\n'), "--jobs", "4"]
    assert main(["build", *flags, "--quiet", "--no-verify"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "a job was killed for memory; compiling again with 1 job" in out
    assert (tmp_path / "prefix/share/big/o0").is_file()

    cap = json.loads((tmp_path / "work/state/caps/big.json").read_text())
    assert cap["jobs"] == 1
    assert main(["status", *flags, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    compile_step = next(s for s in status["components"][0]["steps"] if s["step"] == "compile")
    assert compile_step["state"] == "done" and compile_step["oom_retries"] >= 1
    assert compile_step["jobs"] == 1

    # a later run starts at the remembered cap
    (tmp_path / "work/state/stamps/big/compile.json").unlink()
    assert main(["build", *flags, "--no-verify"]) == 0
    assert "cap 1 after an OOM kill" in capsys.readouterr().out


def eight_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job sizing sees 8 CPUs (the build's own compiles are real): on a 2-core host every
    count would be 2, where halving and "minus one" both give 1."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr("rocbuild.checks.hostload.cgroup_cpu_quota", lambda root: None)


def compile_record(flags: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["status", *flags, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    return next(s for s in status["components"][0]["steps"] if s["step"] == "compile")


@pytest.mark.parametrize("parallel", ["1", "2"])
def test_each_memory_kill_halves_the_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          parallel: str) -> None:
    """8 jobs, killed, 4, killed, 2, killed, 1: halving, never "one fewer" (8, 7, 6, ...);
    the same for a build that draws from the run's job pool (--parallel 2)."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    eight_cpus(monkeypatch)
    flags = [*one_component_stack(tmp_path, "big", project(tmp_path),
                                  '[cmake]\n[resources]\ncompile_mem = "64MiB"\n'), "--jobs", "8",
             "--parallel", parallel]
    assert main(["build", *flags, "--no-verify"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "big: 8 jobs" in out, out
    again = [int(n) for n in re.findall(r"a job was killed for memory; compiling again with "
                                        r"(\d+) job", out)]
    assert again == [4, 2, 1], out
    record = compile_record(flags, capsys)
    assert record["oom_retries"] == 3 and record["jobs"] == 1, record


def test_the_remembered_cap_holds_without_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A run without --jobs starts at the cap an earlier OOM kill left, not at what the host
    affords (8 jobs here), so it is not killed again."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    eight_cpus(monkeypatch)
    flags = one_component_stack(tmp_path, "big", project(tmp_path),
                                '[cmake]\n[resources]\ncompile_mem = "64MiB"\n')
    assert main(["build", *flags, "--no-verify"]) == 0, capsys.readouterr().out
    assert "compiling again with 1 job" in capsys.readouterr().out
    assert json.loads((tmp_path / "work/state/caps/big.json").read_text())["jobs"] == 1

    (tmp_path / "work/state/stamps/big/compile.json").unlink()
    assert main(["build", *flags, "--no-verify"]) == 0
    out = capsys.readouterr().out
    assert "cap 1 after an OOM kill" in out, out
    assert "killed for memory" not in out, out
    record = compile_record(flags, capsys)
    assert record["oom_retries"] == 0 and record["jobs"] == 1, record
