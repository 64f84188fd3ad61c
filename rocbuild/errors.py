"""Error classes that reach the user, each with its exit code (docs/architecture.md,
Contracts; docs/exit-codes.md).

An exception's ``str()`` is the message shown to the user; ``tip`` is the next command or
fix, printed on its own line. The CLI (``cli.main``) and plain ``doit`` (``doit_entry``)
catch ``RocbuildError`` once and print it with ``report``; neither shows a traceback for
these. Every user-facing class lives here, except ``sources.GitFailed`` (a ``BuildFailed``
that parses git's output, so it stays beside git); a unit test checks that every
``RocbuildError`` subclass in the package has an exit code from ``EXIT_CODES``.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from typing import TextIO

EXIT_OK = 0
EXIT_STEP_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_BUSY = 3  # another run holds the workdir or the prefix: retry later (cron wrappers do)
EXIT_VERIFY_FAILED = 4  # verify found a library without code for a target (or unreadable)
EXIT_INTERRUPTED = 130

# The one exit-code table: code -> what it tells a script. `rocbuild --help`, docs/exit-codes.md
# (generated, cli/refdocs.py) and the tests all read it.
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_STEP_FAILED: "a build step failed (`build`; the message names the step and its log), "
                      "a step is recorded as failed (`status`), a host check failed (`doctor`)",
    EXIT_BAD_INPUT: "bad input (nothing was built): a recipe, config file, flag, environment "
                    "variable, value or target name to fix; also a link you may not change "
                    "(`activate`), a log that does not exist (`logs`), nothing to check",
    EXIT_BUSY: "busy (another rocbuild run holds the workdir or is installing into the "
               "prefix); retry later (a cron wrapper can loop on 3)",
    EXIT_VERIFY_FAILED: "verify found missing GPU code or another wrong result (`verify`, or "
                        "the build's final verify): a library without code for a target, a "
                        "program or library that does not find its libraries without "
                        "LD_LIBRARY_PATH, a failed smoke test",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C, SIGTERM or SIGHUP); finished steps are kept, run "
                      "the same command again",
}


def interrupt_cause(exc: BaseException) -> str:
    """What stopped a run, in words, for a step log and `rocbuild status`: Ctrl-C raises a
    bare KeyboardInterrupt; SIGTERM and SIGHUP are turned into one that says ``signal N``
    (``__main__._stop``, ``engine._term_to_interrupt``)."""
    if isinstance(exc, KeyboardInterrupt):
        match = re.fullmatch(r"signal (\d+)", str(exc.args[0]) if exc.args else "")
        if match is None:
            return "Ctrl-C (SIGINT)"
        import signal

        try:
            name = signal.Signals(int(match.group(1))).name
        except ValueError:
            return f"signal {match.group(1)}"
        return {"SIGHUP": "SIGHUP (the terminal or ssh session closed)",
                "SIGINT": "Ctrl-C (SIGINT)"}.get(name, name)
    return "the program exiting" if isinstance(exc, SystemExit) else type(exc).__name__


# the password of a URL's user part: ``https://user:secret@host/...`` (source.git, a mirror
# rule, a cache URL). The URL still reaches git; no message, log line or plan shows it.
_URL_PASSWORD = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@")
REDACTED = "***"


def redact(text: str) -> str:
    """``text`` with each URL's password replaced by ``***`` (the user name stays)."""
    if "@" not in text or "://" not in text:  # the usual case costs two scans
        return text
    return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", text)


# what a terminal acts on instead of showing: the C0 controls (ESC starts a sequence that
# retitles the window, moves the cursor, rewrites what is on screen; BEL, BS and CR hide
# text), DEL, the C1 controls (0x9b is CSI on some terminals) and the marks that reorder the
# text shown (bidirectional overrides and isolates: a name that reads as another)
_BUT_LINES = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(rf"[\t\n{_BUT_LINES}]")  # one such character (steps.shell_word too)
_CONTROL_BUT_LINES = re.compile(rf"[{_BUT_LINES}]")  # keeps tab (\x09) and newline (\x0a)
# a tool's colour or cursor sequence (ESC [ ... letter): CMake, ninja and clang colour their
# lines when a recipe forces it; dropped from a tool's line before it is shown or matched
TERMINAL_SEQUENCE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escaped(match: re.Match[str]) -> str:
    ch = match.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def printable(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\n``,
    ``\\u202e``), as Python's repr writes it: one field read from a file or an argument (a
    component, key or variable name, a signer, a patch file name) shown on one line."""
    return CONTROL.sub(_escaped, text) if CONTROL.search(text) else text


def printable_lines(text: str) -> str:
    """``printable`` that keeps newlines and tabs: a whole message or a line of a tool's
    output. The console (cli/ui.py), errors and notices (``fit_terminal``) and the build's
    plain output pass everything they print through it, so no caller can forget: bytes from
    files never reach a terminal raw (docs/robustness.md)."""
    return _CONTROL_BUT_LINES.sub(_escaped, text) if _CONTROL_BUT_LINES.search(text) else text


class RocbuildError(Exception):
    """Base of every error rocbuild reports without a traceback. The message and the tip are
    shown, logged and kept in failure records, so a URL's password is taken out here."""

    exit_code = EXIT_STEP_FAILED

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(redact(message))
        self.tip = redact(tip) if tip is not None else None


class ConfigError(RocbuildError):
    """Bad input: a recipe, a config file, a flag, an environment variable or a target name."""

    exit_code = EXIT_BAD_INPUT


class PreflightError(RocbuildError):
    """The build cannot start; nothing has run. Exit 2, like other input the user must fix."""

    exit_code = EXIT_BAD_INPUT


class BuildFailed(RocbuildError):
    """A build step failed; the message names the step and its log."""

    exit_code = EXIT_STEP_FAILED


class StateWriteError(RocbuildError):
    """rocbuild could not write its own state or a log; what finished before is kept."""

    exit_code = EXIT_STEP_FAILED


class CacheUnavailable(RocbuildError):
    """The cache cannot be read or written (server down, folder gone, no permission)."""

    exit_code = EXIT_STEP_FAILED


class ActivationError(ConfigError):
    """The link may not be changed by this user; the old link is untouched. Bad input (exit
    2), like any other path the user named that cannot be used: the fix is sudo or --link."""

    exit_code = EXIT_BAD_INPUT


class BusyError(RocbuildError):
    """Another rocbuild run holds the workdir's or the prefix's lock: nothing is wrong with
    the input, so a script may retry later."""

    exit_code = EXIT_BUSY


def report(exc: RocbuildError, stream: TextIO) -> int:
    """Print ``exc`` as the user reads it (one message, then its TIP) and return its exit
    code. The one printer of errors: the CLI and plain ``doit`` both call it."""
    print(fit_terminal(f"rocbuild: error: {exc}", stream), file=stream)
    if exc.tip:
        print(fit_terminal(f"TIP: {exc.tip}", stream), file=stream)
    return exc.exit_code


def notice(text: str, stream: TextIO | None = None) -> None:
    """One line of rocbuild's own to stderr (``rocbuild: note: …``, a warning), fitted to
    the terminal as an error is (fit_terminal); whole in a pipe, for grep."""
    stream = stream or sys.stderr
    print(fit_terminal(text, stream), file=stream, flush=True)


_NO_BREAK = "\u00a0"  # joins the words of a `command` while a message is wrapped


def fit_terminal(text: str, stream: TextIO) -> str:
    """``text`` wrapped at spaces to the width of the terminal ``stream`` is (the terminal
    itself would break a long line inside a word); unchanged in a pipe or file, where one
    line per message serves grep and logs. A continued line starts under its own line's
    text: after the indent, or after the name column of a "  name   description" row."""
    text = printable_lines(text)
    try:
        if not stream.isatty():
            return text
        width = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return text
    out = []
    for line in text.splitlines() or [""]:
        column = re.match(r"\s*(?:\S+(?: \S+)*\s{2,}(?=\S))?", line)
        hang = " " * min(column.end() if column else 0, width // 2)
        # a `command` in backticks is one word: never cut across lines, so it pastes whole
        # (textwrap splits at ASCII whitespace only, not at the no-break space)
        glued = re.sub(r"`[^`]+`", lambda m: m.group().replace(" ", _NO_BREAK), line)
        out.append(textwrap.fill(glued, width, subsequent_indent=hang, break_long_words=False,
                                 break_on_hyphens=False, drop_whitespace=True
                                 ).replace(_NO_BREAK, " ") or line)
    return "\n".join(out)

