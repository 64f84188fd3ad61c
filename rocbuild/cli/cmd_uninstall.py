"""`rocbuild uninstall COMPONENT...`: take components out of the prefix (their recorded
files, never one another component owns: prefix/uninstall.py), refusing one that another
installed component depends on unless ``--force``."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path

from rich.markup import escape

from rocbuild.cli.ui import console
from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack, reachable
from rocbuild.model.settings import Settings
from rocbuild.prefix import activate, buildinfo, uninstall
from rocbuild.run.state.state import StateDir, prefix_lock


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "uninstall", parents=parents, help="remove components' files from the prefix",
        description="Remove from the prefix the files each named component installed (its "
                    "install record in <prefix>/.rocbuild/installed/), never a file another "
                    "component installed too, and the folders that leaves empty. Refused "
                    "when another installed component depends on it, unless --force. A "
                    "component still in the stack is installed again by the next build.")
    parser.add_argument("components", nargs="+", metavar="COMPONENT")
    parser.add_argument("--force", action="store_true",
                        help="also when other installed components depend on it")


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings)
    prefix = stack.prefix
    installed = uninstall.installed_components(prefix)
    info = buildinfo.read_build_info(prefix)
    # a name build-info still lists without an install record: a killed uninstall removed
    # its files and record; this command finishes it (build-info is written last)
    unfinished = set(info.components) - set(installed) if info is not None else set()
    missing = [c for c in args.components if c not in installed and c not in unfinished]
    if missing:
        raise ConfigError(
            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in "
            f"{prefix} (installed: {', '.join(installed) or 'nothing'})",
            tip="give --prefix for another prefix; `rocbuild prefixes` lists them")
    recipes = stack.recipes.recipes
    going = set(args.components)
    users = {other: sorted(going & reachable([other], lambda n: recipes[n].depends
                                             if n in recipes else ()) - {other})
             for other in installed if other not in going}
    users = {other: needs for other, needs in users.items() if needs}
    if users and not args.force:
        shown = "; ".join(f"{other} needs {', '.join(needs)}" for other, needs in
                          sorted(users.items()))
        raise ConfigError(f"other installed components depend on it: {shown}",
                          tip=f"uninstall them too (rocbuild uninstall {' '.join(sorted(users))} "
                              f"{' '.join(args.components)}), or pass --force")
    out = console()
    with StateDir.of(stack).lock(), prefix_lock(prefix, create=False):
        info = buildinfo.read_build_info(prefix)
        if info is not None and going & set(stack.order):
            # first: the prefix no longer holds the whole stack, so a kill from here on
            # never leaves one that says complete (and verified) with a component gone
            info = replace(info, complete=False, verified=False, finished=None)
            buildinfo.write_build_info(prefix, info)
        for name in args.components:
            if name not in installed:
                out.print(f"finished uninstalling {escape(name)} from {escape(str(prefix))} "
                          "(an earlier uninstall was interrupted)")
                continue
            done = uninstall.uninstall(prefix, name, stack.recipes.stack.name)
            out.print(f"uninstalled {escape(name)} from {escape(str(prefix))}: "
                      f"{escape(done.text())}")
        if info is not None:  # last: while it names them, a rerun knows what to finish
            left = {k: v for k, v in info.components.items() if k not in going}
            buildinfo.write_build_info(prefix, replace(info, components=left))
    # the prefix is in use through a stable link: say what its users lose (no refusal: the
    # user asked for it, and `rocbuild build` puts a component of the stack back)
    stable = Path(os.environ.get(activate.LINK_ENV) or activate.DEFAULT_LINK).expanduser()
    for link in activate.links_to(prefix, also=[stable]):
        out.print(f"[yellow]warning[/]: {escape(str(link))} points at this prefix (it is "
                  f"activated): what uses it through the link no longer finds "
                  f"{escape(', '.join(args.components))}")
    again = [n for n in args.components if n in stack.order]
    if again:
        out.print(f"{', '.join(again)} {'is' if len(again) == 1 else 'are'} in the stack: the "
                  "next `rocbuild build` installs it again")
    return 0
