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

from rocbuild.prefix.buildinfo import BuildInfo, ComponentInfo
from tests.cli import run_cli, run_flags
from tests.e2e.test_base import DATA, REPO_RECIPES, amd_flags, amd_tree, debian_tree, plan_json
from tests.support import gpulibs

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

WIDE = {"COLUMNS": "250"}  # audit lines are printed whole


def test_amds_layout_lacks_gfx906_in_rocblas_and_rocsolver_and_says_what_happens_to_each(
        tmp_path: Path) -> None:
    """AMD's layout for the default (llama.cpp) profile: rocBLAS (its library and its Tensile
    set) lacks gfx906 and is built; rocSOLVER lacks it too but is outside the run, so it is
    named with the profile that builds it, never built; a library no recipe names is named
    as such. The pytorch profile on the same base builds rocSOLVER for the audit's reason."""
    base = amd_tree(tmp_path)
    # hipBLASLt: no recipe (no gfx906 build of it exists), no gfx906 in AMD's
    gpulibs.place(base, {"lib/libhipblaslt.so.0.12.60403": gpulibs.bundled(("gfx908", "gfx90a"))})
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    audit = {a["library"]: a for a in plan["base"]["audit"]}
    assert audit["lib/librocblas.so.4"] == {
        "component": "rocblas", "library": "lib/librocblas.so.4", "lacking": ["gfx906"],
        "carries": "1 bundle, 1 without gfx906 (they have gfx908, gfx90a)", "via": {},
        "action": "built"}
    assert audit["lib/rocblas/library"]["action"] == "built"
    assert audit["lib/libhsa-runtime64.so.1"]["lacking"] == []
    assert audit["lib/librocsolver.so.0"]["action"] == "outside"  # a recipe, not this run
    assert audit["lib/libhipblaslt.so.0.12.60403"]["component"] is None
    assert audit["lib/libhipblaslt.so.0.12.60403"]["action"] == "no-recipe"
    assert "gfx906 code in lib/librocblas.so.4" in plan["base"]["built"]["rocblas"]
    assert "rocsolver" not in plan["base"]["built"]
    assert "rocsolver" not in [c["name"] for c in plan["components"]]

    text = run_flags(flags, "plan", expect=0, env=WIDE).stdout
    assert ("base audit (gfx906): 11 GPU libraries read, 4 lack a target (1 outside this run)"
            in text), text
    assert ("✗ lib/librocblas.so.4 (rocblas): 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocbuild builds rocblas for gfx906") in text
    assert ("✗ lib/rocblas/library (rocblas): no gfx906 Tensile set (TensileLibrary_lazy_gfx906"
            ".dat not found); rocbuild builds rocblas for gfx906") in text
    assert ("✗ lib/librocsolver.so.0 (rocsolver): 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocsolver is not in this run: --profile pytorch builds it for gfx906"
            in text)
    assert ("✗ lib/libhipblaslt.so.0.12.60403: 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocbuild has no recipe for it") in text
    assert ("✓ lib/libhsa-runtime64.so.1 (rocr): embedded code objects, all with gfx906"
            in text)

    doctor = run_flags(flags, "doctor", "--json", expect=None)
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "base")
    assert check["status"] == "warn"
    assert "4 of 11 GPU libraries lack gfx906" in check["summary"]
    assert ("lib/librocsolver.so.0 (rocsolver): 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocsolver is not in this run: --profile pytorch builds it for gfx906"
            in check["summary"])

    pytorch = plan_json(flags, "--profile", "pytorch")
    assert pytorch["base"]["built"]["rocsolver"] == (
        "base lacks gfx906 code in lib/librocsolver.so.0 (1 bundle, 1 without gfx906 (they "
        "have gfx908, gfx90a))")
    audit = {a["library"]: a for a in pytorch["base"]["audit"]}
    assert audit["lib/librocsolver.so.0"]["action"] == "built"
    text = run_flags(flags, "plan", "--profile", "pytorch", expect=0, env=WIDE).stdout
    assert ("✗ lib/librocsolver.so.0 (rocsolver): 1 bundle, 1 without gfx906 (they have gfx908, "
            "gfx90a); rocbuild builds rocsolver for gfx906") in text


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
    """Debian's libraries all carry gfx906 (rocSOLVER through gfx9-generic, which the 6.4
    runtime loads on a gfx906: a real clang-19 code object), so each is taken, for either
    profile, and each component shows its own package's version."""
    base = debian_tree(tmp_path)
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    assert all(not a["lacking"] for a in plan["base"]["audit"]), plan["base"]["audit"]
    audit = {a["library"]: a for a in plan["base"]["audit"]}
    rocsolver = audit["lib/x86_64-linux-gnu/librocsolver.so.0"]
    assert rocsolver["via"] == {"gfx906": "gfx9-generic"} and rocsolver["action"] == "ok"
    assert rocsolver["carries"] == "1 bundle, all with gfx906 via gfx9-generic"
    assert audit["lib/x86_64-linux-gnu/libMIOpen.so.1"]["carries"] == "no GPU code"  # jit
    versions = plan["base"]["versions"]
    assert (versions["rocblas"], versions["hipblas"], versions["roctracer"]) == \
        ("6.4.4", "6.4.4", "6.4.1")
    assert (versions["llvm"], versions["comgr"], versions["hipblas-common"]) == \
        ("21.1.8", "7.0.2", "7.1.0")
    assert versions["clr"] == "6.4.3" and plan["base"]["version"] == "6.4.3"
    text = run_flags(flags, "plan", expect=0, env=WIDE).stdout
    assert f"rocblas                from base {base} (6.4.4)" in text
    assert f"roctracer              from base {base} (6.4.1)" in text
    assert "base audit (gfx906): 9 GPU libraries read, 0 lack a target" in text
    assert ("✓ lib/x86_64-linux-gnu/librocsolver.so.0 (rocsolver): 1 bundle, all with gfx906 "
            "via gfx9-generic") in text
    pytorch = plan_json(flags, "--profile", "pytorch")
    assert "rocsolver" in pytorch["base"]["taken"]
    assert pytorch["base"]["versions"]["rocsolver"] == "6.4.3"
    doctor = run_flags(flags, "doctor", "--json", expect=None)
    check = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "base")
    assert check["status"] == "ok" and "each carries gfx906" in check["summary"]


def test_a_base_without_roctx_names_the_package_before_the_rebuild_cascade(
        tmp_path: Path) -> None:
    """Debian's librocblas-dev and libhipblas-dev without libroctx-dev: roctracer, rocBLAS and
    hipBLAS would be built (hours); plan names the package and what it saves first, counted
    among the run's components (MIOpen, which loads rocBLAS, only in the pytorch profile)."""
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
    pytorch = plan_json(flags, "--profile", "pytorch")
    saves = pytorch["base"]["packages"][0]["saves"]
    assert saves[:3] == ["roctracer", "rocblas", "hipblas"] and "miopen" in saves, saves
    assert set(saves) <= {c["name"] for c in pytorch["components"]}


# every library of AMD's layout a recipe's [gpu] table names, whatever the profile: what the
# base provides is judged over every recipe (the content key, the other profiles' roads)
AMD_AUDITED = ("lib/libhsa-runtime64.so.1", "lib/librocblas.so.4", "lib/librocrand.so.1",
               "lib/librocsolver.so.0", "lib/librocsparse.so.1", "lib/librocfft.so.0",
               "lib/rocfft/1.0.32/rocfft_rtc_helper", "lib/libMIOpen.so.1", "lib/librccl.so.1")


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
        str((base / rel).resolve()) for rel in AMD_AUDITED)
    # the record answers: a library whose content changed in place (size and mtime kept)
    # is not read again, which shows the answer came from the record
    rocblas = base / "lib/librocblas.so.4"
    stat = rocblas.stat()
    gfx906 = gpulibs.bundled(("gfx906", "gfx908"))
    with open(rocblas, "r+b") as out:
        out.write(gfx906.read_bytes()[: stat.st_size])
    os.utime(rocblas, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    audit = {a["library"]: a for a in plan_json(flags)["base"]["audit"]}
    assert audit["lib/librocblas.so.4"]["lacking"] == ["gfx906"]
    # replaced (a package upgrade): read again
    gpulibs.place(base, {"lib/librocblas.so.4": gfx906})
    audit = {a["library"]: a for a in plan_json(flags)["base"]["audit"]}
    assert audit["lib/librocblas.so.4"]["lacking"] == []


def write_build_info(prefix: Path, components: list[str]) -> None:
    """A prefix rocbuild built (its build-info) holding ``components``, with no files."""
    info = BuildInfo(rocbuild_version="0", stack="rocm", version="6.4.3", series="6.4",
                     targets=("gfx906",), prefix=str(prefix), recipe_fingerprint="0",
                     components={n: ComponentInfo(None, None, "0") for n in components},
                     started="2026-01-01T00:00:00")
    (prefix / ".rocbuild").mkdir(parents=True)
    (prefix / ".rocbuild/build-info.json").write_text(json.dumps(info.to_json()))


@pytest.mark.parametrize("profile", ["llama.cpp", "pytorch"])
def test_verify_of_a_prefix_on_the_base_agrees_with_plan(tmp_path: Path, profile: str) -> None:
    """verify's base check is plan's audit: on AMD's layout, with a prefix that holds what
    plan builds for a profile, verify finds exactly the libraries plan's audit says lack
    gfx906, with the same verdict on each (rocSOLVER: outside the llama.cpp run, built by the
    pytorch one); Debian's gfx9-generic rocSOLVER is a finding of neither."""
    base = amd_tree(tmp_path)
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags, "--profile", profile)
    planned = {a["library"]: a["action"] for a in plan["base"]["audit"] if a["lacking"]}
    prefix = tmp_path / "prefix"
    write_build_info(prefix, [c["name"] for c in plan["components"]])
    verify = ["verify", "--prefix", str(prefix), "--base", str(base), "--target", "gfx906",
              "--recipes", str(REPO_RECIPES), "--workdir", str(tmp_path / "work"), "--no-smoke"]
    doc = json.loads(run_cli(*verify, "--json", expect=None).stdout)
    found = {f["library"]: f["action"] for f in doc["base"]["findings"]}
    assert found == planned, (found, planned)
    assert planned["lib/librocsolver.so.0"] == ("outside" if profile == "llama.cpp" else "built")
    text = run_cli(*verify, expect=None, env=WIDE).stdout
    if profile == "llama.cpp":
        assert ("base lib/librocsolver.so.0 has no code for gfx906: rocbuild builds it "
                "(component rocsolver), which this prefix does not hold: --profile pytorch "
                "builds it") in text, text
    assert ("base lib/librocblas.so.4 has no code for gfx906: this prefix holds rocbuild's "
            "build of it (component rocblas)") in text, text

    debian = debian_tree(tmp_path / "sid")
    doc = json.loads(run_cli("verify", "--json", "--prefix", str(prefix), "--base", str(debian),
                             "--target", "gfx906", "--recipes", str(REPO_RECIPES), "--no-smoke",
                             expect=None).stdout)
    assert doc["base"]["findings"] == []


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
