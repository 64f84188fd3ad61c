"""Faults of the machine while rocbuild writes its own files: a full disk, a quota, a
read-only file system. Each becomes one message naming the path and what to do (exit 1),
never a traceback from deep inside json, sqlite or doit.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from rocbuild.errors import StateWriteError

_WHAT = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
         errno.EROFS: "the file system is mounted read-only"}


FULL_BYTES = 1 << 20  # less room than this left: the file system counts as the full one


def is_machine_fault(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _WHAT


def _folder_of(path: Path | str) -> str:
    """The nearest existing folder at or above ``path``: what ``df -h`` can be asked about."""
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return str(folder)


def _the_full_one(exc: OSError, near: Sequence[Path]) -> Path | None:
    """Of the folders rocbuild writes under (``near``: the workdir, the prefix), the first
    whose file system shows the fault now (no room, or mounted read-only)."""
    for path in near:
        try:
            fs = os.statvfs(_folder_of(path))
        except OSError:
            continue
        if exc.errno == errno.EROFS and fs.f_flag & os.ST_RDONLY:
            return path
        if exc.errno != errno.EROFS and fs.f_bavail * fs.f_frsize < FULL_BYTES:
            return path
    return None


def explain(exc: OSError, path: Path | str | None = None,
            near: Sequence[Path] = ()) -> StateWriteError:
    """One message for a machine fault. The path is the one given, else the one the error
    names, else the folder of ``near`` whose file system is full (or read-only) now: a write
    to an open file fails without a file name."""
    # a failed rename names its source (a temp file) first and the file meant second
    where: Path | str | None = (path or getattr(exc, "filename2", None) or exc.filename
                                or _the_full_one(exc, near))
    what = _WHAT.get(exc.errno or 0, exc.strerror or str(exc))
    look = _folder_of(where) if where else " ".join(map(_folder_of, near)) or ". /tmp"
    if exc.errno == errno.EROFS:
        fix = "remount it read-write or use a --workdir/--prefix on a writable file system"
    elif where:
        fix = f"free space on the file system of {where} (df -h {look})"
    else:
        fix = f"free space on the file system that is full (df -h {look})"
    subject = f"cannot write {where}" if where else \
        "cannot write a file (the system did not say which)"
    return StateWriteError(f"{subject}: {what}; the steps that finished are kept",
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
