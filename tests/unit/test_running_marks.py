"""The record of a running step (run/state/running.py) is written without an fsync: it names a
live process, so after a power loss it means nothing anyway, and its fsync was half of the
fsyncs of a cold build (36 of 95 for six trivial components)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocbuild.run.state import running


def test_a_running_step_is_marked_without_an_fsync(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    with running.mark(tmp_path, "alpha", "compile"):
        assert ("alpha", "compile") in running.steps(tmp_path)
    assert running.steps(tmp_path) == {}
    assert synced == []
