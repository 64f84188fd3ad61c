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
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rocbuild.errors import ConfigError
from rocbuild.model.codeaudit import CodeMemo
from rocbuild.model.recipes import JIT, Recipe, provides_alternatives
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
class Audited:
    """One base library a recipe's [gpu] table names (or its [base] tensile folder), read for
    the targets."""

    component: str
    library: str  # relative to the base
    text: str  # what it carries ("66 bundles, all with gfx906")
    lacking: tuple[str, ...] = ()  # the targets it has no code for
    # the targets it meets only through a generic code object: (("gfx906", "gfx9-generic"),)
    via: tuple[tuple[str, str], ...] = ()
    tensile: bool = False  # a [base] tensile folder's set for one processor, not a library

    @property
    def ok(self) -> bool:
        return not self.lacking


@dataclass(frozen=True)
class PackageHint:
    """A distribution package that would provide a component the base lacks, and what
    installing it saves: the components then taken instead of built."""

    component: str
    packages: tuple[str, ...]
    saves: tuple[str, ...]  # the component and what is built only because of it


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
    # the GPU libraries of every recipe's [gpu] table found in the base, read for the targets:
    # every recipe's, whatever the run asked for (what the base provides is judged whole)
    audit: tuple[Audited, ...] = ()
    # each component's own version where a package database says it (Debian's librocblas4
    # 6.4.4 on a HIP 6.4.3 base); a component not named has the base's version
    versions: Mapping[str, str] = field(default_factory=dict)
    hints: tuple[PackageHint, ...] = ()
    memo: CodeMemo | None = field(default=None, compare=False)  # what the audit read
    # the components of the run this base serves (``restricted_to``: the closure of what
    # was asked for); None: every recipe's. Only these are built; the audit names the others
    run: frozenset[str] | None = None

    def version_of(self, name: str) -> str:
        return self.versions.get(name, self.version)
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


class DpkgIndex:
    """Which installed package lists a file, and its version, read once from a dpkg database
    (``<root>/var/lib/dpkg``) beside a distribution's base."""

    def __init__(self, admin: Path) -> None:
        self.admin = admin
        self.root = admin.parent.parent.parent
        self._owners: dict[str, str] | None = None
        self._versions: dict[str, str] | None = None

    def _load(self) -> tuple[dict[str, str], dict[str, str]]:
        if self._owners is None or self._versions is None:
            owners: dict[str, str] = {}
            for package, lines in dpkg_listings(self.admin):
                for line in lines:
                    owners.setdefault(line, package)
            self._owners, self._versions = owners, _installed_versions(self.admin)
        return self._owners, self._versions

    def package_of(self, file: Path) -> tuple[str, str] | None:
        """(package, version) of the installed package that lists ``file``."""
        owners, versions = self._load()
        wanted = ("/" + str(file.relative_to(self.root)) if file.is_relative_to(self.root)
                  else str(file))
        owner = owners.get(wanted)
        return (owner, versions[owner]) if owner is not None and owner in versions else None


def dpkg_listings(admin: Path) -> Iterator[tuple[str, list[str]]]:
    """(package, the paths it installed) from each readable ``info/<package>.list`` of the
    dpkg database ``admin``, in name order (what `dpkg -S` reads)."""
    for listing in sorted((admin / "info").glob("*.list")):
        try:
            lines = listing.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        yield listing.name[: -len(".list")].split(":")[0], lines


def _installed_versions(admin: Path) -> dict[str, str]:
    try:
        status = (admin / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    found = {}
    for stanza in status.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines()
                      if ": " in line and not line.startswith(" "))
        if "Package" in fields and "Version" in fields and \
                "installed" in fields.get("Status", "").split()[-1:]:
            found[fields["Package"]] = fields["Version"]
    return found


def upstream_version(package_version: str) -> str:
    """A Debian version's upstream part: ``1:21.1.8-14`` -> 21.1.8, ``7.0.2+dfsg-3`` ->
    7.0.2, ``6.4.4-4`` -> 6.4.4."""
    text = package_version.split(":", 1)[-1]
    text = text.rsplit("-", 1)[0] if "-" in text else text
    return re.split(r"[+~]", text, maxsplit=1)[0]


def dpkg_version(admin: Path, file: Path) -> str | None:
    """The version of the installed dpkg package that lists ``file`` (its path below the
    dpkg root, ``admin``'s grandparent's parent), or None without such a database."""
    found = DpkgIndex(admin).package_of(file)
    return None if found is None else found[1]


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
    return f"depends on {', '.join(built)}, which is built" if built else None


def audit_libraries(root: Path, recipe: Recipe, targets: Sequence[TargetId],
                    memo: CodeMemo) -> list[Audited]:
    """Each base library of ``recipe``'s [gpu] table, read for the targets (headers only,
    remembered by file identity: ``model/codeaudit.py``). A library of a shape that must
    carry code and carries none lacks every target; a run-time compiled one (jit) may carry
    none."""
    if not recipe.carries_gpu_code:
        return []
    audited = []
    for entry in recipe.gpu_libraries:
        for library in _matches(root, entry):
            code = memo.code_of(library)
            rel = str(library.relative_to(root))
            if not code.has_code and not code.error:
                lacking = [] if recipe.gpu == JIT else list(targets)
                audited.append(Audited(recipe.name, rel, "no GPU code",
                                       tuple(str(t) for t in lacking)))
                continue
            lacking = code.lacking(targets) if not code.error else list(targets)
            audited.append(Audited(recipe.name, rel, code.describe(targets),
                                   tuple(str(t) for t in lacking),
                                   tuple(code.via(targets).items())))
    return audited


def audit_base(root: Path, recipes: Mapping[str, Recipe], order: Iterable[str],
               targets: Sequence[TargetId], memo: CodeMemo) -> list[Audited]:
    """What ``load_base`` reads, without deciding anything (verify's base check): for each
    recipe in ``order`` whose [base] files the base has, its [gpu] libraries and its Tensile
    set, read for the targets."""
    audited: list[Audited] = []
    for name in order:
        recipe = recipes[name]
        if any(_matches(root, entry) for entry in recipe.base_provides):
            audited += audit_libraries(root, recipe, targets, memo)
            audited += audit_tensile(root, recipe, targets)
    return audited


def audit_tensile(root: Path, recipe: Recipe, targets: Sequence[TargetId]) -> list[Audited]:
    """The Tensile set of ``recipe``'s [base] tensile folder, one line per processor: the
    same check (``check_tensile``, ``tensile_dirs``) as the decision's (``_check``)."""
    if not recipe.base_tensile:
        return []
    libraries = tensile_dirs(root, recipe.base_tensile)
    audited = []
    for processor in dict.fromkeys(t.processor for t in targets):
        results = [check_tensile(library, processor) for library in libraries]
        good = next((r for r in results if r.ok), None)
        library = good.library if good else libraries[0]
        where = (str(library.relative_to(root)) if good or len(libraries) == 1
                 else recipe.base_tensile)
        if good is not None:
            count = good.code_objects
            audited.append(Audited(recipe.name, where, f"{processor} Tensile set complete "
                                   f"({count} code object file{'' if count == 1 else 's'})",
                                   tensile=True))
        else:
            first = results[0].missing[0] if results else "the folder"
            audited.append(Audited(recipe.name, where, f"no {processor} Tensile set ({first} "
                                   "not found)", (processor,), tensile=True))
    return audited


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
              targets: Sequence[TargetId], memo: CodeMemo | None = None,
              from_source: Mapping[str, str] | None = None) -> Base:
    """Read the base and decide, in build order, which components it provides. Refuses a
    base of another series, and one that lacks a component marked ``required`` (compilers,
    HIP runtime, ROCr), naming the files it lacks. With ``memo`` the GPU libraries of every
    recipe's [gpu] table are read for the targets (``audit_libraries``): one that lacks a
    target makes its component built, unless it is required (then the line says so).
    ``from_source`` (name -> where the user asked, "flag --from-source") are built whatever
    the base has, and so is what depends on them (``why_built``)."""
    from_source = from_source or {}
    path = path.absolute()
    version = read_version(path)
    base_series = ".".join(version.split(".")[:2])
    if base_series != series:
        raise ConfigError(f"base {path} is ROCm {version}, but these recipes build the "
                          f"{series} series; rocbuild only builds on a base of the same series",
                          tip=f"install AMD's ROCm {series} packages and pass that folder, or "
                              "build without --base")
    order = list(order)
    checks: dict[str, tuple[list[Path], list[str]]] = {}
    audit: list[Audited] = []
    lacking: list[str] = []
    for name in order:
        recipe = recipes[name]
        if not recipe.base_provides:
            continue
        found, missing = _check(path, recipe, targets)
        if memo is not None and found:
            audited = audit_libraries(path, recipe, targets, memo)
            audit += audited + audit_tensile(path, recipe, targets)
            if not recipe.base_required:
                missing += [f"{', '.join(a.lacking)} code in {a.library} ({a.text})"
                            for a in audited if not a.ok]
        checks[name] = (found, missing)
        if missing and recipe.base_required:
            lacking.append(f"{name} ({', '.join(missing)})")
    if lacking:
        raise ConfigError(f"base {path} (ROCm {version}) lacks what the build needs from it: "
                          + "; ".join(lacking),
                          tip="install the missing ROCm packages (e.g. `apt install rocm-hip-sdk`)"
                              " or pass the folder of a complete ROCm")
    taken, not_taken = _decide(order, recipes, deps, checks, from_source)
    admin = path.parent / "var/lib/dpkg"
    dpkg = DpkgIndex(admin) if (admin / "status").is_file() else None
    return Base(path=path, version=version, taken=taken, not_taken=not_taken,
                audit=tuple(audit), versions=_versions(dpkg, taken) if dpkg else {},
                hints=_hints(order, recipes, deps, checks, taken, from_source) if dpkg else (),
                memo=memo, packaged=is_packaged(path))


def _decide(order: Sequence[str], recipes: Mapping[str, Recipe],
            deps: Mapping[str, tuple[str, ...]],
            checks: Mapping[str, tuple[list[Path], list[str]]],
            from_source: Mapping[str, str],
            ) -> tuple[dict[str, Taken], dict[str, NotTaken]]:
    """The base road's decision in build order (``why_built``), from each component's
    (files found, what is missing); ``from_source`` are built whatever the base has."""
    taken: dict[str, Taken] = {}
    not_taken: dict[str, NotTaken] = {}
    absent: set[str] = set()
    for name in order:
        if name not in checks:
            continue
        found, missing = checks[name]
        if not found:
            absent.add(name)
        why = why_built(recipes[name], deps[name], taken, recipes, missing, absent)
        if why is None and name in from_source:
            why = f"from source, as {from_source[name]} asks (the base has it)"
        if why is None:
            taken[name] = Taken(name, tuple(found))
        else:
            not_taken[name] = NotTaken(name, why)
    return taken, not_taken


def _versions(dpkg: DpkgIndex, taken: Mapping[str, Taken]) -> dict[str, str]:
    """Each taken component's version: the package that holds the first of its files."""
    versions = {}
    for name, item in taken.items():
        for file in item.files:
            owner = dpkg.package_of(file)
            if owner is not None:
                versions[name] = upstream_version(owner[1])
                break
    return versions


def _hints(order: Sequence[str], recipes: Mapping[str, Recipe],
           deps: Mapping[str, tuple[str, ...]],
           checks: Mapping[str, tuple[list[Path], list[str]]],
           taken: Mapping[str, Taken], from_source: Mapping[str, str],
           ) -> tuple[PackageHint, ...]:
    """For each component built because the base lacks its files and whose recipe names
    the distribution packages that install it (``[base] packages``): what would be taken
    instead with them installed (the decision again, with its files found)."""
    hints = []
    for name in order:
        recipe = recipes[name]
        if name in taken or name not in checks or not recipe.base_packages:
            continue
        found, missing = checks[name]
        if not missing or any(" code in " in m for m in missing):
            continue  # not files a package adds: a library that lacks a target
        assumed = {**checks, name: ([*found, Path(recipe.base_packages[0])], [])}
        then, _ = _decide(order, recipes, deps, assumed, from_source)
        saves = tuple(n for n in order if n in then and n not in taken and recipes[n].builds)
        if saves:
            hints.append(PackageHint(name, recipe.base_packages, saves))
    return tuple(hints)


def restricted_to(base: Base, names: Iterable[str]) -> Base:
    """``base`` as one run sees it: what it takes and builds among ``names`` (the closure of
    what was asked for), with the key still over everything the base provides. A package
    tip counts what it saves among ``names`` only, and is dropped when its component is not
    one of them; the audit keeps every library it read (the lines say which are outside)."""
    keep = frozenset(names)
    hints = tuple(replace(h, saves=tuple(n for n in h.saves if n in keep))
                  for h in base.hints if h.component in keep)
    return replace(base, taken={n: t for n, t in base.taken.items() if n in keep},
                   not_taken={n: t for n, t in base.not_taken.items() if n in keep},
                   provided=base.taken if base.provided is None else base.provided,
                   hints=tuple(h for h in hints if h.saves), run=keep)


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
    return max(clangs, key=lambda clang: version_key(clang.parent.parent.name)).parent.parent


def version_key(name: str) -> tuple[int, ...]:
    """The numbers in ``name`` as a tuple, to order versions as numbers: by name,
    ``llvm-9`` sorts after ``llvm-21`` and ``clang/19`` before ``clang/21``."""
    return tuple(int(n) for n in re.findall(r"\d+", name)) or (0,)


def device_lib_dir(base: Base) -> Path | None:
    """The folder of the device bitcode that showed the base's device-libs (its ``ocml.bc``),
    for HIP_DEVICE_LIB_PATH; None when the base shows none. Debian's clang finds the bitcode
    in its resource folder only while ROCM_PATH is unset: with ROCM_PATH=/usr (what every
    build step gets) it stops with "cannot find ROCm device library" (seen with Debian clang
    21.1.8 in a sid root); naming the folder serves every layout."""
    provided = base.taken if base.provided is None else base.provided
    libs = provided.get("device-libs")
    bitcode = [f.parent for f in (libs.files if libs else ()) if f.name == "ocml.bc"]
    if not bitcode:
        return None
    # the bitcode of the LLVM that compiles (llvm_home), not the first by name: with clang
    # 19 and 21 installed, lib/llvm-19 sorts first
    home = llvm_home(base)
    own = [b for b in bitcode if b.is_relative_to(home)]
    return own[0] if own else max(bitcode, key=lambda b: version_key(
        b.relative_to(base.path).as_posix()))


def base_runpath(base: Base | None) -> list[str]:
    """The base's lib dirs for the install RUNPATH every component gets
    (``buildsystems.install_runpath``): absolute (the base does not move with the prefix) and
    after the prefix's own entries."""
    return [] if base is None else [str(d) for d in base.lib_dirs]
