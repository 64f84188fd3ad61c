"""The Tensile resume patch's own module, read from the patch (patches/tensile/): the Tensile
source is not here (no network in tests), so the file the patch adds is extracted and
imported, and the stand-in TensileCreateLibrary of the e2e test runs it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

PATCHES = Path(__file__).resolve().parent.parent.parent / "patches" / "tensile"
RESUME_PATCH = PATCHES / "0002-resume-finished-assembly-kernels.patch"
MODULE = "Tensile/ResumeKernels.py"


def added_file(patch: Path, path: str) -> str:
    """The text of the new file ``path`` that ``patch`` adds (its one ``@@ -0,0`` hunk)."""
    sections = re.split(r"^diff --git ", patch.read_text(), flags=re.M)
    section = next(s for s in sections if s.startswith(f"a/{path} b/{path}"))
    assert "\nnew file mode " in section, f"{patch.name} changes {path}, it does not add it"
    hunk = section.split("\n@@ -0,0 ", 1)[1].split("\n", 1)[1]
    return "".join(line[1:] + "\n" for line in hunk.splitlines() if line.startswith("+"))


def resume_module(folder: Path) -> ModuleType:
    """Tensile's ResumeKernels as the patch adds it, written into ``folder`` and imported."""
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "ResumeKernels.py"
    source.write_text(added_file(RESUME_PATCH, MODULE))
    spec = importlib.util.spec_from_file_location("ResumeKernels", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
