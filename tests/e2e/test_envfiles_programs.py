"""A built prefix's programs run from a shell that sourced only its env.sh: the env files set
no LD_LIBRARY_PATH (every program finds its libraries through its RUNPATH), except for a
recipe that opted out of the RUNPATH, whose programs then need it (and the file says so)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.calc import Calc, make_calc

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def calc(tmp_path: Path) -> Calc:
    for tool in ("git", "cmake", "ninja", "cc", "bash"):
        require_tool(tool)
    return make_calc(tmp_path)


def from_env_sh(prefix: Path, command: str) -> subprocess.CompletedProcess[str]:
    """``command`` in a bash that has only a bare PATH and sourced ``prefix/env.sh``."""
    return subprocess.run(["env", "-i", "PATH=/usr/bin:/bin", "bash", "-c",
                           f'. "$1/env.sh" && {command}', "bash", str(prefix)],
                          capture_output=True, text=True)


def test_programs_run_from_a_shell_with_only_the_env_sh(calc: Calc) -> None:
    run_cli("build", *calc.flags(), "--no-verify", expect=0)
    assert "LD_LIBRARY_PATH" not in (calc.prefix / "env.sh").read_text()
    done = from_env_sh(calc.prefix, 'echo "ld=${LD_LIBRARY_PATH:-unset}"; calc-tool')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "ld=unset"
    assert done.stdout.splitlines()[1].startswith("value=1 ")
    # and from a copy of the prefix: env.sh finds its own folder, RUNPATH is $ORIGIN-relative
    moved = calc.root / "moved prefix"
    shutil.copytree(calc.prefix, moved, symlinks=True)
    shutil.rmtree(calc.prefix)
    done = from_env_sh(moved, 'command -v calc-tool; calc-tool')
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(moved / "bin" / "calc-tool")


def test_a_recipe_without_a_runpath_gets_ld_library_path_named_for_it(calc: Calc) -> None:
    calc.write_recipe(tail='[install]\nrunpath = false\nrunpath_reason = "tested"\n')
    run_cli("build", *calc.flags(), "--no-verify", expect=0)
    text = (calc.prefix / "env.sh").read_text()
    assert "LD_LIBRARY_PATH" in text and "calc (tested)" in text
    done = from_env_sh(calc.prefix, "calc-tool")
    assert done.returncode == 0 and done.stdout.startswith("value=1 "), done.stderr
