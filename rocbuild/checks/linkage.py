"""Do the prefix's programs and libraries find their libraries with a bare environment?

For every host ELF file in a prefix, each DT_NEEDED is resolved the way glibc's loader does
it with no LD_LIBRARY_PATH (ld.so(8), "Rpath token expansion" and the search order): a name
with a slash is a path; else DT_RPATH (only when there is no DT_RUNPATH), DT_RUNPATH, the
directories of /etc/ld.so.conf (what ldconfig puts into ld.so.cache), then the system
directories. ``$ORIGIN``, ``$LIB`` and ``$PLATFORM`` are expanded; a candidate counts only
when its ELF class, byte order and machine are those of the file that needs it (the loader
skips a 32-bit library of the right name). Each file is resolved on its own, not through
the RPATH of whatever program loads it, because a library must also work when dlopen()ed.

Two outcomes fail: a library that is not found, and a library the stack installs itself that
resolves to a copy outside the prefix (the prefix's rocminfo loading Debian's
libhsa-runtime64.so.1 5.2 instead of the one just built). ``system_root`` stands for ``/``
so tests can build a fake system.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from rocbuild.model.elf import (
    EM_AMDGPU,
    ET_DYN,
    ET_EXEC,
    Dynamic,
    FormatError,
    Ident,
    NotElf,
    UnsupportedElf,
    dynamic_info,
    open_source,
    read_ident,
)
from rocbuild.model.paths import resolves_within, within

_EM = {"x86_64": 62, "aarch64": 183, "ppc64le": 21, "riscv64": 243}
# Debian/Ubuntu multiarch triplets by (class, machine)
_TRIPLETS = {(2, 62): "x86_64-linux-gnu", (2, 183): "aarch64-linux-gnu",
             (1, 3): "i386-linux-gnu", (2, 21): "powerpc64le-linux-gnu",
             (2, 243): "riscv64-linux-gnu"}
_PLATFORMS = {62: "x86_64", 183: "aarch64", 3: "i686", 21: "powerpc64le", 243: "riscv64"}

NOT_FOUND = "not found"
OUTSIDE = "outside the prefix, the prefix has its own copy"


def host_abi() -> tuple[int, int, int]:
    """(ELF class, byte order, machine) of this host's programs."""
    return 2, 1, _EM.get(os.uname().machine, 62)


@dataclass
class System:
    """Where the loader looks after a file's own RPATH/RUNPATH, below ``root``."""

    root: Path = Path("/")
    _conf_dirs: list[Path] | None = field(default=None, repr=False)
    _names: dict[Path, frozenset[str]] = field(default_factory=dict, repr=False)
    _idents: dict[Path, Ident | None] = field(default_factory=dict, repr=False)

    def under_root(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def conf_dirs(self) -> list[Path]:
        """The directories of /etc/ld.so.conf, ``include`` globs followed (ldconfig(8))."""
        if self._conf_dirs is None:
            dirs: list[Path] = []
            self._read_conf(self.under_root("/etc/ld.so.conf"), dirs, set())
            self._conf_dirs = dirs
        return self._conf_dirs

    def _read_conf(self, conf: Path, dirs: list[Path], seen: set[Path]) -> None:
        if conf in seen:
            return
        seen.add(conf)
        try:
            text = conf.read_text(errors="replace")
        except OSError:
            return
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line or line.startswith("hwcap "):
                continue
            if line.startswith("include ") or line.startswith("include\t"):
                for pattern in line.split()[1:]:
                    if not pattern.startswith("/"):  # relative to the including file
                        pattern = str(conf.parent.relative_to(self.root) / pattern)
                    for match in sorted(glob.glob(str(self.under_root(pattern)))):
                        self._read_conf(Path(match), dirs, seen)
                continue
            for entry in line.replace(",", " ").replace(":", " ").split():
                if entry.startswith("/") and self.under_root(entry) not in dirs:
                    dirs.append(self.under_root(entry))

    def default_dirs(self, abi: tuple[int, int, int]) -> list[Path]:
        """The loader's built-in directories: the multiarch ones (Debian, Ubuntu), lib64
        for 64-bit files, then /lib and /usr/lib."""
        triplet = _TRIPLETS.get((abi[0], abi[2]))
        names = ([f"/lib/{triplet}", f"/usr/lib/{triplet}"] if triplet else [])
        names += ["/lib64", "/usr/lib64"] if abi[0] == 2 else []
        names += ["/lib", "/usr/lib"]
        return [self.under_root(n) for n in names]

    def lib_token(self, abi: tuple[int, int, int]) -> str:
        """$LIB: Debian's loader says lib/<triplet>, others lib64 or lib."""
        triplet = _TRIPLETS.get((abi[0], abi[2]))
        if triplet and self.under_root(f"/lib/{triplet}").is_dir():
            return f"lib/{triplet}"
        return "lib64" if abi[0] == 2 else "lib"

    def names_in(self, folder: Path) -> frozenset[str]:
        if folder not in self._names:
            try:
                self._names[folder] = frozenset(os.listdir(folder))
            except OSError:
                self._names[folder] = frozenset()
        return self._names[folder]

    def ident(self, path: Path) -> Ident | None:
        if path not in self._idents:
            try:
                with open_source(path) as src:
                    self._idents[path] = read_ident(src)
            except (OSError, NotElf, FormatError):
                self._idents[path] = None
        return self._idents[path]


@dataclass(frozen=True)
class Needed:
    """One DT_NEEDED of a file and where the loader would take it from."""

    name: str
    resolved: Path | None  # None: not found
    via: str | None = None  # "RUNPATH", "RPATH", "path", "ld.so.conf", "system"
    own_copy: Path | None = None  # the prefix's file of that name, when there is one

    @property
    def outside(self) -> bool:
        return self.own_copy is not None and self.resolved is not None

    @property
    def ok(self) -> bool:
        return self.resolved is not None and not self.outside

    def describe(self) -> str:
        """The resolved path, "not found" or "outside the prefix, ..." (--json's value)."""
        if self.resolved is None:
            return NOT_FOUND
        return OUTSIDE if self.outside else str(self.resolved)


@dataclass(frozen=True)
class FileLinkage:
    path: Path
    needed: tuple[Needed, ...]
    runpath: str | None = None
    rpath: str | None = None
    error: str | None = None  # the dynamic section could not be read
    exempt: str | None = None  # why its recipe opts out of the RUNPATH (install.runpath_reason)

    @property
    def ok(self) -> bool:
        return self.exempt is not None or (self.error is None and all(n.ok for n in self.needed))

    @property
    def problems(self) -> tuple[Needed, ...]:
        return tuple(n for n in self.needed if not n.ok)


@dataclass(frozen=True)
class LinkageReport:
    files: tuple[FileLinkage, ...]  # every host ELF file with a dynamic section
    other_abi: int = 0  # ELF files for another machine (i386 runtimes, GPU code objects)
    system_root: Path = Path("/")

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def failing(self) -> tuple[FileLinkage, ...]:
        return tuple(f for f in self.files if not f.ok)


def expand_tokens(entry: str, origin: Path, system: System, abi: tuple[int, int, int]) -> str:
    """$ORIGIN, ${ORIGIN}, $LIB, ${LIB}, $PLATFORM, ${PLATFORM} (ld.so(8))."""
    values = {"ORIGIN": str(origin), "LIB": system.lib_token(abi),
              "PLATFORM": _PLATFORMS.get(abi[2], "")}
    for token, value in values.items():
        entry = entry.replace("${" + token + "}", value).replace("$" + token, value)
    return entry


def _search_list(path: Path, dynamic: Dynamic, system: System, abi: tuple[int, int, int],
                 prefix: Path | None) -> list[tuple[Path, str]]:
    origin = Path(os.path.realpath(path)).parent
    dirs: list[tuple[Path, str]] = []
    # DT_RPATH counts only when there is no DT_RUNPATH
    value, how = (dynamic.runpath, "RUNPATH") if dynamic.runpath is not None else \
        (dynamic.rpath, "RPATH")
    for entry in (value or "").split(":"):
        if not entry:
            continue  # an empty entry means the current directory: not a bare env's
        expanded = Path(expand_tokens(entry, origin, system, abi))
        if not expanded.is_absolute():
            continue  # relative to the current directory, like an empty entry
        # $ORIGIN and the prefix are real paths; anything else names the system
        if "ORIGIN" not in entry and not (prefix and within(expanded, prefix)):
            expanded = system.under_root(str(expanded))
        dirs.append((expanded, how))
    dirs += [(d, "ld.so.conf") for d in system.conf_dirs()]
    dirs += [(d, "system") for d in system.default_dirs(abi)]
    return dirs


def resolve(name: str, path: Path, dynamic: Dynamic, abi: tuple[int, int, int],
            system: System, prefix: Path | None = None) -> tuple[Path | None, str | None]:
    """Where the loader takes ``name`` from for the file at ``path``: (path, how)."""
    if "/" in name:
        candidate = system.under_root(name) if name.startswith("/") else None
        if candidate is not None and _loadable(candidate, abi, system):
            return candidate, "path"
        return None, None
    for folder, how in _search_list(path, dynamic, system, abi, prefix):
        if name in system.names_in(folder):
            candidate = folder / name
            if _loadable(candidate, abi, system):
                return candidate, how
    return None, None


def _loadable(candidate: Path, abi: tuple[int, int, int], system: System) -> bool:
    ident = system.ident(candidate)
    return ident is not None and ident.abi == abi and ident.type in (ET_DYN, ET_EXEC)


_Read = tuple[Ident, Dynamic | None] | str | None


def _read(path: Path) -> _Read:
    """(identification, dynamic section) of an ELF file, a reason it cannot be read, or
    None for a file that is not ELF."""
    try:
        with open_source(path) as src:
            ident = read_ident(src)
            if ident.type not in (ET_EXEC, ET_DYN) or ident.machine == EM_AMDGPU:
                return ident, None
            if ident.abi != host_abi():
                return ident, None  # not readable here, and not loadable by this host
            return ident, dynamic_info(src)
    except (NotElf, OSError, UnsupportedElf):
        return None
    except FormatError as exc:
        return f"corrupt dynamic section: {exc}"


def check_linkage(paths: Iterable[Path], prefix: Path | None, system: System | None = None,
                  prefix_files: Iterable[Path] | None = None,
                  exempt: Mapping[Path, str] | None = None) -> LinkageReport:
    """Resolve every DT_NEEDED of the host ELF files in ``paths``. With a ``prefix``, a
    library found outside it while the prefix has a file of that name (by soname or file
    name, among ``prefix_files``, default ``paths``) fails as "outside the prefix".
    ``exempt`` maps files whose recipe opted out of the RUNPATH to its reason: they are
    resolved and shown, but do not fail."""
    # by real path: the caller's list (install manifests) may spell the prefix differently
    exempt_real = {os.path.realpath(k): v for k, v in (exempt or {}).items()}
    system = system or System()
    abi = host_abi()
    paths = list(paths)
    reads: dict[Path, _Read] = {p: _read(p) for p in paths}
    own: dict[str, Path] = {}
    inside = Path(os.path.realpath(prefix)) if prefix is not None else None
    if inside is not None:
        for path in paths if prefix_files is None else prefix_files:
            if not resolves_within(path, inside):
                continue  # only what the stack installed is its own
            read = reads[path] if path in reads else _read(path)
            if isinstance(read, tuple) and read[1] is not None and read[0].abi == abi \
                    and read[0].type == ET_DYN:
                for name in filter(None, (read[1].soname, path.name)):
                    own.setdefault(name, path)
    files: list[FileLinkage] = []
    other = 0
    for path, read in reads.items():
        if isinstance(read, str):
            files.append(FileLinkage(path, (), error=read))
            continue
        if read is None:
            continue
        ident, dynamic = read
        if ident.abi != abi or ident.machine == EM_AMDGPU:
            other += 1
            continue
        if dynamic is None:
            continue
        needed = []
        # the rule is for the stack's own files: a system file may take the system's copy
        in_prefix = inside is not None and resolves_within(path, inside)
        for name in dynamic.needed:
            resolved, how = resolve(name, path, dynamic, abi, system, inside)
            copy = own.get(name) if in_prefix else None
            if copy is not None and resolved is not None and inside is not None and \
                    resolves_within(resolved, inside):
                copy = None  # taken from the prefix: as it should be
            needed.append(Needed(name, resolved, how, copy))
        files.append(FileLinkage(path, tuple(needed), dynamic.runpath, dynamic.rpath,
                                 exempt=exempt_real.get(os.path.realpath(path))))
    return LinkageReport(tuple(files), other, system.root)
