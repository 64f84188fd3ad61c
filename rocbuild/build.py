"""Running the steps of a component: fingerprints, up-to-date checks and the step actions.

tasks.py turns these into doit tasks; this module knows nothing of doit. Every step reads
what it needs from a BuildContext, writes one log ``<workdir>/logs/<component>/<step>.log``,
and on success writes its stamp last (state.py), so a kill at any moment loses nothing that
had finished and never marks unfinished work done.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rocbuild import launchers, leftovers, ownership, patches, proc, resources, running, sources
from rocbuild.diagnose import diagnose
from rocbuild.errors import BuildFailed
from rocbuild.graph import Component, Stack, sha256_text, venv_dir
from rocbuild.lint import unused_cmake_variables
from rocbuild.resources import GIB
from rocbuild.settings import Settings
from rocbuild.state import (
    StateDir,
    prefix_lock,
    read_json,
    write_json_atomic,
    write_text_atomic,
)
from rocbuild.steps import build_argv, configure_argv, install_argv, step_env, venv_commands
from rocbuild.uptodate import BUILD_ID_FILE, Rule, build_id

MEMORY_DIAGNOSES = ("oom-killed", "tensile-oom")


def died_of_memory(tail: list[str], oom_after: int | None, oom_before: int | None) -> bool:
    """A step died of memory: the cgroup's OOM-kill count rose, or the log ends the way a
    compiler, linker or Tensile ends when the kernel kills it (diagnose.py's patterns)."""
    if oom_after is not None and oom_before is not None and oom_after > oom_before:
        return True
    found = diagnose(tail)
    return found is not None and found.id in MEMORY_DIAGNOSES


def fresh_cache(build_dir: Path) -> list[str]:
    """Forget what an earlier configure decided, so an option removed from a recipe gets its
    default again instead of lingering in CMakeCache.txt. Keeps the object files: with Ninja
    they live in CMakeFiles/<target>.dir/, which `cmake --fresh` deletes (tested with 3.25),
    so this removes the cache and the rest of the top CMakeFiles/ (compiler checks, logs)."""
    removed = []
    cache = build_dir / "CMakeCache.txt"
    if cache.is_file():
        cache.unlink()
        removed.append("CMakeCache.txt")
    files = build_dir / "CMakeFiles"
    if files.is_dir():
        for entry in files.iterdir():
            if entry.name.endswith(".dir") and entry.is_dir():
                continue  # a target's object files
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        removed.append("CMakeFiles/ (except the object folders)")
    return removed


def ensure_build_id(build_dir: Path) -> str:
    """The token that says this build tree is the one rocbuild configured: kept while the
    tree lives, new when the tree was deleted or replaced (then compile runs again)."""
    current = build_id(build_dir)
    if current is None:
        current = uuid.uuid4().hex
        write_text_atomic(build_dir / BUILD_ID_FILE, current + "\n")
    return current


def log_path(workdir: Path, component: str, step: str) -> Path:
    return workdir / "logs" / component / f"{step}.log"


@dataclass
class StepOutcome:
    component: str
    step: str
    result: str  # "done", "failed", "current"
    seconds: float = 0.0
    jobs: int | None = None
    peak_rss: int = 0
    message: str = ""
    log: Path | None = None
    tail: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # step facts kept in its stamp
    oom_retries: int = 0
    warnings: list[str] = field(default_factory=list)


class Output:
    """Thread-safe console output for step lines; ``stream`` shows every build line prefixed
    with its component, otherwise only rocbuild's own lines."""

    def __init__(self, stream: TextIO, *, show_build_output: bool = True) -> None:
        self.stream, self.show_build_output = stream, show_build_output
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:  # plain lines go to pipes and files: each says when it happened
            self.stream.write(f"{proc.clock()} {text}\n")
            self.stream.flush()

    def build_line(self, component: str, step: str, line: str) -> None:
        if self.show_build_output:
            self.say(f"  {component}:{step} | {line}")

    def step_started(self, component: str, step: str, expected: float | None) -> None:
        """A step begins; ``expected`` is its duration last time (or the recipe's estimate).
        Plain output has nothing to draw; progress.LiveOutput draws a bar."""

    def step_finished(self, component: str, step: str) -> None:
        """The step ended (either way)."""

    def run_planned(self, expected: dict[tuple[str, str], float | None]) -> None:
        """The steps this run will start, each with its expected seconds (None: unknown);
        plain output says the whole run's estimate once, progress.LiveOutput keeps a line."""
        known = [s for s in expected.values() if s is not None]
        if known:
            total = sum(known)
            at = time.strftime("%H:%M", time.localtime(time.time() + total))
            self.say(f"expected: {len(expected)} steps, about {total / 60:.0f} min from this "
                     f"host's history and the recipes' estimates (done about {at})")


@dataclass
class BuildContext:
    stack: Stack
    settings: Settings
    output: Output
    offline: bool = False
    command: str | None = None  # the command line that continues this run (continuation.py)
    outcomes: list[StepOutcome] = field(default_factory=list)
    host_snapshot: Callable[[], resources.HostSnapshot] = resources.snapshot
    _lock: contextlib.ExitStack | None = None
    # jobs held by compile steps running right now (--parallel): one budget for all of them
    _held: dict[str, int] = field(default_factory=dict)
    _held_lock: threading.Lock = field(default_factory=threading.Lock)
    cache_choices: dict[str, Any] | None = None  # what --cache serves (cache_install.served)
    _children: proc.ChildRegistry | None = field(default=None, repr=False)

    def _take_jobs(self, name: str, wanted: int) -> int:
        """Jobs for a compile step that starts while others run: what the host affords now
        minus what the running ones hold, at least 1 (their memory is not all in use yet)."""
        with self._held_lock:
            others = sum(n for k, n in self._held.items() if k != name)
            jobs = max(1, wanted - others)
            self._held[name] = jobs
            return jobs

    def _return_jobs(self, name: str) -> None:
        with self._held_lock:
            self._held.pop(name, None)

    def ensure_ready(self) -> None:
        """Take the workdir's run lock and the prefix lock (held until ``release``) and end
        the leftovers of a killed run, once per run. The CLI calls this before doit starts;
        plain ``doit`` reaches it through the first step that runs."""
        if self._lock is not None:
            return
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self.state.lock())
            # then the prefix: two workdirs must not install into one prefix at once
            stack.enter_context(prefix_lock(self.stack.prefix))
        except BaseException:
            stack.close()
            raise
        self._lock = stack
        for command in self.registry().reap_leftovers():
            self.output.say(f"ended a leftover process of an earlier run: {command}")
        leftovers.clean(self.stack.workdir, self.output.say)  # git locks, .old, stamp temps

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def state(self) -> StateDir:
        return StateDir(self.stack.workdir)

    def registry(self) -> proc.ChildRegistry:
        """The run's children: one registry per context, so an interrupt kills them all."""
        if self._children is None:
            self._children = proc.ChildRegistry(self.state.running_dir)
        return self._children

    def component(self, name: str) -> Component:
        return self.stack.components[name]

    # --- the up-to-date rule lives in uptodate.py; these delegate to it -----------------
    @property
    def rule(self) -> Rule:
        return Rule(self.stack, self.state)

    def expected_inputs(self, comp: Component, step: str) -> dict[str, Any] | None:
        return self.rule.expected_inputs(comp, step)

    def is_current(self, comp: Component, step: str) -> bool:
        return self.rule.is_current(comp, step)

    # --- running -----------------------------------------------------------------------
    def run_step(self, name: str, step: str) -> StepOutcome:
        comp = self.component(name)
        log = log_path(self.stack.workdir, name, step)
        self.output.say(f"▶ {name}: {step}")
        started = time.monotonic()
        outcome = StepOutcome(name, step, "done", log=log)
        self.output.step_started(name, step, self.expected_seconds(comp, step))
        # status shows the step running until its stamp or failure record is written (the
        # marker's file is removed last, so it never frees the space a full disk lacks)
        with running.mark(self.stack.workdir, name, step):
            try:
                {"fetch": self._fetch, "patch": self._patch, "configure": self._configure,
                 "compile": self._compile, "install": self._install}[step](comp, log, outcome)
                if outcome.result == "done":
                    self._stamp(comp, step, outcome, time.monotonic() - started)
            except BuildFailed as exc:
                outcome.result, outcome.message = "failed", str(exc)
                if exc.tip:
                    outcome.message += f"\nTIP: {exc.tip}"
            except Exception as exc:  # any error is still this step's failure
                # rocbuild's own error, not the build's: the traceback goes into the step log,
                # one line to the user, and the failure is recorded like any other
                self._logger(log)("rocbuild error:\n" + traceback.format_exc().rstrip())
                outcome.result = "failed"
                outcome.message = (f"{name}: {step} failed: {type(exc).__name__}: {exc}"
                                   f"\n(an error inside rocbuild; the traceback is in {log})")
            finally:
                self.output.step_finished(name, step)
            outcome.seconds = time.monotonic() - started
            if outcome.result == "done":
                self.output.say(f"✔ {name}: {step} ({outcome.seconds:.1f}s)")
            else:
                self.state.record_failure(name, step, message=outcome.message, log=str(log),
                                          tail=outcome.tail[-20:], jobs=outcome.jobs,
                                          oom_retries=outcome.oom_retries,
                                          seconds=round(outcome.seconds, 1),
                                          peak_rss=outcome.peak_rss)
                self.output.say(f"✘ {name}: {step} failed after {outcome.seconds:.1f}s — "
                                f"log: {log}")
        self.outcomes.append(outcome)
        return outcome

    def _stamp(self, comp: Component, step: str, outcome: StepOutcome, seconds: float) -> None:
        """Write the step's stamp: its inputs, a fresh run id (the next step's input) and
        what status shows. Written last, atomically, so a kill never leaves it half-done."""
        inputs = self.expected_inputs(comp, step)
        expected = self.rule.expected_fingerprint(comp, step)
        if inputs is None or expected is None:
            raise BuildFailed(f"{comp.name}: {step} ran before its input steps were recorded")
        extra: dict[str, Any] = {
            "run": uuid.uuid4().hex, "seconds": round(seconds, 1), "jobs": outcome.jobs,
            "peak_rss": outcome.peak_rss, "inputs": inputs, "oom_retries": outcome.oom_retries,
            "warnings": outcome.warnings, **outcome.record}
        self.state.write_stamp(comp.name, step, expected, **extra)

    def expected_seconds(self, comp: Component, step: str) -> float | None:
        """How long the step took last time on this host (its stamp, even a stale one), else
        for compile the recipe's CPU-hour estimate spread over this host's CPUs."""
        stamp = self.state.read_stamp(comp.name, step)
        if stamp and isinstance(stamp.get("seconds"), (int, float)):
            return float(stamp["seconds"])
        hours = comp.recipe.resources.get("cpu_hours")
        if step == "compile" and hours:
            return float(hours) * 3600 / max(self.host_snapshot().cpus, 1)
        return None

    def _logger(self, log: Path) -> Callable[[str], None]:
        log.parent.mkdir(parents=True, exist_ok=True)

        def write(text: str) -> None:
            with log.open("a", encoding="utf-8") as f:
                f.write(proc.stamped(text) + "\n")

        return write

    def _fetch(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        assert comp.fetch_url is not None and comp.ref is not None
        proc.log_attempt(log, f"fetch {comp.fetch_url} {comp.ref} into {comp.checkout_dir}")
        before = self.state.read_stamp(comp.name, "fetch") or {}
        patched = self.state.read_stamp(comp.name, "patch") or {}
        req = sources.FetchRequest(
            name=comp.name, url=comp.fetch_url, ref=comp.ref, submodules=comp.submodules,
            checkout_dir=comp.checkout_dir, cache_root=self.stack.workdir / "cache" / "git",
            mirror=self.settings.mirror, offline=self.offline,
            previous_commit=before.get("commit"), applied=patched.get("applied"),
            save_root=self.saved_dir(comp))
        fetched = sources.fetch(req, self._logger(log), registry=self.registry())
        outcome.record.update(commit=fetched.commit, checkout_id=fetched.checkout_id)
        if fetched.saved is not None:
            outcome.warnings.append(f"the old checkout held edits or commits of yours; it was "
                                    f"moved to {fetched.saved} instead of being deleted")

    def saved_dir(self, comp: Component) -> Path:
        """Where the user's edits of a checkout are kept before rocbuild resets it."""
        return self.stack.workdir / "saved" / comp.checkout

    def _patch(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        proc.log_attempt(log, f"patch {comp.checkout_dir} with {len(comp.patches)} patches")
        fetched = self.state.read_stamp(comp.name, "fetch") or {}
        before = self.state.read_stamp(comp.name, "patch") or {}
        applied, saved = patches.apply_series(
            comp.name, comp.checkout_dir, fetched["commit"], [p.path for p in comp.patches],
            self._logger(log), applied_before=before.get("applied"),
            save_root=self.saved_dir(comp), registry=self.registry())
        outcome.record["applied"] = applied
        if saved is not None:
            outcome.warnings.append(f"your edits in {comp.checkout_dir} were saved to {saved} "
                                    "before the checkout was reset (put them in patches/ to "
                                    "keep them)")

    # --- the build venv: Python packages the recipes need, installed before any build --------
    PYTHON_STAMP = ("_python", "venv")

    def python_inputs(self) -> dict[str, Any]:
        packages, wheels = self.stack.python_needs()
        return {"python": sys.version.split()[0], "executable": sys.executable,
                "packages": list(packages), "wheels": list(wheels)}

    def python_is_current(self) -> bool:
        fingerprint = sha256_text(json.dumps(self.python_inputs(), sort_keys=True))
        return (self.state.stamp_matches(*self.PYTHON_STAMP, fingerprint)
                and (venv_dir(self.stack.workdir) / "bin" / "python").exists())

    def setup_python(self) -> StepOutcome:
        """Create the build venv, install the recipes' packages into it and download the
        wheels builds will pip-install themselves. It runs with the fetch steps, while the
        network is expected; later steps only read what is here (rocBLAS gets PIP_NO_INDEX
        and PIP_FIND_LINKS pointing at the wheelhouse through its recipe)."""
        inputs = self.python_inputs()
        log = log_path(self.stack.workdir, "_python", "venv")
        outcome = StepOutcome("(python)", "venv", "done", log=log)
        self.output.say(f"▶ build venv: {len(inputs['packages'])} packages, "
                        f"{len(inputs['wheels'])} wheels")
        started = time.monotonic()
        for argv in venv_commands(self.stack, sys.executable):
            result = proc.run_logged(argv, log=log, registry=self.registry())
            outcome.tail = result.tail
            if not result.ok:
                outcome.result = "failed"
                outcome.message = (f"build venv: `{' '.join(argv[:5])} …` failed (exit "
                                   f"{result.returncode}); pip needs PyPI or your pip mirror "
                                   "(PIP_INDEX_URL) at this step\nTIP: check the network, then "
                                   "run the build again")
                break
        outcome.seconds = time.monotonic() - started
        if outcome.result == "done":
            self.state.write_stamp(*self.PYTHON_STAMP,
                                   sha256_text(json.dumps(inputs, sort_keys=True)),
                                   inputs=inputs, seconds=round(outcome.seconds, 1))
            self.output.say(f"✔ build venv ({outcome.seconds:.1f}s)")
        else:
            self.output.say(f"✘ build venv failed — log: {log}")
        self.outcomes.append(outcome)
        return outcome

    def check_patches(self, comp: Component) -> None:
        """Preflight: the whole series against the fetched commit, before any long step."""
        fetched = self.state.read_stamp(comp.name, "fetch")
        if fetched is not None and comp.patches:
            patches.check_series(comp.name, comp.checkout_dir, fetched["commit"],
                                 [p.path for p in comp.patches])

    def _run(self, comp: Component, step: str, argv: list[str], log: Path,
             outcome: StepOutcome) -> proc.RunResult:
        env = step_env(self.stack, comp)
        result = proc.run_logged(
            argv, log=log, cwd=comp.build_dir if comp.build_dir.is_dir() else None, env=env,
            on_line=lambda line: self.output.build_line(comp.name, step, line),
            registry=self.registry())
        outcome.peak_rss = max(outcome.peak_rss, result.peak_rss)
        outcome.tail = result.tail
        if not result.ok:
            how = (f"was killed by signal {result.signal}" if result.signal
                   else f"exited with {result.returncode}")
            raise BuildFailed(f"{comp.name}: {step} failed: {argv[0]} {how}")
        return result

    def job_counts(self, comp: Component) -> dict[str, resources.JobCount]:
        """Jobs per kind of work (compile, link, tensile) that fit in what is free now, within
        --jobs and within the lower cap an earlier OOM kill left for this component."""
        cap = self.settings.jobs
        recorded = self.job_cap(comp.name)
        if recorded is not None and (cap is None or recorded < cap):
            counts = resources.job_counts(comp.recipe.resources, self.host_snapshot(),
                                          swap_weight=self.settings.swap_weight, cap=recorded)
            return {k: resources.JobCount(c.jobs, c.reason.replace(
                        f"--jobs {recorded}", f"cap {recorded} after an OOM kill"))
                    for k, c in counts.items()}
        counts = resources.job_counts(comp.recipe.resources, self.host_snapshot(),
                                      swap_weight=self.settings.swap_weight, cap=cap)
        return launchers.split_jobs(self.stack.launch, comp, counts, self.host_snapshot(),
                                    swap_weight=self.settings.swap_weight, cap=cap)

    def job_cap_path(self, name: str) -> Path:
        return self.state.root / "caps" / f"{name}.json"

    def job_cap(self, name: str) -> int | None:
        doc = read_json(self.job_cap_path(name))
        jobs = doc.get("jobs") if doc else None  # a cap below 1 is damage, not a limit
        return jobs if isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1 else None

    def _configure(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        comp.build_dir.mkdir(parents=True, exist_ok=True)
        removed = fresh_cache(comp.build_dir)
        if removed:
            self._logger(log)(f"fresh configure: removed {', '.join(removed)} (the objects "
                              "are kept, so ninja redoes only what changed)")
        outcome.record["build_id"] = ensure_build_id(comp.build_dir)
        counts = self.job_counts(comp)
        argv = configure_argv(self.stack, comp, {k: c.jobs for k, c in counts.items()})
        start = log.stat().st_size if log.exists() else 0
        self._run(comp, "configure", argv, log, outcome)
        with log.open("rb") as f:  # only this run's part of the (appended) log
            f.seek(start)
            unused = unused_cmake_variables(f.read().decode("utf-8", "replace"))
        # only the recipe's own options: a project without targets (rocm-cmake) never reads
        # the RUNPATH rocbuild passes to every project, which is no mistake of the recipe's
        unused = [name for name in unused
                  if any(a.startswith((f"-D{name}=", f"-D{name}:")) for a in comp.cmake_args)]
        if unused:
            outcome.warnings.append(
                f"CMake did not use {', '.join(unused)}: the recipe passes options this "
                f"version of {comp.name} never reads (check {comp.recipe.file})")

    def _compile(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        """ninja with the jobs that fit; when a job dies of memory, the same step runs again
        in the kept build tree with half the jobs, down to one, and the lower count is
        remembered for this component's later runs."""
        counts = self.job_counts(comp)
        jobs = self._take_jobs(comp.name, counts["compile"].jobs)
        shared = "" if jobs == counts["compile"].jobs else f" (sharing: {jobs} left)"
        self.output.say(f"  {comp.name}: {counts['compile'].reason}{shared}")
        try:
            with launchers.observe(self.stack.launch, comp, outcome.warnings):
                self._compile_with_retries(comp, log, outcome, counts, jobs)
        finally:
            self._return_jobs(comp.name)

    def _compile_with_retries(self, comp: Component, log: Path, outcome: StepOutcome,
                              counts: dict[str, resources.JobCount], jobs: int) -> None:
        while True:
            outcome.jobs = jobs
            oom_before = resources.cgroup_oom_kills()
            started_usec = resources.monotonic_usec()
            try:
                self._run(comp, "compile", build_argv(comp, jobs), log, outcome)
                return
            except BuildFailed:
                kernel_says = resources.kernel_oom_kills_since(started_usec)
                if kernel_says:
                    self._logger(log)("kernel: " + "\nkernel: ".join(kernel_says))
                if not kernel_says and not died_of_memory(
                        outcome.tail, resources.cgroup_oom_kills(), oom_before):
                    raise
            if jobs == 1:
                per_job = max(int(comp.recipe.resources.get(k, 0)) for k in
                              ("compile_mem", "link_mem", "tensile_mem")) or GIB
                raise BuildFailed(
                    f"{comp.name}: compile died of memory even with 1 job",
                    tip=resources.swap_advice(per_job, self.host_snapshot())
                    + f"; then `rocbuild build {comp.name}`")
            jobs = max(1, jobs // 2)
            outcome.oom_retries += 1
            write_json_atomic(self.job_cap_path(comp.name), {
                "jobs": jobs, "reason": f"OOM kill at {jobs * 2} jobs", "when": time.time()})
            self.output.say(f"  {comp.name}: a job was killed for memory; compiling again with "
                            f"{jobs} job{'s' if jobs > 1 else ''} (the build tree is kept)")
            if comp.job_args:  # e.g. LLVM's link pool is fixed at configure time
                capped = {k: min(c.jobs, jobs) for k, c in counts.items()}
                self._run(comp, "configure", configure_argv(self.stack, comp, capped), log,
                          outcome)

    def _install(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        prefix = self.stack.prefix
        ownership.begin_install(prefix, comp)  # no link out; not complete while replaced
        self._remove_previous_install(comp, self._logger(log))
        self._run(comp, "install", install_argv(comp), log, outcome)
        self._install_extras(comp, self._logger(log))
        ownership.finish_install(prefix, comp, self.stack.order, self._logger(log))

    def _install_extras(self, comp: Component, log: Callable[[str], None]) -> None:
        """The recipe's links and files (ownership.py never writes them through a link out of
        the prefix)."""
        ownership.install_extras(self.stack.prefix, comp, log)

    def _remove_previous_install(self, comp: Component, log: Callable[[str], None]) -> None:
        """Remove what this component installed last time before installing again: CMake
        skips a file whose time matches to the second ("Up-to-date"), so a quick rebuild could
        keep the old library, and files a new version no longer installs would linger and
        shadow the right ones. Only files inside the prefix are touched."""
        manifest = comp.build_dir / "install_manifest.txt"
        if not manifest.is_file():
            return
        prefix = self.stack.prefix.resolve()
        removed = 0
        for line in manifest.read_text().splitlines():
            path = Path(line)
            inside = path.parent.resolve().is_relative_to(prefix)  # links may point anywhere
            if line and inside and (path.is_symlink() or path.is_file()):
                path.unlink()
                removed += 1
        log(f"removed {removed} files of the previous install of {comp.name}")
