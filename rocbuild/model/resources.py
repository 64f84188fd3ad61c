"""Host resources (CPUs, memory, swap) as figures, and the job count each kind of work can
afford from them; sizes as users read them.

What the host has right now (affinity, cgroup quotas and limits, the kernel's OOM kills) is
read by checks/hostload.py; this module only computes with a HostSnapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

GIB = 1 << 30
DEFAULT_RESERVE = GIB  # memory left for the desktop, the shell and rocbuild itself
DEFAULT_JOB_MEM = GIB  # per compile job when a recipe does not say


MIB = 1 << 20


def format_bytes(n_bytes: float, unit: str | None = None, digits: int = 1) -> str:
    """A size as users read it, the one byte formatter: in ``unit`` ("GiB" or "MiB") when
    given, else the largest of GiB, MiB and KiB it reaches. GiB shows ``digits`` decimals,
    MiB and KiB whole numbers."""
    if unit == "GiB" or (unit is None and n_bytes >= GIB):
        return f"{n_bytes / GIB:.{digits}f} GiB"
    if unit == "MiB" or (unit is None and n_bytes >= MIB):
        return f"{n_bytes / MIB:.0f} MiB"
    return f"{n_bytes / 1024:.0f} KiB"


def format_gib(n_bytes: float) -> str:
    """Memory and disk figures of plans and job sizing: always in GiB, one decimal."""
    return format_bytes(n_bytes, "GiB")


@dataclass(frozen=True)
class HostSnapshot:
    cpus: int
    cpu_reason: str
    mem_available: int
    swap_free: int
    mem_reason: str


@dataclass(frozen=True)
class JobCount:
    jobs: int
    reason: str


def jobs_for(host: HostSnapshot, mem_per_job: int, *, swap_weight: float = 0.5,
             reserve: int = DEFAULT_RESERVE, cap: int | None = None) -> JobCount:
    """How many jobs of ``mem_per_job`` fit now: (available + swap × weight − reserve) / per job,
    capped by CPUs and ``cap`` (``--jobs``); never below 1. The reason says which limit won."""
    budget = memory_budget(host.mem_available, host.swap_free, swap_weight, reserve)
    by_memory = max(1, int(budget // max(mem_per_job, 1)))
    memory_text = (f"{host.mem_reason} {format_gib(host.mem_available)} + swap "
                   f"{format_gib(host.swap_free)} × {swap_weight:g} − {format_gib(reserve)} "
                   f"reserve at {format_gib(mem_per_job)}/job")
    limits = [(by_memory, memory_text), (host.cpus, host.cpu_reason)]
    if cap is not None:
        limits.append((cap, f"--jobs {cap}"))
    jobs = min(n for n, _ in limits)
    # the limit that decided first, then the others with what each would allow
    ordered = sorted(limits, key=lambda item: item[0])
    parts = [ordered[0][1]] + [f"{text} (allows {n})" for n, text in ordered[1:]]
    return JobCount(jobs, f"{jobs} job{'s' if jobs != 1 else ''}: " + "; ".join(parts))


# Kinds of parallel work and the [resources] key giving the memory one job of that kind needs.
JOB_MEMORY_KEYS = {"compile": "compile_mem", "link": "link_mem", "tensile": "tensile_mem"}


def jobs_by_kind(memory_per_job: dict[str, float] | Mapping[str, float], host: HostSnapshot, *,
               swap_weight: float, cap: int | None) -> dict[str, JobCount]:
    """Jobs for every kind of work; a kind without its own figure is sized like compiling.

    When a recipe sizes links separately (LLVM), ninja runs its link pool beside the compile
    pool, so they share one budget: links get half of it, compiles what the links leave.
    """
    compile_mem = int(memory_per_job.get("compile_mem", DEFAULT_JOB_MEM))
    counts = {kind: jobs_for(host, int(memory_per_job.get(key, compile_mem)),
                             swap_weight=swap_weight, cap=cap)
              for kind, key in JOB_MEMORY_KEYS.items()}
    if "link_mem" in memory_per_job:
        link_mem = int(memory_per_job["link_mem"])
        budget = max(memory_budget(host.mem_available, host.swap_free, swap_weight), 0)
        link = jobs_for(host, link_mem, swap_weight=swap_weight, cap=cap,
                        reserve=int(DEFAULT_RESERVE + budget / 2))
        held = link.jobs * link_mem
        compile_ = jobs_for(host, compile_mem, swap_weight=swap_weight, cap=cap,
                            reserve=DEFAULT_RESERVE + held)
        counts["link"] = JobCount(link.jobs, link.reason + " (half the memory is left for the "
                                                       "compile jobs that run beside links)")
        counts["compile"] = JobCount(compile_.jobs, compile_.reason + f" (the reserve includes "
                                     f"{link.jobs} link job(s) × {format_gib(link_mem)})")
    return counts


def memory_budget(mem_available: int, swap_free: int, swap_weight: float,
                  reserve: int = DEFAULT_RESERVE) -> float:
    """Bytes that jobs may take now: ``mem_available`` + ``swap_free`` × ``swap_weight`` −
    ``reserve``. The one budget of job sizing (``jobs_for``), the distcc split
    (launchers.split_jobs) and doctor's memory check, so none promises what another refuses."""
    return mem_available + swap_free * swap_weight - reserve
