"""What a build will cost before it starts: disk, CPU-hours, expected wall time, risky steps.

One model for every command that speaks of it: ``plan`` shows it (and ``plan --json`` under
``"cost"``), ``doctor`` compares ``disk_needed`` with the free space, preflight refuses a
build on the same figure. All figures come from the recipes' ``[resources]`` estimates (disk,
source_disk, cpu_hours, link_mem, tensile_mem) and the host snapshot of resources.py; only
the components the next build builds count (a stale one too); those the binary cache serves
cost their download instead.
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rocbuild.model import wording
from rocbuild.model.graph import Component, Stack
from rocbuild.model.recipes import RecipeSet
from rocbuild.model.resources import (
    DEFAULT_JOB_MEM,
    DEFAULT_RESERVE,
    GIB,
    JOB_MEMORY_KEYS,
    HostSnapshot,
    format_bytes,
    format_gib,
    jobs_by_kind,
)

PREFIX_SHARE = 0.25  # rocbuild rule of thumb: an install takes about a quarter of its build tree
DEFAULT_SOURCE_DISK = 200 << 20  # a checkout whose recipe gives no source_disk (estimate)
RISKY_LINK_MEM = 4 * GIB  # TheRock: "4-8 GB of RAM per link job" for LLVM


@dataclass(frozen=True)
class DiskNeed:
    sources: int  # checkouts and their cache, in the workdir
    build: int  # build trees, in the workdir
    prefix: int  # the installs

    @property
    def workdir(self) -> int:
        return self.sources + self.build

    @property
    def total(self) -> int:
        """The workdir and the prefix: what `plan`'s roads and doctor (one disk) speak of."""
        return self.workdir + self.prefix


@dataclass(frozen=True)
class MemoryNeed:
    """The least memory a build of the stack needs: its largest single job (one at a time)
    with the reserve job sizing keeps free (resources.memory_budget)."""

    job: int  # bytes of that job
    component: str
    kind: str  # compile, link or tensile
    reserve: int = DEFAULT_RESERVE

    @property
    def total(self) -> int:
        return self.job + self.reserve

    def text(self) -> str:
        return (f"at least {format_gib(self.total)} free ({self.component}'s {self.kind} jobs "
                f"take about {format_gib(self.job)} each, plus {format_gib(self.reserve)} "
                "kept free); more runs more jobs at once")


def disk_of(recipes: RecipeSet, built: Iterable[str], checkouts: Iterable[str]) -> DiskNeed:
    """The one disk rule: the build trees of ``built``, the checkouts of ``checkouts`` (their
    owners' source_disk) and the installs (a share of the build trees). `plan`'s cost, its
    two roads, doctor and preflight all come here, so they give one figure."""
    build = sum(int(recipes.recipes[n].resources.get("disk", 0)) for n in built)
    sources = sum(int(recipes.recipes[o].resources.get("source_disk", DEFAULT_SOURCE_DISK))
                  for o in set(checkouts))
    return DiskNeed(sources=sources, build=build, prefix=int(build * PREFIX_SHARE))


def memory_need(recipes: RecipeSet, built: Iterable[str]) -> MemoryNeed | None:
    """The largest job of ``built`` by its recipe's memory per job (compile_mem, link_mem,
    tensile_mem; the default compile job when a recipe gives none); None for nothing built."""
    best: MemoryNeed | None = None
    for name in built:
        res = recipes.recipes[name].resources
        for kind, key in JOB_MEMORY_KEYS.items():
            if key not in res and kind != "compile":
                continue
            amount = int(res.get(key, DEFAULT_JOB_MEM))
            if best is None or amount > best.job:
                best = MemoryNeed(amount, name, kind)
    return best


@dataclass(frozen=True)
class Risk:
    component: str
    step: str
    why: str


@dataclass(frozen=True)
class Cost:
    pending: tuple[str, ...]
    disk: DiskNeed
    cpu_hours: float
    wall_hours: float
    wall_basis: str
    risks: tuple[Risk, ...] = field(default_factory=tuple)
    # the components the binary cache serves (not built, not in ``pending``): their download
    from_cache: tuple[str, ...] = ()
    download: int = 0
    memory: MemoryNeed | None = None  # the least memory the pending builds need

    def to_json(self) -> dict[str, Any]:
        return {
            "pending": list(self.pending),
            "from_cache": list(self.from_cache),
            "download": self.download,
            "disk": {"sources": self.disk.sources, "build": self.disk.build,
                     "workdir": self.disk.workdir, "prefix": self.disk.prefix},
            "cpu_hours": round(self.cpu_hours, 2),
            "wall_hours": round(self.wall_hours, 2),
            "wall_basis": self.wall_basis,
            "risky_steps": [{"component": r.component, "step": r.step, "why": r.why}
                            for r in self.risks],
            "memory": None if self.memory is None else {
                "least": self.memory.total, "job": self.memory.job,
                "component": self.memory.component, "kind": self.memory.kind},
        }


def pending_components(stack: Stack, runs: Mapping[tuple[str, str], bool]) -> list[Component]:
    """Built components whose install the next build runs (what a build would still do).
    ``runs``: the up-to-date rule's ``next_runs``, which follows a step that runs again to
    the steps after it: a changed recipe leaves the install's own stamp current, yet the
    component is built again."""
    return [c for c in stack.selected() if c.builds and runs.get((c.name, "install"), True)]


def disk_needed(stack: Stack, pending: Collection[str]) -> DiskNeed:
    """Disk for the ``pending`` components: their build trees, their installs and the
    checkouts of the stack that are not there yet (a source-only one such as Tensile's too:
    the build fetches it), by ``disk_of``."""
    owners = {c.checkout for c in stack.selected()} if pending else set()
    return disk_of(stack.recipes, pending,
                   [o for o in owners if o in stack.components
                    and not stack.components[o].checkout_dir.is_dir()])


def _risks(comp: Component, jobs: Mapping[str, int]) -> list[Risk]:
    res, out = comp.recipe.resources, []
    link_mem = int(res.get("link_mem", 0))
    if link_mem >= RISKY_LINK_MEM:
        out.append(Risk(comp.name, "compile", f"links take about {format_gib(link_mem)} each, "
                        f"{jobs['link']} at once; an OOM kill here is the usual night failure"))
    if "tensile_mem" in res:
        out.append(Risk(comp.name, "compile", f"the Tensile step runs {jobs['tensile']} "
                        f"workers of about {format_gib(res['tensile_mem'])} each and shows no "
                        "progress for a long time"))
    return out


def estimate(stack: Stack, host: HostSnapshot, pending: Collection[str], *,
             swap_weight: float, cap: int | None,
             from_cache: Mapping[str, int] | None = None) -> Cost:
    """The cost of building ``pending``; ``from_cache``: the components the binary cache
    serves instead, with their download in bytes (a download, no build cost)."""
    from_cache = from_cache or {}
    cpu = wall = 0.0
    risks: list[Risk] = []
    names = [c.name for c in stack.selected() if c.name in pending]
    for name in names:
        comp = stack.components[name]
        hours = float(comp.recipe.resources.get("cpu_hours", 0.0))
        counts = jobs_by_kind(comp.recipe.resources, host, swap_weight=swap_weight, cap=cap)
        jobs = {kind: count.jobs for kind, count in counts.items()}
        cpu += hours
        wall += hours / max(jobs["compile"], 1)
        risks += _risks(comp, jobs)
    basis = (f"components one after another, each with its compile jobs on {host.cpu_reason} "
             "(recipes' cpu_hours estimates)")
    return Cost(pending=tuple(names), disk=disk_needed(stack, names), cpu_hours=cpu,
                wall_hours=wall, wall_basis=basis, risks=tuple(risks),
                from_cache=tuple(n for n in stack.order if n in from_cache),
                download=sum(from_cache.values()), memory=memory_need(stack.recipes, names))


def hours_text(hours: float) -> str:
    """"about 12 min" or "about 3.5 h" ("under a minute" for next to nothing)."""
    return wording.duration(hours * 3600)


def summary_lines(cost: Cost) -> list[str]:
    """The plain-text block `plan` prints under its table (each line under 80 columns)."""
    d = cost.disk
    cached = ([f"from the binary cache: {wording.count(len(cost.from_cache), 'component')}, "
               f"{format_bytes(cost.download)} to download, not built"]
              if cost.from_cache else [])
    if not cost.pending:
        return cached or ["cost: nothing is pending, so nothing is built"]
    lines = [*cached, f"cost of the {wording.count(len(cost.pending), 'pending component')} "
             "(recipe estimates):",
             f"  disk:  {format_gib(d.workdir)} in the workdir ({format_gib(d.sources)} "
             f"sources, {format_gib(d.build)} build trees)",
             f"         {format_gib(d.prefix)} in the prefix ({format_gib(d.total)} in all)",
             *(textwrap.wrap(cost.memory.text(), width=79, initial_indent="  memory: ",
                             subsequent_indent=" " * 10) if cost.memory else []),
             f"  CPU:   {cost.cpu_hours:.1f} CPU-hours",
             f"  wall:  {hours_text(cost.wall_hours)} on this host"]
    for risk in cost.risks:
        lines += textwrap.wrap(f"{risk.component} {risk.step}: {risk.why}", width=79,
                               initial_indent="  risky: ", subsequent_indent=" " * 9)
    return lines
