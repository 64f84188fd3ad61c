"""Run the task graph with doit in-process: reporter, signals and exit codes (DESIGN 3.4).

doit writes its DB only when a run ends and does not kill children on SIGTERM, so SIGTERM
becomes KeyboardInterrupt (doit's ``finally`` runs, our runner kills the process group) and
rocbuild's own stamps carry what finished.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from doit.cmd_base import ModuleTaskLoader
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskFailed
from rich.console import Console

from rocbuild.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_STEP_FAILED, EXIT_VERIFY_FAILED
from rocbuild.model.graph import Stack
from rocbuild.prefix import buildinfo
from rocbuild.run import continuation, finish, optcheck, preflight
from rocbuild.run.build import BuildContext, StepOutcome
from rocbuild.run.tasks import make_namespace

BACKENDS = {"BACKEND": {"durable": "rocbuild.run.state:DurableSqliteDB"}}
STEP_BASENAMES = ("fetch", "patch", "configure", "compile", "install")
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def make_reporter(ctx: BuildContext) -> type:
    """A doit reporter class bound to ``ctx``: our steps print their own start/end lines, so
    this one notes what was current and prints the summary at the end."""

    class RocbuildReporter:
        desc = "rocbuild console output"

        def __init__(self, outstream: TextIO, options: dict[str, Any]) -> None:
            self.outstream = outstream

        def initialize(self, tasks: Any, selected_tasks: Any) -> None:
            pass

        def get_status(self, task: Any) -> None:
            pass

        def execute_task(self, task: Any) -> None:
            pass

        def add_success(self, task: Any) -> None:
            pass

        def add_failure(self, task: Any, fail: Any) -> None:
            # a step's own failure (TaskFailed) was reported by the step; anything else is an
            # error in rocbuild or doit and must be shown whole
            if not isinstance(fail, TaskFailed) or task.name.split(":")[0] not in STEP_BASENAMES:
                ctx.output.say(f"✘ {task.name}: {fail.get_msg().strip()}")

        def skip_uptodate(self, task: Any) -> None:
            basename, _, component = task.name.partition(":")
            if basename in STEP_BASENAMES:
                ctx.outcomes.append(StepOutcome(component, basename, "current"))

        def skip_ignore(self, task: Any) -> None:
            ctx.output.say(f"!! {task.name} ignored (doit ignore); `doit forget {task.name}` "
                           "clears it")

        def cleanup_error(self, exception: Any) -> None:
            ctx.output.say(str(exception))

        def runtime_error(self, msg: str) -> None:
            ctx.output.say(f"rocbuild: doit error: {msg}")

        def teardown_task(self, task: Any) -> None:
            pass

        def complete_run(self) -> None:
            pass

    return RocbuildReporter


class SummaryPrinter(Protocol):
    def __call__(self, outcomes: Sequence[StepOutcome], stack: Stack, command: str | None,
                 out: Console, seconds: float, *, interrupted: bool = False) -> None: ...


@dataclass(frozen=True)
class Reports:
    """How the CLI layer shows the end of a run: the engine hands over the outcomes
    (``summary``, ui.print_build_summary), finish.py the verify report (``verify``)."""

    summary: SummaryPrinter
    verify: finish.VerifyPrinter


def _term_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_doit(ctx: BuildContext, task_names: Sequence[str], *, parallel: int = 1,
             keep_going: bool = False) -> int:
    """Run ``task_names`` through doit in this process; returns doit's exit code, or raises
    KeyboardInterrupt after the children are dead."""
    namespace = make_namespace(ctx)
    namespace["DOIT_CONFIG"].update(reporter=make_reporter(ctx), outfile=sys.stdout)
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
        ctx.registry().kill_all()  # worker threads may still own children in their own sessions
        raise
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def build(ctx: BuildContext, components: Sequence[str], whole: Stack, reports: Reports, *,
          parallel: int = 1, keep_going: bool = False, out: Console | None = None,
          verify: bool = True) -> int:
    """Build ``components`` (with everything they need), then write the environment files
    and build-info and run verify (finish.py); the summary goes to ``reports``; exit code.
    ``whole`` is the stack's whole default set, loaded with the run's stack (finish.py)."""
    console = out or Console(file=ctx.output.stream, highlight=False, width=120)
    started = time.monotonic()
    started_at = buildinfo.now()
    ctx.ensure_ready()
    if ctx.command:  # under the lock: the record names the run that holds the workdir
        continuation.record(ctx.stack.workdir, ctx.command)
    try:
        preflight.run(ctx)
        # every source first (a missing ref or a stale patch fails before any compiler runs)
        tasks = [f"sources:{c}" for c in components] + optcheck.tasks(ctx, components) \
            + [f"build:{c}" for c in components]
        doit_rc = run_doit(ctx, tasks, parallel=parallel, keep_going=keep_going)
    except KeyboardInterrupt:
        reports.summary(ctx.outcomes, ctx.stack, ctx.command, console,
                        time.monotonic() - started, interrupted=True)
        return EXIT_INTERRUPTED
    finally:
        ctx.release()
    failed = [o for o in ctx.outcomes if o.result == "failed"]
    reports.summary(ctx.outcomes, ctx.stack, ctx.command, console, time.monotonic() - started)
    if failed or doit_rc != 0:
        if not failed:
            ctx.output.say(f"rocbuild: doit stopped with exit code {doit_rc} (see above)")
        return EXIT_STEP_FAILED
    if not finish.finish(ctx, console, whole, reports.verify, verify=verify,
                         started=started_at):
        return EXIT_VERIFY_FAILED  # the exit-code table: 4 is what verify found wrong
    return EXIT_OK
