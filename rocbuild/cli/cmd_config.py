"""`rocbuild config`: which config file is read and the value of every setting in force with
where it came from (flag, ``ROCBUILD_*`` variable, config file, the workdir's memory or the
default), from ``settings.OPTIONS`` and ``Settings.source``; nothing is changed."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocbuild.cli.ui import console, print_json, print_row
from rocbuild.model import settings as settings_mod
from rocbuild.model.settings import Settings


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "config", parents=parents, help="show the config file read and every setting in force",
        description="Show which rocbuild.toml is read (the nearest one in the current folder "
                    "or a folder above it, not above your home folder, else "
                    "$XDG_CONFIG_HOME/rocbuild/rocbuild.toml; a file another user could "
                    "have written is not used, see safe_directories) and the value of every "
                    "setting with where it came from: flag, ROCBUILD_* variable, config "
                    "file, the workdir's last build, or the default.")
    parser.add_argument("--json", action="store_true", help="print the files and values as JSON")
    parser.set_defaults(memo_notes=False)


# what an unset value means, for the settings where it means more than "none"
UNSET = {"prefix": "the stack's own (recipes/stack.toml)",
         "target": "the stack's own (recipes/stack.toml)", "jobs": "no limit",
         "base": "none (built from source)"}


def shown(name: str, value: Any) -> str:
    """A setting's value as a user would write it (targets and mirror rules joined)."""
    if value is None or value == "" or value == ():
        return UNSET.get(name, "-")
    if isinstance(value, tuple):
        return ";".join("=".join(v) if isinstance(v, tuple) else str(v) for v in value) \
            if value and isinstance(value[0], tuple) else ",".join(str(v) for v in value)
    return str(value)


def run(args: argparse.Namespace, settings: Settings) -> int:
    cwd, env = Path.cwd(), os.environ
    choice = settings.config or settings_mod.find_config(cwd, env)
    used, looked = choice.path, list(choice.searched)
    values = [{"name": o.name, "value": shown(o.name, settings.value(o.name)),
               "source": settings.source(o.name)} for o in settings_mod.OPTIONS]
    if args.json:
        print_json({"config_file": str(used) if used else None,
                    "searched": [str(p) for p in looked], "settings": values,
                    "not_used": [{"file": str(path), "why": why}
                                 for path, why in choice.skipped],
                    "overlay_not_used": settings.refused_overlay or None})
        return 0
    out = console()
    if used is None:
        out.print(f"config file: none (looked for {settings_mod.CONFIG_FILE_NAME} in "
                  f"{escape(str(cwd))} and the folders above it up to "
                  f"{escape(str(looked[-2].parent))}, and {escape(str(looked[-1]))})")
    else:
        out.print(f"config file: {escape(str(used))}")
        user = settings_mod.user_config_path(env)
        if used != user and user.is_file():
            out.print(f"not read: {escape(str(user))} (the nearer file wins; they are not "
                      "merged)")
    for path, why in choice.skipped:  # others could write it (model/trust.py)
        out.print(f"not used: {escape(str(path))} ({escape(why)})")
    if settings.refused_overlay:
        out.print(f"not used: {escape(settings.refused_overlay)}")
    # rows, not a table: a path stays whole (to paste), a long row continues under its value
    width = max(len(row["name"]) for row in values)
    out.print("settings (value, then where it came from):")
    for row in values:
        print_row(out, f"  {row['name']:<{width}} {escape(row['value'])} "
                       f"[dim]({escape(row['source'])})[/]", width + 3)
    return 0
