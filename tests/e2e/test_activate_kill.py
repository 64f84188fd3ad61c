"""An activation killed with SIGKILL between creating the temporary link and the rename: the
old link must still point at the old prefix, and the next activation removes the stray link.
The child is a real process killed by a real signal (DESIGN §4)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rocbuild.prefix import activate
from tests.unit.test_activate import make_prefix

pytestmark = pytest.mark.e2e

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
