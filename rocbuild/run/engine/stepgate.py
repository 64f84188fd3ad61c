"""How many steps of a kind run at once: the compiles (``--parallel``) and, beside them, the
light steps (fetch, patch, checks, configure, install: parallel.light_steps); and the sources
phase's end, which every build step waits for.

doit's worker threads take whatever task is ready; a step waits at its gate until a slot is
free and no waiter with more work behind it (schedule.py) is ahead of it. A run that stops
(a step failed without --keep-going, or it was interrupted) lets its waiters go without
running their step (``RunStopped``): doit had handed them out before the failure.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field


class RunStopped(Exception):
    """The run stops: the step waiting at its gate never started."""


@dataclass
class Gate:
    """``slots`` steps at once; the waiter with the highest rank goes first (ties: the one
    that came first)."""

    slots: int
    _running: int = 0
    _waiting: list[tuple[float, int]] = field(default_factory=list)
    _stopped: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _tickets: Iterator[int] = field(default_factory=itertools.count)

    def _first(self) -> tuple[float, int]:
        return max(self._waiting, key=lambda w: (w[0], -w[1]))

    @contextlib.contextmanager
    def slot(self, rank: float = 0.0) -> Iterator[None]:
        """Wait for a slot (RunStopped when the run stops first), hold it while the body runs."""
        with self._cond:
            me = (rank, next(self._tickets))
            self._waiting.append(me)
            try:
                while not self._stopped and (self._running >= self.slots or self._first() != me):
                    self._cond.wait()
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()  # the next waiter may be first now
            if self._stopped:
                raise RunStopped
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    @property
    def running(self) -> int:
        with self._cond:
            return self._running


@dataclass
class PhaseEnd:
    """The end of the sources phase when doit's threads run steps at once: serial doit runs
    the ``sources:`` and ``options:`` tasks first because they come first in its list, but a
    thread takes whatever is ready, so a component whose own sources are in would configure
    while another's fetch or patch is still to fail. Its tasks are ticked off as doit reports
    each (done, failed, current or ignored; a task whose dependency failed is reported
    failed too), so the phase ends even with --keep-going."""

    _pending: set[str] = field(default_factory=set)
    _stopped: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def expect(self, tasks: list[str]) -> None:
        with self._cond:
            self._pending = set(tasks)
            self._cond.notify_all()

    def reported(self, task: str) -> None:
        with self._cond:
            self._pending.discard(task)
            if not self._pending:
                self._cond.notify_all()

    def wait(self) -> None:
        """Until every task of the phase was reported; RunStopped when the run stops first."""
        with self._cond:
            while self._pending and not self._stopped:
                self._cond.wait()
            if self._stopped:
                raise RunStopped

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()


@dataclass
class StepGates:
    """The run's two gates, compiles and the light steps beside them, and the end of the
    sources phase that steps of a build wait for."""

    compiles: Gate
    light: Gate
    sources: PhaseEnd = field(default_factory=PhaseEnd)

    @classmethod
    def of(cls, compiles: int, light: int) -> StepGates:
        return cls(Gate(max(1, compiles)), Gate(max(1, light)))

    def for_step(self, step: str) -> Gate:
        return self.compiles if step == "compile" else self.light

    def stop(self) -> None:
        self.compiles.stop()
        self.light.stop()
        self.sources.stop()
