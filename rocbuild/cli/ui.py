"""Terminal renderings (rich) of the plan and of a build's summary; plain text when output is
not a terminal."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO, cast

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from rocbuild import proc
from rocbuild.errors import printable_lines, redact
from rocbuild.model import wording
from rocbuild.model.baseaudit import OUTSIDE, audit_lines
from rocbuild.model.cost import summary_lines
from rocbuild.model.graph import Stack, profile_sets
from rocbuild.model.resources import format_gib
from rocbuild.model.steps import shell_line
from rocbuild.model.steptable import venv_commands
from rocbuild.run.engine.outcome import CURRENT, SERVED, StepOutcome
from rocbuild.run.state import view

if TYPE_CHECKING:  # the plan's model (roads, cost) loads for `plan`, not for every command
    from rocbuild.model.plan import Plan


GLUE = "\u00a0"  # a no-break space: "finished{GLUE}2026-12-03" never wraps inside; prints " "


class FittedConsole(Console):
    """rich's Console that fits its width and never breaks inside a word. Text wraps at
    spaces; a word longer than a line (a path, a command) stays whole on a line of its own,
    where rich would fold it mid-word (and a terminal wrapping a longer line would too). A
    continued line keeps the indentation of its first line (``hang`` says otherwise: the
    column of a row's value), and words joined by ``GLUE`` stay on one line ("finished
    2026-12-03 18:45"; the glue prints as a plain space).
    Tables keep rich's own layout (their columns are sized to fit). ``soft_wrap=True`` keeps
    rich's meaning, the line left whole for the terminal to wrap: a command to paste (a copy
    of a soft-wrapped line is still one line) or a finding meant for grep."""

    # a log (a build's plain output in a pipe): every text line whole, for grep, as the step
    # lines before it are; tables keep their layout (console(stamped=True))
    whole_lines = False

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        """Every character rocbuild prints passes here, rich's own output (tables, progress
        bars) included: a control character in the text (a recipe's summary, a signer read
        from a cache's index.json, a name given as an argument) is written as its escape
        (errors.printable_lines), so no caller can forget it; rich's own styles and cursor
        moves (control segments) are added after and stay as they are."""
        return super()._render_buffer(
            segment if segment.control or not segment.text else
            Segment(printable_lines(segment.text), segment.style, segment.control)
            for segment in buffer)

    def print(self, *objects: Any, **kwargs: Any) -> None:
        if self.whole_lines and objects and all(isinstance(o, (str, Text)) for o in objects):
            for name in ("hang", "under"):
                kwargs.pop(name, None)
            kwargs["soft_wrap"] = True
        if kwargs.get("soft_wrap"):
            super().print(*(_unglued(o) for o in objects), **kwargs)
            return
        if not objects or not all(isinstance(o, (str, Text)) for o in objects) or \
                kwargs.get("no_wrap") or "overflow" in kwargs:  # the caller chose the layout
            super().print(*(_unglued(o) for o in objects), **kwargs)
            return
        hang = kwargs.pop("hang", None)
        under = kwargs.pop("under", None)
        sep = kwargs.pop("sep", " ")
        markup = kwargs.pop("markup", None)
        style = kwargs.pop("style", None)
        text = Text(sep).join(o if isinstance(o, Text) else
                              self.render_str(o, markup=markup) for o in objects)
        if style is not None:
            text.stylize(style)
        for line in text.split(allow_blank=True):
            plain = line.plain
            lead = len(plain) - len(plain.lstrip(" "))
            indent = lead if hang is None else hang
            # glued words count as one: the glue is measured as a letter, printed as a space
            breaks = _word_breaks(plain.replace(GLUE, "_"), self.width, indent)
            for i, piece in enumerate(line.divide(breaks)):
                piece.rstrip()
                piece.plain = piece.plain.replace(GLUE, " ")  # same length: styles stay
                # a continued line stays in its column, not at the margin; a word too long
                # for that (a path) goes under the line's own indent, or at the margin when
                # it fits there; one longer than any line keeps the column, as it overflows
                # anyway. A row's value too long for its column goes under its label
                # (``under``, default two columns in from the row's indent), never to the
                # margin, where it would read as a label of its own
                if i:
                    room = self.width - cell_len(piece.plain)
                    if hang is None:
                        at = next((c for c in (indent, lead, 0) if c <= room), indent)
                    else:
                        at = hang if hang <= room else min(
                            lead + 2 if under is None else under, hang)
                    piece = Text(" " * at) + piece if at else piece
                super().print(piece, overflow="ignore", crop=False, **kwargs)


def _unglued(obj: Any) -> Any:
    """``obj`` with each GLUE a plain space, for output rich lays out itself."""
    if isinstance(obj, str):
        return obj.replace(GLUE, " ")
    if isinstance(obj, Text):
        copy = obj.copy()
        copy.plain = copy.plain.replace(GLUE, " ")
        return copy
    return obj


def glue(text: str) -> str:
    """``text`` whose words stay together on one line of the fitted console."""
    return text.replace(" ", GLUE)


def glue_commands(text: str) -> str:
    """``text`` with each `command` in backticks glued: a command in prose (a fix) is never
    cut across lines, so it pastes as one; it gets a line of its own when it is long."""
    return re.sub(r"`[^`]+`", lambda m: glue(m.group()), text)


def print_command(out: Console, label: str, command: str, indent: str = "") -> None:
    """A command meant to be copied, under its label ("continue with:"): on a line of its
    own, whole (soft_wrap: a terminal wraps it, and a copy is still one line), so selecting
    the line copies the command and nothing else; bold on a terminal."""
    out.print(f"{indent}{label}")
    out.print(f"{indent}  [bold]{escape(command)}[/]", soft_wrap=True)


def print_quoted(out: Console, lines: Sequence[str], what: str, indent: str = "") -> None:
    """Tool output quoted in a report (a failed step's last log lines): each line as the
    tool printed it, never re-wrapped, at the margin, so a compiler's caret line stays under
    the column it points at and its ``|`` gutter stays whole (re-wrapped between words, the
    pieces lost both); a terminal wraps a long one as it wraps the tool itself. A line
    before and after marks where the quote begins and ends."""
    out.print(f"{indent}--- {what}, as printed ---")
    for line in lines:
        out.print(escape(line), soft_wrap=True)
    out.print(f"{indent}--- end of the log lines ---")


def print_row(out: Console, text: str, hang: int, under: int | None = None) -> None:
    """A name/value row: on the fitted console, a row longer than the line continues under
    its value, at column ``hang``; a value word too long for that column goes under the
    label, at column ``under`` (default: two in from the row's indent)."""
    if isinstance(out, FittedConsole):
        out.print(text, hang=hang, under=under)
    else:
        out.print(text)


def _word_breaks(text: str, width: int, hang: int = 0) -> list[int]:
    """Offsets where ``text`` is cut into lines of at most ``width`` cells, only between
    words (a word longer than ``width`` gets a line of its own). The indent counts on the
    first line; a continued line starts at its word, after ``hang`` spaces (the column of a
    row's value, so a wrapped row of a name/value list still reads as one row)."""
    breaks: list[int] = []
    line_start, has_word, indent = 0, False, 0
    for match in re.finditer(r"\S+\s*", text):
        ends_at = (indent + cell_len(text[line_start:match.start()])
                   + cell_len(match.group().rstrip()))
        if has_word and ends_at > width:
            breaks.append(match.start())
            line_start, indent = match.start(), hang
        has_word = True
    return breaks


def print_json(doc: Any) -> None:
    """A --json document on stdout, as every command prints one."""
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


def console(stream: TextIO | None = None, *, stamped: bool = False) -> FittedConsole:
    """The one console of every command: the terminal's width when there is one, else
    COLUMNS when set (rich reads it), else 80 columns (rich's default for a pipe or file).
    ``stamped``: the end of a build's plain output (a pipe, nohup, CI): a log, whose every
    line starts with the time and stays whole (for grep) as the step lines before it do;
    only its tables are laid out, to the width with the time."""
    # emoji=False: rocbuild writes no emoji codes, and a path such as /srv/:fire:/x must
    # print as it is (rich would also load its 2 ms table of codes for every command)
    out = FittedConsole(file=stream or sys.stdout, highlight=False, emoji=False)
    if not stamped or out.is_terminal:
        return out
    stamped_stream = StampedStream(stream or sys.stdout)
    log = FittedConsole(file=cast(TextIO, stamped_stream), highlight=False, emoji=False,
                        width=max(out.width - stamped_stream.width, 20))
    log.whole_lines = True
    return log


class StampedStream:
    """A text stream whose every line starts with the time of day (proc.clock()), as the
    plain output's step lines do: a log of a build says when each line was written."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._line_start = True
        self.width = len(proc.clock()) + 1

    def write(self, text: str) -> int:
        pieces = []
        for piece in text.splitlines(keepends=True):
            if self._line_start:
                pieces.append(f"{proc.clock()} ")
            pieces.append(piece)
            self._line_start = piece.endswith("\n")
        self.stream.write("".join(pieces))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()


def print_plan(plan: Plan, out: Console) -> None:
    """The plan's header and settings; the table follows (plan_table.py)."""
    from rocbuild.model.plan import to_json

    doc = to_json(plan)
    stack = plan.stack
    out.print(f"[bold]rocbuild plan[/] — {escape(doc['stack'])} {escape(stack.version)} for "
              f"[bold]{escape(', '.join(doc['targets']))}[/]")
    out.print(f"prefix:  {escape(doc['prefix'])}")
    out.print(f"workdir: {escape(doc['workdir'])}")
    out.print("settings:")
    width = max(12, *(len(name) for name in doc["settings"]))
    for name, entry in doc["settings"].items():
        value = entry["value"]
        text = redact(", ".join(value) if isinstance(value, list) else
                      "" if value is None else str(value))  # "(none)", as for an empty list
        if name == "jobs" and value is None:
            text = "auto"  # sized per component from free memory and CPUs (the table)
        if entry.get("effective"):  # what an `auto` or a host list came to on this machine
            text = f"{text or '(none)'}: {entry['effective']}"
        source = escape(entry["source"])
        print_row(out, f"  {name:<{width}} {escape(text or '(none)'):<24} [dim]({source})[/]",
                  width + 3)
    overlay = doc.get("overlay")
    if overlay and (overlay["recipes"] or overlay["patches"]):
        parts = [f"recipes {', '.join(overlay['recipes'])}" if overlay["recipes"] else "",
                 f"patches {', '.join(overlay['patches'])}" if overlay["patches"] else ""]
        print_row(out, f"from your overlay ({escape(overlay['folder'])}): "
                       f"{escape('; '.join(p for p in parts if p))}", 2)


def print_cost(plan: Plan, out: Console) -> None:
    """Under the plan's table: the totals (cost.py) and what a --base provides."""
    if plan.cost is not None:
        for line in summary_lines(plan.cost):
            out.print(escape(line))
    print_base(plan, out)


def print_base(plan: Plan, out: Console) -> None:
    """What a --base provides, why the rest is built, and both roads' estimates."""
    base = plan.stack.base
    if base is not None:
        for name in base.taken:  # each component's own version (Debian's differ)
            where = escape(f"from base {base.path} ({base.version_of(name)})")
            out.print(f"  [green]✓[/] {escape(name):<22} {where}")
        for name, not_taken in base.not_taken.items():
            if name in plan.stack.components:
                # a long reason continues under itself, not at the margin
                print_row(out, f"  [yellow]↻[/] {escape(name):<22} built: "
                               f"{escape(not_taken.reason)}", 27)
        print_package_hints(plan, out)
        print_base_audit(plan, out)
    if plan.roads and _offers_a_base(plan):
        out.print(escape("both roads, whole stack (recipes' [resources]):"))
        for road in plan.roads:
            out.print(f"  {escape(road.name):<28} {len(road.components):>2} "
                      f"{plural(len(road.components), 'component')}, {road.cpu_hours:5.1f} "
                      f"CPU-hours, {format_gib(road.disk)} disk")
            if not road.measured:
                out.print("    [dim](assumed: the base has every \\[base] component but the "
                          "Tensile kernels)[/]")
    print_profiles(plan, out)


def print_profiles(plan: Plan, out: Console) -> None:
    """Both roads to each profile of stack.toml, so a user can compare them before choosing
    one with --profile NAME."""
    if not plan.profiles:
        return
    out.print(escape("profiles (--profile NAME; recipes' [resources]):"))
    for profile in plan.profiles:
        here = " (this plan)" if profile.name == plan.stack.profile else ""
        print_row(out, f"  {escape(profile.name + here)}: {escape(profile.summary)}", 4)
        for road in (profile.full, profile.base) if _offers_a_base(plan) else (profile.full,):
            out.print(f"    {escape(road.name):<28} {len(road.components):>2} "
                      f"{plural(len(road.components), 'component')}, {road.cpu_hours:5.1f} "
                      f"CPU-hours, {format_gib(road.disk)} disk")


def print_package_hints(plan: Plan, out: Console) -> None:
    """Before the rebuild cascade: the distribution packages that would provide what the
    base lacks, and what installing them saves (base.py PackageHint)."""
    base = plan.stack.base
    if base is None:
        return
    recipes = plan.stack.recipes.recipes
    for hint in base.hints:
        hours = sum(recipes[n].resources.get("cpu_hours", 0.0) for n in hint.saves)
        packages = " ".join(hint.packages)
        out.print(f"    [cyan]tip:[/] {escape(hint.component)} is packaged: `sudo apt install "
                  f"{escape(packages)}` and {escape(', '.join(hint.saves))} come from the "
                  f"base instead of being built ({hours:.1f} CPU-hours saved)")


def print_base_audit(plan: Plan, out: Console) -> None:
    """The base audit: each GPU library of the base read for the targets (baseaudit.py)."""
    base = plan.stack.base
    if base is None:
        return
    lines = audit_lines(base, plan.stack.recipes.recipes, plan.stack.targets,
                        plan.base_others, profile_sets(plan.stack.recipes))
    if not lines:
        return
    wanted = ", ".join(str(t) for t in plan.stack.targets)
    lacking = sum(not line.ok for line in lines)
    outside = sum(line.action == OUTSIDE for line in lines)
    out.print(escape(f"base audit ({wanted}): {len(lines)} GPU librar"
                     f"{'y' if len(lines) == 1 else 'ies'} read, "
                     f"{lacking} lack{'s' if lacking == 1 else ''} a target"
                     + (f" ({outside} outside this run)" if outside else "")))
    for line in lines:  # one line each, never wrapped, so it can be grepped
        mark = "[green]✓[/]" if line.ok else "[red]✗[/]"
        out.print(f"  {mark} {escape(line.text)}", soft_wrap=True)


def _offers_a_base(plan: Plan) -> bool:
    """The base road exists only for recipes that say how a component shows in a base."""
    return plan.stack.base is not None or any(
        r.base_provides for r in plan.stack.recipes.recipes.values())


def plural(count: int, word: str) -> str:
    """'1 component', '2 components' (the count is printed by the caller)."""
    return word if count == 1 else word + "s"


def print_commands(plan: Plan, out: TextIO) -> None:
    """Paste-ready shell commands in the order a build runs them, one block per component;
    the build venv comes where the run creates it: after the first component's sources,
    before anything is configured."""
    venv = venv_commands(plan.stack, sys.executable)
    for p in plan.components:
        out.write(f"# --- {p.name} ---\n")
        for step in p.commands:
            if venv and step.step == "configure":
                out.write("# build venv: the recipes' Python packages and wheels (rocbuild "
                          "does this once, with the fetches)\n")
                out.writelines(shell_line(argv) + "\n" for argv in venv)
                venv = []
            out.write(f"# {step.step}\n")
            for argv in step.argvs:  # a URL's password stays out (errors.redact)
                out.write(redact(shell_line(argv, step.env)) + "\n")
        out.write("\n")
    if venv:  # only source-only components selected: the run still prepares the venv
        out.write("# --- build venv ---\n")
        out.writelines(shell_line(argv) + "\n" for argv in venv)


def first_error_lines(first: Sequence[str], shown: Sequence[str]) -> list[str]:
    """The block that shows a failed step's first error (BuildSystem.first_error) above the
    log's last lines, unless those already hold it: a later error that follows from the
    first one is what the last lines show (the summary and `status` alike)."""
    return [] if not first or first[0] in shown else list(first)


FIRST_ERROR = "the first error (the cause; what follows it in the log comes of it)"


def print_build_summary(outcomes: Sequence[StepOutcome], stack: Stack, command: str | None,
                        out: Console, seconds: float, *, interrupted: bool = False) -> None:
    """The end of a build: the steps run, warnings, and for each failure its message, log,
    known cause and fix, log tail and the command that continues."""
    ran = [o for o in outcomes if o.result not in (CURRENT, SERVED)]
    current = [o for o in outcomes if o.result == CURRENT]
    served = [o for o in outcomes if o.result == SERVED]
    # the heading is a line of its own: a table's title would wrap to the table's width
    heading = (f"rocbuild: {wording.count(len(ran), 'step')} run, {len(current)} already "
               "current" + (f", {len(served)} served from cache" if served else "")
               + f", {seconds:.1f}s")
    if ran:
        from rich.table import Table  # only when a step ran: a no-op prints one line

        table = Table()
        for column in ("component", "step", "time", "jobs", "result"):
            table.add_column(column)
        for o in ran:
            style = {"done": "green", "failed": "bold red",
                     "interrupted": "yellow"}.get(o.result, "")
            table.add_row(escape(o.component), o.step, f"{o.seconds:.1f}s",
                          str(o.jobs or "-"), f"[{style}]{o.result}[/]")
        out.print(heading)
        out.print(table)
    elif not interrupted:
        out.print(f"rocbuild: all {len(current)} steps are current; nothing to do"
                  if len(current) != 1 else "rocbuild: its one step is current; nothing to do")
    compiled = [o.component for o in ran if o.step == "compile"]
    for line in view.launch_summary(stack.workdir, compiled):
        out.print(f"compiled {escape(line)}")
    for o in outcomes:
        for warning in o.warnings:
            out.print(f"[yellow]warning[/] {escape(o.component)}: {o.step}: {escape(warning)}")
    for o in outcomes:
        if o.result != "failed":
            continue
        out.print(f"[bold red]FAILED[/] {escape(o.component)}: {o.step}")
        out.print(escape(o.message))  # prose: wraps at spaces, paths stay whole words
        if o.log is not None:  # every step of the step table has one
            out.print(f"log: {escape(str(o.log))}")
        from rocbuild.checks.diagnose import diagnose  # the failure table, on a failure

        command = command or f"rocbuild build {o.component}"
        found = diagnose([*o.first_error, *o.tail, *o.message.splitlines()],
                         context={"prefix": str(stack.prefix), "component": o.component,
                                  "workdir": str(stack.workdir), "command": command})
        if found is not None:
            out.print(f"[bold]cause:[/] {escape(found.cause)}")
            out.print(f"[bold]fix:[/]   {escape(glue_commands(found.fix))}")
        first = first_error_lines(o.first_error, o.tail[-20:])
        if first:
            print_quoted(out, first, FIRST_ERROR)
        if o.tail:
            print_quoted(out, o.tail[-20:], f"the log's last {min(len(o.tail), 20)} lines")
        print_command(out, "continue with:", command)
        out.print("(finished steps are kept; only this step and what follows run again)")
    if interrupted:
        out.print("[yellow]interrupted[/]: finished steps are recorded; run the same command "
                  "again to continue")
