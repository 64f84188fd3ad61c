"""cmake.args that are not options: CMake modes that replace the configure, and arguments that
make CMake run code from a file.

A recipe's ``cmake.args`` are appended to ``cmake -G Ninja -S <src> -B <build> ...``. Two kinds
of argument change what that command is:

- a *mode* (``-P script``, ``-E``, ``--build``, ``--install``, ``--workflow``, ``--preset``,
  ``-N``, ...) turns the configure into something else: ``-P`` runs a script and configures
  nothing, so the step "succeeds" with no build tree. No recipe needs one; they are refused
  when the recipes load.
- a *file writer* (``--trace-redirect=<file>``, ``--profiling-output=<file>``) writes a file
  of CMake's own wherever its argument says, outside the build tree and the prefix (and
  ``--help-*`` prints help, into the file named after it, instead of configuring). They are
  refused when the recipes load, as the modes are: rocbuild writes nothing outside the prefix
  and the workdir.
- a *code file* (``-C <initial-cache>``, ``CMAKE_TOOLCHAIN_FILE``, ``CMAKE_PROJECT_INCLUDE`` and
  its kin, ``--toolchain``) makes CMake run the commands of that file during the configure.
  These are not refused: LLVM's own cache files (``-C clang/cmake/caches/...``) and toolchain
  files are ordinary ways to configure, and refusing them would close nothing, since every
  CMake option a recipe passes is already CMake's to interpret (README: a recipe from someone
  you do not trust is code you run). Instead ``rocbuild plan`` lists them, so what runs is
  seen before it runs.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

# argv[1:] words that put cmake in another mode than "configure this source into that tree"
MODES = ("-P", "-E", "-N", "--build", "--install", "--open", "--workflow", "--preset",
         "--list-presets", "--system-information", "--find-package", "--help", "-h",
         "--version", "--graphviz")
# options that write a file of CMake's own where their argument says
WRITERS = ("--trace-redirect", "--profiling-output")
_CODE_VARIABLES = re.compile(
    r"^-D(CMAKE_TOOLCHAIN_FILE|CMAKE_PROJECT_INCLUDE(_BEFORE)?|CMAKE_PROJECT_\w+_INCLUDE"
    r"(_BEFORE)?|CMAKE_PROJECT_TOP_LEVEL_INCLUDES|CMAKE_USER_MAKE_RULES_OVERRIDE\w*)"
    r"(:[A-Z]+)?=")


def mode(arg: str) -> str | None:
    """The CMake mode ``arg`` selects (``-P`` also as ``-Pscript``), or None."""
    return next((flag for flag in MODES if arg == flag or arg.startswith(flag + "=") or (
        flag in ("-P", "-E") and arg.startswith(flag) and not arg.startswith("-E-"))), None)


def unsets(arg: str, names: Sequence[str]) -> str | None:
    """The first of ``names`` a ``-U<glob>`` argument removes from CMake's cache, or None.
    CMake (3.25 ``cmake::SetCacheArgs``) removes every cache entry the glob matches, case
    sensitive, with ``*``, ``?`` and ``[...]`` (``[^...]`` and ``[!...]`` negated): tested,
    ``-UCMAKE_INSTALL_*``, ``-U*`` and ``-U[C]MAKE_INSTALL_PREFIX`` after
    ``-DCMAKE_INSTALL_PREFIX=/x`` configure for /usr/local."""
    if not arg.startswith("-U"):
        return None
    pattern = arg[2:].replace("[^", "[!")
    return next((name for name in names if fnmatch.fnmatchcase(name, pattern)), None)


def writer(arg: str) -> str | None:
    """The file-writing option ``arg`` is (``--trace-redirect=...``; ``--help-full <file>``
    and every ``--help-*``, which print help into the file after them), or None."""
    if arg.startswith("--help-"):
        return arg.split("=", 1)[0]
    return next((flag for flag in WRITERS if arg == flag or arg.startswith(flag + "=")), None)


def code_files(args: Sequence[str]) -> list[str]:
    """The arguments of ``args`` that make CMake run code from a file, each as one string
    (``-C <file>`` joined), in order."""
    found = []
    for i, arg in enumerate(args):
        if arg == "-C" or arg == "--toolchain":
            found.append(f"{arg} {args[i + 1]}" if i + 1 < len(args) else arg)
        elif arg.startswith("-C") or arg.startswith("--toolchain=") or _CODE_VARIABLES.match(arg):
            found.append(arg)
    return found
