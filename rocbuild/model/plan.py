"""The plan model: what would be built, in which order, how, and with how many jobs.

``build_plan`` turns a Stack into plain data; ``to_json`` is the stable document behind
``rocbuild plan --json`` (top-level ``prefix``, ``targets``, ``settings``, ``components`` in
build order, and ``cost``: disk in bytes, CPU-hours, expected wall hours, risky steps, for the
components not yet installed; see cost.Cost.to_json). Rendering for a terminal lives in ui.py.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocbuild.model import cmakecode
from rocbuild.model.base import Audited
from rocbuild.model.baseaudit import action, unclaimed
from rocbuild.model.cost import Cost, estimate
from rocbuild.model.graph import Component, Stack
from rocbuild.model.launchers import Launch, choices, effective_settings, split_jobs
from rocbuild.model.resources import JOB_MEMORY_KEYS, HostSnapshot, JobCount, jobs_by_kind
from rocbuild.model.roads import ProfileRoads, Road, profile_roads, roads
from rocbuild.model.settings import OPTIONS, Settings
from rocbuild.model.steptable import StepCommands, commands_for, steps_of

FROM_CACHE = "from cache"  # a component's state when the binary cache serves it


@dataclass(frozen=True)
class PlannedComponent:
    component: Component
    state: str
    jobs: dict[str, JobCount]  # kind -> count; "compile" always present for built components
    commands: list[StepCommands]
    cache: str = ""  # what the binary cache does with it (choice.Choice.describe), "" no cache
    download: int | None = None  # bytes of its artifact when the binary cache serves it

    @property
    def name(self) -> str:
        return self.component.name


@dataclass(frozen=True)
class Plan:
    stack: Stack
    settings: Settings
    host: HostSnapshot
    components: list[PlannedComponent]
    cost: Cost | None = None  # cost.py: disk, CPU-hours, wall time, risky steps
    roads: tuple[Road, ...] = field(default_factory=tuple)  # from source, on a base
    # on a --base: its GPU libraries no recipe names, read for the targets (baseaudit.py)
    base_others: tuple[Audited, ...] = ()
    # both roads to each profile of stack.toml (--profile NAME)
    profiles: tuple[ProfileRoads, ...] = field(default_factory=tuple)


def component_jobs(component: Component, host: HostSnapshot, settings: Settings,
                   launch: Launch | None = None) -> dict[str, JobCount]:
    """Job counts to show: compile always, and each other kind the recipe sizes or uses."""
    if not component.builds:
        return {}
    counts = jobs_by_kind(component.recipe.resources, host, swap_weight=settings.swap_weight,
                        cap=settings.jobs)
    counts = split_jobs(launch, component, counts, host, swap_weight=settings.swap_weight,
                        cap=settings.jobs)
    return {kind: count for kind, count in counts.items()
            if kind == "compile" or JOB_MEMORY_KEYS[kind] in component.recipe.resources
            or any(f"jobs.{kind}" in a for a in component.job_args)}


def build_plan(stack: Stack, settings: Settings, host: HostSnapshot,
               state_of: Callable[[Component], str] = lambda c: "pending",
               pending: Collection[str] | None = None,
               cache_of: Callable[[Component], str] = lambda c: "",
               requested: Iterable[str] = (),
               served: Mapping[str, int] | None = None) -> Plan:
    """``pending``: the components a build would still run (default: every built one);
    ``cache_of``: what the binary cache does with each (planlines.PlanLines); ``requested``:
    what the user asked for, for the two roads' estimate; ``served``: the components the
    binary cache installs, with their download in bytes (their state is "from cache", and
    they cost a download, not a build)."""
    served = served or {}
    planned = []
    for component in stack.selected():
        jobs = component_jobs(component, host, settings, stack.launch)
        counts = {kind: 1 for kind in JOB_MEMORY_KEYS} | {k: j.jobs for k, j in jobs.items()}
        state = state_of(component)
        download = served.get(component.name) if state != "done" else None
        planned.append(PlannedComponent(component, FROM_CACHE if download is not None
                                        else state, jobs,
                                        commands_for(stack, component, counts,
                                                     settings.mirror),
                                        cache_of(component), download))
    pending = [c.name for c in stack.selected() if c.builds] if pending is None else pending
    cached = {p.name: p.download for p in planned if p.download is not None}
    total = estimate(stack, host, [n for n in pending if n not in cached],
                     swap_weight=settings.swap_weight, cap=settings.jobs,
                     from_cache=cached)
    others = (tuple(unclaimed(stack.base.path, stack.recipes.recipes, stack.targets,
                              stack.base.memo, stack.base.audit))
              if stack.base is not None else ())
    return Plan(stack, settings, host, planned, total, roads(stack, requested),
                base_others=others, profiles=profile_roads(stack))


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        return [f"{a}={b}" for a, b in value]  # mirror rules
    return [str(v) for v in value] if isinstance(value, (tuple, list)) else str(value)


def to_json(plan: Plan) -> dict[str, Any]:
    stack = plan.stack
    settings = {o.name: {"value": _json_value(plan.settings.value(o.name)),
                         "source": plan.settings.source(o.name)} for o in OPTIONS}
    settings["prefix"] = {"value": str(stack.prefix),
                          "source": plan.settings.source("prefix")
                          if plan.settings.prefix is not None else "recipes (stack.prefix)"}
    settings["target"] = {"value": [str(t) for t in stack.targets],
                          "source": plan.settings.source("target")
                          if plan.settings.target is not None else "recipes (stack.targets)"}
    for name, effective in effective_settings(stack.launch, stack.selected()).items():
        settings[name]["effective"] = effective
    components = []
    for p in plan.components:
        c = p.component
        components.append({
            "name": c.name,
            "summary": c.recipe.summary,
            "kind": c.recipe.kind,
            "recipe": str(c.recipe.file),
            # "overlay": the user's recipe (or patch series) replaces the shipped one
            "recipe_source": stack.recipes.source_of(c.name),
            "depends": list(c.depends),
            "state": p.state,
            "source": {"url": c.fetch_url, "recipe_url": c.url, "ref": c.ref,
                       "submodules": c.submodules, "checkout": c.checkout,
                       "dir": str(c.source_dir)},
            "patches": [str(patch.path) for patch in c.patches],
            "steps": list(steps_of(c)),
            "configure_args": [] if not c.builds else
            next((list(sc.argvs[0]) for sc in p.commands if sc.step == "configure" and sc.argvs),
                 []),
            "env": dict(c.env),
            "jobs": {kind: {"jobs": jc.jobs, "reason": jc.reason} for kind, jc in p.jobs.items()},
            # per language: the recipe's own launcher, the user's `launcher`, or rocbuild's
            "launchers": {lang: {"launcher": choice.launcher or None, "source": choice.source}
                          for lang, choice in choices(stack.launch, c).items()}
            if c.builds else None,
            "fingerprint": c.fingerprint,
            "cache": p.cache or None,
            "download": p.download,  # bytes, when the binary cache serves it
            # files whose CMake code the configure runs (cmakecode.py: shown, not refused)
            "cmake_code": cmakecode.code_files(c.build_args),
            "build_dir": str(c.build_dir) if c.builds else None,
        })
    return {
        "rocbuild_plan": 1,
        "stack": stack.recipes.stack.name,
        "version": stack.version,
        "prefix": str(stack.prefix),
        "targets": [str(t) for t in stack.targets],
        "workdir": str(stack.workdir),
        "host": {"cpus": plan.host.cpus, "mem_available": plan.host.mem_available,
                 "swap_free": plan.host.swap_free},
        "settings": settings,
        "overlay": {"folder": str(stack.recipes.overlay),
                    "recipes": sorted(stack.recipes.overlaid),
                    "patches": sorted(n for n in stack.recipes.recipes
                                      if stack.recipes.patches_dir_of(n)
                                      != stack.recipes.patches_dir)}
        if stack.recipes.overlay is not None else None,
        "components": components,
        "cost": plan.cost.to_json() if plan.cost else None,
        "base": _base_json(stack, plan.base_others),
        "roads": {"full": plan.roads[0].to_json(), "base": plan.roads[1].to_json()}
        if plan.roads else None,
        # the profile this plan's default set comes from, and both roads to every profile
        "profile": stack.profile,
        "profiles": {p.name: p.to_json() for p in plan.profiles},
    }


def _base_json(stack: Stack, others: tuple[Audited, ...]) -> dict[str, Any] | None:
    """The installed ROCm the stack builds on: what is taken from it (with the files that
    showed it) and why each other component it knows is built."""
    base = stack.base
    if base is None:
        return None
    return {"path": str(base.path), "version": base.version,
            "taken": {n: [str(p.relative_to(base.path)) for p in t.files]
                      for n, t in base.taken.items()},
            "built": {n: nt.reason for n, nt in base.not_taken.items()},
            # each taken component's own version (a package database's), else the base's
            "versions": {n: base.version_of(n) for n in base.taken},
            # the GPU libraries read for the targets: the recipes' ([gpu] libraries), then
            # the others (no recipe: rocbuild can only name them)
            "audit": [{"component": a.component or None, "library": a.library,
                       "carries": a.text, "lacking": list(a.lacking),
                       # the targets met only by a generic code object: {"gfx906": "gfx9-generic"}
                       "via": dict(a.via),
                       # what happens to it (baseaudit.action): ok, built, taken, base-only,
                       # outside (its component is not in this run), no-recipe
                       "action": action(a, stack.recipes.recipes, base.run, base.taken)}
                      for a in (*base.audit, *others)],
            "packages": [{"component": h.component, "packages": list(h.packages),
                          "saves": list(h.saves)} for h in base.hints]}
