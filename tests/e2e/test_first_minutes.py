"""The night's failures show up in the first minutes: each refusal below happens
before the step that would have failed hours later, in a real child process."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from rocbuild.checks import privilege
from rocbuild.run.sources import patches
from tests.cli import REPO, run_cli
from tests.support.chain import git, make_chain, make_repo, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CMAKE_PROJECT = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(solo NONE)\n"
                                   "option(SOLO_KNOWN \"read by this project\" OFF)\n"}
SHIPPED_PATCH = REPO / "patches" / "llvm-project" / "0001-device-libs-cmake-4-compat.patch"


def test_a_missing_dev_package_is_refused_before_fetch_with_the_install_line(
        tmp_path: Path) -> None:
    flags = one_component_stack(tmp_path, "solo", CMAKE_PROJECT)
    recipe = tmp_path / "recipes" / "solo.toml"
    recipe.write_text('system_packages = ["cmake", "rocbuild-fake-dev"]\n'
                      'system_checks = { "rocbuild-fake-dev" = "header:rocbuild-fake.h" }\n'
                      + recipe.read_text())
    result = run_cli("build", *flags, "--no-verify", expect=2)
    assert "not installed: rocbuild-fake-dev (solo)" in result.output, result.explain()
    if shutil.which("dpkg-query"):
        assert privilege.apt_install("rocbuild-fake-dev") in result.output
    else:
        assert "header:rocbuild-fake.h" in result.output
    assert not (tmp_path / "work" / "logs").exists()  # nothing was fetched
    doctor = run_cli("doctor", *flags, "--json", expect=1)  # the same finding from the same code
    packages = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "packages")
    assert packages["status"] == "fail" and "rocbuild-fake-dev (solo)" in packages["summary"]


def _fake_cmake4(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    cmake = bin_dir / "cmake"
    cmake.write_text("#!/bin/sh\necho 'cmake version 4.0.0'\n")
    cmake.chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


def test_cmake_4_is_refused_for_device_libs_without_the_backport(tmp_path: Path) -> None:
    flags = one_component_stack(tmp_path, "device-libs", CMAKE_PROJECT)
    env = _fake_cmake4(tmp_path)
    result = run_cli("build", *flags, "--no-verify", env=env, expect=2)
    assert "cmake 4.0 (" in result.output and "cannot configure device-libs" in result.output
    assert "'cmake>=3.25,<4'" in result.output  # the advice no longer installs CMake 4
    assert not (tmp_path / "work" / "logs").exists()
    # with the backport in the owner's series CMake 4 is only a warning, in doctor as in build
    series = tmp_path / "patches" / "device-libs"
    series.mkdir(parents=True)
    shutil.copy(SHIPPED_PATCH, series / SHIPPED_PATCH.name)
    doctor = run_cli("doctor", *flags, "--json", env=env)
    toolchain = next(c for c in json.loads(doctor.stdout)["checks"] if c["id"] == "toolchain")
    assert toolchain["status"] == "warn" and "CMake 3.x" in toolchain["summary"]


def test_the_carried_cmake_4_backport_applies_as_a_series(tmp_path: Path) -> None:
    # amd/device-libs/cmake/OCL.cmake as the hunk's context gives it at 6.4.x (lines 9-15)
    header = "".join(f"# line {i}\n" for i in range(1, 9))
    ocl = header + textwrap.dedent("""\
        # command-lines, but the only way to do this as part of the dependency graph is
        # configure_file and we are included from multiple places. To get around this
        # we `file(WRITE)` a file with an @variable reference and `configure_file` it.
        cmake_policy(SET CMP0053 OLD)

        if(${CMAKE_VERSION} VERSION_GREATER_EQUAL "3.20.0")
          # The policy change was for handling of relative paths for
        endif()
        """)
    bare = make_repo(tmp_path, "llvm-project", {"amd/device-libs/cmake/OCL.cmake": ocl})
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bare), str(checkout))
    commit = git(checkout, "rev-parse", "HEAD")
    shipped = sorted((REPO / "patches" / "llvm-project").glob("*.patch"))
    assert SHIPPED_PATCH in shipped
    patches.check_series("llvm-project", checkout, commit, shipped)
    patches.apply_series("llvm-project", checkout, commit, shipped, log=lambda _: None)
    patched = (checkout / "amd/device-libs/cmake/OCL.cmake").read_text()
    assert 'if(${CMAKE_VERSION} VERSION_LESS "4.0.0")\n  cmake_policy(SET CMP0053 OLD)' in patched


@pytest.mark.parametrize("upstream_fix", [False, True])
def test_the_carried_gcc_15_cstdint_fix_applies_with_and_without_upstreams(
        tmp_path: Path, upstream_fix: bool) -> None:
    """patches/rocr adds <cstdint> where it applies whether or not the rocm-6.4.3 tag already
    has upstream's line (ROCR-Runtime 5cc61b7 put it after <memory>)."""
    header = "".join(f"// line {i}\n" for i in range(1, 43))
    elf = header + textwrap.dedent("""\
        #ifndef AMD_ELF_IMAGE_HPP_
        #define AMD_ELF_IMAGE_HPP_

        #include <string>
        #include <sstream>
        #include <vector>
        #include <memory>
        """) + ("#include <cstdint>\n" if upstream_fix else "") + "\nnamespace rocr {\n"
    path = "runtime/hsa-runtime/core/inc/amd_elf_image.hpp"
    bare = make_repo(tmp_path, "ROCR-Runtime", {path: elf})
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bare), str(checkout))
    commit = git(checkout, "rev-parse", "HEAD")
    shipped = sorted((REPO / "patches" / "rocr").glob("*.patch"))
    patches.check_series("rocr", checkout, commit, shipped)
    patches.apply_series("rocr", checkout, commit, shipped, log=lambda _: None)
    patched = (checkout / path).read_text()
    assert "#define AMD_ELF_IMAGE_HPP_\n\n#include <cstdint>\n#include <string>\n" in patched


def test_the_carried_clr_fixes_apply_as_a_series(tmp_path: Path) -> None:
    """patches/clr: no -Werror for a GCC build of the HIP runtime, hiprtc-config
    asking for CMake 3.5 so CMake 4 accepts it, and GCC 15's __glibcxx_assert kept out of HIP
    device code; applied as rocbuild applies a series, to the lines the clr sources hold
    (clr f9f995c; `git apply --check` on that snapshot is in docs/base-road.md)."""
    filler = "".join(f"# line {i}\n" for i in range(1, 48))
    werror = filler + "  endif()\nendif()\n\n" + textwrap.dedent("""\
        if(CMAKE_COMPILER_IS_GNUCC)
          set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -Werror")
          set(CMAKE_C_FLAGS "${CMAKE_C_FLAGS} -Wno-error=deprecated-declarations")
          set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Werror")
          set(CMAKE_CXX_FLAGS "${CMAKE_CXX_FLAGS} -Wno-error=deprecated-declarations")
        endif()

        option(DISABLE_DIRECT_DISPATCH "Disable Direct Dispatch" OFF)
        """)
    hiprtc = "".join(f"# line {i}\n" for i in range(1, 18)) + textwrap.dedent("""\
        # OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN
        # THE SOFTWARE.

        cmake_minimum_required(VERSION 3.3)
        @PACKAGE_INIT@
        include(CMakeFindDependencyMacro)
        set_and_check(hiprtc_INCLUDE_DIR "@PACKAGE_INCLUDE_INSTALL_DIR@")
        """)
    version = "".join(f"# line {i}\n" for i in range(1, 288)) + textwrap.dedent("""\
        set(_versionInfoHeader
        "// Auto-generated by cmake\\n
        #define HIP_VERSION_BUILD_NAME \\"${HIP_VERSION_BUILD_NAME}\\"
        {version_line}
        #define __HIP_HAS_GET_PCH ${_pchStatus}\\n
        #endif\\n
        ")
        file(WRITE "${PROJECT_BINARY_DIR}/include/hip/hip_version.h" ${_versionInfoHeader})
        """).replace("{version_line}", "#define HIP_VERSION    (HIP_VERSION_MAJOR * 10000000 + "
                     "HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)\\n")
    files = {"hipamd/src/CMakeLists.txt": werror,
             "hipamd/src/hiprtc/cmake/hiprtc-config.cmake.in": hiprtc,
             "hipamd/CMakeLists.txt": version}
    bare = make_repo(tmp_path, "clr", files)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bare), str(checkout))
    commit = git(checkout, "rev-parse", "HEAD")
    shipped = sorted((REPO / "patches" / "clr").glob("*.patch"))
    patches.check_series("clr", checkout, commit, shipped)
    patches.apply_series("clr", checkout, commit, shipped, log=lambda _: None)
    flags = (checkout / "hipamd/src/CMakeLists.txt").read_text()
    assert "-Werror\")" not in flags and "-Wno-error=deprecated-declarations" in flags
    assert "cmake_minimum_required(VERSION 3.5)" in (
        checkout / "hipamd/src/hiprtc/cmake/hiprtc-config.cmake.in").read_text()
    assert "#define __glibcxx_assert(cond)" in (checkout / "hipamd/CMakeLists.txt").read_text()


def test_a_target_with_a_feature_flag_gets_a_valid_prefix(tmp_path: Path) -> None:
    plan = run_cli("plan", "--workdir", str(tmp_path / "w"), "--target", "gfx906:xnack-",
                   "--json", expect=0)
    doc = json.loads(plan.stdout)
    assert doc["prefix"] == "/opt/rocm-6.4-gfx906_xnack-"
    assert set(doc["cost"]) >= {"disk", "cpu_hours", "wall_hours", "risky_steps"}
    # a template that lets the ':' through is refused by plan, naming the key
    recipes = tmp_path / "recipes"
    shutil.copytree(REPO / "recipes", recipes)
    stack = recipes / "stack.toml"
    stack.write_text(stack.read_text().replace(" | pathsafe", ""))
    bad = run_cli("plan", "--recipes", str(recipes), "--workdir", str(tmp_path / "w"),
                  "--target", "gfx906:xnack-", expect=2)
    assert "key 'stack.prefix'" in bad.output and "contains ':'" in bad.output


def test_an_option_the_fetched_source_never_reads_stops_before_configure(
        tmp_path: Path) -> None:
    flags = one_component_stack(tmp_path, "solo", CMAKE_PROJECT, recipe_tail="""\
        [cmake]
        args = ["-DSOLO_KNOWN=ON", "-DSOLO_MISSPELT=ON"]
        """)
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "solo.toml: key 'cmake.args': -DSOLO_MISSPELT is never read" in result.output
    assert "SOLO_KNOWN is never read" not in result.output
    logs = tmp_path / "work" / "logs" / "solo"
    assert (logs / "fetch.log").is_file() and not (logs / "configure.log").exists()


def test_a_bad_option_anywhere_stops_the_build_before_the_first_configure(
        tmp_path: Path) -> None:
    chain = make_chain(tmp_path)
    chain.set_args("gamma", "-DGAMMA_MISSPELT=ON")  # the last component of three
    result = run_cli("build", *chain.flags(), "--no-verify", expect=1)
    assert "gamma.toml: key 'cmake.args': -DGAMMA_MISSPELT is never read" in result.output
    assert (chain.workdir / "logs" / "alpha" / "fetch.log").is_file()
    assert not list(chain.workdir.glob("logs/*/configure.log"))  # no compiler ran anywhere
