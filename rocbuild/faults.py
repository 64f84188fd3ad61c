"""Faults of the machine while rocbuild writes its own files: a full disk, a quota, a
read-only file system. Each becomes one message naming the path and what to do (exit 1),
never a traceback from deep inside json, sqlite or doit.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from rocbuild.errors import StateWriteError

_WHAT = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
         errno.EROFS: "the file system is mounted read-only"}


def is_machine_fault(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _WHAT


def explain(exc: OSError, path: Path | str | None = None) -> StateWriteError:
    # a failed rename names its source (a temp file) first and the file meant second
    where = path or getattr(exc, "filename2", None) or exc.filename or "a file"
    what = _WHAT.get(exc.errno or 0, exc.strerror or str(exc))
    fix = ("remount it read-write or use a --workdir/--prefix on a writable file system"
           if exc.errno == errno.EROFS else
           f"free space on the file system of {where} (df -h {os.path.dirname(str(where))})")
    return StateWriteError(f"cannot write {where}: {what}; the steps that finished are kept",
                           tip=f"{fix}, then run the same command again")


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn a full disk or a read-only file system while writing ``path`` into one message."""
    try:
        yield
    except OSError as exc:
        if is_machine_fault(exc):
            raise explain(exc, path) from None
        raise
