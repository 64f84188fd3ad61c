"""Terminal renderings (rich) of the plan and of a build's summary; plain text when output is
not a terminal."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.checks.diagnose import diagnose
from rocbuild.model import launchers
from rocbuild.model.cost import summary_lines
from rocbuild.model.graph import Stack
from rocbuild.model.plan import Plan, to_json
from rocbuild.model.resources import format_gib
from rocbuild.model.steps import shell_line
from rocbuild.model.steptable import venv_commands
from rocbuild.run.outcome import StepOutcome


def console(stream: TextIO | None = None) -> Console:
    # width only matters for a pipe or a file: keep lines whole there, unless the user (or a
    # script) says how wide with COLUMNS, which rich reads when no width is given
    stream = stream or sys.stdout
    sized = stream.isatty() or bool(os.environ.get("COLUMNS"))
    return Console(file=stream, highlight=False, width=None if sized else 160)


def print_plan(plan: Plan, out: Console) -> None:
    """The plan's header and settings; the table follows (plan_table.py)."""
    doc = to_json(plan)
    stack = plan.stack
    out.print(f"[bold]rocbuild plan[/] — {escape(doc['stack'])} {escape(stack.version)} for "
              f"[bold]{escape(', '.join(doc['targets']))}[/]")
    out.print(f"prefix:  {escape(doc['prefix'])}")
    out.print(f"workdir: {escape(doc['workdir'])}")
    out.print("settings:")
    for name, entry in doc["settings"].items():
        value = entry["value"]
        text = ", ".join(value) if isinstance(value, list) else str(value)
        if name == "jobs" and value is None:
            text = "auto"  # sized per component from free memory and CPUs (the table)
        if entry.get("effective"):  # what an `auto` or a host list came to on this machine
            text = f"{text or '(none)'}: {entry['effective']}"
        source = escape(entry["source"])
        out.print(f"  {name:<12} {escape(text or '(none)'):<24} [dim]({source})[/]")


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
        where = escape(f"from base {base.path} ({base.version})")
        for name in base.taken:
            out.print(f"  [green]✓[/] {escape(name):<22} {where}")
        for name, not_taken in base.not_taken.items():
            if name in plan.stack.components:
                out.print(f"  [yellow]↻[/] {escape(name):<22} built: {escape(not_taken.reason)}")
    if plan.roads:
        out.print(escape("both roads, whole stack (recipes' [resources]):"))
        for road in plan.roads:
            assumed = "(assumed: the base has every [base] component but the Tensile kernels)"
            note = "" if road.measured else f" [dim]{escape(assumed)}[/]"
            out.print(f"  {escape(road.name):<40} {len(road.components):>2} components, "
                      f"{road.cpu_hours:5.1f} CPU-hours, {format_gib(road.disk)} disk{note}")


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
            for argv in step.argvs:
                out.write(shell_line(argv, step.env) + "\n")
        out.write("\n")
    if venv:  # only source-only components selected: the run still prepares the venv
        out.write("# --- build venv ---\n")
        out.writelines(shell_line(argv) + "\n" for argv in venv)


def print_build_summary(outcomes: Sequence[StepOutcome], stack: Stack, command: str | None,
                        out: Console, seconds: float, *, interrupted: bool = False) -> None:
    """The end of a build: the steps run, warnings, and for each failure its message, log,
    known cause and fix, log tail and the command that continues."""
    ran = [o for o in outcomes if o.result != "current"]
    current = [o for o in outcomes if o.result == "current"]
    table = Table(title=f"rocbuild: {len(ran)} steps run, {len(current)} already current, "
                        f"{seconds:.1f}s", title_justify="left")
    for column in ("component", "step", "time", "jobs", "result"):
        table.add_column(column)
    for o in ran:
        style = {"done": "green", "failed": "bold red"}.get(o.result, "")
        table.add_row(escape(o.component), o.step, f"{o.seconds:.1f}s",
                      str(o.jobs or "-"), f"[{style}]{o.result}[/]")
    if ran:
        out.print(table)
    elif not interrupted:
        out.print(f"rocbuild: all {len(current)} steps are current; nothing to do")
    compiled = [o.component for o in ran if o.step == "compile"]
    for line in launchers.summary_lines(stack.workdir, compiled):
        out.print(f"compiled {escape(line)}", soft_wrap=True)
    for o in outcomes:
        for warning in o.warnings:
            out.print(f"[yellow]warning[/] {escape(o.component)}: {o.step}: {escape(warning)}",
                      soft_wrap=True)
    for o in outcomes:
        if o.result != "failed":
            continue
        out.print(f"[bold red]FAILED[/] {escape(o.component)}: {o.step}")
        out.print(escape(o.message), soft_wrap=True)  # whole lines: paths stay searchable
        if o.log is not None:  # every step of the step table has one
            out.print(f"log: {escape(str(o.log))}", soft_wrap=True)
        found = diagnose([*o.tail, *o.message.splitlines()],
                         context={"prefix": str(stack.prefix), "component": o.component,
                                  "workdir": str(stack.workdir)})
        if found is not None:
            out.print(f"[bold]cause:[/] {escape(found.cause)}", soft_wrap=True)
            out.print(f"[bold]fix:[/]   {escape(found.fix)}", soft_wrap=True)
        if o.tail:
            out.print(f"--- last {min(len(o.tail), 20)} lines ---")
            for line in o.tail[-20:]:
                out.print(escape(line), soft_wrap=True)
        command = command or f"rocbuild build {o.component}"
        out.print(f"continue with: {escape(command)}  (finished steps are kept; only this "
                  "step and what follows run again)", soft_wrap=True)
    if interrupted:
        out.print("[yellow]interrupted[/]: finished steps are recorded; run the same command "
                  "again to continue")
