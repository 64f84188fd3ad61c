"""`rocbuild logs COMPONENT [STEP] [--tail N]`: print a step's log.

Every step the build's summary can show has a log here, as the step table names it
(model/steptable.py): fetch ... install, the ``options`` check, the ``cache`` step and the
run-wide ``python-venv`` (of any component, or as ``rocbuild logs python-venv``). Without
STEP: the failed step if the component has a failure, else the step a run left interrupted
(Ctrl-C, SIGTERM, a kill: its log is newer than the logs of the steps after it, which an
earlier run wrote), else the last step (in build order) that has a log (one of fetch ...
install when any has), and with ``-f`` the component's step that is running now. Logs of an
LLVM build run to hundreds of MB, so they are streamed, never read whole into memory.

``-f`` follows the log as ``tail -f`` does while the step runs (run/state/running.py says
which steps a live build runs), and ends when the step ends, so `rocbuild logs -f llvm` in a
second terminal needs no Ctrl-C.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TextIO

from rocbuild.errors import ConfigError, notice, printable_lines
from rocbuild.model import steptable
from rocbuild.model.graph import Component, load_stack
from rocbuild.model.settings import Settings
from rocbuild.model.steptable import RUN, log_path, steps_of, with_logs
from rocbuild.model.workdir import Workdir
from rocbuild.run.state import view


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "logs", parents=parents, help="print the log of a component's step",
        description="Print the log of one step of a component. Without STEP: the step that "
                    "failed or was interrupted, else the last step that has a log.")
    parser.add_argument("component", metavar="COMPONENT")
    parser.add_argument("step", nargs="?", metavar="STEP",
                        help=", ".join(k.name for k in steptable.STEPS))
    parser.add_argument("--tail", type=_count, metavar="N", help="only the last N lines")
    parser.add_argument("-f", "--follow", action="store_true",
                        help="keep printing what the running step writes, until it ends")


def run(args: argparse.Namespace, settings: Settings) -> int:
    run_wide = steptable.BY_NAME.get(args.component)
    if run_wide is not None and run_wide.who == RUN and args.step is None:
        # `rocbuild logs python-venv`: a step of the whole run, not of one component
        log = log_path(Workdir.shared(settings.workdir), args.component,
                       args.component)
        if not log.is_file():
            raise ConfigError(f"no log for {args.component} yet ({log}): the step has not run",
                              tip="`rocbuild status` shows what has run; check --workdir")
        print_log(log, args.tail)
        return 0
    stack = load_stack(settings, [args.component])  # names the known ones when unknown
    viewed, note = view.viewed_prefix(settings, stack.prefix)
    if note is not None:  # the logs of the last build in this workdir
        notice(f"rocbuild: note: {note}")
        stack = load_stack(viewed, [args.component])
    comp = stack.components[args.component]
    live = [step for (name, step) in view.running_steps(stack.workdir) if name == comp.name]
    step = (args.step or (live[-1] if live and args.follow else None)
            or choose_step(stack.work, comp, args.step, interrupted_step(stack.workdir, comp)))
    if args.step is not None:
        choose_step(stack.work, comp, args.step)  # refuses a step the component lacks
    # asking for a log that does not exist is a wrong request, not a failed step (exit 2)
    if step is None:
        raise ConfigError(f"no log for {comp.name} yet: none of its steps has run (logs are "
                          f"kept in {' and '.join(map(str, stack.work.logs(comp.name)))})",
                          tip="`rocbuild status` shows what has run; check --workdir")
    log = log_path(stack.work, comp.name, step)
    if args.follow and (comp.name, step) in view.running_steps(stack.workdir):
        follow(log, args.tail, lambda: (comp.name, step) in view.running_steps(stack.workdir))
        return 0
    if not log.is_file():
        raise ConfigError(f"no log for {comp.name}: {step} yet ({log}): the step has not run",
                          tip=f"`rocbuild logs {comp.name}` shows the last step that ran")
    if args.follow:  # nothing runs: the whole log, and why nothing more comes
        notice(f"rocbuild: note: {comp.name}: {step} is not running; its log as it ended:")
    print_log(log, args.tail)
    return 0


def interrupted_step(workdir: Path, comp: Component) -> str | None:
    """The step of ``comp`` a run left cut off (its running mark stays: run/state/running.py),
    as `status` calls it "interrupted"."""
    cut = [step for (name, step) in view.interrupted_steps(workdir) if name == comp.name]
    return cut[-1] if cut else None


def choose_step(work: Workdir, comp: Component, step: str | None,
                interrupted: str | None = None) -> str | None:
    """``step`` when ``comp`` has it (any step kind with a log, run-wide ones too); without
    one, the failed step, else the ``interrupted`` one, else the last step that has a log."""
    names = [k.name for k in with_logs(comp)]
    own = steps_of(comp)
    if not own and (step is None or step not in names):
        raise ConfigError(f"{comp.name} has no steps of its own: it uses the checkout of "
                          f"{comp.checkout}", tip=f"rocbuild logs {comp.checkout}")
    if step is not None:
        if step not in names:
            also = [n for n in names if n not in own]
            raise ConfigError(f"unknown step '{step}' for {comp.name} (its steps: "
                              f"{', '.join(own)}; with a log too: {', '.join(also)})",
                              tip=f"rocbuild logs {comp.name} {own[-1]}")
        return step
    failure = view.failure(work, comp.name)
    if failure is not None and failure.get("step") in names:
        return str(failure["step"])
    if interrupted in names and log_path(work, comp.name, interrupted).is_file():
        return interrupted
    # its own stamped steps first (a check's or the cache's log only when none has one)
    with_log = [s for s in names if steptable.BY_NAME[s].who != RUN
                and log_path(work, comp.name, s).is_file()]
    stamped = [s for s in with_log if s in own]
    chosen = stamped or with_log
    return chosen[-1] if chosen else None


FOLLOW_POLL = 0.2  # seconds between looks at a followed log


class Shown:
    """``stream`` that writes a log's control characters as their escapes
    (errors.printable_lines) when it is a terminal: a step log holds what tools printed,
    source lines a compiler quoted among them, and bytes from files never reach a terminal
    raw. A pipe (``| less -R``, ``| grep``) gets the log as it is."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        try:
            self.terminal = stream.isatty()
        except (AttributeError, ValueError):
            self.terminal = False

    def write(self, text: str) -> int:
        return self.stream.write(printable_lines(text) if self.terminal else text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.stream.flush()


def follow(log: Path, tail: int | None, runs: Callable[[], bool]) -> None:
    """``tail -f`` of ``log`` while ``runs()`` says its step runs: what is there (its last
    ``tail`` lines), then each new piece as it is written; ends once the step ended and
    everything it wrote was printed. The log may not exist yet for a step just started."""
    while not log.is_file():
        if not runs():
            return
        time.sleep(FOLLOW_POLL)
    out = Shown(sys.stdout)
    with log.open(encoding="utf-8", errors="replace") as f:
        if tail is not None:
            out.writelines(deque(f, maxlen=tail))
        while True:
            running_now = runs()  # asked before reading: the last write is never missed
            piece = f.read()
            if piece:
                out.write(piece)
                out.flush()
            elif not running_now:
                return
            else:
                time.sleep(FOLLOW_POLL)


def print_log(log: Path, tail: int | None) -> None:
    out = Shown(sys.stdout)
    with log.open(encoding="utf-8", errors="replace") as f:
        if tail is None:
            shutil.copyfileobj(f, out)
        elif tail > 0:
            out.writelines(deque(f, maxlen=tail))
    out.flush()
