"""The light steps of a component (fetch, patch, configure: one process each, no job of the
pool) run while another component compiles, even at --parallel 1, where only the compiles
take turns. Seen on 16 cores: at --parallel 1 every fetch ran first, one after another, and
each configure waited for the build before it.

A counting compiler launcher records each compile's start and end; each component's
launcher first waits until the other component's configure has written its mark. One after
another, the second configure came only after the first build ended: the first compile's
launcher gave up waiting."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

GIVE_UP = 120  # seconds the first compile waits for the mark (a guard, not a measure)

# compiler launcher: LOG MARK CMD...: waits for the file MARK and notes whether it came, then
# "+"/"-" around the compile (under a lock)
LAUNCHER = textwrap.dedent(f'''\
    import fcntl, os, subprocess, sys, time
    log, mark = sys.argv[1], sys.argv[2]
    def note(text):
        with open(log + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(log, "a") as f:
                f.write(text + "\\n")
    until = time.monotonic() + {GIVE_UP}
    while not os.path.exists(mark) and time.monotonic() < until:
        time.sleep(0.05)
    note("mark seen" if os.path.exists(mark) else "mark never came")
    note("+")
    try:
        code = subprocess.call(sys.argv[3:])
    finally:
        note("-")
    sys.exit(code)
    ''')


def project(name: str) -> dict[str, str]:
    marking = 'file(WRITE "${CONFIGURED_MARK}" "configured")\n'
    return {
        f"{name}.c": f"int {name}(void) {{ return 1; }}\n",
        "CMakeLists.txt": textwrap.dedent(f"""\
            cmake_minimum_required(VERSION 3.20)
            project({name} C)
            """) + marking + textwrap.dedent(f"""\
            add_library({name} STATIC {name}.c)
            install(TARGETS {name} ARCHIVE DESTINATION lib)
            """),
    }


def most_at_once(lines: list[str]) -> int:
    running = peak = 0
    for line in lines:
        if line in ("+", "-"):
            running += 1 if line == "+" else -1
            peak = max(peak, running)
    return peak


def test_a_configure_runs_while_another_component_compiles_at_parallel_1(
        tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    launcher, log = tmp_path / "launcher.py", tmp_path / "compiles.log"
    launcher.write_text(LAUNCHER)
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        'components = ["first", "second"]\n')
    for name, other in (("first", "second"), ("second", "first")):
        make_repo(repos, name, project(name))
        launch = f"{sys.executable};{launcher};{log};{tmp_path / other}.configured"
        listed = ", ".join(f'"{a}"' for a in [f"-DCMAKE_C_COMPILER_LAUNCHER={launch}",
                                               f"-DCONFIGURED_MARK={tmp_path / name}.configured"])
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\nargs = [{listed}]\n')
    done = run_cli("build", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                   "--prefix", str(tmp_path / "prefix"), "--parallel", "1",
                   "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify",
                   timeout=GIVE_UP + 300)
    assert done.returncode == 0, done.explain()
    lines = log.read_text().splitlines()
    # the other component configured while the first compile waited
    assert lines.count("mark seen") == 2, (lines, done.stdout)
    assert most_at_once(lines) == 1, (lines, done.stdout)  # the compiles still took turns
    assert lines.count("+") == 2


def test_sigterm_ends_a_compile_beside_light_steps_as_interrupted(tmp_path: Path) -> None:
    """With light steps beside it, a compile runs in a worker thread, not in the thread the
    signal reaches: its tool is ended by the run's end, and the step is still interrupted
    (its log's end line, exit 130, no failure on record), as with one step at a time."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    repos, recipes, work = tmp_path / "repos", tmp_path / "recipes", tmp_path / "work"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        'components = ["slow", "quick"]\n')
    started = tmp_path / "slow-started"
    for name in ("slow", "quick"):
        files = project(name)
        if name == "slow":  # a silent long step after the library, like a link
            files["CMakeLists.txt"] += (f'add_custom_target(wait ALL COMMAND sh -c "touch '
                                        f'{started}; sleep 120" DEPENDS slow VERBATIM)\n')
        make_repo(repos, name, files)
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\n'
            f'args = ["-DCONFIGURED_MARK={tmp_path / name}.configured"]\n'
            + ('[resources]\ncpu_hours = 1.0\n' if name == "slow" else ""))
    argv = [sys.executable, "-m", "rocbuild", "build", "--recipes", str(recipes),
            "--workdir", str(work), "--prefix", str(tmp_path / "prefix"), "--parallel", "1",
            "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify"]
    runner = subprocess.Popen(argv, env=child_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: started.exists() or runner.poll() is not None,
                 "the slow step started", guard=GIVE_UP)
        assert started.exists() and runner.poll() is None, "the slow step never started"
        runner.send_signal(signal.SIGTERM)
        out, _ = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 130, out
    assert "Traceback" not in out
    log = (work / "logs" / "slow" / "compile.log").read_text()
    assert "step ended: interrupted after" in log.rstrip().splitlines()[-1], log[-600:]
    assert not list(work.rglob("failures/slow.json")), out  # status: not a failed step


# git on PATH for the run: the first git command of the late component's fetch waits for MARK
# (up to WAIT seconds) and notes whether it came; every command then runs the real git
SLOW_GIT = textwrap.dedent('''\
    #!/bin/sh
    case "$*" in *late.git*)
      [ -e "{log}" ] && exec {git} "$@"
      i=0
      while [ ! -e "{mark}" ] && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done
      if [ -e "{mark}" ]; then echo "mark seen" >> "{log}"; else echo "waited" >> "{log}"; fi;;
    esac
    exec {git} "$@"
    ''')


def test_every_source_is_in_before_a_configure_while_steps_run_at_once(
        tmp_path: Path) -> None:
    """With steps at once, doit's threads take any ready step: in CI's run a component whose
    own sources were in configured while another's patch was still to come (a stale patch
    there would fail after a compiler had run). The late component's fetch waits for the
    early one's configure mark: it must never come."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    real_git, wait = shutil.which("git"), 8
    shim, log, mark = tmp_path / "bin", tmp_path / "git.log", tmp_path / "early.configured"
    shim.mkdir()
    (shim / "git").write_text(SLOW_GIT.format(mark=mark, tenths=wait * 10, log=log,
                                              git=real_git))
    (shim / "git").chmod(0o755)
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "1.0"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n'
        'components = ["early", "late"]\n')
    for name in ("early", "late"):
        make_repo(repos, name, project(name))
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\n'
            f'args = ["-DCONFIGURED_MARK={tmp_path / name}.configured"]\n')
    done = run_cli("build", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                   "--prefix", str(tmp_path / "prefix"), "--parallel", "2",
                   "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify",
                   env={"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.explain()
    assert log.read_text() == "waited\n", (log.read_text(), done.stdout)
    started = re.findall(r"▶ (\S+): (\w+)$", done.stdout, re.M)
    sources = [i for i, (_, step) in enumerate(started) if step in ("fetch", "patch")]
    builds = [i for i, (_, step) in enumerate(started) if step in ("configure", "compile")]
    assert max(sources) < min(builds), started
