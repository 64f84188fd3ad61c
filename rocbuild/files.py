"""Small file helpers every layer uses: atomic writes (temp file + fsync + rename), a reader
that opens nothing but regular files, and a JSON reader that treats a damaged file as
absent."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from rocbuild import faults


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``path`` so that a reader (or a run after a kill) sees the old file or the new
    one, never a part: a temp file in the same folder, fsynced, then renamed over it. A full
    disk or a read-only file system is one message (faults.py). ``mode``: the file's
    permissions whatever the umask (files in the prefix are read by every user). The one
    atomic writer: state, build-info, env files, activation state and bench reports. A file
    that already holds ``text`` (a regular file, with ``mode``) is left as it is: a no-op
    run rewrote its env files and records with an fsync each (perf/noop.py)."""
    if _holds(path, text, mode):
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with faults.writing(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _holds(path: Path, text: str, mode: int | None) -> bool:
    """``path`` is a regular file (not a link) whose content is ``text`` and, when given,
    whose permissions are ``mode``."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or (mode is not None and
                                            stat.S_IMODE(st.st_mode) != mode):
            return False
        if st.st_size != len(text.encode("utf-8")):
            return False
        return path.read_bytes() == text.encode("utf-8")
    except (OSError, UnicodeError):
        return False


def write_json_atomic(path: Path, doc: Any) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True))


class NotRegularFile(OSError):
    """A FIFO, device, socket or folder where a file was expected: never opened for reading
    (a FIFO would wait for a writer forever)."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file at ``path`` (a link to one is followed). Anything else
    raises NotRegularFile before it is read: checked before the open (a device is not even
    opened) and again on the open descriptor (O_NONBLOCK, so a FIFO swapped in between does
    not block)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
        return f.read()


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
