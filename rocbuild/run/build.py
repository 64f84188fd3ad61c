"""The build context of one run, and running one step of a component.

BuildContext holds what a run shares: the stack, the settings, the console output, the
outcomes so far, the run and prefix locks, the job budget of --parallel and what --cache
serves. ``run_step`` times one step action (actions.py), stamps success last (state.py), and
records failure; the up-to-date rule is uptodate.py's, the job counts and the OOM retry
jobs.py's. tasks.py turns steps into doit tasks; this module knows nothing of doit. Every
step writes one log ``<workdir>/logs/<component>/<step>.log``, so a kill at any moment loses
nothing that had finished and never marks unfinished work done.
"""

from __future__ import annotations

import contextlib
import shlex
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from rocbuild import proc
from rocbuild.errors import BuildFailed
from rocbuild.model import resources
from rocbuild.model.graph import Component, Stack
from rocbuild.model.settings import Settings
from rocbuild.run import actions, leftovers, outcome, running
from rocbuild.run.jobs import JobBudget
from rocbuild.run.outcome import StepOutcome, log_path, step_logger
from rocbuild.run.state import StateDir, prefix_lock
from rocbuild.run.uptodate import Rule

__all__ = ["BuildContext", "Output", "StepOutcome", "log_path"]


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

    def command(self, component: str, step: str, argv: list[str]) -> None:
        """``+ command`` before a step's program starts (cibuildwheel's habit), on plain
        output, so a log of the console shows what ran; the bars of a terminal leave it out
        (the step log has it either way)."""
        self.say(f"+ {shlex.join(argv)}")

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
    budget: JobBudget = field(default_factory=JobBudget)
    cache_choices: dict[str, Any] | None = None  # what --cache serves (cache_install.served)
    _children: proc.ChildRegistry | None = field(default=None, repr=False)

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
                actions.STEP_ACTIONS[step](self, comp, log, outcome)
                if outcome.result == "done":
                    actions.write_stamp(self, comp, step, outcome, time.monotonic() - started)
            except BuildFailed as exc:
                outcome.result, outcome.message = "failed", str(exc)
                if exc.tip:
                    outcome.message += f"\nTIP: {exc.tip}"
            except Exception as exc:  # any error is still this step's failure
                # rocbuild's own error, not the build's: the traceback goes into the step log,
                # one line to the user, and the failure is recorded like any other
                step_logger(log)("rocbuild error:\n" + traceback.format_exc().rstrip())
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

    def expected_seconds(self, comp: Component, step: str) -> float | None:
        """How long the step took last time on this host (its stamp, even a stale one), else
        for compile the recipe's CPU-hour estimate spread over this host's CPUs."""
        return outcome.expected_seconds(self.state, comp, step, self.host_snapshot().cpus)
