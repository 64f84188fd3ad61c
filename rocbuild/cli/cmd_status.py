"""`rocbuild status [COMPONENT...] [--json]`: the morning report (what it shows: the
parser's description). Exit code 1 when a step or the verify failed, so scripts can use it;
0 otherwise (also while a build runs or steps wait).
"""

from __future__ import annotations

import argparse
import collections
import shlex
import time

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.checks import launchtools
from rocbuild.cli.ui import (
    FIRST_ERROR,
    console,
    first_error_lines,
    glue_commands,
    print_command,
    print_json,
    print_quoted,
)
from rocbuild.errors import EXIT_OK, EXIT_STEP_FAILED, notice
from rocbuild.model import buildsystems, launchers, wording
from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.resources import format_bytes
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import stack_name_of
from rocbuild.run.engine.status import (
    ComponentStatus,
    FailureStatus,
    StatusReport,
    StepStatus,
    collect,
    to_json,
    tried_outside,
)
from rocbuild.run.state import view

STATE_STYLE = {"done": "green", "failed": "bold red", "stale": "yellow", "pending": "dim",
               "running": "bold cyan", "unproven": "yellow"}
WIDE = 100  # below this many columns the table folds time, jobs and memory into "why"
TAIL_LINES = 10  # of the log, shown when no known cause matched


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "status", parents=parents, help="the morning report: what is done, failed, pending",
        description="Show, per component and step, what is done, failed, pending or stale "
                    "(and why), with times, jobs, peak memory and OOM retries; for a failure "
                    "its likely cause, the fix, the log and the command that continues.")
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help="components to report on, with what they need (default: the "
                             "whole stack)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace, settings: Settings) -> int:
    # a typo in --workdir read as "all pending"; a new user's default is just new
    if settings.source("workdir") != "default" and not settings.workdir.exists():
        notice(f"rocbuild: note: the workdir {settings.workdir} does not exist "
               f"({settings.source('workdir')}): nothing was built there; `rocbuild prefixes` "
               "shows the workdir that filled each prefix")
    stack = load_stack(settings, args.components)
    viewed, note = view.viewed_prefix(settings, stack.prefix)
    if note is not None:  # the last build in this workdir, when the default prefix has none
        notice(f"rocbuild: note: {note}")
        settings, stack = viewed, load_stack(viewed, args.components)
    # read-only: nothing runs, so the rule's answers are kept for the whole report
    rule = view.rule(stack)
    tried = [] if args.components else tried_outside(rule)
    if tried:  # plain status covers every component this workdir tried, and what it needs
        stack = load_stack(settings, [*stack.order, *tried])
        rule = view.rule(stack)
    report = collect(rule, settings, list(args.components))
    notes = launcher_notes(stack, settings)
    if args.json:
        print_json({**to_json(report), "launcher_notes": notes})
    elif nothing_built(report):  # the whole table would read "pending" 100 times
        out = console()
        out.print(f"nothing built yet in {escape(str(report.workdir))}: "
                  f"{wording.count(len(report.components), 'component')} pending; "
                  "`rocbuild plan` shows them, `rocbuild build` starts")
        print_other_stacks(out, settings)
    else:
        print_status(report, console(), list(args.components), notes)
    # scripts: 1 when a step or the verify failed (exit codes in `rocbuild --help`)
    return EXIT_STEP_FAILED if report.failed else EXIT_OK


def print_other_stacks(out: Console, settings: Settings) -> None:
    """Where the workdir's builds are, when they are of another stack than these recipes
    (a workdir built with `--recipes X` is not "nothing built yet")."""
    others = view.other_stacks(settings)
    if not others:
        return
    stack = stack_name_of(settings.recipes) or "?"
    out.print(f"this workdir holds builds of another stack than {escape(stack)} "
              f"({escape(str(settings.recipes))}, {escape(settings.source('recipes'))}); "
              "to see one, pass its recipes and prefix:")
    for prefix, entry in others[:3]:
        recipes = entry.get("recipes")
        flags = (f"--recipes {shlex.quote(recipes)} " if isinstance(recipes, str) else "") \
            + f"--prefix {shlex.quote(prefix)}" + (
                f" --workdir {shlex.quote(str(settings.workdir))}"
                if settings.source("workdir") != "default" else "")
        # the command alone on its line, whole: a copy of the line is the command
        print_command(out, f"{escape(str(entry.get('stack') or 'a stack'))}:",
                      f"rocbuild status {flags}", indent="  ")


def nothing_built(report: StatusReport) -> bool:
    """No step of any component ran in this configuration (and no build runs now)."""
    return (report.lock_holder is None and not report.run_failures and report.verify is None
            and all(step.state == "pending" for c in report.components for step in c.steps)
            and all(c.state == "pending" for c in report.components))


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _peak(size: int | None) -> str:
    return "-" if not size else format_bytes(size, "GiB", digits=2)


def launcher_notes(stack: Stack, settings: Settings) -> dict[str, str]:
    """Per component whose build tree's compiler launchers are not the ones a build now
    configures with, what that means for its next compile (launchers.tree_note). The host's
    launchers are resolved (a `ccache --version` probe, kept in the workdir) only when some
    tree exists."""
    trees = {c.name: t for c in stack.selected()
             if c.builds and (t := buildsystems.of(c).tree_launchers(c)) is not None}
    if not trees:
        return {}
    if stack.launch is None:
        stack = launchtools.launching(stack, settings)
    return {name: note for name, tree in trees.items()
            if (note := launchers.tree_note(stack.launch, stack.components[name], tree))}


def print_launcher_notes(out: Console, notes: dict[str, str]) -> None:
    """The build trees whose launchers differ from this run's, one line per kind of note."""
    by_note: dict[str, list[str]] = {}
    for name, note in notes.items():
        by_note.setdefault(note, []).append(name)
    for note, names in by_note.items():
        one = len(names) == 1
        trees = f"{'the build tree of' if one else 'the build trees of'} {', '.join(names)}"
        clean = f"`rocbuild clean {' '.join(names)}`"
        if note == launchers.NO_CACHE:
            text = (f"{trees} {'was' if one else 'were'} {note}: {'its' if one else 'their'} "
                    f"compiles bypass ccache until {'it is' if one else 'each is'} configured "
                    f"again (a change to a recipe or source does that); {clean} rebuilds "
                    f"{'it' if one else 'them'} through the cache now")
        else:
            text = (f"{trees} {'was' if one else 'were'} {note}: the compile fails until it "
                    f"is configured again ({clean}, then build)")
        out.print(f"[yellow]compiler launcher[/]: {escape(text)}")


def print_status(report: StatusReport, out: Console, requested: list[str],
                 notes: dict[str, str] | None = None) -> None:
    out.print(f"[bold]rocbuild status[/] — workdir {escape(str(report.workdir))}, "
              f"prefix {escape(str(report.prefix))}")
    out.print(_table(report, wide=out.width >= WIDE))
    for comp in report.components:  # what the compiler cache (and distcc) did last compile
        saved = view.launch_saved(report.workdir, comp.name)
        if saved:
            out.print(f"last compile of {escape(comp.name)}: {escape(saved)}")
    print_launcher_notes(out, notes or {})
    for comp in report.components:
        if comp.job_cap:
            _print_cap(out, comp)
    held = report.lock_holder is not None
    for title, failure in report.run_failures:
        _print_failure(out, title, failure, show_command=not held)
    for comp in report.components:
        if comp.failure is not None:
            _print_failure(out, comp.name, comp.failure, show_command=not held)
    for leftover, pids in report.leftovers:
        out.print(f"[bold yellow]still running[/] from a run that was killed: "
                  f"{escape(leftover)} (pids {', '.join(map(str, pids))}); `rocbuild clean` "
                  "or the next build ends them", soft_wrap=True)
    if held:
        out.print(f"[bold cyan]a build is running[/] in this workdir (pid "
                  f"{report.lock_holder}); run `rocbuild status` again to follow it")
        return
    if report.run_failures or any(c.failure is not None for c in report.components):
        return  # each failure above names the command that continues
    command = report.next_command(requested)
    print_dropped(out, report.dropped)
    if command is None and report.verify is not None and report.verify.state == "unproven":
        out.print("[green]everything is built and current[/], but [yellow]unproven[/]: verify "
                  "was skipped, so `rocbuild activate` refuses the prefix without --unproven; "
                  "the same build without --no-verify verifies it (nothing is rebuilt)")
    elif command is None:
        out.print("[green]everything is built and current[/]"
                  + (" and verified" if report.verify is not None else ""))
    elif report.verify is not None and report.verify.state == "failed":
        out.print(f"[bold red]verify failed[/]: {escape(report.verify.why)}")
        print_command(out, "after fixing it:", command)
    else:
        print_command(out, "continue with:", command)


def print_dropped(out: Console, dropped: list[str]) -> None:
    """What the next build takes out of the prefix (status and plan say it alike)."""
    if not dropped:
        return
    names = ", ".join(dropped)
    out.print(f"[yellow]uninstalls[/] {escape(names)}: no longer in the stack, so the next "
              "build that completes the stack takes "
              f"{'its' if len(dropped) == 1 else 'their'} files out of the prefix "
              f"(`rocbuild uninstall {escape(' '.join(dropped))}` does it now)")


def _table(report: StatusReport, *, wide: bool = True) -> Table:
    """The step table. ``wide``: one column each for time, jobs, memory and OOM retries;
    otherwise (an 80-column terminal) those fold into the why column of done steps, so the
    reasons keep the width they need to be read."""
    counts = collections.Counter(c.state for c in report.components)
    summary = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    title = f"{wording.count(len(report.components), 'component')}: {summary}"
    if wide:
        table = Table(title=title, title_justify="left")
        columns: tuple[str, ...] = ("component", "step", "state", "time", "jobs", "peak mem",
                                    "OOM retries")
    else:
        table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                      show_edge=False, collapse_padding=True)
        columns = ("component", "step", "state", "time")
    for column in columns:
        table.add_column(column, no_wrap=True)
    table.add_column("why", overflow="fold", ratio=1)
    for comp in report.components:
        _add_rows(table, comp, wide)
    if report.verify is not None:  # the build's last step: a failure here is a failed row
        verify = report.verify
        cells = ["prefix", "verify", _styled(verify.state), format_seconds(verify.seconds)]
        cells += ["-", "-", "-"] if wide else []
        table.add_row(*cells, escape(verify.why), end_section=True)
    return table


def _add_rows(table: Table, comp: ComponentStatus, wide: bool = True) -> None:
    if not comp.steps:
        cells = [escape(comp.name), "-", _styled(comp.state), ""] + (["", "", ""] if wide else [])
        table.add_row(*cells, f"uses the checkout of {escape(comp.shares or '?')}",
                      end_section=True)
        return
    for i, step in enumerate(comp.steps):
        last = i == len(comp.steps) - 1
        cells = [escape(comp.name) if i == 0 else "", step.step, _styled(step.state),
                 format_seconds(step.seconds)]
        if wide:
            cells += [str(step.jobs or "-"), _peak(step.peak_rss), str(step.oom_retries or "-"),
                      escape(step.why)]
        else:
            cells.append(escape(step.why) or _resources(step))
        table.add_row(*cells, end_section=last)


def _resources(step: StepStatus) -> str:
    """Jobs, peak memory and OOM retries of a done step, for the narrow table."""
    parts = [f"{step.jobs} jobs"] if step.jobs else []
    parts += [f"peak {_peak(step.peak_rss)}"] if step.peak_rss else []
    parts += [f"{step.oom_retries} OOM retries"] if step.oom_retries else []
    return f"[dim]{', '.join(parts)}[/]" if parts else ""


def _styled(state: str) -> str:
    return f"[{STATE_STYLE.get(state, '')}]{state}[/]"


def _print_cap(out: Console, comp: ComponentStatus) -> None:
    cap = comp.job_cap or {}
    reason = f" ({cap['reason']})" if cap.get("reason") else ""
    out.print(f"job cap for {escape(comp.name)}: {escape(str(cap.get('jobs', '?')))} jobs"
              f"{escape(reason)}")


MESSAGE_LINES = 14


def _print_failure(out: Console, name: str, failure: FailureStatus, *,
                   show_command: bool = True) -> None:
    when = ""
    if failure.when:
        when = time.strftime(" at %Y-%m-%d %H:%M", time.localtime(failure.when))
    out.print(f"\n[bold red]FAILED[/] {escape(name)}: {escape(failure.step)}{when}")
    # a path or command longer than the width stays whole on its own line (ui.console)
    # the whole message: git's cause lines follow its first line
    for line in failure.message.splitlines()[:MESSAGE_LINES]:
        out.print(f"  {escape(line)}")
    found = failure.diagnosis
    first = first_error_lines(failure.first_error, failure.tail[-TAIL_LINES:])
    if found is not None:
        out.print(f"  cause: {escape(found.cause)}")
        out.print(f"  fix:   {escape(glue_commands(found.fix))}")
        out.print(f"  seen:  {escape(found.matched_line)}")
    elif first:  # the cause is the first error, not the last lines
        out.print("  cause: not a known failure; the first error of the log:")
        print_quoted(out, first, FIRST_ERROR, indent="  ")
    elif failure.tail:  # a check's message is the whole story: it has no tail
        out.print("  cause: not a known failure; see the log's last lines:")
        print_quoted(out, failure.tail[-TAIL_LINES:],
                     f"its last {len(failure.tail[-TAIL_LINES:])} lines", indent="  ")
    out.print(f"  log:   {escape(failure.log or '(none)')}")
    if not show_command:  # a build holds the workdir: a second one would be refused
        return
    print_command(out, "continue with:", failure.command, indent="  ")
    out.print("  (finished steps are kept)")

