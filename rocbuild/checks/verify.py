"""Prove, without a GPU, that installed files carry code objects for the requested targets,
and that the installed programs and libraries find their libraries on their own.

HIP programs and libraries keep their device code in the ELF section ``.hip_fatbin``: a
concatenation of offload bundles, one per translation unit (``clang-offload-bundler --list``
reads only the first, so a library where one TU lacks gfx906 looks fine to it and fails at
run time with "invalid device function"). This module walks every bundle (``model/bundles.py``
streams them: a section is never read whole) and checks each one against the requested
targets with the loader's target-ID rules. It also checks the rocBLAS/Tensile file set per
target (docs/architecture.md, Facts) and, for a prefix, the linkage of every host ELF file
(``linkage.py``: each DT_NEEDED resolves with a bare environment, and nothing the stack
installs resolves to a copy outside the prefix).

Layers, top to bottom: ELF reading (``model/elf.py``), bundle parsing (``model/bundles.py``,
which the base road reads too), target
matching (``device_modes``, ``missing_in_bundle``), one file (``verify_file``), the Tensile
set (``check_tensile``), linkage (``linkage.py``), whole trees (``verify_prefix``,
``verify_paths``) and the JSON document (``to_json``). Only the optional
clang-offload-bundler fallback for zstd runs a subprocess; every error in a file becomes that
file's verdict, never an exception.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path
from typing import Any

from rocbuild.checks import linkage, shapes
from rocbuild.checks.bundles import bundler_lister, default_decoders, find_bundler
from rocbuild.errors import ConfigError
from rocbuild.model.bundles import (
    BUNDLE_MAGIC,
    COMPRESSED_MAGIC,
    Bundle,
    DecodeError,
    Decoders,
    Entry,
    scan_fatbin,
    zstandard_decoder,
)
from rocbuild.model.codeobjects import CodeObject, bare_code_object, embedded_code_objects
from rocbuild.model.elf import (
    ELF_MAGIC,
    FormatError,
    NotElf,
    UnsupportedElf,
    kernel_names,
    open_source,
    parse_sections,
    section_list,
    section_window,
)
from rocbuild.model.recipes import HEADERS, HOST, JIT, TENSILE, Recipe
from rocbuild.model.targets import TargetId, device_modes, runs_on, via_generic
from rocbuild.model.tensile import TensileResult, check_tensile

# 2: "ok" also covers linkage; files carry "linkage", bundles "number" (as in the text)
JSON_SCHEMA = 2
_JSON_KERNELS = 10
_LISTED_BUNDLES = 8  # bundle numbers named in a missing-target line


# ---------------------------------------------------------------------------------------------
# Target matching

def missing_in_bundle(bundle: Bundle, requests: Sequence[TargetId],
                      ) -> list[tuple[TargetId, list[TargetId]]]:
    """(request, its device modes that no code object of the bundle runs on), for each
    request the bundle does not fully satisfy."""
    found = [t for t in (e.target for e in bundle.amdgcn) if t is not None]
    result = []
    for request in requests:
        modes = [m for m in device_modes(request) if not any(runs_on(c, m) for c in found)]
        if modes:
            result.append((request, modes))
    return result


def generic_uses(bundles: Sequence[Bundle], requests: Sequence[TargetId],
                 ) -> list[tuple[TargetId, str, int]]:
    """(request, generic processor, how many bundles meet it only through a code object for
    that generic) for each request some bundle meets that way: Debian's rocSOLVER carries
    gfx9-generic, not gfx906, which the 6.4 runtime loads on a gfx906 (targets.GENERIC_OF)."""
    uses = []
    for request in requests:
        generic, count = "", 0
        for bundle in bundles:
            found = via_generic([t for t in (e.target for e in bundle.amdgcn) if t], request)
            if found is not None:
                generic, count = found, count + 1
        if count:
            uses.append((request, generic, count))
    return uses


def describe_missing(missing: list[tuple[TargetId, list[TargetId]]]) -> str:
    """``no gfx906 code object`` when nothing fits, else the device modes left out."""
    return "; ".join(f"no code object for {request}" if len(modes) == len(device_modes(request))
                     else f"no {request} code object that runs on {' or '.join(map(str, modes))}"
                     for request, modes in missing)


# ---------------------------------------------------------------------------------------------
# One file


class Verdict(str, Enum):
    """Per-file result; the value is the stable JSON spelling, ``label`` the table's."""

    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"
    CORRUPT = "corrupt"
    NOT_ELF = "not-elf"
    NO_GPU_CODE = "no-gpu-code"
    UNSUPPORTED = "unsupported"
    # a bare code object for a processor not asked for: in a scanned folder another
    # processor's part of a Tensile set (counted, not failed); named on its own, a failure
    OTHER_TARGET = "other-target"
    # no GPU code, and its recipe says none is expected: a host library ([gpu] shape =
    # "host") over one that carries it, or a library whose kernels are compiled at run time
    HOST = "host"
    RUNTIME = "runtime"

    @property
    def label(self) -> str:
        return {"not-elf": "not ELF", "no-gpu-code": "no GPU code",
                "other-target": "other target", "host": "host library",
                "runtime": "compiled at run time"}.get(self.value, self.value)


# Verdicts of files that hold no GPU code at all: a tree scan counts and skips them.
NO_CODE_VERDICTS = frozenset({Verdict.NOT_ELF, Verdict.NO_GPU_CODE, Verdict.UNSUPPORTED})
# Verdicts that pass: code for every target, or no code where the recipe's shape expects none
PASSING = frozenset({Verdict.PASS, Verdict.HOST, Verdict.RUNTIME})


@dataclass(frozen=True)
class FileResult:
    path: Path
    verdict: Verdict
    bundles: tuple[Bundle, ...] = ()
    problems: tuple[str, ...] = ()  # one line per thing wrong, naming the bundle
    note: str = ""  # why a file has no verdict on its code (not ELF, no .hip_fatbin, ...)

    @property
    def targets_found(self) -> tuple[str, ...]:
        """Every amdgcn target ID in the file, unparsed ones as written."""
        names = {str(e.target or e.target_text) for b in self.bundles for e in b.amdgcn}
        return tuple(sorted(names))


def verify_file(path: Path, targets: Sequence[TargetId],
                decoders: Decoders | None = None) -> FileResult:
    """Check one file; every failure becomes the verdict, never an exception. The
    ``.hip_fatbin`` section is streamed from the file, never read whole."""
    try:
        with open_source(path) as src:
            bare = bare_code_object(src)
            if bare is not None:
                return judge_bare(path, bare, targets)
            sections = parse_sections(src)
            fatbin = sections.get(".hip_fatbin")
            if fatbin is None:
                embedded = embedded_code_objects(src, section_list(src)) if sections else []
                if embedded:
                    return judge_embedded(path, embedded, targets)
                note = "no .hip_fatbin section" if sections else "no section table"
                return FileResult(path, Verdict.NO_GPU_CODE, note=note)
            window = section_window(src, fatbin)
            bundles = scan_fatbin(window, decoders)
    except NotElf:
        return FileResult(path, Verdict.NOT_ELF, note="not an ELF file")
    except UnsupportedElf as exc:
        return FileResult(path, Verdict.UNSUPPORTED, note=f"{exc}: only 64-bit little-endian "
                          "ELF files are read")
    except FormatError as exc:
        return FileResult(path, Verdict.CORRUPT, problems=(f"corrupt: {exc}",))
    except OSError as exc:
        return FileResult(path, Verdict.UNKNOWN,
                          problems=(f"cannot read: {exc.strerror or exc}",))
    return judge(path, bundles, targets, window.size)


def judge(path: Path, bundles: list[Bundle], targets: Sequence[TargetId],
          section_size: int) -> FileResult:
    """The verdict of a file from its bundles."""
    problems = [f"corrupt: {b.corrupt}" for b in bundles if b.corrupt]
    if not bundles:
        if section_size == 0:
            return FileResult(path, Verdict.NO_GPU_CODE, note="empty .hip_fatbin section")
        problems.append(f"corrupt: no offload bundle in .hip_fatbin ({section_size} bytes)")
    gpu = [b for b in bundles if b.amdgcn]
    unreadable = [b for b in bundles if b.unreadable]
    if not problems and not gpu and not unreadable:
        others = sorted({e.id for b in bundles for e in b.entries if e.kind != "host"})
        note = "no amdgcn code object in .hip_fatbin"
        return FileResult(path, Verdict.NO_GPU_CODE, tuple(bundles),
                          note=note + (f" (only {', '.join(others)})" if others else ""))
    missing_lines = missing_by_file(gpu, targets)
    problems += missing_lines
    problems += [f"{b.label()}: {b.unreadable}" for b in unreadable]
    if any(b.corrupt for b in bundles) or not bundles:
        verdict = Verdict.CORRUPT
    elif missing_lines:
        verdict = Verdict.FAIL
    elif unreadable:
        verdict = Verdict.UNKNOWN
    else:
        verdict = Verdict.PASS
    return FileResult(path, verdict, tuple(bundles), tuple(problems))


def judge_embedded(path: Path, found: Sequence[CodeObject], targets: Sequence[TargetId],
                   ) -> FileResult:
    """The verdict of a library whose GPU code is embedded as whole code objects (ROCr's
    blit kernels): one code object runs on a device, so some code object must run on each
    target (not each one on every target, as for a bundle)."""
    entries = tuple(Entry(f"hipv4-amdgcn-amd-amdhsa--{c.target}") for c in found)
    group = Bundle(0, found[0].offset, entries=entries, embedded=True)
    missing = missing_in_bundle(group, targets)
    if not missing:
        return FileResult(path, Verdict.PASS, (group,))
    line = (f"{describe_missing(missing)} among its {len(found)} embedded code objects "
            f"(for {_targets_of([group]) or 'unknown targets'})")
    return FileResult(path, Verdict.FAIL, (group,), (line,))


def judge_bare(path: Path, code: CodeObject, targets: Sequence[TargetId]) -> FileResult:
    """The verdict of a file that is one AMDGPU code object (ELF machine EM_AMDGPU, e.g.
    Tensile's ``*_gfx906.co``): it serves one processor, so it is judged against the requested
    targets of that processor only (the xnack and sramecc rules of ``device_modes``), and is
    OTHER_TARGET when none of them is its processor. Whether every requested processor has its
    files is the Tensile check's question (``check_tensile``)."""
    group = Bundle(0, 0, entries=(Entry(f"hipv4-amdgcn-amd-amdhsa--{code.target}"),))
    entry = group.entries[0]
    mine = [t for t in targets if entry.target is not None
            and t.processor == entry.target.processor]
    if not mine:
        return FileResult(path, Verdict.OTHER_TARGET, (group,),
                          note=f"a code object for {code.target}, no requested target")
    missing = missing_in_bundle(group, mine)
    if not missing:
        return FileResult(path, Verdict.PASS, (group,))
    return FileResult(path, Verdict.FAIL, (group,),
                      (f"{describe_missing(missing)}: the file is one code object, "
                       f"for {code.target}",))


def _targets_of(bundles: Iterable[Bundle]) -> str:
    return ", ".join(sorted({str(e.target or e.target_text) for b in bundles for e in b.amdgcn}))


def missing_by_file(gpu: Sequence[Bundle], targets: Sequence[TargetId]) -> list[str]:
    """One line per kind of missing code in a file, not one per bundle (a library has
    hundreds): "no code object for gfx906 (47 bundles, all for gfx90a)", or which bundles
    lack it, by the number --json gives them, with the first one's kernels to find its TU."""
    groups: dict[str, list[Bundle]] = {}
    for bundle in gpu:
        missing = missing_in_bundle(bundle, targets)
        if missing:
            groups.setdefault(describe_missing(missing), []).append(bundle)
    lines = []
    for text, bundles in groups.items():
        have = _targets_of(bundles)
        if len(bundles) == len(gpu):
            count = "1 bundle," if len(gpu) == 1 else f"{len(gpu)} bundles, all"
            lines.append(f"{text} ({count} for {have or 'unknown targets'})")
            continue
        numbers = ", ".join(f"#{b.number}" for b in bundles[:_LISTED_BUNDLES])
        more = ", …" if len(bundles) > _LISTED_BUNDLES else ""
        first = bundles[0]
        kernels = (f"; #{first.number} has kernels {', '.join(first.kernels[:3])}"
                   f"{', …' if len(first.kernels) > 3 else ''}") if first.kernels else ""
        lines.append(f"{text} in {len(bundles)} of {len(gpu)} bundles: {numbers}{more} "
                     f"(they have {have or 'unknown targets'}{kernels})")
    return lines


# ---------------------------------------------------------------------------------------------
# Trees and the report


@dataclass(frozen=True)
class ShapeResult:
    """What a component's [gpu] shape asked of its files, and what was found."""

    component: str
    shape: str
    checked: tuple[str, ...] = ()  # one line per thing that holds
    problems: tuple[str, ...] = ()  # one line per thing wrong (a file's own lines are its)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class VerifyReport:
    targets: tuple[TargetId, ...]
    prefix: Path | None
    files: tuple[FileResult, ...]  # files with GPU code, broken files, and files named directly
    skipped: int = 0  # files in scanned folders that hold no GPU code
    tensile: tuple[TensileResult, ...] = ()
    problems: tuple[str, ...] = ()  # report-level: e.g. nothing with GPU code was found
    linkage: linkage.LinkageReport | None = None  # None: not checked
    other_targets: int = 0  # code objects in scanned folders for processors not asked for
    shapes: tuple[ShapeResult, ...] = ()  # per component with a [gpu] shape

    @property
    def code_ok(self) -> bool:
        """Every file carries code for every target (the Tensile set included), and each
        component has what its shape needs."""
        return (not self.problems and all(f.verdict in PASSING for f in self.files)
                and all(t.ok for t in self.tensile) and all(s.ok for s in self.shapes))

    @property
    def ok(self) -> bool:
        return self.code_ok and (self.linkage is None or self.linkage.ok)


def iter_files(roots: Iterable[Path]) -> Iterator[Path]:
    """Regular files under ``roots``, sorted, each inode once. Inside folders symlinks are
    skipped (lib/libfoo.so -> libfoo.so.1 -> libfoo.so.1.2 is one library) and symlinked
    folders are not entered; a root itself is followed (lib64 -> lib, a named .so link)."""
    seen: set[tuple[int, int]] = set()
    for root in roots:
        for path, follow in _walk(root):
            try:
                info = path.stat() if follow else path.lstat()
            except OSError:
                continue
            key = (info.st_dev, info.st_ino)
            if stat.S_ISREG(info.st_mode) and key not in seen:
                seen.add(key)
                yield path


def _walk(root: Path) -> Iterator[tuple[Path, bool]]:
    """(path, follow symlink) for a root file, or every file in a root folder."""
    if not root.is_dir():
        yield root, True
        return
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            yield Path(folder) / name, False


@dataclass
class _Scan:
    results: list[FileResult]
    skipped: int = 0  # no GPU code
    other: int = 0  # bare code objects for processors not asked for
    tensile_dirs: dict[Path, None] | None = None  # folders holding Tensile files, in order


def _scan(paths: Iterable[Path], targets: Sequence[TargetId], decoders: Decoders,
          keep_no_code: bool) -> _Scan:
    scan = _Scan([], tensile_dirs={})
    for path in iter_files(paths):
        if path.name.startswith("TensileLibrary") and scan.tensile_dirs is not None:
            scan.tensile_dirs[path.parent] = None
        result = verify_file(path, targets, decoders)
        if keep_no_code:
            scan.results.append(result)
        elif result.verdict is Verdict.OTHER_TARGET:
            scan.other += 1
        elif result.verdict in NO_CODE_VERDICTS:
            scan.skipped += 1
        else:
            scan.results.append(result)
    return scan


def tensile_sets(folders: Iterable[Path], targets: Sequence[TargetId]
                 ) -> tuple[TensileResult, ...]:
    """The Tensile check of every folder holding Tensile files, for each requested processor:
    a Tensile set is checked wherever verify meets one (Debian keeps rocBLAS's in
    lib/<multiarch>/rocblas/<version>/library), not only in a prefix's lib/rocblas/library."""
    processors = dict.fromkeys(t.processor for t in targets)
    return tuple(check_tensile(folder, p) for folder in folders for p in processors)


# a component's recipe and the files its install put into the prefix (None: not recorded)
Duty = tuple[Recipe, Sequence[Path] | None]


def verify_prefix(prefix: Path, targets: tuple[TargetId, ...],
                  decoders: Decoders | None = None,
                  system: linkage.System | None = None,
                  linkage_exempt: Mapping[Path, str] | None = None,
                  components: Mapping[str, Duty] | None = None,
                  library_dirs: Sequence[Path] = (),
                  ) -> VerifyReport:
    """Check an installed stack: every file with GPU code under lib/, lib64/ and bin/, the
    Tensile set when rocBLAS is installed, and the linkage of every host ELF file in the
    prefix. ``linkage_exempt``: installed files of recipes with ``install.runpath = false``,
    with the recipe's reason (shown, never failing). ``components``: the prefix's components
    whose recipe says a GPU shape ([gpu], or ``gpu_code = true``), with the files each
    installed; each is held to its shape (``shape_results``). Without it (a prefix of unknown
    recipes), some file must carry GPU code. ``library_dirs``: where else a run-time compiler
    may be found (a base's lib folders). ``report.ok`` is the build's gate."""
    if not prefix.is_dir():
        raise ConfigError(f"prefix {prefix} does not exist or is not a folder",
                          tip="pass --prefix PATH of an installed stack, or run "
                              "`rocbuild build` first")
    if not targets:
        raise ConfigError("no GPU target to verify", tip="pass --target, e.g. --target gfx906")
    decoders = decoders or default_decoders(prefix)
    roots = [prefix / d for d in ("lib", "lib64", "bin") if (prefix / d).exists()]
    scan = _scan(roots, targets, decoders, keep_no_code=False)
    files, skipped = scan.results, scan.skipped
    problems = []
    if components is None and not files:
        problems.append(f"no library or program with GPU code under {prefix} (lib/, lib64/, "
                        "bin/): nothing proves the stack can run on the GPU")
    # where rocBLAS is installed its set must be complete (even when the folder is missing),
    # beside it as for any Tensile-shaped library; any other folder of Tensile files too
    libraries = dict.fromkeys(folder for lib in
                              [prefix / "lib", *sorted(prefix.glob("lib/*-linux-gnu*"))]
                              if any(lib.glob("librocblas.so*"))
                              for folder in shapes.tensile_folders(lib / "librocblas.so"))
    for recipe, _ in (components or {}).values():
        if recipe.gpu == TENSILE:
            for _, hits in shapes.resolve_libraries(prefix, recipe):
                libraries.update(dict.fromkeys(f for h in hits for f in shapes.tensile_folders(h)))
    libraries.update(scan.tensile_dirs or {})
    tensile = tensile_sets(libraries, targets)
    shaped = shape_results(prefix, files, targets, components or {},
                           [prefix / "lib", *library_dirs])
    links = linkage.check_linkage(iter_files([prefix]), prefix, system,
                                  exempt=linkage_exempt)
    return VerifyReport(targets, prefix, tuple(files), skipped, tensile, tuple(problems),
                        links, other_targets=scan.other, shapes=tuple(shaped))


def shape_results(prefix: Path, files: Sequence[FileResult], targets: Sequence[TargetId],
                  components: Mapping[str, Duty], library_dirs: Sequence[Path],
                  ) -> list[ShapeResult]:
    """Each component held to its recipe's [gpu] shape (model/recipes.py GPU_SHAPES):

    - bundles, tensile: each ``[gpu] libraries`` file is installed and carries code for every
      target (its own verdict says where not); without a list, some installed file must
      carry GPU code. tensile adds the kernel folder beside the library (``tensile_sets``);
    - jit: the listed libraries are installed (any bundles they hold are checked as above),
      and the run-time compiler knows every target (``shapes.jit_lines``);
    - host, headers: no GPU code is expected; a listed host library must be installed."""
    with_code = {os.path.realpath(f.path): f for f in files}  # only code-bearing files
    processors = list(dict.fromkeys(t.processor for t in targets))
    results = []
    for name, (recipe, installed) in sorted(components.items()):
        shape = recipe.gpu
        checked: list[str] = []
        problems: list[str] = []
        listed = shapes.resolve_libraries(prefix, recipe)
        for entry, hits in listed:
            if not hits:
                problems.append(f"{name}: its [gpu] library {entry} is not in the prefix")
            for hit in hits:
                rel = _shown_in(hit, prefix)
                found = with_code.get(os.path.realpath(hit))
                if found is None and shape in (HOST, HEADERS, JIT):
                    checked.append(f"{rel}: no GPU code, as its shape says")
                elif found is None:
                    problems.append(f"{name}: {rel} holds no GPU code, but its recipe says "
                                    f"{_said(recipe)} (was its GPU backend off?)")
                elif found.verdict is Verdict.PASS:
                    checked.append(f"{rel}: {_bundle_count(found)} carry "
                                   f"{', '.join(map(str, targets))}")
                else:
                    problems.append(f"{name}: {rel} is {found.verdict.label} (see above)")
        if shape in (HOST, HEADERS):
            checked.append("no GPU code expected: " + ("it calls a library that carries it"
                                                       if shape == HOST else
                                                       "compiled into what uses it"))
        elif not listed and shape != JIT:
            carried = (bool(with_code) if installed is None else
                       any(os.path.realpath(p) in with_code for p in installed))
            if carried:
                checked.append("an installed file carries GPU code")
            else:
                problems.append(f"{name} carries no GPU code: its recipe says {_said(recipe)}, "
                                "but none of the libraries and programs it installed holds a "
                                ".hip_fatbin or embedded code objects (was its GPU backend "
                                "off?)")
        if shape == JIT:
            dirs = list(dict.fromkeys([*(h.parent for _, hits in listed for h in hits),
                                       *library_dirs]))
            more, wrong = shapes.jit_lines(dirs, installed, processors,
                                           {p: _shown_in(p, prefix) for p in installed or ()})
            checked += more
            problems += [f"{name}: {w}" for w in wrong]
        results.append(ShapeResult(name, shape, tuple(checked), tuple(problems)))
    return results


def _said(recipe: Recipe) -> str:
    """How the recipe says its shape, in its own words."""
    return f'[gpu] shape = "{recipe.gpu_shape}"' if recipe.gpu_shape else "gpu_code = true"


def _shown_in(path: Path, prefix: Path) -> str:
    return str(path.relative_to(prefix)) if path.is_relative_to(prefix) else str(path)


def _bundle_count(result: FileResult) -> str:
    if any(b.embedded for b in result.bundles):
        return "its embedded code objects"
    count = len(result.bundles)
    return "its 1 bundle" if count == 1 else f"all {count} bundles"


NO_CODE_PROBLEM = "no GPU code: this file has no .hip_fatbin/offload bundle"


def _named(result: FileResult, targets: Sequence[TargetId],
           index: shapes.ShapeIndex | None = None) -> FileResult:
    """A file named on the command line that holds no GPU code says so as its problem,
    unless its recipe's shape expects none (``_by_shape``)."""
    if result.verdict is Verdict.OTHER_TARGET:
        return replace(result, verdict=Verdict.FAIL, problems=(
            *result.problems,
            f"no code object for {', '.join(map(str, targets))}: {result.note}"))
    if result.verdict not in NO_CODE_VERDICTS:
        return result
    recipe = index.recipe_of(result.path) if index is not None else None
    if result.verdict is Verdict.NO_GPU_CODE and recipe is not None:
        return _by_shape(result, recipe, targets)
    why = f" ({result.note})" if result.note else ""
    return replace(result, problems=(*result.problems, NO_CODE_PROBLEM + why))


def _by_shape(result: FileResult, recipe: Recipe, targets: Sequence[TargetId]) -> FileResult:
    """A named library without GPU code, judged by its recipe's shape: a host library passes
    (its GPU code is in what it loads, checked by ``_loaded``), a run-time compiled one
    passes when its runtime compiler knows every target, any other lacks its code."""
    said = f'{recipe.name}: [gpu] shape = "{recipe.gpu}"'
    if recipe.gpu in (HOST, HEADERS):
        return replace(result, verdict=Verdict.HOST,
                       note=f"{said}, no GPU code expected")
    if recipe.gpu == JIT:
        processors = list(dict.fromkeys(t.processor for t in targets))
        checked, problems = shapes.jit_lines([result.path.parent], None, processors)
        if problems:
            return replace(result, verdict=Verdict.FAIL, problems=(*result.problems, *problems))
        return replace(result, verdict=Verdict.RUNTIME, note=f"{said}; {'; '.join(checked)}")
    why = f" ({result.note})" if result.note else ""
    return replace(result, problems=(*result.problems, f"{NO_CODE_PROBLEM}{why}, but {said}"))


def _loaded(files: Sequence[FileResult], links: linkage.LinkageReport,
            index: shapes.ShapeIndex, targets: tuple[TargetId, ...],
            decoders: Decoders) -> tuple[list[FileResult], list[Path]]:
    """The libraries a named host library loads whose recipe says they carry GPU code (Debian's
    libhipblas.so.2 -> librocblas.so.4), verified too: a host library runs on a target only
    when they do. Returns their results and the Tensile folders of the Tensile-shaped ones."""
    hosts = {f.path for f in files if f.verdict is Verdict.HOST}
    have = {os.path.realpath(f.path) for f in files}
    added: list[FileResult] = []
    folders: list[Path] = []
    for entry in links.files:
        if entry.path not in hosts:
            continue
        for needed in entry.needed:
            recipe = index.recipe_of(needed.resolved) if needed.resolved else None
            if needed.resolved is None or recipe is None or not recipe.carries_gpu_code:
                continue
            real = os.path.realpath(needed.resolved)
            if real in have:
                continue
            have.add(real)
            found = verify_file(Path(real), targets, decoders)
            added.append(replace(found, note=f"loaded by {entry.path.name}"
                                 + (f"; {found.note}" if found.note else "")))
            if recipe.gpu == TENSILE:
                folders += shapes.tensile_folders(Path(real))
    return added, folders


def verify_paths(paths: Sequence[Path], targets: tuple[TargetId, ...],
                 decoders: Decoders | None = None, prefix: Path | None = None,
                 system: linkage.System | None = None,
                 index: shapes.ShapeIndex | None = None) -> VerifyReport:
    """Check the given files (each gets a row, whatever it holds) and folders (scanned like a
    prefix: only files with GPU code get a row), and the linkage of the host ELF files among
    them. ``prefix`` supplies its clang-offload-bundler for zstd bundles and its libraries
    for the "outside the prefix" rule. ``index``: the recipes' shapes, so a named host
    library (hipBLAS) passes on the libraries it loads, which are then checked too."""
    decoders = decoders or default_decoders(prefix)
    files: list[FileResult] = []
    skipped = other = 0
    problems = []
    folders: dict[Path, None] = {}
    for path in paths:
        if not path.exists():
            raise ConfigError(f"path {path} does not exist",
                              tip="pass files or folders to check, e.g. "
                                  "`rocbuild verify /opt/rocm-6.4-gfx906/lib/libggml-hip.so`")
        scan = _scan([path], targets, decoders, keep_no_code=not path.is_dir())
        files += (scan.results if path.is_dir() else
                  [_named(r, targets, index) for r in scan.results])
        skipped += scan.skipped
        other += scan.other
        if path.is_dir():
            folders.update(scan.tensile_dirs or {})
        if path.is_dir() and not scan.results:
            wanted = ", ".join(str(t) for t in targets)
            problems.append(f"no file with GPU code under {path}" if not scan.other else
                            f"no file with code for {wanted} under {path} ({scan.other} "
                            "code objects for other processors)")
    prefix_files = list(iter_files([prefix])) if prefix is not None else None
    links = linkage.check_linkage(iter_files(paths), prefix, system, prefix_files)
    if index is not None:
        loaded, tensile_folders = _loaded(files, links, index, targets, decoders)
        files += loaded
        folders.update(dict.fromkeys(tensile_folders))
    return VerifyReport(targets, None, tuple(files), skipped, tensile_sets(folders, targets),
                        tuple(problems), links, other_targets=other)


# ---------------------------------------------------------------------------------------------
# JSON


def _bundle_json(bundle: Bundle, targets: Sequence[TargetId]) -> dict[str, Any]:
    return {
        "index": bundle.index,
        "number": bundle.number,  # as problem lines and the table name it: "bundle #3"
        "offset": bundle.offset,
        "compression": bundle.compression,
        "entries": [{"id": e.id, "size": e.size,
                     "target": (str(e.target or e.target_text) if e.is_amdgcn else None)}
                    for e in bundle.entries],
        "kernels": list(bundle.kernels[:_JSON_KERNELS]),  # enough to tell which TU it is
        "kernel_count": len(bundle.kernels),
        "missing": [{"target": str(request), "device_modes": [str(m) for m in modes]}
                    for request, modes in missing_in_bundle(bundle, targets)]
        if bundle.amdgcn else [],
        "unreadable": bundle.unreadable,
        "corrupt": bundle.corrupt,
        "embedded": bundle.embedded,  # code objects embedded as data (ROCr), not a bundle
    }


def to_json(report: VerifyReport) -> dict[str, Any]:
    """The stable ``--json`` document (``schema`` changes when a key changes meaning)."""
    links = {f.path: f for f in report.linkage.files} if report.linkage else {}
    return {
        "schema": JSON_SCHEMA,
        "ok": report.ok,
        "targets": [str(t) for t in report.targets],
        "prefix": str(report.prefix) if report.prefix else None,
        "files": [{
            "path": str(f.path),
            "verdict": f.verdict.value,
            "targets_found": list(f.targets_found),
            "problems": list(f.problems),
            "note": f.note or None,
            # requests met only through a generic code object ("gfx906" by gfx9-generic)
            "via_generic": [{"target": str(request), "generic": generic, "bundles": count}
                            for request, generic, count
                            in generic_uses(f.bundles, report.targets)],
            "bundles": [_bundle_json(b, report.targets) for b in f.bundles],
            "linkage": _file_linkage_json(links.get(f.path)),
        } for f in report.files],
        "skipped_without_gpu_code": report.skipped,
        "other_targets": report.other_targets,
        "tensile": [{"library": str(t.library), "target": t.processor, "ok": t.ok,
                     "missing": list(t.missing), "code_objects": t.code_objects}
                    for t in report.tensile],
        "problems": list(report.problems),
        "linkage": _linkage_json(report.linkage),
        # per component with a [gpu] shape: what its shape asked and what was found
        "shapes": [{"component": s.component, "shape": s.shape, "ok": s.ok,
                    "checked": list(s.checked), "problems": list(s.problems)}
                   for s in report.shapes],
    }


def _file_linkage_json(result: linkage.FileLinkage | None) -> dict[str, Any] | None:
    """needed -> resolved path, "not found" or "outside the prefix, the prefix has its own
    copy"; ``details`` adds how each was found and the prefix's copy."""
    if result is None:
        return None
    return {
        "path": str(result.path),
        "ok": result.ok,
        "runpath": result.runpath,
        "rpath": result.rpath,
        "error": result.error,
        "exempt": result.exempt,
        "needed": {n.name: n.describe() for n in result.needed},
        "details": [{"name": n.name, "resolved": str(n.resolved) if n.resolved else None,
                     "via": n.via, "own_copy": str(n.own_copy) if n.own_copy else None,
                     "ok": n.ok} for n in result.needed],
    }


def _linkage_json(report: linkage.LinkageReport | None) -> dict[str, Any] | None:
    if report is None:
        return None
    return {
        "ok": report.ok,
        "system_root": str(report.system_root),
        "checked": len(report.files),
        "other_abi": report.other_abi,
        "files": [_file_linkage_json(f) for f in report.files],
    }


__all__ = [
    "BUNDLE_MAGIC", "COMPRESSED_MAGIC", "ELF_MAGIC", "NO_CODE_PROBLEM", "Bundle", "DecodeError",
    "Decoders", "Duty", "Entry", "FileResult", "ShapeResult", "TensileResult", "Verdict",
    "VerifyReport",
    "bundler_lister", "check_tensile", "default_decoders", "describe_missing", "device_modes",
    "find_bundler", "generic_uses", "kernel_names", "missing_by_file", "missing_in_bundle",
    "scan_fatbin", "to_json", "verify_file", "verify_paths", "verify_prefix", "zstandard_decoder",
]
