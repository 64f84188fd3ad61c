"""Recipe lint: render every recipe for several target lists, flag weak spots, and (with real
checkouts) prove that each ``-D`` option a recipe passes is read by some CMake file.

A recipe error (bad key, undefined template variable, bad target, cycle) is a ConfigError
raised by the loader, as everywhere else. Everything found here is a ``Finding``: an
``error`` fails the lint (an option nobody reads), a ``warning`` does not (a missing summary).
No subprocess; the source check only reads files.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rocbuild.model import buildsystems
from rocbuild.model.graph import Component, Stack, load_stack
from rocbuild.model.recipes import load_recipes
from rocbuild.model.settings import Settings
from rocbuild.model.targets import parse_target_list

TWO_TARGETS = "gfx906,gfx90a"
RESOURCE_ESTIMATES = ("disk", "cpu_hours")  # what the README's disk/time table is built from

_WORD_RE = re.compile(rb"[A-Za-z0-9_]+")
# A whole-line comment (`# set(FOO ON)`) does not read FOO. Comments after code are kept:
# telling `#` in a quoted string from a comment would need a CMake tokenizer.
_COMMENT_LINE_RE = re.compile(rb"^[ \t]*#(?!\[=*\[)[^\n]*", re.MULTILINE)
_IDENT_RE = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class Finding:
    level: str  # "error" fails the lint, "warning" and "note" do not
    component: str
    message: str

    def __str__(self) -> str:
        return f"{self.component}: {self.message}"


@dataclass(frozen=True)
class SourceCheck:
    """The outcome of the option check for one built component."""

    component: str
    source_dir: Path
    checked: bool  # False when there is no checkout to read
    options: tuple[str, ...] = ()
    unread: tuple[str, ...] = ()
    searched: tuple[str, ...] = ()  # components whose trees were read (itself first)
    missing: tuple[str, ...] = ()  # dependencies without a checkout (not searched)
    read_by: tuple[tuple[str, str], ...] = ()  # (option, first component whose files read it)


@dataclass(frozen=True)
class LintReport:
    components: tuple[str, ...]
    targets: tuple[str, ...]  # the target lists every component was rendered for
    findings: tuple[Finding, ...] = ()
    sources: tuple[SourceCheck, ...] = field(default_factory=tuple)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warning"]

    def to_json(self) -> dict[str, object]:
        return {
            "ok": not self.errors,
            "components": list(self.components),
            "targets": list(self.targets),
            "findings": [asdict(f) for f in self.findings],
            "sources": [{"component": s.component, "source_dir": str(s.source_dir),
                         "checked": s.checked, "options": list(s.options),
                         "unread": list(s.unread), "searched": list(s.searched),
                         "missing": list(s.missing), "read_by": dict(s.read_by)}
                        for s in self.sources],
        }


# --- parsing -------------------------------------------------------------------------------
# --- rendering -----------------------------------------------------------------------------
def render_stacks(settings: Settings) -> list[Stack]:
    """Every recipe in the folder, rendered for the stack's default targets and for two
    targets; any recipe error is raised here as a ConfigError naming file and key."""
    names = sorted(load_recipes(settings.recipes, settings.overlay).recipes)
    stacks = [load_stack(settings.with_value("target", None, "lint: stack default"), names)]
    two = parse_target_list([TWO_TARGETS])
    if tuple(stacks[0].targets) != two:
        stacks.append(load_stack(settings.with_value("target", two, "lint"), names))
    return stacks


# --- static checks -------------------------------------------------------------------------
def _check_recipe_data(comp: Component) -> list[Finding]:
    recipe, out = comp.recipe, []
    if not recipe.summary.strip():
        out.append(Finding("warning", comp.name, "no 'summary' (plan and doctor show it)"))
    if recipe.builds and not recipe.system_packages:
        out.append(Finding("warning", comp.name, "no 'system_packages' (doctor cannot check "
                                                 "the build's Debian/Ubuntu needs)"))
    if recipe.builds:
        missing = [k for k in RESOURCE_ESTIMATES if k not in recipe.resources]
        if missing:
            out.append(Finding("warning", comp.name,
                               f"[resources] has no {' or '.join(missing)} estimate"))
    return out


def lint_recipes(settings: Settings, stacks: Sequence[Stack] | None = None) -> LintReport:
    """Render every recipe for the default and a two-target list and collect warnings."""
    stacks = stacks or render_stacks(settings)
    base = stacks[0]
    findings: list[Finding] = []
    for comp in base.selected():
        findings += _check_recipe_data(comp)
        if comp.builds:  # the build system's checks of the recipe's arguments
            findings += [Finding(level, comp.name, message) for level, message
                         in buildsystems.of(comp).lint(stacks, comp.name)]
    return LintReport(components=base.order,
                      targets=tuple(",".join(map(str, s.targets)) for s in stacks),
                      findings=tuple(findings))


# --- source check --------------------------------------------------------------------------
class FolderWords:
    """The identifiers in the build files under a folder (those a build system's
    ``is_build_file`` names). Each directory is read once and remembered, so trees that nest
    (llvm-project and its llvm/ subfolder) cost one read."""

    def __init__(self, is_build_file: Callable[[str], bool]) -> None:
        self._dirs: dict[str, frozenset[str]] = {}
        self.is_build_file = is_build_file

    def _read_dir(self, dirpath: str, filenames: Iterable[str]) -> frozenset[str]:
        words: set[bytes] = set()
        for name in filenames:
            if self.is_build_file(name):
                try:
                    with open(os.path.join(dirpath, name), "rb") as fh:
                        text = _COMMENT_LINE_RE.sub(b"", fh.read())
                    words.update(_WORD_RE.findall(text))
                except OSError:  # a dangling link in a checkout says nothing about options
                    continue
        return frozenset(w.decode("ascii") for w in words)

    def under(self, root: Path) -> set[str]:
        found: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            if dirpath not in self._dirs:
                self._dirs[dirpath] = self._read_dir(dirpath, filenames)
            found |= self._dirs[dirpath]
        return found


class BuildFileWords:
    """One FolderWords per kind of build system, so each tree is walked once per kind."""

    def __init__(self) -> None:
        self._by_kind: dict[str, FolderWords] = {}

    def of(self, system: buildsystems.BuildSystem) -> FolderWords:
        if system.kind not in self._by_kind:
            self._by_kind[system.kind] = FolderWords(system.is_build_file)
        return self._by_kind[system.kind]


def options_to_prove(stacks: Sequence[Stack], comp_name: str) -> list[str]:
    """Names of the recipe's options in any rendering that its build files must read (the
    build system's option_names: for CMake the -D options without CMake's own CMAKE_*)."""
    names: list[str] = []
    for stack in stacks:
        comp = stack.components[comp_name]
        for name in buildsystems.of(comp).option_names(stack, comp):
            if name not in names:
                names.append(name)
    return names


def source_root(comp: Component, sources: Path) -> Path:
    """The component's source folder inside ``sources`` (laid out like <workdir>/src)."""
    return sources / comp.checkout / comp.source_dir.relative_to(comp.checkout_dir)


def _check_component(stacks: Sequence[Stack], comp: Component, sources: Path,
                     all_words: BuildFileWords) -> tuple[SourceCheck, list[Finding]]:
    stack = stacks[0]
    system = buildsystems.of(comp)
    words = all_words.of(system)
    root = source_root(comp, sources)
    options = tuple(options_to_prove(stacks, comp.name))
    if not root.is_dir():
        note = Finding("note", comp.name, f"not checked (no checkout at {root})")
        return SourceCheck(comp.name, root, checked=False, options=options), [note]
    trees, missing = [(comp.name, words.under(root))], []
    for dep in (n for n in stack.closure(comp.name) if n != comp.name):
        dep_root = source_root(stack.components[dep], sources)
        if dep_root.is_dir():
            trees.append((dep, words.under(dep_root)))
        else:
            missing.append(dep)
    if stack.base is not None:
        # what the build loads from a --base is its installed build files (hipBLAS's
        # GPU_TARGETS is read by the base's hip-config-amd.cmake), not a checkout
        for folder in system.base_build_dirs(stack.base.path):
            trees.append((f"the base's {folder.relative_to(stack.base.path)}",
                          words.under(folder)))
    searched = [name for name, _ in trees]
    is_read = system.reads_option
    read_by = tuple((n, next(c for c, w in trees if is_read(n, w))) for n in options
                    if _IDENT_RE.fullmatch(n) and any(is_read(n, w) for _, w in trees))
    unread = tuple(n for n in options if _IDENT_RE.fullmatch(n) and n not in dict(read_by))
    # A dependency without a checkout is named, not trusted: with LLVM (10 GB) left out,
    # every ROCm component would otherwise pass unchecked.
    unseen = f" (not searched: {', '.join(missing)}, no checkout)" if missing else ""
    findings = [Finding("error", comp.name, f"{system.option_form.format(name)} is never read "
                                            f"by {comp.name}'s {system.build_files} (nor its "
                                            f"dependencies'){unseen}")
                for name in unread]
    findings += [Finding("note", comp.name, f"{system.option_form.format(name)} is not a plain "
                                            "identifier; not checked")
                 for name in options if not _IDENT_RE.fullmatch(name)]
    check = SourceCheck(comp.name, root, checked=True, options=options, unread=unread,
                        searched=tuple(searched), missing=tuple(missing), read_by=read_by)
    return check, findings


def check_component_sources(stack: Stack, comp: Component, sources: Path,
                            words: BuildFileWords) -> tuple[SourceCheck, list[Finding]]:
    """The source check of one component for one rendering (what a build runs, optcheck.py)."""
    return _check_component([stack], comp, sources, words)


def lint_sources(settings: Settings, sources: Path) -> LintReport:
    """``lint_recipes`` plus: every option a built recipe passes must be mentioned in the
    CMake files of its checkout under ``sources`` or of its dependencies' checkouts."""
    stacks = render_stacks(settings)
    report = lint_recipes(settings, stacks)
    words = BuildFileWords()
    checks, findings = [], list(report.findings)
    for comp in stacks[0].selected():
        if comp.builds:
            check, found = _check_component(stacks, comp, sources, words)
            checks.append(check)
            findings += found
    return LintReport(components=report.components, targets=report.targets,
                      findings=tuple(findings), sources=tuple(checks))
