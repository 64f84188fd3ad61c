"""Which steps are running right now, and which run holds the workdir, for `rocbuild status`.

A build writes ``<workdir>/state/steps-running/<component>.<step>.json`` when a step starts and
removes it when the step ends. A file whose writer is gone (SIGKILL, a crash) is not a running
step: each names the rocbuild process by pid and start time, checked against the live process
table, so a reused pid never counts. The run lock's holder is found the same way, from the pid
the lock file holds and the process that has it open; nothing here takes the lock, so status
never gets in the way of a build that is starting.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rocbuild import proc
from rocbuild.errors import interrupt_cause
from rocbuild.files import read_json, read_regular
from rocbuild.model.workdir import Workdir
from rocbuild.run.state.state import write_json_atomic  # a folder in its place is replaced


@dataclass(frozen=True)
class RunningStep:
    component: str
    step: str
    pid: int
    since: float  # time.time() when the step started
    ended: str | None = None  # what interrupted it, when the run said so (Ctrl-C, SIGTERM)
    seconds: float | None = None  # how long it ran until then


def _folder(workdir: Path) -> Path:
    return Workdir.shared(workdir).steps_running


def _started(pid: int) -> float | None:
    import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@contextlib.contextmanager
def mark(workdir: Path, component: str, step: str) -> Iterator[None]:
    """Mark ``component:step`` as running in this process while the block runs."""
    path = _folder(workdir) / f"{component}.{step}.json"
    pid = os.getpid()
    since = time.time()
    record = {"component": component, "step": step, "pid": pid,
              "create_time": _started(pid), "since": since}
    # no fsync: the record names this live process, so after a power loss it means nothing
    write_json_atomic(path, record, durable=False)
    try:
        yield
    except BaseException as exc:
        if isinstance(exc, Exception):  # an error the runner reports: no longer running
            path.unlink(missing_ok=True)
            raise
        # Ctrl-C, SIGTERM: the mark stays, saying what stopped the step, so status calls it
        # interrupted as after a SIGKILL, not "not run yet"; the step's next run replaces it
        with contextlib.suppress(OSError):
            write_json_atomic(path, {**record, "ended": interrupt_cause(exc),
                                     "seconds": round(time.time() - since, 1)},
                              durable=False)
        raise
    path.unlink(missing_ok=True)


def _alive(pid: object, create_time: object) -> bool:
    if not isinstance(pid, int):
        return False
    started = _started(pid)
    return started is not None and isinstance(create_time, (int, float)) \
        and abs(started - create_time) < 1.0


def steps(workdir: Path) -> dict[tuple[str, str], RunningStep]:
    """The steps a live rocbuild process is running now, by (component, step)."""
    found: dict[tuple[str, str], RunningStep] = {}
    folder = _folder(workdir)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        doc = read_json(path)
        if not doc or doc.get("ended") or not _alive(doc.get("pid"), doc.get("create_time")):
            continue
        key = (str(doc.get("component")), str(doc.get("step")))
        found[key] = RunningStep(*key, int(doc["pid"]), float(doc.get("since") or 0))
    return found


def interrupted(workdir: Path) -> dict[tuple[str, str], RunningStep]:
    """The steps whose run was cut off: stopped by Ctrl-C, SIGTERM or SIGHUP (the mark says
    which: ``RunningStep.ended``), or marked running by a process that is gone (SIGKILL, an
    OOM kill, a crash, the machine went down). The step's next run replaces the mark."""
    found: dict[tuple[str, str], RunningStep] = {}
    folder = _folder(workdir)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        doc = read_json(path)
        if not doc or not isinstance(doc.get("pid"), int):
            continue
        ended = doc.get("ended")
        if not ended and _alive(doc.get("pid"), doc.get("create_time")):
            continue
        key = (str(doc.get("component")), str(doc.get("step")))
        seconds = doc.get("seconds")
        found[key] = RunningStep(*key, int(doc["pid"]), float(doc.get("since") or 0),
                                 str(ended) if ended else None,
                                 float(seconds) if isinstance(seconds, (int, float)) else None)
    return found


def killed_attempt(workdir: Path, component: str, step: str, log: Path) -> float | None:
    """How long the step ran in an attempt whose process was killed (SIGKILL, an OOM kill,
    the machine went down: its mark names a process that is gone and says no more), from the
    mark's start to the last write of the step's log; None when there was no such attempt.
    Read when the step starts again, before its new mark replaces the old one."""
    doc = read_json(_folder(workdir) / f"{component}.{step}.json")
    if not doc or doc.get("ended") or _alive(doc.get("pid"), doc.get("create_time")):
        return None
    since = doc.get("since")
    try:
        last = log.stat().st_mtime
    except OSError:
        return None
    return last - since if isinstance(since, (int, float)) and last > since else None


def lock_holder(workdir: Path) -> int | None:
    """The pid of the live process holding the workdir's run lock, or None. The lock file
    keeps the last holder's pid; it counts only while that process has the file open."""
    path = Workdir.shared(workdir).lock
    try:
        pid = int(read_regular(path).decode().strip() or "0")
    except (OSError, ValueError):
        return None
    if pid <= 0 or not proc.pid_exists(pid):  # the usual case: the last holder is gone
        return None
    import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

    try:
        process = psutil.Process(pid)
        real = os.path.realpath(path)
        held = any(os.path.realpath(f.path) == real for f in process.open_files())
    except psutil.Error:
        return None
    return pid if held else None
