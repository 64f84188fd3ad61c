"""`rocbuild plan [COMPONENT...]`: what would be built, in which order, with how many jobs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Collection
from typing import TYPE_CHECKING

from rich.markup import escape

from rocbuild.checks import hostload, launchtools
from rocbuild.cli import plan_table
from rocbuild.cli.cmd_status import launcher_notes, print_dropped, print_launcher_notes
from rocbuild.cli.ui import console, print_commands, print_cost, print_json, print_plan
from rocbuild.errors import redact
from rocbuild.model import cost
from rocbuild.model.graph import load_stack
from rocbuild.model.plan import Plan, build_plan, to_json
from rocbuild.model.settings import Settings
from rocbuild.model.steptable import steps_of
from rocbuild.run.engine import outcome, status
from rocbuild.run.state import basememo, view

if TYPE_CHECKING:
    from rocbuild.model.graph import Component
    from rocbuild.run.cache.planlines import PlanLines


class NoCacheLines:
    """PlanLines without a `cache` setting: no component is served, nothing to download."""

    def __init__(self) -> None:
        self.downloads: dict[str, int] = {}

    def __call__(self, comp: Component) -> str:
        return ""

    def total(self, done: Collection[str] = ()) -> str:
        return ""


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("plan", parents=parents, help="show what would be built and how",
                            description="Show the build order, every setting with its source, "
                                        "and the job count each component would get now.")
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help="components to plan (default: the whole stack)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the plan as a JSON document")
    out.add_argument("--commands", action="store_true",
                     help="print the exact commands each step would run, ready to paste")
    parser.add_argument("--why", action="store_true",
                        help="under the table, each component's dependencies and the "
                             "arithmetic behind its job counts")
    parser.add_argument("--tree", action="store_true",
                        help="draw the dependency tree (with --json: as nested objects)")
    parser.add_argument("--reverse", action="store_true",
                        help="with --tree: what needs each component, not what it needs")
    parser.add_argument("--allow-unsigned", action="store_true",
                        help="with --cache: plan as `build --allow-unsigned` would (unsigned "
                             "and untrusted artifacts are then installed)")


def expected_seconds(rule: view.Rule, cpus: int) -> dict[str, float | None]:
    """Each component's expected time: this host's last run of each step (stamps), else
    the recipe's CPU-hour estimate (outcome.expected_seconds)."""
    seconds: dict[str, float | None] = {}
    for comp in rule.stack.selected():
        known = [s for step in steps_of(comp)
                 if (s := outcome.expected_seconds(rule.state, comp, step, cpus)) is not None]
        seconds[comp.name] = sum(known) if known else None
    return seconds


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.tree or args.reverse:
        return print_tree(args, settings)
    # plan shows the launchers a build would use on this host: probe them as a run does
    stack = launchtools.launching(load_stack(settings, args.components), settings)
    # each component's state from the workdir's stamps (done / failed / stale / pending)
    # read-only: no build context, no output; the state walk and the pending list ask the
    # same questions, so they share the answers (nothing runs meanwhile)
    rule = view.rule(stack)
    report = status.collect(rule, settings, list(args.components))
    states = {c.name: c.state for c in report.components}
    pending = [c.name for c in cost.pending_components(stack,
                                                       rule.next_runs(stack.selected()))]
    host = hostload.snapshot()
    lines: PlanLines | NoCacheLines = NoCacheLines()
    if settings.cache:  # the binary cache's modules (archives, HTTP, signatures) only then
        from rocbuild.run.cache.choice import Trust
        from rocbuild.run.cache.planlines import PlanLines

        lines = PlanLines(settings, stack, rule.state, Trust.default(args.allow_unsigned))
    offers = {c.name: lines(c) for c in stack.selected()}  # asks the cache once each
    # what a build installs from the cache: each usable artifact of a component not done
    served = {n: size for n, size in lines.downloads.items() if states[n] != "done"}
    plan = build_plan(stack, settings, host, lambda c: states[c.name], pending,
                      lambda c: offers[c.name], requested=args.components, served=served)
    basememo.save_code_memo(settings.workdir, stack.base)  # what the base audit read
    changed = basememo.change(settings)
    if args.json:
        doc = to_json(plan)
        doc["base_change"] = changed  # the workdir's last build was on another base (or none)
        doc["uninstalls"] = report.dropped  # installed, no longer in the stack
        doc["launcher_notes"] = launcher_notes(stack, settings)  # trees' own launchers
        sys.stdout.write(redact(json.dumps(doc, indent=2)) + "\n")  # no URL's password
    elif args.commands:
        print_commands(plan, sys.stdout)
    else:
        out = console()
        print_plan(plan, out)
        plan_table.print_table(plan, out, expected_seconds(rule, host.cpus), why=args.why,
                               cache_total=lines.total(
                                   {n for n, state in states.items() if state == "done"}))
        print_launcher_notes(out, launcher_notes(stack, settings))
        print_cost(plan, out)
        print_dropped(out, report.dropped)
        if changed is not None:
            out.print(escape(base_change_text(changed, plan)))
    return 0


def print_tree(args: argparse.Namespace, settings: Settings) -> int:
    """`plan --tree [--reverse]`: the graph only; no probe, no state walk. --reverse loads
    the whole stack, so a component's dependents outside what it needs are found too."""
    from rocbuild.cli import plan_tree

    stack = load_stack(settings, [] if args.reverse else args.components)
    if args.reverse:
        load_stack(settings, args.components)  # an unknown name: the same refusal as plan
    children = plan_tree.edges(stack, reverse=args.reverse)
    starts = plan_tree.roots(stack, children, args.components)
    if args.json:
        print_json({"reverse": args.reverse, "tree": plan_tree.nested(children, starts)})
        return 0
    out = console()
    for line in plan_tree.lines(children, starts):
        out.print(escape(line), no_wrap=True, overflow="ignore", crop=False)
    if any(line.endswith(" (*)") for line in plan_tree.lines(children, starts)):
        out.print("(*) drawn above")
    return 0


def base_change_text(changed: dict[str, str | None], plan: Plan) -> str:
    """What another base than the last build's does: every component built on it has
    another fingerprint, so it shows stale above and is built again."""
    last = (f"{changed['last']} (ROCm {changed['last_version']})" if changed["last"]
            else "no base (from source)")
    now = changed["now"] or "no base (from source)"
    rebuilt = [p.name for p in plan.components if p.state == "stale"]
    return (f"base changed: the last build in this workdir was on {last}, this plan is on "
            f"{now}; that is a configuration change: what is taken from a base, and the "
            "fingerprint of everything built on it, follow the new one"
            + (f" ({', '.join(rebuilt)} built again)" if rebuilt else ""))
