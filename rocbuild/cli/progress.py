"""Live progress on a terminal: the running steps, their elapsed time, ninja's ``[n/m]`` as a
bar, and an ETA from this host's last run of the step (or the recipe's estimate before there
is one). Off a terminal (CI logs, nohup) rocbuild prints plain lines instead (output.Output).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.constrain import Constrain
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from rocbuild.cli import ui
from rocbuild.cli.output import Output

_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")


def ninja_progress(line: str) -> tuple[int, int] | None:
    """(done, total) from a ninja status line such as ``[1234/5678] Building CXX ...``."""
    match = _NINJA.match(line)
    if not match:
        return None
    done, total = int(match.group(1)), int(match.group(2))
    return (done, total) if total > 0 else None


def eta_seconds(elapsed: float, fraction: float | None, expected: float | None) -> float | None:
    """Seconds left. Once ninja has done a tenth of the work its own pace is the better guide;
    before that, the step's recorded (or estimated) duration."""
    if fraction is not None and fraction >= 0.1:
        return max(elapsed / fraction - elapsed, 0.0)
    return max(expected - elapsed, 0.0) if expected is not None else None


def step_eta(elapsed: float, fraction: float | None, expected: float | None) -> str:
    """The step's ETA text, asked at every redraw: a step past its estimate (no ninja pace
    yet) says by how much ("19s over estimate"), not "ETA 0s"."""
    if overruns(elapsed, fraction, expected):
        assert expected is not None
        return f"{format_span(elapsed - expected)} over estimate"  # short: fits beside a bar
    return format_eta(eta_seconds(elapsed, fraction, expected))


def overruns(elapsed: float, fraction: float | None, expected: float | None) -> bool:
    """The step ran past its estimate and ninja gives no pace to estimate from."""
    return (fraction is None or fraction < 0.1) and expected is not None and elapsed > expected


def format_span(seconds: float) -> str:
    """12s, 4m05s, 2h10m."""
    if seconds < 60:
        return f"{int(seconds)}s"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes}m{int(seconds) % 60:02d}s"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    if seconds < 60:  # "ETA 0m" for the last minute said nothing
        return f"ETA {int(seconds)}s"
    minutes = int(seconds // 60)
    return f"ETA {minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"ETA {minutes}m"


def run_eta(expected: dict[tuple[str, str], float | None], finished: set[tuple[str, str]],
            running: dict[tuple[str, str], float | None]) -> float | None:
    """Seconds left in the whole run: the expected time of each step still to start, plus
    what each running step has left (``running``: its own ETA). None when nothing is known."""
    known = [v for k, v in expected.items()
             if k not in finished and k not in running and v is not None]
    left = [v for v in running.values() if v is not None]
    return sum(known) + sum(left) if known or left else None


def finish_clock(seconds: float | None) -> str:
    """'ETA 3h02m, done about 04:15' for the whole run."""
    if seconds is None:
        return "ETA ?"
    at = time.strftime("%H:%M", time.localtime(time.time() + seconds))
    return f"{format_eta(seconds)}, done about {at}"


@dataclass
class _Running:
    task: TaskID
    started: float
    expected: float | None
    fraction: float | None = None


class _EtaColumn(ProgressColumn):
    """The ETA of a bar, computed when the bar is drawn (4 times a second): a step that
    prints nothing (configure, a Tensile run) still counts down, and says when it overruns."""

    def __init__(self, live: LiveOutput) -> None:
        super().__init__()
        self.live = live

    def render(self, task: Task) -> Text:
        return Text(self.live.eta_text(task.id))


class _Panel(Progress):
    """The live panel, two columns narrower than the terminal: a line as wide as the terminal
    leaves the cursor in its last column, where the "^C" the terminal echoes on Ctrl-C starts
    a new line, and the panel's erase on stop would leave its first line above the summary."""

    def get_renderable(self) -> RenderableType:
        return _TwoColumnsNarrower(super().get_renderable())


class _TwoColumnsNarrower:
    """``renderable`` laid out two columns narrower than the space it is given."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Constrain(self.renderable, max(options.max_width - 2, 20))


class LiveOutput(Output):
    """Output for a terminal: rocbuild's own lines scroll above a live panel of bars."""

    def __init__(self, stream: TextIO, console: Console | None = None) -> None:
        super().__init__(stream, show_build_output=False)
        self.console = console or ui.console(stream)
        self.progress = _Panel(TextColumn("{task.description}"), BarColumn(),
                               TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
                               _EtaColumn(self), console=self.console,
                               transient=True, refresh_per_second=4)
        self._running: dict[tuple[str, str], _Running] = {}
        self._guard = threading.Lock()
        # the whole run: each step's expected time (run_planned), and which have ended
        self._expected: dict[tuple[str, str], float | None] = {}
        self._finished: set[tuple[str, str]] = set()
        self._run_task: TaskID | None = None

    def command(self, component: str, step: str, argv: list[str]) -> None:
        """The bars show the step; its command is in the step log."""

    def run_planned(self, expected: dict[tuple[str, str], float | None]) -> None:
        with self._guard:
            self._expected = dict(expected)

    def eta_text(self, task: TaskID) -> str:
        """What the ETA column shows for ``task`` now: the whole run's, or one step's."""
        now = time.monotonic()
        running = dict(self._running)  # drawn from rich's thread: a copy, no lock needed
        if task == self._run_task:
            left = {k: eta_seconds(now - r.started, r.fraction, r.expected)
                    for k, r in running.items()}
            rest = run_eta(self._expected, self._finished, left)
            if any(overruns(now - r.started, r.fraction, r.expected) for r in running.values()):
                # a step past its estimate: the run's end is not known
                return "ETA ?: a step overran"
            return finish_clock(rest)
        return next((step_eta(now - r.started, r.fraction, r.expected)
                     for r in running.values() if r.task == task), "")

    def _update_run(self) -> None:
        """The whole-run line above the steps (call with the guard held)."""
        if not self._expected:
            return
        done = len(self._finished & set(self._expected))
        if self._run_task is None:
            self._run_task = self.progress.add_task("whole run", total=len(self._expected),
                                                    counts="", eta="")
        self.progress.update(self._run_task, completed=done,
                             counts=f"{done}/{len(self._expected)} steps")

    def say(self, text: str) -> None:
        # fitted: a step line wraps between words under its indent, never inside a word
        self.progress.console.print(text, markup=False, highlight=False)

    def step_started(self, component: str, step: str, expected: float | None) -> None:
        with self._guard:
            if not self._running:
                self.progress.start()
            task = self.progress.add_task(f"{component}: {step}", total=None, counts="")
            self._running[(component, step)] = _Running(task, time.monotonic(), expected)
            self._update_run()

    def step_finished(self, component: str, step: str) -> None:
        with self._guard:
            running = self._running.pop((component, step), None)
            self._finished.add((component, step))
            if running is not None:
                self.progress.remove_task(running.task)
            self._update_run()
            if not self._running:
                self.progress.stop()

    def build_line(self, component: str, step: str, line: str) -> None:
        counts = ninja_progress(line)
        with self._guard:
            running = self._running.get((component, step))
            if running is None or counts is None:
                return
            done, total = counts
            running.fraction = done / total
            self.progress.update(running.task, completed=done, total=total,
                                 counts=f"{done}/{total}")
            self._update_run()
