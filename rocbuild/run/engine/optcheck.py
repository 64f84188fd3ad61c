"""The fetched sources are the last judge of a recipe: before any configure runs, every
option a built recipe passes must be read by some build file of the fetched commit (its own
checkout or a dependency's), as ``rocbuild lint-recipes --sources`` checks it (lint.py; which
options and which files is the build system's, buildsystems/).

Run as the ``options:<component>`` step (the step table's check gating configure), which the
engine runs after every ``sources:`` task and before any ``build:`` task, so a misspelt or
removed option stops the night in its first minutes, naming the recipe file and the option.
The step's log (``logs/<component>/options.log``) lists what was checked where.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild.errors import BuildFailed
from rocbuild.model.graph import Component
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import StepOutcome, step_logger

if TYPE_CHECKING:  # the lint of build files loads when an options step runs
    from rocbuild.checks.lint import BuildFileWords

STEP = "options"


@functools.cache
def _words() -> BuildFileWords:
    """One walk of each tree per process, shared by every component."""
    from rocbuild.checks.lint import BuildFileWords

    return BuildFileWords()


def check_options(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """The options of ``comp`` against the checkouts in the workdir; BuildFailed names each
    option no build file reads."""
    from rocbuild.checks.lint import check_component_sources

    report, findings = check_component_sources(ctx.stack, comp, ctx.stack.work.src,
                                               _words())
    write = step_logger(log)
    write(f"checked {len(report.options)} options of {comp.recipe.file} against the build "
          f"files of {', '.join(report.searched) or 'nothing'} ({report.source_dir})")
    for name, where in report.read_by:
        write(f"  {name}: read by {where}")
    unread = [f.message for f in findings if f.level == "error"]
    if not report.checked:
        unread = [f"no checkout at {report.source_dir} to check its options against"]
    for line in unread:
        write(f"  not read: {line}")
    if unread:
        key = f"{comp.recipe.table}.args"
        raise BuildFailed(
            f"{comp.recipe.file}: key '{key}': " + "; ".join(unread)
            + f" (checked {len(report.options)} options in "
            f"{', '.join(report.searched) or 'nothing'}); nothing was configured. Fix: "
            f"correct or remove the option in {comp.recipe.file} (it must exist at the "
            "pinned ref), then run the same command again")


def tasks(ctx: BuildContext, components: Sequence[str]) -> list[str]:
    """The ``options:`` tasks of every built component ``components`` need, in build order:
    the engine runs them after all sources and before the first build."""
    needed = {n for c in components for n in ctx.stack.closure(c)}
    return [f"{STEP}:{n}" for n in ctx.stack.order if n in needed and ctx.component(n).builds]
