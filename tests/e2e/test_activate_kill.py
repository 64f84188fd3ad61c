"""An activation killed with SIGKILL between creating the temporary link and the rename: the
old link must still point at the old prefix, and the next activation removes the stray link.
The child is a real process killed by a real signal (docs/architecture.md, Contracts: Tests)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from rocbuild.prefix import activate
from tests.unit.test_activate import make_prefix

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Run activate() in a child whose rename step kills the process: the temp link exists, the
# rename never happens, and the run lock (flock) is released by the kernel.
CHILD = """
import os, signal, sys
from pathlib import Path
import rocbuild.prefix.activate as a

def die(src, dst):
    os.kill(os.getpid(), signal.SIGKILL)

a.os.replace = die
a.activate(Path(sys.argv[1]), Path(sys.argv[2]))
"""


def test_sigkill_mid_switch_keeps_the_old_link_and_the_next_run_cleans_up(tmp_path: Path
                                                                          ) -> None:
    old, new = make_prefix(tmp_path, "rocm-6.4-gfx906"), make_prefix(tmp_path, "rocm-6.4-gfx90a")
    link = tmp_path / "rocm"
    activate.activate(old, link)
    done = subprocess.run([sys.executable, "-c", CHILD, str(new), str(link)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert activate.current_target(link) == old
    stray = activate.temp_link_path(link)
    assert stray.is_symlink() and Path(stray.readlink()) == new
    switch = activate.activate(new, link)  # the lock was released with the dead process
    assert switch.removed_stray and switch.previous == old
    assert activate.current_target(link) == new and not stray.is_symlink()
    assert activate.activate_previous(link).target == old


def test_activate_while_a_build_installs_into_the_prefix_is_busy(tmp_path: Path) -> None:
    """The prefix lock of a running build stops `activate` with exit 3 naming the holder
    (never exit 2, "did not complete", with no word of the build)."""
    import os
    import time

    from tests.cli import child_env, run_cli
    from tests.conftest import require_tool
    from tests.support.chain import one_component_stack

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    slow, started = tmp_path / "slow", tmp_path / "installing"
    cmake = ("cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
             "install(FILES a.txt DESTINATION share)\n"
             f'install(CODE "if(EXISTS {slow})\n file(WRITE {started} x)\n'
             ' execute_process(COMMAND sleep 600)\nendif()")\n')
    flags = one_component_stack(tmp_path, "a", {"CMakeLists.txt": cmake, "a.txt": "a\n"})
    run_cli("build", *flags, "--no-verify", expect=0)
    prefix, link = tmp_path / "prefix", tmp_path / "rocm"
    slow.write_text("")
    (tmp_path / "work" / "state" / "stamps" / "a" / "install.json").unlink()
    argv = [sys.executable, "-m", "rocbuild", "build", *flags, "--no-verify", "--quiet"]
    build = subprocess.Popen(argv, env=child_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while build.poll() is None and not started.exists():
            time.sleep(0.01)
        assert build.poll() is None, "the build ended before its install"
        result = run_cli("activate", str(prefix), "--link", str(link), expect=3)
        assert f"pid {build.pid}" in result.stderr and "installing into" in result.stderr, \
            result.explain()
        assert not link.is_symlink()
    finally:
        family = psutil.Process(build.pid).children(recursive=True)  # cmake and its sleep
        os.killpg(build.pid, signal.SIGKILL)
        for child in family:
            with contextlib.suppress(psutil.Error):
                child.kill()
        build.wait(timeout=60)
