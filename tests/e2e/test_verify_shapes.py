"""verify knows each library's shape (a recipe's [gpu] table): a host library such as hipBLAS
passes without GPU code and has the rocBLAS it loads checked instead; a library whose recipe
says "bundles" fails without the target; header-only components ask nothing; a library that
compiles its kernels at run time needs a runtime compiler that knows the target. The GPU
libraries are real HIP code objects from Debian's hipcc (HIP_PLATFORM=amd, no GPU), the
runtime compiler this host's real comgr."""

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

DATA = Path(__file__).resolve().parent.parent / "data"
REPO_RECIPES = Path(__file__).resolve().parent.parent.parent / "recipes"
KERNEL = """#include <hip/hip_runtime.h>
__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }
extern "C" void run(float* x) { k<<<1, 64>>>(x); }
"""
HOST_CODE = "extern void run(float* x);\nvoid call(float* x) { run(x); }\n"
COMGR = Path("/usr/lib/x86_64-linux-gnu/libamd_comgr.so.2.4.0")  # Debian 12's comgr 2.4


def hip_library(out: Path, arch: str, soname: str) -> Path:
    source = out.parent / f"{arch}.hip"
    source.write_text(KERNEL)
    subprocess.run([require_tool("hipcc"), f"--offload-arch={arch}", "-fPIC", "-shared",
                    f"-Wl,-soname,{soname}", str(source), "-o", str(out)], check=True,
                   capture_output=True, env={**os.environ, "HIP_PLATFORM": "amd"})
    return out


def host_library(out: Path, soname: str, *link: str) -> Path:
    """A library without GPU code (as hipBLAS is), linking ``link`` with RUNPATH $ORIGIN."""
    source = out.parent / f"{soname}.c"
    source.write_text(HOST_CODE)
    subprocess.run([require_tool("gcc"), "-fPIC", "-shared", f"-Wl,-soname,{soname}",
                    "-Wl,--enable-new-dtags,-rpath,$ORIGIN", str(source), "-o", str(out),
                    *link], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def debian_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """lib/libhipblas.so.2 (host code) over lib/librocblas.so.4 (gfx906 bundles) and its
    Tensile set (real files of Debian's librocblas4: gfx906 complete, gfx90a partial)."""
    root = tmp_path_factory.mktemp("debian-like")
    lib = root / "lib"
    lib.mkdir()
    hip_library(lib / "librocblas.so.4", "gfx906", "librocblas.so.4")
    host_library(lib / "libhipblas.so.2", "libhipblas.so.2", "-L" + str(lib), "-l:librocblas.so.4")
    shutil.copytree(DATA / "debian-rocblas-4.4.1-library", lib / "rocblas/library")
    return root


def test_a_host_library_passes_and_the_library_it_loads_is_checked(debian_like: Path) -> None:
    hipblas = debian_like / "lib/libhipblas.so.2"
    done = run_cli("verify", "--json", "--target", "gfx906", "--recipes", str(REPO_RECIPES),
                   str(hipblas), expect=0)
    doc = json.loads(done.stdout)
    rows = {Path(f["path"]).name: f for f in doc["files"]}
    assert rows["libhipblas.so.2"]["verdict"] == "host"
    assert 'hipblas: [gpu] shape = "host", no GPU code expected' in rows["libhipblas.so.2"]["note"]
    assert rows["librocblas.so.4"]["verdict"] == "pass"
    assert rows["librocblas.so.4"]["note"] == "loaded by libhipblas.so.2"
    assert [(t["target"], t["ok"]) for t in doc["tensile"]] == [("gfx906", True)]

    text = run_cli("verify", "--target", "gfx906", "--recipes", str(REPO_RECIPES),
                   str(hipblas), expect=0, env={"COLUMNS": "200"}).stdout
    assert "host library (hipblas: [gpu] shape = \"host\", no GPU code expected)" in text
    assert "verify: PASS — 1 file with GPU code" in text
    # a PASS means it runs on the target: for gfx90a the rocBLAS it loads has no code
    # and its Tensile set is incomplete
    failed = run_cli("verify", "--target", "gfx90a", "--recipes", str(REPO_RECIPES),
                     str(hipblas), expect=4, env={"COLUMNS": "200"}).stdout
    assert "librocblas.so.4: no code object for gfx90a (1 bundle, for gfx906)" in failed
    assert "Tensile gfx90a" in failed and "missing" in failed


def test_without_a_shape_a_library_without_gpu_code_still_fails(debian_like: Path,
                                                                 tmp_path: Path) -> None:
    """The same file against recipes that do not say hipBLAS is a host library: its missing
    GPU code is a failure, as for any named file."""
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO_RECIPES, recipes)
    hipblas = recipes / "hipblas.toml"
    hipblas.write_text(hipblas.read_text().split("[gpu]")[0])
    done = run_cli("verify", "--target", "gfx906", "--recipes", str(recipes),
                   str(debian_like / "lib/libhipblas.so.2"), expect=4)
    assert "no GPU code: this file has no .hip_fatbin/offload bundle" in done.stdout


SHAPED = {
    "rocsolver": 'shape = "bundles"\nlibraries = ["lib/librocsolver.so.0"]\n',
    "hipsolver": 'shape = "host"\nlibraries = ["lib/libhipsolver.so.0"]\n',
    "rocprim": 'shape = "headers"\n',
    "miopen": 'shape = "jit"\nlibraries = ["lib/libMIOpen.so.1"]\n',
}


def shaped_prefix(root: Path, solver_arch: str) -> tuple[Path, Path]:
    """A recipes folder with one recipe per shape and a prefix rocbuild "built" from them
    (its build-info names them): rocSOLVER's library with code for ``solver_arch``."""
    recipes = root / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "6.4.4"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/x"\n')
    for name, table in SHAPED.items():
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "https://example.invalid/{name}.git"\nref = "v1"\n[cmake]\n'
            f"[gpu]\n{table}")
    prefix = root / "prefix"
    lib = prefix / "lib"
    lib.mkdir(parents=True)
    hip_library(lib / "librocsolver.so.0", solver_arch, "librocsolver.so.0")
    host_library(lib / "libhipsolver.so.0", "libhipsolver.so.0")
    host_library(lib / "libMIOpen.so.1", "libMIOpen.so.1")
    (prefix / "share/miopen/db").mkdir(parents=True)
    (prefix / "share/miopen/db/gfx906_60.kdb").write_bytes(b"kdb")
    (prefix / ".rocbuild").mkdir()
    (prefix / ".rocbuild/build-info.json").write_text(json.dumps({
        "version": "6.4.4", "targets": ["gfx906"], "started": "2026-01-01T00:00:00+00:00",
        "complete": True, "components": {n: {"fingerprint": "x"} for n in SHAPED}}))
    if not COMGR.is_file():
        pytest.skip(f"{COMGR} (Debian's libamd-comgr2) is not installed")
    (lib / "libamd_comgr.so.2").symlink_to(COMGR)  # the runtime compiler MIOpen loads
    return recipes, prefix


def test_each_shape_is_held_to_what_it_needs(tmp_path: Path) -> None:
    recipes, prefix = shaped_prefix(tmp_path, "gfx906")
    flags = ["--recipes", str(recipes), "--prefix", str(prefix), "--no-smoke"]
    doc = json.loads(run_cli("verify", "--json", "--target", "gfx906", *flags,
                             expect=0).stdout)
    shapes = {s["component"]: s for s in doc["shapes"]}
    assert {n: s["ok"] for n, s in shapes.items()} == dict.fromkeys(sorted(SHAPED), True)
    assert shapes["rocsolver"]["checked"] == ["lib/librocsolver.so.0: its 1 bundle carry gfx906"]
    assert shapes["rocprim"]["checked"] == ["no GPU code expected: compiled into what uses it"]
    assert f"runtime compiler {COMGR} knows gfx906" in shapes["miopen"]["checked"]
    text = run_cli("verify", "--target", "gfx906", *flags, expect=0,
                   env={"COLUMNS": "200"}).stdout
    assert "✓ hipsolver (host): lib/libhipsolver.so.0: no GPU code, as its shape says" in text

    # gfx1200 is newer than this comgr (LLVM 15): kernels cannot be compiled for it at run time
    jit = run_cli("verify", "--json", "--target", "gfx1200", *flags, expect=4).stdout
    miopen = next(s for s in json.loads(jit)["shapes"] if s["component"] == "miopen")
    assert miopen["problems"] == [
        f"miopen: runtime compiler {COMGR} does not know gfx1200 (its ISA table has no "
        "amdgcn-amd-amdhsa--gfx1200): kernels cannot be compiled for it at run time"]


def test_a_bundles_library_without_the_target_fails(tmp_path: Path) -> None:
    """rocSOLVER built for gfx908 only (AMD's 6.4 librocsolver.so lacks gfx906, users report)."""
    recipes, prefix = shaped_prefix(tmp_path, "gfx908")
    done = run_cli("verify", "--target", "gfx906", "--recipes", str(recipes), "--prefix",
                   str(prefix), "--no-smoke", expect=4, env={"COLUMNS": "200"})
    assert "lib/librocsolver.so.0: no code object for gfx906 (1 bundle, for gfx908)" \
        in done.stdout, done.explain()
    assert "rocsolver: lib/librocsolver.so.0 is fail (see above)" in done.stdout
    assert "Traceback" not in done.stderr
    # the library gone: named as the recipe's
    os.remove(prefix / "lib/librocsolver.so.0")
    gone = run_cli("verify", "--target", "gfx906", "--recipes", str(recipes), "--prefix",
                   str(prefix), "--no-smoke", expect=4, env={"COLUMNS": "200"})
    assert "rocsolver: its [gpu] library lib/librocsolver.so.0 is not in the prefix" \
        in gone.stdout, gone.explain()


@pytest.mark.parametrize("table, needle", [
    ('[gpu]\nshape = "fat"\n', "key 'gpu.shape' must be one of bundles, tensile, host, "
                               "headers, jit, got 'fat'"),
    ('[gpu]\nlibraries = ["lib/libx.so"]\n', "[gpu] needs 'shape'"),
    ('[gpu]\nshape = "headers"\nlibraries = ["lib/libx.so"]\n',
     "a header-only component installs no library to check"),
    ('[gpu]\nshape = "bundles"\nlibraries = ["/usr/lib/libx.so"]\n',
     "key 'gpu.libraries[0]' must be a path inside the prefix or base"),
])
def test_a_bad_gpu_table_is_refused(tmp_path: Path, table: str, needle: str) -> None:
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO_RECIPES, recipes)
    hipblas = recipes / "hipblas.toml"
    hipblas.write_text(hipblas.read_text().split("[gpu]")[0] + table)
    done = run_cli("plan", "--recipes", str(recipes), "--workdir", str(tmp_path / "w"),
                   expect=2)
    assert needle in done.stderr, done.explain()
    assert "Traceback" not in done.stderr


def test_gpu_code_and_a_gpu_table_that_disagree_are_refused(tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO_RECIPES, recipes)
    hipblas = recipes / "hipblas.toml"
    hipblas.write_text("gpu_code = true\n" + hipblas.read_text())
    done = run_cli("plan", "--recipes", str(recipes), "--workdir", str(tmp_path / "w"),
                   expect=2)
    assert "'gpu_code = true' says shape \"bundles\" but [gpu] says shape = 'host'" \
        in done.stderr, done.explain()
