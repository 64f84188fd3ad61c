"""Writing rocbuild's own files in a prefix (env.sh, env.fish, the modulefiles) without losing
what a user changed in them.

rocbuild rewrites these files at the end of every build, a no-op one too. A user who edits
``env.sh`` (an extra PATH entry, a variable of their own) would lose the edit without a word.
So every write records the sha256 of what rocbuild wrote (``.rocbuild/own-files.json``), and
the next write compares: a file that is still what rocbuild wrote is replaced; anything else
in its place (an edited file, a file rocbuild has no record of, a link or a folder) is first
moved to ``.rocbuild/kept/<time>/<path>`` and the run says where.

Why keep aside rather than stop the run: the files are written after the last install of a
night's build; stopping there would fail a finished build over a file rocbuild must rewrite
anyway for the prefix to be usable, while a kept copy loses nothing. The copy stays inside the
prefix the user edited (a workdir may be cleaned or be another machine's), in a folder no
shell and no module tool reads (a copy beside a modulefile would show as a module version).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from rocbuild.files import read_json, write_json_atomic, write_text_atomic
from rocbuild.model.layout import INFO_DIR

RECORD = Path(INFO_DIR) / "own-files.json"  # prefix-relative path -> sha256 rocbuild wrote
KEPT = Path(INFO_DIR) / "kept"

Say = Callable[[str], None]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _current(path: Path) -> str | None:
    """The sha256 of the regular file at ``path``; None when something else is there (a
    link, a folder, a FIFO: never read) or nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a folder
        os.close(fd)
        return None
    with os.fdopen(fd, "rb") as f:
        return _sha256(f.read())


def keep_aside(prefix: Path, rel: str) -> Path:
    """Move ``prefix/rel`` (whatever it is) to ``.rocbuild/kept/<time>/rel``; the new path."""
    folder = prefix / KEPT / time.strftime("%Y%m%d-%H%M%S")
    while (folder / rel).exists() or (folder / rel).is_symlink():
        folder = folder.with_name(folder.name + "-1")
    dest = folder / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(prefix / rel), str(dest))  # a rename: the same file system
    return dest


def write(prefix: Path, rel: str, text: str, mode: int, say: Say | None = None) -> Path | None:
    """Write rocbuild's file ``prefix/rel`` (atomically, ``mode``); a user's version in its
    place is kept aside first (returns where, None when there was nothing to keep)."""
    path = prefix / rel
    record = read_json(prefix / RECORD) or {}
    new = _sha256(text.encode("utf-8"))
    kept = None
    if path.exists() or path.is_symlink():
        now = _current(path) if not path.is_symlink() else None
        if now is None or (now != new and now != record.get(rel)):
            kept = keep_aside(prefix, rel)
            if say is not None:
                say(f"{path} holds changes rocbuild did not write; they are kept in {kept} "
                    f"(rocbuild writes {rel} again at every build: keep your own settings in a "
                    "file of your own that sources it)")
    write_text_atomic(path, text, mode=mode)
    if record.get(rel) != new:
        write_json_atomic(prefix / RECORD, {**record, rel: new})
    return kept
