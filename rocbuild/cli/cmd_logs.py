"""`rocbuild logs COMPONENT [STEP] [--tail N]`: print a step's log.

Every step the build's summary can show has a log here, as the step table names it
(model/steptable.py): fetch ... install, the ``options`` check, the ``cache`` step and the
run-wide ``python-venv`` (of any component, or as ``rocbuild logs python-venv``). Without
STEP: the failed step if the component has a failure, else the last step (in build order)
that has a log (one of fetch ... install when any has). Logs of an LLVM build run to
hundreds of MB, so they are streamed, never read whole into memory.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import deque
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.model import steptable
from rocbuild.model.graph import Component, load_stack
from rocbuild.model.settings import Settings
from rocbuild.model.steptable import RUN, log_path, steps_of, with_logs
from rocbuild.model.workdir import Workdir
from rocbuild.run.state import workdirs
from rocbuild.run.state.state import StateDir


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
                    "failed, else the last step that has a log.")
    parser.add_argument("component", metavar="COMPONENT")
    parser.add_argument("step", nargs="?", metavar="STEP",
                        help=", ".join(k.name for k in steptable.STEPS))
    parser.add_argument("--tail", type=_count, metavar="N", help="only the last N lines")
    parser.set_defaults(func=run)


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
    viewed, note = workdirs.viewed_prefix(settings, stack.prefix)
    if note is not None:  # the logs of the last build in this workdir
        print(f"rocbuild: note: {note}", file=sys.stderr)
        stack = load_stack(viewed, [args.component])
    comp = stack.components[args.component]
    step = choose_step(stack.work, comp, args.step)
    # asking for a log that does not exist is a wrong request, not a failed step (exit 2)
    if step is None:
        raise ConfigError(f"no log for {comp.name} yet: none of its steps has run (logs are "
                          f"kept in {' and '.join(map(str, stack.work.logs(comp.name)))})",
                          tip="`rocbuild status` shows what has run; check --workdir")
    log = log_path(stack.work, comp.name, step)
    if not log.is_file():
        raise ConfigError(f"no log for {comp.name}: {step} yet ({log}): the step has not run",
                          tip=f"`rocbuild logs {comp.name}` shows the last step that ran")
    print_log(log, args.tail)
    return 0


def choose_step(work: Workdir, comp: Component, step: str | None) -> str | None:
    """``step`` when ``comp`` has it (any step kind with a log, run-wide ones too); without
    one, the failed step, else the last step that has a log."""
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
    failure = StateDir(work).read_failure(comp.name)
    if failure is not None and failure.get("step") in names:
        return str(failure["step"])
    # its own stamped steps first (a check's or the cache's log only when none has one)
    with_log = [s for s in names if steptable.BY_NAME[s].who != RUN
                and log_path(work, comp.name, s).is_file()]
    stamped = [s for s in with_log if s in own]
    chosen = stamped or with_log
    return chosen[-1] if chosen else None


def print_log(log: Path, tail: int | None) -> None:
    with log.open(encoding="utf-8", errors="replace") as f:
        if tail is None:
            shutil.copyfileobj(f, sys.stdout)
        elif tail > 0:
            sys.stdout.writelines(deque(f, maxlen=tail))
    sys.stdout.flush()
