"""The fetched sources are the last judge of a recipe: before any configure runs, every -D
option a built recipe passes must be read by some CMake file of the fetched commit (its own
checkout or a dependency's), as ``rocbuild lint-recipes --sources`` checks it (lint.py).

Run as the ``options:<component>`` doit tasks (tasks.py), which the engine runs after every
``sources:`` task and before any ``build:`` task, so a misspelt or removed option stops the
night in its first minutes, naming the recipe file and the option.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rocbuild.build import BuildContext, StepOutcome
from rocbuild.lint import CMakeWords, check_component_sources

STEP = "options"
_WORDS = CMakeWords()  # one walk of each tree per process, shared by every component


def check(ctx: BuildContext, name: str) -> StepOutcome:
    """The options of ``name`` against the checkouts in the workdir; a failed outcome names
    each option no CMake file reads."""
    started = time.monotonic()
    comp = ctx.component(name)
    report, findings = check_component_sources(ctx.stack, comp, ctx.stack.workdir / "src",
                                               _WORDS)
    unread = [f.message for f in findings if f.level == "error"]
    if not report.checked:
        unread = [f"no checkout at {report.source_dir} to check its options against"]
    seconds = time.monotonic() - started
    if unread:
        message = (f"{comp.recipe.file}: key 'cmake.args': " + "; ".join(unread)
                   + f" (checked {len(report.options)} options in "
                   f"{', '.join(report.searched) or 'nothing'}); nothing was configured. Fix: "
                   f"correct or remove the option in {comp.recipe.file} (it must exist at the "
                   "pinned ref), then run the same command again")
        outcome = StepOutcome(name, STEP, "failed", seconds, message=message)
    else:
        outcome = StepOutcome(name, STEP, "done", seconds)
    ctx.outcomes.append(outcome)
    return outcome


def tasks(ctx: BuildContext, components: Sequence[str]) -> list[str]:
    """The ``options:`` tasks of every built component ``components`` need, in build order:
    the engine runs them after all sources and before the first build."""
    needed = {n for c in components for n in ctx.stack.closure(c)}
    return [f"{STEP}:{n}" for n in ctx.stack.order if n in needed and ctx.component(n).builds]
