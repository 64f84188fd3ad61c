"""`verify` reads bare AMDGPU code objects (ELF machine EM_AMDGPU, not offload bundles) and
checks a Tensile set wherever it is given one, not only inside a prefix rocbuild built.

The files in tests/data/debian-rocblas-4.4.1-library are real: copied from Debian's
librocblas4 6.4.4-4 (sid, amd64), /usr/lib/x86_64-linux-gnu/rocblas/4.4.1/library: the lazy
catalog of gfx906, one gfx906 code object with its catalog, the source-kernel object
Kernels.so-000-gfx906.hsaco, a gfx906 fallback .hsaco and one gfx90a code object (e_flags
0x52f: processor 0x2f = gfx906, xnack and sramecc "any"). Before, that folder printed "N other
files hold no GPU code … no file with GPU code" and FAIL.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from tests.cli import run_cli

pytestmark = pytest.mark.e2e

REAL = Path(__file__).resolve().parent.parent / "data" / "debian-rocblas-4.4.1-library"
GFX906_CO = "TensileLibrary_Type_CC_Contraction_l_AlikC_Bljk_Cijk_Dijk_gfx906.co"
GFX90A_CO = "TensileLibrary_Type_HH_HPA_Contraction_l_Alik_Bjlk_Cijk_Dijk_CU104_gfx90a.co"


def library(tmp_path: Path) -> Path:
    """A copy of the real files in Debian's layout (usr/lib/<multiarch>/rocblas/4.4.1)."""
    folder = tmp_path / "usr/lib/x86_64-linux-gnu/rocblas/4.4.1/library"
    shutil.copytree(REAL, folder)
    return folder


def verify_json(*args: str, expect: int) -> dict:
    return json.loads(run_cli("verify", "--json", *args, expect=expect).stdout)


@pytest.mark.slow
def test_a_real_tensile_folder_passes_for_its_processor(tmp_path: Path) -> None:
    folder = library(tmp_path)
    doc = verify_json("--target", "gfx906", str(folder), expect=0)
    verdicts = {Path(f["path"]).name: f["verdict"] for f in doc["files"]}
    assert verdicts == {GFX906_CO: "pass", "Kernels.so-000-gfx906.hsaco": "pass",
                        "TensileLibrary_Type_DD_Contraction_l_Alik_Bljk_Cijk_Dijk_fallback_"
                        "gfx906.hsaco": "pass"}
    code = next(f for f in doc["files"] if Path(f["path"]).name == GFX906_CO)
    assert code["targets_found"] == ["gfx906"]
    assert code["bundles"][0]["embedded"] is False  # the file is the code object
    # the gfx90a code object is another processor's part of the set, not a failure
    assert doc["other_targets"] == 1
    (tensile,) = doc["tensile"]
    assert tensile["target"] == "gfx906" and tensile["ok"] is True
    assert tensile["library"] == str(folder)

    text = " ".join(run_cli("verify", "--target", "gfx906", str(folder), expect=0)
                    .stdout.split())
    assert "Tensile gfx906" in text and "complete" in text
    assert "verify: PASS" in text


def test_the_tensile_set_is_found_below_a_folder_given(tmp_path: Path) -> None:
    """Given the multiarch lib folder, verify finds rocblas/4.4.1/library below it."""
    folder = library(tmp_path)
    doc = verify_json("--target", "gfx906", str(tmp_path / "usr/lib"), expect=0)
    assert [t["library"] for t in doc["tensile"]] == [str(folder)]


def test_a_real_tensile_folder_fails_for_another_processor(tmp_path: Path) -> None:
    folder = library(tmp_path)
    result = run_cli("verify", "--target", "gfx1100", str(folder), expect=4)
    text = " ".join(result.stdout.split())
    assert "Tensile gfx1100" in text and "TensileLibrary_lazy_gfx1100.dat" in text
    assert "Tensile set incomplete for gfx1100" in text
    assert "Traceback" not in result.stderr


def test_a_code_object_named_for_another_processor_fails(tmp_path: Path) -> None:
    doc = verify_json("--target", "gfx906", str(REAL / GFX90A_CO), expect=4)
    (entry,) = doc["files"]
    assert entry["verdict"] == "fail" and entry["targets_found"] == ["gfx90a"]
    assert "no code object for gfx906" in entry["problems"][0]


def amdgpu_header(e_flags: int, abi_version: int) -> bytes:
    """The 64-byte header of an HSA code object (no sections: verify reads the header)."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 64, abi_version]) + bytes(7)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 0xE0, 1, 0, 0, 0, e_flags,
                               64, 0, 0, 64, 0, 0)


@pytest.mark.slow
def test_a_generated_xnack_on_code_object_does_not_serve_plain_gfx906(tmp_path: Path) -> None:
    """gfx906 runs with xnack off: code built for gfx906:xnack+ only (v4: xnack bits 3) is
    not code for the devices users have."""
    xnack_on = tmp_path / "k_gfx906.co"
    xnack_on.write_bytes(amdgpu_header(0x2F | (3 << 8), abi_version=2))
    doc = verify_json("--target", "gfx906", str(xnack_on), expect=4)
    assert doc["files"][0]["targets_found"] == ["gfx906:xnack+"]
    plain = tmp_path / "plain_gfx906.co"
    plain.write_bytes(amdgpu_header(0x2F | (1 << 8) | (1 << 10), abi_version=2))
    assert verify_json("--target", "gfx906", str(plain), expect=0)["files"][0]["verdict"] \
        == "pass"


def test_a_prefix_in_debians_layout_has_its_tensile_set_found(tmp_path: Path) -> None:
    """verify of a tree with rocBLAS in lib/<multiarch> finds the set in
    rocblas/<version>/library (before: it looked for lib/x86_64-linux-gnu/rocblas/library
    and called the base's set missing)."""
    folder = library(tmp_path)
    (folder.parent.parent.parent / "librocblas.so.4.4").write_text("not ELF")
    doc = verify_json("--target", "gfx906", "--prefix", str(tmp_path / "usr"), "--no-smoke",
                      expect=0)
    assert [(t["library"], t["ok"]) for t in doc["tensile"]] == [(str(folder), True)]
