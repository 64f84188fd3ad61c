"""What the selected recipes ask of the host, checked the same way by `build` and `doctor`.

preflight.py refuses a build on any ``fail`` finding before the first fetch; doctor.py shows
the very same findings as its "packages", "toolchain" and "prefix" checks. Both build the
inputs with ``requirements(stack)`` and ask the host through a ``Probe`` (the PATH to search
and a way to run a read-only query), so a test can hand in a PATH with a fake tool.

- system packages: every ``system_packages`` entry. On Debian/Ubuntu through dpkg-query; an
  entry is also met when the recipe's ``system_checks`` probe for it passes (a header, a
  pkg-config name or a tool), which is how other distributions and tools installed outside the
  package manager (a pip cmake) are checked. One finding lists everything missing, with the
  one apt-get line.
- tools in a window, not only a floor: CMake, Ninja, GCC, and the Python that rocBLAS makes
  Tensile's venv from.
- the prefix: writable by this user (rocbuild never runs sudo), no ':' or whitespace.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rocbuild import proc
from rocbuild.checks import privilege
from rocbuild.model.graph import Stack, prefix_problem
from rocbuild.model.launchers import version_text

FAIL, WARN = "fail", "warn"
# Tools every build runs (configure, compile, fetch), whatever the recipes list.
BASE_TOOLS = ("cmake", "ninja", "git")
# Debian/Ubuntu package -> the program it provides; such an entry is also met by the program
# on PATH (a cmake from pip, a distribution that names the package otherwise).
PACKAGE_TOOLS = {"cmake": "cmake", "ninja-build": "ninja", "git": "git", "perl": "perl",
                 "pkg-config": "pkg-config", "python3": "python3", "g++": "g++", "xxd": "xxd",
                 "glslc": "glslc"}
TOOL_PACKAGES = {tool: package for package, tool in PACKAGE_TOOLS.items()}

# CMake window. Floor: rocprofiler-register 6.4's cmake_minimum_required(VERSION 3.22); AMD's
# ROCm 6.4 build images pin 3.25.2 (docs/architecture.md, Facts), below that a warning.
# CMake 4 removed policies older than 3.5 and refuses cmake_policy(SET CMP0053 OLD), which
# device-libs' cmake/OCL.cmake runs at 6.4.x (fixed upstream by ROCm/llvm-project a18cc4c).
CMAKE_FLOOR, CMAKE_TESTED, CMAKE_BREAKS = (3, 22), (3, 25), (4, 0)
CMAKE_ADVICE = ("python3 -m pip install --user 'cmake>=3.25,<4' (or Kitware's apt repository "
                "pinned to 3.x), then make sure ~/.local/bin comes first on PATH")
# Components whose 6.4 sources stop under CMake 4 unless a patch of their checkout carries
# the fix; the value is a word only the fixing patch contains.
CMAKE4_FIXES = {"device-libs": "CMP0053"}
# CMake puts `install` in Ninja's "console" pool (CMake docs, prop_gbl/JOB_POOLS), a pool Ninja
# has since 1.5 (cmake-developers list, 2014-10, "Ninja: Use 'console' pool"); LLVM's
# LLVM_PARALLEL_LINK_JOBS is a job pool too. CMake itself stops below Ninja 1.3.
NINJA_FLOOR = (1, 5)
# GCC 15 no longer includes <cstdint> through other headers: ROCR-Runtime stops with
# "'uint64_t' does not name a type" (ROCm/ROCR-Runtime#227, fixed upstream 2025-05 in 5cc61b7;
# the FireBurn/Overlay rocr-runtime-6.4.3 ebuild still applies a gcc15-stdint patch); and its
# libstdc++ asserts with the host-only __glibcxx_assert inside std::clamp and friends, which
# breaks HIP device code (gcc PR 115740; Gentoo's hip-6.4.3-r1 carries a fix). rocbuild carries
# both fixes as patches (patches/rocr/, patches/clr/); a component in this table whose
# checkout's patches lack the fix (the value: a word only that patch contains) is warned about.
GCC_BREAKS = (15, 0)
GCC15_FIXES = {"rocr": "<cstdint>", "clr": "__glibcxx_assert"}
# The Python rocBLAS makes Tensile's venv from: find_package(Python3) (rocBLAS CMakeLists.txt:
# 46-47) and `${python} -m venv` (cmake/virtualenv.cmake:4-20, rocBLAS@b520bc8), i.e. the first
# python3 on the build's PATH, which is rocbuild's build venv (made from rocbuild's own
# interpreter, build.py) when the recipes need Python packages. Tensile asks for >= 3.5
# (setup.py:55, Tensile@be49885); Gentoo's Tensile-6.4.3 ebuild is tested with 3.12 and 3.13
# (PYTHON_COMPAT, gentoo/gentoo@7b6f2e6); Ubuntu 22.04's 3.10 is the oldest rocbuild runs on.
TENSILE_PYTHON = ((3, 10), (3, 14))


@dataclass(frozen=True)
class Finding:
    check: str  # the doctor check it belongs to: packages, toolchain or prefix
    level: str  # FAIL stops a build; WARN is shown and lets it go on
    what: str
    fix: str
    installs: tuple[str, ...] = ()  # the apt packages ``fix`` installs (one_install_line)


@dataclass(frozen=True)
class Requirements:
    """What the selected components ask of the host (from the recipes)."""

    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # pkg -> components
    checks: Mapping[str, str] = field(default_factory=dict)  # pkg -> "header:zlib.h" etc.
    cmake4_blockers: tuple[str, ...] = ()  # components that stop under CMake 4
    gcc15_unfixed: tuple[str, ...] = ()  # components that stop under GCC 15 (no fix carried)
    tensile_python: bool = False  # a selected component builds Tensile's venv
    venv_python: str | None = None  # the interpreter of rocbuild's build venv, when one is made


RunTool = Callable[[Sequence[str]], "tuple[int, str] | None"]


def run_tool(argv: Sequence[str]) -> tuple[int, str] | None:
    """Run a read-only query (``cmake --version``, ``dpkg-query``): (exit code, stdout), or
    None when it cannot start or hangs. Non-zero exits still return their output."""
    done = proc.run_capture(argv, timeout=30)
    return (done.returncode, done.stdout) if done.answered else None


# what a probe's answer reads besides the program: dpkg-query answers from dpkg's database
PROBE_READS: Mapping[str, tuple[Path, ...]] = {"dpkg-query": (Path("/var/lib/dpkg/status"),)}


def kept_run_tool(memo: Path) -> RunTool:
    """``run_tool`` whose answers are kept in ``memo`` while the program (and what it reads,
    PROBE_READS) is unchanged (proc.run_probe): a rerun does not ask again."""

    def run(argv: Sequence[str]) -> tuple[int, str] | None:
        reads = PROBE_READS.get(Path(argv[0]).name, ())
        done = proc.run_probe(argv, memo=memo, reads=reads)
        return (done.returncode, done.stdout) if done.answered else None

    return run


@dataclass(frozen=True)
class Probe:
    path: str  # the PATH the build will run with
    run: RunTool = run_tool
    env: Mapping[str, str] = field(default_factory=dict)  # for CPATH and friends
    # the file system whose system folders a header check reads (usr/include, ...): the
    # host's; a test hands in a folder of its own, so no answer depends on what the host
    # has installed
    root: Path = Path("/")

    def which(self, tool: str) -> str | None:
        return shutil.which(tool, path=self.path)


def users_by_package(needs: Iterable[tuple[str, Iterable[str]]]) -> dict[str, tuple[str, ...]]:
    """(component, its packages) pairs as package -> the components that need it."""
    users: dict[str, list[str]] = {}
    for component, packages in needs:
        for package in packages:
            users.setdefault(package, []).append(component)
    return {p: tuple(c) for p, c in users.items()}


def requirements(stack: Stack) -> Requirements:
    selected = stack.selected()
    return Requirements(packages=users_by_package((c.name, c.recipe.system_packages)
                                                  for c in selected),
                        checks={k: v for c in selected for k, v in c.recipe.system_checks.items()},
                        cmake4_blockers=_lacking_fix(stack, CMAKE4_FIXES),
                        gcc15_unfixed=_lacking_fix(stack, GCC15_FIXES),
                        tensile_python=any("tensile" in c.depends for c in selected),
                        venv_python=sys.executable if stack.python_needs() != ((), ()) else None)


def _lacking_fix(stack: Stack, fixes: Mapping[str, str]) -> tuple[str, ...]:
    """The selected components in ``fixes`` whose checkout's patches lack the fix's word."""
    return tuple(c.name for c in stack.selected() if (word := fixes.get(c.name))
                 and not any(word in p.path.read_text(errors="replace")
                             for p in stack.components[c.checkout].patches))


# --- system packages ---------------------------------------------------------------------
def _include_dirs(probe: Probe) -> list[Path]:
    """Where a compile finds a header: the folders of CPATH and its kin, then the system's
    (``/usr/local/include``, ``/usr/include`` and its multiarch folder) under ``probe.root``."""
    dirs = [Path(d) for var in ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH")
            for d in probe.env.get(var, "").split(":") if d]
    system = probe.root / "usr" / "include"
    return [*dirs, probe.root / "usr" / "local" / "include", system,
            *sorted(Path(p) for p in glob.glob(str(system / "*-linux-*")))]


def probe_passes(spec: str, probe: Probe) -> bool:
    kind, _, name = spec.partition(":")
    if kind == "tool":
        return probe.which(name) is not None
    if kind == "header":
        return any((d / name).is_file() for d in _include_dirs(probe))
    if kind == "pkg-config":
        tool = probe.which("pkg-config")
        result = probe.run([tool, "--exists", name]) if tool else None
        return result is not None and result[0] == 0
    return False


def _dpkg_installed(packages: Sequence[str], probe: Probe) -> set[str] | None:
    dpkg = probe.which("dpkg-query")
    if dpkg is None:
        return None
    result = probe.run([dpkg, "-W", "-f=${Package}\t${db:Status-Abbrev}\n", *packages])
    if result is None:
        return None
    return {line.split("\t")[0] for line in result[1].splitlines()
            if "\t" in line and line.split("\t")[1].startswith("ii")}


def package_findings(reqs: Requirements, probe: Probe) -> tuple[list[Finding], list[str]]:
    """(findings, packages that could not be checked on this host)."""
    # the base tools are the toolchain check's (one finding each, not two)
    wanted = sorted(p for p in reqs.packages if PACKAGE_TOOLS.get(p) not in BASE_TOOLS)
    if not wanted:
        return [], []
    installed = _dpkg_installed(wanted, probe)
    missing, unchecked = [], []
    for package in wanted:
        spec = reqs.checks.get(package) or (
            f"tool:{PACKAGE_TOOLS[package]}" if package in PACKAGE_TOOLS else None)
        if installed is not None and package in installed:
            continue
        if spec is not None and probe_passes(spec, probe):
            continue
        if installed is None and spec is None:
            unchecked.append(package)
        else:
            missing.append(package)
    if not missing:
        return [], unchecked
    users = "; ".join(f"{p} ({', '.join(reqs.packages[p])})" for p in missing)
    if installed is not None:
        return [Finding("packages", FAIL, f"not installed: {users}",
                        privilege.apt_install(*missing), tuple(missing))], unchecked
    probes = ", ".join(f"{p}: {reqs.checks.get(p) or 'tool:' + PACKAGE_TOOLS[p]}"
                       for p in missing)
    fix = f"install your distribution's packages for: {probes}"
    return [Finding("packages", FAIL, f"not installed: {users}", fix)], unchecked


# --- tool versions -------------------------------------------------------------------------
def tool_version(tool: str, probe: Probe, pattern: str) -> tuple[int, ...] | None:
    result = probe.run([tool, "--version"])
    match = re.search(pattern, result[1]) if result else None
    return tuple(int(x) for x in match.groups()) if match else None


def cmake_version(path: str, probe: Probe) -> tuple[int, ...] | None:
    """(major, minor) of the cmake at ``path``: the one probe of doctor and preflight."""
    return tool_version(path, probe, r"cmake version (\d+)\.(\d+)")


def _cmake(path: str, reqs: Requirements, probe: Probe) -> list[Finding]:
    version = cmake_version(path, probe)
    if version is None:
        return [Finding("toolchain", WARN, f"cannot read the version of {path}",
                        f"run `{path} --version`; rocbuild needs cmake >= 3.25 and < 4")]
    shown = version_text(version)
    if version < CMAKE_FLOOR:
        return [Finding("toolchain", FAIL, f"cmake {shown} is older than "
                        f"{version_text(CMAKE_FLOOR)}, which the ROCm 6.4 components require",
                        CMAKE_ADVICE)]
    if version < CMAKE_TESTED:
        return [Finding("toolchain", WARN, f"cmake {shown} is older than 3.25, which ROCm "
                        "6.4's components are built with", CMAKE_ADVICE)]
    if version >= CMAKE_BREAKS:
        if reqs.cmake4_blockers:
            return [Finding(
                "toolchain", FAIL,
                f"cmake {shown} ({path}) cannot configure {', '.join(reqs.cmake4_blockers)}: "
                "its 6.4 cmake/OCL.cmake sets policy CMP0053, which CMake 4 removed",
                f"{CMAKE_ADVICE}; or carry the backport of ROCm/llvm-project a18cc4c in "
                "the patches of the checkout it uses (rocbuild ships it in "
                "patches/llvm-project/)")]
        # e.g. clr's hiprtc-config.cmake.in asks for 3.3 (the FireBurn/Overlay hip-6.4.3 ebuild
        # raises it to 3.5 with sed)
        return [Finding("toolchain", WARN, f"cmake {shown}: ROCm 6.4 is built and tested with "
                        "CMake 3.x; CMake 4 rejects projects that ask for policies older "
                        "than 3.5", f"if a configure stops on a policy, {CMAKE_ADVICE}")]
    return []


def _ninja(path: str, probe: Probe) -> list[Finding]:
    version = tool_version(path, probe, r"^(\d+)\.(\d+)")
    if version is not None and version < NINJA_FLOOR:
        return [Finding("toolchain", FAIL, f"ninja {version_text(version)} is older than 1.5, "
                        "which job pools (LLVM_PARALLEL_LINK_JOBS) need",
                        "python3 -m pip install --user ninja, or "
                        f"{privilege.apt_install('ninja-build')} from a newer release")]
    return []


def _gcc(reqs: Requirements, probe: Probe) -> list[Finding]:
    compiler = probe.env.get("CXX") or "g++"
    path = probe.which(compiler)
    if path is None:
        return []
    result = probe.run([path, "-dumpfullversion"])
    match = re.match(r"(\d+)\.(\d+)", result[1].strip()) if result else None
    if match is None or "clang" in (probe.run([path, "--version"]) or (0, ""))[1]:
        return []
    version = (int(match.group(1)), int(match.group(2)))
    if version >= GCC_BREAKS and reqs.gcc15_unfixed:
        return [Finding("toolchain", WARN, f"{compiler} {version_text(version)}: GCC 15 breaks "
                        f"{', '.join(reqs.gcc15_unfixed)} of ROCm 6.4 (headers they relied on no "
                        "longer come along) and their patches do not carry the fix",
                        "carry rocbuild's patches/rocr/ and patches/clr/ in your recipes "
                        "folder's patches, or build the host code with an older GCC: "
                        f"{privilege.apt_install('g++-14')}, then CC=gcc-14 CXX=g++-14 "
                        "rocbuild build ...")]
    return []


def _tensile_python(reqs: Requirements, probe: Probe) -> list[Finding]:
    path = reqs.venv_python or probe.which("python3")
    if path is None:
        return []
    version = tool_version(path, probe, r"Python (\d+)\.(\d+)")
    low, high = TENSILE_PYTHON
    if version is None or low <= version < high:
        return []
    way_out = ("run rocbuild itself with a Python in that range (pipx install --python "
               "python3.12 .)" if reqs.venv_python else
               "put a python3 in that range first on PATH for the build")
    return [Finding("toolchain", WARN, f"Python {version_text(version)} ({path}) makes Tensile's "
                    f"venv; Tensile 6.4 is known to work with {version_text(low)} to "
                    f"{high[0]}.{high[1] - 1}", way_out)]


def tool_findings(reqs: Requirements, probe: Probe) -> list[Finding]:
    found = {tool: probe.which(tool) for tool in BASE_TOOLS}
    missing = [tool for tool, path in found.items() if path is None]
    findings = []
    if missing:
        packages = tuple(TOOL_PACKAGES.get(t, t) for t in missing)
        findings.append(Finding("toolchain", FAIL, f"missing: {', '.join(missing)} (not "
                                "installed, or not on PATH)", privilege.apt_install(*packages),
                                packages))
    if found.get("cmake"):
        findings += _cmake(str(found["cmake"]), reqs, probe)
    if found.get("ninja"):
        findings += _ninja(str(found["ninja"]), probe)
    findings += _gcc(reqs, probe)
    if reqs.tensile_python:
        findings += _tensile_python(reqs, probe)
    return findings


# --- prefix --------------------------------------------------------------------------------
def nearest_existing(path: Path) -> Path:
    return next((candidate for candidate in (path, *path.parents) if candidate.exists()),
                Path("/"))


def free_space(path: Path) -> tuple[int, int]:
    """(filesystem id, bytes free to an unprivileged user) where ``path`` is or will be: the
    one disk probe of doctor and preflight."""
    probe = nearest_existing(path)
    stats = os.statvfs(probe)
    return os.stat(probe).st_dev, stats.f_bavail * stats.f_frsize


@dataclass(frozen=True)
class DiskUse:
    """The places (label, path) on one filesystem, its free bytes and what they all need."""

    places: tuple[tuple[str, Path], ...]
    base: Path  # the nearest existing folder of the first place: where free space is measured
    free: int
    need: int

    @property
    def short(self) -> bool:
        return self.free < self.need

    @property
    def names(self) -> str:
        return " and ".join(f"{label} {path}" for label, path in self.places)


def disk_by_filesystem(wants: Sequence[tuple[str, Path, int]],
                       measure: Callable[[Path], tuple[int, int]] = free_space
                       ) -> list[DiskUse]:
    """Each filesystem of ``wants`` (label, path, bytes needed) with the sum of what its places
    need against its free space: the one disk rule of doctor and preflight. A workdir and a
    prefix on one disk share its free space, so each checked alone could pass while both do
    not fit."""
    groups: dict[int, list[tuple[str, Path, int]]] = {}
    free_of: dict[int, int] = {}
    for label, path, amount in wants:
        fs, free = measure(path)
        groups.setdefault(fs, []).append((label, path, amount))
        free_of[fs] = free
    return [DiskUse(tuple((label, path) for label, path, _ in items),
                    nearest_existing(items[0][1]), free_of[fs],
                    sum(amount for _, _, amount in items))
            for fs, items in groups.items()]


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def prefix_findings(prefix: Path, user: str) -> list[Finding]:
    bad = prefix_problem(prefix)
    if bad:
        return [Finding("prefix", FAIL, f"the prefix {prefix} {bad}",
                        "choose another --prefix")]
    base = nearest_existing(prefix)
    if not base.is_dir():
        return [Finding("prefix", FAIL, f"the prefix {prefix} cannot be created: {base} is not "
                        "a folder", f"choose another --prefix, or move {base} away")]
    if _read_only(base):  # os.access says "not writable" too; the fix is not a chown
        return [Finding("prefix", FAIL, f"the prefix {prefix} is on a read-only file system "
                        f"({base})", f"remount {base}'s file system read-write, or pick a "
                        "--prefix on a writable one")]
    if not os.access(base, os.W_OK | os.X_OK):
        return [Finding("prefix", FAIL, f"the prefix {prefix} is not writable by {user} ({base} "
                        "belongs to someone else)",
                        "run once: " + privilege.as_root(
                            f"mkdir -p {shlex.quote(str(prefix))}",
                            f"chown {user}: {shlex.quote(str(prefix))}")
                        + "  (rocbuild never runs sudo itself), or pick a --prefix you own")]
    return []


def host_findings(reqs: Requirements, probe: Probe, prefix: Path | None,
                  user: str) -> list[Finding]:
    """Everything above, in the order a user fixes it: prefix, tools, packages."""
    findings = prefix_findings(prefix, user) if prefix is not None else []
    findings += tool_findings(reqs, probe)
    missing, unchecked = package_findings(reqs, probe)
    findings += missing
    if unchecked:  # doctor shows the same list as its skipped "packages" check
        findings.append(Finding("packages", WARN, "not checked (no dpkg-query, and no "
                                f"system_checks probe in the recipes): {' '.join(unchecked)}",
                                "make sure your package manager has installed them"))
    return findings


def one_install_line(findings: Sequence[Finding]) -> str | None:
    """The apt-get lines of several findings as one command, or None when there is none."""
    names: list[str] = []
    for f in findings:
        if f.level == FAIL:
            names += [n for n in f.installs if n not in names]
    return privilege.apt_install(*names) if names else None
