"""CMake with Ninja: the build system of every ROCm component and of llama.cpp.

What rocbuild adds to every CMake project lives here: ``-G Ninja``, the install prefix,
CMAKE_PREFIX_PATH (the prefix, then a --base) and an install RUNPATH relative to $ORIGIN.
CMake's own record of an install is ``<build>/install_manifest.txt``, one absolute path a
line; this module is the one reader of it (and says where the binary cache writes one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from rocbuild.errors import ConfigError
from rocbuild.model import cmakecode, launchers
from rocbuild.model.buildsystems import (
    BuildSystem,
    Commands,
    HostPrograms,
    Lint,
    install_runpath,
    refuse_reserved,
    register,
)

if TYPE_CHECKING:
    from rocbuild.model.base import Base
    from rocbuild.model.graph import Component, Stack

MANIFEST = "install_manifest.txt"
UNUSED_HEADER = "Manually-specified variables were not used by the project:"
# CMake reads these itself whatever the project's files say
CMAKE_OWN_DEFINES = frozenset({"BUILD_SHARED_LIBS"})
# what a recipe's -U may not remove: without it CMake installs into /usr/local, outside the
# prefix, and the files stay there after the step fails
UNSET_RESERVED = ("CMAKE_INSTALL_PREFIX",)
# job counts only fill the recipe's job_args; any count renders the same option names
NAME_JOBS: Mapping[str, int] = {"compile": 1, "link": 1, "tensile": 1}
# the first ninja that is a GNU make jobserver client (run/engine/jobserver.py says how)
JOBSERVER_NINJA = (1, 13)
# a recipe's own compiler launcher: a cmake arg, or the variable in its [env]
_LAUNCHER_ARG = re.compile(r"^-DCMAKE_(C|CXX|HIP)_COMPILER_LAUNCHER(?::[A-Za-z]+)?=(.*)$")
_LAUNCHER_ENV = re.compile(r"^CMAKE_(C|CXX|HIP)_COMPILER_LAUNCHER$")


def cmake_defines(argv: Sequence[str]) -> list[tuple[str, str]]:
    """Every ``-DNAME[:TYPE]=VALUE`` (or ``-D NAME=VALUE``) of a cmake command line, in order."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "-D" and i + 1 < len(argv):
            i += 1
            arg = "-D" + argv[i]
        if arg.startswith("-D") and "=" in arg:
            name, value = arg[2:].split("=", 1)
            out.append((name.split(":", 1)[0], value))
        i += 1
    return out


def unused_cmake_variables(log_text: str) -> list[str]:
    """The names in CMake's "Manually-specified variables were not used by the project"
    warning(s) of a configure log, in order, without repeats. The block is the header, one
    blank line, then one indented name per line up to the next blank line."""
    names: list[str] = []
    lines = log_text.splitlines()
    for i, line in enumerate(lines):
        if UNUSED_HEADER not in line:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():  # blank line(s) after the header
            j += 1
        while j < len(lines) and lines[j].startswith((" ", "\t")) and lines[j].strip():
            name = lines[j].strip()
            if name not in names:
                names.append(name)
            j += 1
    return names


def rpath_args(base: Base | None) -> list[str]:
    """On a base, every installed file also keeps in its RUNPATH the folders outside the
    project it was linked against (the base's lib/), after its install RPATH: CMake's
    INSTALL_RPATH_USE_LINK_PATH. This covers projects that set CMAKE_INSTALL_RPATH themselves
    (a normal variable hides rocbuild's cache entry), so no env.sh is needed to reach the base."""
    return [] if base is None else ["-DCMAKE_INSTALL_RPATH_USE_LINK_PATH=ON"]


def _sets_rpath(args: list[str]) -> bool:
    return any(a.startswith(("-DCMAKE_INSTALL_RPATH=", "-DCMAKE_INSTALL_RPATH:")) for a in args)


def configure_argv(stack: Stack, component: Component, jobs: Mapping[str, int] | None
                   ) -> list[str]:
    """The cmake configure command; ``jobs`` (per kind of work) fills the recipe's job_args,
    which change only the speed and so are not part of any fingerprint (None: leave them out).
    Every component gets an install RUNPATH (docs/architecture.md) unless its recipe sets its
    own or opts out (install.runpath = false, with a reason)."""
    prefix_path = ";".join(str(p) for p in stack.search_prefixes)  # the prefix, then a --base
    recipe_args: list[str] = []
    for arg in component.build_args:
        if arg.startswith("-DCMAKE_PREFIX_PATH="):  # the recipe's paths come after the prefix
            prefix_path += ";" + arg.split("=", 1)[1]
        else:
            recipe_args.append(arg)
    return ["cmake", "-G", "Ninja", "-S", str(component.source_dir), "-B",
            str(component.build_dir), f"-DCMAKE_BUILD_TYPE={component.build_type}",
            f"-DCMAKE_INSTALL_PREFIX={component.install_prefix}",
            f"-DCMAKE_PREFIX_PATH={prefix_path}", *CMAKE.runpath_args(stack, component),
            *recipe_args, *CMAKE.launcher_args(stack, component),
            *(component.render_job_args(jobs) if jobs is not None else [])]


# Job counts only fill job_args (speed, never output); fixed so every rendering is the same.
LINT_JOBS: Mapping[str, int] = {"compile": 4, "link": 2, "tensile": 4}
# Variables whose value must be the chosen GPU targets, never a hard-coded list.
TARGET_VARIABLES = ("GPU_TARGETS", "AMDGPU_TARGETS", "CMAKE_HIP_ARCHITECTURES",
                    "Tensile_ARCHITECTURE")


def _lint_duplicates(stack: Stack, comp: Component) -> Lint:
    seen: dict[str, str] = {}
    out = []
    for name, value in cmake_defines(configure_argv(stack, comp, LINT_JOBS)):
        if name in seen:
            out.append(("warning", f"-D{name} is given twice ({seen[name]!r} and {value!r}); "
                                   "CMake keeps the last one"))
        seen[name] = value
    return out


def _lint_targets(stacks: Sequence[Stack], comp_name: str) -> Lint:
    out, reported = [], set()
    for stack in stacks:
        expected = {str(t) for t in stack.targets}
        comp = stack.components[comp_name]
        defines = cmake_defines([*comp.build_args, *comp.render_job_args(LINT_JOBS)])
        for name, value in defines:
            if name in TARGET_VARIABLES and name not in reported and \
                    {t for t in re.split(r"[;,\s]+", value) if t} != expected:
                reported.add(name)
                out.append((
                    "warning",
                    f"-D{name}={value} does not follow the chosen targets "
                    f"({','.join(sorted(expected))}); write it as "
                    "{{ targets | join(';') }}"))
    return out


def _client_ninja(host: HostPrograms, program: str | None) -> bool:
    version = host.version(program) if program else None
    return version is not None and version[:2] >= JOBSERVER_NINJA


def jobserver_ninja(host: HostPrograms) -> str | None:
    """A ninja here that is a jobserver client (PATH's when it is new enough), else None."""
    return next((p for p in host.candidates("ninja") if _client_ninja(host, p)), None)


# of the first CMake Error's message, in a summary: find_package's "Could not find a package
# configuration file" (the usual configure failure) takes 14 and ends with its fix
FIRST_ERROR_LINES = 24
FIRST_ERROR_CUT = "[… cut here: the rest of this message is in the log]"
# how a recipe names a compiler: -DCMAKE_<LANG>_COMPILER[:TYPE]=PATH
_COMPILER_ARG = re.compile(r"^-DCMAKE_(?:C|CXX|HIP|Fortran)_COMPILER(?::[A-Za-z]+)?=(.+)$")
# an entry of CMakeCache.txt: NAME:TYPE=VALUE, one a line
_CACHE_LAUNCHER = re.compile(r"^CMAKE_(C|CXX|HIP)_COMPILER_LAUNCHER:[A-Z]+=(.*)$", re.M)


def is_cmake_file(name: str) -> bool:
    return name == "CMakeLists.txt" or name.endswith((".cmake", ".cmake.in"))


class CMake(BuildSystem):
    kind = "cmake"
    table = "cmake"
    keys = ("args", "build_type", "install_prefix", "job_args", "distribute", "tensile_target")
    # CMAKE_BUILD_PARALLEL_LEVEL would make `cmake --build` pass -j (no client)
    client_env: Mapping[str, str | None] = MappingProxyType({"CMAKE_BUILD_PARALLEL_LEVEL": None})
    # every spelling CMake 3.25 takes for the install prefix (typed -D and --install-prefix
    # too), and the staging prefix, which moves every install destination somewhere else
    reserved = ("-G", "-S", "-B", "-DCMAKE_INSTALL_PREFIX=", "-DCMAKE_INSTALL_PREFIX:",
                "--install-prefix", "-DCMAKE_STAGING_PREFIX=", "-DCMAKE_STAGING_PREFIX:")
    title = "CMake"
    # CMake's install skips a file whose time matches its source's ("Up-to-date"), so a file
    # an unfinished install left damaged (a full disk: empty, with the source's time) was
    # kept by every rerun. With CMAKE_INSTALL_ALWAYS set in the environment,
    # file(INSTALL) copies every file (CMake reads the variable from the environment when
    # the install script runs; tested with 3.25). It costs nothing: the install step removes
    # every file the last finished install recorded before it runs (actions.py).
    install_env: Mapping[str, str] = MappingProxyType({"CMAKE_INSTALL_ALWAYS": "1"})
    option_form = "-D{}"
    build_files = "CMake files"

    def configure(self, stack: Stack, comp: Component, jobs: Mapping[str, int] | None
                  ) -> Commands:
        return [configure_argv(stack, comp, jobs)]

    def build(self, stack: Stack, comp: Component, jobs: int | None,
              target: str | None = None) -> Commands:
        """``cmake --build``; ``jobs`` None: no count, so a ninja >= 1.13 takes its jobs from
        the run's job pool (MAKEFLAGS: run/engine/jobserver.py); ``target``: that alone."""
        count = ["--parallel", str(jobs)] if jobs is not None else []
        only = ["--target", target] if target else []
        return [["cmake", "--build", str(comp.build_dir), *only, *count]]

    def install(self, stack: Stack, comp: Component) -> Commands:
        return [["cmake", "--install", str(comp.build_dir)]]

    def runpath_args(self, stack: Stack, comp: Component) -> list[str]:
        """CMAKE_INSTALL_RPATH, unless the recipe sets its own or opts out, and on a --base
        INSTALL_RPATH_USE_LINK_PATH (``rpath_args``)."""
        own = _sets_rpath([a for a in comp.build_args
                           if not a.startswith("-DCMAKE_PREFIX_PATH=")])
        runpath = ([f"-DCMAKE_INSTALL_RPATH={install_runpath(stack, comp)}"]
                   if comp.recipe.runpath and not own else [])
        return [*runpath, *rpath_args(stack.base)]

    def launcher_args(self, stack: Stack, comp: Component) -> list[str]:
        """CMAKE_<LANG>_COMPILER_LAUNCHER for C, C++ and HIP, for the languages whose launcher
        is not the recipe's own (those it passes itself, and nothing comes after them)."""
        return [f"-DCMAKE_{lang}_COMPILER_LAUNCHER={choice.launcher}"
                for lang, choice in launchers.choices(stack.launch, comp).items()
                if choice.launcher and not choice.source.startswith("recipe ")]

    def recipe_launchers(self, comp: Component) -> Mapping[str, str]:
        """A cmake arg, or the CMAKE_<LANG>_COMPILER_LAUNCHER variable of the recipe's [env],
        which CMake takes as the default of the cache entry, so a -D of rocbuild's own would
        replace it (an arg of the recipe's beats its env, as in CMake)."""
        found = {m.group(1): value for key, value in comp.env
                 if (m := _LAUNCHER_ENV.match(key)) and value}
        return found | {m.group(1): m.group(2) for arg in comp.build_args
                        if (m := _LAUNCHER_ARG.match(arg))}

    def recipe_compilers(self, comp: Component) -> list[str]:
        return [m.group(1) for arg in comp.build_args if (m := _COMPILER_ARG.match(arg))]

    def tree_launchers(self, comp: Component) -> Mapping[str, str] | None:
        """CMAKE_<LANG>_COMPILER_LAUNCHER of the tree's CMakeCache.txt (a -D of configure is
        kept there even for a language the project does not enable)."""
        try:
            text = (comp.build_dir / "CMakeCache.txt").read_text(encoding="utf-8",
                                                                 errors="replace")
        except OSError:  # not configured (or not a readable file): nothing to tell
            return None
        return {m.group(1): m.group(2).strip() for m in _CACHE_LAUNCHER.finditer(text)
                if m.group(2).strip()}

    def why_no_pool_client(self, comp: Component, host: HostPrograms) -> str:
        """A client where its tree's ninja is >= 1.13 (none where there is no tree yet)."""
        if _client_ninja(host, self.tree_build_tool(comp)):
            return ""
        return (f"this build tree's ninja is older than {'.'.join(map(str, JOBSERVER_NINJA))}: "
                "no jobserver client")

    no_pool_client = "no ninja >= 1.13 here (`pip install ninja`)"

    def pool_client(self, host: HostPrograms) -> str:
        ninja = jobserver_ninja(host)
        return f"ninja {'.'.join(map(str, host.version(ninja) or ()))}" if ninja else ""

    def configure_programs(self, host: HostPrograms) -> Mapping[str, str]:
        """A ninja that is a jobserver client where PATH's is not: a new tree records the
        ninja it finds (CMAKE_MAKE_PROGRAM), once, and keeps it."""
        found = None if _client_ninja(host, host.which("ninja")) else jobserver_ninja(host)
        return {"ninja": found} if found else {}

    def tree_build_tool(self, comp: Component) -> str | None:
        """The ninja the tree runs: CMAKE_MAKE_PROGRAM in its CMakeCache.txt; None: no tree."""
        try:
            with (comp.build_dir / "CMakeCache.txt").open(encoding="utf-8", errors="replace") as f:
                found = next((ln for ln in f if ln.startswith("CMAKE_MAKE_PROGRAM:")), "")
        except OSError:
            return None
        return found.partition("=")[2].strip() or None

    def base_build_dirs(self, base: Path) -> list[Path]:
        """The folders that hold the CMake files find_package() loads: lib/cmake (AMD's
        layout), lib/<multiarch>/cmake (Debian's), and rocm-cmake's share/ folders."""
        found = [base / "lib" / "cmake", *sorted(base.glob("lib/*-linux-gnu*/cmake")),
                 base / "share" / "rocmcmakebuildtools", base / "share" / "rocm"]
        return [d for d in found if d.is_dir()]

    def fingerprint_args(self, stack: Stack, comp: Component, argv: list[str]) -> list[str]:
        """Without every CMAKE_<LANG>_COMPILER_LAUNCHER, the recipe's own too."""
        return [a for a in argv if not a.startswith(tuple(
            f"-DCMAKE_{lang}_COMPILER_LAUNCHER=" for lang in launchers.LANGUAGES))]

    def check_args(self, file: Path, key: str, args: Sequence[str]) -> None:
        """The reserved prefixes in every spelling (``-D NAME=VALUE``, one option in two
        words, is judged as ``-DNAME=VALUE``), a ``-U`` glob that removes the install prefix
        rocbuild set (``cmakecode.unsets``), -P (and the other modes of ``cmakecode.mode``),
        which run a script instead of configuring, and CMake's own file writers
        (``cmakecode.writer``: --trace-redirect=, --profiling-output=, --help-*), which write
        wherever their argument says, outside the build tree and the prefix."""
        joined = [arg + args[i + 1] if arg in ("-D", "-U") and i + 1 < len(args) else arg
                  for i, arg in enumerate(args)]
        refuse_reserved(file, key, joined, self.reserved)
        for i, arg in enumerate(joined):
            removed = cmakecode.unsets(arg, UNSET_RESERVED)
            if removed:
                raise ConfigError(f"{file}: key '{key}[{i}]': '{arg}' removes {removed} from "
                                  "CMake's cache after rocbuild set it, so the project installs "
                                  "into CMake's default (/usr/local) instead of the prefix",
                                  tip=f"remove it from {file}")
        for i, arg in enumerate(args):
            if cmakecode.mode(arg):
                raise ConfigError(f"{file}: key '{key}[{i}]': '{arg}' puts CMake in "
                                  f"another mode ({cmakecode.mode(arg)}) instead of configuring "
                                  "the source; cmake.args are configure options (-D...)",
                                  tip=f"remove it from {file}")
            if cmakecode.writer(arg):
                raise ConfigError(f"{file}: key '{key}[{i}]': '{arg}' makes CMake write a "
                                  f"file of its own ({cmakecode.writer(arg)}) wherever the "
                                  "argument says, outside the build tree and the prefix",
                                  tip=f"remove it from {file} (run cmake by hand in the "
                                      "build tree to trace or profile a configure)")

    def lint(self, stacks: Sequence[Stack], comp_name: str) -> Lint:
        """A -D given twice (CMake keeps the last) and a target variable that does not list
        exactly the chosen targets in every rendering (written by hand: the wrong code)."""
        return [*_lint_duplicates(stacks[0], stacks[0].components[comp_name]),
                *_lint_targets(stacks, comp_name)]

    def installed_record(self, comp: Component) -> Path:
        return comp.build_dir / MANIFEST

    def installed_files(self, comp: Component) -> list[Path] | None:
        try:
            text = self.installed_record(comp).read_text(encoding="utf-8")
        except OSError:  # no record (or not a readable file): nothing known installed
            return None
        return [Path(line) for line in text.splitlines() if line]

    def option_names(self, stack: Stack, comp: Component) -> list[str]:
        """The recipe's own -D options (args and job_args), without CMake's CMAKE_*
        variables (documented by CMake, read by CMake itself) and without what rocbuild adds."""
        return list(dict.fromkeys(
            name for name, _ in cmake_defines([*comp.build_args, *comp.render_job_args(NAME_JOBS)])
            if not name.startswith("CMAKE_")))

    def is_build_file(self, name: str) -> bool:
        return is_cmake_file(name)

    def reads_option(self, name: str, words: set[str]) -> bool:
        """A CMake file mentions ``name`` as a whole word; ``<Pkg>_DIR``/``<Pkg>_ROOT`` are
        read by ``find_package(<Pkg>)``, so the package name counts for them."""
        if name in words or name in CMAKE_OWN_DEFINES:
            return True
        match = re.fullmatch(r"(\w+)_(DIR|ROOT)", name)
        return bool(match and match.group(1) in words)

    def stale_files(self, comp: Component) -> list[Path]:
        """CMakeCache.txt and the top CMakeFiles/ (compiler checks, logs), but not the object
        files: with Ninja they live in CMakeFiles/<target>.dir/, which `cmake --fresh` deletes
        (tested with 3.25), so a fresh configure keeps them and ninja redoes only what
        changed."""
        stale = [comp.build_dir / "CMakeCache.txt"]
        files = comp.build_dir / "CMakeFiles"
        if files.is_dir() and not files.is_symlink():
            stale += [entry for entry in sorted(files.iterdir())
                      if not (entry.name.endswith(".dir") and entry.is_dir())]
        return [p for p in stale if p.is_symlink() or p.exists()]

    def configure_warnings(self, comp: Component, log_text: str) -> list[str]:
        # only the recipe's own options: a project without targets (rocm-cmake) never reads
        # the RUNPATH rocbuild passes to every project, which is no mistake of the recipe's
        unused = [name for name in unused_cmake_variables(log_text)
                  if any(a.startswith((f"-D{name}=", f"-D{name}:")) for a in comp.build_args)]
        if not unused:
            return []
        return [f"CMake did not use {', '.join(unused)}: the recipe passes options this "
                f"version of {comp.name} never reads (check {comp.recipe.file})"]

    def first_error(self, log_text: str) -> list[str]:
        """CMake's first ``CMake Error`` block: its header line (``CMake Error at
        CMakeLists.txt:3 (find_package):``) and the indented message under it, up to the
        blank lines that end a CMake message (or a line that is not part of it); a message
        longer than FIRST_ERROR_LINES ends with FIRST_ERROR_CUT, so a cut is never read as
        the message's end."""
        lines = log_text.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("CMake Error")),
                     None)
        if start is None:
            return []
        block = [lines[start]]
        blank = 0
        for line in lines[start + 1:]:
            if not line.strip():
                blank += 1
                if blank >= 2:  # CMake ends a message with two empty lines
                    break
                continue
            if not line.startswith((" ", "\t")):
                break
            if len(block) >= FIRST_ERROR_LINES:
                block.append(FIRST_ERROR_CUT)
                break
            block += [""] * blank + [line]
            blank = 0
        return block

    def tree_files(self, step: str) -> tuple[str, ...]:
        # configure made both: without build.ninja, `cmake --build` fails until CMake
        # generates it again, which only a configure does
        return {"configure": ("CMakeCache.txt", "build.ninja"),
                "compile": ("build.ninja",)}.get(step, ())


CMAKE = register(CMake())
