"""`rocbuild clean [COMPONENT...|--all] [--sources] [--caches] [--prefix-files] [--dry-run]`:
give back disk (build trees by default), showing what is freed; see clean.py."""

from __future__ import annotations

import argparse

from rich.markup import escape

from rocbuild.cli import clean
from rocbuild.cli.ui import console
from rocbuild.errors import ConfigError
from rocbuild.model.graph import Stack, load_stack
from rocbuild.model.resources import format_bytes
from rocbuild.model.settings import Settings


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "clean", parents=parents, help="remove build trees, sources or caches to free disk",
        description="Remove the build trees of the named components (or of all, --all) and "
                    "show what that frees. Sources and caches only when asked. The prefix is "
                    "never touched, except rocbuild's own files there with --prefix-files. "
                    "Refused while a build holds the workdir (exit 3). What is removed is "
                    "rebuilt (or downloaded) by the next build.")
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help="components to clean (or --all)")
    parser.add_argument("--all", action="store_true",
                        help="the whole workdir: every configuration's build trees")
    parser.add_argument("--sources", action="store_true",
                        help="also the checkouts in <workdir>/src")
    parser.add_argument("--caches", action="store_true",
                        help="also the git cache, and with --all the build venv, the wheels "
                             "and the ccache folder (downloaded or rebuilt next time)")
    parser.add_argument("--prefix-files", action="store_true",
                        help="also rocbuild's own files in the prefix: build-info, env.sh, "
                             "env.fish, modulefiles (never what a component installed)")
    parser.add_argument("--no-builds", dest="builds", action="store_false",
                        help="keep the build trees (clean only what the other flags name)")
    parser.add_argument("--dry-run", action="store_true",
                        help="only show what would be removed and how much it frees")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.all and args.components:
        raise ConfigError("name components or give --all, not both",
                          tip="rocbuild clean --all --dry-run shows what --all removes")
    if not args.all and not args.components:
        raise ConfigError("name the components to clean, or --all for the whole workdir",
                          tip="rocbuild clean --all --dry-run shows what it would free")
    kinds = {kind for kind, wanted in (("build", args.builds), ("sources", args.sources),
                                       ("caches", args.caches), ("prefix", args.prefix_files))
             if wanted}
    if not kinds:
        raise ConfigError("--no-builds with nothing else to clean",
                          tip="add --sources, --caches or --prefix-files")
    stack = load_stack(settings, args.components)
    chosen = None if args.all else [stack.components[n] for n in args.components]
    clean.refuse_other_folders(stack)  # exit 2: a user's project is not a workdir
    if args.dry_run:
        return report(stack, clean.find(stack, chosen, kinds), dry_run=True)
    if not stack.work.root.exists():  # nothing to remove, and no lock made in its place
        console().print(f"nothing to clean: {escape(str(stack.work.root))} does not exist")
        return 0
    with clean.locked(stack, lambda line: console().print(escape(line), soft_wrap=True)):
        # refused (exit 3) while a build runs
        code = report(stack, clean.find(stack, chosen, kinds), dry_run=False)
        if "prefix" in kinds:
            clean.release_prefix(stack)
        return code


def report(stack: Stack, items: list[clean.Item], *, dry_run: bool) -> int:
    """Show what is (or would be) removed with its size, then remove it unless dry_run."""
    out = console()
    removable = [i for i in items if i.removable]
    total = sum(i.size for i in removable)
    # one line per item with the path last and whole (a table would cut it to fit 80 columns)
    width = max((len(i.kind) for i in items), default=0)
    for item in items:
        size = format_bytes(item.size) if item.removable else "-"
        note = f" [dim]({escape(item.note)})[/]" if item.note else ""
        out.print(f"{size:>10}  {escape(item.kind):<{width}}  {escape(str(item.path))}{note}")
    if not removable:
        out.print("nothing to clean")
        return 0
    if dry_run:
        out.print(f"would free {format_bytes(total)} (--dry-run: nothing removed)")
        return 0
    freed = clean.remove(stack, removable)
    out.print(f"freed {format_bytes(freed)}")
    return 0
