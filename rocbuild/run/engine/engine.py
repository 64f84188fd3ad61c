"""Run the task graph with doit in-process: the reporter, signals and exit codes.

doit writes its DB only when a run ends and does not kill children on SIGTERM, so SIGTERM
becomes KeyboardInterrupt (doit's ``finally`` runs, our runner kills the process group) and
rocbuild's own stamps carry what finished. The phases of a run are lifecycle.py's; the
reporter here is the doit side of them for both ``rocbuild build`` and plain doit.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from doit.cmd_base import ModuleTaskLoader
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskFailed
from rich.console import Console

from rocbuild.errors import EXIT_INTERRUPTED
from rocbuild.model import steptable
from rocbuild.model.graph import Stack
from rocbuild.model.steptable import RUN, STEP
from rocbuild.run.engine import cache_install, jobs, lifecycle, optcheck, schedule, tasks
from rocbuild.run.engine import parallel as parallelism
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.lifecycle import Reports, Run
from rocbuild.run.engine.outcome import CURRENT, DONE, SERVED, StepOutcome
from rocbuild.run.engine.stepgate import StepGates

__all__ = ["Reports", "build", "make_namespace", "make_reporter", "run_doit"]
BACKENDS = {"BACKEND": {"durable": "rocbuild.run.state.doitdb:DurableSqliteDB"}}
# tasks that say their own failure (TaskFailed): every step kind, and the lifecycle's tasks
SELF_REPORTING = {k.name for k in steptable.STEPS} | {lifecycle.PREFLIGHT_TASK, tasks.BUILD}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def make_reporter(run: Run) -> type:
    """A doit reporter class bound to ``run``: our steps print their own start/end lines, so
    this one notes what doit was asked for and what was current, and ends the run."""
    ctx = run.ctx

    def _phase_reported(task: Any) -> None:
        if ctx.gates is not None:
            ctx.gates.sources.reported(task.name)

    class RocbuildReporter:
        desc = "rocbuild console output"

        def __init__(self, outstream: TextIO, options: dict[str, Any]) -> None:
            self.outstream = outstream

        def initialize(self, tasks: Any, selected_tasks: Any) -> None:
            run.begin(list(selected_tasks or []))

        def get_status(self, task: Any) -> None:
            pass

        def execute_task(self, task: Any) -> None:
            pass

        def add_success(self, task: Any) -> None:
            _phase_reported(task)

        def add_failure(self, task: Any, fail: Any) -> None:
            _phase_reported(task)
            run.failed_tasks.append(task.name)
            if ctx.gates is not None and not run.keep_going:  # doit hands out no more
                ctx.gates.stop()  # steps; those it did and that wait for their turn, too
            # a step's own failure (TaskFailed) was reported by the step; anything else is an
            # error in rocbuild or doit and must be shown whole
            if not isinstance(fail, TaskFailed) or task.name.split(":")[0] not in SELF_REPORTING:
                ctx.output.say(f"✘ {task.name}: {fail.get_msg().strip()}")

        def skip_uptodate(self, task: Any) -> None:
            _phase_reported(task)
            basename, _, component = task.name.partition(":")
            kind = steptable.BY_NAME.get(basename)
            if kind is not None and kind.role == STEP and kind.who != RUN:
                # stamped by this run's cache step, which installed the component: the
                # step never ran here, and a script reading `build --json` must see that
                served = component in (ctx.cache_choices or {}) and any(
                    o.component == component and o.step == "cache" and o.result == DONE
                    for o in ctx.outcomes)
                ctx.outcomes.append(StepOutcome(component, basename,
                                                SERVED if served else CURRENT))

        def skip_ignore(self, task: Any) -> None:
            _phase_reported(task)
            ctx.output.say(f"!! {task.name} ignored (doit ignore); `doit forget {task.name}` "
                           "clears it")

        def cleanup_error(self, exception: Any) -> None:
            ctx.output.say(str(exception))

        def runtime_error(self, msg: str) -> None:
            ctx.output.say(f"rocbuild: doit error: {msg}")

        def teardown_task(self, task: Any) -> None:
            pass

        def complete_run(self) -> None:
            lifecycle.at_end(run, interrupted=lifecycle.interrupted_now())

    return RocbuildReporter


def make_namespace(run: Run) -> dict[str, Any]:
    """The doit namespace of ``run``: the step graph with the lifecycle's hooks, and the
    reporter that ends the run."""
    namespace = tasks.make_namespace(run.ctx, lambda: lifecycle.before_tasks(run),
                                     lambda task: lifecycle.after_tasks(run, task))
    namespace["DOIT_CONFIG"]["reporter"] = make_reporter(run)
    return namespace


def _term_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_doit(run: Run, task_names: Sequence[str], *, parallel: int = 1,
             keep_going: bool = False) -> int:
    """Run ``task_names`` through doit in this process; returns doit's exit code, or raises
    KeyboardInterrupt after the children are dead (the report phase ends them)."""
    namespace = make_namespace(run)
    namespace["DOIT_CONFIG"].update(outfile=sys.stdout)
    argv: list[str] = []
    if parallel > 1:
        argv += ["-n", str(parallel), "-P", "thread"]
    if keep_going:
        argv.append("--continue")
    argv += list(task_names)
    # SIGTERM and SIGHUP (the terminal or ssh session of the build went away) end the run as
    # Ctrl-C does: children ended, what finished kept, exit 130
    old = {sig: signal.signal(sig, _term_to_interrupt) for sig in STOP_SIGNALS}
    try:
        return DoitMain(ModuleTaskLoader(namespace), config_filenames=(),
                        extra_config=BACKENDS).run(argv)
    except KeyboardInterrupt:
        lifecycle.at_end(run, interrupted=True)  # when doit stopped before its own end
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def workers(ctx: BuildContext, at_once: int) -> int:
    """doit's worker threads: where two components of the run can have steps at the same
    time (neither needs the other), one per component and one for a run-wide step, so every
    component can have its next step waiting at its gate (stepgate.py) and none waits for a
    thread; for a chain, ``at_once`` (1: no threads, one step after another)."""
    order = ctx.stack.order
    needs = {name: set(ctx.stack.closure(name)) for name in order}
    if any(a not in needs[b] and b not in needs[a] for a, b in itertools.combinations(order, 2)):
        return len(order) + 1
    return at_once


def sources_phase(ctx: BuildContext, first: list[str]) -> list[str]:
    """The tasks of the sources phase that steps of a build wait for: every ``sources:``
    task, and the option checks of components built here (a served one's check comes after
    its cache step, itself a step that waits: it would never end)."""
    return [t for t in first if not (t.startswith(f"{optcheck.STEP}:") and
                                     cache_install.is_served(ctx, t.partition(":")[2]))]


def build(ctx: BuildContext, components: Sequence[str], whole: Stack, reports: Reports, *,
          out: Console, parallel: int | str = 1, keep_going: bool = False,
          verify: bool = True) -> int:
    """Build ``components`` (with everything they need) through the run's phases
    (lifecycle.py): the summary goes to ``reports``; the exit code. ``whole`` is the stack's
    whole default set, loaded with the run's stack (finish.py). A refusal before any step
    (busy, preflight) is raised, as the CLI reports it."""
    # the CLI's own console (cli/ui.py): the one that escapes what it prints
    run = Run(ctx, reports, out, whole, verify=verify, components=list(components),
              keep_going=keep_going)
    # every source first (a missing ref or a stale patch fails before any compiler runs),
    # then every option check, then the builds
    try:
        if lifecycle.before_tasks(run) is not None:  # the locks, preflight: before doit
            lifecycle.at_end(run)
            assert run.refusal is not None
            raise run.refusal
        at_once, why = parallelism.decide(ctx, parallel, components)
        if why:
            ctx.output.say(why)
        threads = workers(ctx, at_once)
        if threads > 1:  # light steps beside the compiles, at any --parallel
            ctx.gates = StepGates.of(at_once, parallelism.light_steps(at_once))
            components = schedule.longest_first(list(components), ctx.work_ahead())
        if at_once > 1:  # their compiles draw from one pool
            jobs.open_pool(ctx, at_once)
        sources = [f"{tasks.SOURCES}:{c}" for c in components] + optcheck.tasks(ctx, components)
        if ctx.gates is not None:  # threads take any ready step: builds wait for the phase
            ctx.gates.sources.expect(sources_phase(ctx, sources))
        names = sources + [f"{tasks.BUILD}:{c}" for c in components]
        with (schedule.doit_longest_first(ctx.work_ahead()) if threads > 1
              else contextlib.nullcontext()):
            doit_rc = run_doit(run, names, parallel=threads, keep_going=keep_going)
    except KeyboardInterrupt:
        if ctx.gates is not None:  # no waiting step starts while the run ends
            ctx.gates.stop()
        lifecycle.at_end(run, interrupted=True)
        return EXIT_INTERRUPTED
    finally:
        ctx.gates = None
        ctx.release()
    return run.exit_code(doit_rc)
