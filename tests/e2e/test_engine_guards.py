"""Guards of the engine that no other test could tell missing (surviving mutations of issue
23): an interrupted --parallel run ends the children its worker threads own, and the prefix
is claimed as rocbuild's before the first install writes into it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, Chain, make_repo
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def slow_project(name: str, seconds: int) -> dict[str, str]:
    """A CMake project whose build runs ``sleep <seconds>`` (a silent step, like a link)."""
    return {"CMakeLists.txt": textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.20)
        project({name} NONE)
        add_custom_target(slow ALL COMMAND sleep {seconds} VERBATIM)
        install(CODE "message(STATUS {name})")
        """)}


def stack_of(tmp_path: Path, projects: dict[str, dict[str, str]], args: str = "[]") -> list[str]:
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n')
    for name, files in projects.items():
        make_repo(repos, name, files)
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n[cmake]\nargs = {args}\n')
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]


def sleeping(seconds: set[str], root: Path) -> list[psutil.Process]:
    """The ``sleep`` children of this test's builds (their ninja runs in ``root``)."""
    found = []
    for p in psutil.process_iter(["cmdline", "cwd"]):
        cmd = p.info["cmdline"] or []
        if len(cmd) == 2 and cmd[0].endswith("sleep") and cmd[1] in seconds \
                and str(root) in (p.info["cwd"] or ""):
            found.append(p)
    return found


def test_an_interrupted_parallel_run_ends_the_children_of_every_worker(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    # two independent components compile at once, each in a worker thread of doit; only the
    # run's registry (registry.kill_all, lifecycle.py's report phase) can end both children
    flags = stack_of(tmp_path, {"one": slow_project("one", 301),
                                "two": slow_project("two", 302)})
    runner = subprocess.Popen(
        [sys.executable, "-m", "rocbuild", "build", *flags, "--quiet", "--no-verify",
         "--parallel", "2"], env=child_env(), cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: len(sleeping({"301", "302"}, tmp_path)) == 2
                 or runner.poll() is not None, "both components' compiles started")
        assert runner.poll() is None, "the build ended before both slow steps ran"
        runner.send_signal(signal.SIGTERM)
        # without the kill the run waits on its workers, whose `sleep 30x` outlive this limit
        out, _ = runner.communicate(timeout=120)
        assert runner.returncode == 130, out
        wait_for(lambda: not sleeping({"301", "302"}, tmp_path), "both compiles ended")
    finally:
        for proc in [runner, *sleeping({"301", "302"}, tmp_path)]:
            with contextlib.suppress(Exception):
                proc.kill()
        runner.wait()


FAILS_ITS_INSTALL = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(half NONE)
        option(HALF_FAIL "the install stops after its first file" OFF)
        install(FILES a.txt DESTINATION share)
        if(HALF_FAIL)
          install(CODE "message(FATAL_ERROR \\"the install stops half-way\\")")
        endif()
        """),
    "a.txt": "a\n",
}


def test_a_prefix_is_rocbuilds_before_its_first_install_writes(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = stack_of(tmp_path, {"half": FAILS_ITS_INSTALL}, args='["-DHALF_FAIL=ON"]')
    result = run_cli("build", *flags, "--quiet", "--no-verify")
    assert result.returncode == 1, result.explain()
    prefix = tmp_path / "prefix"
    assert (prefix / "share" / "a.txt").is_file()  # the install wrote, then failed
    assert (prefix / ".rocbuild").is_dir()  # claimed before it wrote: the prefix is ours
    # so the next run is not refused as a folder of someone else's files
    (tmp_path / "recipes" / "half.toml").write_text(
        (tmp_path / "recipes" / "half.toml").read_text().replace("-DHALF_FAIL=ON",
                                                                 "-DHALF_FAIL=OFF"))
    result = run_cli("build", *flags, "--quiet", "--no-verify")
    assert result.returncode == 0, result.explain()


def test_a_no_op_run_reads_each_checkouts_edits_once(chain: Chain, tmp_path: Path) -> None:
    """One up-to-date Rule per run: the user's edits of a checkout (`git status`) are read
    once per run, not once per question (before: the ETA's status walk, each doit up-to-date
    check and the end of the run each ran it again)."""
    real_git = require_tool("git")
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0
    shim = tmp_path / "shim"
    shim.mkdir()
    calls = tmp_path / "git-calls.txt"
    (shim / "git").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {real_git} "$@"\n')
    (shim / "git").chmod(0o755)
    env = {"PATH": f"{shim}:{os.environ['PATH']}"}
    result = run_cli("build", *chain.flags(), "--quiet", "--no-verify", env=env)
    assert result.returncode == 0 and "▶" not in result.stdout, result.explain()
    statuses = [line.split()[1] for line in calls.read_text().splitlines()
                if " status --porcelain" in line]
    assert sorted(statuses) == sorted(str(chain.workdir / "src" / n)
                                      for n in ("alpha", "beta", "gamma")), statuses
