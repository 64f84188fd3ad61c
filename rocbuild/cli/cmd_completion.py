"""`rocbuild completion {bash,zsh,fish}`: a shell completion script generated from the
argparse parser, so it always knows every command and flag of this rocbuild.

The script is written by shtab (a small, well-kept generator with no dependencies of its own;
it writes bash, zsh, tcsh and, since 1.8, fish from the parser), not by hand: a hand-written
script drifts from the parser the first time a flag is added. Install it once, e.g.
``rocbuild completion bash > ~/.local/share/bash-completion/completions/rocbuild``.
"""

from __future__ import annotations

import argparse
import sys

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
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.set_defaults(func=run, needs_settings=False)


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


def run(args: argparse.Namespace, settings: Settings | None = None) -> int:
    import shtab

    from rocbuild.cli import main

    parser = main.build_parser()  # every command, whichever one was parsed
    show_global_flags(parser)
    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    if not sys.stdout.isatty():
        sys.stdout.write("\n")
    return 0
