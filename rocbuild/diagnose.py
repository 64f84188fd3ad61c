"""Known build failures: match a failed step's log tail against a table -> cause and fix.

The table is ordered by priority: the first pattern that matches anywhere in the tail wins,
and within one pattern the newest (last) matching line is the one reported. Root causes that
make every later line noise (a full disk, the OOM killer) come first; the generic "a package
is missing" rows come last, because a missing package is often a symptom of something above.

Each row names where the knowledge comes from (``source``): a row of the error table in the
seed article (seeds/002_17252f5232dfa86a.txt, section 5.1) or a reference file. Fixes are
commands to run, never destructive ones run blindly: where something must be removed, the fix
first shows how to find out what owns it.

Fix texts may hold placeholders filled from ``context`` (``<prefix>``, ``<component>``) and
``{group}`` fields filled from the regex's named groups of the matched line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SWAPFILE_COMMANDS = ("sudo fallocate -l 20G /swapfile && sudo chmod 600 /swapfile && "
                     "sudo mkswap /swapfile && sudo swapon /swapfile")

# Colour codes from clang/gcc/ninja would otherwise split words the regexes look for.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Pattern:
    id: str
    regexes: tuple[re.Pattern[str], ...]
    cause: str
    fix: str
    source: str

    def search(self, line: str) -> re.Match[str] | None:
        for regex in self.regexes:
            match = regex.search(line)
            if match:
                return match
        return None


@dataclass(frozen=True)
class Diagnosis:
    id: str
    cause: str
    fix: str
    matched_line: str


def _p(id: str, regexes: Sequence[str], cause: str, fix: str, *, source: str,
       flags: int = 0) -> Pattern:
    return Pattern(id, tuple(re.compile(r, flags) for r in regexes), cause, fix, source)


PATTERNS: tuple[Pattern, ...] = (
    # A full disk makes compilers, linkers and git fail in odd ways: it goes first.
    # source: DESIGN/issue 5 list; anchors.md §3 C (disk usage, spack#5258)
    _p("no-space",
       [r"No space left on device", r"\bENOSPC\b", r"Disk quota exceeded"],
       "The disk holding the workdir, the prefix or /tmp is full.",
       "See which filesystem is full with `df -h <prefix> . /tmp`; free space (old build trees "
       "under the workdir's build/ folder of components you no longer need, `ccache -C`, "
       "`docker system df`), or move the workdir to a larger disk with `--workdir`; then "
       "`rocbuild build <component>` continues where it stopped.",
       source="issue 5 list; reference/anchors.md §3 C"),

    # Tensile's worker pool dies first when memory runs out; its own message says so.
    # source: seed 002 table row 3 (Tensile crashes half way: memory); gfx906-facts.md §3.3
    # (ROCm/Tensile#1415, #1440; spack caps Tensile_CPU_THREADS at 16)
    _p("tensile-oom",
       [r"TerminatedWorkerError",
        r"A worker process managed by the executor was unexpectedly terminated",
        r"BrokenProcessPool",
        r"Tensile\w*.*\b(?:MemoryError|Killed)\b"],
       "Tensile's kernel generation ran out of memory: each of its parallel worker processes "
       "holds a large part of the GEMM logic in RAM.",
       "Use fewer Tensile threads: raise `tensile_mem` under [resources] in rocblas.toml "
       "(rocbuild gives Tensile free memory / tensile_mem threads), or cap them with "
       "`--jobs 4`; make sure only your GPU targets are built (`rocbuild plan rocblas`); add "
       f"swap if RAM is under 32 GiB: {SWAPFILE_COMMANDS}; then `rocbuild build rocblas`.",
       source="seed 002 error table row 3; reference/gfx906-facts.md §3.3"),

    # source: seed 002 table row 5 (OOM killer: use -j4 instead of $(nproc), or add swap);
    # anchors.md §3 A; reference/doit-notes.md (exit 137 / SIGKILL)
    _p("oom-killed",
       [r"Killed signal terminated program",
        r"\b(?:c\+\+|g\+\+|gcc|cc|clang(?:\+\+)?)(?:-\d+)?: fatal error: Killed\b",
        r"\bld(?:\.\w+)? terminated with signal 9\b",
        r"error: unable to execute command: Killed",
        r"LLVM ERROR: out of memory",
        r"virtual memory exhausted: Cannot allocate memory",
        r"\bout of memory allocating \d+ bytes",
        r"std::bad_alloc",
        r"\bkilled by signal 9\b"],
       "A compiler or linker was killed for lack of memory (the kernel's OOM killer): too many "
       "parallel jobs for the free RAM and swap.",
       "Run again with fewer jobs, e.g. `rocbuild build <component> --jobs 4` (LLVM links need "
       "4-8 GiB each), or raise the memory per job under [resources] in the recipe; with under "
       f"32 GiB of RAM add swap first: {SWAPFILE_COMMANDS}. The build tree is kept, so "
       "finished objects are not compiled again.",
       source="seed 002 error table row 5; reference/anchors.md §3 A"),

    # source: DESIGN/issue 5 list; reference/rocm-6.4-components.md (rocminfo needs cmake 3.25;
    # official pip list pins cmake==3.25.2)
    _p("cmake-too-old",
       [r"CMake (?P<need>\d+\.\d+(?:\.\d+)?) or higher is required\.\s+You are running "
        r"version (?P<have>\d+\.\d+(?:\.\d+)?)"],
       "The project needs a newer CMake than the one on PATH.",
       "Install CMake {need} or newer: `python3 -m pip install --user 'cmake>={need}'` (then "
       "make sure `~/.local/bin` comes first on PATH and `cmake --version` shows it), or use "
       "Kitware's apt repository (https://apt.kitware.com); then `rocbuild build "
       "<component>`.",
       source="issue 5 list; reference/rocm-6.4-components.md §2.9"),

    # Distro HIP headers in /usr/include/hip are found before the prefix's: odd errors in
    # hip_runtime_api.h / hip_bf16.h, or a hip_version.h that does not match the library.
    # source: gfx906-facts.md §3.3 (ggml-org/llama.cpp#16320 gfx906 ROCm 6.4.3, #15196)
    _p("usr-include-hip",
       [r"(?:^|[\s'\"(:])/usr/include/hip/",
        r"-I\s*/usr/include/hip\b",
        r"hip_version\.h.*(?:error|mismatch|redefin)",
        r"(?:error|mismatch|redefin).*hip_version\.h"],
       "A system HIP (headers in /usr/include/hip from a distro package) is being used instead "
       "of the one in the prefix, and the two versions do not match.",
       "Find the package that owns it: `dpkg -S /usr/include/hip` (or `rpm -qf "
       "/usr/include/hip`); remove that package and the distro ROCm -dev packages that come "
       "with it (usually `sudo apt-get remove libamdhip64-dev libhipblas-dev librocblas-dev "
       "librocsolver-dev`, check what apt will remove before you confirm); do not delete the "
       "folder by hand. Then `rocbuild build <component>`.",
       source="reference/gfx906-facts.md §3.3 (llama.cpp#16320, #15196)"),

    # rocBLAS 6.4 includes <roctracer/roctx.h> and links a bare -lroctx64.
    # source: reference/rocm-6.4-components.md §3.8 (rocBLAS#1590, Spack 0008-link-roctracer,
    # TheRock#57)
    _p("roctx-missing",
       [r"roctracer/roctx\.h'? file not found",
        r"roctracer/roctx\.h: No such file",
        r"cannot find -lroctx64",
        r"unable to find library -lroctx64",
        r"libroctx64\.so[.\d]*: cannot open shared object file"],
       "roctracer (libroctx64 and roctracer/roctx.h) is not installed in the prefix; rocBLAS "
       "6.4 includes and links it without declaring the dependency.",
       "Build roctracer into the same prefix first: check `ls <prefix>/lib/libroctx64.so "
       "<prefix>/include/roctracer/roctx.h`, make sure the failing recipe lists \"roctracer\" "
       "in `depends`, then `rocbuild build roctracer <component>`.",
       source="reference/rocm-6.4-components.md §3.8"),

    # clr checks `import CppHeaderParser` when USE_PROF_API=ON (the default).
    # source: reference/rocm-6.4-components.md §2.10, §2.11 (clr, roctracer: pip CppHeaderParser)
    _p("cppheaderparser-missing",
       [r"No module named '?CppHeaderParser'?",
        r"CppHeaderParser.*(?:not installed|not found)"],
       "The Python module CppHeaderParser, which clr and roctracer use to generate their "
       "profiling API headers, is not installed for the python3 that CMake found.",
       "Install it for that python3: `python3 -m pip install --user CppHeaderParser` (on an "
       "externally managed Python: `python3 -m venv ~/rocbuild-venv && "
       "~/rocbuild-venv/bin/pip install CppHeaderParser`, then run rocbuild with "
       "~/rocbuild-venv/bin first on PATH); or build clr without the profiling API "
       "(`-DUSE_PROF_API=OFF` in clr.toml). Then `rocbuild build <component>`.",
       source="reference/rocm-6.4-components.md §2.10, §2.11"),

    # rocBLAS creates a venv (python -m venv) to pip-install Tensile into.
    # source: reference/rocm-6.4-components.md §3 (BUILD_WITH_PIP, cmake/virtualenv.cmake;
    # python3-venv in the official package list)
    _p("python-venv-missing",
       [r"ensurepip is not\s*(?:available)?",
        r"No module named '?(?:venv|ensurepip)'?",
        r"'-m', 'ensurepip'.*returned non-zero exit status",
        r"apt install (?P<pkg>python3(?:\.\d+)?-venv)"],
       "Python's venv module (ensurepip) is missing: rocBLAS creates a virtual environment to "
       "install Tensile into.",
       "Install it: `sudo apt-get install python3-venv` (on Debian/Ubuntu use the package for "
       "your Python version, e.g. `python3.11-venv`, as the log says); then `rocbuild build "
       "<component>`.",
       source="reference/rocm-6.4-components.md §3 (BUILD_WITH_PIP), §5.1"),

    # Before "network": pip's own lines also name host resolution failures, and the fix differs.
    # source: reference/rocm-6.4-components.md §8 (offline Tensile install: pip needs setuptools
    # and wheel for build isolation)
    _p("tensile-pip-offline",
       [r"Could not find a version that satisfies the requirement (?P<req>setuptools|wheel)",
        r"No matching distribution found for (?P<req>setuptools|wheel)"],
       "pip could not download setuptools/wheel to build Tensile in rocBLAS's virtual "
       "environment: the host is offline or behind a proxy pip does not know.",
       "Either give pip the network (`export HTTPS_PROXY=...`), or make the wheels local: "
       "while online run `python3 -m pip download setuptools wheel -d ~/wheels`, then add to "
       "rocblas.toml `[env]` the lines `PIP_FIND_LINKS = \"/home/you/wheels\"` and "
       "`PIP_NO_INDEX = \"1\"`; then `rocbuild build rocblas`.",
       source="reference/rocm-6.4-components.md §8 (offline Tensile install)"),

    # source: DESIGN 3.2 (--mirror rules); issue 5 list (git/network failures)
    _p("network",
       [r"Could not resolve host",
        r"Temporary failure in name resolution",
        r"Failed to connect to \S+ port \d+",
        r"unable to access '(?P<url>[^']+)'",
        r"Network is unreachable",
        r"Connection timed out",
        r"gnutls_handshake\(\) failed|SSL_connect|server certificate verification failed"],
       "A download failed: the host cannot reach the source server (no network, DNS, proxy "
       "or TLS trouble).",
       "Check the connection with `git ls-remote {url}` (or any source URL of the recipe) and "
       "set `https_proxy` if you need one; to build without the network, point rocbuild at "
       "local mirrors with `--mirror https://github.com/=file:///srv/mirrors/` (like git's "
       "insteadOf); then `rocbuild build <component>`.",
       source="issue 5 list; DESIGN.md 3.2 (--mirror)"),

    # ROCR, clr and device-libs look for the ROCm LLVM under <prefix>/llvm (or lib/llvm).
    # source: reference/rocm-6.4-components.md §2.3, §2.8 (find_package(Clang ... HINTS
    # ${CMAKE_PREFIX_PATH}/llvm PATHS /opt/rocm/llvm))
    _p("llvm-missing",
       [r"Could not find a package configuration file provided by \"(?P<pkg>LLVM|Clang|LLD)\"",
        r"Could NOT find (?P<pkg>LLVM|Clang)\b",
        r"\b(?:LLVM|Clang)_DIR-NOTFOUND"],
       "CMake cannot find the ROCm LLVM (clang with the AMDGPU backend) in the prefix: the llvm "
       "component is not installed there, or not where this project looks (<prefix>/llvm).",
       "Check `rocbuild status llvm` and `ls <prefix>/lib/cmake/llvm <prefix>/llvm/lib/cmake/"
       "llvm`; build it with `rocbuild build llvm`; if it is installed but elsewhere, add "
       "`-DLLVM_DIR=<prefix>/lib/cmake/llvm` and `-DClang_DIR=<prefix>/lib/cmake/clang` to "
       "the failing recipe's cmake args (or a `<prefix>/llvm` symlink to the LLVM install). "
       "Then `rocbuild build <component>`.",
       source="reference/rocm-6.4-components.md §2.3, §2.8"),

    # source: seed 002 table row 1 (Could NOT find ROCm: set -DROCM_PATH / export ROCM_PATH)
    _p("rocm-not-found",
       [r"Could NOT find ROCm\b",
        r"Could not find a package configuration file provided by "
        r"\"(?:ROCM|ROCmCMakeBuildTools|rocm-cmake)\""],
       "CMake cannot find the ROCm installation or its CMake modules (rocm-cmake) in the "
       "prefix.",
       "rocbuild sets ROCM_PATH and CMAKE_PREFIX_PATH to <prefix>: check that rocm-cmake is "
       "built there (`rocbuild status rocm-cmake`, `ls <prefix>/share/rocmcmakebuildtools "
       "<prefix>/share/rocm/cmake`) and listed in the failing recipe's `depends`; if the "
       "project reads ROCM_PATH as a CMake variable, add `-DROCM_PATH=<prefix>` to its cmake "
       "args. Then `rocbuild build rocm-cmake <component>`.",
       source="seed 002 error table row 1"),

    # source: seed 002 table row 4 (libamdhip64.so not found when linking: HIP not installed
    # or LD_LIBRARY_PATH not set)
    _p("hip-missing",
       [r"cannot find -lamdhip64",
        r"unable to find library -lamdhip64",
        r"libamdhip64\.so[.\d]*: cannot open shared object file",
        r"libamdhip64\.so[.\d]*: No such file",
        r"Could not find a package configuration file provided by \"(?:hip|HIP|hip-lang)\""],
       "The HIP runtime (libamdhip64 from clr) is not installed in the prefix, or the "
       "loader cannot find it.",
       "Check `ls <prefix>/lib/libamdhip64.so*` and `rocbuild status clr`; build it with "
       "`rocbuild build clr`; make sure the failing recipe lists \"clr\" in `depends`. When "
       "running a built program, `source <prefix>/env.sh` first (`ldconfig -p | grep "
       "amdhip64` shows a system copy that could shadow it). Then `rocbuild build "
       "<component>`.",
       source="seed 002 error table row 4; reference/rocm-6.4-components.md §2.10"),

    # source: reference/rocm-6.4-components.md §2.8 (pkg_check_modules(drm REQUIRED libdrm),
    # libdrm_amdgpu); official package list libdrm-dev
    _p("libdrm-missing",
       [r"No package '(?:libdrm|libdrm_amdgpu)' found",
        r"Package '(?:libdrm|libdrm_amdgpu)',? .*not found",
        r"xf86drm\.h'?:? (?:No such file|file not found)",
        r"amdgpu_drm\.h'?:? (?:No such file|file not found)",
        r"cannot find -ldrm(?:_amdgpu)?\b",
        r"Could NOT find (?:LIBDRM|Libdrm|DRM)\b"],
       "The libdrm development files (libdrm, libdrm_amdgpu) are not installed.",
       "Install them: `sudo apt-get install libdrm-dev pkg-config` (Fedora: `sudo dnf install "
       "libdrm-devel pkgconf`); then `rocbuild build <component>`.",
       source="reference/rocm-6.4-components.md §2.8, §5.1"),

    # source: reference/rocm-6.4-components.md §2.8 (find_package(LibElf REQUIRED))
    _p("libelf-missing",
       [r"Could NOT find (?:LibElf|LIBELF|libelf)\b",
        r"No package 'libelf' found",
        r"\b(?:lib|g)elf\.h'?:? (?:No such file|file not found)",
        r"cannot find -lelf\b"],
       "The libelf development files are not installed.",
       "Install them: `sudo apt-get install libelf-dev` (Fedora: `sudo dnf install "
       "elfutils-libelf-devel`); then `rocbuild build <component>`.",
       source="reference/rocm-6.4-components.md §2.8, §5.1"),

    # source: reference/rocm-6.4-components.md §2.8 (libhsakmt: find_library(numa REQUIRED))
    _p("libnuma-missing",
       [r"Could not find \w+ using the following names: (?:lib)?numa\b",
        r"Could NOT find (?:NUMA|Numa|numa|LibNUMA)\b",
        r"\bnuma\.h'?:? (?:No such file|file not found)",
        r"cannot find -lnuma\b"],
       "The NUMA library development files (libnuma) are not installed.",
       "Install them: `sudo apt-get install libnuma-dev` (Fedora: `sudo dnf install "
       "numactl-devel`); then `rocbuild build <component>`.",
       source="reference/rocm-6.4-components.md §2.8, §5.1"),

    # The compiler does not know the GPU target: an old or non-ROCm LLVM (e.g. the system
    # clang picked up instead of the prefix's), or a target this ROCm release dropped.
    # Generic "Unsupported target platform/type" messages must not match: a gfx name or
    # rocm_check_target_ids' "by compiler" is required on the line.
    # source: seed 002 table row 2 (Unsupported gpu arch: gfx906: old compiler, use the ROCm
    # LLVM with AMDGPU_TARGETS=gfx906); rocm-6.4-components.md §3.3 (rocm_check_target_ids);
    # gfx906-facts.md §3.3 (Tensile "Unsupported GPU target", ROCm/rocm-libraries#2297)
    _p("unknown-gpu-target",
       [r"unknown target CPU '(?P<target>gfx\w+)'",
        r"unsupported (?:HIP |CUDA )?gpu arch(?:itecture)?:?\s*'?(?P<target>gfx[\w:+-]*)",
        r"unsupported target\b.*?\b(?P<target>gfx[\w:+-]*)",
        r"unsupported target\b.*by compiler",
        r"'(?P<target>gfx\w+)' is not a recognized processor for this target",
        r"invalid target ID '?(?P<target>gfx[\w:+-]*)"],
       "The compiler in use does not know this GPU target: it is not the ROCm LLVM of the "
       "prefix (e.g. the system clang was picked up), it is too old, or the target is "
       "misspelt.",
       "See which compiler CMake used: `grep -E 'CMAKE_(CXX|HIP)_COMPILER:' "
       "<workdir>/build/<component>/CMakeCache.txt` (it should be under <prefix>); check that "
       "LLVM knows the target: `<prefix>/bin/llc -march=amdgcn -mcpu=help 2>&1 | grep gfx`; "
       "pass the target explicitly (`--target gfx906`, recipes use GPU_TARGETS / "
       "AMDGPU_TARGETS); then `rocbuild build <component>`.",
       source="seed 002 error table row 2; reference/rocm-6.4-components.md §3.3; "
              "reference/gfx906-facts.md §3.3",
       flags=re.IGNORECASE),
)


def _fill(text: str, match: re.Match[str], context: Mapping[str, str]) -> str:
    groups = {k: v for k, v in match.groupdict().items() if v}
    # `{url}` when the line named none: say what to put there instead of an empty hole
    text = _FIELD.sub(lambda m: groups.get(m.group(1), f"<{m.group(1)}>"), text)
    for key, value in context.items():
        text = text.replace(f"<{key}>", value)
    return text


def clean(line: str) -> str:
    return _ANSI.sub("", line).rstrip("\r\n")


def diagnose(lines: Sequence[str], *, context: Mapping[str, str] | None = None
             ) -> Diagnosis | None:
    """The first known failure (by table priority) found in ``lines``; the newest matching
    line of that pattern is reported. ``context`` fills ``<prefix>``, ``<component>`` and
    ``<workdir>`` in the fix. None when nothing in the table matches."""
    cleaned = [clean(line) for line in lines]
    for pattern in PATTERNS:
        for line in reversed(cleaned):
            match = pattern.search(line)
            if match:
                return Diagnosis(pattern.id, pattern.cause,
                                 _fill(pattern.fix, match, context or {}), line.strip())
    return None
