"""Command line: argparse, the subcommand table and the one error boundary.

Each subcommand lives in ``rocbuild/cli/cmd_<name>.py`` with ``register(subparsers, parents)``
that adds its parser; ``func(args, settings) -> int`` is the module's ``run`` unless
``register`` sets another (a command of several actions sets one per action). Global
settings (settings.py) are accepted before or after the subcommand. A RocbuildError becomes
one message, an optional ``TIP:`` line and its exit code; never a traceback. argparse's own
refusals (an unknown command or flag, a bad choice) take the same shape through
``Parser.error``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from rocbuild import __version__, faults
from rocbuild.checks import hostload, trust
from rocbuild.cli import argerrors, help_text
from rocbuild.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    ConfigError,
    RocbuildError,
    fit_terminal,
    notice,
    report,
)
from rocbuild.model import settings
from rocbuild.run.state import basememo, prefixmemo

COMMAND_PACKAGE = "rocbuild.cli.cmd_"
# Subcommand modules, in the order `rocbuild --help` lists them.
COMMAND_MODULES = tuple(COMMAND_PACKAGE + name for name in (
    "plan", "build", "status", "list", "info", "logs", "verify", "bench", "doctor", "env",
    "activate", "prefixes", "cache", "lint_recipes", "clean", "targets", "config", "recipes",
    "uninstall", "completion"))


_root: argparse.ArgumentParser | None = None  # the top parser and the argv being parsed,
_argv: list[str] = []  # so a subcommand's refusal can name the command path it belongs to
_partial = False  # _root holds only the chosen command (build_parser's ``only``)


class Parser(argparse.ArgumentParser):
    """argparse whose refusals read like every other rocbuild error: ``rocbuild: error:``,
    what is wrong with a did-you-mean, a ``TIP:`` line, exit 2 (argerrors.py words them from
    argparse's hooks: ``_check_value``, the leftover words of ``parse_known_args``)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own check of a value against ``choices``: the action and the value go
        # up as they are, not as an English message
        if action.choices is not None and value not in action.choices:
            raise argerrors.BadChoice(action, value)
        super()._check_value(action, value)

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        try:
            parsed, unknown = self.parse_known_args(args, namespace)
        except argerrors.BadChoice as error:
            bad = error  # ``error`` is unbound once the except block ends (mypy: in a closure)
            self._refuse(lambda root, argv: argerrors.bad_choice(root, bad, argv))
        if unknown:
            self._refuse(lambda root, argv: argerrors.unrecognized(root, unknown, argv))
        return parsed

    def error(self, message: str) -> NoReturn:
        global _root, _partial
        if message.startswith("the following arguments are required: COMMAND"):
            if _partial:  # the refusal is worded with every command (did-you-mean, the path)
                _root, _partial = build_parser(), False
            if not argerrors.unknown_top_flags(_root or self, _argv or sys.argv[1:]):
                text = help_text.no_command(self).rstrip("\n")
                sys.stderr.write(fit_terminal(text, sys.stderr) + "\n")
                raise SystemExit(EXIT_BAD_INPUT)
        self._refuse(lambda root, argv: argerrors.explain(root, message, argv))

    def _refuse(self, explain: Callable[[argparse.ArgumentParser, list[str]], RocbuildError]
                ) -> NoReturn:
        global _root, _partial
        if _partial:  # the refusal is worded with every command (did-you-mean, the path)
            _root, _partial = build_parser(), False
        exc = explain(_root or self, _argv or sys.argv[1:])
        raise SystemExit(report(exc, sys.stderr))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or with ``only`` one subcommand's parser: each cmd_*.py
    imports what its command runs (doit, GitPython, the bench and check modules), so
    `rocbuild status` does not pay for importing `build` and `bench` (perf/noop.py). An error
    or help that needs the other commands builds the whole parser (``Parser.error``)."""
    # the global options, shown in full by `rocbuild --help` and `rocbuild help options`;
    # each subcommand accepts them too but lists only its own (plus a pointer to these)
    common = Parser(add_help=False)
    settings.add_flags(common, help_text.GLOBAL_TITLE, help_text.GLOBAL_DESCRIPTION)
    hidden = Parser(add_help=False)
    settings.add_flags(hidden, hidden=True)
    parser = Parser(
        prog="rocbuild",
        description="Build the ROCm 6.4 stack and llama.cpp from source for your GPU "
                    "(e.g. gfx906: MI50, MI60, Radeon VII).",
        parents=[common],
        epilog=help_text.EXIT_CODES,
        formatter_class=help_text.Formatter,
    )
    parser.add_argument("--version", action="version", version=f"rocbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for module_name in COMMAND_MODULES:
        name = module_name.removeprefix(COMMAND_PACKAGE).replace("_", "-")
        if only is None or name == only:
            module = importlib.import_module(module_name)
            module.register(sub, [hidden])
            if sub.choices[name].get_default("func") is None and hasattr(module, "run"):
                sub.choices[name].set_defaults(func=module.run)
    help_text.add_help_command(sub, parser)
    help_text.attach(sub)
    return parser


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` runs, when it is one whose parser alone can parse it; None for
    `help`, a bare `rocbuild`, --help/--version before the command, or an unknown word."""
    names = {m.removeprefix(COMMAND_PACKAGE).replace("_", "-") for m in COMMAND_MODULES}
    words = argerrors.command_words(argv)
    if not words or words[0][1] not in names:
        return None
    place, command = words[0]
    if any(token in ("-h", "--help", "--version") for token in argv[:place]):
        return None
    return command


def positional_settings(args: argparse.Namespace, flags: dict[str, Any]) -> dict[str, Any]:
    """The settings a command takes as a positional argument too (``cache list DIR`` is
    ``cache list --cache DIR``: its ``setting_args`` maps the argument's dest to the
    setting); both given and different is bad input."""
    out: dict[str, Any] = {}
    for dest, name in getattr(args, "setting_args", {}).items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        flag = settings.OPTION_BY_NAME[name].flag
        if flags.get(name) not in (None, value):
            raise ConfigError(f"{value} and {flag} {flags[name]} name two different places",
                              tip=f"give one of them (`{flag} X` or the argument alone)")
        out[name] = value
    return out


def main(argv: Sequence[str] | None = None) -> int:
    global _root, _argv, _partial
    _argv = list(sys.argv[1:] if argv is None else argv)
    only = chosen_command(_argv)
    parser = build_parser(only)
    _root, _partial = parser, only is not None
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # for "continue with" lines
    flags = {o.name: getattr(args, o.name) for o in settings.OPTIONS if hasattr(args, o.name)}
    resolved: settings.Settings | None = None
    try:
        flags.update(positional_settings(args, flags))
        if not getattr(args, "needs_settings", True):  # `rocbuild help`: no config is read
            return int(args.func(args))
        for warning in settings.unknown_variables(os.environ):
            notice(f"rocbuild: warning: {warning}")
        # the workdir's last --base and --prefix
        chosen = settings.resolve(flags, os.environ, Path.cwd(), hostload.usable_cpus()[0],
                                  trust.host_trust(os.environ))
        for warning in chosen.warnings:  # files others could write, passed over
            notice(f"rocbuild: warning: {warning}")
        resolved = prefixmemo.apply(basememo.apply(chosen))
        # a command that never reads the prefix or base (memo_notes=False: activate names
        # its own PREFIX, config shows each value's source) is spared their notes
        for note in resolved.notes if getattr(args, "memo_notes", True) else chosen.notes:
            notice(f"rocbuild: note: {note}")
        return int(args.func(args, resolved))
    except RocbuildError as exc:
        return report(exc, sys.stderr)
    except OSError as exc:  # a full disk or a read-only file system under rocbuild's own files
        if not faults.is_machine_fault(exc):
            raise
        # where to look when the error names no file (a write to an open one)
        given = (resolved.workdir, resolved.prefix) if resolved is not None else (
            flags.get("workdir"), flags.get("prefix"))
        near = [Path(p) for p in given if p is not None]
        return report(faults.explain(exc, near=near), sys.stderr)
    except BrokenPipeError:  # `rocbuild plan | head`: the reader left, which is not an error
        sys.stdout = None  # no flush of a closed pipe at exit
        return 0
    except KeyboardInterrupt:
        notice("rocbuild: interrupted; what finished is kept, run the same command again to "
               "continue")
        return EXIT_INTERRUPTED
