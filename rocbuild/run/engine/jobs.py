"""How many jobs a compile step gets, and what happens when one dies of memory.

Three rules live here and nowhere else: the jobs that fit in what the host has free now
(resources.py, launchers.py split them between local and remote), the one budget that compile
steps running at the same time (--parallel) share, and the OOM retry: when a job dies of
memory the step runs again in the kept build tree with half the jobs, down to one, and the
lower count is remembered (``state/caps/<component>.json``) for the component's later runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild.checks import hostload
from rocbuild.errors import BuildFailed
from rocbuild.files import read_json, write_json_atomic
from rocbuild.model import buildsystems, launchers, resources
from rocbuild.model.graph import Component
from rocbuild.model.resources import GIB
from rocbuild.model.workdir import Workdir
from rocbuild.run.engine.command import run_all
from rocbuild.run.engine.outcome import StepOutcome, step_logger
from rocbuild.run.state import launchstats

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext


def died_of_memory(tail: list[str], oom_after: int | None, oom_before: int | None) -> bool:
    """A step died of memory: the cgroup's OOM-kill count rose, or the log ends the way a
    compiler, linker or Tensile ends when the kernel kills it (diagnose.toml's rows marked
    ``memory``)."""
    if oom_after is not None and oom_before is not None and oom_after > oom_before:
        return True
    from rocbuild.checks.diagnose import is_memory_death  # read when a compile died

    return is_memory_death(tail)


@dataclass
class JobBudget:
    """Jobs held by compile steps running right now (--parallel): one budget for all."""

    _held: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, name: str, wanted: int) -> int:
        """Jobs for a compile step that starts while others run: what the host affords now
        minus what the running ones hold, at least 1 (their memory is not all in use yet)."""
        with self._lock:
            others = sum(n for k, n in self._held.items() if k != name)
            jobs = max(1, wanted - others)
            self._held[name] = jobs
            return jobs

    def give_back(self, name: str) -> None:
        with self._lock:
            self._held.pop(name, None)


def job_cap_path(workdir: Path, name: str) -> Path:
    return Workdir.shared(workdir).caps(name)


def job_cap(workdir: Path, name: str) -> int | None:
    """The job count an earlier OOM kill left for ``name``, if any."""
    doc = read_json(job_cap_path(workdir, name))
    jobs = doc.get("jobs") if doc else None  # a cap below 1 is damage, not a limit
    return jobs if isinstance(jobs, int) and not isinstance(jobs, bool) and jobs >= 1 else None


def job_counts(ctx: BuildContext, comp: Component) -> dict[str, resources.JobCount]:
    """Jobs per kind of work (compile, link, tensile) that fit in what is free now, within
    --jobs and within the lower cap an earlier OOM kill left for this component."""
    cap = ctx.settings.jobs
    recorded = job_cap(ctx.stack.workdir, comp.name)
    if recorded is not None and (cap is None or recorded < cap):
        counts = resources.jobs_by_kind(comp.recipe.resources, ctx.host_snapshot(),
                                      swap_weight=ctx.settings.swap_weight, cap=recorded)
        return {k: resources.JobCount(c.jobs, c.reason.replace(
                    f"--jobs {recorded}", f"cap {recorded} after an OOM kill"))
                for k, c in counts.items()}
    counts = resources.jobs_by_kind(comp.recipe.resources, ctx.host_snapshot(),
                                  swap_weight=ctx.settings.swap_weight, cap=cap)
    return launchers.split_jobs(ctx.stack.launch, comp, counts, ctx.host_snapshot(),
                                swap_weight=ctx.settings.swap_weight, cap=cap)


def compile_step(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """The build system's build with the jobs that fit and are not held by another compile
    step; retried with fewer jobs when one dies of memory."""
    counts = job_counts(ctx, comp)
    jobs = ctx.budget.take(comp.name, counts["compile"].jobs)
    shared = "" if jobs == counts["compile"].jobs else f" (sharing: {jobs} left)"
    ctx.output.say(f"  {comp.name}: {counts['compile'].reason}{shared}")
    try:
        with launchstats.observe(ctx.stack.launch, comp, outcome.warnings):
            compile_with_retries(ctx, comp, log, outcome, counts, jobs)
    finally:
        ctx.budget.give_back(comp.name)


def compile_with_retries(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome,
                         counts: dict[str, resources.JobCount], jobs: int) -> None:
    system = buildsystems.of(comp)
    while True:
        outcome.jobs = jobs
        oom_before = hostload.cgroup_oom_kills()
        started_usec = hostload.monotonic_usec()
        try:
            run_all(ctx, comp, "compile", system.build(ctx.stack, comp, jobs), log, outcome)
            return
        except BuildFailed:
            kernel_says = hostload.kernel_oom_kills_since(started_usec)
            if kernel_says:
                step_logger(log)("kernel: " + "\nkernel: ".join(kernel_says))
            if not kernel_says and not died_of_memory(
                    outcome.tail, hostload.cgroup_oom_kills(), oom_before):
                raise
        if jobs == 1:
            per_job = max(int(comp.recipe.resources.get(k, 0)) for k in
                          ("compile_mem", "link_mem", "tensile_mem")) or GIB
            raise BuildFailed(
                f"{comp.name}: compile died of memory even with 1 job",
                tip=hostload.swap_advice(per_job, (host := ctx.host_snapshot()).mem_available,
                                          host.swap_free, ctx.settings.swap_weight)
                + f"; then `rocbuild build {comp.name}`")
        jobs = max(1, jobs // 2)
        outcome.oom_retries += 1
        write_json_atomic(job_cap_path(ctx.stack.workdir, comp.name), {
            "jobs": jobs, "reason": f"OOM kill at {jobs * 2} jobs", "when": time.time()})
        ctx.output.say(f"  {comp.name}: a job was killed for memory; compiling again with "
                       f"{jobs} job{'s' if jobs > 1 else ''} (the build tree is kept)")
        if comp.job_args:  # e.g. LLVM's link pool is fixed at configure time
            capped = {k: min(c.jobs, jobs) for k, c in counts.items()}
            run_all(ctx, comp, "configure", system.configure(ctx.stack, comp, capped), log,
                    outcome)
