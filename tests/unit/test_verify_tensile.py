"""The rocBLAS/Tensile file set per target, alone and as part of a prefix scan."""

from __future__ import annotations

import os
from pathlib import Path

from rocbuild.checks.verify import Verdict, check_tensile, verify_prefix
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
