"""Command line: argparse, the subcommand table and the one error boundary.

Each subcommand lives in ``rocbuild/cmd_<name>.py`` with ``register(subparsers, parents)``
that adds its parser and sets ``func(args, settings) -> int``. Global settings (settings.py)
are accepted before or after the subcommand. A RocbuildError becomes one message, an
optional ``TIP:`` line and its exit code; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from rocbuild import __version__, faults
from rocbuild.cli import help_text
from rocbuild.errors import EXIT_INTERRUPTED, RocbuildError, report
from rocbuild.model import settings
from rocbuild.model.targets import looks_like_target
from rocbuild.run import basememo

# Subcommand modules, in the order `rocbuild --help` lists them.
COMMAND_MODULES = (
    "rocbuild.cli.cmd_plan",
    "rocbuild.cli.cmd_build",
    "rocbuild.cli.cmd_status",
    "rocbuild.cli.cmd_logs",
    "rocbuild.cli.cmd_verify",
    "rocbuild.cli.cmd_bench",
    "rocbuild.cli.cmd_doctor",
    "rocbuild.cli.cmd_env",
    "rocbuild.cli.cmd_activate",
    "rocbuild.cli.cmd_prefixes",
    "rocbuild.cli.cmd_cache",
    "rocbuild.cli.cmd_lint_recipes",
    "rocbuild.cli.cmd_clean",
)


class Parser(argparse.ArgumentParser):
    """argparse with one hint more: a second target after ``--target`` (``--target gfx906
    gfx90a``) lands among the arguments it does not know; say how to write two targets."""

    def error(self, message: str) -> NoReturn:
        extra = message.partition("unrecognized arguments: ")[2].split()
        if any(looks_like_target(word) for word in extra):
            message += "; to build for several GPU targets, separate them with commas " \
                       "(--target gfx906,gfx90a)"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    common = Parser(add_help=False)
    settings.add_flags(common, help_text.GLOBAL_TITLE, help_text.GLOBAL_DESCRIPTION)
    parser = Parser(
        prog="rocbuild",
        description="Build the ROCm 6.4 stack and llama.cpp from source for your GPU "
                    "(e.g. gfx906: MI50, MI60, Radeon VII).",
        parents=[common],
        epilog=help_text.EXIT_CODES,
        formatter_class=help_text.Formatter,
    )
    parser.add_argument("--version", action="version", version=f"rocbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub, [common])
    help_text.attach(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for "continue with" lines
    flags = {o.name: getattr(args, o.name) for o in settings.OPTIONS if hasattr(args, o.name)}
    try:
        resolved = basememo.apply(settings.resolve(flags))  # the workdir's last --base
        for note in resolved.notes:
            print(f"rocbuild: note: {note}", file=sys.stderr)
        return int(args.func(args, resolved))
    except RocbuildError as exc:
        return report(exc, sys.stderr)
    except OSError as exc:  # a full disk or a read-only file system under rocbuild's own files
        if not faults.is_machine_fault(exc):
            raise
        return report(faults.explain(exc), sys.stderr)
    except BrokenPipeError:  # `rocbuild plan | head`: the reader left, which is not an error
        sys.stdout = None  # no flush of a closed pipe at exit
        return 0
    except KeyboardInterrupt:
        print("rocbuild: interrupted; what finished is kept, run the same command again to "
              "continue", file=sys.stderr)
        return EXIT_INTERRUPTED
