"""The one way rocbuild runs a program: ``run_logged`` for steps and git, ``run_capture`` for
quick probes (version checks, ``git status``).

Both start the child in its own session (so a Ctrl-C aimed at rocbuild reaches it only through
us, and we can kill the whole group), with stdin closed, and end it the same way on interrupt
or timeout: SIGTERM to the group, a grace period, then SIGKILL (nox's habit). When a
``ChildRegistry`` is given (the run owns one), each live child is kept in it, in memory (so an
interrupted run kills every child, whatever thread started it) and in
``<workdir>/state/running/<pid>.json``, so a later run can end the leftovers of a rocbuild that
was SIGKILLed (their parent died, nothing else would stop a silent link step or a hung fetch).
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from rocbuild import files
from rocbuild.errors import interrupt_cause, redact
from rocbuild.files import parse_json, read_json, read_regular, write_json_atomic

if TYPE_CHECKING:
    import psutil

LineSink = Callable[[str], None]

Popen = subprocess.Popen[Any]


@dataclass
class RunResult:
    argv: list[str]
    returncode: int
    tail: list[str]
    seconds: float
    peak_rss: int = 0  # bytes, the largest sum of RSS over the process tree that was seen
    log: Path | None = None
    timed_out: bool = False

    @property
    def signal(self) -> int | None:
        """The signal that ended the child (negative return code, or a shell's 128+N)."""
        if self.returncode < 0:
            return -self.returncode
        return self.returncode - 128 if 128 < self.returncode <= 128 + 64 else None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


# --- sessions: what a step started, however deep (ninja puts each job in a process group of
# its own, so a group kill of `cmake --build` misses the compilers and a custom command's sh;
# none of them leaves the session rocbuild made for the step, so the session is the unit) ---

def pid_exists(pid: int) -> bool:
    """A process with this pid may exist (signal 0 checks without sending anything):
    another user's counts, and so does a pid too large to ask about, so nothing is taken
    for gone that is not proven gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _stat_of(pid: int) -> tuple[str, int, int] | None:
    """State letter, session id and start time (clock ticks after boot) of ``pid`` from
    ``/proc/<pid>/stat``; None when it is gone. Runs in the watchdog too: stdlib only."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw.rsplit(b")", 1)[-1].split()  # after the name, which may hold spaces
    try:
        return fields[0].decode(), int(fields[3]), int(fields[19])
    except (IndexError, ValueError):
        return None


def session_members(sessions: dict[int, int]) -> list[int]:
    """Live processes (zombies aside) in the sessions ``sessions`` names (session id ->
    start ticks of its leader) that started no earlier than their leader: a session id
    reused after a reboot or a pid wrap has younger members only if its new leader is young,
    and then the leader's own start time differs, which the callers check."""
    import os

    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        stat = _stat_of(int(name))
        if stat is None or stat[0] in "ZX" or stat[1] not in sessions:
            continue
        if stat[2] >= sessions[stat[1]]:
            found.append(int(name))
    return found


def end_sessions(sessions: dict[int, int], grace: float = 5.0) -> list[int]:
    """SIGTERM every process of ``sessions`` (session_members), SIGKILL what is still alive
    after ``grace`` seconds, and again for what they started meanwhile; returns the pids
    that were signalled. Runs in the watchdog too: stdlib only."""
    import os
    import signal
    import time

    ended: list[int] = []
    for round_ in range(10):  # a forking shell may start a new job while we look
        members = session_members(sessions)
        if not members:
            break
        ended += [p for p in members if p not in ended]
        sig = signal.SIGTERM if round_ == 0 else signal.SIGKILL
        for pid in members:
            try:  # noqa: SIM105 (the watchdog's copy has no contextlib import)
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + (grace if round_ == 0 else 1.0)
        while time.monotonic() < deadline and session_members(sessions):
            time.sleep(0.1)
    return ended


def _watch() -> None:
    """The watchdog's main: ``+ SID TICKS`` and ``- SID`` lines on stdin say which sessions
    rocbuild's children hold; at end of input (rocbuild exited, however: a kill -9 too) it
    ends every session still named. Ctrl-C and a hangup reach rocbuild, not this."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    sessions: dict[int, int] = {}
    for line in sys.stdin.buffer:
        words = line.split()
        try:
            if len(words) == 3 and words[0] == b"+":
                sessions[int(words[1])] = int(words[2])
            elif len(words) == 2 and words[0] == b"-":
                sessions.pop(int(words[1]), None)
        except ValueError:
            continue
    if sessions:
        end_sessions(sessions)


def _watchdog_source() -> str:
    """The watchdog as a program for ``python -I -S -c``: no import path, no site packages,
    so it starts fast and does not depend on how rocbuild was installed."""
    import inspect

    parts = [inspect.getsource(f) for f in (_stat_of, session_members, end_sessions, _watch)]
    return "from __future__ import annotations\n" + "\n".join(parts) + "\n_watch()\n"


def _start_ticks(pid: int) -> int:
    stat = _stat_of(pid)
    return stat[2] if stat is not None else 0


@dataclass
class ChildRegistry:
    """The children of one run: in memory, to kill them all when the run is interrupted, and
    as files naming their sessions (when ``folder`` is set), to clean up after a crash.
    With a folder, a watchdog process (its own session, so a kill of rocbuild's process group
    spares it) learns each child's session through a pipe and ends every session still open
    when the pipe closes: a ``kill -9`` of rocbuild stops its compile jobs, ninja's and the
    compilers' too, within seconds. The run (its BuildContext) owns one; nothing here is
    module-global."""

    folder: Path | None
    _mine: set[int] = field(default_factory=set)
    _live: dict[int, Popen] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _watchdog: Popen | None = field(default=None, repr=False)
    _ended: bool = field(default=False, repr=False)  # kill_all ran: the run is interrupted

    def _tell_watchdog(self, line: str) -> None:
        """One line to the watchdog, started on the first child; a watchdog that cannot start
        or has gone leaves the next run's reap_leftovers to do its work."""
        with self._lock:
            if self._watchdog is None:
                try:
                    self._watchdog = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", _watchdog_source()],
                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, cwd="/", start_new_session=True)
                except OSError:
                    return
            assert self._watchdog.stdin is not None
            with contextlib.suppress(OSError, ValueError):
                self._watchdog.stdin.write(line.encode())
                self._watchdog.stdin.flush()

    def close(self) -> None:
        """No child left: the watchdog is told so (its pipe closes) and goes."""
        with self._lock:
            dog, self._watchdog = self._watchdog, None
        if dog is not None and dog.stdin is not None:
            with contextlib.suppress(OSError):
                dog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                dog.wait(timeout=10)

    def add(self, proc: Popen, argv: Sequence[str]) -> None:
        with self._lock:
            self._live[proc.pid] = proc
            ended = self._ended
        if ended:  # started by a worker thread as the run's children were ended: end it too
            kill_tree(proc)
        if self.folder is None:
            return
        ticks = _start_ticks(proc.pid)
        self._tell_watchdog(f"+ {proc.pid} {ticks}\n")
        self.folder.mkdir(parents=True, exist_ok=True)
        import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

        try:
            started = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            started = time.time()
        doc = {"pid": proc.pid, "pgid": proc.pid, "sid": proc.pid, "start_ticks": ticks,
               "argv": [redact(str(a)) for a in argv], "create_time": started,
               "owner": os.getpid(), "owner_ticks": _start_ticks(os.getpid())}
        fd = files.open_own(self.folder / f"{proc.pid}.json", os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # never through a link
            f.write(json.dumps(doc))

    def remove(self, proc: Popen) -> None:
        with self._lock:
            self._live.pop(proc.pid, None)
        if self.folder is not None:
            self._tell_watchdog(f"- {proc.pid}\n")
            with contextlib.suppress(FileNotFoundError):
                (self.folder / f"{proc.pid}.json").unlink()

    def live(self) -> list[Popen]:
        with self._lock:
            return list(self._live.values())

    def kill_all(self) -> None:
        """Kill every child still running (the run was interrupted; worker threads may still
        own children in their own sessions), and each one a worker thread registers after
        this (it was starting it meanwhile: Popen had returned, add had not run)."""
        with self._lock:
            self._ended = True
            live = list(self._live.values())
        for proc in live:
            kill_tree(proc)

    def _records(self) -> list[tuple[Path, dict[str, Any] | None]]:
        left = sorted(self.folder.glob("*.json")) if self.folder is not None else []
        found: list[tuple[Path, dict[str, Any] | None]] = []
        for file in left:
            try:
                doc = parse_json(read_regular(file).decode())
                found.append((file, doc if isinstance(doc, dict) else None))
            except (OSError, ValueError):
                found.append((file, None))
        return found

    @staticmethod
    def _owner_alive(doc: dict[str, Any]) -> bool:
        owner = doc.get("owner")
        if not isinstance(owner, int) or owner == os.getpid():
            return False
        stat = _stat_of(owner)
        if stat is None or stat[0] in "ZX":
            return False
        ticks = doc.get("owner_ticks")  # a pid reused by another program is not that run
        return not isinstance(ticks, int) or ticks == 0 or ticks == stat[2]

    @staticmethod
    def _session(doc: dict[str, Any]) -> dict[int, int]:
        """The session a record names, when it is still that run's: its leader alive with the
        recorded start time, or gone (its jobs may live on: ninja's, a compiler)."""
        sid, ticks = doc.get("sid", doc.get("pid")), doc.get("start_ticks")
        if not isinstance(sid, int) or not isinstance(ticks, int) or sid <= 1:
            return {}
        stat = _stat_of(sid)
        if stat is not None and stat[2] != ticks:
            return {}  # the pid is another program's now; its session is not ours
        return {sid: ticks}

    def leftovers(self) -> list[tuple[str, list[int]]]:
        """The processes a killed run left, read only: its command and the live pids of each
        of its sessions (status names them)."""
        found = []
        for _, doc in self._records():
            if doc is None or self._owner_alive(doc):
                continue
            session = self._session(doc)
            pids = session_members(session) if session else []
            if pids:
                found.append((shlex.join(map(str, doc.get("argv") or ["?"])), pids))
        return found

    def reap_leftovers(self) -> list[str]:
        """End every process of every session left by a run whose rocbuild process is gone
        (the step's own and what it started: ninja's jobs live in process groups of their
        own, but in the step's session); returns what was ended, for the log. A recorded pid
        reused by an unrelated process is left alone (its start time differs)."""
        killed: list[str] = []
        for file, doc in self._records():
            if doc is not None and self._owner_alive(doc):
                continue  # that run is still alive (the run lock should prevent this)
            session = self._session(doc) if doc is not None else {}
            if session and end_sessions(session, grace=2.0):
                killed.append(shlex.join(map(str, doc.get("argv") or ["?"])) if doc else "?")
            file.unlink(missing_ok=True)
        return killed


def _descendants(proc: Popen) -> list[psutil.Process]:
    import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

    try:
        return psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        return []


def _signal_tree(proc: Popen, kids: Sequence[psutil.Process], signum: int) -> None:
    """``signum`` to the child's process group and to any descendant that left it."""
    import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signum)
    for kid in kids:
        with contextlib.suppress(psutil.Error):
            kid.send_signal(signum)


def kill_tree(proc: Popen, grace: float = 5.0) -> None:
    """SIGTERM the child's process group and any descendant that left it, then SIGKILL what
    is still alive after ``grace`` seconds."""
    import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

    kids = _descendants(proc)
    _signal_tree(proc, kids, signal.SIGTERM)
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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class HeldStops:
    """Ctrl-C, SIGTERM and SIGHUP held back while a child is started and registered, and
    acted on at ``release``, once the caller knows the child and ends it with itself: a
    KeyboardInterrupt raised inside subprocess.Popen right after the fork, before it returns
    the child (``self.pid = _fork_exec(...)``), would end rocbuild and leave the child running.
    Only the main thread runs Python's signal handlers, so only it holds them."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                handler = signal.getsignal(signum)
                if handler is not None:  # one set outside Python could not be put back
                    self._previous[signum] = signal.signal(signum, self._hold)

    def _hold(self, signum: int, frame: object) -> None:
        self.held.append(signum)

    def release(self) -> None:
        """The handlers back; a signal that came meanwhile is raised again now, so its
        handler (KeyboardInterrupt: the caller ends the child) acts here. Idempotent."""
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        held, self.held = self.held, []
        for signum in dict.fromkeys(held):
            signal.raise_signal(signum)


def _start(argv: Sequence[str], *, cwd: Path | None, env: Mapping[str, str] | None,
           stdin: int, stderr: int, text: bool) -> Popen:
    return subprocess.Popen(list(argv), cwd=cwd, env=dict(env) if env is not None else None,
                            stdin=stdin, stdout=subprocess.PIPE, stderr=stderr,
                            start_new_session=True, text=text,
                            errors="replace" if text else None)


class _PeakSampler(threading.Thread):
    """Samples the RSS of a process tree every ``interval`` seconds (peak memory per step)."""

    def __init__(self, pid: int, interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

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
# a command's exit line, an interrupt's, and the runner's own last line of a step (STEP_END)
STEP_END = "step ended:"
_END_MARKS = (b"\n# exit ", b"] exit ", b" interrupted", f"] {STEP_END} ".encode())


def now_stamp() -> str:
    """Local time with the UTC offset, to the second: log lines of an overnight run sort and
    compare across days and hosts."""
    return time.strftime("%Y-%m-%d %H:%M:%S %z")


def clock() -> str:
    """Local time of day, for console lines."""
    return time.strftime("%H:%M:%S")


def stamped(text: str) -> str:
    """Each line of ``text`` with the time in front, as rocbuild's own log lines carry it
    (and a URL's password taken out: errors.redact)."""
    stamp = f"[{now_stamp()}]"
    return "\n".join(f"{stamp} {line}" for line in redact(text).splitlines() or [""])


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
    what = redact(what)  # a URL's password stays out of the log (errors.redact)
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


def open_log(log: Path) -> BinaryIO:
    """The step log ``log`` opened to append, unbuffered; a link or FIFO in its place is
    replaced, never written through (files.open_own)."""
    fd = files.open_own(log, os.O_WRONLY | os.O_APPEND)
    return os.fdopen(fd, "ab", buffering=0)


def log_attempt(log: Path, what: str) -> None:
    """An attempt marker for a step rocbuild does itself (fetch, patch: their git commands
    write to the step log through its logger, not through run_logged's own file)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open_log(log) as logf:
        write_attempt_marker(logf, log, what)


class _Deadline(threading.Thread):
    """Kills the child's group when ``timeout`` seconds pass before ``cancel``."""

    def __init__(self, proc: Popen, timeout: float, grace: float) -> None:
        super().__init__(daemon=True)
        self.proc, self.timeout, self.grace = proc, timeout, grace
        self.fired = False
        self._done = threading.Event()

    def run(self) -> None:
        if not self._done.wait(self.timeout):
            self.fired = True
            kill_tree(self.proc, self.grace)

    def cancel(self) -> None:
        self._done.set()


def run_logged(argv: Sequence[str], *, log: Path | None = None, cwd: Path | None = None,
               env: Mapping[str, str] | None = None, on_line: LineSink | None = None,
               tail: int = 60, registry: ChildRegistry | None = None,
               echo: LineSink | None = None, timeout: float | None = None,
               grace: float = 5.0) -> RunResult:
    """Run ``argv`` with output appended to ``log`` and passed line by line to ``on_line``
    (the sink: a caller that writes its own log, like the fetch step, passes only this).
    With a log, each run starts with an attempt marker (write_attempt_marker) and ends with a
    timestamped exit line, or says it was interrupted. Memory stays small however long the
    log grows. ``echo`` gets ``+ command`` first (a plain console shows what runs). After
    ``timeout`` seconds the group is killed and the result has ``timed_out``.
    KeyboardInterrupt or SystemExit kills the whole process group, then propagates."""
    argv = [str(a) for a in argv]
    if echo is not None:
        echo(redact(f"+ {shlex.join(argv)}"))
    last: collections.deque[str] = collections.deque(maxlen=tail)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        logf: BinaryIO | None = None
        attempt = 0
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            logf = stack.enter_context(open_log(log))
            attempt = write_attempt_marker(logf, log, shlex.join(argv), env, cwd)
        held = HeldStops()  # until the child is registered and watched (HeldStops)
        try:
            proc = _start(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT, text=False)
        except OSError as exc:
            held.release()
            message = f"cannot start {redact(argv[0])}: {exc.strerror}"
            if logf is not None:
                logf.write((stamped(f"exit 127: {message}") + "\n").encode())
            if on_line is not None:
                on_line(message)
            return RunResult(argv, 127, [message], 0.0, log=log)
        except BaseException:
            held.release()
            raise
        sampler: _PeakSampler | None = None
        deadline: _Deadline | None = None
        try:
            if registry is not None:
                registry.add(proc, argv)
            sampler = _PeakSampler(proc.pid)
            sampler.start()
            deadline = _Deadline(proc, timeout, grace) if timeout is not None else None
            if deadline is not None:
                deadline.start()
            held.release()  # a stop signal that came meanwhile acts here: the child is ended
            assert proc.stdout is not None
            for raw in proc.stdout:
                if b"://" in raw and b"@" in raw:  # git may echo the URL it was given
                    raw = redact(raw.decode("utf-8", "surrogateescape")).encode(
                        "utf-8", "surrogateescape")
                if logf is not None:
                    logf.write(raw)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                last.append(line)
                if on_line is not None:
                    on_line(line)
            returncode = proc.wait()
        except BaseException as exc:
            kill_tree(proc, grace)
            if logf is not None:
                logf.write(("\n" + stamped(
                    f"attempt {attempt} interrupted by {interrupt_cause(exc)} after "
                    f"{time.monotonic() - started:.1f}s; its process group was ended") + "\n"
                ).encode())
            raise
        finally:
            held.release()
            if deadline is not None:
                deadline.cancel()
            peak = sampler.stop() if sampler is not None else 0
            if registry is not None:
                registry.remove(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        seconds = time.monotonic() - started
        if logf is not None:
            logf.write((stamped(f"exit {returncode} after {seconds:.1f}s") + "\n").encode())
    timed_out = deadline is not None and deadline.fired
    return RunResult(argv, returncode, list(last), seconds, peak, log, timed_out)


@dataclass(frozen=True)
class Captured:
    """What a quick probe printed, always (as ``run_logged``'s RunResult): ``timed_out`` when
    it was killed at its timeout (``returncode`` is then the signal's, negative), not
    ``started`` when it could not start (``returncode`` 127, why in ``stderr``)."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    started: bool = True

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def answered(self) -> bool:
        """It ran to its end (its exit code, ``ok`` or not, is the program's answer)."""
        return self.started and not self.timed_out


def run_capture(argv: Sequence[str], *, timeout: float | None = 30.0, cwd: Path | None = None,
                env: Mapping[str, str] | None = None, input: str | None = None,
                merge_stderr: bool = False, registry: ChildRegistry | None = None,
                echo: LineSink | None = None, grace: float = 5.0) -> Captured:
    """Run a short command and keep its output in memory (version checks, ``git status``):
    same session and kill rules as ``run_logged``. A program that cannot start gives a
    Captured that is not ``started``. On timeout the group gets SIGTERM, ``grace`` seconds to
    go (its output still read), then SIGKILL; the result is ``timed_out`` with what it
    printed until then."""
    argv = [str(a) for a in argv]
    if echo is not None:
        echo(redact(f"+ {shlex.join(argv)}"))
    held = HeldStops()  # until the child is registered (HeldStops)
    try:
        proc = _start(argv, cwd=cwd, env=env,
                      stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                      stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, text=True)
    except OSError as exc:
        held.release()
        return Captured(127, "", f"cannot run {argv[0]}: {exc.strerror or exc}", started=False)
    except BaseException:
        held.release()
        raise
    try:
        try:
            if registry is not None:
                registry.add(proc, argv)
            held.release()  # a stop signal that came meanwhile acts here: the child is ended
            out, err = proc.communicate(input, timeout=timeout)
            return Captured(proc.returncode, out or "", err or "")
        except subprocess.TimeoutExpired:
            kids = _descendants(proc)
            _signal_tree(proc, kids, signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=grace)
            except subprocess.TimeoutExpired:
                _signal_tree(proc, _descendants(proc) or kids, signal.SIGKILL)
                out, err = proc.communicate()
            return Captured(proc.returncode, out or "", err or "", timed_out=True)
    except BaseException:
        kill_tree(proc, grace)
        raise
    finally:
        held.release()
        if registry is not None:
            registry.remove(proc)


def _file_key(path: str) -> list[Any] | None:
    """What identifies a program or data file's content without reading it: its resolved
    path, size, mtime and inode (an upgrade or an update-alternatives switch changes one)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_size, st.st_mtime_ns, st.st_ino]


def run_probe(argv: Sequence[str], *, memo: Path | None, reads: Sequence[Path] = (),
              timeout: float = 30.0) -> Captured:
    """``run_capture`` for a read-only probe whose answer depends only on the program (an
    absolute path) and the files in ``reads`` (dpkg-query: its status database): the answer
    is kept in the JSON file ``memo``, keyed by the command line and each file's
    ``_file_key``, and given again while none of them changed, so a rerun does not start
    `cmake --version` and friends once more (perf/noop.py). ``memo`` is written only where its
    folder exists (a `plan` of a fresh workdir creates nothing); a probe that could not
    start or timed out is not kept."""
    argv = [str(a) for a in argv]
    if memo is None or not os.path.isabs(argv[0]):
        return run_capture(argv, timeout=timeout)
    files = [_file_key(p) for p in (argv[0], *map(str, reads))]
    if None in files:
        return run_capture(argv, timeout=timeout)
    command = shlex.join(argv)
    kept = read_json(memo) or {}
    answer = kept.get(command)
    if isinstance(answer, dict) and answer.get("files") == files:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            return Captured(int(answer["returncode"]), str(answer["stdout"]),
                            str(answer["stderr"]))
    done = run_capture(argv, timeout=timeout)
    if done.answered and memo.parent.is_dir():
        kept[command] = {"files": files, "returncode": done.returncode, "stdout": done.stdout,
                         "stderr": done.stderr}
        with contextlib.suppress(OSError):  # a full disk costs the next run one probe
            write_json_atomic(memo, kept)
    return done


def run_interactive(argv: Sequence[str]) -> int:
    """Run a program the user works in (``$EDITOR``) on this terminal and wait for it: it
    inherits stdin, stdout and the foreground, so it is not a child of a run (nothing to
    reap or log) and Ctrl-C reaches it as usual. Returns its exit code."""
    return subprocess.run([str(a) for a in argv], check=False).returncode
