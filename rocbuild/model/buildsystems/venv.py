"""The build venv: the recipes' Python packages, installed before any build (rocBLAS' Tensile
needs some, clr's and roctracer's CMake files others), through the build-system seam.

Not a recipe kind: it is the stack-wide ``python-venv`` step (steptable.py), so ``comp`` is
unused. Configure makes ``<workdir>/venv`` with the interpreter rocbuild runs under, build
installs the packages into it, install downloads the wheels builds pip-install by themselves
into ``<workdir>/wheels`` (rocBLAS gets PIP_NO_INDEX and PIP_FIND_LINKS through its recipe).
It runs with the fetch steps, while the network is expected; later steps only read what is
here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocbuild.model.buildsystems import BuildSystem, Commands
from rocbuild.model.graph import Component, Stack
from rocbuild.model.workdir import Workdir

PIP = ["-m", "pip"]


def needs(stack: Stack) -> bool:
    return stack.python_needs() != ((), ())


def inputs(stack: Stack, python: str | None = None) -> dict[str, Any]:
    """What the venv is made of: its stamp's fingerprint hashes this document."""
    packages, wheels = stack.python_needs()
    return {"python": sys.version.split()[0], "executable": python or sys.executable,
            "packages": list(packages), "wheels": list(wheels)}


class PythonVenv(BuildSystem):
    kind = "python-venv"  # never registered: no recipe has this kind
    keys = ()

    def __init__(self, python: str | None = None, workdir: Path | None = None) -> None:
        self.python = python or sys.executable
        self.workdir = workdir  # where the venv is, for installed_files

    def configure(self, stack: Stack, comp: Component | None,
                  jobs: Mapping[str, int] | None = None) -> Commands:
        if not needs(stack):
            return []
        return [[self.python, "-m", "venv", "--clear", str(stack.work.venv)]]

    def build(self, stack: Stack, comp: Component | None, jobs: int | None = 1,
              target: str | None = None) -> Commands:
        packages, _ = stack.python_needs()
        if not packages:
            return []
        return [[self._in_venv(stack), *PIP, "install", "--disable-pip-version-check",
                 *packages]]

    def install(self, stack: Stack, comp: Component | None) -> Commands:
        _, wheels = stack.python_needs()
        if not wheels:
            return []
        return [[self._in_venv(stack), *PIP, "download", "--disable-pip-version-check", "-d",
                 str(stack.work.wheels), *wheels]]

    def installed_files(self, comp: Component | None) -> list[Path] | None:
        """The venv's interpreter: the venv is there while it is."""
        assert self.workdir is not None, "PythonVenv(workdir=...) knows where its venv is"
        python = Workdir.shared(self.workdir).venv / "bin" / "python"
        return [python] if python.exists() else None

    def installed_record(self, comp: Component | None) -> Path:
        raise NotImplementedError("the build venv is never installed from the binary cache")

    def commands(self, stack: Stack) -> Commands:
        """Every command, in order: what the python-venv step runs and plan prints."""
        return [*self.configure(stack, None), *self.build(stack, None),
                *self.install(stack, None)]

    @staticmethod
    def _in_venv(stack: Stack) -> str:
        return str(stack.work.venv / "bin" / "python")
