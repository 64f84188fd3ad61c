"""`rocbuild build` ends with verify: a real HIP library compiled by Debian's hipcc
(HIP_PLATFORM=amd, no GPU needed) decides whether the prefix is marked complete."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from rocbuild.cli.main import main
from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KERNEL_PROJECT = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(kern NONE)
        set(ARCHS "gfx906" CACHE STRING "offload architectures, comma-separated")
        string(REPLACE "," ";" arch_list "${ARCHS}")
        set(flags)
        foreach(a IN LISTS arch_list)
          list(APPEND flags "--offload-arch=${a}")
        endforeach()
        add_custom_command(OUTPUT libkern.so
          COMMAND hipcc ${flags} -fPIC -shared ${CMAKE_CURRENT_SOURCE_DIR}/kern.hip -o libkern.so
          DEPENDS kern.hip VERBATIM)
        add_custom_target(kern ALL DEPENDS libkern.so)
        install(FILES ${CMAKE_CURRENT_BINARY_DIR}/libkern.so DESTINATION lib)
        """),
    "kern.hip": textwrap.dedent("""\
        #include <hip/hip_runtime.h>
        __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }
        extern "C" void run(float* x) { hipLaunchKernelGGL(twice, dim3(1), dim3(64), 0, 0, x); }
        """),
}


def stack(tmp_path: Path, archs: str) -> list[str]:
    for tool in ("git", "cmake", "ninja", "hipcc"):
        require_tool(tool)
    return one_component_stack(tmp_path, "kern", KERNEL_PROJECT, f"""\
        [cmake]
        args = ["-DARCHS={archs}"]
        [env]
        # Debian's hipcc lives in /usr, and compiles for AMD GPUs even beside an nvcc
        ROCM_PATH = "/usr"
        HIP_PLATFORM = "amd"
        """)


def build_info(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "prefix/.rocbuild/build-info.json").read_text())


def test_verified_build_is_complete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = stack(tmp_path, "{{ targets | join(',') }}")
    assert main(["build", *flags, "--quiet"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "libkern.so" in out
    info = build_info(tmp_path)
    assert info["complete"] is True and info["verified"] is True
    assert info["targets"] == ["gfx906"]
    assert (tmp_path / "prefix/env.sh").is_file()


def test_missing_target_code_fails_the_build_and_blocks_activation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = stack(tmp_path, "gfx1030")  # the library is built, but not for gfx906
    # verify failed (exit codes table)
    out = run_cli("build", *flags, "--quiet", expect=4).stdout
    assert "verify failed" in out and "libkern.so" in out
    info = build_info(tmp_path)
    assert info["complete"] is False and info["verified"] is False
    link = tmp_path / "rocm"
    run_cli("activate", str(tmp_path / "prefix"), "--link", str(link), expect=2)
    assert not link.exists()
    # --no-verify accepts the prefix as complete but unproven
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    info = build_info(tmp_path)
    assert info["complete"] is True and info["verified"] is False
    # ... which activate still refuses: the gate is verify, not the flag that skipped it
    refused = run_cli("activate", str(tmp_path / "prefix"), "--link", str(link), expect=2)
    assert "complete but unproven" in refused.stderr, refused.explain()
    assert "rocbuild activate --unproven" in refused.stderr
    assert not link.is_symlink()
    status = json.loads(run_cli("status", *flags, "--json", expect=0).stdout)
    assert status["verify"]["state"] == "unproven"
    # the user says so: activated, and marked unproven in the prefix list
    taken = run_cli("activate", "--unproven", str(tmp_path / "prefix"), "--link", str(link),
                    expect=0)
    assert "unproven" in taken.stdout and link.is_symlink()
    listed = json.loads(run_cli("prefixes", "--json", "--link", str(link), expect=0).stdout)
    (entry,) = [p for p in listed["prefixes"] if p["prefix"] == str(tmp_path / "prefix")]
    assert entry["active"] is True and entry["unproven"] is True
    assert entry["verified"] is False
    status = json.loads(run_cli("status", *flags, "--json", expect=0).stdout)
    assert f"activated with --unproven at {link}" in status["verify"]["why"]
