"""The fast road: building on an installed ROCm (``--base``).

A base made by rocbuild itself (the lower part of the generated chain, alpha and beta, built
into prefix A) carries the rest (gamma, built with ``--base A`` into prefix B): B's program
runs with a bare environment and loads A's libraries, and rebuilding A with a change makes B
stale. Bad bases are refused before anything runs (exit 2, one message, no traceback). The
shipped recipes are planned on a recorded AMD 6.4.3 layout (tests/data/rocm-6.4.3-files.txt).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_cli, run_flags
from tests.conftest import require_tool
from tests.support import gpulibs, settingways
from tests.support.chain import FAKE_HOST, Chain, make_repo

pytestmark = pytest.mark.e2e

DATA = Path(__file__).resolve().parent.parent / "data"
REPO_RECIPES = Path(__file__).resolve().parent.parent.parent / "recipes"

# what alpha and beta look like once installed; alpha also writes the version file a base
# needs (AMD's rocm-core does the same for /opt/rocm-X)
BASE_TABLES = {
    "alpha": ('[install.files]\n".info/version" = "{{ version }}\\n"\n'
              '[base]\nprovides = ["lib/libalpha.so", "include/alpha.h"]\nrequired = true\n'),
    "beta": '[base]\nprovides = ["lib/libbeta.so", "lib/cmake/beta/betaConfig.cmake"]\n',
}


def chain_with_base_tables(chain: Chain, alpha_args: tuple[str, ...] = ()) -> None:
    chain.set_args("alpha", *alpha_args)
    chain.set_args("beta")
    for name, table in BASE_TABLES.items():
        recipe = chain.recipes / f"{name}.toml"
        recipe.write_text(recipe.read_text() + table)


def base_flags(chain: Chain, prefix: str, work: str) -> list[str]:
    return ["--recipes", str(chain.recipes), "--workdir", str(chain.root / work),
            "--prefix", str(chain.root / prefix), "--mirror", chain.mirror]


def plan_json(flags: list[str], *extra: str) -> dict:
    return json.loads(run_flags(flags, "plan", "--json", *extra, expect=0).stdout)


@pytest.mark.slow
def test_chain_builds_on_a_base_made_by_rocbuild(chain: Chain) -> None:
    chain_with_base_tables(chain)
    lower = base_flags(chain, "A", "work-a")
    run_flags(lower, "build", "alpha", "beta", "--quiet", "--no-verify", expect=0)
    base = chain.root / "A"
    assert (base / ".info/version").read_text() == "1.0\n"
    upper = [*base_flags(chain, "B", "work-b"), "--base", str(base)]

    plan = plan_json(upper)
    assert [c["name"] for c in plan["components"]] == ["gamma"]
    assert sorted(plan["base"]["taken"]) == ["alpha", "beta"]
    assert plan["settings"]["base"] == {"value": str(base), "source": "flag --base"}
    text = run_flags(upper, "plan", expect=0, env={"COLUMNS": "200"}).stdout  # lines whole
    assert f"from base {base} (1.0.0)" in text

    run_flags(upper, "build", "--quiet", "--no-verify", expect=0)
    gamma = chain.root / "B/bin/gamma"
    assert not (chain.root / "B/lib/libbeta.so").exists()  # taken, not built again
    # a bare environment: RUNPATH alone finds beta and alpha in A
    done = subprocess.run([str(gamma)], env={}, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "gamma 11"
    assert plan_json(upper)["components"][0]["state"] == "done"
    info = json.loads((chain.root / "B/.rocbuild/build-info.json").read_text())
    assert info["base"] == {"path": str(base), "version": "1.0.0", "taken": ["alpha", "beta"]}
    # B alone is not a whole stack: activate never points a link at it
    link = chain.root / "rocm"
    refused = run_cli("activate", str(chain.root / "B"), "--link", str(link), expect=2)
    assert "only the top of a stack built on the base" in refused.stderr, refused.explain()
    assert not link.is_symlink()
    # verify finds the base from B's build-info (no --base) and scans it too; no chain recipe
    # says gpu_code, so the prefix passes on its linkage (exit 0) and the base has nothing to
    # report; the linkage check finds every library gamma needs (B's RUNPATH reaches A)
    checked = run_cli("verify", "--json", "--prefix", str(chain.root / "B"), "--target",
                      "gfx906", "--no-smoke", "--recipes", str(chain.recipes), expect=0)
    doc = json.loads(checked.stdout)
    assert doc["base"] == {"path": str(base), "findings": []}
    assert doc["linkage"]["ok"] is True and doc["linkage"]["checked"] == 1

    # an upgrade of the base (alpha rebuilt with another factor) makes gamma stale
    chain_with_base_tables(chain, ("-DALPHA_FACTOR=2",))
    run_flags(lower, "build", "alpha", "beta", "--quiet", "--no-verify", expect=0)
    assert plan_json(upper)["components"][0]["state"] == "stale"
    run_flags(upper, "build", "--quiet", "--no-verify", expect=0)
    done = subprocess.run([str(gamma)], env={}, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "gamma 12"


def make_base(root: Path, version: str | None = "1.0.4",
              files: tuple[str, ...] = ("lib/libalpha.so", "include/alpha.h")) -> Path:
    base = root / "base"
    for rel in files:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text("x")
    base.mkdir(exist_ok=True)
    if version is not None:
        (base / ".info").mkdir()
        (base / ".info/version").write_text(version + "\n")
    return base


@pytest.mark.parametrize("case, needle", [
    ("missing", "does not exist"),
    ("series", "is ROCm 2.0.1, but these recipes build the 1.0 series"),
    ("no-version", "has neither .info/version"),
    ("unreadable", "cannot read .info/version"),
    ("garbage", "not a version like 6.4.3"),
    ("lacking", "lacks what the build needs from it: alpha (include/alpha.h)"),
])
def test_bad_base_is_refused_before_anything_runs(chain: Chain, case: str, needle: str) -> None:
    chain_with_base_tables(chain)
    if case == "missing":
        base = chain.root / "no-such-rocm"
    elif case == "series":
        base = make_base(chain.root, "2.0.1")
    elif case == "no-version":
        base = make_base(chain.root, None)
    elif case == "unreadable":  # a folder where the file should be (root reads any mode)
        base = make_base(chain.root, None)
        (base / ".info/version").mkdir(parents=True)
    elif case == "garbage":
        base = make_base(chain.root, "unknown")
    else:
        base = make_base(chain.root, files=("lib/libalpha.so",))
    flags = [*chain.flags(), "--base", str(base)]
    for command in ("plan", "build"):
        result = run_flags(flags, command, expect=2)
        assert needle in result.stderr, result.explain()
        assert result.stderr.count("rocbuild:") == 1, result.explain()
    assert not chain.workdir.exists() or not (chain.workdir / "src").exists()
    assert not chain.prefix.exists()


def test_base_from_the_environment_is_shown_with_its_source(chain: Chain) -> None:
    chain_with_base_tables(chain)
    base = make_base(chain.root)
    plan = json.loads(run_cli("plan", "--json", *chain.flags(), expect=0,
                              env={"ROCBUILD_BASE": str(base)}).stdout)
    assert plan["settings"]["base"] == {"value": str(base), "source": "env ROCBUILD_BASE"}
    assert plan["base"]["version"] == "1.0.4"
    assert plan["version"] == "1.0.4"  # the base's version decides what is built
    assert list(plan["base"]["taken"]) == ["alpha"]
    assert plan["base"]["built"] == {"beta": "base lacks lib/libbeta.so, "
                                             "lib/cmake/beta/betaConfig.cmake"}


# the GPU libraries of each recorded layout, as real code objects (tests/support/gpulibs.py):
# - AMD's 6.4: rocBLAS lacks gfx906 in its own kernels as in its Tensile set (issue reports on
#   6.4.3: TRSM, ROCm/ROCm#4625), and so does rocSOLVER ("Cannot find CO in the bundle
#   .../librocsolver.so.0.4.60403 for ISA: gfx906:sramecc+:xnack-", ROCm#4625's comments on
#   6.4.3); rocRAND, rocSPARSE and RCCL carry it here: no report says they lack it on 6.4 (not
#   checked against AMD's packages); rocFFT and MIOpen compile at run time (jit)
# - Debian's sid packages, as verify read them (docs/base-road.md): librocblas4's 66 bundles,
#   librocrand1, librocsparse1 and librocfft0 carry gfx906; librocsolver0 carries generic
#   processors (gfx9-generic covers gfx906) and gfx803/908/90a; libMIOpen1 has no bundle at
#   all (jit); its placeholder, like every file not listed here, holds no GPU code
# - ROCr embeds its blit kernels for gfx906 in every layout
_GFX906 = ("bundled", ("gfx906", "gfx90a"))
LAYOUT_LIBRARIES = {
    "rocm-6.4.3-files.txt": {"lib/librocblas.so.4": ("bundled", ("gfx908", "gfx90a")),
                             "lib/libhsa-runtime64.so.1": ("embedded", ("gfx906", "gfx90a")),
                             "lib/librocsolver.so.0": ("bundled", ("gfx908", "gfx90a")),
                             "lib/librocrand.so.1": _GFX906, "lib/librocsparse.so.1": _GFX906,
                             "lib/librccl.so.1": _GFX906},
    "rocbuild-6.4.3-files.txt": {"lib/librocblas.so.4": ("bundled", ("gfx906",)),
                                 "lib/libhsa-runtime64.so.1": ("embedded", ("gfx906",))},
    "debian-sid-rocm-6.4-files.txt": {
        "lib/x86_64-linux-gnu/librocblas.so.4": _GFX906,
        "lib/x86_64-linux-gnu/libhsa-runtime64.so.1": ("embedded", ("gfx906", "gfx90a")),
        "lib/x86_64-linux-gnu/librocrand.so.1": _GFX906,
        "lib/x86_64-linux-gnu/librocsparse.so.1": _GFX906,
        "lib/x86_64-linux-gnu/librocfft.so.0": _GFX906,
        "lib/x86_64-linux-gnu/librocsolver.so.0": ("generic", ("gfx9-generic", "gfx10-3-generic",
                                                               "gfx908"))},
}
_MAKERS = {"bundled": gpulibs.bundled, "embedded": gpulibs.embedded, "generic": gpulibs.generic}


def place_gpu_libraries(base: Path, layout: str) -> None:
    gpulibs.place(base, {rel: _MAKERS[kind](archs)
                         for rel, (kind, archs) in LAYOUT_LIBRARIES[layout].items()})


def amd_tree(root: Path, version: str = "6.4.3", layout: str = "rocm-6.4.3-files.txt") -> Path:
    """A copy of a recorded 6.4.3 layout (paths only, each file holding "x", the GPU libraries
    real ones): AMD's packages, or (``rocbuild-6.4.3-files.txt``) a prefix rocbuild built from
    the shipped recipes."""
    base = root / f"rocm-{version}"
    for line in (DATA / layout).read_text().splitlines():
        if line and not line.startswith("#"):
            (base / line).parent.mkdir(parents=True, exist_ok=True)
            (base / line).write_text("x")
    (base / ".info/version").write_text(f"{version}-128\n")
    place_gpu_libraries(base, layout)
    return base


def amd_flags(tmp_path: Path, base: Path) -> list[str]:
    return ["--base", str(base), "--target", "gfx906", "--workdir", str(tmp_path / "work"),
            "--recipes", str(REPO_RECIPES)]


# what AMD's 6.4 packages provide, per the recorded layout: taken from the base
AMD_TAKEN = ("llvm", "device-libs", "comgr", "rocr", "hip", "clr", "hipcc", "rocm-cmake",
             "rocm-core", "roctracer", "rocprofiler-register", "hipblas-common", "rocminfo")
AMD_BUILT = ["tensile", "rocblas", "hipblas", "llama.cpp"]  # no gfx906 Tensile set in 6.4


@pytest.mark.slow
def test_plan_on_a_recorded_amd_643_layout(tmp_path: Path) -> None:
    base = amd_tree(tmp_path)
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    assert [c["name"] for c in plan["components"]] == AMD_BUILT
    taken = plan["base"]["taken"]
    assert sorted(taken) == sorted(AMD_TAKEN)
    # rocm-cmake is seen by the file it really installs
    assert taken["rocm-cmake"] == [
        "share/rocmcmakebuildtools/cmake/ROCmCMakeBuildToolsConfig.cmake",
        "share/rocm/cmake/ROCMConfig.cmake"]
    # AMD keeps the device bitcode in the clang resource folder and in the legacy amdgcn/
    assert "lib/llvm/lib/clang/19/lib/amdgcn/bitcode/ocml.bc" in taken["device-libs"]
    assert "amdgcn/bitcode/ocml.bc" in taken["device-libs"]
    assert "gfx906 Tensile kernels" in plan["base"]["built"]["rocblas"]
    assert plan["base"]["built"]["hipblas"] == "depends on rocblas, which is built"
    rocblas = next(c for c in plan["components"] if c["name"] == "rocblas")
    # the compilers and ROCM_PATH come from the base; the prefix comes first in the search
    # the compilers are named through {{ llvm }}: lib/llvm in AMD's layout
    assert f"-DCMAKE_CXX_COMPILER={base}/lib/llvm/bin/clang++" in rocblas["configure_args"]
    assert f"-DCMAKE_PREFIX_PATH={plan['prefix']};{base}" in rocblas["configure_args"]
    assert rocblas["env"]["TENSILE_ROCM_ASSEMBLER_PATH"] == f"{base}/lib/llvm/bin/clang++"
    # installed files find the prefix's libraries first, then the base's, without env.sh
    assert f"-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib;{base}/lib" in rocblas["configure_args"]
    roads = plan["roads"]
    assert roads["base"]["components"] == ["rocblas", "hipblas", "llama.cpp"]
    assert roads["full"]["cpu_hours"] > roads["base"]["cpu_hours"] > 0
    assert roads["full"]["disk"] > roads["base"]["disk"] > 0

    text = run_flags(flags, "plan", expect=0, env={"COLUMNS": "200"}).stdout  # lines whole
    assert f"clr                    from base {base} (6.4.3)" in text
    assert "rocblas                built: base lacks gfx906 Tensile kernels" in text
    assert "both roads, whole stack" in text and f"on base {base}" in text


@pytest.mark.slow
def test_rocblas_on_amds_base_has_one_fingerprint_whatever_is_asked(tmp_path: Path) -> None:
    """`rocbuild build rocblas` and a later `rocbuild build` on AMD's layout build the same
    rocBLAS (the base's key covered only what the request's closure took, so the second
    run found the first one's rocBLAS stale: hours of Tensile again)."""
    flags = amd_flags(tmp_path, amd_tree(tmp_path))
    prints = [{c["name"]: c["fingerprint"] for c in plan_json(flags, *asked)["components"]}
              for asked in ((), ("rocblas",), ("hipblas",))]
    assert prints[0]["rocblas"] == prints[1]["rocblas"] == prints[2]["rocblas"]
    assert prints[0]["hipblas"] == prints[2]["hipblas"]


@pytest.mark.parametrize("removed, built", [
    # build-time files only: users of rocm-cmake (device-libs, rocprofiler-register,
    # hipblas-common) keep the base's copies
    ("share/rocmcmakebuildtools/cmake/ROCmCMakeBuildToolsConfig.cmake", "rocm-cmake"),
    ("lib/librocm-core.so.1", "rocm-core"),
    ("include/hipblas-common/hipblas-common.h", "hipblas-common"),
])
def test_a_base_lacking_one_optional_file_builds_that_component_alone(
        tmp_path: Path, removed: str, built: str) -> None:
    base = amd_tree(tmp_path)
    os.remove(base / removed)
    plan = plan_json(amd_flags(tmp_path, base))
    names = [c["name"] for c in plan["components"]]
    assert sorted(names) == sorted([built, *AMD_BUILT]), names
    assert sorted(plan["base"]["taken"]) == sorted(n for n in AMD_TAKEN if n != built)
    assert plan["base"]["built"][built] == f"base lacks {removed}"


@pytest.mark.parametrize("removed, named", [
    ("lib/libamd_comgr.so.3",
     "comgr (lib/libamd_comgr.so.* | lib/*-linux-gnu/libamd_comgr.so.*)"),
    ("include/hip/hip_runtime.h", "hip (include/hip/hip_runtime.h)"),
    ("lib/libhsa-runtime64.so.1",
     "rocr (lib/libhsa-runtime64.so.1 | lib/*-linux-gnu/libhsa-runtime64.so.1)"),
])
def test_a_base_lacking_a_required_file_is_refused_naming_it(tmp_path: Path, removed: str,
                                                             named: str) -> None:
    base = amd_tree(tmp_path)
    os.remove(base / removed)
    for command in ("plan", "build"):
        result = run_flags(amd_flags(tmp_path, base), command, expect=2)
        assert named in result.stderr, result.explain()
        assert "undefined template variable" not in result.stderr
    assert not (tmp_path / "work" / "src").exists()


def test_device_bitcode_in_either_layout_shows_device_libs(tmp_path: Path) -> None:
    base = amd_tree(tmp_path)
    shutil.rmtree(base / "amdgcn")  # the clang resource folder alone (AMD's newer layout)
    assert "device-libs" in plan_json(amd_flags(tmp_path, base))["base"]["taken"]
    shutil.rmtree(base / "lib/llvm/lib/clang")
    refused = run_flags(amd_flags(tmp_path, base), "plan", expect=2)
    assert ("device-libs (amdgcn/bitcode/ocml.bc | "
            "lib/llvm/lib/clang/*/lib/amdgcn/bitcode/ocml.bc" in refused.stderr), refused.explain()


@pytest.mark.parametrize("version, tensile", [
    ("6.4.1", "be49885fce2a61b600ae4593f1c2d00c8b4fa11e"),
    # rocBLAS 6.4.4's tensile_tag.txt (Debian's rocblas_6.4.4.orig.tar.gz)
    ("6.4.4", "7449c7fefd3d208ba6a2705699cd1c13b654ad87"),
])
def test_base_version_decides_the_refs(tmp_path: Path, version: str, tensile: str) -> None:
    plan = plan_json(amd_flags(tmp_path, amd_tree(tmp_path, version)))
    refs = {c["name"]: c["source"]["ref"] for c in plan["components"]}
    assert refs["rocblas"] == refs["hipblas"] == f"rocm-{version}"
    assert refs["tensile"] == tensile


@pytest.mark.parametrize("version, needle", [
    ("6.4.9", "key 'source.refs' has no entry for ROCm 6.4.9"),
    ("7.0.2", "is ROCm 7.0.2, but these recipes build the 6.4 series"),
    ("6.3.4", "is ROCm 6.3.4, but these recipes build the 6.4 series"),
])
def test_amd_base_of_unknown_version_is_refused(tmp_path: Path, version: str,
                                                needle: str) -> None:
    result = run_flags(amd_flags(tmp_path, amd_tree(tmp_path, version)), "plan", expect=2)
    assert needle in result.stderr, result.explain()


def test_amd_base_without_the_hip_runtime_is_refused(tmp_path: Path) -> None:
    base = amd_tree(tmp_path)
    os.remove(base / "lib/libamdhip64.so.6")
    result = run_flags(amd_flags(tmp_path, base), "plan", expect=2)
    named = "clr (lib/libamdhip64.so.6 | lib/*-linux-gnu/libamdhip64.so.6)"
    assert named in result.stderr, result.explain()


def test_plan_without_base_estimates_both_roads(tmp_path: Path) -> None:
    flags = ["--target", "gfx906", "--workdir", str(tmp_path / "work"),
             "--recipes", str(REPO_RECIPES)]
    roads = plan_json(flags)["roads"]
    assert roads["base"]["measured"] is False
    assert roads["base"]["components"] == ["rocblas", "hipblas", "llama.cpp"]
    assert "llvm" in roads["full"]["components"]


def test_a_folder_the_road_took_away_is_explained_not_a_template_crash(tmp_path: Path) -> None:
    """A recipe that reads build.<x> of a component taken from the base: rocbuild's road
    decision, said as such (exit 2, the file, key and base named), not jinja's undefined
    variable shown as the recipe's mistake."""
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/x"\n')
    source = '[source]\ngit = "https://example.com/{{ name }}.git"\nref = "v1"\n'
    (recipes / "low.toml").write_text(source + '[cmake]\n[base]\nprovides = ["lib/liblow.so"]\n')
    (recipes / "top.toml").write_text('depends = ["low"]\n' + source +
                                      '[cmake]\nargs = ["-DLOW_BUILD={{ build.low }}"]\n')
    base = make_base(tmp_path, "1.0.2", files=("lib/liblow.so",))
    result = run_cli("plan", "--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                     "--base", str(base), expect=2)
    assert (f"{recipes / 'top.toml'}: key 'cmake.args[0]' reads build.low, but low is taken "
            f"from the base {base} (ROCm 1.0.2)") in result.stderr, result.explain()
    assert "decision of the --base road, not a mistake in the recipe" in result.stderr
    assert "undefined template variable" not in result.stderr


@pytest.mark.slow
def test_a_stack_rocbuild_built_serves_as_a_base(tmp_path: Path) -> None:
    """The shipped recipes' own install layout (device bitcode in <prefix>/amdgcn/bitcode, a
    gfx906 Tensile set) is a whole base: everything with a [base] table is taken, only
    llama.cpp (no [base]) is built; the compilers' cache keys hash that base's bitcode."""
    base = amd_tree(tmp_path, layout="rocbuild-6.4.3-files.txt")
    flags = amd_flags(tmp_path, base)
    plan = plan_json(flags)
    assert [c["name"] for c in plan["components"]] == ["llama.cpp"]
    assert sorted(plan["base"]["taken"]) == sorted([*AMD_TAKEN, "rocblas", "hipblas"])
    assert plan["base"]["taken"]["device-libs"] == ["amdgcn/bitcode/ocml.bc",
                                                    "amdgcn/bitcode/ockl.bc"]
    require_tool("ccache")
    commands = run_flags(flags, "plan", "--commands", "--ccache", "on", expect=0).stdout
    configure = next(line for line in commands.splitlines() if " cmake -G Ninja" in line)
    extra = configure.split("CCACHE_EXTRAFILES=", 1)[1].split()[0].strip("'").split(":")
    assert extra == [f"{base}/lib/llvm/bin/clang++.cfg", f"{base}/lib/llvm/bin/rocm.cfg",
                     f"{base}/amdgcn/bitcode/ockl.bc", f"{base}/amdgcn/bitcode/ocml.bc"]


@pytest.mark.slow
def test_the_workdir_remembers_its_base(chain: Chain) -> None:
    """Issue 21 item 4: a later plan/status/build without --base uses the base of the last
    build and says so; another base, or --base none, is a configuration change plan
    explains."""
    chain_with_base_tables(chain)
    lower = base_flags(chain, "A", "work-a")
    run_flags(lower, "build", "alpha", "beta", "--quiet", "--no-verify", expect=0)
    base = chain.root / "A"
    upper = base_flags(chain, "B", "work-b")
    run_flags([*upper, "--base", str(base)], "build", "--quiet", "--no-verify", expect=0)

    again = run_flags(upper, "plan", "--json", expect=0)  # no --base
    plan = json.loads(again.stdout)
    assert [c["name"] for c in plan["components"]] == ["gamma"]
    assert plan["components"][0]["state"] == "done"
    record = chain.root / "work-b/state/base.json"
    assert plan["settings"]["base"] == {"value": str(base), "source": f"workdir {record}"}
    assert plan["base_change"] is None
    assert (f"rocbuild: note: base {base}: the base of the last build in this workdir"
            in again.stderr), again.explain()
    status = run_flags(upper, "status", expect=0)
    assert "the base of the last build in this workdir" in status.stderr
    assert "gamma" in status.stdout and "stale" not in status.stdout, status.explain()
    run_flags(upper, "build", "--quiet", "--no-verify", expect=0)  # a no-op on the same base
    assert not (chain.root / "B/lib/libbeta.so").exists()

    # another base is a configuration change: plan says so and gamma is stale
    other = chain.root / "A2"
    shutil.copytree(base, other, symlinks=True)
    moved = run_flags([*upper, "--base", str(other)], "plan", "--json", expect=0)
    doc = json.loads(moved.stdout)
    assert doc["base_change"] == {"last": str(base), "last_version": "1.0.0",
                                  "now": str(other)}
    assert doc["components"][0]["state"] == "stale"
    assert "a configuration change" in moved.stderr, moved.explain()
    text = run_flags([*upper, "--base", str(other)], "plan", expect=0).stdout
    assert (f"base changed: the last build in this workdir was on {base} (ROCm 1.0.0), this "
            f"plan is on {other}") in " ".join(text.split())
    # --base none: from source, also a change; the remembered base is not used
    source = json.loads(run_flags([*upper, "--base", "none"], "plan", "--json",
                                  expect=0).stdout)
    assert source["base"] is None and source["base_change"]["now"] is None
    assert [c["name"] for c in source["components"]] == ["alpha", "beta", "gamma"]
    # a remembered base that is gone is named as the remembered one
    shutil.rmtree(base)
    gone = run_flags(upper, "plan", expect=2)
    assert "the base of the last build in this workdir" in gone.stderr, gone.explain()
    assert "--base none" in gone.stderr


@pytest.mark.slow
def test_a_source_only_component_the_base_has_is_fetched_for_a_build_that_reads_it(
        tmp_path: Path) -> None:
    """Issue 21 item 2 end to end: the base has a source-only component's headers (its
    [base] provides), but a component built on that base reads ``src.<name>``, the checkout
    (clr's HIP_COMMON_DIR = src.hip). rocbuild fetches the checkout and builds from it, and
    plan says why; before, the road cut it and plan/build stopped on jinja's undefined
    ``src.headers`` shown as the recipe's mistake."""
    for tool in ("git", "cmake", "ninja", "gcc"):
        require_tool(tool)
    repos = tmp_path / "repos"
    make_repo(repos, "headers", {"include/headers/value.h": "#define HEADERS_VALUE 42\n"})
    make_repo(repos, "reader", {
        "CMakeLists.txt": ("cmake_minimum_required(VERSION 3.20)\nproject(reader C)\n"
                           "add_executable(reader reader.c)\n"
                           "target_include_directories(reader PRIVATE ${HEADERS_DIR}/include)\n"
                           "install(TARGETS reader RUNTIME DESTINATION bin)\n"),
        "reader.c": ('#include <stdio.h>\n#include "headers/value.h"\n'
                     'int main(void) { printf("%d\\n", HEADERS_VALUE); return 0; }\n')})
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n')
    source = f'[source]\ngit = "{FAKE_HOST}{{{{ name }}}}.git"\nref = "v1"\n'
    (recipes / "headers.toml").write_text(
        'kind = "source-only"\n' + source + '[base]\nprovides = ["include/headers/value.h"]\n')
    (recipes / "reader.toml").write_text(
        'depends = ["headers"]\n' + source + '[cmake]\n'
        'args = ["-DHEADERS_DIR={{ src.headers }}"]\n'
        '[base]\nprovides = ["bin/reader"]\n')
    # the base's copy of the header says 7: the build must read the checkout's 42
    base = make_base(tmp_path, "1.0.3", files=("include/headers/value.h",))
    (base / "include/headers/value.h").write_text("#define HEADERS_VALUE 7\n")
    flags = ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
             "--prefix", str(tmp_path / "prefix"), "--base", str(base),
             "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]
    plan = plan_json(flags)
    assert [c["name"] for c in plan["components"]] == ["headers", "reader"]
    assert plan["base"]["taken"] == {}
    assert plan["base"]["built"]["headers"] == "fetched (source only): reader is built from it"
    run_flags(flags, "build", "--quiet", "--no-verify", expect=0)
    assert (tmp_path / "work/src/headers/include/headers/value.h").is_file()
    done = subprocess.run([str(tmp_path / "prefix/bin/reader")], env={}, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == "42"


def side_stack(tmp_path: Path) -> tuple[list[str], Path]:
    """low (required) and side from a base; mid built on it. side is nothing mid needs."""
    repos = tmp_path / "repos"
    make_repo(repos, "mid", {
        "CMakeLists.txt": ("cmake_minimum_required(VERSION 3.20)\nproject(mid C)\n"
                           "add_library(mid SHARED mid.c)\n"
                           "install(TARGETS mid LIBRARY DESTINATION lib)\n"),
        "mid.c": "int mid(void) { return 3; }\n"})
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n'
                                        'components = ["low", "side", "mid"]\n')
    source = f'[source]\ngit = "{FAKE_HOST}{{{{ name }}}}.git"\nref = "v1"\n[cmake]\n'
    (recipes / "low.toml").write_text(source + '[base]\nprovides = ["lib/liblow.so"]\n'
                                      'required = true\n')
    (recipes / "side.toml").write_text('depends = ["low"]\n' + source +
                                       '[base]\nprovides = ["lib/libside.so"]\n')
    (recipes / "mid.toml").write_text('depends = ["low"]\n' + source)
    base = make_base(tmp_path, "1.0.2", files=("lib/liblow.so", "lib/libside.so"))
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), "--base", str(base),
            "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"], base


@pytest.mark.slow
def test_a_part_built_on_a_base_stays_current_for_the_whole_set(tmp_path: Path) -> None:
    """The base's content key is the base's, not the request's: `build mid` and then a
    plain `plan`/`status`/`build` of the whole set agree that mid is done (the key used to
    hash only what the request's closure took, so every other request saw mid stale and a
    `rocbuild build rocblas` on AMD's base was redone, hours, by the next `rocbuild build`)."""
    for tool in ("git", "cmake", "ninja", "gcc"):
        require_tool(tool)
    flags, _ = side_stack(tmp_path)
    run_flags(flags, "build", "mid", "--quiet", "--no-verify", expect=0)
    whole = plan_json(flags)
    assert [(c["name"], c["state"]) for c in whole["components"]] == [("mid", "done")], whole
    assert plan_json(flags, "mid")["components"][0]["fingerprint"] == \
        whole["components"][0]["fingerprint"]
    status = run_flags(flags, "status", expect=0)
    assert "stale" not in status.stdout, status.explain()


def test_a_base_lacking_a_required_component_is_refused_whatever_is_asked(
        tmp_path: Path) -> None:
    """`plan mid` and `build mid` judge the base alike: one without a required component
    (low) is refused naming it, even when the request's closure does not hold it (build
    used to refuse through the whole default set while plan said yes)."""
    flags, base = side_stack(tmp_path)
    recipes = tmp_path / "recipes"
    (recipes / "mid.toml").write_text((recipes / "mid.toml").read_text()
                                      .replace('depends = ["low"]\n', ""))
    os.remove(base / "lib/liblow.so")
    for command in ("plan", "build"):
        result = run_flags(flags, command, "mid", expect=2)
        assert "lacks what the build needs from it: low (lib/liblow.so)" in result.stderr, \
            result.explain()
    assert not (tmp_path / "work" / "src").exists()


# --- Debian's packaged ROCm 6.4 (--base /usr) -------------------------------------------------

# hip_version.h of Debian's libamdhip64-dev 6.4.3-5: its PATCH is a build number, not 3
DEBIAN_HIP_VERSION = ("#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 4\n"
                      "#define HIP_VERSION_PATCH 43484\n")


def debian_tree(root: Path, hip_version: str = DEBIAN_HIP_VERSION,
                layout: str = "debian-sid-rocm-6.4-files.txt") -> Path:
    """A copy of the recorded sid layout below ``root``/usr (each file holding "x") with a dpkg
    database from the list's "## package version" lines (status and info/<package>.list).
    Returns the base, ``root``/usr."""
    usr, package = root / "usr", ""
    lists: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for line in (DATA / layout).read_text().splitlines():
        if line.startswith("## "):
            _, package, versions[package] = line.split(" ")
            lists[package] = []
        elif line and not line.startswith("#"):
            (usr / line).parent.mkdir(parents=True, exist_ok=True)
            (usr / line).write_text("x")
            lists[package].append(f"/usr/{line}")
    (usr / "include/hip/hip_version.h").write_text(hip_version)
    place_gpu_libraries(usr, layout)
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    for name, paths in lists.items():
        (info / f"{name}.list").write_text("\n".join(paths) + "\n")
    (root / "var/lib/dpkg/status").write_text("\n\n".join(
        f"Package: {name}\nStatus: install ok installed\nVersion: {version}"
        for name, version in versions.items()) + "\n")
    return usr


# Debian has every required component, rocBLAS with a gfx906 Tensile set, hipBLAS, roctx and
# rocminfo; not rocm-core and rocprofiler-register (built only because `build` asks for the
# whole stack: nothing taken needs them)
DEBIAN_TAKEN = ("llvm", "device-libs", "comgr", "rocr", "hip", "clr", "hipcc", "rocm-cmake",
                "roctracer", "hipblas-common", "rocminfo", "rocblas", "hipblas")
DEBIAN_BUILT = ["rocm-core", "rocprofiler-register", "llama.cpp"]


@pytest.mark.slow
def test_plan_on_a_recorded_debian_sid_layout(tmp_path: Path) -> None:
    base = debian_tree(tmp_path)
    plan = plan_json(amd_flags(tmp_path, base))
    assert plan["base"]["version"] == "6.4.3"  # the header's series, dpkg's 6.4.3-5
    assert plan["version"] == "6.4.3"
    assert [c["name"] for c in plan["components"]] == DEBIAN_BUILT
    taken = plan["base"]["taken"]
    assert sorted(taken) == sorted(DEBIAN_TAKEN)
    assert taken["clr"] == ["lib/x86_64-linux-gnu/libamdhip64.so.6",
                            "lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake"]
    assert taken["device-libs"][0] == "lib/llvm-21/lib/clang/21/amdgcn/bitcode/ocml.bc"
    assert "lib/llvm-21/bin/clang" in taken["llvm"]
    assert "lib/x86_64-linux-gnu/libroctx64.so.4" in taken["roctracer"]
    # the Tensile set of gfx906 is Debian's: nothing of the BLAS part is built
    assert "lib/x86_64-linux-gnu/librocblas.so.4" in taken["rocblas"]
    assert plan["base"]["built"]["rocprofiler-register"] == (
        "base lacks lib/librocprofiler-register.so.0")
    llama = next(c for c in plan["components"] if c["name"] == "llama.cpp")
    # the HIP compiler follows the base's layout: Debian's clang is /usr/lib/llvm-21
    assert f"-DCMAKE_HIP_COMPILER={base}/lib/llvm-21/bin/clang" in llama["configure_args"]
    # RUNPATH: the prefix, then the base's lib/ and its multiarch folder
    assert (f"-DCMAKE_INSTALL_RPATH=$ORIGIN/../lib;{base}/lib;{base}/lib/x86_64-linux-gnu"
            in llama["configure_args"])
    commands = run_flags(amd_flags(tmp_path, base), "plan", "llama.cpp", "--commands",
                         expect=0).stdout
    # Debian's clang finds its device bitcode only without ROCM_PATH: it is named
    assert f"HIP_DEVICE_LIB_PATH={base}/lib/llvm-21/lib/clang/21/amdgcn/bitcode" in commands


def test_of_several_llvms_the_newest_compiles_with_its_own_device_bitcode(
        tmp_path: Path) -> None:
    """A base with clang 9, 19 and 21 installed: the compiler is 21's (by version, not by
    name: "llvm-9" sorts after "llvm-21") and so is the device bitcode named for it (the
    first by name, 19's, was clang 19's bitcode for clang 21)."""
    base = debian_tree(tmp_path)
    for n in (9, 19):
        for rel in (f"lib/llvm-{n}/bin/clang", f"lib/llvm-{n}/bin/clang++",
                    f"lib/llvm-{n}/lib/clang/{n}/amdgcn/bitcode/ocml.bc"):
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text("x")
    plan = plan_json(amd_flags(tmp_path, base))
    llama = next(c for c in plan["components"] if c["name"] == "llama.cpp")
    assert f"-DCMAKE_HIP_COMPILER={base}/lib/llvm-21/bin/clang" in llama["configure_args"]
    commands = run_flags(amd_flags(tmp_path, base), "plan", "llama.cpp", "--commands",
                         expect=0).stdout
    assert f"HIP_DEVICE_LIB_PATH={base}/lib/llvm-21/lib/clang/21/amdgcn/bitcode" in commands


def test_a_debian_base_without_gfx906_tensile_files_builds_rocblas(tmp_path: Path) -> None:
    base = debian_tree(tmp_path)
    library = base / "lib/x86_64-linux-gnu/rocblas/4.4.1/library"
    for path in library.glob("*gfx906*"):
        path.unlink()
    plan = plan_json(amd_flags(tmp_path, base))
    names = [c["name"] for c in plan["components"]]
    assert names[-4:] == ["tensile", "rocblas", "hipblas", "llama.cpp"], names
    assert plan["base"]["built"]["rocblas"] == (
        "base lacks gfx906 Tensile kernels in lib/x86_64-linux-gnu/rocblas/4.4.1/library "
        "(TensileLibrary_lazy_gfx906.dat not found)")
    rocblas = next(c for c in plan["components"] if c["name"] == "rocblas")
    assert f"-DCMAKE_CXX_COMPILER={base}/lib/llvm-21/bin/clang++" in rocblas["configure_args"]
    assert rocblas["env"]["TENSILE_ROCM_ASSEMBLER_PATH"] == f"{base}/lib/llvm-21/bin/clang++"
    # Tensile finds rocBLAS's "amdclang++" through $CMAKE_CXX_COMPILER (Debian has none)
    assert rocblas["env"]["CMAKE_CXX_COMPILER"] == f"{base}/lib/llvm-21/bin/clang++"


def test_a_debian_base_never_goes_into_an_include_or_library_search_variable(
        tmp_path: Path) -> None:
    """rocBLAS's CPATH/LIBRARY_PATH name the prefix and an AMD base, never a distribution's
    /usr: CMake turned CPATH=/usr/include into `-isystem /usr/include`, and GCC's <cmath> then
    stopped Tensile's host library at `#include_next <math.h>` ('math.h' file not found)."""
    base = debian_tree(tmp_path)
    for path in (base / "lib/x86_64-linux-gnu/rocblas/4.4.1/library").glob("*gfx906*"):
        path.unlink()
    commands = run_flags(amd_flags(tmp_path, base), "plan", "rocblas", "--commands",
                         expect=0).stdout
    prefix = "/opt/rocm-6.4-gfx906"
    assert f"CPATH={prefix}/include " in commands, commands
    assert f"LIBRARY_PATH={prefix}/lib " in commands, commands
    assert f"{base}/include" not in commands and f"{base}/lib:" not in commands
    # an AMD base is no system folder: its include/ stays after the prefix's
    amd = amd_tree(tmp_path / "amd")
    plan = plan_json([*amd_flags(tmp_path, amd), "--workdir", str(tmp_path / "work-amd")])
    rocblas = next(c for c in plan["components"] if c["name"] == "rocblas")
    assert rocblas["env"]["CPATH"] == f"{prefix}/include:{amd}/include"


def test_a_recipe_naming_a_system_folder_in_a_search_variable_is_refused(
        tmp_path: Path) -> None:
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO_RECIPES, recipes)
    hipcc = recipes / "hipcc.toml"
    assert "[env]" not in hipcc.read_text()
    hipcc.write_text(hipcc.read_text()
                     + '[env]\nCPLUS_INCLUDE_PATH = "/opt/x/include:/usr/include/"\n')
    result = run_cli("--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
                     "--target", "gfx906", "plan", "hipcc", expect=2)
    line = " ".join(result.stderr.split())
    assert f"{hipcc}: key 'env.CPLUS_INCLUDE_PATH': CPLUS_INCLUDE_PATH names the system " \
           "folder /usr/include/" in line, result.explain()
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", settingways.WAYS)
def test_from_source_builds_what_the_base_has_and_what_uses_it(tmp_path: Path,
                                                               how: str) -> None:
    """Debian's base has rocBLAS with gfx906 kernels; --from-source rocblas builds it anyway
    (with Tensile, its source), and hipBLAS over it, shown in plan with why."""
    base = debian_tree(tmp_path)
    extra, env, source = settingways.given(how, tmp_path, ["--from-source", "rocblas"],
                                           {"ROCBUILD_FROM_SOURCE": "rocblas"},
                                           '[rocbuild]\nfrom_source = ["rocblas"]\n')
    flags = [*amd_flags(tmp_path, base), *extra]
    result = run_cli(*flags, "plan", "--json", cwd=tmp_path, env=env, expect=0)
    plan = json.loads(result.stdout)
    names = [c["name"] for c in plan["components"]]
    assert names[-4:] == ["tensile", "rocblas", "hipblas", "llama.cpp"], names
    built = plan["base"]["built"]
    assert built["rocblas"] == f"from source, as {source} asks (the base has it)"
    assert built["hipblas"] == "depends on rocblas, which is built"
    assert "rocblas" not in plan["base"]["taken"] and "roctracer" in plan["base"]["taken"]
    text = " ".join(run_cli(*flags, "plan", cwd=tmp_path, env=env, expect=0).stdout.split())
    assert f"rocblas built: from source, as {source} asks (the base has it)" in text, text
    # llama.cpp links the prefix's rocBLAS: the prefix comes first in its search path
    llama = next(c for c in plan["components"] if c["name"] == "llama.cpp")
    assert f"-DCMAKE_PREFIX_PATH=/opt/rocm-6.4-gfx906;{base}" in llama["configure_args"]


@pytest.mark.parametrize("name, needle", [
    ("rocblsa", "flag --from-source: unknown component 'rocblsa'"),
    ("clr", "flag --from-source: clr is always the base's"),
])
def test_from_source_refuses_an_unknown_or_a_base_only_component(
        tmp_path: Path, name: str, needle: str) -> None:
    base = debian_tree(tmp_path)
    result = run_flags([*amd_flags(tmp_path, base), "--from-source", f"hipblas,{name}"],
                       "plan", expect=2)
    line = " ".join(result.stderr.split())
    assert needle in line, result.explain()
    if name == "rocblsa":
        assert "Did you mean 'rocblas'?" in line, result.explain()


@pytest.mark.parametrize("removed, named", [
    ("lib/x86_64-linux-gnu/libamdhip64.so.6",
     "clr (lib/libamdhip64.so.6 | lib/*-linux-gnu/libamdhip64.so.6)"),
    ("lib/llvm-21/lib/clang/21/amdgcn/bitcode/ocml.bc", "device-libs (amdgcn/bitcode/ocml.bc | "
     "lib/llvm/lib/clang/*/lib/amdgcn/bitcode/ocml.bc | lib/llvm-*/lib/clang/*/amdgcn/bitcode/"
     "ocml.bc)"),
])
def test_a_debian_base_lacking_a_required_file_is_refused_naming_it(
        tmp_path: Path, removed: str, named: str) -> None:
    base = debian_tree(tmp_path)
    os.remove(base / removed)
    result = run_flags(amd_flags(tmp_path, base), "plan", expect=2)
    assert named in result.stderr, result.explain()


def test_a_distribution_base_of_another_series_is_refused(tmp_path: Path) -> None:
    base = debian_tree(tmp_path, hip_version=DEBIAN_HIP_VERSION.replace("MINOR 4", "MINOR 3"))
    result = run_flags(amd_flags(tmp_path, base), "plan", expect=2)
    line = " ".join(result.stderr.split())
    assert f"base {base} is ROCm 6.3.0, but these recipes build the 6.4 series" in line
    assert "TIP:" in result.stderr


def test_a_distribution_base_without_dpkg_is_read_from_its_header(tmp_path: Path) -> None:
    base = debian_tree(tmp_path)
    shutil.rmtree(tmp_path / "var")
    assert plan_json(amd_flags(tmp_path, base))["base"]["version"] == "6.4.0"


def test_usr_is_never_a_prefix_even_on_a_distribution_base(tmp_path: Path) -> None:
    """/usr as a base is read-only input; as a prefix the FHS refusal stays."""
    base = debian_tree(tmp_path)
    result = run_flags([*amd_flags(tmp_path, base), "--prefix", "/usr"], "build", expect=2)
    line = " ".join(result.stderr.split())
    assert "/usr" in line and "FHS" in line and "Traceback" not in result.stderr


def test_env_files_on_a_debian_base_name_its_device_bitcode(tmp_path: Path) -> None:
    """env.sh sets HIP_DEVICE_LIB_PATH: on Debian's layout it is clang-21's resource folder,
    not <base>/amdgcn/bitcode (/usr/amdgcn/bitcode does not exist; with ROCM_PATH=/usr Debian's
    clang and hipcc then stop with "cannot find ROCm device library")."""
    from rocbuild.model.graph import load_stack
    from rocbuild.model.settings import resolve
    from rocbuild.prefix.envfiles import render, spec_for

    base = debian_tree(tmp_path)
    settings = resolve({"workdir": str(tmp_path / "work"), "ccache": "off", "base": str(base),
                        "target": "gfx906", "recipes": str(REPO_RECIPES)}, env={})
    text = render(spec_for(load_stack(settings, ["llama.cpp"])), "bash")
    assert f"HIP_DEVICE_LIB_PATH={base}/lib/llvm-21/lib/clang/21/amdgcn/bitcode" in text \
        .replace('"', "").replace("export ", ""), text
