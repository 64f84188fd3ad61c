"""One run's lifecycle: the phases every build goes through, in one list.

    ready -> preflight -> tasks -> finish -> verify -> report

``rocbuild build`` (engine.py) and plain ``doit build:X`` (cli/doit_entry.py) run the same
doit graph (tasks.py) with the same hooks, so they run the same phases in the same order:

- the phases before the tasks are the ``preflight`` task, which every working task depends
  on (so it runs first, whatever doit was asked for; the CLI runs them just before it starts
  doit, so doit's DB is opened under the run's lock and a refusal never touches it);
- ``tasks`` is the step graph itself;
- the phases after it run in the action of the last ``build:<component>`` task doit was
  asked for, once every task of the run succeeded (a failed verify fails that task, so doit
  reports it and exits non-zero);
- ``report`` runs when doit ends the run (the reporter's complete_run, engine.py), failure,
  interrupt or not: the summary, then the locks are released.

Refusals before any step (a busy workdir, what preflight found) stop the run; the CLI
re-raises them after doit returns so its error boundary prints them with their exit code,
plain doit prints them at once.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from doit.exceptions import TaskFailed
from rich.console import Console

from rocbuild import faults
from rocbuild.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STEP_FAILED,
    EXIT_VERIFY_FAILED,
    RocbuildError,
    report,
)
from rocbuild.model.graph import Stack
from rocbuild.prefix import buildinfo
from rocbuild.run.engine import continuation, finish, preflight
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import FAILED, StepOutcome

BEFORE, TASKS, AFTER, LAST = "before the tasks", "the tasks", "after the tasks", "at the end"
STEPS_END_GRACE = 15.0  # seconds an interrupted run waits for its worker threads' steps
PREFLIGHT_TASK = "preflight"  # the doit task of the phases before the tasks
BUILD = "build"  # build:<component>: the last one asked for runs the phases after the tasks


class SummaryPrinter(Protocol):
    def __call__(self, outcomes: Sequence[StepOutcome], stack: Stack, command: str | None,
                 out: Console, seconds: float, *, interrupted: bool = False) -> None: ...


@dataclass(frozen=True)
class Reports:
    """How the CLI layer shows the end of a run: the outcomes (``summary``,
    ui.print_build_summary) and the verify report (``verify``, cmd_verify.print_report)."""

    summary: SummaryPrinter
    verify: finish.VerifyPrinter


@dataclass
class Run:
    """One run: its context and what its phases found so far."""

    ctx: BuildContext
    reports: Reports
    console: Console
    whole: Stack | None  # the stack's whole default set (finish); None: loaded by ``begin``
    verify: bool = True
    keep_going: bool = False  # --keep-going: a failed step does not stop the others
    # what was asked for; None: what doit was asked for (``begin``, plain doit)
    components: list[str] | None = None
    # the CLI re-raises a refusal after doit (its error boundary prints it); plain doit
    # prints it when it happens
    raise_refusals: bool = True
    # plain doit: the run's stack and the whole default set for what doit was asked for
    # (None: the default set), once doit says what that is
    load: Callable[[list[str] | None], tuple[Stack, Stack]] | None = None
    default_tasks: tuple[str, ...] = ()  # plain doit's tasks when it is given none
    started_at: str = field(default_factory=buildinfo.now)
    started: float = field(default_factory=time.monotonic)
    selected_builds: tuple[str, ...] = ()
    builds_done: set[str] = field(default_factory=set)
    failed_tasks: list[str] = field(default_factory=list)
    refusal: RocbuildError | None = None
    began: bool = False  # the phases before the tasks ran
    finished: finish.Finished | None = None
    verify_ok: bool = True
    ended: bool = False  # the phases after the tasks ran
    reported: bool = False
    interrupted: bool = False

    # --- what doit was asked for -----------------------------------------------------------
    def begin(self, selected: Sequence[str]) -> None:
        """doit's selection is known (the reporter's initialize): the last ``build:`` task in
        it ends the run; plain doit also learns here which components it runs."""
        self.selected_builds = tuple(n for n in selected if n.split(":", 1)[0] == BUILD)
        if self.components is None and self.load is not None:
            default = tuple(selected) == self.default_tasks
            asked = sorted({n.split(":", 1)[1] for n in selected if ":" in n})
            stack, whole = self.load(None if default or not asked else asked)
            self.ctx.retarget(stack)
            self.whole = whole
            self.components = list(stack.order)

    # --- the exit code ------------------------------------------------------------------------
    def exit_code(self, doit_rc: int) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        failed = any(o.result == FAILED for o in self.ctx.outcomes)
        if failed or (doit_rc != 0 and self.verify_ok):
            if not failed:
                self.ctx.output.say(f"rocbuild: doit stopped with exit code {doit_rc} (see above)")
            return EXIT_STEP_FAILED
        # the exit-code table: 4 is what verify found wrong
        return EXIT_OK if self.verify_ok else EXIT_VERIFY_FAILED


# --- the phases -------------------------------------------------------------------------------
def ready(run: Run) -> None:
    """Take the workdir's and the prefix's locks, end a killed run's leftovers, and record
    the command that continues this run (under the lock: the record names the run that holds
    the workdir)."""
    run.ctx.ensure_ready()
    if run.ctx.command:
        continuation.record(run.ctx.stack.work, run.ctx.command)


def check_before(run: Run) -> None:
    """Host, disk, tools, offline sources and patches, before any step (preflight.py)."""
    preflight.run(run.ctx)


def finish_phase(run: Run) -> None:
    """The environment files, and the build-info of a partly built stack."""
    assert run.whole is not None
    run.finished = finish.finish(run.ctx, run.console, run.whole, started=run.started_at)


def verify_phase(run: Run) -> None:
    """Verify a complete stack and write its build-info (complete once verify passed)."""
    assert run.finished is not None
    run.verify_ok = finish.verify(run.ctx, run.console, run.finished, run.reports.verify,
                                  verify=run.verify)


def report_phase(run: Run) -> None:
    """End an interrupted run's children, show the summary, release the locks."""
    ctx = run.ctx
    try:
        if run.interrupted:  # worker threads may still own children in their own sessions
            ctx.interrupted = True
            ctx.registry().kill_all()
            ctx.wait_for_steps(timeout=STEPS_END_GRACE)
        if run.refusal is None:  # a refused run's message is the whole story
            run.reports.summary(ctx.outcomes, ctx.stack, ctx.command, run.console,
                                time.monotonic() - run.started, interrupted=run.interrupted)
    finally:
        ctx.release()


@dataclass(frozen=True)
class Phase:
    name: str
    at: str  # BEFORE, TASKS, AFTER or LAST: where doit runs it
    run: Callable[[Run], None] | None  # None for the tasks, which doit runs


PHASES: tuple[Phase, ...] = (
    Phase("ready", BEFORE, ready),
    Phase("preflight", BEFORE, check_before),
    Phase("tasks", TASKS, None),
    Phase("finish", AFTER, finish_phase),
    Phase("verify", AFTER, verify_phase),
    Phase("report", LAST, report_phase),
)


def _run_phases(run: Run, at: str) -> None:
    for phase in PHASES:
        if phase.at == at and phase.run is not None:
            phase.run(run)


# --- the hooks doit calls ---------------------------------------------------------------------
def before_tasks(run: Run) -> TaskFailed | None:
    """The phases before the tasks, once: the ``preflight`` task's action, which the CLI
    calls itself before doit starts (so doit opens its DB under the run's lock)."""
    if run.began:
        return None if run.refusal is None else TaskFailed(str(run.refusal))
    run.began = True
    try:
        _run_phases(run, BEFORE)
    except RocbuildError as exc:  # a busy workdir, or what preflight found
        run.refusal = exc
        if not run.raise_refusals:
            report(exc, sys.stderr)  # the CLI's message for bad input or a refused run
        return TaskFailed(str(exc))
    return None


def after_tasks(run: Run, task: str) -> TaskFailed | None:
    """The action of ``build:<component>``: when it is the last one doit was asked for and
    every task so far succeeded, the phases after the tasks; a failed verify fails it."""
    run.builds_done.add(task)
    if (run.ended or not run.selected_builds
            or not set(run.selected_builds) <= run.builds_done):
        return None
    run.ended = True
    if run.failed_tasks or any(o.result == FAILED for o in run.ctx.outcomes):
        return None  # --keep-going went on past a failure: the stack is not finished
    try:
        _run_phases(run, AFTER)
    except (RocbuildError, OSError) as exc:
        # every step succeeded; what could not be written after them (a full prefix under
        # the env files) is one message and a failed run, never doit's PythonAction traceback
        # (bookkeeping outside the prefix only warns: finish.py, prefix/registry.py)
        error = exc if isinstance(exc, RocbuildError) else faults.explain(exc)
        report(error, sys.stderr)
        return TaskFailed(str(error))
    if not run.verify_ok:
        return TaskFailed("verify found installed files without code for a target or "
                          "without their libraries (see its report above)")
    return None


def at_end(run: Run, *, interrupted: bool = False) -> None:
    """doit ended the run (or it was interrupted): the last phases, once."""
    if run.reported:
        return
    run.reported = True
    run.interrupted = run.interrupted or interrupted
    _run_phases(run, LAST)


def interrupted_now() -> bool:
    """Whether a KeyboardInterrupt (Ctrl-C, or SIGTERM as engine.py turns it) is on its way
    out: doit calls its reporter's complete_run from a ``finally`` as the interrupt passes."""
    return isinstance(sys.exc_info()[1], KeyboardInterrupt)
