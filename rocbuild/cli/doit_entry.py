"""The namespace plain `doit` loads from dodo.py, built from settings like the CLI's.

`doit build:X` runs the graph `rocbuild build X` runs, through the same phases
(run/engine/lifecycle.py: ready -> preflight -> tasks -> finish -> verify -> report): the same
``preflight`` task first, the same end of the run in the last ``build:`` task it was asked
for (a failed verify fails that task, so doit exits non-zero), the same summary, build-info
and ``state/last-build.json``. Every component `rocbuild build` accepts has its tasks, not
only the stack's default set; the run's stack is the closure of what doit was asked for.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from doit import get_var

from rocbuild.checks import hostload, trust
from rocbuild.cli import ui
from rocbuild.cli.cmd_build import reports
from rocbuild.cli.output import Output
from rocbuild.errors import RocbuildError, notice, report
from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.recipes import load_recipes
from rocbuild.model.settings import Settings, resolve
from rocbuild.prefix import prefixguard
from rocbuild.run.engine import continuation, engine, tasks
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.lifecycle import Run
from rocbuild.run.state import basememo, prefixmemo


def _loader(settings: Settings) -> Callable[[list[str] | None], tuple[Stack, Stack]]:
    def load(asked: list[str] | None) -> tuple[Stack, Stack]:
        """(the run's stack, the whole default set) for the components doit was asked for
        (None: the default set, like a bare `rocbuild build`)."""
        whole = load_stack(settings)
        return (whole if asked is None else load_stack(settings, asked)), whole
    return load


def namespace_from_environment() -> dict[str, Any]:
    flags = {"target": get_var("target", None), "jobs": get_var("jobs", None)}
    try:
        chosen = resolve({k: v for k, v in flags.items() if v is not None},
                         os.environ, Path.cwd(), hostload.usable_cpus()[0],
                         trust.host_trust(os.environ))
        for warning in chosen.warnings:  # files others could write, passed over
            notice(f"rocbuild: warning: {warning}")
        settings = prefixmemo.apply(basememo.apply(chosen))
        default = load_stack(settings)
        # the folders rocbuild never installs into, as for `rocbuild build` (plain doit has
        # no --allow-existing-prefix: an existing folder is the user's choice here)
        prefixguard.check(default.prefix, allow_existing=True, workdir=default.workdir)
        # tasks for every recipe, so `doit build:X` accepts what `rocbuild build X` does
        every = load_stack(settings, sorted(
            load_recipes(settings.recipes, settings.overlay).recipes))
    except RocbuildError as exc:  # same one-line message and exit code as the CLI
        raise SystemExit(report(exc, sys.stderr)) from None
    output = Output(sys.stdout)
    ctx = BuildContext.start(stack=every, settings=settings, output=output,
                       command=continuation.doit_command_line(sys.argv[1:], settings,
                                                              Path.cwd()), doit_threads=True)
    default_tasks = tuple(f"{tasks.BUILD}:{name}" for name in default.order)
    run = Run(ctx, reports(), ui.console(output.stream, stamped=True),
              default, verify=get_var("verify", "yes") not in ("no", "0", "false"),
              components=None, raise_refusals=False, load=_loader(settings),
              default_tasks=default_tasks)  # verify=no is like --no-verify
    namespace = engine.make_namespace(run)
    namespace["DOIT_CONFIG"]["default_tasks"] = list(default_tasks)
    return namespace
