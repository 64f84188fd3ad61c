"""`rocbuild lint-recipes [--sources [DIR]] [--json]`: check every recipe, and with real
checkouts, that each -D option a recipe passes is read by some CMake file.

Exit 0 when nothing is wrong (warnings allowed), 1 when an option is never read, 2 for a
recipe error (raised by the loader as a ConfigError, like every other command).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from rocbuild.checks.lint import LintReport, lint_recipes, lint_sources
from rocbuild.cli.ui import console, print_json
from rocbuild.errors import EXIT_BAD_INPUT, EXIT_OK, ConfigError
from rocbuild.errors import report as report_error
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import Workdir

_LEVEL_STYLE = {"error": "bold red", "warning": "yellow", "note": "dim"}


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "lint-recipes", parents=parents, help="check the recipes (and their -D options)",
        description="Render every recipe for the stack's default targets and for "
                    "gfx906,gfx90a, and warn about weak spots. With --sources, also report "
                    "each -D option no CMake file of the component or its dependencies reads.")
    parser.add_argument(
        "--sources", nargs="?", const="", default=None, metavar="DIR",
        help="checkouts laid out like <workdir>/src, one folder per component "
             "(default when given without DIR: <workdir>/src)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(memo_notes=False)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.sources is None:
        report = lint_recipes(settings)
    else:
        sources = (Path(args.sources).absolute() if args.sources
                   else Workdir.shared(settings.workdir).src)
        report = lint_sources(settings, sources)
    if args.json:
        print_json(report.to_json())
    else:
        print_report(report)
    if args.sources is not None and not any(s.checked for s in report.sources):
        # a wrong folder must not read as "0 errors": nothing was compared at all
        return report_error(ConfigError(
            f"nothing could be checked: no component has a checkout in {sources}",
            tip="fetch first (`rocbuild build`, or stop it after the fetches) or name the "
                "folder that holds the checkouts: --sources DIR"), sys.stderr)
    # findings are problems of the recipes, which are input (exit codes: 2 bad input)
    return EXIT_BAD_INPUT if report.errors else EXIT_OK


def print_report(report: LintReport) -> None:
    out = console()
    out.print(f"rendered {len(report.components)} recipes for targets "
              f"{escape(' and '.join(report.targets))}")
    if report.sources:
        table = Table(title="-D options against the CMake files", title_justify="left")
        for column in ("component", "options", "unread", "searched"):
            table.add_column(column, overflow="fold")
        for s in report.sources:
            if not s.checked:
                table.add_row(escape(s.component), str(len(s.options)), "-",
                              f"not checked (no checkout at {escape(str(s.source_dir))})")
                continue
            searched = ", ".join(s.searched)
            if s.missing:
                searched += f" [dim](no checkout: {', '.join(s.missing)})[/]"
            table.add_row(escape(s.component), str(len(s.options)),
                          escape(", ".join(s.unread)) or "0", searched)
        out.print(table)
    shown = [f for f in report.findings if f.level != "note" or not report.sources
             or "not checked (no checkout" not in f.message]  # already in the table
    if shown:
        table = Table(title="findings", title_justify="left")
        for column in ("level", "component", "finding"):
            table.add_column(column, overflow="fold")
        for f in shown:
            style = _LEVEL_STYLE.get(f.level, "")
            table.add_row(f"[{style}]{f.level}[/]", escape(f.component), escape(f.message))
        out.print(table)
    out.print(f"{len(report.errors)} errors, {len(report.warnings)} warnings")
