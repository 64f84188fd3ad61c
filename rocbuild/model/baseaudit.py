"""The base audit as plan and doctor say it: which of a base's GPU libraries carry the targets,
which lack them, and whether rocbuild builds each one or can only name it.

``load_base`` reads the libraries the recipes' [gpu] tables name (``Base.audit``) and builds a
component whose library lacks a target; ``unclaimed`` reads the base's other libraries with
GPU code (rocSPARSE, RCCL, MIOpen without a recipe here), which rocbuild can only name.
Both read bundle headers only, through the base's ``CodeMemo``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
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


def unclaimed(base: Base, recipes: Mapping[str, Recipe], targets: Sequence[TargetId],
              memo: CodeMemo | None = None) -> list[Audited]:
    """The base's libraries with offload bundles (in lib/ and its multiarch folders, not
    below) that no recipe names, read for the targets: rocbuild can only name them."""
    memo = memo or base.memo or CodeMemo()
    patterns = [p for r in recipes.values() for p in library_patterns(r)]
    found: list[Audited] = []
    seen: set[Path] = set()
    for folder in (base.path / "lib", *multiarch_dirs(base.path)):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for path in entries:
            if ".so" not in path.name or path.is_symlink() or not path.is_file():
                continue
            real = path.resolve()
            if real in seen or any(name_matches(path.name, p) for p in patterns) or \
                    not _has_fatbin(path):
                continue
            seen.add(real)
            code = memo.code_of(path)
            lacking = tuple(str(t) for t in code.lacking(targets)) if not code.error else \
                tuple(str(t) for t in targets)
            found.append(Audited("", str(path.relative_to(base.path)), code.describe(targets),
                                 lacking))
    return found


@dataclass(frozen=True)
class AuditLine:
    ok: bool
    text: str


def audit_lines(base: Base, recipes: Mapping[str, Recipe], targets: Sequence[TargetId],
                others: Sequence[Audited]) -> list[AuditLine]:
    """One line per library read: what it carries, and for one that lacks a target, whether
    rocbuild builds it (its component is built), cannot (a required component: always the
    base's) or has no recipe for it."""
    wanted = ", ".join(map(str, targets))
    lines = []
    for item in base.audit:
        recipe = recipes.get(item.component)
        if item.ok:
            lines.append(AuditLine(True, f"{item.library} ({item.component}): {item.text}"))
        elif recipe is not None and recipe.base_required:
            lines.append(AuditLine(False, f"{item.library} ({item.component}): {item.text}; "
                                          f"{item.component} is always the base's, so this "
                                          f"base cannot run {', '.join(item.lacking)} there"))
        else:
            lines.append(AuditLine(False, f"{item.library} ({item.component}): {item.text}; "
                                          f"rocbuild builds {item.component} for {wanted}"))
    for item in others:
        if item.ok:
            lines.append(AuditLine(True, f"{item.library}: {item.text}"))
        else:
            lines.append(AuditLine(False, f"{item.library}: {item.text}; rocbuild has no "
                                          "recipe for it"))
    return lines
