"""An installed ROCm used as the base of a build (``--base /opt/rocm-6.4.3``): the fast road.

What a recipe's component looks like in an installed ROCm is data in the recipe (``[base]``:
``provides`` = files that must exist, globs allowed; ``tensile`` = a folder that must hold the
rocBLAS Tensile set for every target; ``required`` = the build cannot go on without it). This
module reads the base's version, decides per component whether the base provides it for the
targets, and computes the content key that goes into the fingerprints built on it. It knows
nothing of doit or subprocesses.

A component is taken from the base only when everything it depends on is taken too: a base
hipBLAS would load the base's rocBLAS, so once rocBLAS is built, hipBLAS is built as well.
Two kinds of dependency do not count, as the recipes say: a source-only one (Tensile: read
by a build, never installed) and one whose installed files are only read while building
(``build_time_only``: rocm-cmake's CMake modules, hipBLAS-common's headers). A component
marked ``required`` (compilers, HIP runtime, ROCr) is always the base's: taken, or the base
is refused naming the files it lacks; rocbuild never rebuilds it behind the user's back.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.model.recipes import Recipe, provides_alternatives
from rocbuild.model.targets import TargetId
from rocbuild.model.tensile import check_tensile

VERSION_FILE = ".info/version"  # written by AMD's rocm-core package, and by rocbuild's
_VERSION_RE = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")
TIP = "pass --base the folder of an installed ROCm, e.g. --base /opt/rocm-6.4.3"


@dataclass(frozen=True)
class Taken:
    """A component the base provides: the files that showed it (the base's content key)."""

    name: str
    files: tuple[Path, ...]


@dataclass(frozen=True)
class NotTaken:
    """A component the base has a recipe entry for but cannot provide, and why."""

    name: str
    reason: str


@dataclass(frozen=True)
class Base:
    path: Path
    version: str  # "6.4.3", from .info/version
    taken: Mapping[str, Taken] = field(default_factory=dict)  # of the run's components
    not_taken: Mapping[str, NotTaken] = field(default_factory=dict)
    # what the base provides of every recipe, whatever the run asked for: the content key.
    # A key of `taken` alone would differ between `build rocblas` and `build`, so each
    # would see what the other built as stale. None: the same as `taken`.
    provided: Mapping[str, Taken] | None = None

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def lib_dirs(self) -> tuple[Path, ...]:
        """Where the base's shared libraries are, searched after the prefix's."""
        return (self.path / "lib",)

    def key(self) -> str:
        """Path, version and size + mtime of every file that showed a taken component: an
        upgrade of the base's packages changes it, and so every fingerprint built on it."""
        doc: dict[str, object] = {"path": str(self.path), "version": self.version}
        files = []
        for taken in (self.taken if self.provided is None else self.provided).values():
            for path in taken.files:
                info = path.stat()
                files.append([str(path.relative_to(self.path)), info.st_size, info.st_mtime_ns])
        doc["files"] = sorted(files)
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def read_version(path: Path) -> str:
    """The base's ROCm version (``6.4.3``) from ``.info/version``; ConfigError naming the
    path and what is wrong otherwise."""
    if not path.is_dir():
        raise ConfigError(f"base {path} does not exist or is not a folder", tip=TIP)
    file = path / VERSION_FILE
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise ConfigError(f"base {path} has no {VERSION_FILE}, so it is not an installed ROCm "
                          "(AMD's rocm-core package writes that file)", tip=TIP) from None
    except OSError as exc:
        raise ConfigError(f"base {path}: cannot read {VERSION_FILE}: {exc.strerror}",
                          tip=f"check the permissions of {file}") from None
    match = _VERSION_RE.match(text)
    if not match:
        raise ConfigError(f"base {path}: {VERSION_FILE} holds {text.strip()[:40]!r}, not a "
                          "version like 6.4.3", tip=TIP)
    major, minor, patch = match.groups()
    return f"{major}.{minor}.{patch or 0}"


def _matches(root: Path, entry: str) -> list[Path]:
    """The files that meet one provides entry: every alternative's matches (AMD's packages
    keep the device bitcode in both places, and both then go into the base's key)."""
    found: list[Path] = []
    for pattern in provides_alternatives(entry):
        if glob.has_magic(pattern):
            found += sorted(Path(p) for p in glob.glob(str(root / pattern)) if Path(p).is_file())
        elif (root / pattern).is_file():
            found.append(root / pattern)
    return found


def stales_users(recipe: Recipe) -> bool:
    """Whether building ``recipe`` makes an installed copy of what uses it stale. Not for a
    source-only component (consumed by a build, never installed) nor for one whose files are
    only read at build time (``build_time_only``): the base's binaries do not load them."""
    return recipe.builds and not recipe.build_time_only


def why_built(recipe: Recipe, deps: Iterable[str], taken: Container[str],
              recipes: Mapping[str, Recipe], missing: Sequence[str]) -> str | None:
    """Why the base does not provide ``recipe``'s component (None: it does): the one rule of
    the base road, used by ``load_base`` on a real base and by ``roads.assumed_taken``'s
    estimate. ``deps`` are its direct dependencies, ``taken`` what the base provides so far
    (in build order), ``missing`` what the base lacks of its [base] table. A required
    component is the base's whatever is built (``load_base`` refuses a base lacking it); a
    dependency that is built makes the base's copy stale unless ``stales_users`` says not."""
    if recipe.base_required:
        return None
    if missing:
        return "base lacks " + ", ".join(missing)
    built = [d for d in deps if d not in taken and stales_users(recipes[d])]
    if built:
        return f"depends on {', '.join(built)}, which is built"
    return None


def _check(root: Path, recipe: Recipe, targets: Sequence[TargetId]
           ) -> tuple[list[Path], list[str]]:
    """(files found, what is missing) for one recipe's [base] table."""
    found: list[Path] = []
    missing: list[str] = []
    for pattern in recipe.base_provides:
        hits = _matches(root, pattern)
        found += hits
        if not hits:
            missing.append(pattern)
    if recipe.base_tensile and not missing:
        library = root / recipe.base_tensile
        for processor in dict.fromkeys(t.processor for t in targets):
            result = check_tensile(library, processor)
            if not result.ok:
                missing.append(f"{processor} Tensile kernels in {recipe.base_tensile} "
                               f"({result.missing[0]} not found)")
    return found, missing


def load_base(path: Path, series: str, recipes: Mapping[str, Recipe],
              order: Iterable[str], deps: Mapping[str, tuple[str, ...]],
              targets: Sequence[TargetId]) -> Base:
    """Read the base and decide, in build order, which components it provides. Refuses a
    base of another series, and one that lacks a component marked ``required`` (compilers,
    HIP runtime, ROCr), naming the files it lacks."""
    path = path.absolute()
    version = read_version(path)
    base_series = ".".join(version.split(".")[:2])
    if base_series != series:
        raise ConfigError(f"base {path} is ROCm {version}, but these recipes build the "
                          f"{series} series; rocbuild only builds on a base of the same series",
                          tip=f"install AMD's ROCm {series} packages and pass that folder, or "
                              "build without --base")
    taken: dict[str, Taken] = {}
    not_taken: dict[str, NotTaken] = {}
    lacking: list[str] = []
    for name in order:
        recipe = recipes[name]
        if not recipe.base_provides:
            continue
        found, missing = _check(path, recipe, targets)
        if missing and recipe.base_required:
            lacking.append(f"{name} ({', '.join(missing)})")
            continue
        why = why_built(recipe, deps[name], taken, recipes, missing)
        if why is None:
            taken[name] = Taken(name, tuple(found))
        else:
            not_taken[name] = NotTaken(name, why)
    if lacking:
        raise ConfigError(f"base {path} (ROCm {version}) lacks what the build needs from it: "
                          + "; ".join(lacking),
                          tip="install the missing ROCm packages (e.g. `apt install rocm-hip-sdk`)"
                              " or pass the folder of a complete ROCm")
    return Base(path=path, version=version, taken=taken, not_taken=not_taken)


def restricted_to(base: Base, names: Iterable[str]) -> Base:
    """``base`` as one run sees it: what it takes and builds among ``names`` (the closure of
    what was asked for), with the key still over everything the base provides."""
    keep = set(names)
    return Base(path=base.path, version=base.version,
                taken={n: t for n, t in base.taken.items() if n in keep},
                not_taken={n: t for n, t in base.not_taken.items() if n in keep},
                provided=base.taken if base.provided is None else base.provided)


def fetch_sources(base: Base, readers: Mapping[str, str]) -> Base:
    """``base`` with the source-only components in ``readers`` (name -> a built component
    that reads its source) no longer taken: they are fetched, since the base has headers
    but no checkout (the HIP headers' ``src.hip`` for a clr built on the base)."""
    taken = {n: t for n, t in base.taken.items() if n not in readers}
    not_taken = {**base.not_taken, **{
        n: NotTaken(n, f"fetched (source only): {user} is built from it")
        for n, user in readers.items()}}
    return Base(path=base.path, version=base.version, taken=taken, not_taken=not_taken,
                provided=base.taken if base.provided is None else base.provided)


def base_runpath(base: Base | None) -> list[str]:
    """The base's lib dirs for the install RUNPATH every component gets
    (``buildsystems.install_runpath``): absolute (the base does not move with the prefix) and
    after the prefix's own entries."""
    return [] if base is None else [str(d) for d in base.lib_dirs]
