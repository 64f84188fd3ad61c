"""The job pool's size as the run goes (--parallel above 1; the pool itself is jobserver.py's).

Two limits, taken again whenever a compile starts or ends:

- **memory**: the compile jobs that fit in the memory the run found when it started, for the
  most demanding component among those not compiled yet (``memory_fit``: a recipe's link jobs
  stay reserved, as resources.jobs_by_kind reserves them), so a job of any component still to
  come fits, however the pool's jobs are shared out. Components that are done no longer
  count, so the pool grows as the heavy ones finish;
- **what the compiles running now would get by themselves** (``share``: the CPUs, --jobs and
  an OOM cap, as with one component at a time), added up. A compile's jobs cannot be moved
  once they run and their length is unknown before, so the kernel shares the CPUs among the
  builds, as with the same builds started by hand at once: memory, not CPUs, is what the
  pool guarantees.

``--jobs`` bounds the whole pool. Where the running compiles' own counts fit within it
(``own_counts_fit``), each compile runs with its own count and holds that many tokens: there
is nothing to share, and a jobserver client of ninja 1.13 looks for tokens only when one of
its own jobs ends (a compile started while others hold the pool runs one job until its first
file is compiled). The jobserver serves the compiles when memory or --jobs must be shared.
``capacity`` and ``own_counts_fit`` are pure (tests/unit/test_pool_size_and_gates.py).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocbuild.model import resources

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext


def capacity(shares: Iterable[int], memory_fit: int, cap: int | None) -> int:
    """The pool's size while compiles with these ``shares`` run: their sum, within the jobs
    that fit in memory and ``cap`` (--jobs); at least 1."""
    limits = [max(1, sum(shares)), memory_fit]
    if cap is not None:
        limits.append(cap)
    return max(1, min(limits))


def own_counts_fit(shares: Iterable[int], memory_fit: int, cap: int | None) -> bool:
    """The compiles with these ``shares`` can each run with its own count at once: their sum
    is within the jobs that fit in memory and ``cap`` (--jobs)."""
    return sum(shares) <= min([memory_fit] + ([cap] if cap is not None else []))


def memory_fit(ctx: BuildContext, comp_resources: Mapping[str, float]) -> int:
    """Compile jobs of a component (its [resources]) that fit in the host's memory now, CPUs
    aside (the shares count those)."""
    host = dataclasses.replace(ctx.host_snapshot(), cpus=1 << 20)
    return resources.jobs_by_kind(comp_resources, host, swap_weight=ctx.settings.swap_weight,
                                  cap=None)["compile"].jobs


@dataclass
class PoolSizing:
    """The compiles running now and what is left to compile: the pool's size (``capacity``)."""

    fits: dict[str, int]  # per component of the run that compiles: jobs that fit in memory
    cap: int | None  # --jobs
    _running: dict[str, int] = field(default_factory=dict)
    _done: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, ctx: BuildContext) -> PoolSizing:
        """For the components of the run that are left to build (not installed and current)."""
        fits = {c.name: memory_fit(ctx, c.recipe.resources)
                for c in ctx.stack.components.values()
                if c.builds and not ctx.is_current(c, "install")}
        return cls(fits, ctx.settings.jobs)

    def _memory(self) -> int:
        left = [n for name, n in self.fits.items() if name not in self._done]
        return min(left, default=max(self.fits.values(), default=1))

    def size(self) -> int:
        with self._lock:
            return capacity(self._running.values(), self._memory(), self.cap)

    def started(self, name: str, share: int) -> int:
        """``name``'s compile starts with ``share`` (its jobs by itself); the new size."""
        with self._lock:
            self._running[name] = max(1, share)
            return capacity(self._running.values(), self._memory(), self.cap)

    def own_counts_fit(self) -> bool:
        """The compiles running now fit with their own counts (``own_counts_fit``)."""
        with self._lock:
            return own_counts_fit(self._running.values(), self._memory(), self.cap)

    def ended(self, name: str, *, compiled: bool) -> int:
        """``name``'s compile ended (``compiled``: it succeeded, its memory no longer counts);
        the new size."""
        with self._lock:
            self._running.pop(name, None)
            if compiled:
                self._done.add(name)
            return capacity(self._running.values(), self._memory(), self.cap)

    def reason(self) -> str:
        with self._lock:
            heaviest = min(self.fits.items(), key=lambda item: item[1], default=("", 1))
        cap = f", --jobs {self.cap}" if self.cap is not None else ""
        return (f"each compile's own jobs added up, at most {heaviest[1]} (the jobs that fit in "
                f"memory for {heaviest[0]}){cap}")
