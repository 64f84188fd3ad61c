"""`python -m rocbuild` and the `rocbuild` command (scripts/rocbuild). Ctrl-C, SIGTERM and
SIGHUP are held from the first line of rocbuild that runs (this file's, run as `python -m`;
the command's own) while the CLI is imported (the first ~0.4 s), then each ends the command
as Ctrl-C does: exit 130 and one line (docs/exit-codes.md), never a traceback. A signal that
came during the imports is acted on right after them. Nothing heavy is imported here."""

if __name__ == "__main__":  # `python -m rocbuild`: held from here (``_hold`` below)
    import _signal  # type: ignore[import-not-found]  # the C module: signal.py imports enum

    _early: list[int] = []
    for _signum in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(_signum, lambda signum, frame: _early.append(signum))

import contextlib
import signal
import sys
from collections.abc import Iterable

EXIT_INTERRUPTED = 130  # errors.EXIT_INTERRUPTED, not imported: errors comes after the handlers
INTERRUPTED = ("rocbuild: interrupted; what finished is kept, run the same command again to "
               "continue")
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_held: list[int] = []


def _hold(signum: int, frame: object) -> None:
    _held.append(signum)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _interrupted() -> int:
    with contextlib.suppress(OSError, KeyboardInterrupt):  # a hangup took the terminal
        print(INTERRUPTED, file=sys.stderr)
    return EXIT_INTERRUPTED


def _exit_interrupted() -> None:
    """Exit 130 now. CPython (3.11) remembers a KeyboardInterrupt that left any ``exec`` of a
    string (dataclasses and namedtuple make their methods so) even when the CLI caught it,
    and then ends the process by SIGINT after finalizing, whatever ``sys.exit`` said: the
    shell saw 130 one time and a death by signal the next. So the exit handlers run here and
    the process ends with the documented code."""
    import atexit
    import os

    with contextlib.suppress(OSError, ValueError, KeyboardInterrupt):
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    os._exit(EXIT_INTERRUPTED)


def run(held: Iterable[int] = ()) -> int:
    """The CLI's exit code; 130 with one line for an interrupt at any moment, imports too.
    ``held``: the signals that came before this module was imported (scripts/rocbuild)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _hold)
    _held.extend(held)
    from rocbuild.cli.main import main  # an exception inside importlib helps no one

    signal.signal(signal.SIGINT, signal.default_int_handler)
    for signum in STOP_SIGNALS[1:]:
        signal.signal(signum, _stop)
    if _held:
        return _interrupted()
    try:
        return main()
    except KeyboardInterrupt:
        return _interrupted()


def console(held: Iterable[int] = ()) -> None:
    """The `rocbuild` command and `python -m rocbuild`; ``held``: the stop signals that came
    before this module was imported (a console_scripts wrapper of an older install calls it
    without)."""
    code = run(held)
    if code == EXIT_INTERRUPTED:
        _exit_interrupted()
    sys.exit(code)


if __name__ == "__main__":
    console(_early)
