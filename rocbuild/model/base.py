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
from dataclasses import dataclass, field, replace
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.model.recipes import Recipe, provides_alternatives
from rocbuild.model.targets import TargetId
from rocbuild.model.tensile import check_tensile

VERSION_FILE = ".info/version"  # written by AMD's rocm-core package, and by rocbuild's
# A distribution's packaged ROCm (Debian, Ubuntu: --base /usr) has no rocm-core: its HIP
# headers give the series, the package that holds them (dpkg) the release
HIP_VERSION_FILE = "include/hip/hip_version.h"
_VERSION_RE = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?")
_HIP_DEFINE_RE = re.compile(r"^#define\s+HIP_VERSION_(MAJOR|MINOR)\s+(\d+)\s*$", re.M)
TIP = ("pass --base the folder of an installed ROCm, e.g. --base /opt/rocm-6.4.3, or /usr for "
       "a distribution's ROCm packages (Debian's libamdhip64-dev)")


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
    # a distribution's packaged ROCm (read from hip_version.h, no .info/version): its include/
    # and lib/ are the system's own, which the compiler and the loader search by themselves
    packaged: bool = False

    @property
    def series(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def lib_dirs(self) -> tuple[Path, ...]:
        """Where the base's shared libraries are, searched after the prefix's: lib/, and the
        multiarch folders of a distribution's packages (lib/x86_64-linux-gnu under /usr)."""
        return (self.path / "lib", *multiarch_dirs(self.path))

    @property
    def search_dirs(self) -> tuple[Path, ...]:
        """The base as an entry of the include and library search variables of a build
        (``rocm_dirs``): none for a distribution's packages. /usr/include there is harmful,
        not redundant: CMake turns CPATH into ``-isystem /usr/include`` and GCC's <cmath>
        (``#include_next <math.h>``) then finds no math.h; the compiler and the linker search
        the system's folders anyway."""
        return () if self.packaged else (self.path,)

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


def is_packaged(path: Path) -> bool:
    """Whether the base at ``path`` is a distribution's packaged ROCm (Debian's
    ``--base /usr``): HIP headers and no ``.info/version`` (``read_version``'s second road)."""
    return not (path / VERSION_FILE).exists() and (path / HIP_VERSION_FILE).is_file()


def multiarch_dirs(root: Path) -> list[Path]:
    """``root``'s Debian multiarch library folders (``lib/x86_64-linux-gnu``), if any."""
    return sorted(Path(p) for p in glob.glob(str(root / "lib" / "*-linux-gnu*"))
                  if Path(p).is_dir())


def read_version(path: Path) -> str:
    """The base's ROCm version (``6.4.3``): from ``.info/version`` (AMD's packages, rocbuild's
    prefixes), else from a distribution's packages (``hip_version.h`` and dpkg, see
    ``_packaged_version``); ConfigError naming the path and what is wrong otherwise."""
    if not path.is_dir():
        raise ConfigError(f"base {path} does not exist or is not a folder", tip=TIP)
    file = path / VERSION_FILE
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if (path / HIP_VERSION_FILE).is_file():
            return _packaged_version(path)
        raise ConfigError(f"base {path} has neither {VERSION_FILE} (AMD's rocm-core package "
                          f"writes it) nor {HIP_VERSION_FILE} (a distribution's HIP headers), "
                          "so it is not an installed ROCm", tip=TIP) from None
    except OSError as exc:
        raise ConfigError(f"base {path}: cannot read {VERSION_FILE}: {exc.strerror}",
                          tip=f"check the permissions of {file}") from None
    match = _VERSION_RE.match(text)
    if not match:
        raise ConfigError(f"base {path}: {VERSION_FILE} holds {text.strip()[:40]!r}, not a "
                          "version like 6.4.3", tip=TIP)
    major, minor, patch = match.groups()
    return f"{major}.{minor}.{patch or 0}"


def _packaged_version(path: Path) -> str:
    """A distribution's ROCm: the series from ``hip_version.h`` (HIP_VERSION_MAJOR/MINOR; its
    PATCH is a build number, 43484 in Debian's 6.4.3), the release from the version of the
    dpkg package that holds the header (``libamdhip64-dev 6.4.3-5`` -> 6.4.3) when the package
    database is beside the base (``<root>/var/lib/dpkg`` for ``<root>/usr``), else ``.0``."""
    header = path / HIP_VERSION_FILE
    text = header.read_text(encoding="utf-8", errors="replace")
    parts = dict(_HIP_DEFINE_RE.findall(text))
    if "MAJOR" not in parts or "MINOR" not in parts:
        raise ConfigError(f"base {path}: {header} defines no HIP_VERSION_MAJOR and "
                          "HIP_VERSION_MINOR", tip=TIP)
    series = f"{int(parts['MAJOR'])}.{int(parts['MINOR'])}"
    package = dpkg_version(path.parent / "var/lib/dpkg", header)
    if package is None:
        return f"{series}.0"
    match = _VERSION_RE.match(package.split(":")[-1])
    if match and f"{match[1]}.{match[2]}" == series:
        return f"{series}.{match[3] or 0}"
    return f"{series}.0"  # a package version of another scheme: the header decides


def dpkg_version(admin: Path, file: Path) -> str | None:
    """The version of the installed dpkg package that lists ``file`` (its path below the
    dpkg root, ``admin``'s grandparent's parent), or None without such a database."""
    root = admin.parent.parent.parent
    wanted = "/" + str(file.relative_to(root)) if file.is_relative_to(root) else str(file)
    owner = None
    for listing in sorted((admin / "info").glob("*.list")):
        try:
            lines = listing.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        if wanted in lines:
            owner = listing.name[: -len(".list")].split(":")[0]
            break
    if owner is None:
        return None
    try:
        status = (admin / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if fields.get("Package") == owner and "installed" in fields.get("Status", ""):
            return fields.get("Version")
    return None


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
              recipes: Mapping[str, Recipe], missing: Sequence[str],
              absent: Container[str] = ()) -> str | None:
    """Why the base does not provide ``recipe``'s component (None: it does): the one rule of
    the base road, used by ``load_base`` on a real base and by ``roads.assumed_taken``'s
    estimate. ``deps`` are its direct dependencies, ``taken`` what the base provides so far
    (in build order), ``missing`` what the base lacks of its [base] table. A required
    component is the base's whatever is built (``load_base`` refuses a base lacking it); a
    dependency that is built makes the base's copy stale unless ``stales_users`` says not,
    or the base has no file of it at all (``absent``): nothing in the base was linked against
    it (Debian's HIP has no rocprofiler-register, and its roctx was built without one)."""
    if recipe.base_required:
        return None
    if missing:
        return "base lacks " + ", ".join(missing)
    built = [d for d in deps if d not in taken and stales_users(recipes[d]) and d not in absent]
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
        libraries = tensile_dirs(root, recipe.base_tensile)
        for processor in dict.fromkeys(t.processor for t in targets):
            results = [check_tensile(library, processor) for library in libraries]
            if not any(r.ok for r in results):
                where = (str(libraries[0].relative_to(root)) if len(libraries) == 1
                         else recipe.base_tensile)
                first = results[0].missing[0] if results else "the folder"
                missing.append(f"{processor} Tensile kernels in {where} ({first} not found)")
    return found, missing


def tensile_dirs(root: Path, entry: str) -> list[Path]:
    """The folders below ``root`` that a ``[base] tensile`` entry names: alternatives
    (``"a | b"``) and globs (Debian keeps the set in lib/<multiarch>/rocblas/<version>/library),
    existing folders first; the first alternative when none exists, to name in a message."""
    found: list[Path] = []
    for pattern in provides_alternatives(entry):
        found += sorted(Path(p) for p in glob.glob(str(root / pattern)) if Path(p).is_dir())
    return found or [root / provides_alternatives(entry)[0]]


def load_base(path: Path, series: str, recipes: Mapping[str, Recipe],
              order: Iterable[str], deps: Mapping[str, tuple[str, ...]],
              targets: Sequence[TargetId], from_source: Mapping[str, str] | None = None
              ) -> Base:
    """Read the base and decide, in build order, which components it provides. Refuses a
    base of another series, and one that lacks a component marked ``required`` (compilers,
    HIP runtime, ROCr), naming the files it lacks. ``from_source`` (name -> where the user
    asked, "flag --from-source") are built whatever the base has, and so is what depends on
    them (``why_built``)."""
    from_source = from_source or {}
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
    absent: set[str] = set()
    for name in order:
        recipe = recipes[name]
        if not recipe.base_provides:
            continue
        found, missing = _check(path, recipe, targets)
        if not found:
            absent.add(name)
        if missing and recipe.base_required:
            lacking.append(f"{name} ({', '.join(missing)})")
            continue
        why = why_built(recipe, deps[name], taken, recipes, missing, absent)
        if why is None and name in from_source:
            why = f"from source, as {from_source[name]} asks (the base has it)"
        if why is None:
            taken[name] = Taken(name, tuple(found))
        else:
            not_taken[name] = NotTaken(name, why)
    if lacking:
        raise ConfigError(f"base {path} (ROCm {version}) lacks what the build needs from it: "
                          + "; ".join(lacking),
                          tip="install the missing ROCm packages (e.g. `apt install rocm-hip-sdk`)"
                              " or pass the folder of a complete ROCm")
    return Base(path=path, version=version, taken=taken, not_taken=not_taken,
                packaged=is_packaged(path))


def restricted_to(base: Base, names: Iterable[str]) -> Base:
    """``base`` as one run sees it: what it takes and builds among ``names`` (the closure of
    what was asked for), with the key still over everything the base provides."""
    keep = set(names)
    return replace(base, taken={n: t for n, t in base.taken.items() if n in keep},
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
    return replace(base, taken=taken, not_taken=not_taken,
                   provided=base.taken if base.provided is None else base.provided)


def llvm_home(base: Base) -> Path:
    """The LLVM the base compiles with (the ``llvm`` template variable): the folder above the
    ``bin/clang`` that showed the base's llvm component, ``<base>/lib/llvm`` in AMD's layout
    and ``/usr/lib/llvm-21`` in Debian's. Of several (lib/llvm-19 and lib/llvm-21 both
    installed) the newest; ``<base>/lib/llvm`` when the base shows none."""
    provided = base.taken if base.provided is None else base.provided
    llvm = provided.get("llvm")
    clangs = [f for f in (llvm.files if llvm else ()) if f.name == "clang"
              and f.parent.name == "bin"]
    if not clangs:
        return base.path / "lib" / "llvm"

    def newest(path: Path) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", path.parent.parent.name)) or (0,)
    return max(clangs, key=newest).parent.parent


def device_lib_dir(base: Base) -> Path | None:
    """The folder of the device bitcode that showed the base's device-libs (its ``ocml.bc``),
    for HIP_DEVICE_LIB_PATH; None when the base shows none. Debian's clang finds the bitcode
    in its resource folder only while ROCM_PATH is unset: with ROCM_PATH=/usr (what every
    build step gets) it stops with "cannot find ROCm device library" (seen with Debian clang
    21.1.8 in a sid root); naming the folder serves every layout."""
    provided = base.taken if base.provided is None else base.provided
    libs = provided.get("device-libs")
    bitcode = [f for f in (libs.files if libs else ()) if f.name == "ocml.bc"]
    return bitcode[0].parent if bitcode else None


def base_runpath(base: Base | None) -> list[str]:
    """The base's lib dirs for the install RUNPATH every component gets
    (``buildsystems.install_runpath``): absolute (the base does not move with the prefix) and
    after the prefix's own entries."""
    return [] if base is None else [str(d) for d in base.lib_dirs]
