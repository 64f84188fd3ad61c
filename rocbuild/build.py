"""Running the steps of a component: fingerprints, up-to-date checks and the step actions.

tasks.py turns these into doit tasks; this module knows nothing of doit. Every step reads
what it needs from a BuildContext, writes one log ``<workdir>/logs/<component>/<step>.log``,
and on success writes its stamp last (state.py), so a kill at any moment loses nothing that
had finished and never marks unfinished work done.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rocbuild import patches, proc, resources, sources
from rocbuild.diagnose import diagnose
from rocbuild.errors import BuildFailed
from rocbuild.graph import Component, Stack, sha256_text, venv_dir
from rocbuild.lint import unused_cmake_variables
from rocbuild.resources import GIB
from rocbuild.settings import Settings
from rocbuild.state import StateDir, read_json, write_json_atomic
from rocbuild.steps import (
    build_argv,
    configure_argv,
    install_argv,
    step_env,
    steps_of,
    venv_commands,
)

MEMORY_DIAGNOSES = ("oom-killed", "tensile-oom")


def died_of_memory(tail: list[str], oom_after: int | None, oom_before: int | None) -> bool:
    """A step died of memory: the cgroup's OOM-kill count rose, or the log ends the way a
    compiler, linker or Tensile ends when the kernel kills it (diagnose.py's patterns)."""
    if oom_after is not None and oom_before is not None and oom_after > oom_before:
        return True
    found = diagnose(tail)
    return found is not None and found.id in MEMORY_DIAGNOSES


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
    fetched: sources.FetchResult | None = None
    oom_retries: int = 0
    warnings: list[str] = field(default_factory=list)


class Output:
    """Thread-safe console output for step lines; ``stream`` shows every build line prefixed
    with its component, otherwise only rocbuild's own lines."""

    def __init__(self, stream: TextIO, *, show_build_output: bool = True) -> None:
        self.stream, self.show_build_output = stream, show_build_output
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def build_line(self, component: str, step: str, line: str) -> None:
        if self.show_build_output:
            self.say(f"  {component}:{step} | {line}")

    def step_started(self, component: str, step: str, expected: float | None) -> None:
        """A step begins; ``expected`` is its duration last time (or the recipe's estimate).
        Plain output has nothing to draw; progress.LiveOutput draws a bar."""

    def step_finished(self, component: str, step: str) -> None:
        """The step ended (either way)."""


@dataclass
class BuildContext:
    stack: Stack
    settings: Settings
    output: Output
    offline: bool = False
    outcomes: list[StepOutcome] = field(default_factory=list)
    host_snapshot: Callable[[], resources.HostSnapshot] = resources.snapshot
    _lock: contextlib.ExitStack | None = None
    # jobs held by compile steps running right now (--parallel): one budget for all of them
    _held: dict[str, int] = field(default_factory=dict)
    _held_lock: threading.Lock = field(default_factory=threading.Lock)

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
        """Take the workdir's run lock (held until ``release``) and end the leftovers of a
        killed run, once per run. The CLI calls this before doit starts; plain ``doit``
        reaches it through the first step that runs."""
        if self._lock is not None:
            return
        stack = contextlib.ExitStack()
        stack.enter_context(self.state.lock())
        self._lock = stack
        for command in self.registry().reap_leftovers():
            self.output.say(f"ended a leftover process of an earlier run: {command}")

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def state(self) -> StateDir:
        return StateDir(self.stack.workdir)

    def registry(self) -> proc.ChildRegistry:
        return proc.ChildRegistry(self.state.running_dir)

    def component(self, name: str) -> Component:
        return self.stack.components[name]

    # --- fingerprints: what each step's output depends on --------------------------------
    def expected_inputs(self, comp: Component, step: str) -> dict[str, Any] | None:
        """What the step's output depends on, by name; None while an input step has no stamp
        yet (then the step is not current). Stamps keep this document, so `rocbuild status`
        can say which input changed."""
        state = self.state
        if step == "fetch":
            return {"url": comp.url, "ref": comp.ref, "submodules": comp.submodules}
        if step == "patch":
            fetched = state.read_stamp(comp.name, "fetch")
            if fetched is None:
                return None
            return {"commit": fetched.get("commit"), "checkout": fetched.get("checkout_id"),
                    "patches": {p.path.name: p.sha256 for p in comp.patches}}
        if step == "configure":
            source = state.read_stamp(comp.checkout, "patch")
            deps = {d: self.final_fingerprint(self.component(d)) for d in comp.depends}
            if source is None or None in deps.values():
                return None
            return {"recipe": comp.fingerprint, "source": source["fingerprint"], "deps": deps}
        previous = {"compile": "configure", "install": "compile"}[step]
        before = state.read_stamp(comp.name, previous)
        return None if before is None else {previous: before["fingerprint"]}

    def expected_fingerprint(self, comp: Component, step: str) -> str | None:
        inputs = self.expected_inputs(comp, step)
        if inputs is None:
            return None
        return sha256_text(json.dumps([step, inputs], sort_keys=True))

    def final_fingerprint(self, comp: Component) -> str | None:
        """The stamp fingerprint of the component's last step (install, or patch for a
        source-only one), which is what its users are built against."""
        last = steps_of(comp)[-1] if steps_of(comp) else None
        if last is None:  # a source-only component that reuses another checkout
            return self.final_fingerprint(self.component(comp.checkout))
        stamp = self.state.read_stamp(comp.name, last)
        return None if stamp is None else stamp["fingerprint"]

    def is_current(self, comp: Component, step: str) -> bool:
        expected = self.expected_fingerprint(comp, step)
        if expected is None or not self.state.stamp_matches(comp.name, step, expected):
            return False
        return self._outputs_present(comp, step)

    def _outputs_present(self, comp: Component, step: str) -> bool:
        """A stamp is not enough when the user deleted what the step made."""
        if step == "fetch":
            stamp = self.state.read_stamp(comp.name, "fetch") or {}
            return (sources.checkout_id(comp.checkout_dir) == stamp.get("checkout_id")
                    and sources.checkout_commit(comp.checkout_dir) == stamp.get("commit"))
        if step == "configure":
            return (comp.build_dir / "CMakeCache.txt").is_file()
        if step == "compile":
            return (comp.build_dir / "build.ninja").is_file()
        if step == "install":
            manifest = comp.build_dir / "install_manifest.txt"
            if not manifest.is_file():
                return False
            prefix = self.stack.prefix
            return all(Path(line).exists() or Path(line).is_symlink()
                       for line in manifest.read_text().splitlines() if line) and all(
                (prefix / rel).is_symlink() or (prefix / rel).exists()
                for rel, _ in (*comp.install_links, *comp.install_files))
        return True

    # --- running -----------------------------------------------------------------------
    def run_step(self, name: str, step: str) -> StepOutcome:
        comp = self.component(name)
        log = log_path(self.stack.workdir, name, step)
        self.output.say(f"▶ {name}: {step}")
        started = time.monotonic()
        outcome = StepOutcome(name, step, "done", log=log)
        self.output.step_started(name, step, self.expected_seconds(comp, step))
        try:
            {"fetch": self._fetch, "patch": self._patch, "configure": self._configure,
             "compile": self._compile, "install": self._install}[step](comp, log, outcome)
        except BuildFailed as exc:
            outcome.result, outcome.message = "failed", str(exc)
            if exc.tip:
                outcome.message += f"\nTIP: {exc.tip}"
        finally:
            self.output.step_finished(name, step)
        outcome.seconds = time.monotonic() - started
        if outcome.result == "done":
            inputs = self.expected_inputs(comp, step)
            expected = self.expected_fingerprint(comp, step)
            assert expected is not None, f"{name}:{step} ran before its inputs were stamped"
            extra = {"seconds": round(outcome.seconds, 1), "jobs": outcome.jobs,
                     "peak_rss": outcome.peak_rss, "inputs": inputs,
                     "oom_retries": outcome.oom_retries, "warnings": outcome.warnings}
            if step == "fetch":
                extra.update(commit=outcome.fetched.commit,
                             checkout_id=outcome.fetched.checkout_id)
            self.state.write_stamp(name, step, expected, **extra)
            self.output.say(f"✔ {name}: {step} ({outcome.seconds:.1f}s)")
        else:
            self.state.record_failure(name, step, message=outcome.message, log=str(log),
                                      tail=outcome.tail[-20:], jobs=outcome.jobs,
                                      oom_retries=outcome.oom_retries,
                                      seconds=round(outcome.seconds, 1),
                                      peak_rss=outcome.peak_rss)
            self.output.say(f"✘ {name}: {step} failed after {outcome.seconds:.1f}s — log: {log}")
        self.outcomes.append(outcome)
        return outcome

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
                f.write(text + "\n")

        return write

    def _fetch(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        assert comp.fetch_url is not None and comp.ref is not None
        req = sources.FetchRequest(
            name=comp.name, url=comp.fetch_url, ref=comp.ref, submodules=comp.submodules,
            checkout_dir=comp.checkout_dir, cache_root=self.stack.workdir / "cache" / "git",
            mirror=self.settings.mirror, offline=self.offline)
        outcome.fetched = sources.fetch(req, self._logger(log))

    def _patch(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        fetched = self.state.read_stamp(comp.name, "fetch") or {}
        patches.apply_series(comp.name, comp.checkout_dir, fetched["commit"],
                             [p.path for p in comp.patches], self._logger(log))

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
        return resources.job_counts(comp.recipe.resources, self.host_snapshot(),
                                    swap_weight=self.settings.swap_weight, cap=cap)

    def job_cap_path(self, name: str) -> Path:
        return self.state.root / "caps" / f"{name}.json"

    def job_cap(self, name: str) -> int | None:
        doc = read_json(self.job_cap_path(name))
        return int(doc["jobs"]) if doc and isinstance(doc.get("jobs"), int) else None

    def _configure(self, comp: Component, log: Path, outcome: StepOutcome) -> None:
        comp.build_dir.mkdir(parents=True, exist_ok=True)
        counts = self.job_counts(comp)
        argv = configure_argv(self.stack, comp, {k: c.jobs for k, c in counts.items()})
        start = log.stat().st_size if log.exists() else 0
        self._run(comp, "configure", argv, log, outcome)
        with log.open("rb") as f:  # only this run's part of the (appended) log
            f.seek(start)
            unused = unused_cmake_variables(f.read().decode("utf-8", "replace"))
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
        self._remove_previous_install(comp, self._logger(log))
        self._run(comp, "install", install_argv(comp), log, outcome)
        self._install_extras(comp, self._logger(log))

    def _install_extras(self, comp: Component, log: Callable[[str], None]) -> None:
        """The links and files a recipe declares (what AMD's packages add after install,
        e.g. <prefix>/llvm -> lib/llvm, bin/amdclang++, clang config files)."""
        prefix = self.stack.prefix
        for rel, target in comp.install_links:
            path = prefix / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists():
                raise BuildFailed(f"{comp.name}: cannot create the link {path}: a folder is "
                                  "in the way", tip=f"move {path} away and run the build again")
            path.symlink_to(target)
            log(f"link {path} -> {target}")
        for rel, text in comp.install_files:
            path = prefix / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.rocbuild-tmp")
            tmp.write_text(text)
            os.replace(tmp, path)
            log(f"wrote {path}")

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
