"""What a folder holds, entry by entry, for tests that compare a prefix before and after (a
refused cache install, a served prefix against a built one)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

Entry = tuple[str, int, str]  # (type, mode, sha256 or link target)


def tree(root: Path, skip: tuple[str, ...] = ()) -> dict[str, Entry]:
    """path -> (type, mode, sha256 or link target) of every entry under ``root`` (links not
    followed), leaving out the relative paths that start with one of ``skip``."""
    out: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if skip and rel.startswith(skip):
                continue
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), "")
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode),
                            hashlib.sha256(path.read_bytes()).hexdigest())
    return out
