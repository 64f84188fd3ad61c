"""`rocbuild info COMPONENT [--json]`: one component, as `spack info` / `eb --show` do (what
it shows: the parser's description); its state per step by the same rule as `status`, its
files from the prefix's install record.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.cells import cell_len
from rich.markup import escape

from rocbuild.cli.ui import console, plural, print_json, print_row
from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.prefix.buildinfo import read_build_info
from rocbuild.prefix.inventory import component as installed_component
from rocbuild.prefix.inventory import filled_by
from rocbuild.run.engine.status import collect
from rocbuild.run.state import view

FILES_SHOWN = 20  # of the installed files in the text view; --json lists every one


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "info", parents=parents, help="one component: recipe, dependencies, state, files",
        description="Show one component: its recipe file and source, its dependencies and "
                    "the components that depend on it, its build settings as rendered for "
                    "this stack, its state per step in this workdir, and the files it "
                    "installed into the prefix.")
    parser.add_argument("component", metavar="COMPONENT", help="a recipe's name")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def dependents(recipes: dict[str, Any], name: str) -> list[str]:
    """The recipes that name ``name`` as a dependency or reuse its checkout (direct)."""
    return sorted(r.name for r in recipes.values()
                  if name in r.depends or r.source.from_component == name)


def describe(settings: Settings, name: str) -> dict[str, Any]:
    """Everything `info` shows, as a JSON document."""
    stack = load_stack(settings, [name])  # an unknown name: ConfigError with did-you-mean
    comp = stack.components[name]
    recipe = comp.recipe
    rule = view.rule(stack)
    report = collect(rule, settings, [name])
    status = next(c for c in report.components if c.name == name)
    try:
        info = read_build_info(stack.prefix)
    except ConfigError:  # an unreadable record: the files are still listed
        info = None
    mine = info is not None and name in info.components
    installed = installed_component(stack.prefix, name, info,
                                    filled_by(info) if info is not None else None)
    return {
        "name": name, "summary": recipe.summary, "kind": recipe.kind,
        "recipe": str(recipe.file),
        "source": {"git": comp.url, "ref": comp.ref, "checkout_of": comp.checkout
                   if not comp.owns_checkout else None},
        "depends": list(comp.depends), "needed_by": dependents(dict(stack.recipes.recipes), name),
        "settings": {"cmake_args": list(comp.build_args), "build_type": comp.build_type,
                     "env": dict(comp.env), "patches": [str(p.path) for p in comp.patches]},
        "state": status.state,
        "steps": [{"step": s.step, "state": s.state, "why": s.why} for s in status.steps],
        "prefix": str(stack.prefix),
        "installed": {"in_build_info": mine, "commit": installed.commit,
                      "origin": installed.origin, "size": installed.size,
                      "files": list(installed.files)},
    }


def run(args: argparse.Namespace, settings: Settings) -> int:
    doc = describe(settings, args.component)
    if args.json:
        print_json(doc)
        return 0
    out = console()
    out.print(f"[bold]{escape(doc['name'])}[/]" + (f" — {escape(doc['summary'])}"
                                                  if doc["summary"] else ""))

    def row(name: str, value: str) -> None:
        # a value too long for its column goes under its label (column 4), not to the
        # margin, where it would read as a label of its own; so does one word of a label's
        # further values (env's second one on) that does not fit beside it
        if not name and " " not in value and 14 + cell_len(value) > out.width:
            print_row(out, f"    {escape(value)}", 4)
            return
        print_row(out, f"  {name:<11} {escape(value)}", 14, under=4)

    row("recipe", doc["recipe"])
    source = doc["source"]
    row("source", f"the checkout of {source['checkout_of']}" if source["checkout_of"]
        else f"{source['git'] or '-'} at {source['ref'] or '-'}")
    row("kind", doc["kind"])
    row("depends on", ", ".join(doc["depends"]) or "(nothing)")
    row("needed by", ", ".join(doc["needed_by"]) or "(nothing)")
    build = doc["settings"]
    if doc["kind"] != "source-only":
        row("build type", build["build_type"])
        row("cmake args", " ".join(build["cmake_args"]) or "(none)")
    for i, (key, value) in enumerate(build["env"].items()):  # one label, its values under it
        row("" if i else "env", f"{key}={value}")
    row("patches", ", ".join(build["patches"]) or "(none)")
    steps = ", ".join(f"{s['step']} {s['state']}" for s in doc["steps"])
    row("state", f"{doc['state']}" + (f" ({steps})" if steps else ""))
    files = doc["installed"]["files"]
    if not files:
        row("installed", f"nothing recorded in {doc['prefix']}")
        return 0
    row("installed", f"{len(files)} {plural(len(files), 'file')} in {doc['prefix']}")
    for rel in files[:FILES_SHOWN]:
        out.print(f"    {escape(rel)}")
    if len(files) > FILES_SHOWN:
        out.print(f"    ... and {len(files) - FILES_SHOWN} more (--json lists every one)")
    return 0
