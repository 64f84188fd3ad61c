"""The Tensile resume patches' own modules, read from the patches (patches/tensile/): the
Tensile source is not here (no network in tests), so the files the patches add are extracted
and imported, and the stand-in TensileCreateLibrary of the e2e test runs them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

PATCHES = Path(__file__).resolve().parent.parent.parent / "patches" / "tensile"
RESUME_PATCH = PATCHES / "0002-resume-finished-assembly-kernels.patch"
MODULE = "Tensile/ResumeKernels.py"
STARTUP_PATCH = PATCHES / "0003-resume-keeps-assembler-probes-and-logic-data.patch"
STARTUP_MODULE = "Tensile/ResumeStartup.py"


def added_file(patch: Path, path: str) -> str:
    """The text of the new file ``path`` that ``patch`` adds (its one ``@@ -0,0`` hunk)."""
    sections = re.split(r"^diff --git ", patch.read_text(), flags=re.M)
    section = next(s for s in sections if s.startswith(f"a/{path} b/{path}"))
    assert "\nnew file mode " in section, f"{patch.name} changes {path}, it does not add it"
    hunk = section.split("\n@@ -0,0 ", 1)[1].split("\n", 1)[1]
    return "".join(line[1:] + "\n" for line in hunk.splitlines() if line.startswith("+"))


def _module(folder: Path, patch: Path, path: str) -> ModuleType:
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / Path(path).name
    source.write_text(added_file(patch, path))
    spec = importlib.util.spec_from_file_location(source.stem, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resume_module(folder: Path) -> ModuleType:
    """Tensile's ResumeKernels as the patch adds it, written into ``folder`` and imported."""
    return _module(folder, RESUME_PATCH, MODULE)


def startup_module(folder: Path) -> ModuleType:
    """Tensile's ResumeStartup as its patch adds it, written into ``folder`` and imported."""
    return _module(folder, STARTUP_PATCH, STARTUP_MODULE)
