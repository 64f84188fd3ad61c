"""The build programs this host has, as a build system asks about them: this module is the
``buildsystems.HostPrograms`` a run passes (the model probes nothing), each program's version
asked once per process."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import sys
from pathlib import Path

from rocbuild import proc

_VERSIONS: dict[str, tuple[int, ...] | None] = {}
which = shutil.which  # HostPrograms.which: what PATH finds


def version(program: str) -> tuple[int, ...] | None:
    """The first version number ``program --version`` prints (ninja's ``1.13.2`` ->
    (1, 13, 2), ``GNU Make 4.3`` -> (4, 3)); None: it did not run or said none."""
    if program not in _VERSIONS:
        done = proc.run_capture([program, "--version"], timeout=10)
        found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout) if done and done.ok else None
        _VERSIONS[program] = tuple(int(g) for g in found.groups() if g) if found else None
    return _VERSIONS[program]


def candidates(name: str) -> list[str]:
    """PATH's, then a PyPI wheel's of that name: in its data folder (``BIN_DIR``, as the
    ``ninja`` package has), else beside this Python, where pip put its script."""
    found = [shutil.which(name)]
    with contextlib.suppress(ImportError):
        wheel = getattr(importlib.import_module(name), "BIN_DIR", None)
        found.append(os.path.join(wheel, name) if wheel else None)
    found.append(str(Path(sys.executable).parent / name))
    return [p for p in found if p and os.access(p, os.X_OK)]
