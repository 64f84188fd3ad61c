"""Run state as the commands that show it read it: status, logs, info, list, clean, plan,
doctor and the build's summary ask here, and nothing here writes. Which steps are current
(``rule``), the steps running now and those a stop cut off, a failure or a stamp, the
configuration a view shows and the workdir's other stacks, what the compiler launchers
saved, the run installing into a prefix now. What writes state (a run, clean's deletions,
the memos of a base and a prefix) uses the modules themselves."""

from __future__ import annotations

from typing import Any

from rocbuild.model.graph import Stack
from rocbuild.model.workdir import Workdir
from rocbuild.run.state.launchstats import status_text as launch_saved
from rocbuild.run.state.launchstats import summary_lines as launch_summary
from rocbuild.run.state.prefixmemo import SOURCE_PREFIX as REMEMBERED_PREFIX
from rocbuild.run.state.running import interrupted as interrupted_steps
from rocbuild.run.state.running import steps as running_steps
from rocbuild.run.state.state import StateDir, installing_now
from rocbuild.run.state.uptodate import Answers, Rule
from rocbuild.run.state.workdirs import other_stacks, viewed_prefix

__all__ = ["REMEMBERED_PREFIX", "Rule", "failure", "installing_now", "interrupted_steps",
           "launch_saved",
           "launch_summary", "other_stacks", "rule", "running_steps", "stamp", "viewed_prefix"]


def rule(stack: Stack) -> Rule:
    """The up-to-date rule for a command that runs nothing: each answer kept to its end."""
    return Rule(stack, StateDir.of(stack), _answers=Answers())


def failure(work: Workdir, component: str) -> dict[str, Any] | None:
    return StateDir(work).read_failure(component)


def stamp(stack: Stack, component: str, step: str) -> dict[str, Any] | None:
    return StateDir.of(stack).read_stamp(component, step)
