"""Step logs tell real kills from runs that ended.

Every attempt of every step ends with a line of its own (fetch and patch, whose git commands
log through rocbuild's logger, had none, so each later attempt said "attempt N has no end
line: rocbuild was stopped ..." after runs that all succeeded). After a real SIGKILL in the
middle of a step, `rocbuild status` says the step was interrupted (it said "configure ran
again"), and the step's next attempt names the cut-off one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.e2e.test_kill_points import _kill_everything
from tests.support.chain import Chain, add_gamma_patch, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NO_END = "has no end line"


def test_fetch_and_patch_logs_end_every_attempt(chain: Chain) -> None:
    add_gamma_patch(chain)
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    run_cli("clean", *chain.flags(), "gamma", "--sources", expect=0)
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    logs = sorted((chain.workdir / "logs").rglob("*.log"))
    assert logs
    for log in logs:
        assert NO_END not in log.read_text(), f"{log}:\n{log.read_text()}"
    for step in ("fetch", "patch"):
        text = (chain.workdir / "logs" / "gamma" / f"{step}.log").read_text()
        assert text.count("=== attempt ") == 2, text
        assert text.count("step ended: done after") == 2, text


PROJECT = {"CMakeLists.txt": textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(slow NONE)
    set(SLOW_UNTIL "" CACHE STRING "a file the build waits for (empty: no wait)")
    if(SLOW_UNTIL)
      add_custom_target(wait ALL COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/wait.sh ${SLOW_UNTIL})
    endif()
    install(FILES CMakeLists.txt DESTINATION share/slow)
    """), "wait.sh": 'while [ ! -e "$1" ]; do sleep 0.1; done\n'}


def test_a_killed_step_is_interrupted_in_status(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "slow", PROJECT, "[cmake]\n")
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    go = tmp_path / "go"
    recipe = tmp_path / "recipes" / "slow.toml"
    recipe.write_text(recipe.read_text() + f'args = ["-DSLOW_UNTIL={go}"]\n')
    work = tmp_path / "work"
    marker = work / "state" / "steps-running" / "slow.compile.json"
    argv = [sys.executable, "-m", "rocbuild", "build", *flags, "--quiet", "--no-verify"]
    with (tmp_path / "run.out").open("w") as out:
        build = subprocess.Popen(argv, env=child_env(), stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        while not marker.exists():  # compile started (configure ran again before it)
            assert build.poll() is None, (tmp_path / "run.out").read_text()
            subprocess.run(["sleep", "0.05"], check=True)
        _kill_everything(build)
        build.wait(timeout=60)

    status = run_cli("status", *flags, env={"COLUMNS": "200"}, expect=0)
    compile_row = next(line for line in status.stdout.splitlines() if " compile " in line)
    assert "interrupted" in compile_row, status.explain()
    assert "configure ran again" not in compile_row
    doc = run_cli("status", *flags, "--json", expect=0).stdout
    assert "interrupted: the run that started it" in doc

    go.touch()  # the rerun's compile finishes; its log names the attempt the kill cut off
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    text = (work / "logs" / "slow" / "compile.log").read_text()
    assert text.count(NO_END) == 1, text
    assert NO_END not in (work / "logs" / "slow" / "configure.log").read_text()
    status = run_cli("status", *flags, expect=0)
    assert "interrupted" not in status.stdout and "everything is built" in status.stdout
