"""Issue 25: sources.checkout_commit reads HEAD from .git as git resolves it (no GitPython
`cat-file` per question); checked against `git rev-parse HEAD` in every shape a checkout can
have: detached (rocbuild's own), on a branch (loose ref, then packed), a worktree (.git is a
file: left to GitPython), no commit yet, no repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocbuild.run.sources.sources import checkout_commit
from tests.conftest import require_tool
from tests.support.chain import git

pytestmark = pytest.mark.e2e


def commit_file(repo: Path, text: str) -> str:
    (repo / "f.txt").write_text(text)
    git(repo, "add", "f.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", text)
    return git(repo, "rev-parse", "HEAD").strip()


def test_checkout_commit_agrees_with_git(tmp_path: Path) -> None:
    require_tool("git")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    assert checkout_commit(repo) is None  # a branch with no commit yet
    first = commit_file(repo, "one")
    assert checkout_commit(repo) == first  # refs/heads/main, a loose ref
    second = commit_file(repo, "two")
    git(repo, "pack-refs", "--all")  # now only in packed-refs
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    assert checkout_commit(repo) == second
    git(repo, "checkout", "-q", "--detach", first)  # how rocbuild checks out
    assert checkout_commit(repo) == first
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "tree"), second)
    assert (tmp_path / "tree" / ".git").is_file()
    assert checkout_commit(tmp_path / "tree") == second
    assert checkout_commit(tmp_path / "not-a-repo") is None
