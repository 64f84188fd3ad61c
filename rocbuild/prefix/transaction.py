"""An install into the prefix as one transaction (a cache install, run/engine/cache_install.py):
everything it replaces or removes is saved first, so a refusal, an error or a kill leaves the
prefix as it was, as dpkg keeps ``.dpkg-tmp`` copies until a package is fully unpacked.

``Transaction.begin`` makes a folder inside the prefix (``.rocbuild-unpack-<pid>-*``: the same
file system, so saving and restoring are a hard link and a rename, whatever the size). It
records the prefix's folders as they are, and a journal (JSON lines, appended before each
change) of every prefix path the install is about to write or remove: ``save(rel)`` links
the current entry (file or link) into the folder, or records that there was none. ``commit``
drops the folder; ``rollback`` puts every saved entry back, removes what was absent before
and the folders the install made, then drops the folder. A run killed in the middle leaves
the folder behind: the next run (leftovers.clean_prefix, under the prefix lock) finds its
journal and rolls it back the same way before anything else is installed.

Why hard links: a cached install writes every file through a rename (the staged file, a temp
file of an extra, an atomic JSON write), never into an existing inode, so the saved link keeps
the old bytes and mode. Where the file system has no hard links, the entry is copied.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from rocbuild.files import write_json_atomic
from rocbuild.model.paths import resolves_within, within
from rocbuild.prefix.realpaths import RealPaths

STAGING_NAME = ".rocbuild-unpack"  # leftovers.py finds killed transactions by it
JOURNAL = "journal.jsonl"
FOLDERS = "folders.json"
SAVED = "saved"

Say = Callable[[str], None]


class Transaction:
    """One install's changes to ``prefix``, undoable until ``commit``."""

    def __init__(self, prefix: Path, folder: Path) -> None:
        self.prefix, self.folder = prefix, folder
        self._saved: set[str] = set()
        self._journal: IO[str] | None = None

    @classmethod
    def begin(cls, prefix: Path) -> Transaction:
        prefix.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{STAGING_NAME}-{os.getpid()}-", dir=prefix))
        (folder / SAVED).mkdir()
        write_json_atomic(folder / FOLDERS, sorted(_folders(prefix, folder)))
        txn = cls(prefix, folder)
        txn._journal = (folder / JOURNAL).open("a", encoding="utf-8")
        return txn

    def save(self, rel: str) -> None:
        """Before ``prefix/rel`` (a real path: no link on its way) is written or removed: keep
        what is there now (a file or a link; a folder is never replaced) for a rollback."""
        if rel in self._saved:
            return
        self._saved.add(rel)
        path = self.prefix / rel
        saved = None
        if path.is_symlink() or path.is_file():
            saved = f"{len(self._saved)}"
            try:
                os.link(path, self.folder / SAVED / saved, follow_symlinks=False)
            except OSError:  # no hard links here: a copy keeps the bytes and mode as well
                if path.is_symlink():
                    os.symlink(os.readlink(path), self.folder / SAVED / saved)
                else:
                    shutil.copy2(path, self.folder / SAVED / saved)
        assert self._journal is not None
        self._journal.write(json.dumps({"rel": rel, "saved": saved}) + "\n")
        self._journal.flush()  # in the kernel before the change: a kill cannot lose it

    def save_path(self, path: Path) -> None:
        """``save`` of ``path`` (in the prefix) where it really lands; nothing when outside."""
        rel = RealPaths(self.prefix).of(os.path.relpath(path, self.prefix))
        if rel is not None:
            self.save(rel)

    def commit(self) -> None:
        self._close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def rollback(self) -> None:
        self._close()
        rollback(self.prefix, self.folder)

    def _close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None


def _folders(prefix: Path, skip: Path | None = None) -> set[str]:
    found = {""}
    for folder, dirs, _files in os.walk(prefix):  # never follows links
        if Path(folder) == prefix:
            dirs[:] = [d for d in dirs if not d.startswith(STAGING_NAME)]
        for name in dirs:
            found.add(os.path.relpath(os.path.join(folder, name), prefix))
    return found


def _entries(folder: Path) -> list[dict[str, str | None]]:
    try:
        lines = (folder / JOURNAL).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    out = []
    for line in lines:
        try:
            doc = json.loads(line)
        except (ValueError, RecursionError):  # the last line of a kill: its change never began
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rel"), str):
            out.append(doc)
    return out


def rollback(prefix: Path, folder: Path) -> int:
    """Undo the transaction recorded in ``folder`` (a live one's, or a killed run's): every
    saved entry back, every entry that was absent removed, the folders it made removed, then
    the folder itself. Returns the number of entries put back or removed."""
    undone = 0
    for doc in reversed(_entries(folder)):
        rel, saved = str(doc["rel"]), doc.get("saved")
        path = prefix / rel
        if not within(os.path.normpath(path), prefix) or path == prefix:
            continue  # a journal is rocbuild's own, but never trusted to point outside
        if not resolves_within(path.parent, prefix):
            continue  # a folder on the way became a link out of the prefix since: not there
        backup = folder / SAVED / str(saved) if saved else None
        if backup is not None and (backup.is_symlink() or backup.exists()):
            if path.is_dir() and not path.is_symlink():
                continue  # the install never puts a folder in a file's place
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(backup, path)
            undone += 1
        elif saved is None and (path.is_symlink() or path.is_file()):
            path.unlink()
            undone += 1
    before = _read_folders(folder)
    if before is not None:
        for rel in sorted(_folders(prefix) - before, key=lambda r: -r.count("/")):
            with contextlib.suppress(OSError):  # not empty: something else lives there
                (prefix / rel).rmdir()
    shutil.rmtree(folder, ignore_errors=True)
    return undone


def _read_folders(folder: Path) -> set[str] | None:
    try:
        doc = json.loads((folder / FOLDERS).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return {str(d) for d in doc} if isinstance(doc, list) else None


def recover(prefix: Path, say: Say, keep_pid: int | None = None) -> None:
    """Roll back every transaction a killed run left in ``prefix`` (call with the prefix
    lock held: no other run is installing there). ``keep_pid``: this process's own."""
    if not prefix.is_dir():
        return
    for folder in sorted(prefix.glob(STAGING_NAME + "-*")):
        if keep_pid is not None and folder.name.startswith(f"{STAGING_NAME}-{keep_pid}-"):
            continue
        if not folder.is_dir() or folder.is_symlink():
            continue
        undone = rollback(prefix, folder)
        say(f"removed an unpack folder a killed cache install left: {folder}"
            + (f" (its install undone: {undone} entries of the prefix put back as they were)"
               if undone else ""))
