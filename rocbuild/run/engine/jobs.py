"""How many jobs a compile step gets, and what happens when one dies of memory.

The jobs that fit in what the host has free now (resources.py; launchers.py adds distcc's
remote slots), within --jobs and an OOM cap; the run's one job pool, which every compile that
may run beside another draws from (``open_pool``, ``pool_of``: the pool is jobserver.py's, its
size poolsize.py's), as its own count or as a jobserver client; and the OOM retry: when a job
dies of memory the step runs again in the kept build tree with half the jobs, down to one,
and the lower count is remembered (``state/caps/<component>.json``) for the component's later
runs.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild.checks import buildtools, hostload
from rocbuild.errors import BuildFailed
from rocbuild.files import read_json
from rocbuild.model import buildsystems, launchers, resources
from rocbuild.model.graph import Component
from rocbuild.model.resources import GIB
from rocbuild.model.steps import step_env
from rocbuild.model.workdir import Workdir
from rocbuild.run.engine import jobserver, poolsize
from rocbuild.run.engine.command import run_all
from rocbuild.run.engine.outcome import StepOutcome, step_logger
from rocbuild.run.state import launchstats
from rocbuild.run.state.state import write_json_atomic  # a folder in its place is replaced

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
    """The build system's build with the jobs that fit; retried with fewer jobs when one
    dies of memory. With the run's job pool (``pool_of``) the pool counts this build's own
    jobs while it runs (poolsize.py): where the compiles running now fit with their own
    counts, the build runs with its own and holds as many tokens; else it is the pool's
    client and takes its jobs as they come free. Without a pool it runs alone: its own count."""
    counts = job_counts(ctx, comp)
    pool = pool_of(ctx)
    if pool is None:
        ctx.output.say(f"  {comp.name}: {counts['compile'].reason}")
        with launchstats.observe(ctx.stack.launch, comp, outcome.warnings):
            compile_with_retries(ctx, comp, log, outcome, counts, counts["compile"].jobs)
        return
    with _counted_in_pool(ctx, comp, counts["compile"].jobs) as own_counts_fit:
        wanted = counts["compile"].jobs
        capped = job_cap(ctx.stack.workdir, comp.name)  # an OOM kill's lower count
        why_not = buildsystems.of(comp).why_no_pool_client(comp, buildtools)
        client = not why_not and not own_counts_fit and (capped is None or capped >= pool.size)
        jobs: int | None = None if client else min(wanted, pool.size)
        how = (f"from the run's pool of {pool.size} (jobserver)" if client else
               f"{jobs} of the run's pool of {pool.size}" + (
                   " (the compiles running now fit with their own counts)"
                   if own_counts_fit else f" ({why_not})" if why_not else ""))
        ctx.output.say(f"  {comp.name}: {counts['compile'].reason}; {how}")
        with launchstats.observe(ctx.stack.launch, comp, outcome.warnings):
            compile_with_retries(ctx, comp, log, outcome, counts, jobs)


_OPENING = threading.Lock()  # plain doit's worker threads may start two compiles at once


def open_pool(ctx: BuildContext, parallel: int | None) -> None:
    """The run's one job pool for the compile steps that run at once (jobserver.py), sized as
    they start and end (poolsize.py); ``parallel``: the compiles at once (None: as many as
    plain doit's worker threads)."""
    ctx.pool_sizing = poolsize.PoolSizing.of(ctx)
    ctx.pool = jobserver.JobPool(1)  # the first compile's start sizes it
    kinds = {c.recipe.kind for c in ctx.stack.components.values() if c.builds}
    client, why_none = buildsystems.pool_client(kinds, buildtools)
    how = (f"a GNU make jobserver that {client} builds draw from" if client else
           f"{why_none or 'no jobserver client here'}: each build holds a fixed share")
    at_once = f"up to {parallel}" if parallel else "as many as doit's worker threads"
    ctx.output.say(f"job pool: {ctx.pool_sizing.reason()}; {at_once} components at once, "
                   f"{how}")


def pool_of(ctx: BuildContext) -> jobserver.JobPool | None:
    """The pool a compile that starts now draws from: the run's, which ``rocbuild build``
    opens before doit starts where --parallel is above 1 (engine.py). Plain doit chooses its
    worker threads itself (``doit -n N -P thread``, ``ctx.doit_threads``): a compile in a
    worker thread may run beside others, so the first one opens the pool. A compile in the
    main thread (doit without -n, or -P process, whose processes share nothing) runs alone."""
    if ctx.pool is None and ctx.doit_threads \
            and threading.current_thread() is not threading.main_thread():
        with _OPENING:
            if ctx.pool is None:
                open_pool(ctx, None)
    return ctx.pool


@contextlib.contextmanager
def _counted_in_pool(ctx: BuildContext, comp: Component, share: int) -> Iterator[bool]:
    """While the compile runs, the pool counts its ``share`` (poolsize.py): it grows before
    the build starts and shrinks after it ended. Yields whether the compiles running now fit
    with their own counts."""
    pool, sizing = ctx.pool, ctx.pool_sizing
    if pool is None or sizing is None:
        yield False
        return
    pool.resize(sizing.started(comp.name, share))
    compiled = False
    try:
        yield sizing.own_counts_fit()
        compiled = True
    finally:
        pool.resize(sizing.ended(comp.name, compiled=compiled))


def configure_env(ctx: BuildContext, comp: Component) -> dict[str, str | None]:
    """PATH for a configure: ``<workdir>/tools`` first, holding links to the programs its
    build system wants a new tree to record (``BuildSystem.configure_programs``: CMake's
    jobserver ninja where PATH's is older than 1.13); no change where it wants none."""
    programs = buildsystems.of(comp).configure_programs(buildtools)
    if not programs:
        return {}
    # a folder of its own holding only those: the ninja wheel's folder is this Python's bin/,
    # whose `python` and `pip` would shadow a recipe's build venv; kept with the workdir,
    # since the tree records the path it found (CMAKE_MAKE_PROGRAM)
    folder = ctx.stack.workdir / "tools"
    for name, found in programs.items():
        link = folder / name
        if not (link.is_symlink() and os.readlink(link) == found):
            folder.mkdir(parents=True, exist_ok=True)
            # per thread: doit's workers configure components of one run at once
            tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(found)
            os.replace(tmp, link)
    path = step_env(ctx.stack, comp, os.environ).get("PATH", "")
    return {"PATH": os.pathsep.join(p for p in (str(folder), path) if p)}


def _own_pool_share(comp: Component, counts: dict[str, resources.JobCount], size: int) -> int:
    """Tokens a client build holds beyond its implicit one for the processes a single job of
    it starts: Tensile's own process pool (rocBLAS's ``Tensile_CPU_THREADS``, rendered from
    ``jobs.tensile``) runs inside one ninja job, which takes one token for all of them.
    LLVM's compile and link pools need none: ninja takes a token for each of their jobs."""
    if any("jobs.tensile" in arg for arg in comp.job_args):
        return max(0, min(counts["tensile"].jobs, size) - 1)
    return 0


def _phases(ctx: BuildContext, comp: Component, counts: dict[str, resources.JobCount],
            jobs: int | None) -> list[tuple[str | None, int | None, int]]:
    """(target, job count (None: a pool client), the pool's tokens held) of each build a
    compile runs. Tensile's process pool runs inside one job and takes a share of tokens
    beyond that job's for its workers; where the recipe names that job's target
    (``tensile_target``) it is built first, alone, with the share, and then the rest, so
    the share's tokens serve the other jobs once Tensile is done."""
    if ctx.pool is None:
        return [(None, jobs, 0)]
    share = _own_pool_share(comp, counts, ctx.pool.size)
    target = comp.recipe.tensile_target if share else ""
    if jobs is None:  # a client: its implicit slot, and the share while Tensile runs
        return [(target, None, 1 + share), (None, None, 1)] if target else [(None, None,
                                                                              1 + share)]
    return [(target, 1, 1 + share), (None, jobs, jobs)] if target else [(None, jobs,
                                                                          jobs + share)]


@contextlib.contextmanager
def _slots(ctx: BuildContext, comp: Component, jobs: int | None, held: int
           ) -> Iterator[dict[str, str | None]]:
    """The pool's tokens a build holds while it runs (``held``), and the environment it runs
    in: a client (``jobs`` None) gets the pool's MAKEFLAGS. No pool: nothing held."""
    pool = ctx.pool
    if pool is None:
        yield {}
        return
    with pool.hold(held, client=jobs is None):
        yield ({"MAKEFLAGS": pool.makeflags(), **buildsystems.of(comp).client_env}
               if jobs is None else {})


def compile_with_retries(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome,
                         counts: dict[str, resources.JobCount], jobs: int | None) -> None:
    """Compile; when a job dies of memory, again in the kept tree with half the jobs (a pool
    client counts as the pool's size), down to one, remembering the lower count."""
    system = buildsystems.of(comp)
    while True:
        outcome.jobs = jobs if jobs is not None else (ctx.pool.size if ctx.pool else 1)
        oom_before = hostload.cgroup_oom_kills()
        started_usec = hostload.monotonic_usec()
        try:
            for target, count, held in _phases(ctx, comp, counts, jobs):
                with _slots(ctx, comp, count, held) as env:
                    run_all(ctx, comp, "compile", system.build(ctx.stack, comp, count, target)
                            if target else system.build(ctx.stack, comp, count), log, outcome,
                            extra_env=env)
            return
        except BuildFailed:
            kernel_says = hostload.kernel_oom_kills_since(started_usec)
            if kernel_says:
                step_logger(log)("kernel: " + "\nkernel: ".join(kernel_says))
            if not kernel_says and not died_of_memory(
                    outcome.tail, hostload.cgroup_oom_kills(), oom_before):
                raise
        ran = outcome.jobs
        if ran == 1:
            per_job = max(int(comp.recipe.resources.get(k, 0)) for k in
                          ("compile_mem", "link_mem", "tensile_mem")) or GIB
            raise BuildFailed(
                f"{comp.name}: compile died of memory even with 1 job",
                tip=hostload.swap_advice(per_job, (host := ctx.host_snapshot()).mem_available,
                                          host.swap_free, ctx.settings.swap_weight)
                + f"; then `rocbuild build {comp.name}`")
        jobs = max(1, ran // 2)
        outcome.oom_retries += 1
        write_json_atomic(job_cap_path(ctx.stack.workdir, comp.name), {
            "jobs": jobs, "reason": f"OOM kill at {ran} jobs", "when": time.time()})
        ctx.output.say(f"  {comp.name}: a job was killed for memory; compiling again with "
                       f"{jobs} job{'s' if jobs > 1 else ''} (the build tree is kept)")
        if comp.job_args:  # e.g. LLVM's link pool is fixed at configure time
            capped = {k: min(c.jobs, jobs) for k, c in counts.items()}
            run_all(ctx, comp, "configure", system.configure(ctx.stack, comp, capped), log,
                    outcome)
