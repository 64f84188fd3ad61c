"""The rocBLAS/Tensile file set per target, alone and as part of a prefix scan."""

from __future__ import annotations

import os
from pathlib import Path

from rocbuild.checks.shapes import tensile_folders
from rocbuild.checks.verify import Verdict, check_tensile, verify_prefix
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import resolve
from rocbuild.model.targets import parse_target_list
from tests.unit.test_verify_scan import elf_with_fatbin, tu

COMPLETE = ("TensileLibrary_lazy_gfx906.dat",
            "TensileLibrary_Type_SS_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx906.co",
            "TensileLibrary_Type_SS_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx906.dat",
            "Kernels.so-000-gfx906-xnack-.hsaco")


def library(tmp_path: Path, *names: str, empty: tuple[str, ...] = ()) -> Path:
    folder = tmp_path / "lib" / "rocblas" / "library"
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"" if name in empty else b"data")
    return folder


def test_complete_set(tmp_path: Path) -> None:
    result = check_tensile(library(tmp_path, *COMPLETE), "gfx906")
    assert result.ok and result.missing == () and result.code_objects == 1


def test_older_kernel_object_name(tmp_path: Path) -> None:
    names = [*COMPLETE[:3], "Kernels.so-000-gfx906.hsaco"]
    assert check_tensile(library(tmp_path, *names), "gfx906").ok


def test_each_missing_piece_is_named(tmp_path: Path) -> None:
    folder = library(tmp_path, "TensileLibrary_lazy_gfx906.dat")
    assert check_tensile(folder, "gfx906").missing == (
        "*_gfx906.co", "*_gfx906.dat (besides TensileLibrary_lazy_gfx906.dat)",
        "Kernels.so-000-gfx906*.hsaco")
    assert check_tensile(tmp_path / "nowhere", "gfx906").missing == (
        "TensileLibrary_lazy_gfx906.dat", "*_gfx906.co",
        "*_gfx906.dat (besides TensileLibrary_lazy_gfx906.dat)", "Kernels.so-000-gfx906*.hsaco")


def test_other_architectures_and_empty_files_do_not_count(tmp_path: Path) -> None:
    other = [n.replace("gfx906", "gfx90a") for n in COMPLETE]
    folder = library(tmp_path, *other, "Kernels.so-000-gfx9060.hsaco", COMPLETE[0], COMPLETE[1],
                     empty=(COMPLETE[1],))
    assert check_tensile(folder, "gfx906").missing == (
        "*_gfx906.co", "*_gfx906.dat (besides TensileLibrary_lazy_gfx906.dat)",
        "Kernels.so-000-gfx906*.hsaco")
    assert check_tensile(folder, "gfx90a").ok


def test_prefix_with_rocblas_checks_the_set_per_processor(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "librocblas.so.4.4").write_bytes(elf_with_fatbin(tu("gfx906", "gfx90a")))
    os.symlink("librocblas.so.4.4", prefix / "lib" / "librocblas.so")
    library(prefix, *COMPLETE)
    targets = parse_target_list(["gfx906,gfx906:xnack-"])  # one processor: one Tensile check
    report = verify_prefix(prefix, targets)
    assert [f.verdict for f in report.files] == [Verdict.PASS]
    assert [(t.processor, t.ok) for t in report.tensile] == [("gfx906", True)]
    assert report.ok
    report = verify_prefix(prefix, parse_target_list(["gfx906,gfx90a"]))
    assert [(t.processor, t.ok) for t in report.tensile] == [("gfx906", True), ("gfx90a", False)]
    assert not report.ok


def test_no_tensile_check_without_rocblas(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libggml-hip.so").write_bytes(elf_with_fatbin(tu("gfx906")))
    report = verify_prefix(prefix, parse_target_list(["gfx906"]))
    assert report.tensile == () and report.ok


MULTIARCH = "lib/x86_64-linux-gnu"


def tensile_set(folder: Path, names: tuple[str, ...] = COMPLETE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"data")
    return folder


def gpu_library(prefix: Path, rel: str) -> Path:
    path = prefix / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(elf_with_fatbin(tu("gfx906")))
    return path


def test_tensile_folders_lie_beside_the_library_in_amds_or_debians_layout(
        tmp_path: Path) -> None:
    """<dir>/<name>/library (AMD's, rocbuild's) first, then <dir>/<name>/<version>/library
    (Debian's), in order; the first when neither exists, so a missing set is named."""
    amd = tmp_path / "amd" / "lib" / "librocblas.so.4"
    assert tensile_folders(amd) == [amd.parent / "rocblas" / "library"]  # none: named
    debian = tmp_path / "deb" / MULTIARCH / "librocblas.so.4"
    for version in ("4.5.0", "4.4.1"):
        (debian.parent / "rocblas" / version / "library").mkdir(parents=True)
    assert tensile_folders(debian) == [debian.parent / "rocblas" / v / "library"
                                       for v in ("4.4.1", "4.5.0")]
    (debian.parent / "rocblas" / "library").mkdir()
    assert tensile_folders(debian)[0] == debian.parent / "rocblas" / "library"


def test_rocblas_in_debians_multiarch_folder_has_its_set_checked(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    gpu_library(prefix, f"{MULTIARCH}/librocblas.so.4")
    report = verify_prefix(prefix, parse_target_list(["gfx906"]))
    assert [(t.library, t.ok) for t in report.tensile] == [
        (prefix / MULTIARCH / "rocblas" / "library", False)]  # missing: named, and a failure
    assert not report.ok
    versioned = tensile_set(prefix / MULTIARCH / "rocblas" / "4.4.1" / "library")
    report = verify_prefix(prefix, parse_target_list(["gfx906"]))
    assert [(t.library, t.ok) for t in report.tensile] == [(versioned, True)]
    assert report.ok


def test_a_tensile_set_anywhere_under_lib_is_checked(tmp_path: Path) -> None:
    """Tensile files in a folder no library names (hipBLASLt's, a copy) are held to the
    targets too."""
    prefix = tmp_path / "prefix"
    gpu_library(prefix, "lib/libggml-hip.so")
    other = tensile_set(prefix / "lib" / "hipblaslt" / "library",
                        tuple(n.replace("gfx906", "gfx90a") for n in COMPLETE))
    report = verify_prefix(prefix, parse_target_list(["gfx906"]))
    assert [(t.library, t.processor, t.ok) for t in report.tensile] == [
        (other, "gfx906", False)]
    assert not report.ok


def test_a_tensile_shaped_component_has_the_folder_beside_its_own_library_checked(
        tmp_path: Path, write_recipes) -> None:
    """A recipe of shape "tensile" whose library is not rocBLAS's name, in Debian's layout:
    the folder beside that library is where its set must be."""
    folder = write_recipes(blas='[source]\ngit = "https://example.com/b.git"\nref = "v1"\n'
                                '[cmake]\n[gpu]\nshape = "tensile"\n'
                                'libraries = ["lib/*-linux-gnu/libblas.so.1"]\n')
    recipe = load_stack(resolve({"recipes": str(folder)}, env={}, cwd=tmp_path)
                        ).components["blas"].recipe
    prefix = tmp_path / "prefix"
    gpu_library(prefix, f"{MULTIARCH}/libblas.so.1")
    report = verify_prefix(prefix, parse_target_list(["gfx906"]),
                           components={"blas": (recipe, None)})
    assert [(t.library, t.ok) for t in report.tensile] == [
        (prefix / MULTIARCH / "blas" / "library", False)]
