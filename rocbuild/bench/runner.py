"""One llama-bench process per backend (and per tuning variant), run one after another.

Stopping a run (time limit or Ctrl-C) sends SIGINT to its process group, then SIGTERM, and
if it still has not exited, leaves it and says so: never SIGKILL. A GPU process killed
that way has hung amdgpu on gfx906 until a cold power cycle (docs/architecture.md, Facts), which
is why ``proc.kill_tree`` (SIGKILL after a grace period, right for build tools) is not used.
After each run the next waits until the GPU's VRAM use is back to its idle reading.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.bench import llamabench, stats
from rocbuild.bench.host import VramWait, VramWatcher
from rocbuild.bench.llamabench import BenchSettings, DeviceCheck
from rocbuild.proc import HeldStops

Echo = Callable[[str], None]
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Outcome:
    returncode: int | None  # None: still running (would not exit)
    stdout: str
    stderr: str
    seconds: float
    signals_sent: list[str] = field(default_factory=list)
    timed_out: bool = False
    pid: int | None = None

    @property
    def stuck(self) -> bool:
        return self.returncode is None


def _drain(stream: Any, sink: list[bytes]) -> None:
    sink.extend(iter(lambda: stream.read1(65536), b""))


def stop_gracefully(proc: subprocess.Popen[bytes], grace: float, sent: list[str]) -> bool:
    """SIGINT, then SIGTERM, to the run's process group, ``grace`` seconds each; True when it
    exited. No SIGKILL, whatever happens."""
    for signum in _STOP_SIGNALS:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)
            sent.append(signal.Signals(signum).name)
        try:
            proc.wait(timeout=grace)
            return True
        except subprocess.TimeoutExpired:
            continue
    return False


def run_process(argv: Sequence[str], env: Mapping[str, str], *, timeout: float, grace: float,
                on_poll: Callable[[], None] = lambda: None, poll: float = 0.25) -> Outcome:
    """Run ``argv`` in its own session, stdout and stderr kept apart (JSON vs device lines)."""
    started = time.monotonic()
    held = HeldStops()  # a Ctrl-C now would leave the program running (proc.HeldStops)
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as exc:
        held.release()
        return Outcome(127, "", f"cannot start {argv[0]}: {exc.strerror}", 0.0)
    except BaseException:
        held.release()
        raise
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True)]
    sent: list[str] = []
    timed_out = False
    try:
        for reader in readers:
            reader.start()
        held.release()
        on_poll()  # a first reading while it loads: short runs may end before the first poll
        while True:
            try:
                proc.wait(timeout=poll)
                break
            except subprocess.TimeoutExpired:
                on_poll()
                if time.monotonic() - started > timeout:
                    timed_out = True
                    stop_gracefully(proc, grace, sent)
                    break
    except KeyboardInterrupt:
        stop_gracefully(proc, grace, sent)
        raise
    finally:
        held.release()
        for reader in readers:
            if reader.is_alive():
                reader.join(timeout=1.0 if proc.poll() is not None else 0.1)
    return Outcome(proc.poll(), b"".join(out).decode("utf-8", "replace"),
                   b"".join(err).decode("utf-8", "replace"), time.monotonic() - started,
                   sent, timed_out, proc.pid)


# --- what is run -------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunSpec:
    backend: str  # hip, vulkan, cpu
    variant: str  # "" for a plain run; "baseline", "+NAME", "all tuning" with --tune
    binary: Path
    env: Mapping[str, str]

    @property
    def label(self) -> str:
        name = llamabench.LABELS[self.backend]
        return f"{name} {self.variant}" if self.variant else name


@dataclass(frozen=True)
class TestResult:
    name: str  # pp512, tg128
    summary: stats.Summary | None
    meta: Mapping[str, Any]  # the JSON's settings for this test (model_type, n_gpu_layers...)

    def to_json(self) -> dict[str, Any]:
        return {"test": self.name, **(self.summary.to_json() if self.summary else
                                      {"median_ts": None}), "llama_bench": dict(self.meta)}


OK, NO_DEVICE, FAILED, STUCK, NOT_RUN = "ok", "no device", "failed", "would not exit", "not run"
_META_KEYS = ("build_commit", "build_number", "backends", "gpu_info", "model_type",
              "model_size", "n_gpu_layers", "flash_attn", "n_batch", "n_ubatch", "n_threads",
              "n_depth", "n_prompt", "n_gen", "type_k", "type_v")


@dataclass
class BackendRun:
    spec: RunSpec
    argv: list[str]
    status: str
    detail: str = ""
    device: DeviceCheck | None = None
    tests: list[TestResult] = field(default_factory=list)
    vram_wait: VramWait | None = None
    seconds: float = 0.0
    signals_sent: list[str] = field(default_factory=list)
    pid: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.spec.backend, "variant": self.spec.variant,
                "label": self.spec.label, "status": self.status, "detail": self.detail,
                "command": self.argv, "device": self.device.to_json() if self.device else None,
                "tests": [t.to_json() for t in self.tests],
                "vram_wait_after": self.vram_wait.to_json() if self.vram_wait else None,
                "seconds": round(self.seconds, 2), "signals_sent": self.signals_sent}


def judge(spec: RunSpec, argv: list[str], outcome: Outcome) -> BackendRun:
    """Turn one process's output into a run: its device, then its figures."""
    run = BackendRun(spec, argv, OK, seconds=outcome.seconds,
                     signals_sent=outcome.signals_sent, pid=outcome.pid)
    if outcome.stuck:
        run.status = STUCK
        sent = ", ".join(outcome.signals_sent) or "no signal"
        run.detail = (f"process {outcome.pid} still running after {sent}; left alone "
                      "(SIGKILL on a GPU process can hang amdgpu); it may still hold the GPU: "
                      f"wait for it, or reboot if it stays")
        return run
    parsed = llamabench.parse_json(outcome.stdout)
    if outcome.timed_out or outcome.returncode != 0 or parsed.error:
        run.status = FAILED
        why = "time limit reached" if outcome.timed_out else f"exit {outcome.returncode}"
        tail = " | ".join(outcome.stderr.strip().splitlines()[-2:])
        run.detail = f"{why}: {parsed.error or tail or 'no output'}"
        return run
    run.device = llamabench.check_device(spec.backend, outcome.stderr, parsed.tests)
    if spec.backend != "cpu" and not run.device.found:
        run.status = NO_DEVICE
        run.detail = f"no device found: {run.device.evidence}"
        return run  # a figure from a CPU fallback must not pass for the GPU's
    for test in parsed.tests:
        run.tests.append(TestResult(llamabench.test_name(test),
                                    stats.summarize(test.get("samples_ts") or []),
                                    {k: test[k] for k in _META_KEYS if k in test}))
    return run


@dataclass(frozen=True)
class Limits:
    run_timeout: float = 3600.0
    stop_grace: float = 30.0
    poll: float = 0.25


def run_all(specs: Sequence[RunSpec], model: Path, settings: BenchSettings, *,
            limits: Limits, vram: VramWatcher | None, link_reader: Callable[[], float | None],
            echo: Echo) -> tuple[list[BackendRun], float | None]:
    """Run each spec in order; returns the runs and the fastest PCIe link speed seen while a
    GPU run was going. A run that would not exit stops the rest: the GPU is not free."""
    runs: list[BackendRun] = []
    fastest: list[float] = []

    def sample_link() -> None:
        speed = link_reader()
        if speed is not None:
            fastest.append(speed)

    if vram is not None:
        vram.start()
    for index, spec in enumerate(specs):
        argv = llamabench.bench_argv(spec.binary, model, settings, spec.backend)
        if runs and runs[-1].status == STUCK:
            runs.append(BackendRun(spec, argv, NOT_RUN, "an earlier run would not exit"))
            continue
        echo(f"+ {spec.label}: {' '.join(argv)}")
        outcome = run_process(argv, spec.env, timeout=limits.run_timeout,
                              grace=limits.stop_grace, poll=limits.poll,
                              on_poll=sample_link if spec.backend != "cpu" else lambda: None)
        run = judge(spec, argv, outcome)
        if vram is not None and run.status != STUCK and index + 1 < len(specs):
            run.vram_wait = vram.wait()
            if not run.vram_wait.reached:
                echo(f"  VRAM still in use after {run.vram_wait.seconds:.0f} s; going on")
        runs.append(run)
    return runs, max(fastest) if fastest else None
