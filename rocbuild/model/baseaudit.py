"""The base audit as plan, doctor and verify say it: which of a base's GPU libraries carry the
targets, which lack them, and what happens to each one that lacks one.

``load_base`` reads the libraries the recipes' [gpu] tables name and the [base] tensile
folders (``Base.audit``), for every recipe, and builds a component of the run whose library
lacks a target; ``unclaimed`` reads the base's other libraries with GPU code. Both read
bundle headers only, through the base's ``CodeMemo``. The run's components decide what is
built: a library of a recipe outside the run is named, with the profile or command that
builds it, never built (``action``). A generic code object that covers a target counts
(gfx9-generic for gfx906: targets.GENERIC_OF), and the line says so.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocbuild.model.base import Audited, Base, multiarch_dirs
from rocbuild.model.codeaudit import CodeMemo
from rocbuild.model.elf import FormatError, NotElf, UnsupportedElf, open_source, parse_sections
from rocbuild.model.recipes import Recipe, provides_alternatives
from rocbuild.model.targets import TargetId


def library_patterns(recipe: Recipe) -> list[str]:
    """The file names (globs) that show ``recipe``'s libraries: its ``[gpu] libraries`` and
    the shared libraries among its ``[base] provides``, each alternative's last part."""
    names = []
    for entry in (*recipe.gpu_libraries, *recipe.base_provides):
        for pattern in provides_alternatives(entry):
            name = pattern.rsplit("/", 1)[-1]
            if ".so" in name and name not in names:
                names.append(name)
    return names


def name_matches(name: str, pattern: str) -> bool:
    """A library's file name against a recipe's: the name itself or, as for librocblas.so.4,
    the start of the real file's name (librocblas.so.4.4.60403)."""
    return fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(name, pattern + ".*")


def _has_fatbin(path: Path) -> bool:
    try:
        with open_source(path) as src:
            return ".hip_fatbin" in parse_sections(src)
    except (NotElf, UnsupportedElf, FormatError, OSError):
        return False


def unclaimed(root: Path, recipes: Mapping[str, Recipe], targets: Sequence[TargetId],
              memo: CodeMemo | None, audited: Sequence[Audited] = ()) -> list[Audited]:
    """The base's libraries with offload bundles (in lib/ and its multiarch folders, not
    below) that the audit did not read (``audited``), read for the targets. Each is named
    with the recipe whose library names match it (librocrand.so.1.1.60403 without the
    librocsolver.so.1 link the recipe reads), or none: rocbuild has no recipe for it."""
    memo = memo or CodeMemo()
    owners = [(p, r.name) for r in recipes.values() for p in library_patterns(r)]
    seen = {(root / a.library).resolve() for a in audited}
    found: list[Audited] = []
    for folder in (root / "lib", *multiarch_dirs(root)):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for path in entries:
            if ".so" not in path.name or path.is_symlink() or not path.is_file():
                continue
            real = path.resolve()
            if real in seen or not _has_fatbin(path):
                continue
            seen.add(real)
            owner = next((name for pattern, name in owners if name_matches(path.name, pattern)),
                         "")
            code = memo.code_of(path)
            lacking = tuple(str(t) for t in code.lacking(targets)) if not code.error else \
                tuple(str(t) for t in targets)
            found.append(Audited(owner, str(path.relative_to(root)), code.describe(targets),
                                 lacking, tuple(code.via(targets).items())))
    return found


# What happens to a library the audit read (``action``): it carries the targets; its
# component is built by this run; it is taken anyway (another file of its component showed
# it); its component is always the base's (required); its component is outside this run;
# rocbuild has no recipe for it
OK, BUILT, TAKEN, BASE_ONLY, OUTSIDE, NO_RECIPE = (
    "ok", "built", "taken", "base-only", "outside", "no-recipe")


def action(item: Audited, recipes: Mapping[str, Recipe], run: Container[str] | None,
           taken: Container[str] = ()) -> str:
    """The one rule plan, doctor and verify's base check word their lines by. ``run``: the
    components of the run (``Base.run``; for verify, the prefix's), None when not known;
    ``taken``: what the run takes from the base."""
    if item.ok:
        return OK
    recipe = recipes.get(item.component) if item.component else None
    if recipe is None:
        return NO_RECIPE
    if recipe.base_required:
        return BASE_ONLY
    if run is not None and item.component not in run:
        return OUTSIDE
    return TAKEN if item.component in taken else BUILT


def builds_it(component: str, profiles: Mapping[str, frozenset[str]]) -> str:
    """How the user builds a component outside this run: the profiles whose set holds it
    ("--profile pytorch"), else the command for it alone."""
    names = [name for name, members in profiles.items() if component in members]
    return " or ".join(f"--profile {n}" for n in names) or f"`rocbuild build {component}`"


@dataclass(frozen=True)
class AuditLine:
    ok: bool
    text: str
    action: str = OK


def audit_lines(base: Base, recipes: Mapping[str, Recipe], targets: Sequence[TargetId],
                others: Sequence[Audited],
                profiles: Mapping[str, frozenset[str]] | None = None) -> list[AuditLine]:
    """One line per library read: what it carries, and for one that lacks a target what
    happens (``action``): rocbuild builds it in this run, its component is outside the run
    (and which profile builds it), it cannot be rebuilt (a required component: always the
    base's), or rocbuild has no recipe for it."""
    wanted = ", ".join(map(str, targets))
    lines = []
    for item in (*base.audit, *others):
        what = action(item, recipes, base.run, base.taken)
        name = f"{item.library} ({item.component})" if item.component else item.library
        head = f"{name}: {item.text}"
        how = builds_it(item.component, profiles or {})
        tail = {
            OK: "",
            BUILT: f"rocbuild builds {item.component} for {wanted}",
            TAKEN: f"{item.component} is taken from the base all the same (the files its "
                   f"recipe reads carry {wanted})",
            BASE_ONLY: f"{item.component} is always the base's, so this base cannot run "
                       f"{', '.join(item.lacking)} there",
            OUTSIDE: f"{item.component} is not in this run: {how} builds it for {wanted}",
            NO_RECIPE: "rocbuild has no recipe for it",
        }[what]
        lines.append(AuditLine(what == OK, f"{head}; {tail}" if tail else head, what))
    return lines
