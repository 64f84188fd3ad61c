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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from rocbuild.files import read_json, read_regular, write_json_atomic

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
        if 128 < self.returncode <= 128 + 64:
            return self.returncode - 128
        return None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class ChildRegistry:
    """The children of one run: in memory, to kill them all when the run is interrupted, and
    as files naming their process groups (when ``folder`` is set), to clean up after a crash.
    The run (its BuildContext) owns one; nothing here is module-global."""

    folder: Path | None
    _mine: set[int] = field(default_factory=set)
    _live: dict[int, Popen] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, proc: Popen, argv: Sequence[str]) -> None:
        with self._lock:
            self._live[proc.pid] = proc
        if self.folder is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

        try:
            started = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            started = time.time()
        doc = {"pid": proc.pid, "pgid": proc.pid, "argv": list(argv), "create_time": started,
               "owner": os.getpid()}
        (self.folder / f"{proc.pid}.json").write_text(json.dumps(doc))

    def remove(self, proc: Popen) -> None:
        with self._lock:
            self._live.pop(proc.pid, None)
        if self.folder is not None:
            with contextlib.suppress(FileNotFoundError):
                (self.folder / f"{proc.pid}.json").unlink()

    def live(self) -> list[Popen]:
        with self._lock:
            return list(self._live.values())

    def kill_all(self) -> None:
        """Kill every child still running (the run was interrupted; worker threads may still
        own children in their own sessions)."""
        for proc in self.live():
            kill_tree(proc)

    def reap_leftovers(self) -> list[str]:
        """Kill process groups left by a run whose rocbuild process is gone; returns what was
        killed, for the log. A recorded pid reused by an unrelated process is left alone
        (its create time differs)."""
        killed: list[str] = []
        left = sorted(self.folder.glob("*.json")) if self.folder is not None else []
        if not left:  # the usual case: the last run ended its children
            return killed
        import psutil  # loaded when a child is watched or killed (not per command: perf/noop.py)

        for file in left:
            try:
                doc = json.loads(read_regular(file).decode())
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
    """An attempt marker for a step rocbuild does itself (fetch, patch: their git commands
    write to the step log through its logger, not through run_logged's own file)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab", buffering=0) as logf:
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
        echo(f"+ {shlex.join(argv)}")
    last: collections.deque[str] = collections.deque(maxlen=tail)
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        logf: BinaryIO | None = None
        attempt = 0
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            logf = stack.enter_context(log.open("ab", buffering=0))
            attempt = write_attempt_marker(logf, log, shlex.join(argv), env, cwd)
        try:
            proc = _start(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stderr=subprocess.STDOUT, text=False)
        except OSError as exc:
            message = f"cannot start {argv[0]}: {exc.strerror}"
            if logf is not None:
                logf.write((stamped(f"exit 127: {message}") + "\n").encode())
            if on_line is not None:
                on_line(message)
            return RunResult(argv, 127, [message], 0.0, log=log)
        if registry is not None:
            registry.add(proc, argv)
        sampler = _PeakSampler(proc.pid)
        sampler.start()
        deadline = _Deadline(proc, timeout, grace) if timeout is not None else None
        if deadline is not None:
            deadline.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
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
                why = type(exc).__name__
                logf.write(("\n" + stamped(
                    f"attempt {attempt} interrupted ({why}) after "
                    f"{time.monotonic() - started:.1f}s; its process group was ended") + "\n"
                ).encode())
            raise
        finally:
            if deadline is not None:
                deadline.cancel()
            peak = sampler.stop()
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
        echo(f"+ {shlex.join(argv)}")
    try:
        proc = _start(argv, cwd=cwd, env=env,
                      stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                      stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, text=True)
    except OSError as exc:
        return Captured(127, "", f"cannot run {argv[0]}: {exc.strerror or exc}", started=False)
    if registry is not None:
        registry.add(proc, argv)
    try:
        try:
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
