"""A step stopped by Ctrl-C or SIGTERM is "interrupted" in `rocbuild status`, as after a
SIGKILL (it read "pending — not run yet": the running mark was removed on the way out), and
its log says in words what stopped it (it said "(KeyboardInterrupt)", for SIGTERM too).
The step waits for a file the test creates, so nothing here depends on timing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.e2e.test_progress_live import HANG_GUARD, slow_stack, stopped_in_its_compile
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.mark.parametrize(("signum", "words"), [(signal.SIGINT, "Ctrl-C (SIGINT)"),
                                               (signal.SIGTERM, "SIGTERM")])
def test_a_stopped_step_is_interrupted_in_status_and_its_log_says_by_what(
        tmp_path: Path, signum: int, words: str) -> None:
    flags, go, marker = slow_stack(tmp_path)
    rc, out = stopped_in_its_compile(tmp_path, flags, go, marker, signum)
    assert rc == 130, out

    status = run_cli("status", *flags, env={"COLUMNS": "200"}, expect=0)
    row = next(line for line in status.stdout.splitlines() if " compile " in line)
    assert "interrupted: the run that started it at" in row, status.explain()
    assert f"was stopped by {words}" in row, status.explain()
    assert "not run yet" not in row
    log = (tmp_path / "work" / "logs" / "slow" / "compile.log").read_text()
    assert f"interrupted by {words} after" in log, log[-1500:]
    assert "KeyboardInterrupt" not in log

    go.touch()  # the rerun finishes the step: nothing is interrupted any more
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    status = run_cli("status", *flags, expect=0)
    assert "interrupted" not in status.stdout and "everything is built" in status.stdout


def running_in(marker: Path, pid: int) -> bool:
    """The step's running mark names this process (not a mark an earlier run left)."""
    try:
        return json.loads(marker.read_text()).get("pid") == pid
    except (OSError, ValueError):
        return False


def test_a_steps_time_counts_every_attempt(tmp_path: Path) -> None:
    """Estimates counted only the last attempt (a compile of 70 minutes over four attempts
    read 23): a Ctrl-C'd attempt, a SIGKILLed one and the one that finished add up."""
    from tests.e2e.test_kill_points import _kill_everything

    flags, go, marker = slow_stack(tmp_path)
    waited = 1.0  # each cut attempt runs at least this long
    argv = [sys.executable, "-m", "rocbuild", "build", *flags, "--quiet", "--no-verify"]
    for stop in ("SIGINT", "SIGKILL"):
        build = subprocess.Popen(argv, env=child_env(), cwd=tmp_path, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        # the last run's mark stays: it was cut
        wait_for(lambda: running_in(marker, build.pid) or build.poll() is not None,  # noqa: B023
                 "the compile started", guard=HANG_GUARD)
        assert build.poll() is None, "the build ended before its compile ran"
        time.sleep(waited)
        log = tmp_path / "work" / "logs" / "slow" / "compile.log"
        log.touch()  # the killed attempt's last write: the kill comes after it
        if stop == "SIGINT":
            build.send_signal(signal.SIGINT)
        else:
            _kill_everything(build)
        build.wait(timeout=HANG_GUARD)
    go.touch()
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    stamp = json.loads((tmp_path / "work" / "state" / "stamps" / "slow" / "compile.json")
                       .read_text())
    assert stamp["attempts"] == 3, stamp
    assert stamp["attempts_seconds"] >= stamp["seconds"] + 2 * waited, stamp
    assert stamp["cold_seconds"] == stamp["attempts_seconds"]  # no ccache hits here
    status = run_cli("status", *flags, env={"COLUMNS": "200"}, expect=0)
    row = next(line for line in status.stdout.splitlines() if " compile " in line)
    assert "3 attempts" in row, status.explain()


def test_logs_without_a_step_shows_the_step_a_ctrl_c_cut_off(tmp_path: Path) -> None:
    """`rocbuild logs X` after a Ctrl-C in X's compile printed X's install log of the run
    before (the last step in build order with a log), not the compile the user just stopped,
    although its help says "the log of its last step that ran"."""
    flags, go, marker = slow_stack(tmp_path)  # its first build wrote an install log
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *flags, "--quiet",
                              "--no-verify"], env=child_env(), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not running_in(marker, build.pid):
            assert build.poll() is None and time.monotonic() < deadline, "compile never ran"
            time.sleep(0.05)
        build.send_signal(signal.SIGINT)
        build.wait(timeout=HANG_GUARD)
    finally:
        if build.poll() is None:
            go.touch()
            build.kill()
            build.wait()
    assert build.returncode == 130
    shown = run_cli("logs", *flags, "slow", expect=0)
    assert "interrupted by Ctrl-C (SIGINT) after" in shown.stdout, shown.explain()
    assert "cmake --install" not in shown.stdout, shown.explain()
    assert "Traceback" not in shown.stderr

    go.touch()  # once the compile finished, the last step that ran is the install again
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    shown = run_cli("logs", *flags, "slow", expect=0)
    assert "cmake --install" in shown.stdout, shown.explain()
