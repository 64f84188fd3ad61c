"""`rocbuild logs -f` follows a running step's log as `tail -f` does and ends by itself when
the step ends. The step waits for a file the test creates only after `logs -f`
started, so what it prints after that can reach the reader only by following."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import one_component_stack
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def waiting_project(go: Path) -> dict[str, str]:
    """A project whose compile prints a line, waits until ``go`` exists, prints another."""
    return {"wait.sh": f"echo before-go\nwhile [ ! -e {go} ]; do sleep 0.05; done\n"
                       "echo after-go\n",
            "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(w NONE)\n"
                              "add_custom_target(wait ALL COMMAND sh ${CMAKE_SOURCE_DIR}/wait.sh "
                              "USES_TERMINAL)\n"}


def test_logs_follow_prints_what_the_running_step_writes_and_ends_with_it(
        tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    go = tmp_path / "go"
    flags = one_component_stack(tmp_path, "w", waiting_project(go))
    workdir = Path(flags[flags.index("--workdir") + 1])
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", "w", *flags,
                              "--no-verify"], env=child_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        running = workdir / "state" / "steps-running" / "w.compile.json"
        wait_for(running.exists, "the compile step started")
        follower = subprocess.Popen([sys.executable, "-m", "rocbuild", "logs", "-f", "w",
                                     *flags], env=child_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    stdin=subprocess.DEVNULL)
        first = follower.stdout.readline() if follower.stdout else ""
        assert first, "logs -f printed nothing while the step ran"
        go.touch()  # the step goes on only now, after the follower printed its log so far
        out, err = follower.communicate(timeout=300)  # ends by itself when the step ends
        assert follower.returncode == 0, err
        assert "after-go" in first + out and "Traceback" not in err, (first, out, err)
        assert build.wait(timeout=300) == 0
    finally:
        go.touch()
        if build.poll() is None:
            build.kill()
            build.wait()
    # once nothing runs, -f prints the log and says why it does not wait
    done = run_cli("logs", "-f", "w", "compile", *flags, expect=0)
    assert "after-go" in done.stdout and "not running" in done.stderr, done.explain()
