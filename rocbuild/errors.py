"""Error classes that reach the user, each with its exit code (DESIGN 3.4).

An exception's ``str()`` is the message shown to the user; ``tip`` is the next command or
fix, printed on its own line. The CLI catches ``RocbuildError`` once and never shows a
traceback for these.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_STEP_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_BUSY = 3  # another run holds the workdir or the prefix: retry later (cron wrappers do)
EXIT_VERIFY_FAILED = 4  # verify found a library without code for a target (or unreadable)
EXIT_INTERRUPTED = 130


class RocbuildError(Exception):
    """Base of every error rocbuild reports without a traceback."""

    exit_code = EXIT_STEP_FAILED

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        self.tip = tip


class ConfigError(RocbuildError):
    """Bad input: a recipe, a config file, a flag, an environment variable or a target name."""

    exit_code = EXIT_BAD_INPUT


class BuildFailed(RocbuildError):
    """A build step failed; the message names the step and its log."""

    exit_code = EXIT_STEP_FAILED


class BusyError(RocbuildError):
    """Another rocbuild run holds the workdir's or the prefix's lock: nothing is wrong with
    the input, so a script may retry later."""

    exit_code = EXIT_BUSY
