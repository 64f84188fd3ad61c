"""Running one step, for every kind of step: the one runner.

``run_step`` announces the step, marks it running (status shows it), calls the action the
step table binds to it (stepbind.py), stamps success last (state.py: atomic, so a kill never
marks unfinished work done), records a failure of a stamped step for `rocbuild status`, and
turns whatever went wrong into the step's failure: a BuildFailed as it is, a full disk or a
read-only file system as one message with its fix, and an error inside rocbuild with its
traceback in the step log. Every step writes one log (steptable.log_path), so a kill at any
moment loses nothing that had finished. This module knows nothing of doit.
"""

from __future__ import annotations

import contextlib
import math
import time
import traceback
from pathlib import Path

from rocbuild import faults, proc
from rocbuild.errors import BuildFailed, StateWriteError, interrupt_cause
from rocbuild.model import steptable
from rocbuild.model.graph import Component
from rocbuild.model.steptable import CHECK, RUN, STEP, StepKind
from rocbuild.run.engine import stepbind
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import (
    DONE,
    FAILED,
    INTERRUPTED,
    NOT_STARTED,
    SKIPPED,
    StepOutcome,
    step_logger,
)
from rocbuild.run.engine.stepgate import RunStopped
from rocbuild.run.state import running

INTERNAL_ERROR = "rocbuild error:"  # how the step log marks an error inside rocbuild


def label(kind: StepKind, name: str) -> str:
    """How the console names a step: ``alpha: configure``, or a run-wide step's title."""
    return kind.title if kind.who == RUN else f"{name}: {kind.name}"


def unit_of(kind: StepKind, name: str) -> str:
    """Whose step it is in logs, stamps and the summary: the component, or a run-wide
    step's own folder (``_python``)."""
    return kind.record[0] if kind.record is not None else name


def run_step(ctx: BuildContext, name: str, step: str) -> StepOutcome:
    """Run ``step`` of component ``name`` (any name for a run-wide step) once its gate lets it
    (``ctx.gates``: so many compiles, so many light steps at once); the outcome is also
    added to ``ctx.outcomes`` unless the step stood aside (SKIPPED) or never started
    (NOT_STARTED: the run stopped while it waited for its turn)."""
    kind = steptable.kind(step)
    if ctx.gates is None:
        return _run_step(ctx, name, step, kind)
    rank = math.inf if kind.who == RUN else ctx.work_ahead().get(name, 0.0)
    try:
        if kind.role == STEP and not kind.source and kind.who != RUN:
            ctx.gates.sources.wait()  # every source and option check of the run first
        with ctx.gates.for_step(step).slot(rank):
            return _run_step(ctx, name, step, kind)
    except RunStopped:
        return StepOutcome(name, step, NOT_STARTED)


def _run_step(ctx: BuildContext, name: str, step: str, kind: StepKind) -> StepOutcome:
    binding = stepbind.BINDINGS[step]
    comp = None if kind.who == RUN else ctx.component(name)
    unit, shown = unit_of(kind, name), label(kind, name)
    log = steptable.log_path(ctx.stack.work, unit, step)
    if kind.role != CHECK:  # a check takes a moment: it says only when it fails
        ctx.output.say(f"▶ {shown}")
    started = time.monotonic()
    # the summary's row: the component, or the run-wide step's title ("build venv")
    outcome = StepOutcome(name if comp is not None else kind.title, step, DONE, log=log)
    ctx.output.step_started(outcome.component, step,
                            ctx.expected_seconds(comp, step) if comp else None)
    if kind.role == STEP:  # an attempt a kill cut off counts in the step's total time
        killed = running.killed_attempt(ctx.stack.workdir, unit, step, log)
        if killed is not None:
            _count_attempt(ctx, unit, step, killed)
    try:
        # status shows the step running until its stamp or failure record is written (the
        # marker's file is removed last, so it never frees the space a full disk lacks)
        with ctx.step_in_flight(), running.mark(ctx.stack.workdir, unit, step):
            _run_action(ctx, kind, binding, comp, outcome, started)
            _report(ctx, kind, comp, shown, outcome)
    except (StateWriteError, OSError) as exc:  # the disk filled under a stamp or a log
        if isinstance(exc, OSError) and not faults.is_machine_fault(exc):
            raise
        error = exc if isinstance(exc, StateWriteError) else faults.explain(
            exc, near=(ctx.stack.workdir, ctx.stack.prefix))
        outcome.result, outcome.message = FAILED, f"{error}\nTIP: {error.tip}"
        ctx.output.say(f"✘ {shown}: {error}\nTIP: {error.tip}")
    except BaseException as exc:  # Ctrl-C, SIGTERM: the attempt ends here, and says so
        _end_line(log, f"interrupted by {interrupt_cause(exc)} after "
                       f"{time.monotonic() - started:.1f}s")
        # the summary's table lists the step that was running, as interrupted
        outcome.result, outcome.seconds = INTERRUPTED, time.monotonic() - started
        ctx.outcomes.append(outcome)
        if kind.role == STEP:
            _count_attempt(ctx, unit, step, outcome.seconds)
        raise
    if outcome.result == FAILED and kind.role == STEP:
        _count_attempt(ctx, unit, step, outcome.seconds)
    _end_line(log, f"{proc.STEP_END} {outcome.result} after {time.monotonic() - started:.1f}s")
    if outcome.result != SKIPPED:
        ctx.outcomes.append(outcome)
    return outcome


def _count_attempt(ctx: BuildContext, unit: str, step: str, seconds: float) -> None:
    """Keep an unfinished attempt's time for the step's total (its next stamp), so an
    estimate counts every attempt, not only the last. Bookkeeping: a state that cannot be
    written costs only the estimate."""
    with contextlib.suppress(OSError, StateWriteError):
        ctx.state.add_attempt(unit, step, seconds)


def _end_line(log: Path, text: str) -> None:
    """The step log's last line of this attempt, whatever the step ran (git through its own
    logger, a check, the cache): a later attempt then knows this one ended, and says
    "no end line" only after a real kill. A log that cannot be written (a full disk) keeps
    what it has: the step's outcome says why."""
    with contextlib.suppress(OSError):
        step_logger(log)(text)


def _run_action(ctx: BuildContext, kind: StepKind, binding: stepbind.Binding,
                comp: Component | None, outcome: StepOutcome, started: float) -> None:
    assert outcome.log is not None
    ctx.answers.forget()  # what is current may change from here on
    try:
        binding.action(ctx, comp, outcome.log, outcome)
        if outcome.result == DONE and kind.role == STEP:
            binding.stamp(ctx, comp, outcome, time.monotonic() - started)
    except BuildFailed as exc:
        # a worker thread's tool ended by the interrupt of the run (report phase): the step
        # was interrupted, as in the thread the signal reached, not failed
        outcome.result, outcome.message = (INTERRUPTED if ctx.interrupted else FAILED), str(exc)
        if exc.tip:
            outcome.message += f"\nTIP: {exc.tip}"
    except (StateWriteError, OSError) as exc:
        if isinstance(exc, StateWriteError) or faults.is_machine_fault(exc):
            raise  # no log can be written now; run_step says it
        _internal_error(outcome, comp, kind)
    except Exception:  # any error is still this step's failure
        _internal_error(outcome, comp, kind)
    finally:
        ctx.answers.forget()  # the step wrote its stamp, or changed its output and failed
        ctx.output.step_finished(outcome.component, kind.name)
        if kind.source and comp is not None:  # the checkout changed: read its edits again
            ctx.rule.forget_edits(comp.checkout)
    outcome.seconds = time.monotonic() - started


def _internal_error(outcome: StepOutcome, comp: Component | None, kind: StepKind) -> None:
    """rocbuild's own error, not the build's: the traceback goes into the step log, one line
    to the user, and the failure is recorded like any other."""
    assert outcome.log is not None
    step_logger(outcome.log)(f"{INTERNAL_ERROR}\n" + traceback.format_exc().rstrip())
    name = comp.name if comp is not None else outcome.component
    error = traceback.format_exc().rstrip().splitlines()[-1]
    outcome.result = FAILED
    outcome.message = (f"{name}: {kind.name} failed: {error}"
                       f"\n(an error inside rocbuild; the traceback is in {outcome.log})")


def _report(ctx: BuildContext, kind: StepKind, comp: Component | None, shown: str,
            outcome: StepOutcome) -> None:
    if outcome.result == DONE:
        if kind.role != CHECK:
            ctx.output.say(f"✔ {shown} ({outcome.seconds:.1f}s)")
    elif outcome.result == FAILED:
        # what status reads as a failed step: every kind's, the options check, the cache's
        # shortcut and a run-wide step (in its own folder) too, so plain `rocbuild status`
        # names any failure; the step's next success (its stamp) removes the record
        if comp is not None or kind.record is not None:
            ctx.state.record_failure(unit_of(kind, comp.name if comp else ""), kind.name,
                                     message=outcome.message,
                                     log=str(outcome.log), tail=outcome.tail[-20:],
                                     first_error=outcome.first_error,
                                     jobs=outcome.jobs, oom_retries=outcome.oom_retries,
                                     seconds=round(outcome.seconds, 1),
                                     peak_rss=outcome.peak_rss)
        if kind.role == CHECK:  # what it found is the whole story (the log lists the rest)
            ctx.output.say(f"✘ {shown}: {outcome.message}")
        else:
            ctx.output.say(f"✘ {shown} failed after {outcome.seconds:.1f}s — log: "
                           f"{outcome.log}")
