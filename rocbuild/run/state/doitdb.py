"""doit's DB as rocbuild opens it: sqlite3 in WAL mode, committed after every task, an
unreadable file set aside. rocbuild's stamps (state.py) are the record of what is built; this
module is imported only by the runs that start doit (engine.py names it as doit's backend),
so `status` and `plan` do not import doit.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from doit.dependency import DatabaseException, SqliteDB

from rocbuild.errors import notice


def set_aside_corrupt_db(path: Path) -> Path:
    """Move an unreadable DB (and its WAL files) to ``<name>.corrupt-<time>``."""
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
    return aside


class DurableSqliteDB(SqliteDB):
    """doit's sqlite3 backend in WAL mode, committed after every task, so doit's record of a
    finished task survives a SIGKILL too (docs/architecture.md, Facts; relies on doit 0.37 writing
    'deps:' last in save_success, hence the pin)."""

    desc = "sqlite3, committed after every task"

    def _sqlite3(self, name: str) -> Any:
        Path(name).parent.mkdir(parents=True, exist_ok=True)  # a fresh workdir has no state/
        try:
            return self._open_checked(name)
        except (DatabaseException, sqlite3.DatabaseError) as exc:
            # stamps are the truth (docs/architecture.md, State and stamps): a garbage DB is set
            # aside and started afresh
            aside = set_aside_corrupt_db(Path(name))
            notice(f"rocbuild: doit's DB {name} was unreadable ({exc}); moved it to {aside} "
                   "and started a new one (rocbuild's stamps keep what is built)")
            return self._open_checked(name)

    def _open_checked(self, name: str) -> Any:
        conn = super()._sqlite3(name)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA busy_timeout=10000")
        # a commit survives a SIGKILL once written to the WAL; waiting for the disk at every
        # task (FULL) cost a no-op 30 commits' fsyncs, and after a power loss the stamps
        # still say what is built (sqlite: WAL with synchronous=NORMAL stays consistent)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("select count(*) from doit").fetchone()  # a damaged page shows here
        return conn

    def _flush(self, task_id: str) -> None:
        try:
            if task_id in self._cache:
                self._conn.execute("insert or replace into doit values (?,?)",
                                   (task_id, self.codec.encode(self._cache[task_id])))
            self._conn.commit()
        except sqlite3.OperationalError as exc:  # a full disk: the stamp is the record
            notice(f"rocbuild: cannot save doit's record of {task_id} ({exc}); rocbuild's "
                   "stamps still hold it")
            return
        self._dirty.discard(task_id)

    def set(self, task_id: str, dependency: str, value: Any) -> None:
        super().set(task_id, dependency, value)
        if dependency in ("deps:", "ignore:"):
            self._flush(task_id)

    def dump(self) -> None:
        try:
            super().dump()
        except sqlite3.OperationalError as exc:  # a full disk at the end of a run
            notice(f"rocbuild: cannot save doit's DB ({exc}); rocbuild's stamps still hold "
                   "what is built")

    def remove(self, task_id: str) -> None:
        super().remove(task_id)
        self._conn.commit()
