"""files.write_text_atomic leaves a file that already holds the text alone (a no-op
run writes no env file or record, no fsync), and writes in every other case."""

from __future__ import annotations

import os
from pathlib import Path

from rocbuild.files import write_text_atomic


def _mtime_back(path: Path) -> int:
    """Date ``path`` back, so a rewrite shows in its mtime."""
    os.utime(path, ns=(0, 1_000_000_000))
    return path.stat().st_mtime_ns


def test_the_same_text_is_not_written_again(tmp_path: Path) -> None:
    path = tmp_path / "prefix" / "env.sh"
    write_text_atomic(path, "export A=1\n", mode=0o644)
    before = _mtime_back(path)
    write_text_atomic(path, "export A=1\n", mode=0o644)
    assert path.stat().st_mtime_ns == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["env.sh"]


def test_other_text_another_mode_or_a_link_is_written(tmp_path: Path) -> None:
    path = tmp_path / "env.sh"
    write_text_atomic(path, "export A=1\n", mode=0o644)
    before = _mtime_back(path)
    write_text_atomic(path, "export A=2\n", mode=0o644)
    assert path.read_text() == "export A=2\n" and path.stat().st_mtime_ns != before
    write_text_atomic(path, "export A=2\n", mode=0o600)
    assert path.stat().st_mode & 0o777 == 0o600
    target = tmp_path / "elsewhere"
    target.write_text("export A=3\n")
    link = tmp_path / "linked.sh"
    link.symlink_to(target)
    write_text_atomic(link, "export A=3\n")  # the same text behind a link: a file now
    assert not link.is_symlink() and link.read_text() == "export A=3\n"
    write_text_atomic(tmp_path / "new" / "file", "x")  # folders made as before
    assert (tmp_path / "new" / "file").read_text() == "x"


def test_a_link_planted_at_the_temp_name_is_never_written_through(tmp_path: Path) -> None:
    """The temp name ``.<name>.<pid>.tmp`` is easy to guess: in a shared folder (a sticky
    /tmp, --link in one) another user's link there made root write where it led."""
    import os

    victim = tmp_path / "victim"
    victim.write_text("theirs\n")
    path = tmp_path / "state.json"
    (tmp_path / f".state.json.{os.getpid()}.tmp").symlink_to(victim)
    write_text_atomic(path, "{}\n")
    assert victim.read_text() == "theirs\n"
    assert path.read_text() == "{}\n" and not path.is_symlink()
