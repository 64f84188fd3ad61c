"""The reports a user acts on, from real builds of the generated chain: the "continue with"
line pasted back into a real run, status during a live build, a failed verify, a patch-only
change, the narrow status table, and `build --json`."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from rocbuild.cli import cmd_status
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.run.engine.status import collect
from rocbuild.run.state.state import StateDir
from rocbuild.run.state.uptodate import Rule
from tests.cli import child_env, commands_under, run_cli, run_flags
from tests.e2e.test_engine import sleepers, slow_beta
from tests.e2e.test_status import break_beta, recipe
from tests.support.chain import Chain, add_gamma_patch, require_gpu_code
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def continue_lines(text: str) -> list[str]:
    return commands_under(text)


def test_continue_line_pasted_into_a_new_shell_finishes_the_whole_run(chain: Chain) -> None:
    """A whole-stack run with relative --recipes/--workdir/--prefix, --target, and the
    mirror from the environment fails in beta; the line it prints, pasted in another folder
    with no ROCBUILD_* variables, finishes the same whole-stack run."""
    break_beta(chain)
    here = chain.root
    argv = ["build", "--recipes", "project/recipes", "--workdir", "work", "--prefix", "prefix",
            "--target", "gfx906", "--quiet", "--no-verify"]
    failed = run_cli(*argv, cwd=here, env={"ROCBUILD_MIRROR": chain.mirror}, expect=1)
    (line,) = set(continue_lines(failed.stdout))
    words = shlex.split(line)
    assert words[:2] == ["rocbuild", "build"] and "beta" not in words  # not narrowed
    assert words[words.index("--workdir") + 1] == str(chain.workdir)  # made absolute
    assert words[words.index("--mirror") + 1] == chain.mirror  # the env setting, as a flag
    assert "--target" in words and "--quiet" in words
    # status (run elsewhere, naming only the workdir) repeats the same line
    status = run_cli("status", "--workdir", str(chain.workdir), "--recipes",
                     str(chain.recipes), cwd=here / "project", expect=1)
    assert line in continue_lines(status.stdout)

    chain.write_recipe("beta", recipe("beta", ["alpha"], []))  # the fix
    elsewhere = here / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([sys.executable, "-m", "rocbuild", *words[1:]], cwd=elsewhere,
                          env=child_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "▶ gamma: configure" in done.stdout  # the whole stack, beyond beta
    assert chain.run_gamma() == "gamma 11"


def test_status_during_a_live_build_shows_running_and_no_continue_line(chain: Chain,
                                                                        tmp_path: Path) -> None:
    marker = slow_beta(chain)
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *chain.flags(),
                               "--quiet", "--no-verify"], env=child_env(), cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: bool(sleepers(marker)) or runner.poll() is not None,
                 "the slow step started")
        assert runner.poll() is None, "the build ended before the slow step"
        doc = json.loads(run_flags(chain.flags(), "status", "--json", expect=0).stdout)
        steps = {(c["name"], s["step"]): s for c in doc["components"] for s in c["steps"]}
        assert steps[("beta", "compile")]["state"] == "running"
        assert steps[("beta", "compile")]["why"].startswith(f"pid {runner.pid}, since ")
        assert steps[("beta", "install")]["state"] == "pending"
        assert doc["running"] == runner.pid and doc["continue"] is None
        text = run_flags(chain.flags(), "status", expect=0).stdout
        assert "running" in text and f"a build is running in this workdir (pid {runner.pid})" \
            in " ".join(text.split())
        assert "continue with" not in text
    finally:
        marker.unlink(missing_ok=True)
        runner.terminate()
        runner.wait(timeout=60)
    # the run is gone: its marker no longer counts, and status offers the command again
    doc = json.loads(run_flags(chain.flags(), "status", "--json").stdout)
    states = {(c["name"], s["step"]): s["state"] for c in doc["components"]
              for s in c["steps"]}
    assert "running" not in states.values() and doc["running"] is None
    assert doc["continue"] is not None


def test_a_failed_verify_is_a_failed_row_and_status_exits_1(chain: Chain) -> None:
    # gamma must carry GPU code and the chain has none: verify fails (exit 4; incomplete)
    require_gpu_code(chain, "gamma")
    run_flags(chain.flags(), "build", "--quiet", expect=4)
    doc = json.loads(run_flags(chain.flags(), "status", "--json", expect=1).stdout)
    assert doc["verify"]["state"] == "failed" and doc["failed"] is True
    assert all(c["state"] == "done" for c in doc["components"])
    text = run_flags(chain.flags(), "status", expect=1).stdout
    row = next(line for line in text.splitlines() if " verify " in line)
    assert "failed" in row and "everything is built" not in text
    assert "verify failed" in text
    # --no-verify: complete but unproven, and status says so (activate refuses it)
    run_flags(chain.flags(), "build", "--quiet", "--no-verify", expect=0)
    doc = json.loads(run_flags(chain.flags(), "status", "--json", expect=0).stdout)
    assert doc["verify"]["state"] == "unproven", doc["verify"]
    text = run_flags(chain.flags(), "status", expect=0).stdout
    assert "unproven" in text and "and verified" not in text


def test_a_patch_only_change_says_patches_changed(chain: Chain) -> None:
    run_flags(chain.flags(), "build", "--quiet", "--no-verify", expect=0)
    add_gamma_patch(chain)
    doc = json.loads(run_flags(chain.flags(), "status", "--json", expect=0).stdout)
    steps = {(c["name"], s["step"]): s for c in doc["components"] for s in c["steps"]}
    assert steps[("gamma", "patch")]["why"] == "patches changed: 0001-say-hello.patch (new)"
    why = steps[("gamma", "configure")]["why"]
    assert why.startswith("patches changed") and "recipe options" not in why


def test_status_table_reads_at_80_columns(chain: Chain) -> None:
    break_beta(chain)
    run_flags(chain.flags(), "build", "--quiet", "--no-verify", expect=1)
    settings = resolve({"recipes": str(chain.recipes), "workdir": str(chain.workdir),
                        "prefix": str(chain.prefix), "mirror": [chain.mirror]}, env={})
    stack = load_stack(settings)
    report = collect(Rule(stack, StateDir.of(stack)), settings)
    buffer = io.StringIO()
    cmd_status.print_status(report, Console(file=buffer, width=80, color_system=None),
                            [])
    # the table (after the header line, which keeps the long tmp paths whole)
    table = buffer.getvalue().split("\nFAILED", 1)[0].splitlines()[1:]
    assert max(len(line) for line in table) <= 80
    rows = [line for line in table if " pending " in line or " failed " in line]
    assert any(line.rstrip().endswith("waits for beta (failed)") for line in rows), table
    assert any(line.rstrip().endswith("cause unknown (see below)") for line in rows), table


def test_build_json_reports_steps_results_logs_and_causes(chain: Chain) -> None:
    break_beta(chain)
    result = run_flags(chain.flags(), "build", "--no-verify", "--json", expect=1)
    doc = json.loads(result.stdout)  # stdout is the document alone
    assert "▶ beta: compile" in result.stderr  # the step lines went to stderr
    assert doc["exit_code"] == 1 and doc["result"] == "a build step failed"
    steps = {(s["component"], s["step"]): s for s in doc["steps"]}
    failed = steps[("beta", "compile")]
    assert failed["result"] == "failed" and "cmake exited with 1" in failed["message"]
    assert failed["log"] == str(chain.workdir / "logs" / "beta" / "compile.log")
    assert "cause" in failed and any("beta was configured to fail" in line
                                     for line in failed["tail"])
    done = steps[("alpha", "install")]
    assert done["result"] == "done" and isinstance(done["seconds"], float)
    assert doc["continue"] == shlex.join(["rocbuild", "build", "--no-verify", "--json",
                                          *chain.flags()])
    again = json.loads(run_flags(chain.flags(), "build", "--no-verify", "--json",
                                 expect=1).stdout)
    assert {s["result"] for s in again["steps"] if s["component"] == "alpha"} == {"current"}


MANY_ERRORS = {"CMakeLists.txt": (
    "cmake_minimum_required(VERSION 3.20)\nproject(errs NONE)\n"
    'message(SEND_ERROR "the first error: the real cause is here")\n'
    'foreach(i RANGE 80)\n  message(STATUS "noise line ${i}")\nendforeach()\n'
    'message(SEND_ERROR "a later error that follows from the first")\n'
    'message(FATAL_ERROR "the last error")\n')}


def test_a_failed_configure_shows_its_first_cmake_error(tmp_path: Path) -> None:
    """The summary showed the log's last lines: CMake's last error, with the first (the
    cause) out of sight 80 lines above."""
    from tests.conftest import require_tool
    from tests.support.chain import one_component_stack

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "errs", MANY_ERRORS)
    built = run_cli("build", *flags, "--no-verify", env={"COLUMNS": "200"}, expect=1)
    text = built.stdout
    first = text.index("--- the first error (the cause;")
    assert "the first error: the real cause is here" in text[first:], built.explain()
    assert text.index("the first error: the real cause") < text.index("--- the log's last 20 lines")
    assert "CMake Error at CMakeLists.txt:3 (message):" in text[first:], built.explain()
    doc = json.loads(run_cli("build", *flags, "--no-verify", "--json", expect=1).stdout)
    failed = next(s for s in doc["steps"] if s["result"] == "failed")
    assert failed["step"] == "configure" and failed["first_error"][0].startswith(
        "CMake Error at CMakeLists.txt:3"), failed
    status = run_cli("status", *flags, env={"COLUMNS": "200"}, expect=1).stdout
    assert "cause: not a known failure; the first error of the log:" in status, status
    assert "| the first error: the real cause is here" in " ".join(status.split()) or \
        "the first error: the real cause is here" in status, status


def test_the_first_cmake_error_is_whole_or_says_where_it_is_cut(tmp_path: Path) -> None:
    """`status` quoted the first CMake Error to its twelfth line: find_package's usual
    message lost its fix mid-sentence ("Add the installation prefix of "gizmo" to
    CMAKE_PREFIX_PATH or set"), with nothing saying it was cut."""
    from tests.conftest import require_tool
    from tests.support.chain import one_component_stack

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    missing = one_component_stack(tmp_path / "missing", "needs", {"CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.20)\nproject(needs NONE)\n"
        "find_package(gizmo 2.0 REQUIRED)\n")})
    run_cli("build", *missing, "--no-verify", "--quiet", expect=1)
    status = run_cli("status", *missing, env={"COLUMNS": "200"}, expect=1).stdout
    quoted = status[status.index("--- the first error"):status.index("--- end of the log")]
    assert '"gizmo_DIR" to a directory containing one of the above files.' in quoted, status
    assert "cut here" not in quoted, status

    long = one_component_stack(tmp_path / "long", "long", {"CMakeLists.txt": (
        "cmake_minimum_required(VERSION 3.20)\nproject(long NONE)\n"
        'message(FATAL_ERROR "' + "\\n".join(f"reason {i}" for i in range(40)) + '")\n')})
    run_cli("build", *long, "--no-verify", "--quiet", expect=1)
    status = run_cli("status", *long, env={"COLUMNS": "200"}, expect=1).stdout
    quoted = status[status.index("--- the first error"):status.index("--- end of the log")]
    assert "reason 0" in quoted and "reason 39" not in quoted, status
    assert quoted.rstrip().endswith("[… cut here: the rest of this message is in the log]"), \
        status
