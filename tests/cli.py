"""Run rocbuild as a user does: ``python -m rocbuild ...`` in a real child process.

Failure cases go through here so the exit code and what the user reads are checked as the
user sees them; an in-process ``main()`` call would hide a traceback that escapes the CLI's
error boundary (the interpreter prints it, not our code).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CliResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def explain(self) -> str:
        return (f"$ {' '.join(self.argv)}\nexit {self.returncode}\n--- stdout ---\n"
                f"{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}")


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's environment (conftest cleared ROCBUILD_* and set XDG_*), with this checkout
    first on PYTHONPATH so the child runs the code under test."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env.update(extra or {})
    return env


def run_cli(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 600, expect: int | None = None,
            stdin: str | None = None) -> CliResult:
    """``python -m rocbuild *args``; asserts that no traceback reached the user and, when
    ``expect`` is given, the exit code."""
    argv = [sys.executable, "-m", "rocbuild", *args]
    done = subprocess.run(argv, cwd=cwd, env=child_env(env), capture_output=True, text=True,
                          timeout=timeout, input=stdin,
                          stdin=None if stdin is not None else subprocess.DEVNULL)
    result = CliResult(argv, done.returncode, done.stdout, done.stderr)
    assert_no_traceback(result)
    if expect is not None:
        assert result.returncode == expect, result.explain()
    return result


def assert_no_traceback(result: CliResult) -> None:
    assert "Traceback (most recent call last)" not in result.output, result.explain()


def run_flags(flags: Sequence[str], *args: str, **kwargs: object) -> CliResult:
    """``run_cli`` with the global flags of a test stack first (e.g. ``chain.flags()``)."""
    return run_cli(*args, *flags, **kwargs)  # type: ignore[arg-type]


STAMP = re.compile(r"^\d\d:\d\d:\d\d ", re.M)  # the time a plain (piped) line starts with


def unstamped(text: str) -> str:
    """``text`` without the time each line of a build's plain output starts with."""
    return STAMP.sub("", text)


def commands_under(text: str, label: str = "continue with:") -> list[str]:
    """The commands printed under ``label`` (ui.print_command: the label on its line, the
    command whole on the next), in order."""
    lines = unstamped(text).splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines[:-1]) if line.strip() == label]


# lines rocbuild prints whole on purpose (soft_wrap=True, ui.FittedConsole): a command to
# paste (a terminal soft-wraps it, so a copy stays one line) and verify's findings, one line
# each for grep
WHOLE_LINE_STARTS = ("continue with:", "after fixing it:", ". ", "source ", "module ", "+ ",
                     "environment: source ", "✗ ", "! ", "command: ")
# the labels whose next line is a command printed whole (ui.print_command)
COMMAND_LABELS = ("continue with:", "after fixing it:")
# where a report quotes a tool's lines as printed, never re-wrapped (ui.print_quoted)
QUOTE_START, QUOTE_END = ", as printed ---", "--- end of the log lines ---"


def too_wide(text: str, width: int) -> list[str]:
    """The lines of ``text`` wider than ``width`` that rocbuild should have wrapped: a line may
    be wider only when it is one word (a path, which is never broken inside), a command
    printed whole (after its label, or alone in backticks), or a tool's line quoted as
    printed. The time a plain build line starts
    with counts in the width."""
    out, quoting, command = [], False, False
    for line in text.splitlines():
        body = STAMP.sub("", line).strip()
        whole = quoting or command or len(body.split()) <= 1 or body.startswith(
            WHOLE_LINE_STARTS) or re.fullmatch(r"`[^`]+`[,.;:)]?", body) is not None
        quoting = (quoting or body.endswith(QUOTE_START)) and body != QUOTE_END
        command = body in COMMAND_LABELS
        if len(line) > width and not whole:
            out.append(line)
    return out
