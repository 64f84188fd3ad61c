"""A real HIP compile on a base: a tree shaped like AMD's /opt/rocm-6.4.3 (bin/hipcc,
lib/llvm/bin/clang, lib/llvm/lib/clang/*/lib/amdgcn/bitcode, include/hip, .info/version) made
of symlinks to Debian's hipcc, clang-15 and device libraries. rocbuild takes hipcc and the HIP
headers from it, builds a HIP library for gfx906 with the base's hipcc (ROCM_PATH is the base)
into the prefix, and verify passes for gfx906."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from rocbuild.checks import smoke
from rocbuild.checks.verify import Verdict, verify_file
from rocbuild.model.targets import parse_target_list
from tests.cli import run_flags
from tests.conftest import require_tool
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DEBIAN_LLVM = Path("/usr/lib/llvm-15")
DEBIAN_BITCODE = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")

# hipcc from the base, found through ROCM_PATH (the base: its recipe's provides_env)
PROJECT = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(kern NONE)
        set(HIPCC "$ENV{ROCM_PATH}/bin/hipcc")
        add_custom_command(OUTPUT libkern.so
          COMMAND ${HIPCC} --offload-arch=gfx906 -fPIC -shared
                  ${CMAKE_CURRENT_SOURCE_DIR}/kern.hip -o libkern.so
          DEPENDS kern.hip VERBATIM)
        add_custom_target(kern ALL DEPENDS libkern.so)
        install(FILES ${CMAKE_CURRENT_BINARY_DIR}/libkern.so DESTINATION lib)
        file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hipcc.txt "${HIPCC}")
        install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hipcc.txt DESTINATION share/kern)
        """),
    "kern.hip": textwrap.dedent("""\
        #include <hip/hip_runtime.h>
        __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
        extern "C" void run(float* x) { hipLaunchKernelGGL(twice, dim3(1), dim3(64), 0, 0, x); }
        """),
}


def amd_shaped_tree(root: Path) -> Path:
    """AMD's layout around Debian's HIP: only symlinks, plus the version file."""
    base = root / "rocm-6.4.3"
    links = {
        "bin/hipcc": "/usr/bin/hipcc",
        # Debian's hipcc is a wrapper around hipcc.pl next to it
        "bin/hipcc.pl": "/usr/bin/hipcc.pl",
        "bin/hipvars.pm": "/usr/bin/hipvars.pm",
        "bin/hipconfig": "/usr/bin/hipconfig",
        "bin/hipconfig.pl": "/usr/bin/hipconfig.pl",
        "include/hip": "/usr/include/hip",
        "lib/llvm/bin/clang": str(DEBIAN_LLVM / "bin/clang"),
        "lib/llvm/bin/clang++": str(DEBIAN_LLVM / "bin/clang++"),
        # Debian's hipcc.pl calls clang++-15 in HIP_CLANG_PATH
        "lib/llvm/bin/clang++-15": str(DEBIAN_LLVM / "bin/clang++"),
        "lib/llvm/bin/clang-offload-bundler": str(DEBIAN_LLVM / "bin/clang-offload-bundler"),
        "lib/llvm/lib/clang/15.0.6": str(DEBIAN_LLVM / "lib/clang/15.0.6"),
        "lib/llvm/lib/clang/15/lib/amdgcn/bitcode": str(DEBIAN_BITCODE),
        "amdgcn/bitcode": str(DEBIAN_BITCODE),
    }
    for rel, target in links.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).symlink_to(target)
    (base / ".info").mkdir()
    (base / ".info/version").write_text("6.4.3-128\n")
    return base


def test_hip_library_built_against_an_amd_shaped_base(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "hipcc"):
        require_tool(tool)
    for path in (DEBIAN_LLVM / "bin/clang++", DEBIAN_BITCODE / "ocml.bc"):
        if not path.exists():
            pytest.skip(f"{path} is not installed (Debian's hipcc stack)")
    base = amd_shaped_tree(tmp_path)
    flags = one_component_stack(tmp_path, "kern", PROJECT, """\
        [cmake]
        [env]
        # Debian's hipcc looks for clang in HIP_CLANG_PATH; AMD's finds lib/llvm/bin itself
        HIP_CLANG_PATH = "{{ rocm }}/lib/llvm/bin"
        """)
    recipes = tmp_path / "recipes"
    kern = recipes / "kern.toml"
    kern.write_text('depends = ["hipcc"]\n' + kern.read_text())
    (recipes / "hipcc.toml").write_text(textwrap.dedent("""\
        [source]
        git = "https://example.invalid/hipcc.git"
        ref = "rocm-{{ version }}"
        [cmake]
        [base]
        provides = ["bin/hipcc", "lib/llvm/bin/clang", "include/hip/hip_runtime.h",
                    "lib/llvm/lib/clang/*/lib/amdgcn/bitcode/ocml.bc"]
        required = true
        # what the stack's steps run with, as clr.toml says for the shipped stack
        [provides_env]
        ROCM_PATH = { value = "{{ prefix }}", steps = "always" }
        HIP_PATH = { value = "{{ prefix }}", steps = "from base" }
        HIP_PLATFORM = { value = "amd", steps = "always" }
        """))
    flags += ["--base", str(base), "--target", "gfx906"]
    plan = json.loads(run_flags(flags, "plan", "--json", expect=0).stdout)
    assert [c["name"] for c in plan["components"]] == ["kern"]
    assert list(plan["base"]["taken"]) == ["hipcc"]
    assert plan["components"][0]["env"]["HIP_CLANG_PATH"] == f"{base}/lib/llvm/bin"

    commands = run_flags(flags, "plan", "--commands", expect=0).stdout
    assert f"ROCM_PATH={base}" in commands and f"HIP_PATH={base}" in commands
    result = run_flags(flags, "build", "--quiet", expect=0)
    prefix = tmp_path / "prefix"
    assert (prefix / "share/kern/hipcc.txt").read_text() == f"{base}/bin/hipcc"
    assert "libkern.so" in result.stdout
    info = json.loads((prefix / ".rocbuild/build-info.json").read_text())
    assert info["verified"] is True and info["complete"] is True
    run_flags(flags, "verify", "--no-smoke", "--prefix", str(prefix), expect=0)


def test_smoke_hello_compiles_with_the_hipcc_of_the_base(tmp_path: Path) -> None:
    """verify's GPU smoke test on a prefix built on a base: hipcc is the base's (the prefix
    has none), ROCM_PATH is the base; the compile itself needs no GPU."""
    require_tool("hipcc")
    if not (DEBIAN_LLVM / "bin/clang++").exists() or not (DEBIAN_BITCODE / "ocml.bc").exists():
        pytest.skip("Debian's clang-15 and device libraries are not installed")
    base, prefix = amd_shaped_tree(tmp_path), tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    test = next(t for t in smoke.plan_smoke(prefix, "gfx906", base=base)
                if t.name == "hip-hello")
    assert test.commands[0][0] == f"{base}/bin/hipcc"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    for name, text in test.files.items():
        (scratch / name).write_text(text)
    env = smoke.smoke_env(prefix, {"PATH": "/usr/bin:/bin"}, rocm_base=base)
    assert env["ROCM_PATH"] == str(base)
    assert env["LD_LIBRARY_PATH"].split(":")[::2] == [f"{prefix}/lib", f"{base}/lib"]
    env["HIP_CLANG_PATH"] = f"{base}/lib/llvm/bin"  # Debian's hipcc, as in the recipe above
    subprocess.run(test.commands[0], cwd=scratch, env=env, check=True, capture_output=True)
    hello = verify_file(scratch / "hello", parse_target_list(["gfx906"]))
    assert hello.verdict is Verdict.PASS
