"""The workdir's trash (run/state/trash.py): a folder is renamed away whole before it is
removed, and ``finish`` removes what a killed clean left, never outside the workdir nor
through a link. A real SIGKILL of `clean` is in tests/e2e/test_deletions_inside.py."""

from __future__ import annotations

from pathlib import Path

from rocbuild.run.state import trash


def a_tree(root: Path) -> Path:
    tree = root / "src" / "a"
    (tree / ".git").mkdir(parents=True)
    (tree / ".git" / "HEAD").write_text("ref\n")
    (tree / "main.c").write_text("x\n")
    return tree


def test_discard_removes_a_folder_through_the_trash_and_a_link_as_a_link(tmp_path: Path) -> None:
    work = tmp_path / "work"
    tree = a_tree(work)
    bin_ = work / "state" / "trash"
    trash.discard(tree, bin_)
    assert not tree.exists() and list(bin_.iterdir()) == []
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("mine\n")
    (work / "src" / "b").symlink_to(outside)
    trash.discard(work / "src" / "b", bin_)
    assert not (work / "src" / "b").is_symlink() and (outside / "keep").is_file()


def test_finish_removes_what_a_kill_left_and_follows_notes_only_inside(tmp_path: Path) -> None:
    work = tmp_path / "work"
    bin_ = work / "state" / "trash"
    left = bin_ / "a-x1y2"
    a_tree(left)  # renamed into the trash, then killed before its removal ended
    inside = a_tree(work / "build")
    outside = a_tree(tmp_path / "elsewhere")
    (work / "linked").symlink_to(tmp_path / "elsewhere")
    for name, named in (("n1", inside), ("n2", outside), ("n3", work / "linked" / "src" / "a")):
        (bin_ / f"{name}{trash.NOTE_SUFFIX}").write_text(f"{named}\n")
    said: list[str] = []
    trash.finish(work, bin_, said.append)
    assert list(bin_.iterdir()) == []
    assert not inside.exists() and (outside / "main.c").is_file()
    assert len(said) == 2 and any(str(inside) in line for line in said), said
