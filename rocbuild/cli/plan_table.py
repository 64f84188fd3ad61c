"""The plan's table at 80 columns: one line per component (name, ref, state, jobs, time, disk).

The arithmetic behind each job count is long (CPUs, memory, swap, reserve, per-job memory);
it goes under the table, once for the host and per component only with ``plan --why``, so
the table itself never wraps. ``ui.print_plan`` calls this; totals live elsewhere.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.cli.cmd_status import format_seconds
from rocbuild.cli.ui import print_row
from rocbuild.model import cmakecode, launchers, wording
from rocbuild.model.plan import Plan, PlannedComponent
from rocbuild.model.resources import format_bytes, format_gib

REF_WIDTH = 12  # a tag such as rocm-6.4.3 fits; a full commit id is cut to 12 hex digits


def ref_cell(p: PlannedComponent) -> str:
    c = p.component
    if not c.ref:
        return f"in {c.checkout}"  # reuses another component's checkout
    ref = c.ref
    if len(ref) == 40 and all(ch in "0123456789abcdef" for ch in ref.lower()):
        return ref[:REF_WIDTH]
    return ref


def jobs_cell(p: PlannedComponent) -> str:
    """``8``, or ``8, link 2`` when the recipe sizes another kind of work on its own."""
    if not p.jobs:
        return "source"
    parts = [str(p.jobs["compile"].jobs)] if "compile" in p.jobs else []
    parts += [f"{kind} {count.jobs}" for kind, count in p.jobs.items() if kind != "compile"]
    return ", ".join(parts)


def time_cell(seconds: float | None) -> str:
    return "-" if not seconds else format_seconds(seconds)


def disk_cell(p: PlannedComponent) -> str:
    disk = p.component.recipe.resources.get("disk")
    return format_bytes(float(disk)) if disk else "-"


def table(plan: Plan, seconds: Mapping[str, float | None]) -> Table:
    """``seconds``: each component's expected time (this host's history, else the recipe)."""
    title = f"build order ({wording.count(len(plan.components), 'component')})"
    out = Table(title=title, title_justify="left",
                box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True,
                show_edge=False)
    for column, justify in (("component", "left"), ("ref", "left"),
                            ("state", "left"), ("jobs", "left"), ("time", "right"),
                            ("disk", "right")):
        # a cell that does not fit is cut with an ellipsis, never wrapped onto a second line
        out.add_column(column, justify=justify, no_wrap=True, overflow="ellipsis")  # type: ignore[arg-type]
    for p in plan.components:  # in build order
        if p.download is not None:  # the binary cache serves it: a download, no build
            out.add_row(escape(p.name), escape(ref_cell(p)), escape(p.state), "-", "-",
                        format_bytes(p.download))
            continue
        out.add_row(escape(p.name), escape(ref_cell(p)), escape(p.state),
                    escape(jobs_cell(p)), time_cell(seconds.get(p.name)), disk_cell(p))
    return out


def host_note(plan: Plan) -> str:
    host = plan.host
    weight = plan.settings.swap_weight
    return (f"jobs: sized from {host.cpus} CPUs and {format_gib(host.mem_available)} free "
            f"memory + {format_gib(host.swap_free)} swap × {weight}, each component's memory "
            "per job from its recipe (`rocbuild plan --why` shows the arithmetic); time: this "
            "host's last run, else the recipe's CPU-hours over the CPUs")


def print_reasons(plan: Plan, out: Console) -> None:
    """Per component: what it depends on and why it gets its job counts (``--why``)."""
    for p in plan.components:
        out.print(f"[bold]{escape(p.name)}[/] — depends on "
                  f"{escape(', '.join(p.component.depends) or 'nothing')}")
        for kind, count in p.jobs.items():
            out.print(f"  {kind}: {escape(count.reason)}")


def print_table(plan: Plan, out: Console, seconds: Mapping[str, float | None],
                *, why: bool = False, cache_total: str = "") -> None:
    out.print(table(plan, seconds))
    out.print(f"[dim]{escape(host_note(plan))}[/]")
    cached = [p for p in plan.components if p.cache and p.state != "done"]
    if cached:  # what --cache does with each, one line each, under the table
        out.print("binary cache:")
        for p in cached:
            print_row(out, f"  {escape(p.name):<22} {escape(p.cache)}", 25)
        if cache_total:
            out.print(f"  {escape(cache_total)}")
    code = [(p.name, arg) for p in plan.components
            for arg in cmakecode.code_files(p.component.build_args)]
    if code:  # run by CMake at configure time, as much code as the recipe itself
        out.print("CMake code the recipes load (it runs at configure time, like the recipe):")
        for name, arg in code:
            out.print(f"  {escape(name):<22} {escape(arg)}", soft_wrap=True)
    print_launchers(plan, out)
    if why:
        print_reasons(plan, out)


def print_launchers(plan: Plan, out: Console) -> None:
    """Which compiler launcher each component gets: one line when they all get the same,
    else the common one and each component that differs (the recipe's own wins)."""
    lines = {p.name: launchers.summary(plan.stack.launch, p.component)
             for p in plan.components if p.component.builds}
    if not lines:
        return
    common = Counter(lines.values()).most_common(1)[0][0]
    others = {name: text for name, text in lines.items() if text != common}
    out.print(escape(f"launchers: {common}" + (", except:" if others else
                                                " for every component")))
    for name, text in others.items():
        print_row(out, f"  {escape(name):<22} {escape(text)}", 25)
