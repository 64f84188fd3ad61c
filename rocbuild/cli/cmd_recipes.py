"""`rocbuild recipes edit NAME`: copy a shipped recipe into the user's overlay folder
(``recipe_overlay``, default ``~/.config/rocbuild/recipes``: model/recipes.py
``load_recipes``), where it replaces the shipped one and survives upgrades, then open it in
``$EDITOR`` when one is set and this is a terminal (else print its path)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys

from rich.markup import escape

from rocbuild import proc
from rocbuild.cli.ui import console
from rocbuild.errors import ConfigError
from rocbuild.model.recipes import STACK_FILE, load_recipes, unknown_component
from rocbuild.model.settings import Settings


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "recipes", parents=parents, help="change a recipe in your overlay folder",
        description="Your own recipes live in an overlay folder (--recipe-overlay, default "
                    "$XDG_CONFIG_HOME/rocbuild/recipes): a <name>.toml there replaces the "
                    "shipped recipe of that name, stack.toml the stack, and "
                    "patches/<name>/ beside the folder the patch series; `rocbuild plan` "
                    "names what comes from it.")
    actions = parser.add_subparsers(dest="recipes_command", metavar="ACTION")
    actions.required = True
    edit = actions.add_parser(
        "edit", parents=parents, help="copy a shipped recipe into the overlay and edit it",
        description="Copy the recipe NAME (or 'stack' for stack.toml) into the overlay folder "
                    "unless it is there already, then open it in $EDITOR when it is set and "
                    "this is a terminal; otherwise print the path.")
    edit.add_argument("name", metavar="NAME", help="a component, or 'stack' for stack.toml")
    edit.set_defaults(func=run_edit, memo_notes=False)


def run_edit(args: argparse.Namespace, settings: Settings) -> int:
    overlay = settings.overlay
    if settings.refused_overlay:  # others could write it: editing there would not count
        raise ConfigError(settings.refused_overlay,
                          tip="make the overlay folder yours alone (chown, chmod go-w), or "
                              "name another with --recipe-overlay")
    if overlay is None:
        raise ConfigError(f"--recipes {settings.recipes} is your own folder: edit its files "
                          "there (an overlay applies to the shipped recipes, or to --recipes "
                          "when --recipe-overlay is given too)",
                          tip=f"edit {settings.recipes}/{args.name}.toml")
    file = STACK_FILE if args.name == "stack" else f"{args.name}.toml"
    shipped = settings.recipes / file
    mine = overlay / file
    out = console()
    if mine.is_file():
        out.print(f"{escape(file)} is already in your overlay, where it replaces the shipped "
                  "one:")
    else:
        if not shipped.is_file():
            names = sorted(load_recipes(settings.recipes).recipes)
            raise unknown_component(args.name, names, "`rocbuild plan` lists the components",
                                    where=f"{settings.recipes}: ")
        mine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shipped, mine)
        out.print(f"copied the shipped {escape(file)} into your overlay, where it replaces "
                  "the shipped one from now on (delete it to go back):")
        out.print(f"  from {escape(str(shipped))}", soft_wrap=True)
    # the path whole on the last line: to open it yourself, or for a script
    out.print(escape(str(mine)), soft_wrap=True)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if editor and sys.stdin.isatty() and sys.stdout.isatty():
        return proc.run_interactive([*shlex.split(editor), str(mine)])
    return 0
