"""`rocbuild build --json`: the run's outcome as one JSON document, for scripts.

Printed on stdout when the run ends (the step lines go to stderr then): the exit code with
its meaning, the command that continues, and every step the run touched with its result,
duration, jobs, peak memory, log and, for a failure, the message and the known cause.
"""

from __future__ import annotations

from typing import Any

from rocbuild.checks.diagnose import diagnose
from rocbuild.files import read_json
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import CURRENT, SERVED, StepOutcome

SCHEMA = 1
MEANING = {0: "success", 1: "a build step failed", 2: "bad input", 3: "busy",
           4: "verify found missing GPU code", 130: "interrupted"}


def _step(ctx: BuildContext, o: StepOutcome) -> dict[str, Any]:
    ran = o.result not in (CURRENT, SERVED)  # a step that did not run has no log of this run
    doc: dict[str, Any] = {"component": o.component, "step": o.step, "result": o.result,
                           "seconds": round(o.seconds, 1), "jobs": o.jobs,
                           "peak_rss": o.peak_rss or None, "oom_retries": o.oom_retries,
                           "log": str(o.log) if o.log and ran else None,
                           "warnings": list(o.warnings)}
    if o.result == "failed":
        found = diagnose([*o.first_error, *o.tail, *o.message.splitlines()],
                         context={"prefix": str(ctx.stack.prefix), "component": o.component,
                                  "workdir": str(ctx.stack.workdir),
                                  "command": ctx.command or ""})
        doc["message"] = o.message
        doc["tail"] = o.tail[-20:]
        doc["first_error"] = o.first_error  # the tool's first error (CMake's), [] if none
        doc["cause"] = None if found is None else {"id": found.id, "cause": found.cause,
                                                   "fix": found.fix,
                                                   "matched_line": found.matched_line}
    return doc


def to_json(ctx: BuildContext, exit_code: int) -> dict[str, Any]:
    verify = read_json(ctx.stack.work.verify_record)
    return {
        "rocbuild_build": SCHEMA,
        "exit_code": exit_code,
        "result": MEANING.get(exit_code, "error"),
        "prefix": str(ctx.stack.prefix),
        "workdir": str(ctx.stack.workdir),
        "targets": [str(t) for t in ctx.stack.targets],
        "continue": ctx.command if exit_code not in (0, 2) else None,
        "steps": [_step(ctx, o) for o in ctx.outcomes],
        "verify": verify if verify and verify.get("prefix") == str(ctx.stack.prefix) else None,
    }
