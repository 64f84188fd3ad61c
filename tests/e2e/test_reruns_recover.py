"""Reruns that never recovered: an install a full disk cut off, a build tree
deleted or replaced, a state file replaced by a folder, a file removed after a cache install,
and bookkeeping outside the prefix that failed a finished build. "Run it again in the
morning" must be enough: each case damages what a real night damages, then one rerun
(`python -m rocbuild` as a child) must end with exit 0 and a working stack.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain, make_chain
from tests.support.mountns import mount_problem

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def built(tmp_path: Path) -> Chain:
    """The alpha <- beta <- gamma chain, built once (no verify: the projects carry no GPU
    code)."""
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    chain = make_chain(tmp_path)
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    assert chain.run_gamma() == "gamma 11"
    return chain


def _states(chain: Chain) -> dict[str, dict[str, str]]:
    status = json.loads(run_cli("status", *chain.flags(), "--json").stdout)
    return {c["name"]: {s["step"]: s["state"] for s in c["steps"]} for c in status["components"]}


# --- an install a full disk cut off --------------------------------------------------------
FAIL_INSTALL = """
install(CODE "if(EXISTS \\"{marker}\\")
  message(FATAL_ERROR \\"No space left on device (the disk filled up)\\")
endif()")
"""


def test_an_install_that_did_not_finish_rewrites_every_file_on_the_rerun(tmp_path: Path
                                                                          ) -> None:
    """The disk filled during alpha's first install: CMake had written its package files,
    one of them left empty with the source's time (a file system that reported the full
    disk late). CMake's install skips a file whose time matches ("Up-to-date"), so every
    rerun kept the empty file and beta's configure failed (`IMPORTED_LOCATION not set`)."""
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    marker = tmp_path / "disk-is-full"
    marker.touch()
    chain = make_chain(tmp_path)
    # alpha's project ends with an install step that fails while the marker exists
    src = chain.repos / "alpha.git.src"
    lists = src / "CMakeLists.txt"
    lists.write_text(lists.read_text() + FAIL_INSTALL.format(marker=marker))
    subprocess.run(["git", "-C", str(src), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qam", "fail at install", "--amend"], check=True)
    subprocess.run(["git", "-C", str(src), "tag", "-f", "v1"], check=True, capture_output=True)
    shutil.rmtree(chain.repos / "alpha.git")
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(chain.repos / "alpha.git")],
                   check=True)
    first = run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=1)
    assert "alpha: install" in first.stdout, first.explain()
    targets = chain.prefix / "lib" / "cmake" / "alpha" / "alphaTargets-release.cmake"
    assert targets.stat().st_size > 0
    kept = targets.stat()
    targets.write_bytes(b"")  # what the full disk left: empty, with the source's time
    os.utime(targets, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    assert _states(chain)["alpha"]["install"] != "done"  # not finished is not done
    marker.unlink()  # room was made
    again = run_cli("build", *chain.flags(), "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    assert targets.stat().st_size > 0
    assert chain.run_gamma() == "gamma 11"


# --- the build tree deleted or replaced ----------------------------------------------------
def test_a_deleted_build_ninja_is_configured_again(built: Chain) -> None:
    (built.workdir / "build" / "alpha" / "build.ninja").unlink()
    assert _states(built)["alpha"]["configure"] != "done"
    again = run_cli("build", *built.flags(), "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    assert "▶ alpha: configure" in again.stdout, again.explain()
    assert built.run_gamma() == "gamma 11"


@pytest.mark.parametrize("what", ["file", "dangling link"])
def test_a_build_tree_replaced_by_a_file_is_built_again(built: Chain, what: str) -> None:
    tree = built.workdir / "build" / "alpha"
    shutil.rmtree(tree)
    if what == "file":
        tree.write_text("not a build tree\n")
    else:
        tree.symlink_to(built.root / "unmounted-disk" / "alpha")
    again = run_cli("build", *built.flags(), "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    assert tree.is_dir() and built.run_gamma() == "gamma 11"
    assert not (built.root / "unmounted-disk").exists()


def test_a_build_tree_that_is_a_link_to_a_folder_is_kept(built: Chain) -> None:
    """A build tree moved to another disk and linked back is the user's choice: kept."""
    tree = built.workdir / "build" / "alpha"
    moved = built.root / "other-disk" / "alpha"
    moved.parent.mkdir()
    shutil.move(str(tree), str(moved))
    tree.symlink_to(moved)
    again = run_cli("build", *built.flags(), "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    assert tree.is_symlink() and (moved / "build.ninja").is_file()


# state files a run writes again, each replaced by a folder (with something in it)
STATE_FILES = ["state/stamps/alpha/install.json", "state/stamps/beta/configure.json",
               "state/last-build.json", "state/failures/gamma.json",
               "build/alpha/rocbuild-build-id"]


@pytest.mark.parametrize("rel", STATE_FILES)
def test_a_folder_in_place_of_a_state_file_is_replaced(built: Chain, rel: str) -> None:
    path = built.workdir / rel
    if path.is_file():
        path.unlink()
    path.mkdir(parents=True)
    (path / "something").write_text("x\n")
    (built.prefix / "bin" / "gamma").unlink()  # gamma installs again: its records are written
    again = run_cli("build", *built.flags(), "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    status = run_cli("status", *built.flags())
    assert status.returncode == 0, status.explain()
    assert built.run_gamma() == "gamma 11"


# --- bookkeeping outside the prefix ----------------------------------------------------------
def test_a_prefix_registry_that_cannot_be_written_is_a_warning(tmp_path: Path) -> None:
    """$XDG_STATE_HOME (the user's home) full or unwritable: the prefix index could not be
    written and a finished build ended in a doit traceback and exit 1."""
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    chain = make_chain(tmp_path)
    blocked = tmp_path / "state-home"
    blocked.write_text("a file where the folder should be\n")
    result = run_cli("build", *chain.flags(), "--no-verify", env={"XDG_STATE_HOME": str(blocked)})
    assert result.returncode == 0, result.explain()
    assert "PythonAction" not in result.output, result.explain()
    assert "warning" in result.output.lower() and "prefixes.json" in result.output, \
        result.explain()
    assert chain.run_gamma() == "gamma 11"


def test_a_full_home_is_a_warning_not_a_failed_night(tmp_path: Path) -> None:
    """The same with a real full file system under $XDG_STATE_HOME (a private mount)."""
    for tool in ("git", "cmake", "ninja", "cc", "unshare"):
        require_tool(tool)
    problem = mount_problem()
    if problem is not None:
        pytest.skip(problem)
    chain = make_chain(tmp_path)
    home = tmp_path / "full-home"
    home.mkdir()
    argv = " ".join(f"'{a}'" for a in [sys.executable, "-m", "rocbuild", "build",
                                        *chain.flags(), "--no-verify"])
    script = (f"mount -t tmpfs -o size=64k tmpfs {home}\n"
              f"dd if=/dev/zero of={home}/filler bs=4k 2>/dev/null || true\n"
              f"exec {argv}")
    done = subprocess.run(["unshare", "-m", "sh", "-ec", script], cwd=tmp_path,
                          env=child_env({"XDG_STATE_HOME": str(home / "state")}),
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output and "PythonAction" not in output, output
    assert "prefixes.json" in output, output
    assert chain.run_gamma() == "gamma 11"


# --- a file removed after a cache install ----------------------------------------------------
def test_a_file_removed_after_a_cache_install_is_repaired_in_one_run(built: Chain,
                                                                     tmp_path: Path) -> None:
    """One installed header deleted after a `build --cache` install: the rerun installed alpha
    again from the cache, then beta's options step failed with "no checkout" (beta had none:
    it came from the cache too), and only a second run recovered."""
    cache = tmp_path / "cache"
    run_cli("cache", "push", *built.flags(), "--to", str(cache), expect=0)
    shutil.rmtree(built.prefix)
    shown = run_cli("build", "--help").stdout
    unsigned = ["--allow-unsigned"] if "--allow-unsigned" in shown else []
    flags = ["--recipes", str(built.recipes), "--workdir", str(tmp_path / "work-b"),
             "--prefix", str(built.prefix), "--mirror", built.mirror, "--cache", str(cache),
             *unsigned]
    run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    assert not (tmp_path / "work-b" / "src").exists()  # all of it came from the cache
    (built.prefix / "include" / "alpha.h").unlink()
    again = run_cli("build", *flags, "--quiet", "--no-verify")
    assert again.returncode == 0, again.explain()
    assert (built.prefix / "include" / "alpha.h").is_file()
    assert built.run_gamma() == "gamma 11"
    quiet = run_cli("build", *flags, "--quiet", "--no-verify", expect=0)
    assert "nothing to do" in quiet.stdout, quiet.explain()


@pytest.mark.parametrize("rel", [".rocbuild/build-info.json", "env.sh"])
def test_a_folder_in_place_of_a_prefix_record_is_no_failed_night(built: Chain, rel: str) -> None:
    """rocbuild's own files of the prefix are written after the last install: a folder in
    their place ended a finished build in doit's PythonAction traceback."""
    path = built.prefix / rel
    path.unlink()
    path.mkdir()
    (path / "something").write_text("x\n")
    (built.prefix / "bin" / "gamma").unlink()
    again = run_cli("build", *built.flags(), "--no-verify")
    assert again.returncode == 0, again.explain()
    assert "PythonAction" not in again.output, again.explain()
    assert path.is_file() and built.run_gamma() == "gamma 11"
    run_cli("status", *built.flags(), expect=0)
