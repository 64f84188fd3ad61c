"""A git fetch that hangs (a server that never answers) is one of the run's children: it is
registered in state/running and killed with its whole process group when the run is
interrupted. The "server" is a real git transport: the mirror points at ssh://, and
GIT_SSH_COMMAND is a script that never answers, as an unresponsive host would."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.e2e.test_engine import cli_env
from tests.support.chain import FAKE_HOST, Chain
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _transport(script: Path) -> list[psutil.Process]:
    """The live processes of the hung ssh transport (their command line names ``script``)."""
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        if p.info["status"] != psutil.STATUS_ZOMBIE and any(
                str(script) in part for part in p.info["cmdline"] or []):
            found.append(p)
    return found


def _registered(running: Path) -> list[dict]:
    docs = []
    for file in running.glob("*.json") if running.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):  # being written or removed right now
            docs.append(json.loads(file.read_text()))
    return docs


def test_sigterm_kills_a_hung_git_fetch_and_its_group(chain: Chain, tmp_path: Path) -> None:
    script = tmp_path / "unanswering-ssh"
    script.write_text("#!/bin/sh\n# a host that accepts the connection and never answers\n"
                      "sleep 300\n")
    script.chmod(0o755)
    env = cli_env(chain)
    env.update(ROCBUILD_MIRROR=f"{FAKE_HOST}=ssh://unanswering.invalid/repos/",
               GIT_SSH_COMMAND=str(script))
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", "--quiet",
                               "--no-verify"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        _interrupt_the_hung_fetch(runner, script, chain.workdir / "state" / "running")
    finally:  # a failure must not leave the build (or the fetch) running after the test
        if runner.poll() is None:
            runner.kill()  # rocbuild only: it shares pytest's process group
            runner.wait()
        for p in _transport(script):  # they live in a session of their own
            with contextlib.suppress(OSError):
                os.killpg(os.getpgid(p.pid), signal.SIGKILL)


def _interrupt_the_hung_fetch(runner: subprocess.Popen[str], script: Path,
                              running: Path) -> None:
    wait_for(lambda: bool(_transport(script)) or runner.poll() is not None, "the fetch hung")
    assert runner.poll() is None, "the build ended before the fetch hung"

    hung = _transport(script)
    groups = {os.getpgid(p.pid) for p in hung}
    wait_for(lambda: any(d["pgid"] in groups for d in _registered(running)),
             "the hung fetch is registered")
    fetches = [d for d in _registered(running) if d["pgid"] in groups]
    assert fetches[0]["argv"][:2] == ["git", "fetch"], fetches
    assert groups.isdisjoint({os.getpgid(runner.pid)}), "the fetch shares rocbuild's group"
    group_members = [p for p in psutil.process_iter() if _pgid(p) in groups]

    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, out
    wait_for(lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                             for p in group_members), "the fetch's group ended")
    assert not _transport(script), "an orphan of the hung fetch is still alive"
    assert not _registered(running)


def _pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except OSError:
        return None
