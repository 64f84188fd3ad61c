"""`rocbuild plan [COMPONENT...]`: what would be built, in which order, with how many jobs."""

from __future__ import annotations

import argparse
import json
import sys

from rocbuild import cache, cost, resources, status
from rocbuild.graph import load_stack
from rocbuild.plan import build_plan, to_json
from rocbuild.settings import Settings
from rocbuild.state import StateDir
from rocbuild.ui import console, print_commands, print_plan
from rocbuild.uptodate import Rule


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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings, args.components)
    # each component's state from the workdir's stamps (done / failed / stale / pending)
    rule = Rule(stack, StateDir(stack.workdir))
    states = {c.name: c.state for c in status.collect(rule).components}
    pending = [c.name for c in cost.pending_components(stack, rule.is_current)]
    plan = build_plan(stack, settings, resources.snapshot(), lambda c: states[c.name], pending,
                      cache.plan_lines(settings, stack, rule.state),
                      requested=args.components)
    if args.json:
        json.dump(to_json(plan), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.commands:
        print_commands(plan, sys.stdout)
    else:
        print_plan(plan, console())
    return 0
