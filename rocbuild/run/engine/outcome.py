"""What one step did (StepOutcome) and where its log is: shared by the build context, the
step actions and the reports, so none of them imports another for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild import proc
from rocbuild.model.graph import Component
from rocbuild.model.steptable import log_path
from rocbuild.run.state.state import StateDir

__all__ = ["StepOutcome", "expected_seconds", "log_path", "step_logger"]
DONE, FAILED, CURRENT = "done", "failed", "current"
# a step the run never ran: the binary cache installed the component and stamped its steps
SERVED = "served from cache"
# a step that stood aside (the binary cache refused its artifact): no outcome is kept, the
# component's own steps come next
SKIPPED = "skipped"
# a step that was running when the run was stopped (Ctrl-C, SIGTERM): the summary lists it
INTERRUPTED = "interrupted"
# a step that waited for its turn (stepgate.py) when the run stopped: it never ran, and no
# outcome is kept; doit sees a failure, so nothing that needs it runs
NOT_STARTED = "not started"


def step_logger(log: Path) -> Callable[[str], None]:
    """A function that appends one line of rocbuild's own to the step log ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)

    def write(text: str) -> None:
        with proc.open_log(log) as f:  # never through a link put in its place
            f.write((proc.stamped(text) + "\n").encode("utf-8", "replace"))

    return write


@dataclass
class StepOutcome:
    component: str
    step: str
    result: str  # DONE, FAILED, CURRENT, SERVED, INTERRUPTED (SKIPPED while the step runs)
    seconds: float = 0.0
    jobs: int | None = None
    peak_rss: int = 0
    message: str = ""
    log: Path | None = None
    tail: list[str] = field(default_factory=list)
    first_error: list[str] = field(default_factory=list)  # BuildSystem.first_error, failed
    record: dict[str, Any] = field(default_factory=dict)  # step facts kept in its stamp
    oom_retries: int = 0
    warnings: list[str] = field(default_factory=list)


def expected_seconds(state: StateDir, comp: Component, step: str, cpus: int) -> float | None:
    """How long the step took last time on this host (its stamp, even a stale one: the
    attempts of its last run added up, from its last run the compiler cache did not mostly
    serve; actions.time_history), else for compile the recipe's CPU-hour estimate spread
    over this host's CPUs."""
    stamp = state.read_stamp(comp.name, step)
    for key in ("cold_seconds", "attempts_seconds", "seconds"):  # newest facts first
        if stamp and isinstance(stamp.get(key), (int, float)):
            return float(stamp[key])
    hours = comp.recipe.resources.get("cpu_hours")
    return float(hours) * 3600 / max(cpus, 1) if step == "compile" and hours else None
