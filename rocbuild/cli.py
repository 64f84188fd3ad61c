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

from rocbuild import __version__, faults, settings
from rocbuild.errors import EXIT_INTERRUPTED, RocbuildError, report

# Subcommand modules, in the order `rocbuild --help` lists them.
COMMAND_MODULES = (
    "rocbuild.cmd_plan",
    "rocbuild.cmd_build",
    "rocbuild.cmd_status",
    "rocbuild.cmd_logs",
    "rocbuild.cmd_verify",
    "rocbuild.cmd_bench",
    "rocbuild.cmd_doctor",
    "rocbuild.cmd_env",
    "rocbuild.cmd_activate",
    "rocbuild.cmd_prefixes",
    "rocbuild.cmd_cache",
    "rocbuild.cmd_lint_recipes",
)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    settings.add_flags(common)
    parser = argparse.ArgumentParser(
        prog="rocbuild",
        description="Build the ROCm 6.4 stack and llama.cpp from source for your GPU "
                    "(e.g. gfx906: MI50, MI60, Radeon VII).",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"rocbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(sub, [common])
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    flags = {o.name: getattr(args, o.name) for o in settings.OPTIONS if hasattr(args, o.name)}
    try:
        resolved = settings.resolve(flags)
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
