"""What one run shares: the BuildContext (data), and the sink its console lines go to.

BuildContext holds the stack, the settings, where output goes, the outcomes so far, the run
and prefix locks, the job pool and the gates of the steps that run at once, the run's
children and what --cache serves,
and the one up-to-date Rule of the run (uptodate.py), so each checkout's edits are read once
per run, not once per question. Running a step is runner.py's; the order of a run's phases
is lifecycle.py's; this module knows nothing of doit.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from rocbuild import proc
from rocbuild.checks import hostload, launchtools
from rocbuild.model import resources
from rocbuild.model.graph import Component, Stack
from rocbuild.model.settings import Settings
from rocbuild.prefix import records
from rocbuild.run.engine import leftovers, outcome, schedule
from rocbuild.run.engine.jobserver import JobPool
from rocbuild.run.engine.outcome import StepOutcome
from rocbuild.run.engine.poolsize import PoolSizing
from rocbuild.run.engine.stepgate import StepGates
from rocbuild.run.state.state import StateDir, prefix_lock
from rocbuild.run.state.uptodate import Answers, Rule


class Sink(Protocol):
    """Where a run's console lines go (cli/output.py's Output and progress.LiveOutput)."""

    stream: TextIO  # where the end-of-run tables are printed too

    def say(self, text: str) -> None: ...

    def command(self, component: str, step: str, argv: list[str]) -> None: ...

    def build_line(self, component: str, step: str, line: str) -> None: ...

    def step_started(self, component: str, step: str, expected: float | None) -> None: ...

    def step_finished(self, component: str, step: str) -> None: ...

    def run_planned(self, expected: dict[tuple[str, str], float | None]) -> None: ...


@dataclass
class BuildContext:
    stack: Stack
    settings: Settings
    output: Sink
    offline: bool = False
    command: str | None = None  # the command line that continues this run (continuation.py)
    outcomes: list[StepOutcome] = field(default_factory=list)
    host_snapshot: Callable[[], resources.HostSnapshot] = hostload.snapshot
    _lock: contextlib.ExitStack | None = None
    # the run's job pool, a GNU make jobserver (jobs.open_pool: --parallel above 1, or plain
    # doit's worker threads), and its size as compiles start and end
    pool: JobPool | None = None
    pool_sizing: PoolSizing | None = None
    # how many compiles and light steps run at once (``rocbuild build``: engine.py)
    gates: StepGates | None = None
    # plain doit: its own -n and -P decide which steps run at once (jobs.pool_of)
    doit_threads: bool = False
    # the run was interrupted: a worker thread's step whose tool is ended now is interrupted
    interrupted: bool = False
    _in_flight: int = field(default=0, repr=False)  # steps running now (runner.py)
    _steps_cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _work: tuple[Stack, dict[str, float]] | None = field(default=None, repr=False)
    cache_choices: dict[str, Any] | None = None  # what --cache serves (cache_install.served)
    _children: proc.ChildRegistry | None = field(default=None, repr=False)
    _rule: Rule | None = field(default=None, repr=False)
    # each checkout's edits, read once per run and shared by every Rule of the run (a source
    # step of the checkout forgets its entry: runner.py)
    _edits: dict[str, dict[str, Any] | None] = field(default_factory=dict, repr=False)
    # which steps the run's Rules found current, until a step starts or ends (runner.py)
    answers: Answers = field(default_factory=Answers, repr=False)
    # checkouts this run's fetch made anew: nothing in them to look for until the patch step
    fresh_checkouts: set[str] = field(default_factory=set, repr=False)

    @classmethod
    def start(cls, stack: Stack, settings: Settings, output: Sink, **fields: Any
              ) -> BuildContext:
        """The context of a run that starts now: ``stack`` gets this host's compiler
        launchers (``_launched``). The constructor itself probes nothing."""
        ctx = cls(stack=stack, settings=settings, output=output, **fields)
        ctx.stack = ctx._launched(stack)
        return ctx

    def _launched(self, stack: Stack) -> Stack:
        """The run starts: its stack gets this host's compiler launchers (probed once per
        process; a stack given with launchers keeps them)."""
        if stack is None or stack.launch is not None:
            return stack
        return launchtools.launching(stack, self.settings)

    @property
    def ready(self) -> bool:
        return self._lock is not None

    @contextlib.contextmanager
    def step_in_flight(self) -> Iterator[None]:
        """A step runs (runner.py): ``wait_for_steps`` waits for it."""
        with self._steps_cond:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._steps_cond:
                self._in_flight -= 1
                self._steps_cond.notify_all()

    def wait_for_steps(self, timeout: float) -> None:
        """Until the steps of worker threads have ended (their tools were just ended: an
        interrupted run), so their logs and outcomes are complete before the summary."""
        with self._steps_cond:
            self._steps_cond.wait_for(lambda: self._in_flight == 0, timeout=timeout)

    def ensure_ready(self) -> None:
        """Take the workdir's run lock and the prefix lock (held until ``release``) and end
        the leftovers of a killed run, once per run (lifecycle.py's ready phase)."""
        if self._lock is not None:
            return
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self.state.lock())
            # then the prefix: two workdirs must not install into one prefix at once
            prefix_locked = stack.enter_context(prefix_lock(self.stack.prefix))
        except BaseException:
            stack.close()
            raise
        self._lock = stack
        for command in self.registry().reap_leftovers():
            self.output.say(f"ended a leftover process of an earlier run: {command}")
        leftovers.clean(self.stack.workdir, self.output.say)  # git locks, .old, stamp temps
        if prefix_locked:  # unpack folders and temp files of a killed install
            leftovers.clean_prefix(self.stack.prefix, self.output.say)
            # a damaged record of installed files protects nothing: rebuilt before any
            # install of this run could overwrite what it should have listed
            records.repair_records(self.stack.prefix, [
                self.stack.components[n] for n in self.stack.order], self.output.say)

    def release(self) -> None:
        """The run ends: its job pool, its watchdog and its locks go."""
        if self.pool is not None:
            self.pool.close()
        self.pool = self.pool_sizing = None
        if self._children is not None:
            self._children.close()  # the run's watchdog goes (proc.ChildRegistry)
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    @property
    def state(self) -> StateDir:
        return StateDir.of(self.stack)

    def registry(self) -> proc.ChildRegistry:
        """The run's children: one registry per context, so an interrupt kills them all."""
        if self._children is None:
            self._children = proc.ChildRegistry(self.state.work.running)
        return self._children

    def component(self, name: str) -> Component:
        return self.stack.components[name]

    def retarget(self, stack: Stack) -> None:
        """Run ``stack`` instead (plain doit learns what it runs from the tasks doit selected,
        after the tasks were made: lifecycle.Run.begin)."""
        self.stack, self._rule = self._launched(stack), None

    # --- the up-to-date rule lives in uptodate.py; one Rule per run ------------------------
    @property
    def rule(self) -> Rule:
        if self._rule is None or self._rule.stack is not self.stack:
            self._rule = self.rule_for(self.stack)
        return self._rule

    def rule_for(self, stack: Stack) -> Rule:
        """A Rule for ``stack`` (the run's own, or the whole default set at the end of a run)
        that shares the run's record of each checkout's edits."""
        return Rule(stack, self.state, _edits=self._edits, _answers=self.answers)

    def expected_inputs(self, comp: Component, step: str) -> dict[str, Any] | None:
        return self.rule.expected_inputs(comp, step)

    def is_current(self, comp: Component, step: str) -> bool:
        return self.rule.is_current(comp, step)

    def work_ahead(self) -> dict[str, float]:
        """Seconds of compile work on the longest chain from each component (schedule.py),
        worked out once per run: the order of the builds and of their dependencies."""
        if self._work is None or self._work[0] is not self.stack:
            self._work = (self.stack, schedule.remaining_work(self))
        return self._work[1]

    def expected_seconds(self, comp: Component, step: str) -> float | None:
        """How long the step took last time on this host (its stamp, even a stale one), else
        for compile the recipe's CPU-hour estimate spread over this host's CPUs."""
        return outcome.expected_seconds(self.state, comp, step, self.host_snapshot().cpus)
