"""The console output of a build: plain lines (CI logs, nohup, pipes), one per event.

run/ writes through its small sink protocol (run/engine/build.py ``Sink``); this is the plain
implementation, ``FittedOutput`` the same lines fitted to a terminal, and progress.LiveOutput
draws bars on a terminal.
"""

from __future__ import annotations

import shlex
import threading
import time
from typing import TextIO

from rocbuild import proc
from rocbuild.errors import TERMINAL_SEQUENCE, printable_lines
from rocbuild.model import wording


class Output:
    """Thread-safe console output for step lines; ``stream`` shows every build line prefixed
    with its component, otherwise only rocbuild's own lines."""

    def __init__(self, stream: TextIO, *, show_build_output: bool = True) -> None:
        self.stream, self.show_build_output = stream, show_build_output
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        # a control character of a tool's line or a name is written as its escape
        # (errors.printable_lines): bytes from files never reach a terminal raw
        with self._lock:  # plain lines go to pipes and files: each says when it happened,
            clock = proc.clock()  # the lines of a message of several too
            self.stream.write("".join(f"{clock} {printable_lines(line)}\n"
                                      for line in text.split("\n")))
            self.stream.flush()

    def command(self, component: str, step: str, argv: list[str]) -> None:
        """``+ command`` before a step's program starts (cibuildwheel's habit), on plain
        output, so a log of the console shows what ran; the bars of a terminal leave it out
        (the step log has it either way)."""
        self.say(f"+ {shlex.join(argv)}")

    def build_line(self, component: str, step: str, line: str) -> None:
        if self.show_build_output:  # a tool's colours go (they would show as escapes)
            self.say(f"  {component}:{step} | {TERMINAL_SEQUENCE.sub('', line)}")

    def step_started(self, component: str, step: str, expected: float | None) -> None:
        """A step begins; ``expected`` is its duration last time (or the recipe's estimate).
        Plain output has nothing to draw; progress.LiveOutput draws a bar."""

    def step_finished(self, component: str, step: str) -> None:
        """The step ended (either way)."""

    def run_planned(self, expected: dict[tuple[str, str], float | None]) -> None:
        """The steps this run will start, each with its expected seconds (None: unknown);
        plain output says the whole run's estimate once, progress.LiveOutput keeps a line."""
        known = [s for s in expected.values() if s is not None]
        if known:
            total = sum(known)
            at = time.strftime("%H:%M", time.localtime(time.time() + total))
            self.say(f"expected: {wording.count(len(expected), 'step')}, "
                     f"{wording.duration(total)} from this host's history and the recipes' "
                     f"estimates (done about {at})")


class FittedOutput(Output):
    """The same events on a terminal (`cache push`, `build --verbose`): rocbuild's own lines
    wrap between words to the terminal's width (ui.FittedConsole), a command to paste is
    one line, and a tool's own output is shown as the tool printed it, never re-wrapped (a
    compiler's caret line stays under its column, and the terminal wraps it as it wraps the
    tool)."""

    def __init__(self, stream: TextIO, *, show_build_output: bool = True) -> None:
        super().__init__(stream, show_build_output=show_build_output)
        from rocbuild.cli import ui  # rich: loaded only for a terminal's output

        self.console = ui.console(stream)

    def say(self, text: str) -> None:
        with self._lock:  # a continued line goes on under the text, after the time
            stamp = f"{proc.clock()} "
            for line in text.split("\n"):
                self.console.print(stamp + line, markup=False, highlight=False,
                                   hang=len(stamp))

    def command(self, component: str, step: str, argv: list[str]) -> None:
        self._whole(f"+ {shlex.join(argv)}")

    def build_line(self, component: str, step: str, line: str) -> None:
        if self.show_build_output:
            self._whole(f"  {component}:{step} | {line}")

    def _whole(self, text: str) -> None:
        with self._lock:
            self.console.print(f"{proc.clock()} {text}", markup=False, soft_wrap=True)
