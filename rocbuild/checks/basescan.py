"""`verify` on a base: which of the installed ROCm's libraries lack code for the targets, and
whether rocbuild can build each one (a recipe's ``[base] provides`` names it).

In AMD's 6.4 that is expected for rocBLAS' Tensile files (no gfx906 set, ROCm/ROCm#4625) and
may hold for other libraries (in ROCm 7.2 rocRAND, rocFFT and rocSPARSE carry no gfx906 code).
The scan is verify.py's own (``verify_prefix``); these are findings, not the verdict on the
prefix: a library rocbuild rebuilt into the prefix is found there first.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.checks.verify import Verdict, verify_prefix
from rocbuild.model.recipes import Recipe, load_recipes, provides_alternatives
from rocbuild.model.targets import TargetId


@dataclass(frozen=True)
class BaseFinding:
    library: str  # relative to the base, e.g. lib/librocblas.so.4.4.60403
    lacks: str  # what is missing, e.g. "gfx906" or "gfx906 Tensile set"
    recipe: str | None  # the component rocbuild builds it from, None when it has no recipe

    @property
    def buildable(self) -> bool:
        return self.recipe is not None

    def text(self) -> str:
        how = (f"rocbuild builds it (component {self.recipe})" if self.recipe
               else "rocbuild has no recipe for it")
        return f"base {self.library} has no code for {self.lacks}: {how}"


def _provides(entry: str, rel: str) -> bool:
    """A provides entry names the file or, as for lib/librocblas.so.4, the start of the real
    file's name (librocblas.so.4.4.60403): the scan skips the symlinks in between. An entry
    may hold alternatives ("a | b")."""
    return any(fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + ".*")
               for pattern in provides_alternatives(entry))


def recipe_for(rel: str, recipes: Mapping[str, Recipe]) -> str | None:
    for recipe in recipes.values():
        if any(_provides(p, rel) for p in recipe.base_provides):
            return recipe.name
        if recipe.base_tensile and any(
                fnmatch.fnmatch(rel, folder) or fnmatch.fnmatch(rel, folder + "/*")
                for folder in provides_alternatives(recipe.base_tensile)):
            return recipe.name
    return None


def scan_base(base: Path, targets: tuple[TargetId, ...],
              recipes: Mapping[str, Recipe]) -> list[BaseFinding]:
    """One finding per base library (or Tensile set) without code for the targets."""
    report = verify_prefix(base, targets)
    wanted = ", ".join(str(t) for t in targets)
    findings = []
    for result in report.files:
        if result.verdict is Verdict.PASS:
            continue
        rel = str(result.path.relative_to(base))
        findings.append(BaseFinding(rel, wanted, recipe_for(rel, recipes)))
    for tensile in report.tensile:
        if not tensile.ok:
            rel = str(tensile.library.relative_to(base))
            findings.append(BaseFinding(rel, f"{tensile.processor} (Tensile set)",
                                        recipe_for(rel, recipes)))
    return findings


def to_json(base: Path, findings: list[BaseFinding]) -> dict[str, Any]:
    return {"path": str(base),
            "findings": [{"library": f.library, "lacks": f.lacks, "recipe": f.recipe,
                          "buildable": f.buildable} for f in findings]}


def scan_for(base: Path | None, targets: tuple[TargetId, ...],
             recipes_dir: Path) -> tuple[Path, list[BaseFinding]] | None:
    """The base scan `verify` adds, or None when there is no base (see cmd_verify's
    base_to_scan: --base, else the base the prefix's build-info names)."""
    if base is None:
        return None
    return base, scan_base(base, targets, load_recipes(recipes_dir).recipes)
