"""The base audited, not assumed: on a --base, plan and doctor read the code objects of every
GPU library the recipes name ([gpu] libraries) and of the base's other libraries with
offload bundles, say which lack the target, build those rocbuild has a recipe for and name
the others. The libraries are real code objects from Debian's hipcc (tests/support/gpulibs.py)
in the recorded AMD 6.4.3 and Debian sid layouts (test_base.py's trees). Each component shows
its own version (Debian's dpkg record), and a file a distribution package provides is named
with what installing it saves."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli, run_flags
from tests.e2e.test_base import DATA, REPO_RECIPES, amd_flags, amd_tree, debian_tree, plan_json
from tests.support import gpulibs

pytestmark = pytest.mark.e2e

WIDE = {"COLUMNS": "250"}  # audit lines are printed whole


def test_amds_layout_lacks_gfx906_in_rocblas_and_names_rocsolver(tmp_path: Path) -> None:
    base = amd_tree(tmp_path)
    # AMD's 6.4.3 librocsolver.so lacks gfx906 (users' reports); no shipped recipe names it
    gpulibs.place(base, {"lib/librocsolver.so.0.4.60403": gpulibs.bundled(("gfx908",))})
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    audit = {a["library"]: a for a in plan["base"]["audit"]}
    assert audit["lib/librocblas.so.4"] == {
        "component": "rocblas", "library": "lib/librocblas.so.4", "lacking": ["gfx906"],
        "carries": "1 bundle, 1 without gfx906 (they have gfx908, gfx90a)"}
    assert audit["lib/libhsa-runtime64.so.1"]["lacking"] == []
    assert audit["lib/librocsolver.so.0.4.60403"]["component"] is None
    assert "gfx906 code in lib/librocblas.so.4" in plan["base"]["built"]["rocblas"]

    text = run_flags(flags, "plan", expect=0, env=WIDE).stdout
    assert "base audit (gfx906): 3 GPU libraries read, 2 lack a target" in text
    assert ("✗ lib/librocblas.so.4 (rocblas): 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocbuild builds rocblas for gfx906") in text
    assert ("✗ lib/librocsolver.so.0.4.60403: 1 bundle, 1 without gfx906 (they have gfx908); "
            "rocbuild has no recipe for it") in text
    assert ("✓ lib/libhsa-runtime64.so.1 (rocr): embedded code objects, all with gfx906"
            in text)

    doctor = run_flags(flags, "doctor", "--json", expect=None)
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "base")
    assert check["status"] == "warn"
    assert "2 of 3 GPU libraries lack gfx906" in check["summary"]
    assert "lib/librocsolver.so.0.4.60403" in check["summary"]


def test_rocblas_without_gfx906_in_its_own_kernels_is_built_though_tensile_has_it(
        tmp_path: Path) -> None:
    """A base whose Tensile folder has gfx906 but whose librocblas.so does not (the TRSM
    kernels users lack on 6.4.3): the Tensile check alone took it."""
    base = amd_tree(tmp_path)
    shutil.copytree(DATA / "debian-rocblas-4.4.1-library", base / "lib/rocblas/library",
                    dirs_exist_ok=True)
    plan = plan_json(amd_flags(tmp_path, base))
    names = [c["name"] for c in plan["components"]]
    assert "rocblas" in names and "hipblas" in names, names
    assert plan["base"]["built"]["rocblas"] == (
        "base lacks gfx906 code in lib/librocblas.so.4 (1 bundle, 1 without gfx906 (they have "
        "gfx908, gfx90a))")
    # the same base with gfx906 in the library: taken
    gpulibs.place(base, {"lib/librocblas.so.4": gpulibs.bundled(("gfx906", "gfx908"))})
    again = plan_json(amd_flags(tmp_path, base))
    assert "rocblas" in again["base"]["taken"], again["base"]["built"]


def test_a_recipe_for_the_lacking_library_builds_it(tmp_path: Path) -> None:
    """With a recipe that names librocsolver.so ([gpu] libraries, [base] provides), the base's
    copy without gfx906 makes rocSOLVER built, with the audit's words as the reason."""
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO_RECIPES, recipes)
    (recipes / "rocsolver.toml").write_text(
        'depends = ["rocblas"]\n[source]\ngit = "https://github.com/ROCm/rocSOLVER.git"\n'
        'ref = "rocm-{{ version }}"\n[cmake]\n[gpu]\nshape = "bundles"\n'
        'libraries = ["lib/librocsolver.so.0 | lib/*-linux-gnu/librocsolver.so.0"]\n'
        '[base]\nprovides = ["lib/librocsolver.so.0 | lib/*-linux-gnu/librocsolver.so.0"]\n')
    base = debian_tree(tmp_path)  # rocBLAS with gfx906: only rocSOLVER lacks it
    gpulibs.place(base, {"lib/x86_64-linux-gnu/librocsolver.so.0": gpulibs.bundled(
        ("gfx908", "gfx90a"))})
    flags = [*amd_flags(tmp_path, base)[:-2], "--recipes", str(recipes)]
    plan = plan_json(flags, "rocsolver")
    assert [c["name"] for c in plan["components"]] == ["rocsolver"]
    assert plan["base"]["built"]["rocsolver"] == (
        "base lacks gfx906 code in lib/x86_64-linux-gnu/librocsolver.so.0 (1 bundle, 1 without "
        "gfx906 (they have gfx908, gfx90a))")
    assert "rocblas" in plan["base"]["taken"]
    text = run_flags(flags, "plan", "rocsolver", expect=0, env=WIDE).stdout
    assert ("✗ lib/x86_64-linux-gnu/librocsolver.so.0 (rocsolver): 1 bundle, 1 without gfx906 "
            "(they have gfx908, gfx90a); rocbuild builds rocsolver for gfx906") in text


def test_debians_layout_carries_gfx906_and_shows_each_components_version(
        tmp_path: Path) -> None:
    base = debian_tree(tmp_path)
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    assert all(not a["lacking"] for a in plan["base"]["audit"]), plan["base"]["audit"]
    versions = plan["base"]["versions"]
    assert (versions["rocblas"], versions["hipblas"], versions["roctracer"]) == \
        ("6.4.4", "6.4.4", "6.4.1")
    assert (versions["llvm"], versions["comgr"], versions["hipblas-common"]) == \
        ("21.1.8", "7.0.2", "7.1.0")
    assert versions["clr"] == "6.4.3" and plan["base"]["version"] == "6.4.3"
    text = run_flags(flags, "plan", expect=0, env=WIDE).stdout
    assert f"rocblas                from base {base} (6.4.4)" in text
    assert f"roctracer              from base {base} (6.4.1)" in text
    assert "base audit (gfx906): 2 GPU libraries read, 0 lack a target" in text
    doctor = run_flags(flags, "doctor", "--json", expect=None)
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "base")
    assert check["status"] == "ok" and "each carries gfx906" in check["summary"]


def test_a_base_without_roctx_names_the_package_before_the_rebuild_cascade(
        tmp_path: Path) -> None:
    """Debian's librocblas-dev and libhipblas-dev without libroctx-dev: roctracer, rocBLAS and
    hipBLAS would be built (hours); plan names the package and what it saves first."""
    base = debian_tree(tmp_path)
    os.remove(base / "include/roctracer/roctx.h")
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    names = [c["name"] for c in plan["components"]]
    assert {"roctracer", "rocblas", "hipblas"} <= set(names), names
    assert plan["base"]["packages"] == [{"component": "roctracer",
                                         "packages": ["libroctx-dev"],
                                         "saves": ["roctracer", "rocblas", "hipblas"]}]
    text = run_flags(flags, "plan", expect=0, env=WIDE).stdout
    tip = ("tip: roctracer is packaged: `sudo apt install libroctx-dev` and roctracer, rocblas, "
           "hipblas come from the base instead of being built (")
    assert tip in text, text
    assert text.index(tip) < text.index("both roads")


def test_the_audit_is_read_once_per_file(tmp_path: Path) -> None:
    """What the audit read is kept in the workdir by file identity: a second plan reads no
    library again; a replaced library is read again."""
    base = amd_tree(tmp_path)
    flags = amd_flags(tmp_path, base)
    (tmp_path / "work/state").mkdir(parents=True)  # a workdir that has been built in
    plan_json(flags)
    memo = json.loads((tmp_path / "work/state/code-audit.json").read_text())
    keys = sorted(memo["files"])
    assert [k.split("|")[0] for k in keys] == sorted(
        str((base / rel).resolve()) for rel in ("lib/librocblas.so.4",
                                                "lib/libhsa-runtime64.so.1"))
    # the record answers: a library whose content changed in place (size and mtime kept)
    # is not read again, which shows the answer came from the record
    rocblas = base / "lib/librocblas.so.4"
    stat = rocblas.stat()
    gfx906 = gpulibs.bundled(("gfx906", "gfx908"))
    with open(rocblas, "r+b") as out:
        out.write(gfx906.read_bytes()[: stat.st_size])
    os.utime(rocblas, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert plan_json(flags)["base"]["audit"][1]["lacking"] == ["gfx906"]
    # replaced (a package upgrade): read again
    gpulibs.place(base, {"lib/librocblas.so.4": gfx906})
    audit = {a["library"]: a for a in plan_json(flags)["base"]["audit"]}
    assert audit["lib/librocblas.so.4"]["lacking"] == []


def test_verify_of_the_real_debian_hipblas_passes_when_the_sid_root_is_there() -> None:
    """Debian's real libhipblas.so.2 (a host library) and the librocblas.so.4 it loads, in the
    shared sid root when this machine has it."""
    root = Path("/work/roots/sid")
    hipblas = root / "usr/lib/x86_64-linux-gnu/libhipblas.so.2"
    if not hipblas.is_file():
        pytest.skip("no sid root with Debian's hipBLAS here")
    done = run_cli("verify", "--target", "gfx906", "--system-root", str(root), "--recipes",
                   str(REPO_RECIPES), str(hipblas), expect=0, env=WIDE)
    assert "loaded by libhipblas.so.2" in done.stdout
    assert "Tensile gfx906" in done.stdout and "complete" in done.stdout
