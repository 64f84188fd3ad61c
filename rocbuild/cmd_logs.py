"""`rocbuild logs COMPONENT [STEP] [--tail N]`: print a step's log.

Without STEP: the failed step if the component has a failure, else the last step (in build
order) that has a log. Logs of an LLVM build run to hundreds of MB, so they are streamed,
never read whole into memory.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections import deque
from pathlib import Path

from rocbuild.build import log_path
from rocbuild.errors import ConfigError
from rocbuild.graph import Component, load_stack
from rocbuild.settings import Settings
from rocbuild.state import StateDir
from rocbuild.steps import steps_of


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
                        help="fetch, patch, configure, compile or install")
    parser.add_argument("--tail", type=_count, metavar="N", help="only the last N lines")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings, [args.component])  # names the known ones when unknown
    comp = stack.components[args.component]
    step = choose_step(stack.workdir, comp, args.step)
    # asking for a log that does not exist is a wrong request, not a failed step (exit 2)
    if step is None:
        raise ConfigError(f"no log for {comp.name} yet: none of its steps has run (logs are "
                          f"kept in {stack.workdir / 'logs' / comp.name})",
                          tip="`rocbuild status` shows what has run; check --workdir")
    log = log_path(stack.workdir, comp.name, step)
    if not log.is_file():
        raise ConfigError(f"no log for {comp.name}: {step} yet ({log}): the step has not run",
                          tip=f"`rocbuild logs {comp.name}` shows the last step that ran")
    print_log(log, args.tail)
    return 0


def choose_step(workdir: Path, comp: Component, step: str | None) -> str | None:
    steps = steps_of(comp)
    if not steps:
        raise ConfigError(f"{comp.name} has no steps of its own: it uses the checkout of "
                          f"{comp.checkout}", tip=f"rocbuild logs {comp.checkout}")
    if step is not None:
        if step not in steps:
            raise ConfigError(f"unknown step '{step}' for {comp.name} (its steps: "
                              f"{', '.join(steps)})", tip=f"rocbuild logs {comp.name} {steps[-1]}")
        return step
    failure = StateDir(workdir).read_failure(comp.name)
    if failure is not None and failure.get("step") in steps:
        return str(failure["step"])
    with_log = [s for s in steps if log_path(workdir, comp.name, s).is_file()]
    return with_log[-1] if with_log else None


def print_log(log: Path, tail: int | None) -> None:
    with log.open(encoding="utf-8", errors="replace") as f:
        if tail is None:
            shutil.copyfileobj(f, sys.stdout)
        elif tail > 0:
            sys.stdout.writelines(deque(f, maxlen=tail))
    sys.stdout.flush()
