"""Nothing a build started outlives it: a ``kill -9`` of rocbuild, alone or with its
process group, ends every job of the step that ran, down to a custom command's shell and its
``sleep`` in a process group ninja made; and when even the watchdog is gone, the next
command (clean, build) ends them before it touches the tree, and status names them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from rocbuild.model.workdir import Workdir
from tests.cli import run_cli
from tests.conftest import REPO
from tests.support.chain import Chain, git
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANG_GUARD = 30.0  # seconds: not a speed claim, only so a regression fails instead of hanging


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def hanging_beta(chain: Chain) -> Path:
    """beta's build runs a custom command whose shell starts ``sleep 300`` and writes its pid
    to the returned file, then waits: a silent link step that never ends by itself."""
    pidfile = chain.root / "sleep.pid"
    src = chain.repos / "beta.git.src"
    (src / "hang.sh").write_text('sleep 300 &\necho $! > "$1.tmp"\nmv "$1.tmp" "$1"\nwait\n')
    with (src / "CMakeLists.txt").open("a") as f:
        f.write(f"add_custom_target(hang ALL COMMAND sh ${{CMAKE_SOURCE_DIR}}/hang.sh {pidfile} "
                "DEPENDS beta VERBATIM)\n")
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "hang")
    git(src, "tag", "-f", "v1")
    git(chain.repos / "beta.git", "fetch", "-q", "-f", str(src), "refs/tags/v1:refs/tags/v1")
    return pidfile


def start_build(chain: Chain, tmp_path: Path, *,
                own_group: bool = False) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify",
                             *chain.flags()], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=own_group)


def hung_sleep(chain: Chain, tmp_path: Path, *, own_group: bool = False
               ) -> tuple[subprocess.Popen[bytes], int]:
    pidfile = hanging_beta(chain)
    runner = start_build(chain, tmp_path, own_group=own_group)
    wait_for(lambda: pidfile.exists() or runner.poll() is not None, "the hanging step started")
    assert runner.poll() is None, "the build ended before the hanging step"
    pid = int(pidfile.read_text())
    assert alive(pid)
    return runner, pid


def watchdogs_of(pid: int) -> list[psutil.Process]:
    """rocbuild's watchdog: a python started by ``pid`` in a session of its own."""
    try:
        kids = psutil.Process(pid).children()
    except psutil.Error:
        return []
    return [k for k in kids if "-I" in k.cmdline() and "_watch()" in " ".join(k.cmdline())]


def assert_ends(pid: int, what: str) -> None:
    """The process ``pid`` ends by itself (the test kills it after, whatever happened)."""
    try:
        wait_for(lambda: not alive(pid), what, guard=HANG_GUARD)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_rocbuild_alone_ends_the_steps_jobs(chain: Chain, tmp_path: Path) -> None:
    runner, pid = hung_sleep(chain, tmp_path)
    os.kill(runner.pid, signal.SIGKILL)  # a hung terminal's `kill -9 <rocbuild>`
    runner.wait()
    assert_ends(pid, "the custom command's sleep ended with a kill -9 of rocbuild")


def test_kill_9_of_rocbuilds_process_group_ends_the_steps_jobs(chain: Chain,
                                                                tmp_path: Path) -> None:
    runner, pid = hung_sleep(chain, tmp_path, own_group=True)
    os.killpg(runner.pid, signal.SIGKILL)  # the job control kill of the whole command
    runner.wait()
    assert_ends(pid, "the custom command's sleep ended with a kill of rocbuild's process group")


def test_without_the_watchdog_status_names_and_clean_ends_the_leftovers(
        chain: Chain, tmp_path: Path) -> None:
    runner, pid = hung_sleep(chain, tmp_path)
    for dog in watchdogs_of(runner.pid):  # the worst case: the watchdog died too
        dog.kill()
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    try:
        status = run_cli("status", *chain.flags(), cwd=tmp_path)
        assert "still running" in status.output, status.explain()
        assert str(pid) in status.output, status.explain()
        assert alive(pid), "status reads; it ends nothing"
        build_tree = Workdir.shared(chain.workdir).builds / "beta"
        assert build_tree.is_dir()
        cleaned = run_cli("clean", "beta", *chain.flags(), cwd=tmp_path, expect=0)
        assert "ended a leftover process of an earlier run" in cleaned.output, cleaned.explain()
        assert not alive(pid), "clean removed the build tree under a live job"
        assert not build_tree.exists()
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
