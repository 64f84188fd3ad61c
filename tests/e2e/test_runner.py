"""The one runner (proc.run_logged, proc.run_capture): own session, registered with the run's
registry while alive, the whole group ended on timeout or when the run is interrupted. Real
child processes (sys.executable -c), no mocks."""

from __future__ import annotations

import shlex
import sys
import threading
from pathlib import Path

import psutil
import pytest

from rocbuild.proc import ChildRegistry, RunResult, run_capture, run_logged
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# prints the pid of a grandchild in the same group, then waits on it for good
_PARENT_OF_A_SLEEPER = ("import subprocess, sys, time; c = subprocess.Popen("
                        "[sys.executable, '-c', 'import time; time.sleep(300)']); "
                        "print(c.pid, flush=True); time.sleep(300)")


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_capture_timeout_ends_the_whole_group_and_keeps_the_output() -> None:
    done = run_capture(py(_PARENT_OF_A_SLEEPER), timeout=1.0, grace=5.0)
    assert done.timed_out and done.started and not done.ok and not done.answered
    grandchild = int(done.stdout.split()[0])
    wait_for(lambda: _gone(grandchild), "the grandchild ended")


def test_capture_is_registered_while_it_runs(tmp_path: Path) -> None:
    registry = ChildRegistry(tmp_path / "running")
    done = run_capture(py("import os, pathlib, sys; "
                          f"print(pathlib.Path({str(tmp_path / 'running')!r}, "
                          "f'{os.getpid()}.json').is_file(), os.getsid(0) == os.getpid())"),
                       registry=registry)
    assert done.ok and done.answered and done.stdout.split() == ["True", "True"]
    assert registry.live() == [] and not list((tmp_path / "running").iterdir())


def test_capture_of_a_missing_program_is_a_result_that_says_so() -> None:
    """run_capture always returns a Captured, as run_logged a RunResult: a program that
    cannot start is exit 127, not started, with why in stderr."""
    done = run_capture(["/nonexistent/tool", "--version"])
    assert not done.started and not done.ok and not done.timed_out
    assert done.returncode == 127 and "cannot run /nonexistent/tool" in done.stderr


def test_logged_to_a_sink_echoes_the_command_and_stops_at_its_timeout() -> None:
    lines: list[str] = []
    echoed: list[str] = []
    argv = py("import time; print('started', flush=True); time.sleep(300)")
    result = run_logged(argv, on_line=lines.append, echo=echoed.append, timeout=1.0)
    assert echoed == [f"+ {shlex.join(argv)}"]
    assert lines == ["started"] and result.log is None
    assert result.timed_out and result.signal == 15  # SIGTERM first; SIGKILL only after grace


def test_kill_all_ends_the_children_other_threads_are_waiting_on() -> None:
    """What the engine does on Ctrl-C with --parallel: worker threads own the children."""
    registry = ChildRegistry(None)
    results: list[RunResult] = []
    lines: list[str] = []
    worker = threading.Thread(target=lambda: results.append(run_logged(
        py(_PARENT_OF_A_SLEEPER), on_line=lines.append, registry=registry)))
    worker.start()
    wait_for(lambda: bool(lines), "the child's first line")
    assert len(registry.live()) == 1
    registry.kill_all()
    worker.join(timeout=60)
    assert results and results[0].signal == 15
    wait_for(lambda: _gone(int(lines[0])), "the child ended")
    assert registry.live() == []
