"""Stack -> doit tasks: the only module that builds doit task dicts.

Per component and step kind of the step table (model/steptable.py) there is one task, named
``<step>:<component>`` (fetch, patch, options, configure, compile, install; ``cache`` for a
component the binary cache serves) and the run-wide ``python-venv``; each runs through the
one runner (runner.py), and is up to date by the binding of its kind (stepbind.py), which
reads rocbuild's stamps, not doit's DB (doit's DB is written only when a run ends). A step's
task_dep follow from the table: the steps whose runs are its inputs, ``build:<d>`` for its
dependencies, the checks that gate it, and ``preflight`` (lifecycle.py) before all of them.

``sources:<component>`` groups every fetch and patch a component needs, and
``build:<component>`` stands for the whole component with everything it needs: its
sources first, then every option check of what it needs, then its dependencies and its own
steps; its action is lifecycle.py's end of the run. So ``doit build:rocblas`` and ``rocbuild
build rocblas`` run the same graph, and a missing source, a stale patch or an option the
sources do not read fails in the first minutes, not at hour three.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from doit.exceptions import TaskFailed

from rocbuild.model import steptable
from rocbuild.model.buildsystems import venv
from rocbuild.model.graph import Component
from rocbuild.model.steptable import DEPENDENCIES, OF_CHECKOUT, OWN, StepKind
from rocbuild.run.engine import actions, cache_install, runner, schedule, stepbind
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import FAILED, INTERRUPTED, NOT_STARTED

PREFLIGHT = "preflight"  # lifecycle.PREFLIGHT_TASK (the phases before the tasks)
SOURCES, BUILD = "sources", "build"
Before = Callable[[], "TaskFailed | None"]  # the preflight task's action
End = Callable[[str], "TaskFailed | None"]  # the action of build:<component>, given its name


def _action(ctx: BuildContext, name: str, step: str) -> TaskFailed | None:
    outcome = runner.run_step(ctx, name, step)
    if outcome.result in (NOT_STARTED, INTERRUPTED):  # nothing that needs it runs
        return TaskFailed(f"{name}: {step} {outcome.result}: the run stops")
    return TaskFailed(outcome.message) if outcome.result == FAILED else None


def _uptodate(ctx: BuildContext, name: str | None, step: str) -> bool:
    kind = steptable.kind(step)
    return stepbind.is_current(ctx, kind, None if name is None else ctx.component(name))


def step_task(ctx: BuildContext, kind: StepKind, comp: Component | None, task_dep: list[str]
              ) -> dict[str, Any]:
    """The doit task of one step; every one waits for the preflight task."""
    name = comp.name if comp is not None else None
    task: dict[str, Any] = {
        "basename": kind.name,
        "doc": kind.summary if comp is None else f"{kind.name} {name}",
        "actions": [(_action, [ctx, name or kind.name, kind.name])],
        "uptodate": [(_uptodate, [ctx, name, kind.name])],
        "task_dep": [PREFLIGHT, *task_dep],
        "verbosity": 2,  # our action prints through ctx.output; never let doit capture stdout
    }
    if name is not None:
        task["name"] = name
    return task


def _step_deps(ctx: BuildContext, comp: Component, kind: StepKind, cached: bool,
               first: bool) -> list[str]:
    """What the step waits for: the checks that gate it, its own input steps, the builds of
    what the component depends on; when the cache serves the component, its cache step (the
    first step) and the checkout the sources phase left out (the step reading it)."""
    deps = [f"{check.name}:{comp.name}" for check in steptable.gating_checks(kind.name)
            if steptable.applies(check, comp)]
    later: list[str] = []
    for source in kind.inputs:
        if source.of == OWN:
            deps.append(f"{source.step}:{comp.name}")
        elif source.of == DEPENDENCIES:
            deps += [f"{BUILD}:{d}" for d in comp.depends]
        elif source.of == OF_CHECKOUT and cached and comp.owns_checkout:
            later.append(f"{source.step}:{comp.name}")
    if cached and first:
        later.append(f"{cache_install.STEP}:{comp.name}")
    return deps + later


def component_tasks(ctx: BuildContext, comp: Component, end: End) -> list[dict[str, Any]]:
    steps = steptable.steps_of(comp)
    out: list[dict[str, Any]] = []
    # --cache: `cache:<name>` installs the artifact and stamps the steps before they run
    cached = cache_install.is_served(ctx, comp.name)
    if cached:
        out.append(step_task(ctx, steptable.kind(cache_install.STEP), comp,
                             [f"{BUILD}:{d}" for d in comp.depends]))
    # only for a user of the venv: its cache step comes after its dependencies' builds, so
    # the venv before theirs would be a cycle (venv -> cache:user -> build:dep -> venv)
    served_venv = (cached and venv_after_cache(ctx)
                   and comp in actions.python_users(ctx.stack))
    for i, name in enumerate(steps):
        kind = steptable.kind(name)
        deps = _step_deps(ctx, comp, kind, cached, i == 0)
        # the venv's pip, when the cache serves every user of it: after the cache step, so
        # nothing reaches PyPI for components unpacked from the cache (a refused artifact
        # is built, and then the venv is made first)
        out.append(step_task(ctx, kind, comp,
                             deps + ([steptable.PYTHON_VENV.name] if served_venv else [])))
    runs_venv = venv.needs(ctx.stack) and not venv_after_cache(ctx)
    out.append({
        "basename": SOURCES,
        "name": comp.name,
        "doc": f"fetch and patch every source {comp.name} needs",
        "actions": None,
        "task_dep": [f"patch:{owner}" for owner in checkouts_needed(ctx, comp)
                     if not cache_install.is_served(ctx, owner)]
        + ([steptable.PYTHON_VENV.name] if runs_venv else []),
    })
    for check in (k for k in steptable.STEPS if k.gates and steptable.applies(k, comp)):
        # after the sources; served by --cache: after the cache step (then the gated step is
        # current and this is skipped), and after the checkout the sources phase left out
        deps = [f"{SOURCES}:{comp.name}"]
        if cached:
            deps += [f"{cache_install.STEP}:{comp.name}",
                     *([f"patch:{comp.name}"] if "patch" in steps else [])]
        out.append(step_task(ctx, check, comp, deps))
    last = [f"{steps[-1]}:{comp.name}"] if steps else []
    checks = [f"{k.name}:{n}" for n in ctx.stack.closure(comp.name)
              for k in steptable.STEPS if k.gates and steptable.applies(k, ctx.component(n))]
    out.append({
        "basename": BUILD,
        "name": comp.name,
        "doc": comp.recipe.summary or f"build {comp.name}",
        "actions": [(end, [f"{BUILD}:{comp.name}"])],
        # doit runs task_deps depth-first in list order: sources first, then every check, so
        # a missing source, a stale patch or an unread option anywhere below this component
        # fails before any compiler runs
        # and, with steps at once (stepgate.py), the dependency with the most work behind it
        # first (schedule.py)
        "task_dep": [f"{SOURCES}:{comp.name}", *checks,
                     *(f"{BUILD}:{d}" for d in (
                         schedule.longest_first(list(comp.depends), ctx.work_ahead())
                         if ctx.gates is not None else comp.depends)),
                     *last],
        "verbosity": 2,
    })
    return out


def venv_after_cache(ctx: BuildContext) -> bool:
    """Whether the binary cache serves every component that needs the build venv: then the
    venv is made (if at all) after their cache steps, not with the sources, and is current
    when they were unpacked (actions.python_is_current)."""
    users = actions.python_users(ctx.stack)
    return bool(users) and all(cache_install.is_served(ctx, c.name) for c in users)


def checkouts_needed(ctx: BuildContext, comp: Component) -> list[str]:
    """The checkouts of the component and of everything it depends on, in build order."""
    owners = {ctx.component(n).checkout for n in ctx.stack.closure(comp.name)}
    return [n for n in ctx.stack.order if n in owners]


def make_namespace(ctx: BuildContext, before: Before, end: End) -> dict[str, Any]:
    """A doit namespace (task creators + DOIT_CONFIG) for the Stack in ``ctx``; ``before``
    is the preflight task's action and ``end`` the one of each ``build:`` task
    (lifecycle.py)."""
    selected = ctx.stack.selected()

    def task_build() -> Any:
        """build a component with everything it needs (fetch, patch, configure, compile,
        install)"""
        yield {"basename": PREFLIGHT, "doc": "preflight: host, disk and patch checks",
               "actions": [before], "verbosity": 2}
        made = [task for comp in selected for task in component_tasks(ctx, comp, end)]
        # each group's own line in `doit list` (a task with name None describes its group;
        # without it every group repeated this function's docstring)
        docs = {SOURCES: "fetch and patch every source a component needs",
                BUILD: "build a component with everything it needs (doit build:X)",
                **{kind.name: kind.summary for kind in steptable.STEPS}}
        for basename in dict.fromkeys(t["basename"] for t in made if t.get("name")):
            yield {"basename": basename, "name": None, "doc": docs.get(basename, "")}
        yield from made
        if venv.needs(ctx.stack):  # the run-wide step, when a recipe needs Python packages
            served = ([f"{cache_install.STEP}:{c.name}" for c in actions.python_users(ctx.stack)]
                      if venv_after_cache(ctx) else [])
            yield step_task(ctx, steptable.PYTHON_VENV, None, served)

    return {
        "task_build": task_build,
        "DOIT_CONFIG": {
            "default_tasks": [f"{BUILD}:{c.name}" for c in selected],
            "backend": "durable",
            "dep_file": str(ctx.state.work.doit_db),
            "verbosity": 2,
        },
    }
