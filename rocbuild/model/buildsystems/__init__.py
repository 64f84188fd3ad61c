"""Build systems: how a component that builds is configured, compiled and installed.

A recipe names its build system with ``kind`` (``cmake``; ``source-only`` builds nothing) and
keeps that system's options in the table the system names (``[cmake]``). The engine knows a
build system only through this class: the commands of the configure, compile and install
steps (the step actions run them, ``rocbuild plan --commands`` prints them, the configure
command is a fingerprint input), the list of files an install put into the prefix, and the
check of the recipe's options against the fetched build files. The rest has defaults.

Adding a build system is one module in this folder that subclasses BuildSystem and calls
``register`` (modules here are imported when the registry is first read, so nothing else
names them); a test may register one of its own. The build venv of the recipes' Python
packages (venv.py) is run through the same seam, as the stack-wide ``python-venv`` step.
Everything here is pure: commands are data, files are only read.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rocbuild.model.graph import Component, Stack

SOURCE_ONLY = "source-only"  # a recipe kind that is fetched and patched, never built

Commands = list[list[str]]


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
    # its build command without a job count takes its jobs from the run's job pool (a GNU
    # make jobserver client: ninja >= 1.13 under CMake); false: it is always given a count
    jobserver_client = False

    # --- the steps' commands --------------------------------------------------------------
    def configure(self, stack: Stack, comp: Component, jobs: Mapping[str, int] | None
                  ) -> Commands:
        """The configure step. ``jobs`` (per kind of work) fills the recipe's job_args; None
        leaves them out (the fingerprint: job counts change only the speed)."""
        raise NotImplementedError

    def build(self, stack: Stack, comp: Component, jobs: int | None) -> Commands:
        """The compile step with ``jobs`` parallel jobs (None, only where
        ``jobserver_client``: as many as the run's job pool gives it)."""
        raise NotImplementedError

    def install(self, stack: Stack, comp: Component) -> Commands:
        """The install step: into the prefix, writing what installed_files reads."""
        raise NotImplementedError

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


def register(system: BuildSystem) -> BuildSystem:
    """Make ``system`` the build system of recipes whose kind is ``system.kind``."""
    if not system.kind or system.kind == SOURCE_ONLY or not system.table:
        raise ValueError(f"a build system needs a kind other than {SOURCE_ONLY!r} and a table")
    _SYSTEMS[system.kind] = system
    return system


def unregister(kind: str) -> None:
    _SYSTEMS.pop(kind, None)


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


def configure_key(stack: Stack, comp: Component,
                  clean: Callable[[list[str]], list[str]] = list) -> str:
    """The configure commands without job counts (each passed through ``clean``) as JSON: a
    fingerprint input (the up-to-date rule's, the binary cache's key). One command stands for
    itself, so the stamps and the artifact keys of CMake builds are those earlier rocbuilds
    wrote."""
    commands = [clean(argv) for argv in of(comp).configure(stack, comp, None)]
    return json.dumps(commands[0] if len(commands) == 1 else commands)
