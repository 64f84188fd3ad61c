"""Build systems: how a component that builds is configured, compiled and installed.

A recipe names its build system with ``kind`` (``cmake``; ``source-only`` builds nothing) and
keeps that system's options in the table the system names (``[cmake]``). The engine knows a
build system only through this class: the commands of the configure, compile and install
steps (the step actions run them, ``rocbuild plan --commands`` prints them, the configure
command is a fingerprint input), the list of files an install put into the prefix, and the
check of the recipe's options against the fetched build files. The contracts every build
system keeps (``CONTRACTS``: the install RUNPATH, the compiler launchers, the refusal of
arguments rocbuild sets itself, the lint of the recipe's arguments, the install record) are
methods without a default: a system that cannot keep one names it in ``lacks`` with the
reason, and tests/unit/test_buildsystems.py fails on a system that does neither. The rest has
defaults.

Adding a build system is one module in this folder that subclasses BuildSystem and calls
``register`` (modules here are imported when the registry is first read, so nothing else
names them); a test may register one of its own. The build venv of the recipes' Python
packages (venv.py) is run through the same seam, as the stack-wide ``python-venv`` step.
Everything here is pure: commands are data, files are only read.
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from rocbuild.errors import ConfigError

if TYPE_CHECKING:
    from rocbuild.model.graph import Component, Stack

SOURCE_ONLY = "source-only"  # a recipe kind that is fetched and patched, never built

Commands = list[list[str]]
Lint = list[tuple[str, str]]  # (level, message): "error" fails lint-recipes, "warning" not
# the methods every registered build system implements or names in ``lacks`` with a reason
CONTRACTS = ("runpath_args", "launcher_args", "check_args", "lint", "installed_files",
             "installed_record")


class HostPrograms(Protocol):
    """The host's build programs as a build system asks about them: checks/buildtools.py
    answers (the model probes nothing)."""

    def version(self, program: str) -> tuple[int, ...] | None: ...
    def which(self, name: str) -> str | None: ...
    def candidates(self, name: str) -> list[str]: ...


def install_runpath(stack: Stack, component: Component) -> str:
    """The RUNPATH of the programs and libraries a component installs, relative to $ORIGIN so
    a prefix still works when copied or moved (docs/architecture.md, "Installed files"): the
    component's own lib/ first, then the stack's lib/ and the lib/ of every component it
    depends on that installs elsewhere (LLVM's lib/llvm/lib), never a folder of a component it
    does not use, then a --base's lib folders (absolute). Relative to bin/, which is also
    right for lib/ (its sibling); entries joined with ';'."""
    from rocbuild.model.base import base_runpath  # base -> recipes -> this package
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


def refuse_reserved(file: Path, key: str, args: Sequence[str], reserved: tuple[str, ...]
                    ) -> None:
    """ConfigError naming ``key`` for an argument starting with one of ``reserved`` (what
    rocbuild passes itself: a recipe repeating it would fight rocbuild's own)."""
    for i, arg in enumerate(args):
        if reserved and arg.startswith(reserved):
            raise ConfigError(f"{file}: key '{key}[{i}]': '{arg}' is set by "
                              "rocbuild itself (generator, source, build folder, install "
                              "prefix)", tip=f"remove it from {file}")


class BuildSystem:
    """One way of building a component. Subclasses set ``kind`` and ``table`` and implement
    the four steps' commands and the installed-file list; the other methods have defaults
    that do nothing."""

    kind: str = ""  # the recipe's `kind`
    table: str = ""  # the recipe table holding its options, e.g. "cmake" for [cmake]
    # the keys that table accepts, of those a build table may hold (the Recipe fields under
    # "<build>." in recipes.py: args, build_type, install_prefix, job_args, distribute)
    keys: tuple[str, ...] = ("args",)
    # argument prefixes rocbuild itself sets (a recipe repeating one is refused)
    reserved: tuple[str, ...] = ()
    # variables the install step runs with, beyond the build environment
    install_env: Mapping[str, str] = MappingProxyType({})
    option_form = "{}"  # how an option is written in messages ("-D{}" for CMake)
    title = ""  # its name in messages ("CMake"); the kind when empty
    build_files = "build files"  # what its build files are called in messages
    # a pool client's environment beyond the pool's MAKEFLAGS (None: the variable is unset)
    client_env: Mapping[str, str | None] = MappingProxyType({})
    # contract (of CONTRACTS) -> why this system cannot keep it; empty: it keeps them all
    lacks: Mapping[str, str] = {}

    # --- the steps' commands --------------------------------------------------------------
    def configure(self, stack: Stack, comp: Component, jobs: Mapping[str, int] | None
                  ) -> Commands:
        """The configure step. ``jobs`` (per kind of work) fills the recipe's job_args; None
        leaves them out (the fingerprint: job counts change only the speed)."""
        raise NotImplementedError

    def build(self, stack: Stack, comp: Component, jobs: int | None,
              target: str | None = None) -> Commands:
        """The compile step with ``jobs`` parallel jobs (None, only where
        ``why_no_pool_client`` is "": as many as the run's job pool gives it); ``target``: only
        that build target (the recipe's tensile_target, where its keys take one)."""
        raise NotImplementedError

    def install(self, stack: Stack, comp: Component) -> Commands:
        """The install step: into the prefix, writing what installed_files reads."""
        raise NotImplementedError

    # --- the contracts (CONTRACTS): no defaults -----------------------------------------
    def runpath_args(self, stack: Stack, comp: Component) -> list[str]:
        """Configure arguments that give every program and library the install puts into the
        prefix the RUNPATH ``install_runpath(stack, comp)`` (unless the recipe opts out:
        ``install.runpath = false``), and on a --base its lib folders."""
        raise NotImplementedError

    def launcher_args(self, stack: Stack, comp: Component) -> list[str]:
        """Configure arguments that put the run's compiler launchers (``stack.launch``:
        ccache, distcc; ``launchers.choices``) in front of each compile. Launchers change
        only the speed, so ``fingerprint_args`` leaves these out."""
        raise NotImplementedError

    def check_args(self, file: Path, key: str, args: Sequence[str]) -> None:
        """ConfigError naming ``file`` and ``key`` for an argument of the recipe's table that
        rocbuild sets itself (``reserved``, through ``refuse_reserved``) or that makes the tool
        do something else than configure the source."""
        raise NotImplementedError

    def lint(self, stacks: Sequence[Stack], comp_name: str) -> Lint:
        """lint-recipes' findings about the recipe's arguments in every rendering of
        ``stacks`` (the first is the default targets')."""
        raise NotImplementedError

    def tree_launchers(self, comp: Component) -> Mapping[str, str] | None:
        """The compiler launchers ``comp``'s build tree was configured with, by language
        (``C``, ``CXX``, ``HIP``; one without a launcher is absent): what its next compile
        runs, whatever this run would configure (``launchers.tree_note``). None when there
        is no configured tree, or the system cannot tell."""
        return None

    def recipe_launchers(self, comp: Component) -> Mapping[str, str]:
        """The compiler launchers the recipe names itself, by language (``C``, ``CXX``,
        ``HIP``): its word wins over rocbuild's and the user's (``launchers.choices``)."""
        return {}

    def recipe_compilers(self, comp: Component) -> list[str]:
        """The compilers the recipe's arguments name (CMake's -DCMAKE_<LANG>_COMPILER); the
        variables of its [env] (CC, CXX, ...) are ``launchers.compiler_in_prefix``'s."""
        return []

    def why_no_pool_client(self, comp: Component, host: HostPrograms) -> str:
        """Why ``comp``'s configured tree, built without a job count, cannot take its jobs
        from the run's job pool as a GNU make jobserver client (run/engine/jobs.py), in a few
        words; "" when it can (then ``client_env`` is its environment beyond MAKEFLAGS)."""
        return f"{self.title or self.kind} is no jobserver client"

    def pool_client(self, host: HostPrograms) -> str:
        """The program and version of this system's builds that can take their jobs from the
        run's job pool on this host (``ninja 1.13.2``), for the run's line and --parallel
        auto; "" where there is none (then ``no_pool_client`` says why and the fix)."""
        return ""

    no_pool_client = ""  # why this system's builds cannot share the pool here, and the fix

    def configure_programs(self, host: HostPrograms) -> Mapping[str, str]:
        """Programs (name -> path) a configure must find first on PATH, because the tree it
        makes records the one it finds; the run links them into a folder of the workdir's
        (run/engine/jobs.py). Empty: the environment stays as it is."""
        return {}

    def base_build_dirs(self, base: Path) -> list[Path]:
        """The folders of an installed base whose build files a build of this system loads."""
        return []

    def fingerprint_args(self, stack: Stack, comp: Component, argv: list[str]) -> list[str]:
        """``argv`` without what changes only the speed (the launcher arguments)."""
        if "launcher_args" in self.lacks:
            return argv
        launch = set(self.launcher_args(stack, comp))
        return [a for a in argv if a not in launch]

    # --- what the install left -------------------------------------------------------------
    def installed_files(self, comp: Component) -> list[Path] | None:
        """Every file the last install put into the prefix (absolute paths, as recorded in
        the build tree); None while there is no record (never installed, or the build tree
        is gone)."""
        raise NotImplementedError

    def installed_record(self, comp: Component) -> Path:
        """Where installed_files reads its record, so the binary cache (which installs without
        the build system) can write one in the same form (``record_text``)."""
        raise NotImplementedError

    def record_text(self, files: Sequence[Path]) -> str:
        return "".join(f"{path}\n" for path in files)

    # --- the option check (options:<component>, lint-recipes --sources) ------------------
    def option_names(self, stack: Stack, comp: Component) -> list[str]:
        """The options the recipe passes that the fetched build files must read."""
        return []

    def is_build_file(self, name: str) -> bool:
        """Whether a file of this name is read by the build system (where options live)."""
        return False

    def reads_option(self, name: str, words: set[str]) -> bool:
        """Whether build files holding ``words`` (their identifiers) read option ``name``."""
        return name in words

    # --- hygiene and the up-to-date rule's output check ----------------------------------
    def stale_files(self, comp: Component) -> list[Path]:
        """What an earlier configure decided that a new one must forget (removed before
        configure runs), so an option dropped from a recipe gets its default again."""
        return []

    def configure_warnings(self, comp: Component, log_text: str) -> list[str]:
        """Warnings for the summary read from this run's part of the configure log."""
        return []

    def first_error(self, log_text: str) -> list[str]:
        """The first error of a failed configure, read from this run's part of its log, as
        the tool wrote it (its lines, two dozen at most); [] when the tool has no such
        marker. The summary shows the log's last lines: a later error that only follows
        from the first one would hide the cause."""
        return []

    def tree_files(self, step: str) -> tuple[str, ...]:
        """Files in the build tree that show ``step`` (configure, compile) made its output;
        a build tree without them is configured (or compiled) again."""
        return ()


_SYSTEMS: dict[str, BuildSystem] = {}
_loaded = False


def _load_builtin() -> None:
    """Import every module of this folder once: each registers its build system. Deferred to
    the first use, so loading recipes does not import the modules the systems use."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def pool_client(kinds: Iterable[str], host: HostPrograms) -> tuple[str, str]:
    """(the first pool client the build systems of ``kinds`` have here, "" for none; why
    none, in their words)."""
    systems = [for_kind(k) for k in sorted(set(kinds))]
    found = next((c for s in systems if (c := s.pool_client(host))), "")
    return found, "" if found else "; ".join(s.no_pool_client for s in systems
                                             if s.no_pool_client)


def register(system: BuildSystem) -> BuildSystem:
    """Make ``system`` the build system of recipes whose kind is ``system.kind``."""
    if not system.kind or system.kind == SOURCE_ONLY or not system.table:
        raise ValueError(f"a build system needs a kind other than {SOURCE_ONLY!r} and a table")
    _SYSTEMS[system.kind] = system
    return system


def kinds() -> tuple[str, ...]:
    """Every recipe kind: the registered build systems, then source-only."""
    _load_builtin()
    return (*_SYSTEMS, SOURCE_ONLY)


def for_kind(kind: str) -> BuildSystem:
    """The build system of ``kind``; KeyError for source-only or an unknown kind (recipes.py
    refuses those before a Component exists)."""
    _load_builtin()
    return _SYSTEMS[kind]


def of(comp: Component) -> BuildSystem:
    """The build system of a component that builds."""
    return for_kind(comp.recipe.kind)


def configure_key(stack: Stack, comp: Component) -> str:
    """The configure commands without job counts and launchers (``fingerprint_args``) as JSON:
    a fingerprint input (the up-to-date rule's, the binary cache's key). One command stands
    for itself, so the stamps and the artifact keys of CMake builds are those earlier
    rocbuilds wrote."""
    system = of(comp)
    commands = [system.fingerprint_args(stack, comp, argv)
                for argv in system.configure(stack, comp, None)]
    return json.dumps(commands[0] if len(commands) == 1 else commands)
