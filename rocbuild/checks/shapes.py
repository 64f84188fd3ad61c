"""Which library is which shape, and what a run-time compiled library needs for a target.

A recipe's ``[gpu]`` table says how its component carries GPU code (``model/recipes.py``
GPU_SHAPES): offload bundles in its libraries, rocBLAS's Tensile folder beside them, none at
all (a host wrapper such as hipBLAS over rocBLAS), headers only, or kernels compiled at run
time (MIOpen, rocFFT's run-time compilation). verify reads this module to know which file
belongs to which recipe (``ShapeIndex``, by the names in ``[gpu] libraries`` and ``[base]
provides``), and to check the run-time compiler a ``jit`` library needs: comgr (which hipRTC
and HIP's run-time compilation load with ``dlopen``, so it is not among their DT_NEEDED) must
know the target: its ISA table (``amd_comgr_get_isa_name``) names every processor it can
compile for as ``amdgcn-amd-amdhsa--<processor>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocbuild.model.baseaudit import library_patterns, name_matches
from rocbuild.model.recipes import Recipe, provides_alternatives

COMGR_GLOB = "libamd_comgr.so.*"
_CHUNK = 1 << 20
_ISA_PREFIX = b"amdgcn-amd-amdhsa--"


@dataclass(frozen=True)
class ShapeIndex:
    """The recipes that say a GPU shape, to look a library up by its file name."""

    recipes: tuple[Recipe, ...]

    @classmethod
    def of(cls, recipes: Iterable[Recipe]) -> ShapeIndex:
        return cls(tuple(r for r in recipes if r.gpu))

    def recipe_of(self, path: Path) -> Recipe | None:
        """The recipe whose library ``path`` is (its own name, or the name of the link it was
        named by), None when no recipe with a shape names it."""
        for name in dict.fromkeys((path.name, path.resolve().name)):
            for recipe in self.recipes:
                if any(name_matches(name, p) for p in library_patterns(recipe)):
                    return recipe
        return None


def resolve_libraries(root: Path, recipe: Recipe) -> list[tuple[str, list[Path]]]:
    """Each ``[gpu] libraries`` entry of ``recipe`` with the files it meets below ``root``
    (every alternative's, globs expanded; links followed when read)."""
    found = []
    for entry in recipe.gpu_libraries:
        hits: list[Path] = []
        for pattern in provides_alternatives(entry):
            hits += sorted(p for p in root.glob(pattern) if p.is_file())
        found.append((entry, list(dict.fromkeys(hits))))
    return found


def tensile_folders(library: Path) -> list[Path]:
    """Where a Tensile-shaped library keeps its kernel folder: ``<dir>/<name>/library`` (AMD's
    and rocbuild's layout: lib/rocblas/library) or ``<dir>/<name>/<version>/library``
    (Debian's lib/<multiarch>/rocblas/4.4.1/library); the first when neither exists."""
    stem = library.name.split(".so", 1)[0].removeprefix("lib")
    here = library.parent / stem
    found = [d for d in (here / "library", *sorted(here.glob("*/library"))) if d.is_dir()]
    return found or [here / "library"]


def find_comgr(folders: Sequence[Path]) -> Path | None:
    """The first real comgr library in ``folders`` (the library's own folder first)."""
    for folder in folders:
        hits = sorted(p for p in folder.glob(COMGR_GLOB) if p.is_file())
        if hits:
            return hits[-1].resolve()
    return None


def compiler_processors(comgr: Path, processors: Sequence[str]) -> set[str]:
    """The ``processors`` comgr's ISA table names (read in chunks, never whole)."""
    wanted = {p.encode() for p in processors}
    pattern = re.compile(re.escape(_ISA_PREFIX) + rb"(gfx[0-9a-z]+)(?=[\x00:])")
    found: set[str] = set()
    overlap = b""
    with open(comgr, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            data = overlap + chunk
            found.update(m[1].decode() for m in pattern.finditer(data) if m[1] in wanted)
            overlap = data[-64:]
    return found


def per_target_files(installed: Iterable[Path], processor: str) -> list[Path]:
    """Installed files named for ``processor`` that are data, not code (MIOpen's kernel and
    performance databases ``share/miopen/db/gfx906_60.kdb``, ``gfx906_60.db``)."""
    pattern = re.compile(rf"(^|[^0-9a-z]){re.escape(processor)}([^0-9a-z]|$)")
    return sorted(p for p in installed if pattern.search(p.name)
                  and not p.name.endswith((".co", ".hsaco", ".so")))


def jit_lines(library_dirs: Sequence[Path], installed: Iterable[Path] | None,
              processors: Sequence[str], shown: Mapping[Path, str] | None = None,
              ) -> tuple[list[str], list[str]]:
    """(what was checked, problems) for a component that compiles kernels at run time: the
    runtime compiler found in ``library_dirs`` must know each processor; per-target data
    files (kernel databases) are named, never required (without one the kernel is compiled at
    its first use)."""
    shown = shown or {}
    checked: list[str] = []
    problems: list[str] = []
    comgr = find_comgr(library_dirs)
    if comgr is None:
        where = ", ".join(str(d) for d in library_dirs)
        problems.append(f"no runtime compiler ({COMGR_GLOB}) in {where}: kernels compiled "
                        "at run time cannot be built")
        return checked, problems
    name = shown.get(comgr, str(comgr))
    known = compiler_processors(comgr, processors)
    for processor in processors:
        if processor in known:
            checked.append(f"runtime compiler {name} knows {processor}")
        else:
            problems.append(f"runtime compiler {name} does not know {processor} (its ISA table "
                            f"has no {_ISA_PREFIX.decode()}{processor}): kernels cannot be "
                            "compiled for it at run time")
        if installed is not None:
            data = per_target_files(installed, processor)
            checked.append(
                f"{len(data)} per-target data file{'' if len(data) == 1 else 's'} for "
                f"{processor}" + (f" ({', '.join(shown.get(p, p.name) for p in data[:3])}"
                                  f"{', …' if len(data) > 3 else ''})" if data else
                                  " (kernel databases: without one, each kernel is compiled "
                                  "at its first use)"))
    return checked, problems
