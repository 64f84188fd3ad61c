"""Stack profiles: named sets of components in stack.toml that a user picks with --profile
(ROCBUILD_PROFILE, `profile =` in rocbuild.toml). The shipped stack has the llama.cpp set
(the default) and the PyTorch set; `plan` shows both roads to each, here over the recorded
AMD and Debian layouts. An unknown profile is bad input (exit 2, the known ones named); two
profiles built into one prefix keep each other's components.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.cli import run_cli, run_flags
from tests.e2e.test_base import amd_flags, amd_tree, debian_tree
from tests.support import settingways
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO_RECIPES = Path(__file__).resolve().parent.parent.parent / "recipes"

# the ROCm libraries PyTorch links, every one with a recipe (stack.toml's pytorch profile)
PYTORCH_LIBRARIES = ("rocblas", "hipblas", "rocprim", "hipcub", "rocthrust", "rocrand",
                     "hiprand", "rocsolver", "hipsolver", "rocsparse", "hipsparse", "rocfft",
                     "hipfft", "miopen", "rccl")


def plan_json(flags: list[str], *extra: str) -> dict:
    return json.loads(run_flags(flags, "plan", "--json", *extra, expect=0).stdout)


def shipped(tmp_path: Path) -> list[str]:
    return ["--target", "gfx906", "--workdir", str(tmp_path / "work"),
            "--recipes", str(REPO_RECIPES)]


def test_the_pytorch_profile_plans_the_pytorch_libraries_and_no_llama_cpp(
        tmp_path: Path) -> None:
    plan = plan_json(shipped(tmp_path), "--profile", "pytorch")
    names = [c["name"] for c in plan["components"]]
    assert set(PYTORCH_LIBRARIES) <= set(names) and "llama.cpp" not in names, names
    assert plan["profile"] == "pytorch"
    assert plan["settings"]["profile"] == {"value": "pytorch", "source": "flag --profile"}
    # what each library needs comes along: rocSOLVER's rocPRIM before it, rocBLAS's Tensile
    assert names.index("rocprim") < names.index("rocsolver")
    assert names.index("rocblas") < names.index("rocsolver") < names.index("hipsolver")
    assert "tensile" in names and "clr" in names
    # without --profile the default profile of stack.toml: today's llama.cpp set
    default = plan_json(shipped(tmp_path))
    assert default["profile"] == "llama.cpp"
    assert [c["name"] for c in default["components"]][-1] == "llama.cpp"
    assert "rocsolver" not in [c["name"] for c in default["components"]]
    # both roads to every profile, whatever the plan's own
    assert set(plan["profiles"]) == {"llama.cpp", "pytorch"}
    pytorch = plan["profiles"]["pytorch"]
    assert pytorch["full"]["components"] == [n for n in names if n not in ("llvm-project",
                                                                           "hip", "tensile")]
    assert pytorch["full"]["cpu_hours"] > plan["profiles"]["llama.cpp"]["full"]["cpu_hours"]
    assert pytorch["base"]["measured"] is False  # no base given: assumed from the recipes


def test_plan_text_shows_both_roads_to_each_profile(tmp_path: Path) -> None:
    text = run_flags(shipped(tmp_path), "plan", "--profile", "pytorch", expect=0,
                     env={"COLUMNS": "200"}).stdout
    assert "profiles (--profile NAME; recipes' [resources]):" in text, text
    assert "pytorch (this plan): the ROCm libraries PyTorch needs, for gfx906" in text
    assert "llama.cpp: ROCm with rocBLAS, hipBLAS and the llama.cpp HIP backend" in text
    blocks = text.split("profiles (--profile NAME")[1]
    assert blocks.count("from source") == 2 and blocks.count("on AMD's ROCm 6.4 (--base)") == 2


# on Debian's packages (sid, 6.4.x) every PyTorch library is taken but RCCL (Debian's is 5.4.3)
# and what RCCL needs that Debian lacks; the compilers, HIP and rocBLAS's gfx906 set too
DEBIAN_PYTORCH_BUILT = ["rocm-core", "rocprofiler-register", "rccl"]


def test_the_pytorch_profile_on_the_recorded_debian_layout(tmp_path: Path) -> None:
    base = debian_tree(tmp_path)
    plan = plan_json(amd_flags(tmp_path, base), "--profile", "pytorch")
    assert [c["name"] for c in plan["components"]] == DEBIAN_PYTORCH_BUILT
    taken = plan["base"]["taken"]
    for name in PYTORCH_LIBRARIES:
        assert name in taken or name == "rccl", (name, sorted(taken))
    assert taken["rocsolver"] == ["lib/x86_64-linux-gnu/librocsolver.so.0",
                                  "include/rocsolver/rocsolver.h"]
    # Debian's rocSOLVER carries gfx9-generic, not gfx906: the 6.4 runtime loads it there
    audit = {a["library"]: a for a in plan["base"]["audit"]}
    assert audit["lib/x86_64-linux-gnu/librocsolver.so.0"]["via"] == {"gfx906": "gfx9-generic"}
    assert all(a["action"] == "ok" for a in audit.values()), audit
    # a header-only library's CMake package is in share/cmake on Debian
    assert taken["rocprim"] == ["include/rocprim/rocprim.hpp",
                                "share/cmake/rocprim/rocprim-config.cmake"]
    assert plan["base"]["built"]["rccl"] == ("base lacks lib/librccl.so.1 | lib/*-linux-gnu/"
                                          "librccl.so.1, include/rccl/rccl.h")
    roads = plan["profiles"]
    assert roads["pytorch"]["base"]["components"] == DEBIAN_PYTORCH_BUILT
    assert roads["pytorch"]["base"]["measured"] is True
    # the other profile on the same base: Debian has rocBLAS's gfx906 set and hipBLAS
    assert roads["llama.cpp"]["base"]["components"] == ["rocm-core", "rocprofiler-register",
                                                        "llama.cpp"]
    rccl = next(c for c in plan["components"] if c["name"] == "rccl")
    assert f"-DCMAKE_CXX_COMPILER={base}/lib/llvm-21/bin/clang++" in rccl["configure_args"]
    assert f"-DROCM_PATH={base}" in rccl["configure_args"]


# AMD's 6.4 rocBLAS lacks the gfx906 Tensile set, so rocBLAS is built, and so is everything
# linked against it (a base's copy built against the base's rocBLAS would be stale); AMD's
# rocSOLVER lacks gfx906 itself (test_base.LAYOUT_LIBRARIES)
AMD_PYTORCH_BUILT = ["tensile", "rocblas", "hipblas", "rocsolver", "hipsolver", "rocsparse",
                     "hipsparse", "miopen"]


def test_the_pytorch_profile_on_the_recorded_amd_layout(tmp_path: Path) -> None:
    base = amd_tree(tmp_path)
    plan = plan_json(amd_flags(tmp_path, base), "--profile", "pytorch")
    assert [c["name"] for c in plan["components"]] == AMD_PYTORCH_BUILT
    assert plan["base"]["built"]["rocsolver"] == (
        "base lacks gfx906 code in lib/librocsolver.so.0 (1 bundle, 1 without gfx906 (they "
        "have gfx908, gfx90a))")
    assert plan["base"]["built"]["rocsparse"] == "depends on rocblas, which is built"
    for name in ("rocprim", "hipcub", "rocthrust", "rocrand", "hiprand", "rocfft", "hipfft",
                 "rccl"):
        assert name in plan["base"]["taken"], name
    assert plan["base"]["taken"]["rocfft"] == ["lib/librocfft.so.0", "include/rocfft/rocfft.h"]
    roads = plan["profiles"]
    assert roads["pytorch"]["base"]["components"] == [n for n in AMD_PYTORCH_BUILT
                                                      if n != "tensile"]
    assert roads["llama.cpp"]["base"]["components"] == ["rocblas", "hipblas", "llama.cpp"]
    assert roads["pytorch"]["full"]["cpu_hours"] > roads["pytorch"]["base"]["cpu_hours"] > 0


@pytest.mark.parametrize("how", settingways.WAYS)
def test_an_unknown_profile_is_refused_naming_the_known_ones(tmp_path: Path, how: str) -> None:
    extra, env, where = settingways.given(how, tmp_path, ["--profile", "pytorh"],
                                          {"ROCBUILD_PROFILE": "pytorh"}, 'profile = "pytorh"\n')
    args = [*shipped(tmp_path), *extra]
    for command in ("plan", "build"):
        refused = run_cli(command, *args, cwd=tmp_path, env=env, expect=2)
        assert (f"{where}: unknown profile 'pytorh' (known: llama.cpp, pytorch). Did you mean "
                "'pytorch'?") in " ".join(refused.stderr.split()), refused.explain()
    assert not (tmp_path / "work" / "src").exists()  # refused before anything ran


def test_a_profile_name_with_odd_characters_is_refused_as_a_setting(tmp_path: Path) -> None:
    refused = run_cli("plan", *shipped(tmp_path), "--profile", "Py Torch", expect=2)
    assert "flag --profile: 'Py Torch' is not a profile name" in refused.stderr, refused.explain()


def chain_with_profiles(chain: Chain, components: str = '["alpha"]',
                        app: str = '["gamma"]') -> None:
    (chain.recipes / "stack.toml").write_text(textwrap.dedent(f"""\
        [stack]
        name = "chain"
        version = "1.0"
        targets = ["gfx906"]
        prefix = "/opt/chain-{{{{ series }}}}"
        profile = "lib"
        components = {components}
        [profiles.lib]
        summary = "the library alone"
        components = ["alpha"]
        [profiles.app]
        summary = "the program and what it needs"
        components = {app}
        """))


def test_a_stack_profile_naming_an_unknown_component_is_refused(chain: Chain) -> None:
    chain_with_profiles(chain, app='["gamma", "delta"]')
    refused = run_cli("plan", *chain.flags(), expect=2)
    stack = chain.recipes / "stack.toml"
    assert (f"{stack}: key 'profiles.app.components': unknown component 'delta'"
            in " ".join(refused.stderr.split())), refused.explain()


def test_a_stack_default_profile_that_is_not_declared_is_refused(chain: Chain) -> None:
    chain_with_profiles(chain)
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('profile = "lib"', 'profile = "libs"'))
    refused = run_cli("plan", *chain.flags(), expect=2)
    assert "key 'stack.profile' = 'libs' names no [profiles.<name>] table (declared: lib, " \
           "app). Did you mean 'lib'?" in " ".join(refused.stderr.split()), refused.explain()


def test_two_profiles_built_into_one_prefix_keep_each_others_components(chain: Chain) -> None:
    """A build of the llama.cpp set after the PyTorch set (or the other way) into the same
    prefix: the finish phase took every installed component outside the run's default set as
    dropped from the stack and uninstalled it."""
    chain_with_profiles(chain)
    app = run_cli("build", *chain.flags(), "--profile", "app", "--no-verify", expect=0)
    assert chain.run_gamma() == "gamma 11", app.explain()
    lib = run_cli("build", *chain.flags(), "--no-verify", expect=0)  # the default: lib
    assert "uninstalled" not in lib.stdout, lib.explain()
    assert chain.run_gamma() == "gamma 11"
    assert (chain.prefix / ".rocbuild" / "installed" / "beta.json").is_file()
    plan = json.loads(run_cli("plan", *chain.flags(), "--json", expect=0).stdout)
    assert [c["name"] for c in plan["components"]] == ["alpha"]
    assert plan["profiles"]["app"]["full"]["components"] == ["alpha", "beta", "gamma"]
