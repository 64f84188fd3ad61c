"""`rocbuild completion {bash,zsh,fish}`: a shell completion script generated from the
argparse parser, so it always knows every command and flag of this rocbuild.

The script is written by shtab (a small, well-kept generator with no dependencies of its own;
it writes bash, zsh, tcsh and, since 1.8, fish from the parser), not by hand: a hand-written
script drifts from the parser the first time a flag is added. Install it once, e.g.
``rocbuild completion bash > ~/.local/share/bash-completion/completions/rocbuild``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.model.settings import Settings

SHELLS = ("bash", "zsh", "fish")
WHERE = {  # where each shell loads a completion from, for the help text
    "bash": "~/.local/share/bash-completion/completions/rocbuild",
    "zsh": "a folder on $fpath, as _rocbuild",
    "fish": "~/.config/fish/completions/rocbuild.fish",
}


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "completion", parents=parents, help="print a shell completion script",
        description="Print the tab-completion script for bash, zsh or fish, generated from "
                    "rocbuild's own command line. Save it where your shell looks: "
                    + "; ".join(f"{shell}: {where}" for shell, where in WHERE.items())
                    + ". Or, for this shell only: source <(rocbuild completion bash).")
    parser.add_argument("shell", nargs="?", choices=SHELLS, help="the shell to complete in")
    # what the script runs at <Tab> for a COMPONENT: the names of the configured stack
    parser.add_argument(COMPONENTS_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(needs_settings=False)


COMPONENTS_FLAG = "--components"
# the script asks the rocbuild being completed (the command as typed, so a venv's rocbuild
# not on PATH answers too; fish cannot run a substitution as a command: rocbuild on PATH),
# and a broken config or recipe folder completes nothing rather than printing an error
_ASK = {"bash": '"${COMP_WORDS[0]}"', "zsh": '"${words[1]}"', "fish": "rocbuild"}
COMPONENT_COMPLETER: dict[str, Any] = {
    "bash": "_rocbuild_components",
    "zsh": f"($({_ASK['zsh']} completion {COMPONENTS_FLAG} 2>/dev/null))",
    "fish": f"({_ASK['fish']} completion {COMPONENTS_FLAG} 2>/dev/null)",
    "preamble": {"bash": "_rocbuild_components() {\n"
                         f'  compgen -W "$({_ASK["bash"]} completion {COMPONENTS_FLAG} '
                         '2>/dev/null)" -- "$1"\n}\n'},
}


def show_global_flags(parser: argparse.ArgumentParser) -> None:
    """Every command accepts the global flags (--workdir, --prefix, ...) but hides them from
    its own help (main.build_parser); shtab leaves hidden options out, so unhide them in this
    throwaway parser: `rocbuild build --wor<TAB>` completes too."""
    for action in parser._actions:
        if action.option_strings and action.help == argparse.SUPPRESS:
            action.help = None
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                show_global_flags(child)


def add_completers(parser: argparse.ArgumentParser) -> None:
    """What <Tab> offers beyond commands and flags, in this throwaway parser: the stack's
    component names for every COMPONENT (asked of rocbuild when <Tab> is pressed, so an
    overlay recipe added later completes too), the step names for `logs COMPONENT STEP`
    and the processors --target knows (fixed for this rocbuild: written into the script)."""
    from rocbuild.model.steptable import STEPS
    from rocbuild.model.targets import PROCESSOR_FEATURES

    for action in parser._actions:
        if action.metavar == "COMPONENT":
            action.complete = COMPONENT_COMPLETER  # type: ignore[attr-defined]
        elif action.metavar == "STEP":
            action.choices = [kind.name for kind in STEPS]
        elif "--target" in action.option_strings:
            action.choices = sorted(PROCESSOR_FEATURES)
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                add_completers(child)


def component_names() -> list[str]:
    """The components of the stack as configured here (config file, ROCBUILD_* variables),
    in build order; none when the configuration or the recipes cannot be read."""
    from rocbuild.checks import hostload
    from rocbuild.errors import RocbuildError
    from rocbuild.model import recipes, settings

    try:
        resolved = settings.resolve({}, os.environ, Path.cwd(), hostload.usable_cpus()[0])
        folder = recipes.load_recipes(resolved.recipes, resolved.overlay)
    except (RocbuildError, OSError):
        return []
    default = list(folder.stack.components)
    return default + sorted(n for n in folder.recipes if n not in default)


def run(args: argparse.Namespace, settings: Settings | None = None) -> int:
    if args.components:
        sys.stdout.writelines(f"{name}\n" for name in component_names())
        return 0
    if args.shell is None:
        raise ConfigError("name the shell: rocbuild completion bash, zsh or fish",
                          tip="rocbuild completion bash > "
                              "~/.local/share/bash-completion/completions/rocbuild")
    import shtab

    from rocbuild.cli import main

    parser = main.build_parser()  # every command, whichever one was parsed
    show_global_flags(parser)
    add_completers(parser)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    if not sys.stdout.isatty():
        sys.stdout.write("\n")
    return 0
