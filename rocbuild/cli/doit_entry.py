"""The namespace plain `doit` loads from dodo.py, built from settings like the CLI's.

`doit build:X` runs the graph `rocbuild build X` runs, with its two ends: a ``preflight``
task every step depends on (the same checks, before the first step), and, when every task of
the run succeeded, finish.py's environment files, build-info and verify after the last one
(a teardown of the ``build:`` tasks, which doit runs once the whole run is over).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

from doit import get_var
from doit.exceptions import TaskFailed
from rich.console import Console

from rocbuild.cli.cmd_build import reports
from rocbuild.errors import RocbuildError, report
from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.settings import resolve
from rocbuild.prefix import buildinfo, prefixguard
from rocbuild.run import finish, preflight
from rocbuild.run.build import BuildContext, Output
from rocbuild.run.engine import make_reporter
from rocbuild.run.tasks import make_namespace

PREFLIGHT_TASK = "preflight"
# the tasks that do work: each waits for preflight (build: and sources: only group others)
WORKING_BASENAMES = ("fetch", "patch", "configure", "compile", "install", "options", "cache",
                     "python-venv")


def _preflight_action(ctx: BuildContext) -> TaskFailed | None:
    try:
        ctx.ensure_ready()
        preflight.run(ctx)
    except RocbuildError as exc:  # a busy workdir, or what preflight found
        report(exc, sys.stderr)  # the CLI's message for bad input or a refused run
        return TaskFailed(str(exc))
    return None


class Finisher:
    """finish.py after the last task of a plain doit run, once, and only when no step
    failed (doit runs the teardown of every ``build:`` task that ran)."""

    def __init__(self, ctx: BuildContext, whole: Stack, verify: bool) -> None:
        self.ctx, self.whole, self.verify = ctx, whole, verify
        self.started, self.started_clock = buildinfo.now(), time.monotonic()
        self.done = False

    def __call__(self) -> None:
        if self.done or any(o.result == "failed" for o in self.ctx.outcomes):
            return
        self.done = True
        out = Console(file=self.ctx.output.stream, highlight=False, width=120)
        self.ctx.ensure_ready()
        try:
            reports().summary(self.ctx.outcomes, self.ctx.stack, self.ctx.command, out,
                              time.monotonic() - self.started_clock)
            finish.finish(self.ctx, out, self.whole, reports().verify, verify=self.verify,
                          started=self.started)
        finally:
            self.ctx.release()


def with_run_ends(namespace: dict[str, Any], ctx: BuildContext, whole: Stack,
                  verify: bool) -> dict[str, Any]:
    """``namespace`` with the preflight task first and finish.py after the last task."""
    task_build = namespace["task_build"]
    finisher = Finisher(ctx, whole, verify)

    def task_build_with_ends() -> Iterator[dict[str, Any]]:
        yield {"basename": PREFLIGHT_TASK, "doc": "preflight: host, disk and patch checks",
               "actions": [(_preflight_action, [ctx])], "verbosity": 2}
        for task in task_build():
            if task.get("basename") in WORKING_BASENAMES:
                task = {**task, "task_dep": [PREFLIGHT_TASK, *task.get("task_dep", [])]}
            elif task.get("basename") == "build":
                task = {**task, "teardown": [finisher]}
            yield task

    task_build_with_ends.__doc__ = task_build.__doc__
    return {**namespace, "task_build": task_build_with_ends}


def namespace_from_environment() -> dict[str, Any]:
    flags = {"target": get_var("target", None), "jobs": get_var("jobs", None)}
    try:
        settings = resolve({k: v for k, v in flags.items() if v is not None})
        stack = load_stack(settings)
        # the folders rocbuild never installs into, as for `rocbuild build` (plain doit has
        # no --allow-existing-prefix: an existing folder is the user's choice here)
        prefixguard.check(stack.prefix, allow_existing=True, workdir=stack.workdir)
    except RocbuildError as exc:  # same one-line message and exit code as the CLI
        raise SystemExit(report(exc, sys.stderr)) from None
    ctx = BuildContext(stack=stack, settings=settings, output=Output(sys.stdout))
    namespace = make_namespace(ctx)
    namespace["DOIT_CONFIG"]["reporter"] = make_reporter(ctx)
    verify = get_var("verify", "yes") not in ("no", "0", "false")  # like --no-verify
    return with_run_ends(namespace, ctx, stack, verify)
