"""`rocbuild cache push [COMPONENT...] --to DIR` and `rocbuild cache list`: store built
components in a binary cache, and see what a cache holds (cache.py has the rules)."""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import sys
from typing import Any

from rich.markup import escape
from rich.table import Table

from rocbuild.cli.ui import console
from rocbuild.errors import BuildFailed, ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.model.steps import steps_of
from rocbuild.run import cache
from rocbuild.run.artifacts import ArtifactRefused
from rocbuild.run.build import BuildContext, Output
from rocbuild.run.cache_store import ProgressLine, fmt_size, writable_folder


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "cache", parents=parents, help="store built components in a binary cache, list one",
        description="A binary cache holds built components (their installed files and a "
                    "manifest) so other machines install them instead of building: "
                    "`rocbuild build --cache DIR_OR_URL`.")
    actions = parser.add_subparsers(dest="cache_command", metavar="ACTION")
    actions.required = True
    push = actions.add_parser(
        "push", parents=parents, help="store built components in a cache folder",
        description="Pack each built component (default: the whole stack) and store it in a "
                    "cache folder; serve that folder over HTTP for machines without the mount.")
    push.add_argument("components", nargs="*", metavar="COMPONENT",
                      help="components to store (default: every built one of the stack)")
    push.add_argument("--to", metavar="DIR", default=None,
                      help="the cache folder (default: the cache setting, when it is a folder)")
    push.set_defaults(func=run_push)
    listing = actions.add_parser("list", parents=parents, help="list what a cache holds",
                                 description="List the artifacts of the cache (--cache).")
    listing.add_argument("--json", action="store_true", help="print a JSON document")
    listing.set_defaults(func=run_list)


def run_push(args: argparse.Namespace, settings: Settings) -> int:
    target = args.to or settings.cache
    if not target:
        raise ConfigError("cache push needs a folder: --to DIR",
                          tip="rocbuild cache push --to /srv/rocbuild-cache")
    store = writable_folder(target)
    stack = load_stack(settings, args.components)
    ctx = BuildContext(stack=stack, settings=settings, output=Output(sys.stdout))
    wanted = args.components or list(stack.order)
    comps = [stack.components[n] for n in stack.order if n in wanted]
    staging = stack.workdir / "cache" / "push"
    failed = 0
    ctx.ensure_ready()  # the workdir and prefix locks: nobody installs while the prefix is read
    try:
        for comp in comps:
            steps = steps_of(comp)
            if not steps:  # reuses another checkout and builds nothing: nothing of its own
                continue
            if not all(ctx.is_current(comp, step) for step in steps):
                ctx.output.say(f"✘ {comp.name}: not built, or changed since it was built; run "
                               f"`rocbuild build {comp.name}` first")
                failed += 1
                continue
            key = cache.component_key(stack, comp)
            try:
                present = store.read_manifest(comp.name, key) is not None
            except ArtifactRefused:
                present = False  # a damaged manifest there: this push replaces it
            if present:
                ctx.output.say(f"= {comp.name}: already in {store.location} ({key[:12]})")
                continue
            try:
                manifest, archive = cache.make_artifact(
                    stack, ctx.state, comp, staging,
                    ProgressLine(ctx.output.say, f"{comp.name}: packing"))
                store.push(manifest, archive, ProgressLine(ctx.output.say,
                                                           f"{comp.name}: storing"))
            except BuildFailed as exc:
                ctx.output.say(f"✘ {exc}" + (f"\n  TIP: {exc.tip}" if exc.tip else ""))
                failed += 1
                continue
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            ctx.output.say(f"✔ {comp.name}: {len(manifest.files)} files, "
                           f"{fmt_size(manifest.size)} packed to "
                           f"{fmt_size(manifest.archive_size)} ({key[:12]})")
    finally:
        ctx.release()
    return 1 if failed else 0


def _when(created: Any) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(created)).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    if not settings.cache:
        raise ConfigError("cache list needs a cache: --cache DIR_OR_URL (or ROCBUILD_CACHE)",
                          tip="rocbuild cache list --cache /srv/rocbuild-cache")
    store = cache.open_cache(settings.cache)
    assert store is not None
    entries = store.index()
    if args.json:
        json.dump({"cache": store.location, "artifacts": entries}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out = console()
    if not entries:
        out.print(f"{escape(store.location)}: no artifacts")
        return 0
    table = Table(title=f"{store.location}: {len(entries)} artifacts", title_justify="left")
    for column in ("component", "key", "targets", "prefix", "commit", "size", "stored"):
        table.add_column(column)
    for e in entries:
        table.add_row(escape(str(e.get("component"))), str(e.get("key", ""))[:12],
                      ",".join(map(str, e.get("targets", []))), escape(str(e.get("prefix"))),
                      str(e.get("commit", ""))[:12], fmt_size(float(e.get("size", 0))),
                      _when(e.get("created")))
    out.print(table)
    return 0
