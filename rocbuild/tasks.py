"""Stack -> doit tasks: the only module that builds doit task dicts.

Per component and step there is one task, named ``<step>:<component>`` (fetch, patch,
configure, compile, install), and ``build:<component>`` stands for the whole component with
everything it needs, so ``doit build:rocblas`` and ``rocbuild build rocblas`` run the same
graph. Up-to-date checks read rocbuild's stamps (build.py), not doit's DB, because doit's DB
is written only when a run ends.

All fetch and patch tasks a component needs come before any of its configure steps, and a
patch step checks its whole series before applying any of it, so a missing source or a stale
patch fails in the first minutes, not at hour three.
"""

from __future__ import annotations

from typing import Any

from doit.exceptions import TaskFailed

from rocbuild import actions, cache_install, faults, optcheck, prefixguard
from rocbuild.build import BuildContext
from rocbuild.graph import Component
from rocbuild.steps import steps_of

PYTHON_TASK = "python-venv"


def _action(ctx: BuildContext, name: str, step: str) -> TaskFailed | None:
    ctx.ensure_ready()
    try:
        if step == "install":  # the prefix is rocbuild's from its first install on
            prefixguard.claim(ctx.stack.prefix)
        outcome = ctx.run_step(name, step)
    except (faults.StateWriteError, OSError) as exc:  # the disk filled under a stamp or log
        if isinstance(exc, OSError) and not faults.is_machine_fault(exc):
            raise
        error = exc if isinstance(exc, faults.StateWriteError) else faults.explain(exc)
        ctx.output.say(f"✘ {name}: {step}: {error}\nTIP: {error.tip}")
        return TaskFailed(str(error))
    if outcome.result == "failed":
        return TaskFailed(outcome.message)
    return None


def _python_action(ctx: BuildContext) -> TaskFailed | None:
    ctx.ensure_ready()
    outcome = actions.setup_python(ctx)
    return TaskFailed(outcome.message) if outcome.result == "failed" else None


def _options_action(ctx: BuildContext, name: str) -> TaskFailed | None:
    outcome = optcheck.check(ctx, name)
    return TaskFailed(outcome.message) if outcome.result == "failed" else None


def _uptodate(ctx: BuildContext, name: str, step: str) -> bool:
    return ctx.is_current(ctx.component(name), step)


def _step_task(ctx: BuildContext, comp: Component, step: str, task_dep: list[str]
               ) -> dict[str, Any]:
    return {
        "basename": step,
        "name": comp.name,
        "doc": f"{step} {comp.name}",
        "actions": [(_action, [ctx, comp.name, step])],
        "uptodate": [(_uptodate, [ctx, comp.name, step])],
        "task_dep": task_dep,
        "verbosity": 2,  # our action prints through ctx.output; never let doit capture stdout
    }


def component_tasks(ctx: BuildContext, comp: Component) -> list[dict[str, Any]]:
    steps = steps_of(comp)
    out: list[dict[str, Any]] = []
    previous: str | None = None
    # --cache: `cache:<name>` installs the artifact and stamps the steps before they run
    cached = cache_install.is_served(ctx, comp.name)
    if cached:
        out.append(cache_install.task(ctx, comp))
    for step in steps:
        if step == "fetch":
            deps: list[str] = []
        elif step == "patch":
            deps = [f"fetch:{comp.name}"]
        elif step == "configure":
            deps = [f"options:{comp.name}", *(f"build:{d}" for d in comp.depends)]
        else:
            deps = [f"{previous}:{comp.name}"]
        if cached and previous is None:
            deps.append(f"{cache_install.STEP}:{comp.name}")
        elif cached and step == "configure":  # its checkout left the sources-first phase
            deps.append(f"{previous}:{comp.name}")
        out.append(_step_task(ctx, comp, step, deps))
        previous = step
    last = [f"{previous}:{comp.name}"] if previous else []
    out.append({
        "basename": "sources",
        "name": comp.name,
        "doc": f"fetch and patch every source {comp.name} needs",
        "actions": None,
        "task_dep": [f"patch:{owner}" for owner in checkouts_needed(ctx, comp)
                     if not cache_install.is_served(ctx, owner)]
        + ([PYTHON_TASK] if ctx.stack.python_needs() != ((), ()) else []),
    })
    if comp.builds:
        out.append({
            "basename": optcheck.STEP,
            "name": comp.name,
            "doc": f"check every -D option of {comp.name} against its fetched CMake files",
            "actions": [(_options_action, [ctx, comp.name])],
            # the options were accepted once the configure of this fingerprint succeeded
            "uptodate": [(_uptodate, [ctx, comp.name, "configure"])],
            # served by --cache: after the cache step (then configure is current and this is
            # skipped), and after the checkout the sources phase left out (if it was refused)
            "task_dep": [f"sources:{comp.name}", *([f"{cache_install.STEP}:{comp.name}"]
                         + ([f"patch:{comp.name}"] if "patch" in steps else [])
                         if cached else [])],
            "verbosity": 2,
        })
    out.append({
        "basename": "build",
        "name": comp.name,
        "doc": comp.recipe.summary or f"build {comp.name}",
        "actions": None,
        # doit runs task_deps depth-first in list order: sources first, so a missing source or
        # a stale patch anywhere below this component fails before any compiler runs
        "task_dep": [f"sources:{comp.name}", *(f"build:{d}" for d in comp.depends), *last],
    })
    return out


def checkouts_needed(ctx: BuildContext, comp: Component) -> list[str]:
    """The checkouts of the component and of everything it depends on, in build order."""
    owners = {ctx.component(n).checkout for n in ctx.stack.closure(comp.name)}
    return [n for n in ctx.stack.order if n in owners]


def make_namespace(ctx: BuildContext) -> dict[str, Any]:
    """A doit namespace (task creators + DOIT_CONFIG) for the Stack in ``ctx``."""
    selected = ctx.stack.selected()

    def task_build() -> Any:
        """build a component with everything it needs (fetch, patch, configure, compile,
        install)"""
        for comp in selected:
            yield from component_tasks(ctx, comp)
        if ctx.stack.python_needs() != ((), ()):
            yield {
                "basename": PYTHON_TASK,
                "doc": "the build venv with the recipes' Python packages, and the wheelhouse",
                "actions": [(_python_action, [ctx])],
                "uptodate": [(actions.python_is_current, [ctx])],
                "verbosity": 2,
            }

    return {
        "task_build": task_build,
        "DOIT_CONFIG": {
            "default_tasks": [f"build:{c.name}" for c in selected],
            "backend": "durable",
            "dep_file": str(ctx.state.doit_db),
            "verbosity": 2,
        },
    }
