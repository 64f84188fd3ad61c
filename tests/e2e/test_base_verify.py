"""`verify` also scans the base: each base library without code for the targets is a finding
that names it and says whether rocbuild can build it. The scan is plan's base audit (the
recipes' [gpu] libraries and Tensile sets, the base's other libraries with offload bundles),
so it names a library as plan does (the recipe's lib/librocblas.so.4, not the file behind the
link). The libraries are real HIP code objects from Debian's hipcc (HIP_PLATFORM=amd, no
GPU)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO_RECIPES = Path(__file__).resolve().parent.parent.parent / "recipes"
KERNEL = """#include <hip/hip_runtime.h>
__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" void run(float* x) { k<<<1, 64>>>(x); }
"""


def hip_library(folder: Path, arch: str) -> Path:
    source = folder / "k.hip"
    source.write_text(KERNEL)
    out = folder / f"lib-{arch}.so"
    subprocess.run([require_tool("hipcc"), f"--offload-arch={arch}", "-fPIC", "-shared",
                    str(source), "-o", str(out)], check=True, capture_output=True,
                   env={**os.environ, "HIP_PLATFORM": "amd"})
    return out


def test_verify_lists_base_libraries_without_target_code(tmp_path: Path) -> None:
    gfx906, gfx1030 = hip_library(tmp_path, "gfx906"), hip_library(tmp_path, "gfx1030")
    prefix, base = tmp_path / "prefix", tmp_path / "rocm-6.4.3"
    for folder in (prefix / "lib", base / "lib/rocblas/library"):
        folder.mkdir(parents=True)
    shutil.copy(gfx906, prefix / "lib/libkern.so")  # what rocbuild built
    shutil.copy(gfx906, base / "lib/libamdhip64.so.6.4.43484")  # carries gfx906: no finding
    shutil.copy(gfx1030, base / "lib/librocblas.so.4.4.60403")
    (base / "lib/librocblas.so.4").symlink_to("librocblas.so.4.4.60403")
    # without the lib/librocrand.so.1 link its recipe reads: still rocRAND's, by its name
    shutil.copy(gfx1030, base / "lib/librocrand.so.1.1.60403")
    shutil.copy(gfx1030, base / "lib/libhipblaslt.so.0.12.60403")  # no recipe names it
    (base / "lib/rocblas/library/TensileLibrary_lazy_gfx942.dat").write_text("x")

    flags = ["--prefix", str(prefix), "--base", str(base), "--target", "gfx906",
             "--recipes", str(REPO_RECIPES), "--no-smoke"]
    doc = json.loads(run_cli("verify", "--json", *flags, expect=0).stdout)
    findings = {f["library"]: f for f in doc["base"]["findings"]}
    assert sorted(findings) == ["lib/libhipblaslt.so.0.12.60403", "lib/librocblas.so.4",
                                "lib/librocrand.so.1.1.60403", "lib/rocblas/library"]
    assert findings["lib/librocblas.so.4"]["recipe"] == "rocblas"
    assert findings["lib/rocblas/library"]["recipe"] == "rocblas"
    assert findings["lib/rocblas/library"]["lacks"] == "gfx906 (Tensile set)"
    assert findings["lib/librocrand.so.1.1.60403"]["recipe"] == "rocrand"
    assert findings["lib/libhipblaslt.so.0.12.60403"]["buildable"] is False

    text = run_cli("verify", *flags, expect=0).stdout
    # the prefix has no build-info: what it holds is not known
    assert ("base lib/librocblas.so.4 has no code for gfx906: rocbuild builds it "
            "(component rocblas)") in text
    assert ("base lib/libhipblaslt.so.0.12.60403 has no code for gfx906: rocbuild has no "
            "recipe") in text
