"""SIGTERM, SIGHUP and Ctrl-C end every command the documented way: exit 130 with
one line, no traceback, whatever the moment (docs/exit-codes.md): in a probe before any
step, in the middle of rocbuild's own imports, and the probe's program ended with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cli import REPO, child_env
from tests.support.chain import Chain
from tests.support.wait import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

HANG_GUARD = 60.0  # seconds: only so a regression fails instead of hanging


def handles(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler installed for ``signum`` (/proc's SigCgt mask)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    except OSError:
        pass
    return False


def slow_ccache(tmp_path: Path) -> tuple[Path, Path]:
    """A ``ccache`` first on PATH whose ``--version`` writes its pid and hangs: a probe
    rocbuild runs before any step (plan and build resolve the compiler launchers)."""
    bindir, pidfile = tmp_path / "bin", tmp_path / "ccache.pid"
    bindir.mkdir()
    (bindir / "ccache").write_text(f'#!/bin/sh\necho $$ > {pidfile}.tmp\n'
                                   f'mv {pidfile}.tmp {pidfile}\nexec sleep 300\n')
    (bindir / "ccache").chmod(0o755)
    return bindir, pidfile


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("command", ["plan", "build"])
def test_a_stop_signal_in_a_probe_exits_130_and_ends_the_probe(
        chain: Chain, tmp_path: Path, signum: int, command: str) -> None:
    bindir, pidfile = slow_ccache(tmp_path)
    env = child_env({"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", command, *chain.flags()],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: pidfile.exists() or runner.poll() is not None, "the probe started",
                 guard=HANG_GUARD)
        assert runner.poll() is None, runner.communicate()
        probe = int(pidfile.read_text())
        runner.send_signal(signum)
        out, err = runner.communicate(timeout=HANG_GUARD)
        assert runner.returncode == 130, (runner.returncode, out, err)
        assert "Traceback" not in out + err
        assert "rocbuild: interrupted" in err
        wait_for(lambda: not alive(probe), "the probe ended with rocbuild", guard=HANG_GUARD)
    finally:
        if runner.poll() is None:
            runner.kill()
        if pidfile.exists() and alive(int(pidfile.read_text())):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3])
def test_a_signal_while_rocbuild_starts_is_one_line_and_130(
        chain: Chain, tmp_path: Path, signum: int, delay: float) -> None:
    """The signal comes while Python imports rocbuild (the first ~0.4 s of every command),
    once the interpreter is up and rocbuild's first line ran (Python handles SIGINT from its
    start, rocbuild SIGTERM and SIGHUP from its first line: before that no program can).
    The command is a `plan` whose launcher probe hangs, so it is still running at every
    delay however loaded the machine (a command that had already finished would be in
    Python's finalization, which restores the default handlers)."""
    bindir, pidfile = slow_ccache(tmp_path)
    env = child_env({"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", "plan", *chain.flags()],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    started = time.monotonic()
    wait_for(lambda: handles(runner.pid, signal.SIGTERM) or runner.poll() is not None
             or time.monotonic() - started > 3, "rocbuild took SIGTERM in hand",
             guard=HANG_GUARD, every=0.01)
    time.sleep(delay)
    assert runner.poll() is None, "rocbuild never took SIGTERM in hand while it started"
    runner.send_signal(signum)
    out, err = runner.communicate(timeout=HANG_GUARD)
    assert "Traceback" not in out + err, err
    assert runner.returncode == 130, (runner.returncode, err)
    assert err.strip() == "rocbuild: interrupted; what finished is kept, run the same " \
        "command again to continue", err
    if pidfile.exists() and alive(int(pidfile.read_text())):
        os.kill(int(pidfile.read_text()), signal.SIGKILL)


# a sitecustomize (PYTHONPATH) that sends the process a signal when a module is first
# imported: the signal comes at a chosen line of the start, however fast or loaded the machine
SIGNAL_AT_IMPORT = """
import os, sys


class _SignalAt:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ["SIGNAL_AT_IMPORT"]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), int(os.environ["SIGNAL_NUMBER"]))
        return None


sys.meta_path.insert(0, _SignalAt())
"""
# the first import of each entry's own code: the command (scripts/rocbuild, what bin/rocbuild
# is once installed) imports the rocbuild package after its handlers; `python -m rocbuild`
# imports the package itself first, then runs __main__.py, whose first lines hold them
ENTRIES = {"command": ([str(REPO / "scripts" / "rocbuild")], "rocbuild"),
           "python -m": (["-m", "rocbuild"], "signal")}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_a_signal_at_the_first_line_of_rocbuild_is_one_line_and_130(
        tmp_path: Path, entry: str, signum: int) -> None:
    """A console_scripts wrapper imported `re` before rocbuild's first line, and __main__.py
    set its handlers only when its ``run`` began: a signal then killed Python (143, 129) or
    printed a KeyboardInterrupt traceback. Now each entry holds the three from its first
    line (scripts/rocbuild; __main__.py run as `python -m`)."""
    (tmp_path / "sitecustomize.py").write_text(SIGNAL_AT_IMPORT)
    args, module = ENTRIES[entry]
    env = child_env({"SIGNAL_AT_IMPORT": module, "SIGNAL_NUMBER": str(int(signum))})
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    done = subprocess.run([sys.executable, *args, "help"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=HANG_GUARD)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stderr.strip() == "rocbuild: interrupted; what finished is kept, run the " \
        "same command again to continue", done.stderr
