"""A failure's "fix:" names the same pasteable command as its "continue with:" line (issue
32): it said `rocbuild build rocm-cmake a` without the run's --recipes/--workdir/--prefix/
--mirror, so pasting it built against the default recipes, workdir and prefix. Checked in
the build's summary, its --json report and `rocbuild status`."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tests.cli import commands_under, run_cli
from tests.conftest import require_tool
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NEEDS_ROCM = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                                "find_package(ROCM CONFIG REQUIRED)\n"}


def fix_command(text: str) -> list[str]:
    """The `rocbuild build …` named in the fix (its words, however the line was wrapped)."""
    fix = " ".join(text.partition("fix:")[2].split())
    found = re.findall(r"`(rocbuild build [^`]*)`", fix)
    assert found, text
    return shlex.split(found[-1])


def test_the_fix_and_continue_with_name_one_command(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "a", NEEDS_ROCM)
    failed = run_cli("build", *flags, "--no-verify", expect=1)
    out = failed.stdout
    continue_with = shlex.split(commands_under(out)[0])
    fix = fix_command(out)
    assert fix[:4] == ["rocbuild", "build", "rocm-cmake", "a"], out
    assert fix[4:] == continue_with[2:][continue_with[2:].index("--recipes"):], out
    for flag in ("--recipes", "--workdir", "--prefix", "--mirror"):
        assert flag in fix, (flag, out)

    doc = json.loads(run_cli("build", *flags, "--no-verify", "--json", expect=1).stdout)
    (step,) = [s for s in doc["steps"] if s["result"] == "failed"]
    assert f"--workdir {flags[flags.index('--workdir') + 1]}" in step["cause"]["fix"], step

    status = run_cli("status", *flags, expect=1).stdout
    again = shlex.split(commands_under(status)[0])
    assert fix_command(status)[4:] == again[2:][again[2:].index("--recipes"):], status
