"""Every git process of a fetch runs through rocbuild.proc: registered with the
run's ChildRegistry, so an interrupt ends it and a later run finds it, and the quick local
ones have a timeout. gitpython only reads repository files; a git process it started would
be outside the registry and without a timeout."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import git
import pytest

from rocbuild import proc
from rocbuild.run.sources import sources
from tests.conftest import require_tool
from tests.support.chain import make_repo

pytestmark = pytest.mark.e2e


class Recording(proc.ChildRegistry):
    """The run's registry, keeping what was registered."""

    def __init__(self, running_dir: Path) -> None:
        super().__init__(running_dir)
        self.seen: list[list[str]] = []

    def add(self, child: proc.Popen, argv: Any) -> None:
        self.seen.append(list(argv))
        super().add(child, argv)


def test_a_fetch_starts_git_only_through_the_runs_registry(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_tool("git")
    repo = make_repo(tmp_path / "repos", "a", {"f.txt": "x\n"})
    registry = Recording(tmp_path / "running")
    started: list[list[str]] = []
    real_popen = subprocess.Popen.__init__

    def popen(self: Any, args: Any, *rest: Any, **kw: Any) -> None:
        started.append([str(a) for a in args])
        real_popen(self, args, *rest, **kw)

    def gitpython_runs(*args: Any, **kw: Any) -> None:
        raise AssertionError(f"gitpython started git {args[1:]}: not through rocbuild.proc")

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(git.cmd.Git, "execute", gitpython_runs)
    request = sources.FetchRequest(name="a", url=repo.as_uri(), ref="v1", submodules=False,
                                   checkout_dir=tmp_path / "src" / "a",
                                   cache_root=tmp_path / "cache", attempts=1, retry_delay=0)
    first = sources.fetch(request, lambda line: None, registry=registry)
    again = sources.fetch(request, lambda line: None, registry=registry)  # cached, current
    assert first.commit == again.commit == sources.checkout_commit(request.checkout_dir)
    assert first.ref_kind == "tag"
    assert started, "the fetch ran no git at all?"
    started = [a for a in started if "_watch()" not in a[-1]]  # the registry's own watchdog
    assert started == registry.seen, "a git process was started outside the run's registry"
    commands = {argv[argv.index("-C") + 2] if "-C" in argv else argv[1] for argv in started}
    assert {"init", "config", "rev-parse", "update-ref", "fetch", "checkout"} <= commands


def test_a_fetch_starts_no_git_it_does_not_need(tmp_path: Path) -> None:
    """A cold fetch of one component and its cached re-fetch start only the git commands
    they need (every local git process is a fork and exec in each component's
    fixed cost): the cache's allowAnySHA1InWant is set once, when it is made; a new cache
    has nothing cached to look up; the ref's kind is known from the fetch."""
    require_tool("git")
    repo = make_repo(tmp_path / "repos", "a", {"f.txt": "x\n"})
    registry = Recording(tmp_path / "running")
    request = sources.FetchRequest(name="a", url=repo.as_uri(), ref="v1", submodules=False,
                                   checkout_dir=tmp_path / "src" / "a",
                                   cache_root=tmp_path / "cache", attempts=1, retry_delay=0)
    first = sources.fetch(request, lambda line: None, registry=registry)
    cold = len(registry.seen)
    again = sources.fetch(request, lambda line: None, registry=registry)
    assert (first.ref_kind, again.ref_kind) == ("tag", "tag")
    assert (cold, len(registry.seen) - cold) == (9, 2), registry.seen
