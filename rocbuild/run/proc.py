"""Run one argv: stream its output to a log file, keep only a tail, kill its process group.

Children start in their own session (so a Ctrl-C aimed at rocbuild reaches them only through
us, and we can kill the whole group), with stdin closed. Each live child is registered in
memory and in ``<workdir>/state/running/<pid>.json``, so a later run can end the leftovers of a
rocbuild that was SIGKILLed (their parent died, nothing else would stop a silent link step).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import psutil

LineSink = Callable[[str], None]

_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


@dataclass
class RunResult:
    argv: list[str]
    returncode: int
    tail: list[str]
    seconds: float
    peak_rss: int = 0  # bytes, the largest sum of RSS over the process tree that was seen
    log: Path | None = None

    @property
    def signal(self) -> int | None:
        """The signal that ended the child (negative return code, or a shell's 128+N)."""
        if self.returncode < 0:
            return -self.returncode
        if 128 < self.returncode <= 128 + 64:
            return self.returncode - 128
        return None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class ChildRegistry:
    """Files naming the process groups this workdir's runs started, to clean up after a crash."""

    folder: Path
    _mine: set[int] = field(default_factory=set)

    def add(self, proc: subprocess.Popen[bytes], argv: Sequence[str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            started = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            started = time.time()
        doc = {"pid": proc.pid, "pgid": proc.pid, "argv": list(argv), "create_time": started,
               "owner": os.getpid()}
        (self.folder / f"{proc.pid}.json").write_text(json.dumps(doc))

    def remove(self, proc: subprocess.Popen[bytes]) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.folder / f"{proc.pid}.json").unlink()

    def reap_leftovers(self) -> list[str]:
        """Kill process groups left by a run whose rocbuild process is gone; returns what was
        killed, for the log. A recorded pid reused by an unrelated process is left alone
        (its create time differs)."""
        killed = []
        for file in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                doc = json.loads(file.read_text())
            except (OSError, ValueError):
                file.unlink(missing_ok=True)
                continue
            if psutil.pid_exists(doc.get("owner", -1)) and doc.get("owner") != os.getpid():
                continue  # that run is still alive (the run lock should prevent this)
            try:
                leader = psutil.Process(doc["pid"])
                if abs(leader.create_time() - doc["create_time"]) < 1.0:
                    os.killpg(doc["pgid"], signal.SIGKILL)
                    killed.append(shlex.join(doc["argv"]))
            except (psutil.Error, ProcessLookupError, PermissionError, KeyError):
                pass
            file.unlink(missing_ok=True)
        return killed


def kill_tree(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """SIGTERM the child's process group and any descendant that left it, then SIGKILL what
    is still alive after ``grace`` seconds."""
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    for kid in kids:
        with contextlib.suppress(psutil.Error):
            kid.terminate()
    _, alive = psutil.wait_procs(kids, timeout=grace)
    for kid in alive:
        with contextlib.suppress(psutil.Error):
            kid.kill()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def kill_all_live() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:
        kill_tree(proc)


class _PeakSampler(threading.Thread):
    """Samples the RSS of a process tree every ``interval`` seconds (peak memory per step)."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop_event.wait(self.interval):
            total = 0
            try:
                for p in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        total += p.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._stop_event.set()
        return self.peak


ATTEMPT_MARK = "=== attempt "
_END_MARKS = (b"\n# exit ", b"] exit ", b" interrupted")


def now_stamp() -> str:
    """Local time with the UTC offset, to the second: log lines of an overnight run sort and
    compare across days and hosts."""
    return time.strftime("%Y-%m-%d %H:%M:%S %z")


def clock() -> str:
    """Local time of day, for console lines."""
    return time.strftime("%H:%M:%S")


def stamped(text: str) -> str:
    """Each line of ``text`` with the time in front, as rocbuild's own log lines carry it."""
    stamp = f"[{now_stamp()}]"
    return "\n".join(f"{stamp} {line}" for line in text.splitlines() or [""])


def _previous_attempts(log: Path) -> tuple[int, bool]:
    """How many attempts the log holds and whether the last one has an end line (exit or
    interrupted); read in chunks, since a compile log can be large."""
    count, last_mark, last_end, offset, carry = 0, -1, -1, 0, b""
    mark = ("\n" + ATTEMPT_MARK).encode()
    try:
        with log.open("rb") as f:
            while chunk := f.read(1 << 20):
                data = carry + chunk
                base = offset - len(carry)
                count += data.count(mark) - carry.count(mark)
                if (i := data.rfind(mark)) >= 0:
                    last_mark = max(last_mark, base + i)
                for end in _END_MARKS:
                    if (i := data.rfind(end)) >= 0:
                        last_end = max(last_end, base + i)
                offset += len(chunk)
                carry = data[-64:]
    except OSError:
        return 0, True
    return count, count == 0 or last_end > last_mark


def env_changes(env: Mapping[str, str] | None) -> list[str]:
    """The variables a child's environment sets differently from rocbuild's own."""
    if env is None:
        return []
    mine = os.environ
    changed = [f"{k}={v}" for k, v in sorted(env.items()) if mine.get(k) != v]
    return changed + [f"-{k} (unset)" for k in sorted(mine) if k not in env]


def write_attempt_marker(logf: BinaryIO, log: Path, what: str,
                         env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start an attempt in a step log: time, attempt number, the command and the environment
    it runs with. Returns the attempt number. A previous attempt without an end line was cut
    off (rocbuild killed, the host rebooted), and the marker says so."""
    count, ended = _previous_attempts(log)
    number = count + 1
    lines = [f"\n{ATTEMPT_MARK}{number} · {now_stamp()} ===",
             *([] if ended else [f"# attempt {count} has no end line: rocbuild was stopped "
                                 "while it ran (killed, or the machine went down)"]),
             f"$ {what}"]
    if cwd:
        lines.append(f"# in {cwd}")
    changes = env_changes(env)
    lines += [f"# env {c}" for c in changes] or ["# env: rocbuild's own, unchanged"]
    logf.write(("\n".join(lines) + "\n").encode())
    return number


def log_attempt(log: Path, what: str) -> None:
    """An attempt marker for a step rocbuild does itself (fetch, patch through gitpython)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab", buffering=0) as logf:
        write_attempt_marker(logf, log, what)


def run_logged(argv: Sequence[str], *, log: Path, cwd: Path | None = None,
               env: Mapping[str, str] | None = None, on_line: LineSink | None = None,
               tail: int = 60, registry: ChildRegistry | None = None) -> RunResult:
    """Run ``argv`` with output appended to ``log`` and passed line by line to ``on_line``.
    Each run starts with an attempt marker (write_attempt_marker) and ends with a timestamped
    exit line, or says it was interrupted. Memory stays small however long the log grows.
    KeyboardInterrupt or SystemExit kills the whole process group, then propagates."""
    argv = [str(a) for a in argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    last: collections.deque[str] = collections.deque(maxlen=tail)
    started = time.monotonic()
    with log.open("ab", buffering=0) as logf:
        attempt = write_attempt_marker(logf, log, shlex.join(argv), env, cwd)
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=dict(env) if env is not None else None,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            message = f"cannot start {argv[0]}: {exc.strerror}"
            logf.write((stamped(f"exit 127: {message}") + "\n").encode())
            return RunResult(argv, 127, [message], 0.0, log=log)
        with _LIVE_LOCK:
            _LIVE.add(proc)
        if registry is not None:
            registry.add(proc, argv)
        sampler = _PeakSampler(proc.pid)
        sampler.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                logf.write(raw)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                last.append(line)
                if on_line is not None:
                    on_line(line)
            returncode = proc.wait()
        except BaseException as exc:
            kill_tree(proc)
            why = type(exc).__name__
            logf.write(("\n" + stamped(
                f"attempt {attempt} interrupted ({why}) after "
                f"{time.monotonic() - started:.1f}s; its process group was ended") + "\n"
            ).encode())
            raise
        finally:
            peak = sampler.stop()
            with _LIVE_LOCK:
                _LIVE.discard(proc)
            if registry is not None:
                registry.remove(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        seconds = time.monotonic() - started
        logf.write((stamped(f"exit {returncode} after {seconds:.1f}s") + "\n").encode())
    return RunResult(argv, returncode, list(last), seconds, peak, log)
