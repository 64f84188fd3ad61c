"""What is built: per-step stamps (atomic JSON), the run lock, and doit's crash-safe DB.

A stamp is written only after its step succeeded, by temp file + rename, so a SIGKILL or an
OOM kill of rocbuild never leaves a half-written one; a step is current when its stamp holds
the fingerprint the step would have now. doit's own DB is written only when a run ends
(reference/doit-notes.md A3), so nothing here relies on it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doit.dependency import SqliteDB

from rocbuild.errors import BusyError


def write_json_atomic(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True)
class StateDir:
    """``<workdir>/state``: stamps, failures, the lock and doit's DB."""

    workdir: Path

    @property
    def root(self) -> Path:
        return self.workdir / "state"

    def stamp_path(self, component: str, step: str) -> Path:
        return self.root / "stamps" / component / f"{step}.json"

    def read_stamp(self, component: str, step: str) -> dict[str, Any] | None:
        return read_json(self.stamp_path(component, step))

    def write_stamp(self, component: str, step: str, fingerprint: str, **extra: Any) -> None:
        doc = {"fingerprint": fingerprint, "finished": time.time(), **extra}
        write_json_atomic(self.stamp_path(component, step), doc)
        with contextlib.suppress(FileNotFoundError):
            self.failure_path(component).unlink()

    def stamp_matches(self, component: str, step: str, fingerprint: str) -> bool:
        stamp = self.read_stamp(component, step)
        return stamp is not None and stamp.get("fingerprint") == fingerprint

    def failure_path(self, component: str) -> Path:
        return self.root / "failures" / f"{component}.json"

    def record_failure(self, component: str, step: str, **details: Any) -> None:
        write_json_atomic(self.failure_path(component),
                          {"step": step, "when": time.time(), **details})

    def read_failure(self, component: str) -> dict[str, Any] | None:
        return read_json(self.failure_path(component))

    @property
    def running_dir(self) -> Path:
        return self.root / "running"

    @property
    def doit_db(self) -> Path:
        return self.root / "doit.sqlite"

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold ``<workdir>/state/lock`` for a run. A second build on the same workdir gets a
        BusyError naming the pid that holds it. The kernel drops the lock when the holder
        dies, even by SIGKILL, so a stale lock never blocks the morning rerun."""
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
                raise BusyError(
                    f"another rocbuild run (pid {holder}) is using the workdir {self.workdir}",
                    tip="wait for it to finish (see `rocbuild status`), or use another --workdir",
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
            yield
        finally:
            os.close(fd)  # closing releases the flock


class DurableSqliteDB(SqliteDB):
    """doit's sqlite3 backend in WAL mode, committed after every task, so doit's record of a
    finished task survives a SIGKILL too (doit-notes A3.4; relies on doit 0.37 writing
    'deps:' last in save_success, hence the pin)."""

    desc = "sqlite3, committed after every task"

    def _sqlite3(self, name: str) -> Any:
        Path(name).parent.mkdir(parents=True, exist_ok=True)  # a fresh workdir has no state/
        conn = super()._sqlite3(name)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn

    def _flush(self, task_id: str) -> None:
        if task_id in self._cache:
            self._conn.execute("insert or replace into doit values (?,?)",
                               (task_id, self.codec.encode(self._cache[task_id])))
        self._conn.commit()
        self._dirty.discard(task_id)

    def set(self, task_id: str, dependency: str, value: Any) -> None:
        super().set(task_id, dependency, value)
        if dependency in ("deps:", "ignore:"):
            self._flush(task_id)

    def remove(self, task_id: str) -> None:
        super().remove(task_id)
        self._conn.commit()
