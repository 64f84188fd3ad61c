"""`verify` on a base: the base audit that plan and doctor print (``model/baseaudit.py``),
worded for the prefix being verified: which of the installed ROCm's GPU libraries lack code for
the targets, and whether this prefix has rocbuild's own build of each (its build-info's
components), rocbuild can build it, or has no recipe for it.

The same reads and the same rule as plan's audit (``base.audit_base``, ``baseaudit.unclaimed``
and ``baseaudit.action``), so verify never calls a base library buildable that plan took, or
the other way round: each recipe's [gpu] libraries and [base] tensile set, and the base's
other libraries with offload bundles, read by their bundle headers (through the workdir's
record when there is one). A generic code object that covers a target counts (Debian's
rocSOLVER: gfx9-generic for gfx906). These are findings, not the verdict on the prefix: a
library rocbuild rebuilt into the prefix is found there first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.model.base import audit_base
from rocbuild.model.baseaudit import BASE_ONLY, BUILT, OUTSIDE, action, builds_it, unclaimed
from rocbuild.model.codeaudit import CodeMemo
from rocbuild.model.graph import build_order, profile_sets
from rocbuild.model.recipes import RecipeSet, load_recipes
from rocbuild.model.targets import TargetId


@dataclass(frozen=True)
class BaseFinding:
    library: str  # relative to the base, as plan's audit names it: lib/librocblas.so.4
    lacks: str  # what is missing, e.g. "gfx906" or "gfx906 (Tensile set)"
    recipe: str | None  # the component rocbuild builds it from, None when it has no recipe
    action: str = BUILT  # baseaudit.action, with this prefix's components as the run
    how: str = ""  # for a component outside this prefix: the profile or command that builds it
    known: bool = True  # whether the prefix's components are known (its build-info)

    @property
    def buildable(self) -> bool:
        return self.recipe is not None and self.action != BASE_ONLY

    def text(self) -> str:
        if self.recipe is None:
            how = "rocbuild has no recipe for it"
        elif self.action == BASE_ONLY:
            how = f"{self.recipe} is always the base's, so this base cannot run it there"
        elif self.action == OUTSIDE:
            how = (f"rocbuild builds it (component {self.recipe}), which this prefix does not "
                   f"hold: {self.how} builds it")
        elif self.known:
            how = f"this prefix holds rocbuild's build of it (component {self.recipe})"
        else:
            how = f"rocbuild builds it (component {self.recipe})"
        return f"base {self.library} has no code for {self.lacks}: {how}"


def scan_base(base: Path, targets: tuple[TargetId, ...], recipes: RecipeSet,
              components: frozenset[str] | None = None,
              memo: CodeMemo | None = None) -> list[BaseFinding]:
    """One finding per base library (or Tensile set) without code for the targets.
    ``components``: what the prefix holds (its build-info), None when not known."""
    memo = memo or CodeMemo()
    every = build_order(recipes, sorted(recipes.recipes))
    audited = audit_base(base, recipes.recipes, every, targets, memo)
    audited += unclaimed(base, recipes.recipes, targets, memo, audited)
    profiles = profile_sets(recipes)
    findings = []
    for item in audited:
        if item.ok:
            continue
        lacks = ", ".join(item.lacking) + (" (Tensile set)" if item.tensile else "")
        what = action(item, recipes.recipes, components)
        findings.append(BaseFinding(item.library, lacks, item.component or None, what,
                                    builds_it(item.component, profiles) if what == OUTSIDE
                                    else "", components is not None))
    return findings


def to_json(base: Path, findings: list[BaseFinding]) -> dict[str, Any]:
    return {"path": str(base),
            "findings": [{"library": f.library, "lacks": f.lacks, "recipe": f.recipe,
                          "buildable": f.buildable, "action": f.action}
                         for f in findings]}


def scan_for(base: Path | None, targets: tuple[TargetId, ...], recipes_dir: Path,
             overlay: Path | None = None, components: Mapping[str, Any] | None = None,
             memo: CodeMemo | None = None) -> tuple[Path, list[BaseFinding]] | None:
    """The base scan `verify` adds, or None when there is no base (see cmd_verify's
    base_to_scan: --base, else the base the prefix's build-info names) or the recipes do
    not load (the prefix's own verdict does not depend on them)."""
    if base is None:
        return None
    try:
        recipes = load_recipes(recipes_dir, overlay)
    except ConfigError:
        return None
    held = frozenset(components) if components is not None else None
    return base, scan_base(base, targets, recipes, held, memo)
