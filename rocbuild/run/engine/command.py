"""One command of a step: in the component's build environment, logged, with its output
shown through the run's sink and its process registered with the run (proc.run_logged)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild import proc
from rocbuild.errors import BuildFailed
from rocbuild.model import buildsystems
from rocbuild.model.graph import Component
from rocbuild.model.steps import cleared_env, step_env
from rocbuild.run.engine import stepfaults
from rocbuild.run.engine.outcome import StepOutcome, step_logger

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext


def run_tool(ctx: BuildContext, comp: Component | None, step: str, argv: list[str], log: Path,
             outcome: StepOutcome, *, label: str | None = None,
             extra_env: Mapping[str, str | None] | None = None) -> proc.RunResult:
    """Run ``argv`` for ``step`` of ``comp`` (None: a run-wide step, in rocbuild's own
    environment), with ``extra_env`` over it (None: the variable removed; the job pool's
    MAKEFLAGS); BuildFailed naming the step when it fails."""
    name = comp.name if comp is not None else (label or step)
    env = step_env(ctx.stack, comp, os.environ) if comp is not None else None
    if env is not None and comp is not None and step == "install" and comp.builds:
        env.update(buildsystems.of(comp).install_env)
    if comp is not None:
        for setting in cleared_env(os.environ):
            step_logger(log)(f"{setting} of your environment is cleared for this step: "
                             "rocbuild installs copies into the prefix itself")
    if extra_env:  # a None value takes the variable out
        merged = {**(env if env is not None else os.environ), **extra_env}
        env = {key: value for key, value in merged.items() if value is not None}
    cwd = comp.build_dir if comp is not None and comp.build_dir.is_dir() else None
    ctx.output.command(name, step, argv)
    result = proc.run_logged(
        argv, log=log, cwd=cwd, env=env,
        on_line=lambda line: ctx.output.build_line(name, step, line),
        registry=ctx.registry())
    outcome.peak_rss = max(outcome.peak_rss, result.peak_rss)
    outcome.tail = result.tail
    if not result.ok:
        how = (f"was killed by signal {result.signal}" if result.signal
               else f"exited with {result.returncode}")
        # a full disk, in the tool's words and where: the message is what the summary shows
        places = [comp.build_dir, ctx.stack.prefix] if comp is not None else [ctx.stack.workdir]
        full = stepfaults.full_disk(result.tail, places)
        raise BuildFailed(f"{name}: {step} failed: {argv[0]} {how}" + (f": {full}" if full else ""))
    return result


def run_all(ctx: BuildContext, comp: Component | None, step: str, commands: list[list[str]],
            log: Path, outcome: StepOutcome, *, label: str | None = None,
            extra_env: Mapping[str, str | None] | None = None) -> None:
    """Each command in turn; the first that fails ends the step."""
    for argv in commands:
        run_tool(ctx, comp, step, argv, log, outcome, label=label, extra_env=extra_env)
