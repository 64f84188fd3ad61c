"""Run rocbuild as a user does: ``python -m rocbuild ...`` in a real child process.

Failure cases go through here so the exit code and what the user reads are checked as the
user sees them; an in-process ``main()`` call would hide a traceback that escapes the CLI's
error boundary (the interpreter prints it, not our code).
"""

from __future__ import annotations

import os
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


# lines rocbuild prints whole on purpose (soft_wrap=True, ui.FittedConsole): a command to
# paste (a terminal soft-wraps it, so a copy stays one line) and verify's findings, one line
# each for grep
WHOLE_LINE_STARTS = ("continue with:", "after fixing it:", ". ", "source ", "module ", "+ ",
                     "environment: source ", "✗ ", "! ", "command: ")


def too_wide(text: str, width: int) -> list[str]:
    """The lines of ``text`` wider than ``width`` that rocbuild should have wrapped: a line may
    be wider only when it is one word (a path, which is never broken inside) or a command
    printed whole."""
    return [line for line in text.splitlines()
            if len(line) > width and len(line.split()) > 1
            and not line.strip().startswith(WHOLE_LINE_STARTS)]
