"""Small file helpers every layer uses: atomic writes (temp file + fsync + rename), a reader
that opens nothing but regular files, and a JSON reader that treats a damaged file as
absent."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from rocbuild import faults


def write_text_atomic(path: Path, text: str, mode: int | None = None, *,
                      durable: bool = True) -> None:
    """Write ``path`` so that a reader (or a run after a kill) sees the old file or the new
    one, never a part: a temp file in the same folder, fsynced, then renamed over it. A full
    disk or a read-only file system is one message (faults.py). ``mode``: the file's
    permissions whatever the umask (files in the prefix are read by every user). The one
    atomic writer: state, build-info, env files, activation state and bench reports. A file
    that already holds ``text`` (a regular file, with ``mode``) is left as it is, so a no-op
    run costs no fsync. ``durable=False`` leaves out the fsync, for a record that means
    nothing after a power loss (a running step names a live process); the rename still makes
    it whole or absent."""
    if _holds(path, text, mode):
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with faults.writing(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(_new_temp(tmp), "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                if durable:
                    os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()


def _new_temp(tmp: Path) -> int:
    """A descriptor of the new file ``tmp``, never written through what is already there: a
    leftover of a killed writer with the same pid, or a link another user planted under the
    name (its pid is easy to guess) is removed first, never followed."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(tmp, flags, 0o666)  # the umask applies, as open() did
    except FileExistsError:
        remove_in_place(tmp)
        return os.open(tmp, flags, 0o666)


def stale_temps(path: Path) -> list[Path]:
    """The temp files of ``write_text_atomic(path)`` that killed writers left beside it
    (``.<name>.<pid>.tmp``). Only a caller that holds the lock every writer of ``path`` takes
    may remove them: then no writer is alive."""
    return [entry for entry in sorted(path.parent.glob(f".{path.name}.*.tmp"))
            if entry.name[len(path.name) + 2:-len(".tmp")].isdigit()]


def remove_stale_temps(path: Path) -> None:
    """Remove ``stale_temps(path)`` (a link among them is removed, never followed)."""
    for leftover in stale_temps(path):
        if leftover.is_symlink() or leftover.is_file():
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


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


def write_json_atomic(path: Path, doc: Any, *, durable: bool = True) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True), durable=durable)


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


_NOT_FOLLOWED = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# what os.open says of a link (ELOOP), a FIFO without a reader (ENXIO) or a folder (EISDIR)
_IN_THE_WAY = (errno.ELOOP, errno.ENXIO, errno.EISDIR)


def open_lock(path: Path) -> int:
    """A read-write descriptor of the lock file ``path`` (created when missing), which must
    be a regular file: a link there is never followed (root would write its pid into whatever
    file it points at) and a FIFO never waited on. Anything else raises NotRegularFile and is left
    in place: two processes replacing a lock file at once could each lock a file of their own."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _NOT_FOLLOWED, 0o644)
    except OSError as exc:
        if exc.errno not in _IN_THE_WAY:
            raise
        raise NotRegularFile(errno.EINVAL, "not a regular file", str(path)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))
    os.set_blocking(fd, True)
    return fd


def open_own(path: Path, flags: int, mode: int = 0o644) -> int:
    """A descriptor for writing ``path``, a file only rocbuild writes (a step log, a record of
    a run's process, a download in progress), opened with ``flags`` (O_WRONLY, O_APPEND,
    O_TRUNC ...) and created when missing. It is never written through a link nor opened as
    a FIFO: a link, FIFO, socket or folder in its place is removed and the file created
    afresh."""
    for attempt in (1, 2):
        try:
            fd = os.open(path, flags | os.O_CREAT | _NOT_FOLLOWED, mode)
        except OSError as exc:
            if attempt == 2 or exc.errno not in _IN_THE_WAY:
                raise
            remove_in_place(path)
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.set_blocking(fd, True)
            return fd
        os.close(fd)
        if attempt == 2:
            break
        remove_in_place(path)
    raise NotRegularFile(errno.EINVAL, "not a regular file", str(path))


def remove_in_place(path: Path) -> None:
    """Remove a file, a link or a folder (never what a link points at); absent is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def remove_empty_folders(folder: Path, stop: Path) -> None:
    """Remove ``folder`` and the folders above it while they are empty, up to (not
    including) ``stop``."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent


def parse_json(data: str | bytes) -> Any:
    """``json.loads`` whose every refusal is a ValueError: a document nested thousands of
    levels deep (the parser's RecursionError) is as damaged as a truncated one, whether it
    is a state file, a manifest or an OCI config a registry sent."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in the regular file ``path``; None when it is missing, not a regular
    file, not UTF-8, not JSON (however deep) or not an object: damaged state is "not done"."""
    try:
        doc = parse_json(read_regular(path).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
