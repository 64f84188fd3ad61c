"""Env files of a prefix built on a base: the prefix comes before the base in every path
list, and ROCM_PATH/HIP_PATH name the base (its compilers and HIP), in bash, fish and the
Lmod modulefile (run under Lua with the stand-in from test_envfiles_shell)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from rocbuild.prefix.envfiles import write_env_files
from tests.e2e.test_envfiles_shell import BASE_PATH, LMOD_STUB, in_bash, in_fish
from tests.support.envspec import rocm_spec

pytestmark = pytest.mark.e2e


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    prefix, base = tmp_path / "rocm-6.4-gfx906", tmp_path / "rocm-6.4.3"
    write_env_files(rocm_spec(prefix, "6.4.3", "6.4", ("gfx906",), base=base))
    return prefix, base


def check_order(env: dict[str, str], prefix: Path, base: Path) -> None:
    assert env["PATH"].split(":")[:2] == [f"{prefix}/bin", f"{base}/bin"]
    assert "LD_LIBRARY_PATH" not in env  # the binaries' RUNPATH names the base's lib too
    assert env["CMAKE_PREFIX_PATH"].split(":") == [str(prefix), str(base)]
    assert env["ROCM_PATH"] == env["HIP_PATH"] == str(base)


def test_env_sh_puts_the_prefix_before_the_base(trees: tuple[Path, Path]) -> None:
    prefix, base = trees
    env, _ = in_bash(prefix / "env.sh")
    check_order(env, prefix, base)


def test_env_fish_puts_the_prefix_before_the_base(trees: tuple[Path, Path]) -> None:
    prefix, base = trees
    env, _ = in_fish(prefix / "env.fish")
    check_order(env, prefix, base)


def test_modulefile_puts_the_prefix_before_the_base(trees: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    lua = shutil.which("lua5.4") or shutil.which("lua")
    if lua is None:
        pytest.skip("no lua interpreter to run the modulefile")
    prefix, base = trees
    stub = tmp_path / "stub.lua"
    stub.write_text(LMOD_STUB)
    module = prefix / "modulefiles/rocm/6.4-gfx906.lua"
    done = subprocess.run([lua, str(stub), str(module)], capture_output=True, text=True,
                          check=True, env={"PATH": BASE_PATH})
    calls = [tuple(line.split("\t")) for line in done.stdout.splitlines()]
    path = [c[2] for c in calls if c[:2] == ("prepend_path", "PATH")]
    assert path == [f"{base}/bin", f"{prefix}/bin"]  # each prepend goes in front: prefix wins
    assert ("setenv", "ROCM_PATH", str(base)) in calls
