"""What plan and the prefix's own files tell a user, through real builds.

- plan of a custom stack (no recipe has a ``[base]`` table) shows no "both roads" estimate and
  no advice about --base; its cost line never counts "0 pending components";
- env.sh, env.fish and both modulefiles of a built prefix compute where they lie: a copy (the
  original still in place) loads the copy's folders in bash, fish, real Lmod and tclsh, and
  Lmod's help names the copy;
- two prefixes built for gfx906 are two module names, so `module list` tells them apart.
Issue 26 made the files relocatable and named the module after the prefix's folder (those
tests write the files directly); these check what `rocbuild build` writes."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.e2e.test_envfiles_shell import (
    BASE_PATH,
    DUMP,
    TCL_STUB,
    in_bash,
    in_fish,
    with_lmod,
)
from tests.support.chain import Chain

ROCM_ONLY = ("ROCM_PATH", "HIP_PATH", "HIP_PLATFORM", "HIP_DEVICE_LIB_PATH")


def check_core(env: dict[str, str], prefix: Path) -> None:
    """The chain's env file at ``prefix``: its bin/ and CMake packages, and no ROCm variable
    (a custom stack provides none)."""
    assert env["PATH"] == f"{prefix}/bin:{BASE_PATH}"
    assert env["CMAKE_PREFIX_PATH"] == str(prefix)
    assert not [name for name in ROCM_ONLY if name in env], env

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def flags(chain: Chain, workdir: Path, prefix: Path) -> list[str]:
    return ["--recipes", str(chain.recipes), "--workdir", str(workdir), "--prefix",
            str(prefix), "--mirror", chain.mirror]


def test_plan_of_a_custom_stack(chain: Chain) -> None:
    plan = run_cli("plan", *chain.flags(), expect=0)
    assert "both roads" not in plan.stdout and "--base" not in plan.stdout, plan.explain()
    assert "cost of the 3 pending components" in plan.stdout
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    plan = run_cli("plan", *chain.flags(), expect=0)
    assert "nothing is pending" in plan.stdout and "0 pending" not in plan.stdout
    chain.set_args("gamma", "-DCMAKE_C_FLAGS=-O1")  # one component to build again
    plan = run_cli("plan", *chain.flags(), expect=0)
    assert "cost of the 1 pending component " in plan.stdout, plan.explain()


def test_built_prefixes_are_relocatable_and_two_modules(chain: Chain, tmp_path: Path) -> None:
    first = tmp_path / "opt" / "chain-1.0-gfx906"
    second = tmp_path / "opt" / "chain-1.0-gfx906-test"
    run_cli("build", *flags(chain, tmp_path / "work-a", first), "--quiet", "--no-verify",
            expect=0)
    run_cli("build", *flags(chain, tmp_path / "work-b", second), "--quiet", "--no-verify",
            expect=0)
    copy = tmp_path / "elsewhere" / "chain copy"
    shutil.copytree(first, copy, symlinks=True)
    for name in ("env.sh", "env.fish", "modulefiles/chain/1.0-gfx906",
                 "modulefiles/chain/1.0-gfx906.lua"):
        assert (copy / name).is_file(), name

    env, _ = in_bash(copy / "env.sh")
    check_core(env, copy)
    env, _ = in_fish(copy / "env.fish")
    check_core(env, copy)

    done = with_lmod(f"module use {shlex.quote(str(copy / 'modulefiles'))} && "
                     f"module load chain/1.0-gfx906 && {DUMP} && module help chain/1.0-gfx906")
    assert done.returncode == 0, done.stderr
    env = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    assert env["CMAKE_PREFIX_PATH"] == str(copy) and env["PATH"].startswith(f"{copy}/bin:")
    assert f"Installed in {copy}." in done.stderr, done.stderr  # module help
    assert str(first) not in json.dumps(env)

    tclsh = shutil.which("tclsh")
    if tclsh is None:
        pytest.skip("no tclsh to run the Tcl modulefile")
    stub = tmp_path / "stub.tcl"
    stub.write_text(TCL_STUB)
    ran = subprocess.run([tclsh, str(stub), str(copy / "modulefiles/chain/1.0-gfx906")],
                         capture_output=True, text=True, check=True, env={"PATH": BASE_PATH})
    calls = [tuple(line.split("\t")) for line in ran.stdout.splitlines()]
    assert ("prepend-path", "CMAKE_PREFIX_PATH", str(copy)) in calls and (
        "prepend-path", "PATH", f"{copy}/bin") in calls
    assert str(first) not in ran.stdout and f"installed in {copy}." in ran.stderr

    # two gfx906 prefixes: two module names, and `module list` says which one is loaded
    uses = " && ".join(f"module use {p / 'modulefiles'}" for p in (first, second))
    done = with_lmod(f"{uses} && module load chain/1.0-gfx906-test && module list 2>&1 && "
                     "echo CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH")
    assert done.returncode == 0, done.stderr
    assert "chain/1.0-gfx906-test" in done.stdout and f"CMAKE_PREFIX_PATH={second}\n" in done.stdout
    done = with_lmod(f"{uses} && module load chain/1.0-gfx906 && module list 2>&1 && "
                     "echo CMAKE_PREFIX_PATH=$CMAKE_PREFIX_PATH")
    listed = done.stdout[:done.stdout.index("CMAKE_PREFIX_PATH=")]
    assert "chain/1.0-gfx906" in listed and "gfx906-test" not in listed, done.stdout
    assert f"CMAKE_PREFIX_PATH={first}\n" in done.stdout
