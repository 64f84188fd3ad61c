"""What is built: per-step stamps (atomic JSON) and the run lock (doit's crash-safe DB is
doitdb.py's: `rocbuild status` reads stamps and must not import doit).

A stamp is written only after its step succeeded, by temp file + rename, so a SIGKILL or an
OOM kill of rocbuild never leaves a half-written one; a step is current when its stamp holds
the fingerprint the step would have now. doit's own DB is written only when a run ends
(docs/architecture.md, State and stamps), so nothing here relies on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild import files
from rocbuild.errors import BusyError, ConfigError
from rocbuild.files import read_json
from rocbuild.model.graph import Stack
from rocbuild.model.workdir import Workdir


def _clear_folder(path: Path) -> None:
    """A folder (not a link) where a file of rocbuild's state should be is removed: the
    workdir's state is rocbuild's own, written under the run lock, and the atomic rename
    cannot replace a folder (IsADirectoryError)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """files.write_text_atomic for a file of the workdir's state: a folder in its place is
    replaced."""
    _clear_folder(path)
    files.write_text_atomic(path, text, mode)


def write_json_atomic(path: Path, doc: Any, *, durable: bool = True) -> None:
    _clear_folder(path)
    files.write_json_atomic(path, doc, durable=durable)


def remove_state_file(path: Path) -> None:
    """Remove a file of the workdir's state (a folder in its place too); absent is fine."""
    files.remove_in_place(path)


@dataclass(frozen=True)
class StateDir:
    """The state of one configuration of a workdir (model/workdir.py says which parts are
    shared and which its own): stamps, failures, the lock and doit's DB."""

    work: Workdir

    @classmethod
    def of(cls, stack: Stack) -> StateDir:
        return cls(stack.work)

    @classmethod
    def shared(cls, workdir: Path) -> StateDir:
        """The workdir's shared state (and that of the configuration kept in the workdir
        itself, the first one it built)."""
        return cls(Workdir.shared(workdir))

    def stamp_path(self, component: str, step: str) -> Path:
        return self.work.stamp(component, step)

    def read_stamp(self, component: str, step: str) -> dict[str, Any] | None:
        return read_json(self.stamp_path(component, step))

    def write_stamp(self, component: str, step: str, fingerprint: str, **extra: Any) -> None:
        doc = {"fingerprint": fingerprint, "finished": time.time(), **extra}
        write_json_atomic(self.stamp_path(component, step), doc)
        remove_state_file(self.work.failure(component))
        remove_state_file(self.work.attempts(component, step))  # counted in the stamp

    def add_attempt(self, component: str, step: str, seconds: float) -> None:
        """An attempt of the step ended without success (failed, interrupted, or killed, as
        the next run finds): its time counts in the step's total once it succeeds."""
        before, count = self.attempts_before(component, step)
        write_json_atomic(self.work.attempts(component, step),
                          {"seconds": round(before + max(seconds, 0.0), 1),
                           "attempts": count + 1}, durable=False)

    def attempts_before(self, component: str, step: str) -> tuple[float, int]:
        """(seconds, count) of the attempts since the step's last success."""
        doc = read_json(self.work.attempts(component, step)) or {}
        seconds, count = doc.get("seconds"), doc.get("attempts")
        return (float(seconds) if isinstance(seconds, (int, float)) else 0.0,
                count if isinstance(count, int) else 0)

    def stamp_matches(self, component: str, step: str, fingerprint: str) -> bool:
        stamp = self.read_stamp(component, step)
        return stamp is not None and stamp.get("fingerprint") == fingerprint

    def record_failure(self, component: str, step: str, **details: Any) -> None:
        write_json_atomic(self.work.failure(component),
                          {"step": step, "when": time.time(), **details})

    def read_failure(self, component: str) -> dict[str, Any] | None:
        return read_json(self.work.failure(component))

    def failed_units(self) -> list[str]:
        """Every component (or run-wide step folder) with a failure on record, by name."""
        folder = self.work.failures
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``<workdir>/state/lock`` for a run. A second build on the same workdir gets a
        BusyError naming the pid that holds it. The kernel drops the lock when the holder
        dies, even by SIGKILL, so a stale lock never blocks the morning rerun."""
        path = self.work.lock
        try:
            self.work.state.mkdir(parents=True, exist_ok=True)
            fd = open_lock_file(path)
        except (PermissionError, NotADirectoryError, FileNotFoundError) as exc:
            raise ConfigError(f"cannot use the workdir {self.work.root}: {exc.strerror} "
                              f"({exc.filename or path})",
                              tip="give a --workdir this user can write to") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
                raise BusyError(
                    f"another rocbuild run (pid {holder}) is using the workdir {self.work.root}",
                    tip="wait for it to finish (see `rocbuild status`), or use another --workdir",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the flock


def open_lock_file(path: Path) -> int:
    """files.open_lock, with a link, FIFO or folder in the lock's place as one message naming
    the path (ConfigError, exit 2): rocbuild never writes through it."""
    try:
        return files.open_lock(path)
    except files.NotRegularFile:
        raise ConfigError(f"{path} is not a regular file (a link, a FIFO or a folder is in "
                          "the place of rocbuild's run lock); rocbuild never writes through it",
                          tip=f"remove {path} (no rocbuild run is using it), then run the "
                              "same command again") from None


def _flock_holder(path: Path) -> str | None:
    """Which process holds a flock on ``path``, from /proc/locks (nothing is written to the
    locked folder, so this is how a second run learns who is installing)."""
    try:
        inode = path.stat().st_ino
        locks = Path("/proc/locks").read_text()
    except OSError:
        return None
    for line in locks.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5].endswith(f":{inode}"):
            pid = fields[4]
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                return f"pid {pid}"
            return f"pid {pid}: {cmdline.decode(errors='replace').strip()}"
    return None


def installing_now(prefix: Path) -> str | None:
    """The run that holds the prefix's lock now (it is installing into it), as
    ``pid N: command``; None when no run does (`rocbuild list` of a prefix being built)."""
    return _flock_holder(prefix) if prefix.is_dir() else None


@contextlib.contextmanager
def prefix_lock(prefix: Path, *, create: bool = True) -> Iterator[bool]:
    """Hold a lock on the install prefix for a run, so two runs from different workdirs never
    install into one prefix at once. The lock is a flock on the prefix folder itself: nothing
    is written into a prefix the user may not have approved yet. Yields False (no lock) when
    the prefix cannot be created (or, with ``create=False``, does not exist); preflight then
    refuses the run with the fix. A folder it created is removed again at the end while it
    is still empty (a run that preflight refused, or `cache push` with nothing to push,
    leaves no empty prefix behind), with the folders above it that it created."""
    created: list[Path] = []
    try:
        if create:
            created = [p for p in (prefix, *prefix.parents) if not p.exists()]
            prefix.mkdir(parents=True, exist_ok=True)
        fd = os.open(prefix, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _flock_holder(prefix) or "another process"
            raise BusyError(f"another rocbuild run ({holder}) is installing into {prefix}",
                            tip="wait for it to finish and run the same command again, or "
                                "use another --prefix") from None
        yield True
    finally:
        os.close(fd)
        for folder in created:  # nearest first; rmdir removes only an empty folder
            try:
                folder.rmdir()
            except OSError:
                break
