"""Several components of ONE upstream repository fetched at the same time (issue 34): they
share the repository's source cache, so `--parallel` from an empty workdir made two fetches
create that cache at once (`git init failed … cannot copy '…/templates/description' … File
exists`). A lock per cached repository makes them take turns."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo

pytestmark = pytest.mark.e2e

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
