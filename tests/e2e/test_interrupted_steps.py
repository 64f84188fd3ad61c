"""A step stopped by Ctrl-C or SIGTERM is "interrupted" in `rocbuild status`, as after a
SIGKILL (it read "pending — not run yet": the running mark was removed on the way out), and
its log says in words what stopped it (it said "(KeyboardInterrupt)", for SIGTERM too).
The step waits for a file the test creates, so nothing here depends on timing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.e2e.test_progress_live import HANG_GUARD, slow_stack

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("signum", "words"), [(signal.SIGINT, "Ctrl-C (SIGINT)"),
                                               (signal.SIGTERM, "SIGTERM")])
def test_a_stopped_step_is_interrupted_in_status_and_its_log_says_by_what(
        tmp_path: Path, signum: int, words: str) -> None:
    flags, go, marker = slow_stack(tmp_path)
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *flags, "--quiet",
                              "--no-verify"], env=child_env(), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not marker.exists():
            assert build.poll() is None and time.monotonic() < deadline, "compile never ran"
            time.sleep(0.05)
        build.send_signal(signum)
        out, _ = build.communicate(timeout=HANG_GUARD)
    finally:
        if build.poll() is None:
            go.touch()
            build.kill()
            build.wait()
    assert build.returncode == 130, out

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
