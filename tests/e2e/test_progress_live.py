"""What a build shows while it runs and when it is stopped: on a terminal the bar of
a step that runs past its estimate says "…s over estimate" (it froze at "ETA 0s"), and
after Ctrl-C the summary's table lists the step that was running as interrupted (it left it
out). The step waits for a file the test creates, so nothing here depends on timing."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli, unstamped
from tests.conftest import require_tool
from tests.e2e.test_log_end_lines import PROJECT  # a build that waits for a file
from tests.support.chain import one_component_stack
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANG_GUARD = 180  # seconds: only a hung build reaches it


def slow_stack(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """A component built once quickly (its compile's recorded time is a fraction of a
    second), then set to wait in its next compile for the file returned."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "slow", PROJECT, "[cmake]\n")
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    go = tmp_path / "go"
    recipe = tmp_path / "recipes" / "slow.toml"
    recipe.write_text(recipe.read_text() + f'args = ["-DSLOW_UNTIL={go}"]\n')
    return flags, go, tmp_path / "work" / "state" / "steps-running" / "slow.compile.json"


def build_on_a_terminal(tmp_path: Path, flags: list[str], go: Path,
                        ready: Callable[[bytes], bool]) -> tuple[int, str]:
    """``rocbuild build`` on an 80-column pseudo-terminal; the waiting step may end (``go``)
    once ``ready`` holds for what the terminal showed. The exit code and what was shown."""
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    env = child_env({"TERM": "xterm"})
    env.pop("COLUMNS", None)
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *flags, "--no-verify"],
                             stdin=child, stdout=child, stderr=child, env=env, cwd=tmp_path,
                             start_new_session=True)
    os.close(child)
    seen = b""
    deadline = time.monotonic() + HANG_GUARD
    try:
        while build.poll() is None or select.select([main], [], [], 0)[0]:
            assert time.monotonic() < deadline, seen.decode(errors="replace")[-3000:]
            if select.select([main], [], [], 0.2)[0]:
                try:
                    seen += os.read(main, 65536)
                except OSError:  # the child closed the terminal
                    break
            if ready(seen):
                go.touch()
    finally:
        go.touch()
        with contextlib.suppress(ProcessLookupError):
            build.wait(timeout=HANG_GUARD)
        os.close(main)
    return build.returncode, seen.decode(errors="replace")


def stopped_in_its_compile(tmp_path: Path, flags: list[str], go: Path, marker: Path,
                           signum: int) -> tuple[int, str]:
    """``rocbuild build --quiet`` of ``slow_stack``, sent ``signum`` once its compile runs (and
    waits for ``go``): the exit code and the output. ``go`` stays absent unless the build had
    to be killed."""
    build = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", *flags, "--quiet",
                              "--no-verify"], env=child_env(), cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: marker.exists() or build.poll() is not None, "the compile started",
                 guard=HANG_GUARD)
        assert build.poll() is None, "the build ended before its compile ran"
        build.send_signal(signum)
        out, _ = build.communicate(timeout=HANG_GUARD)
    finally:
        if build.poll() is None:
            go.touch()
            build.kill()
            build.wait()
    return build.returncode, out


def test_a_step_past_its_estimate_says_so_on_a_terminal(tmp_path: Path) -> None:
    flags, go, _ = slow_stack(tmp_path)
    rc, text = build_on_a_terminal(  # the step may end once its bar and the run's line say so
        tmp_path, flags, go, lambda seen: b"s over estimate" in seen
        and b"ETA ?: a step overran" in seen)
    assert rc == 0, text[-3000:]
    assert "slow: compile" in text and "s over estimate" in text, text[-3000:]
    assert "ETA ?: a step overran" in text, text[-3000:]  # the whole run's line


def test_after_ctrl_c_the_summary_lists_the_running_step_as_interrupted(
        tmp_path: Path) -> None:
    flags, go, marker = slow_stack(tmp_path)
    rc, out = stopped_in_its_compile(tmp_path, flags, go, marker, signal.SIGINT)  # Ctrl-C
    assert rc == 130, out
    compile_rows = [line for line in unstamped(out).splitlines()  # a log: the time first
                    if line.startswith("│") and " compile " in line]
    assert compile_rows and "interrupted" in compile_rows[0], out
    assert "Traceback" not in out


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_the_live_panel_leaves_the_terminals_last_columns_free(tmp_path: Path) -> None:
    """The live panel's rows stay two columns short of the terminal: with the cursor in the
    last column, the "^C" a terminal echoes on Ctrl-C begins a new line, the panel's erase on
    stop goes one line short and its first line stays on the screen above the summary."""
    flags, go, _ = slow_stack(tmp_path)
    rc, text = build_on_a_terminal(  # the panel was drawn a few times: the step may end
        tmp_path, flags, go, lambda seen: seen.count(b"whole run") >= 3)
    assert rc == 0, text[-3000:]
    drawn = [line for line in re.split(r"[\r\n]", ANSI.sub("", text)) if "━" in line]
    assert any("whole run" in line for line in drawn), text[-3000:]
    assert max(len(line) for line in drawn) <= 78, [line for line in drawn if len(line) > 78]
