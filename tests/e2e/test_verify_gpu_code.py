"""Which components must carry GPU code is the recipes' word (``gpu_code = true``):
a stack of host code only passes verify on its linkage, a component that says it
carries GPU code and does not fails it, and a library whose GPU code is code objects embedded
as data (ROCr's blit kernels) is read as such. Every rocbuild runs as a child process."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain, one_component_stack, require_gpu_code

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def build_info(prefix: Path) -> dict:
    return json.loads((prefix / ".rocbuild/build-info.json").read_text())


def test_a_stack_without_gpu_components_passes_verify_on_its_linkage(chain: Chain) -> None:
    # the chain is host code only and no recipe says gpu_code: verify checks the linkage
    out = run_cli("build", *chain.flags(), "--quiet", expect=0).stdout
    assert "verify failed" not in out
    assert "no GPU code expected and none found" in " ".join(out.split())
    # nor does its title speak of code objects for a processor (a stack of other projects)
    assert "code objects for" not in out, out
    assert f"rocbuild verify — linkage in {chain.prefix} (no GPU code expected)" in out, out
    info = build_info(chain.prefix)
    assert info["complete"] is True and info["verified"] is True
    doc = json.loads(run_cli("verify", *chain.flags(), "--json", "--no-smoke",
                             expect=0).stdout)
    assert doc["ok"] is True and doc["files"] == []
    assert doc["linkage"]["ok"] is True and doc["linkage"]["checked"] >= 3
    # no GPU test to run either: the reason is the stack, not a missing GPU
    shown = run_cli("verify", *chain.flags(), expect=0).stdout
    assert "no smoke tests: no GPU code expected here" in shown, shown
    assert "no AMD GPU" not in shown, shown
    # the linkage is still the gate: a library gamma needs, gone, fails verify
    (chain.prefix / "lib" / "libbeta.so").unlink()
    broken = run_cli("verify", *chain.flags(), "--no-smoke", expect=4).stdout
    assert "libbeta.so" in broken and "not found" in broken
    assert "code objects for" not in broken, broken


def test_a_component_that_must_carry_gpu_code_and_does_not_fails(chain: Chain) -> None:
    require_gpu_code(chain, "beta")
    out = run_cli("build", *chain.flags(), "--quiet", expect=4).stdout
    assert "verify failed" in out, out
    assert "beta carries no GPU code: its recipe says gpu_code = true, but none of the " \
        "libraries and programs it installed holds a .hip_fatbin" in " ".join(out.split())
    assert "verify: FAIL — beta carries no GPU code" in " ".join(out.split())
    assert build_info(chain.prefix)["complete"] is False


# --- code objects embedded in a library, as ROCr embeds its blit kernels ---------------------
BLIT = ("__global__ void blit_copy(int* dst, const int* src) "
        "{ dst[threadIdx.x] = src[threadIdx.x]; }\n")


def code_object(tmp_path: Path, arch: str) -> bytes:
    """A real code object for ``arch``, compiled by Debian's hipcc (device code only, not
    bundled), as ROCr's build compiles its blit kernels."""
    source = tmp_path / "blit.hip"
    source.write_text("#include <hip/hip_runtime.h>\n" + BLIT)
    out = tmp_path / f"blit-{arch}.co"
    subprocess.run(["hipcc", f"--offload-arch={arch}", "--cuda-device-only",
                    "--no-gpu-bundle-output", "-c", str(source), "-o", str(out)],
                   check=True, capture_output=True, env={**os.environ, "HIP_PLATFORM": "amd"})
    return out.read_bytes()


def embedding_project(objects: dict[str, bytes]) -> dict[str, str]:
    """A C library holding the code objects as byte arrays (what ROCr's xxd -i headers
    make), one exported array per target, so the linker keeps them."""
    arrays = "".join(
        f"const unsigned char blit_{arch}[] = {{{', '.join(str(b) for b in data)}}};\n"
        f"const unsigned long blit_{arch}_size = sizeof(blit_{arch});\n"
        for arch, data in objects.items())
    return {
        "CMakeLists.txt": textwrap.dedent("""\
            cmake_minimum_required(VERSION 3.20)
            project(blitlib C)
            add_library(blitlib SHARED blit.c)
            install(TARGETS blitlib LIBRARY DESTINATION lib)
            """),
        "blit.c": arrays,
    }


def embedded_stack(tmp_path: Path, archs: list[str]) -> list[str]:
    for tool in ("git", "cmake", "ninja", "hipcc"):
        require_tool(tool)
    objects = {arch: code_object(tmp_path, arch) for arch in archs}
    flags = one_component_stack(tmp_path, "blitlib", embedding_project(objects))
    # gpu_code is a top-level key: it goes before the [source] table the recipe starts with
    recipe = tmp_path / "recipes" / "blitlib.toml"
    recipe.write_text("gpu_code = true\n" + recipe.read_text())
    return flags


def test_embedded_code_objects_for_the_target_pass(tmp_path: Path) -> None:
    flags = embedded_stack(tmp_path, ["gfx906", "gfx1030"])
    out = run_cli("build", *flags, "--quiet", expect=0).stdout
    assert "verify failed" not in out
    info = build_info(tmp_path / "prefix")
    assert info["complete"] is True and info["verified"] is True
    doc = json.loads(run_cli("verify", *flags, "--json", "--no-smoke", expect=0).stdout)
    (lib,) = doc["files"]
    assert lib["path"].endswith("libblitlib.so") and lib["verdict"] == "pass"
    assert lib["targets_found"] == ["gfx1030", "gfx906"]
    assert lib["bundles"][0]["embedded"] is True


def test_embedded_code_objects_without_the_target_fail(tmp_path: Path) -> None:
    flags = embedded_stack(tmp_path, ["gfx1030"])
    out = run_cli("build", *flags, "--quiet", expect=4).stdout
    line = " ".join(out.split())
    assert "no code object for gfx906 among its 1 embedded code objects (for gfx1030)" in line
    assert build_info(tmp_path / "prefix")["complete"] is False


DEBIAN_ROCR = Path("/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1")


@pytest.mark.skipif(not DEBIAN_ROCR.exists(), reason="Debian's ROCr (libhsa-runtime64-1, "
                    "which hipcc pulls in) is not installed")
def test_a_real_rocr_carries_its_blit_kernels_as_embedded_code_objects() -> None:
    """Debian's ROCr 5.2 holds its blit and trap-handler kernels as 29 embedded code objects
    (gfx801 to gfx1035; it predates gfx942): verify reads them (before: "no GPU code")."""
    doc = json.loads(run_cli("verify", "--target", "gfx906", "--json", str(DEBIAN_ROCR),
                             expect=0).stdout)
    (lib,) = doc["files"]
    assert lib["verdict"] == "pass" and "gfx906" in lib["targets_found"]
    assert lib["bundles"][0]["embedded"] is True
    newer = run_cli("verify", "--target", "gfx942", str(DEBIAN_ROCR), expect=4).stdout
    assert "no code object for gfx942 among its" in " ".join(newer.split())
