"""The doctor checks that run real tools: `cmake --version` and `dpkg-query`.

The tools are the real ones, found through a PATH the test builds: a folder of symlinks to
the installed tools, with one tool left out or replaced by a script that prints an old
version, the way a host with an old cmake would answer.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocbuild.checks import doctor, privilege
from rocbuild.checks.doctor import FAIL, OK, SKIP, WARN, Host, Needs
from tests.conftest import require_tool

pytestmark = pytest.mark.e2e

HOSTS = Path(__file__).resolve().parent.parent / "data" / "hosts"
TOOLS = ("cmake", "ninja", "git", "python3", "perl", "pkg-config")


def needs(packages: dict[str, tuple[str, ...]] | None = None) -> Needs:
    return Needs(targets=(), targets_source="test", workdir=Path("/w"), prefix=None,
                 packages=packages or {})


def tool_dir(tmp_path: Path, *, without: tuple[str, ...] = (), dpkg: bool = True) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(parents=True)
    for tool in TOOLS + (("dpkg-query",) if dpkg else ()):
        if tool not in without:
            os.symlink(require_tool(tool), folder / tool)
    return folder


def check(name: str, tools: Path, want: Needs | None = None) -> doctor.Check:
    # the live-host checks read nothing from the tree, so any tree will do as the root
    host = Host(root=HOSTS / "mi50", user="ml", tools_path=str(tools))
    return doctor.run(host, want or needs()).check(name)


def test_installed_toolchain_is_ok_and_reports_the_real_cmake_version(tmp_path: Path) -> None:
    result = check("toolchain", tool_dir(tmp_path))
    version = os.popen(f"{require_tool('cmake')} --version").read().split()[2]
    major, minor = (int(x) for x in version.split(".")[:2])
    expected = OK if (major, minor) >= (3, 25) else WARN
    assert result.status == expected
    assert f"cmake {major}.{minor}" in result.summary


def test_old_cmake_is_a_warning(tmp_path: Path) -> None:
    tools = tool_dir(tmp_path, without=("cmake",))
    old = tools / "cmake"
    old.write_text("#!/bin/sh\necho 'cmake version 3.22.1'\necho\n"
                   "echo 'CMake suite maintained and supported by Kitware (kitware.com/cmake).'\n")
    old.chmod(0o755)
    result = check("toolchain", tools)
    assert result.status == WARN and "cmake 3.22 is older than 3.25" in result.summary
    assert "cmake>=3.25" in (result.fix or "")


def test_missing_ninja_fails_with_the_package_name(tmp_path: Path) -> None:
    result = check("toolchain", tool_dir(tmp_path, without=("ninja",)))
    assert result.status == FAIL and "ninja" in result.summary
    assert result.fix == f"`{privilege.apt_install('ninja-build')}`"  # a command: whole


def test_dpkg_query_finds_installed_and_missing_recipe_packages(tmp_path: Path) -> None:
    want = needs({"llvm": ("coreutils", "rocbuild-no-such-package"), "rocr": ("coreutils",)})
    result = check("packages", tool_dir(tmp_path), want)
    assert result.status == FAIL
    assert "rocbuild-no-such-package (llvm)" in result.summary
    assert "coreutils" not in result.summary
    assert result.fix == f"`{privilege.apt_install('rocbuild-no-such-package')}`"
    assert check("packages", tool_dir(tmp_path / "b"), needs({"x": ("coreutils",)})).status == OK


def test_without_dpkg_the_package_check_is_skipped_with_the_list(tmp_path: Path) -> None:
    result = check("packages", tool_dir(tmp_path, dpkg=False), needs({"x": ("libelf-dev",)}))
    assert result.status == SKIP and "libelf-dev" in result.summary


def test_recipes_without_packages_skip_the_package_check(tmp_path: Path) -> None:
    assert check("packages", tool_dir(tmp_path)).status == SKIP
