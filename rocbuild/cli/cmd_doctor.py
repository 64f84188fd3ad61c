"""`rocbuild doctor [--json] [--root DIR]`: is this host ready, and which --target fits it?"""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from rocbuild.checks import doctor, hostreqs
from rocbuild.cli.argerrors import path_arg
from rocbuild.cli.ui import console, glue_commands, print_json, print_row
from rocbuild.errors import ConfigError
from rocbuild.model import cost, wording
from rocbuild.model.baseaudit import audit_lines, unclaimed
from rocbuild.model.graph import Stack, load_stack, profile_sets
from rocbuild.model.settings import Settings
from rocbuild.run.state import basememo, view

_STYLE = {doctor.OK: ("ok", "green"), doctor.WARN: ("warn", "yellow"),
          doctor.FAIL: ("FAIL", "bold red"), doctor.SKIP: ("skip", "dim")}


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "doctor", parents=parents, help="check the host and recommend a --target",
        description="Check the OS, kernel driver, GPU devices and groups, the GPUs (KFD "
                    "topology, PCI IDs as a fallback), PCIe link, firmware settings, memory "
                    "and swap, disk, toolchain and anything that would shadow or break the "
                    "build, each with its fix. Exit code 1 when a check fails.")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--root", type=path_arg, default=Path("/"), metavar="DIR",
                        help="read sys/, proc/, dev/ and etc/ from a tree captured on another "
                             "host instead of / (toolchain, packages and disk are then skipped)")
    parser.add_argument("--user", default=None, metavar="NAME",
                        help="whose group membership to check (default: you; useful with --root)")


def current_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers with a bare uid)
        return str(os.getuid())


def host_for(root: Path, user: str | None = None) -> doctor.Host:
    """The live host, or a captured tree: for a tree the checks about the machine running
    rocbuild (toolchain, packages, disk) are skipped, since they would describe this one."""
    root = Path(os.path.abspath(root))
    live = root == Path("/")
    return doctor.Host(root=root, env=dict(os.environ), user=user or current_user(),
                       tools_path=os.environ.get("PATH", os.defpath) if live else None,
                       free_space=doctor.free_space if live else None)


def print_report(report: doctor.Report, out: Console) -> None:
    where = "" if report.root == Path("/") else f" (captured tree {escape(str(report.root))})"
    out.print(f"[bold]rocbuild doctor[/]{where}")
    for check in report.checks:
        label, style = _STYLE[check.status]
        # a continued finding stays under its text, as the fix lines do
        print_row(out, f"  [{style}]{label:<4}[/] {check.id:<12} {escape(check.summary)}", 20)
        if check.fix and check.status != doctor.OK:
            # a command in it stays whole, on a line of its own when it does not fit
            print_row(out, f"  {'':<4} {'':<12} [dim]fix:[/] "
                           f"{escape(glue_commands(check.fix))}", 25)
    failed = sum(c.status == doctor.FAIL for c in report.checks)
    warned = sum(c.status == doctor.WARN for c in report.checks)
    target = report.recommended_target
    out.print(f"{failed} failed, {warned} warnings"
              + (f"; build with: rocbuild build --target {target}" if target else ""))


def run(args: argparse.Namespace, settings: Settings) -> int:
    report = doctor.run(host_for(args.root, args.user), needs_from(settings))
    if args.json:
        print_json(report.to_json())
    else:
        print_report(report, console())
    return report.exit_code


def needs_from(settings: Settings) -> doctor.Needs:
    """Read the stack for the doctor; a broken recipe is reported, not raised, so the host
    checks still run."""
    try:
        stack = load_stack(settings)
    except ConfigError as exc:
        return doctor.Needs(targets=settings.target or (), targets_source=settings.source("target"),
                     workdir=settings.workdir, swap_weight=settings.swap_weight,
                     prefix=settings.prefix, problem=str(exc))
    selected = stack.selected()
    # the largest job, as `plan`'s memory line says it (one rule: cost.memory_need)
    largest = cost.memory_need(stack.recipes, [c.name for c in selected if c.builds])
    # the figure plan shows and preflight refuses on: components not installed yet
    rule = view.rule(stack)  # read-only: no build context
    runs = rule.next_runs(selected)
    disk = cost.disk_needed(stack, [c.name for c in cost.pending_components(stack, runs)])
    source = settings.source("target") if settings.target is not None else \
        f"default of {stack.recipes.stack.file}"
    return doctor.Needs(targets=stack.targets, targets_source=source, prefix=stack.prefix,
                 link_mem=largest.job if largest else doctor.REFERENCE_LINK_MEM,
                 largest_job=(f"one {largest.component} {largest.kind} job" if largest
                              else "one LLVM link job"),
                 disk_workdir=disk.workdir, disk_prefix=disk.prefix,
                 reqs=hostreqs.requirements(stack),
                 packages={c.name: c.recipe.system_packages for c in selected
                           if c.recipe.system_packages},
                 stack_summary=f"{stack.recipes.stack.name} {stack.version}, "
                               f"{wording.count(len(selected), 'component')}",
                 workdir=settings.workdir, swap_weight=settings.swap_weight,
                 hip_rocm=stack.rocm_root if stack.recipes.gpu_code else None,
                 **_base_audit(stack, settings))


def _base_audit(stack: Stack, settings: Settings) -> dict[str, Any]:
    """The base audit's lines for the doctor (and what it read kept for the next command)."""
    if stack.base is None:
        return {}
    lines = audit_lines(stack.base, stack.recipes.recipes, stack.targets,
                        unclaimed(stack.base.path, stack.recipes.recipes, stack.targets,
                                  stack.base.memo, stack.base.audit),
                        profile_sets(stack.recipes))
    basememo.save_code_memo(settings.workdir, stack.base)
    return {"base": stack.base.path, "base_audit": tuple((a.ok, a.text) for a in lines)}
