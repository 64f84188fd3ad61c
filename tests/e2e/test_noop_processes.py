"""Issue 25: a rerun with nothing to do starts only the processes it needs. Each checkout is
asked `git status` once per run (the user's edits), no GitPython `cat-file` per question, and
host probes (cmake, ninja, g++, ccache --version) are answered from the workdir while the tool
is unchanged; a changed tool (its mtime) is asked again. The tools are real, behind logging
shims first on PATH."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SHIMMED = ("git", "cmake", "ninja", "ccache", "g++", "c++", "cc")


def shims(folder: Path, log: Path) -> dict[str, str]:
    """A logging shim in ``folder`` for each tool that exists; returns PATH for the child."""
    folder.mkdir()
    for tool in SHIMMED:
        real = shutil.which(tool)
        if real is None:
            continue
        shim = folder / tool
        shim.write_text(f'#!/bin/sh\necho "{tool} $*" >> "{log}"\nexec "{real}" "$@"\n')
        shim.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def calls(log: Path) -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_noop_asks_each_checkout_once_and_probes_only_changed_tools(chain: Chain,
                                                                   tmp_path: Path) -> None:
    require_tool("ccache")
    log = tmp_path / "calls.log"
    env = shims(tmp_path / "shims", log)
    flags = [*chain.flags(), "--no-verify", "--ccache", "on"]

    run_cli("build", *flags, env=env, expect=0)  # the first build: the tools are asked once
    first = calls(log)
    assert any(line.startswith("cmake --version") for line in first), first
    # a checkout the fetch has just made, with no patches, is the commit: the patch step
    # neither resets it nor asks for edits; the compile's up-to-date check asks once
    assert not [line for line in first if re.search(r" reset ", line)], first
    for name in ("alpha", "beta", "gamma"):
        assert len([line for line in first
                    if re.search(rf"-C \S*/src/{name} status\b", line)]) == 1, (name, first)

    # ccache is probed while the stack loads, before this run made the workdir's state
    # folder (a `plan` of a fresh workdir writes nothing): the second run keeps its answer
    run_cli("build", *flags, env=env, expect=0)
    calls(log)
    done = run_cli("build", *flags, env=env, expect=0)
    assert "nothing to do" in done.stdout, done.explain()
    again = calls(log)
    assert not [line for line in again if "--version" in line or "-dumpfullversion" in line], \
        again
    assert not [line for line in again if "cat-file" in line], again
    for name in ("alpha", "beta", "gamma"):
        asked = [line for line in again
                 if re.search(rf"-C \S*/src/{name} status\b", line)]
        assert len(asked) == 1, (name, again)

    # a tool that changed (an upgrade gives it another mtime) is asked again
    cmake = tmp_path / "shims" / "cmake"
    os.utime(cmake, (cmake.stat().st_atime, cmake.stat().st_mtime + 10))
    run_cli("build", *flags, env=env, expect=0)
    assert [line for line in calls(log) if line.startswith("cmake --version")]


def test_status_imports_neither_the_build_nor_doit_nor_gitpython() -> None:
    """What `rocbuild status` loads (the modules a command imports only when it runs them)."""
    code = ("import sys; from rocbuild.cli import main; main.build_parser('status'); "
            "print(' '.join(sorted(sys.modules)))")
    loaded = set(subprocess.run([sys.executable, "-c", code], env=child_env(), check=True,
                                capture_output=True, text=True).stdout.split())
    for module in ("doit", "git", "rocbuild.run.engine.engine", "rocbuild.cli.cmd_build",
                   "rocbuild.cli.cmd_bench", "rocbuild.run.cache.cache", "rocbuild.checks.verify"):
        assert module not in loaded, module
