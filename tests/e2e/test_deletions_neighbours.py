"""Every other deletion rocbuild does stays inside what it made (the neighbours of `clean`'s):
the leftovers of a killed run (git locks, half-made caches, temp files of the prefix), a
killed cache install's rollback, a fetch's half-made checkout, `cache prune` and the user's
prefix list. A link there is removed as a link or left alone, never followed. Every
rocbuild here runs as a child process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli, run_flags
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def someone_elses(tmp_path: Path) -> Path:
    """A folder of the user's that no rocbuild state leads to, holding one file."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("mine\n")
    return theirs


def test_a_builds_leftover_cleaning_never_removes_a_git_lock_through_a_link(
        tmp_path: Path, small: list[str]) -> None:
    """A checkout replaced by a link to the user's own clone: its index.lock may be a live
    git of theirs, not a killed run's."""
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    clone = tmp_path / "myclone"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "index.lock").write_text("")
    (tmp_path / "work" / "src" / "other").symlink_to(clone)
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    assert (clone / ".git" / "index.lock").is_file()


def test_a_builds_leftover_cleaning_never_empties_a_cache_through_a_link(
        tmp_path: Path, small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    caches = tmp_path / "work" / "cache" / "git"
    elsewhere = tmp_path / "elsewhere"
    os.rename(caches, elsewhere)
    (elsewhere / "half.git").mkdir()  # looks like a cache a kill cut short inside git init
    (elsewhere / "half.git" / "keep.txt").write_text("mine\n")
    caches.symlink_to(elsewhere)
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    assert (elsewhere / "half.git" / "keep.txt").is_file()


def test_a_builds_leftover_cleaning_never_removes_temp_names_through_a_modulefiles_link(
        tmp_path: Path, chain: Chain) -> None:
    run_flags(chain.flags(), "build", "--no-verify", "--quiet", expect=0)
    theirs = someone_elses(tmp_path)
    (theirs / ".notes.123.tmp").write_text("mine\n")  # named like an atomic write's temp
    (chain.prefix / "modulefiles" / "theirs").symlink_to(theirs)
    run_flags(chain.flags(), "build", "--no-verify", "--quiet", expect=0)
    assert (theirs / ".notes.123.tmp").is_file()


def test_a_killed_cache_installs_rollback_never_removes_through_a_link(
        tmp_path: Path, small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    prefix = tmp_path / "prefix"
    theirs = someone_elses(tmp_path)
    (prefix / "share" / "esc").symlink_to(theirs)
    killed = prefix / ".rocbuild-unpack-99999-x"  # what a killed install leaves
    (killed / "saved").mkdir(parents=True)
    (killed / "folders.json").write_text(json.dumps(["", "share"]))
    (killed / "journal.jsonl").write_text(json.dumps({"rel": "share/esc/keep.txt",
                                                      "saved": None}) + "\n")
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    assert (theirs / "keep.txt").is_file() and not killed.exists()


def test_a_fetch_removes_a_link_in_the_place_of_its_half_made_checkout_as_a_link(
        tmp_path: Path, small: list[str]) -> None:
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    theirs = someone_elses(tmp_path)
    src = tmp_path / "work" / "src"
    shutil.rmtree(src / "a")  # the next build fetches it again
    (src / "a.partial").symlink_to(theirs)
    run_flags(small, "build", "--no-verify", "--quiet", expect=0)
    assert (theirs / "keep.txt").is_file() and not (src / "a.partial").is_symlink()


def test_cache_prune_never_removes_outside_the_cache_folder(tmp_path: Path) -> None:
    store = tmp_path / "cache"
    store.mkdir()
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("x.json", "x.sig", "x.tar.zst"):
        (victim / name).write_text("mine\n")
    entries = [{"component": "../victim", "key": "x", "created": 0},
               {"component": "a", "key": "../../victim/x", "created": 0}]
    (store / "index.json").write_text(json.dumps({"rocbuild_cache": 1, "artifacts": entries}))
    done = run_cli("cache", "prune", "--cache", str(store), "--older-than", "1")
    assert sorted(p.name for p in victim.iterdir()) == ["x.json", "x.sig", "x.tar.zst"], \
        done.explain()
    assert "outside" in done.output, done.explain()


def test_the_prefix_lists_temp_files_a_kill_left_go_with_the_next_change(tmp_path: Path) -> None:
    from tests.unit.test_activate import make_prefix

    state = tmp_path / "home" / ".local" / "state" / "rocbuild"  # conftest's XDG_STATE_HOME
    state.mkdir(parents=True)
    (state / ".prefixes.json.99999.tmp").write_text("{")  # a kill before the rename
    prefix = make_prefix(tmp_path, "rocm-x")
    run_cli("activate", str(prefix), "--link", str(tmp_path / "rocm"), expect=0)
    assert [p.name for p in state.iterdir() if p.name.endswith(".tmp")] == []
