"""Several components of ONE upstream repository fetched at the same time: they
share the repository's source cache, so `--parallel` from an empty workdir made two fetches
create that cache at once (`git init failed … cannot copy '…/templates/description' … File
exists`). A lock per cached repository makes them take turns."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

COMPONENTS = ("one", "two", "three", "four", "five", "six")


def test_components_of_one_repository_fetch_in_parallel_from_an_empty_workdir(
        tmp_path: Path) -> None:
    require_tool("git")
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    make_repo(repos, "upstream", {"README": "one repository, several components\n"})
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n')
    for name in COMPONENTS:  # each its own checkout of the same URL (llama.cpp, -vulkan)
        (recipes / f"{name}.toml").write_text(
            f'kind = "source-only"\n[source]\ngit = "{FAKE_HOST}upstream.git"\nref = "v1"\n')
    work = tmp_path / "work"
    for attempt in range(6):  # the race needs two `git init`s in one cache at once: repeat
        shutil.rmtree(work, ignore_errors=True)
        done = run_cli("build", *COMPONENTS, "--recipes", str(recipes), "--workdir", str(work),
                       "--prefix", str(tmp_path / "prefix"), "--parallel", "3",
                       "--mirror", f"{FAKE_HOST}={repos.as_uri()}/", "--no-verify")
        assert done.returncode == 0, f"attempt {attempt}\n{done.explain()}"
        for name in COMPONENTS:
            assert (work / "src" / name / "README").is_file(), (attempt, name)
        caches = [p for p in (work / "cache" / "git").iterdir() if p.suffix == ".git"]
        assert len(caches) == 1, caches  # one cache for the one repository


GUARD = 20  # seconds a fetch from the cache waits for another beside it (a guard)
# `git` first on PATH: a fetch from rocbuild's source cache notes "+" when it starts, then
# waits until another has started too (at most GUARD seconds) and notes whether one did; the
# rest is git. Taking turns, the first waits alone, as the other cannot start meanwhile
WAITING_GIT = '''\
import fcntl, os, subprocess, sys, time
REAL, LOG, GUARD = {real!r}, {log!r}, {guard}
args = sys.argv[1:]
def note(text):
    with open(LOG + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(LOG, "a") as f:
            f.write(text + "\\n")
def started():
    return open(LOG).read().splitlines().count("+") if os.path.exists(LOG) else 0
if "fetch" in args and any(a.startswith("file://") and "/cache/git/" in a for a in args):
    note("+")
    until = time.monotonic() + GUARD
    while started() < 2 and time.monotonic() < until:
        time.sleep(0.05)
    note("together" if started() >= 2 else "alone")
    sys.exit(subprocess.call([REAL, *args]))
os.execv(REAL, [REAL, *args])
'''


def test_checkouts_of_one_cached_repository_fetch_from_the_cache_together(
        tmp_path: Path) -> None:
    """Once a tag is in a repository's cache, the checkouts of its components read it under
    a shared lock, together: four ggml checkouts took turns there, a second each, before
    their configures could start. Only creating or fetching into the cache takes turns."""
    import sys

    real = require_tool("git")
    repos, recipes, work = tmp_path / "repos", tmp_path / "recipes", tmp_path / "work"
    make_repo(repos, "upstream", {"README": "one repository, several components\n"})
    recipes.mkdir()
    (recipes / "stack.toml").write_text('[stack]\nversion = "1.0"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n')
    for name in ("one", "two", "three"):
        (recipes / f"{name}.toml").write_text(
            f'kind = "source-only"\n[source]\ngit = "{FAKE_HOST}upstream.git"\nref = "v1"\n')
    flags = ["--recipes", str(recipes), "--workdir", str(work), "--prefix",
             str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/",
             "--no-verify"]
    run_cli("build", "one", *flags, expect=0)  # the tag is in the cache now
    bindir, log = tmp_path / "bin", tmp_path / "fetches.log"
    bindir.mkdir()
    (bindir / "git").write_text(f"#!{sys.executable}\n"
                                + WAITING_GIT.format(real=real, log=str(log), guard=GUARD))
    (bindir / "git").chmod(0o755)
    done = run_cli("build", "two", "three", *flags, "--parallel", "2",
                   env={"PATH": f"{bindir}:{os.environ['PATH']}"}, timeout=4 * GUARD + 120)
    assert done.returncode == 0, done.explain()
    notes = log.read_text().splitlines()
    assert notes.count("together") == 2, (notes, done.stdout)
