"""The two roads, estimated from the recipes' [resources] so `plan` lets the user choose: the
full from-source build, and the fast road on AMD's installed ROCm 6.4 (``--base``), which
builds only what the base lacks for the targets.

Without a base at hand the fast road is an estimate from the recipes alone: every component
with a ``[base]`` table is assumed taken, except those whose target files AMD does not ship
(``base.tensile``: rocBLAS has no gfx906 Tensile set in 6.4) and what depends on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rocbuild.model import base
from rocbuild.model.cost import DiskNeed, disk_of
from rocbuild.model.graph import (
    Stack,
    build_order,
    default_request,
    direct_deps,
    drop_unused_sources,
)
from rocbuild.model.recipes import RecipeSet


@dataclass(frozen=True)
class Road:
    name: str
    components: tuple[str, ...]  # what is built (source-only components not counted)
    cpu_hours: float
    need: DiskNeed  # from nothing: every checkout, build tree and install (cost.disk_of)
    measured: bool  # True: from a real base; False: assumed from the recipes

    @property
    def disk(self) -> int:
        """Workdir and prefix, the figure plan's cost and doctor give for the same build."""
        return self.need.total

    def to_json(self) -> dict[str, object]:
        return {"components": list(self.components), "cpu_hours": round(self.cpu_hours, 2),
                "disk": self.disk, "disk_workdir": self.need.workdir,
                "disk_prefix": self.need.prefix, "measured": self.measured}


def _road(recipes: RecipeSet, name: str, order: Iterable[str], measured: bool) -> Road:
    order = tuple(order)
    built = tuple(n for n in order if recipes.recipes[n].builds)
    checkouts = {recipes.recipes[n].source.from_component or n for n in order}
    return Road(name, built, sum(recipes.recipes[n].resources.get("cpu_hours", 0.0)
                                 for n in built),
                disk_of(recipes, built, checkouts), measured)


def assumed_taken(recipes: RecipeSet, order: Iterable[str]) -> set[str]:
    """What AMD's 6.4 packages would provide, judged from the recipes alone (the rules of
    base.load_base: a required component is always the base's)."""
    taken: set[str] = set()
    for name in order:
        recipe = recipes.recipes[name]
        # AMD's 6.4 lacks the Tensile set of the targets rocbuild is for (module docstring)
        missing = [recipe.base_tensile] if recipe.base_tensile else []
        if recipe.base_provides and not missing and base.why_built(
                recipe, direct_deps(recipe), taken, recipes.recipes, missing) is None:
            taken.add(name)
    return taken


def roads(stack: Stack, requested: Iterable[str] = ()) -> tuple[Road, Road]:
    """(full road, base road) for the components the plan covers."""
    recipes = stack.recipes
    wanted = list(requested) or default_request(recipes, stack.profile)
    if stack.base is not None and not list(requested):
        full = _road(recipes, "from source", build_order(recipes, wanted), measured=True)
        return full, _road(recipes, f"on base {stack.base.path}", stack.order, measured=True)
    return roads_of(stack, wanted)


def roads_of(stack: Stack, wanted: Iterable[str]) -> tuple[Road, Road]:
    """(full road, base road) for ``wanted`` and what it needs: on the stack's --base when it
    has one (what the base provides was judged over every recipe, base.load_base), else on
    AMD's ROCm 6.4 as the recipes alone suggest (assumed_taken)."""
    recipes = stack.recipes
    wanted = list(wanted)
    full_order = build_order(recipes, wanted)
    full = _road(recipes, "from source", full_order, measured=True)
    if stack.base is not None:
        # what the base provides of every recipe (the run's ``taken`` is cut to its closure)
        provided = stack.base.provided if stack.base.provided is not None else stack.base.taken
        cut = build_order(recipes, wanted, taken=provided)
        return full, _road(recipes, f"on base {stack.base.path}",
                           drop_unused_sources(recipes, cut), measured=True)
    cut = build_order(recipes, wanted, taken=assumed_taken(recipes, full_order))
    return full, _road(recipes, "on AMD's ROCm 6.4 (--base)", drop_unused_sources(recipes, cut),
                       measured=False)


@dataclass(frozen=True)
class ProfileRoads:
    """One profile of stack.toml with the cost of both roads to it."""

    name: str
    summary: str
    full: Road
    base: Road

    def to_json(self) -> dict[str, object]:
        return {"summary": self.summary, "full": self.full.to_json(),
                "base": self.base.to_json()}


def profile_roads(stack: Stack) -> tuple[ProfileRoads, ...]:
    """Both roads to each profile stack.toml declares, so `plan` lets the user compare them."""
    return tuple(ProfileRoads(p.name, p.summary, *roads_of(stack, p.components))
                 for p in stack.recipes.stack.profiles.values())
