"""The Tensile file set rocBLAS loads for one processor: what a complete rocBLAS install (or an
installed base) must hold. Model knowledge, so both the base road (model/base.py) and
verify can ask it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TensileResult:
    library: Path  # <prefix>/lib/rocblas/library
    processor: str  # file names carry the processor only, e.g. gfx906
    missing: tuple[str, ...]  # the pieces not found, by name or pattern
    code_objects: int = 0  # *_<gfx>.co files found

    @property
    def ok(self) -> bool:
        return not self.missing


def check_tensile(library: Path, processor: str) -> TensileResult:
    """The rocBLAS lazy-loading file set for one processor (docs/architecture.md, Facts): the parent
    catalog, at least one code object with its catalog, and the source-kernel object."""
    lazy = f"TensileLibrary_lazy_{processor}.dat"
    names = _nonempty_files(library)
    code_objects = [n for n in names if n.endswith(f"_{processor}.co")]
    catalogs = [n for n in names if n.endswith(f"_{processor}.dat") and n != lazy]
    kernels = [n for n in names if n.startswith(f"Kernels.so-000-{processor}")
               and n.endswith(".hsaco")
               and not n[len(f"Kernels.so-000-{processor}"):][:1].isalnum()]
    missing = []
    if lazy not in names:
        missing.append(lazy)
    if not code_objects:
        missing.append(f"*_{processor}.co")
    if not catalogs:
        missing.append(f"*_{processor}.dat (besides {lazy})")
    if not kernels:
        missing.append(f"Kernels.so-000-{processor}*.hsaco")
    return TensileResult(library, processor, tuple(missing), len(code_objects))


def _nonempty_files(folder: Path) -> set[str]:
    # an empty file is what an interrupted install leaves: it counts as missing
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return set()
    return {e.name for e in entries if e.is_file() and e.stat().st_size > 0}
