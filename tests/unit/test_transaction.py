"""The prefix transaction's rules where they live (prefix/transaction.py): a rollback puts
back every saved entry (bytes, mode, link target), removes what was absent and the folders
the install made; a commit keeps the install and drops the saved copies; the journal is on
disk before each change, so the next run undoes a killed install (recover); a journal line
never makes a rollback act outside the prefix or through a link out of it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from rocbuild.prefix.transaction import STAGING_NAME, Transaction, recover


def tree(prefix: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``prefix``: its kind, mode and bytes or link target."""
    out = {}
    for path in sorted(prefix.rglob("*")):
        rel = path.relative_to(prefix).as_posix()
        mode = path.lstat().st_mode & 0o7777
        if path.is_symlink():
            out[rel] = ("link", 0, os.readlink(path))
        elif path.is_dir():
            out[rel] = ("dir", mode, "")
        else:
            out[rel] = ("file", mode, path.read_text())
    return out


def installed(tmp_path: Path) -> Path:
    prefix = tmp_path / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libx.so").write_text("old")
    (prefix / "lib" / "libx.so").chmod(0o750)
    os.symlink("libx.so", prefix / "lib" / "libx.so.1")
    return prefix


def install(txn: Transaction) -> None:
    """What a cache install does: each change saved first, files replaced by a rename."""
    prefix = txn.prefix
    for rel in ("lib/libx.so", "lib/libx.so.1", "share/new/doc.txt"):
        txn.save(rel)
    (prefix / "lib" / "tmp").write_text("new")
    os.replace(prefix / "lib" / "tmp", prefix / "lib" / "libx.so")
    (prefix / "lib" / "libx.so.1").unlink()
    os.symlink("libx.so.2", prefix / "lib" / "libx.so.1")
    (prefix / "share" / "new").mkdir(parents=True)
    (prefix / "share" / "new" / "doc.txt").write_text("doc")


def test_rollback_puts_the_prefix_back_byte_for_byte(tmp_path: Path) -> None:
    prefix = installed(tmp_path)
    before = tree(prefix)
    txn = Transaction.begin(prefix)
    install(txn)
    txn.rollback()
    assert tree(prefix) == before  # no new folder, no staging folder left


def test_commit_keeps_the_install_and_drops_the_saved_copies(tmp_path: Path) -> None:
    prefix = installed(tmp_path)
    txn = Transaction.begin(prefix)
    install(txn)
    txn.commit()
    assert (prefix / "lib" / "libx.so").read_text() == "new"
    assert (prefix / "share" / "new" / "doc.txt").read_text() == "doc"
    assert not list(prefix.glob(STAGING_NAME + "*"))


def test_a_killed_install_is_undone_by_the_next_run(tmp_path: Path) -> None:
    prefix = installed(tmp_path)
    before = tree(prefix)
    txn = Transaction.begin(prefix)
    install(txn)  # then the process is killed: no commit, no rollback
    # the journal is on disk already, each line before its change
    journal = txn.folder / "journal.jsonl"
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [line["rel"] for line in lines] == ["lib/libx.so", "lib/libx.so.1",
                                               "share/new/doc.txt"]
    with journal.open("a") as f:
        f.write('{"rel": "lib/libx')  # the kill cut the last line: its change never began
    said: list[str] = []
    recover(prefix, said.append, keep_pid=os.getpid() + 1)
    assert tree(prefix) == before
    assert said == [f"removed an unpack folder a killed cache install left: {txn.folder} (its "
                    "install undone: 3 entries of the prefix put back as they were)"]


def test_a_running_install_of_this_process_is_not_recovered(tmp_path: Path) -> None:
    prefix = installed(tmp_path)
    txn = Transaction.begin(prefix)
    install(txn)
    recover(prefix, print, keep_pid=os.getpid())
    assert txn.folder.is_dir() and (prefix / "lib" / "libx.so").read_text() == "new"
    txn.rollback()


def test_a_rollback_never_removes_outside_the_prefix(tmp_path: Path) -> None:
    prefix = installed(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    txn = Transaction.begin(prefix)
    txn.save("../outside/victim")  # absent when saved: a rollback would remove it
    txn.save("share/x")
    (outside / "victim").write_text("someone's")
    # since, a folder on the way became a link out of the prefix
    os.symlink(outside, prefix / "share")
    (outside / "x").write_text("someone's")
    txn.rollback()
    assert (outside / "victim").read_text() == "someone's"
    assert (outside / "x").read_text() == "someone's"
