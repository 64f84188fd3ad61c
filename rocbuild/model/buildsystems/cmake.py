"""CMake with Ninja: the build system of every ROCm component and of llama.cpp.

What rocbuild adds to every CMake project lives here: ``-G Ninja``, the install prefix,
CMAKE_PREFIX_PATH (the prefix, then a --base) and an install RUNPATH relative to $ORIGIN.
CMake's own record of an install is ``<build>/install_manifest.txt``, one absolute path a
line; this module is the one reader of it (and says where the binary cache writes one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

from rocbuild.model import launchers
from rocbuild.model.base import base_runpath, rpath_args
from rocbuild.model.buildsystems import BuildSystem, Commands, register

if TYPE_CHECKING:
    from rocbuild.model.graph import Component, Stack

MANIFEST = "install_manifest.txt"
UNUSED_HEADER = "Manually-specified variables were not used by the project:"
# CMake reads these itself whatever the project's files say
CMAKE_OWN_DEFINES = frozenset({"BUILD_SHARED_LIBS"})
# job counts only fill the recipe's job_args; any count renders the same option names
NAME_JOBS: Mapping[str, int] = {"compile": 1, "link": 1, "tensile": 1}


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


def install_runpath(stack: Stack, component: Component) -> str:
    """The RUNPATH of the programs and libraries a component installs, relative to $ORIGIN so
    a prefix still works when copied or moved: the component's own lib/ first, then the
    stack's lib/ and the lib/ of every component it depends on that installs elsewhere
    (LLVM's lib/llvm/lib), never a folder of a component it does not use. Relative to bin/,
    which is also right for lib/ (its sibling)."""
    users_of = [stack.components[n] for n in stack.closure(component.name)
                if n in stack.components]
    libs = [component.install_prefix / "lib", stack.prefix / "lib",
            *(c.install_prefix / "lib" for c in users_of)]
    origin = component.install_prefix / "bin"
    entries: list[str] = []
    for lib in libs:
        entry = "$ORIGIN/" + os.path.relpath(lib, origin)
        if entry not in entries:
            entries.append(entry)
    entries += base_runpath(stack.base)  # a --base's lib dirs, absolute, after the prefix's
    return ";".join(entries)


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
    for arg in component.cmake_args:
        if arg.startswith("-DCMAKE_PREFIX_PATH="):  # the recipe's paths come after the prefix
            prefix_path += ";" + arg.split("=", 1)[1]
        else:
            recipe_args.append(arg)
    runpath = ([f"-DCMAKE_INSTALL_RPATH={install_runpath(stack, component)}"]
               if component.recipe.runpath and not _sets_rpath(recipe_args) else [])
    return ["cmake", "-G", "Ninja", "-S", str(component.source_dir), "-B",
            str(component.build_dir), f"-DCMAKE_BUILD_TYPE={component.build_type}",
            f"-DCMAKE_INSTALL_PREFIX={component.install_prefix}",
            f"-DCMAKE_PREFIX_PATH={prefix_path}", *runpath, *rpath_args(stack.base),
            *recipe_args, *launchers.cmake_args(stack.launch, component),
            *(component.render_job_args(jobs) if jobs is not None else [])]


def build_argv(component: Component, jobs: int | None) -> list[str]:
    """``cmake --build``; ``jobs`` None: no count, so a ninja >= 1.13 takes its jobs from the
    run's job pool (MAKEFLAGS: run/engine/jobserver.py)."""
    count = ["--parallel", str(jobs)] if jobs is not None else []
    return ["cmake", "--build", str(component.build_dir), *count]


def install_argv(component: Component) -> list[str]:
    return ["cmake", "--install", str(component.build_dir)]


def is_cmake_file(name: str) -> bool:
    return name == "CMakeLists.txt" or name.endswith((".cmake", ".cmake.in"))


class CMake(BuildSystem):
    kind = "cmake"
    table = "cmake"
    keys = ("args", "build_type", "install_prefix", "job_args", "distribute")
    jobserver_client = True  # when the tree's ninja is >= 1.13 (run/engine/jobserver.py)
    # every spelling CMake 3.25 takes for the install prefix (typed -D and --install-prefix
    # too), and the staging prefix, which moves every install destination somewhere else
    reserved = ("-G", "-S", "-B", "-DCMAKE_INSTALL_PREFIX=", "-DCMAKE_INSTALL_PREFIX:",
                "--install-prefix", "-DCMAKE_STAGING_PREFIX=", "-DCMAKE_STAGING_PREFIX:")
    title = "CMake"
    # CMake's install skips a file whose time matches its source's ("Up-to-date"), so a file
    # an unfinished install left damaged (a full disk: empty, with the source's time) was
    # kept by every rerun (issue 31). With CMAKE_INSTALL_ALWAYS set in the environment,
    # file(INSTALL) copies every file (CMake reads the variable from the environment when
    # the install script runs; tested with 3.25). It costs nothing: the install step removes
    # every file the last finished install recorded before it runs (actions.py).
    install_env: Mapping[str, str] = MappingProxyType({"CMAKE_INSTALL_ALWAYS": "1"})
    option_form = "-D{}"
    build_files = "CMake files"

    def configure(self, stack: Stack, comp: Component, jobs: Mapping[str, int] | None
                  ) -> Commands:
        return [configure_argv(stack, comp, jobs)]

    def build(self, stack: Stack, comp: Component, jobs: int | None) -> Commands:
        return [build_argv(comp, jobs)]

    def install(self, stack: Stack, comp: Component) -> Commands:
        return [install_argv(comp)]

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
        names: list[str] = []
        for name, _ in cmake_defines([*comp.cmake_args, *comp.render_job_args(NAME_JOBS)]):
            if not name.startswith("CMAKE_") and name not in names:
                names.append(name)
        return names

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
                  if any(a.startswith((f"-D{name}=", f"-D{name}:")) for a in comp.cmake_args)]
        if not unused:
            return []
        return [f"CMake did not use {', '.join(unused)}: the recipe passes options this "
                f"version of {comp.name} never reads (check {comp.recipe.file})"]

    def tree_files(self, step: str) -> tuple[str, ...]:
        # configure made both: without build.ninja, `cmake --build` fails until CMake
        # generates it again, which only a configure does
        return {"configure": ("CMakeCache.txt", "build.ninja"),
                "compile": ("build.ninja",)}.get(step, ())


CMAKE = register(CMake())
