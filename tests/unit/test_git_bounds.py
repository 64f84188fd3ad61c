"""Every local git command of the sources and patches modules has a timeout: a git
that hangs (a stale lock on a network file system) is ended, not waited for all night. The
commands are recorded, not run: this test starts no process."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from rocbuild import proc
from rocbuild.run.sources import patches, sources


def test_local_git_commands_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], Any]] = []

    def capture(argv: list[str], **kw: Any) -> proc.Captured:
        seen.append((list(argv), kw.get("timeout")))
        return proc.Captured(0, "", "")

    monkeypatch.setattr(proc, "run_capture", capture)
    checkout = tmp_path / "c"
    (checkout / ".git").mkdir(parents=True)
    (tmp_path / "cache" / "HEAD").parent.mkdir()
    (tmp_path / "cache" / "HEAD").write_text("ref: refs/heads/main\n")
    patch = tmp_path / "0001.patch"
    patch.write_text("")
    patches.tracked_changes(checkout)
    patches.check_series("a", checkout, "0" * 40, [patch])
    sources.cached_commit(tmp_path / "cache", "v1")
    sources.ref_kind(tmp_path / "cache", "v1")
    commands = {argv[3] for argv, _ in seen}
    assert {"status", "read-tree", "apply", "rev-parse", "config"} <= commands
    unbounded = [argv for argv, timeout in seen
                 if timeout is None or not math.isfinite(timeout)]
    assert unbounded == []
