"""Bytes from files and arguments never reach a terminal raw: the one escaping rule
(errors.printable, printable_lines) and the places every printed line passes, so no caller
can forget it: the console (cli/ui.py), errors and notices (errors.fit_terminal), the build's
plain lines (cli/output.py). The last test keeps every other writer to stdout or stderr on a
reviewed list."""

from __future__ import annotations

import ast
import io
from pathlib import Path

from rich.table import Table
from rich.text import Text

from rocbuild.cli import ui
from rocbuild.cli.output import Output
from rocbuild.errors import ConfigError, notice, printable, printable_lines, report

PACKAGE = Path(__file__).resolve().parents[2] / "rocbuild"
HOSTILE = "a\x1b]0;owned\x07b\x1b[2Jc\x9bd\u202ee\x7f\r\x08"


def test_every_control_character_is_written_as_its_escape() -> None:
    controls = [chr(c) for c in (*range(0x20), *range(0x7f, 0xa0))] + [
        "\u061c", "\u200e", "\u200f", *map(chr, range(0x202a, 0x202f)),
        *map(chr, range(0x2066, 0x206a))]
    for ch in controls:
        shown = printable(f"x{ch}y")
        assert shown.startswith("x\\") and shown.endswith("y") and ch not in shown, repr(ch)
    assert printable("a\nb\tc\x1b") == "a\\nb\\tc\\x1b"
    assert printable_lines("a\nb\tc\x1b") == "a\nb\tc\\x1b"
    assert printable("gfx906:xnack- é ✓ /opt/rocm") == "gfx906:xnack- é ✓ /opt/rocm"


def _console(terminal: bool) -> tuple[ui.FittedConsole, io.StringIO]:
    stream = io.StringIO()
    out = ui.FittedConsole(file=stream, highlight=False, emoji=False, width=200,
                           force_terminal=terminal, color_system="standard" if terminal else None)
    return out, stream


def test_the_console_escapes_text_tables_and_soft_wrapped_lines_and_keeps_its_styles() -> None:
    for terminal in (False, True):
        out, stream = _console(terminal)
        out.print(f"[bold]name[/] {ui.escape(HOSTILE)}")
        out.print(Text(HOSTILE))
        out.print(f"continue with: {ui.escape(HOSTILE)}", soft_wrap=True)
        table = Table()
        table.add_column("component")
        table.add_row(ui.escape(HOSTILE))
        out.print(table)
        text = stream.getvalue()
        assert "\\x1b]0;owned" in text and "\\x1b[2J" in text and "\\x9b" in text \
            and "\\u202e" in text, text
        for raw in ("\x1b]", "\x1b[2J", "\x9b", "\u202e", "\x07", "\x7f", "\x08", "\r"):
            assert raw not in text, (terminal, raw)
        # rich's own style (bold) still reaches a terminal as its sequence
        assert ("\x1b[1m" in text) is terminal


def test_errors_notices_and_build_lines_escape_and_keep_their_lines() -> None:
    stream = io.StringIO()
    report(ConfigError(f"unknown component '{HOSTILE}'\nsecond line", tip=HOSTILE), stream)
    notice(f"rocbuild: warning: {HOSTILE}", stream)
    text = stream.getvalue()
    assert "\\x1b]0;owned" in text and "\x1b" not in text and "\nsecond line" in text
    plain = io.StringIO()
    output = Output(plain)
    output.say(HOSTILE)
    output.build_line("a", "compile", "\x1b[1m\x1b[31merror:\x1b[0m x \x1b]0;t\x07")
    lines = plain.getvalue()
    assert "\x1b" not in lines and "\\x1b]0;owned" in lines
    assert "a:compile | error: x \\x1b]0;t\\x07" in lines  # a tool's colours are dropped


# every other place that writes to stdout or stderr, and why its bytes are safe there
REVIEWED = {
    ("errors.py", "report"): "fit_terminal escapes (printable_lines)",
    ("errors.py", "notice"): "fit_terminal escapes (printable_lines)",
    ("__main__.py", "_interrupted"): "a constant",
    ("cli/main.py", "Parser.error"): "fit_terminal escapes (printable_lines)",
    ("cli/cmd_completion.py", "run"): "shtab's script, from rocbuild's own parser",
    ("cli/help_text.py", "show_help"): "help text: rocbuild's own words",
    ("cli/cmd_env.py", "run"): "printable_lines; the texts were checked at load (envtext.py)",
    ("cli/cmd_logs.py", "Shown.write"): "printable_lines on a terminal",
    ("cli/cmd_logs.py", "follow"): "through Shown",
    ("cli/cmd_logs.py", "print_log"): "through Shown",
    ("cli/cmd_plan.py", "run"): "plan --commands: shell words in $'...' form (steps.shell_word)",
    ("cli/refdocs.py", "main"): "a developer's tool writing the reference pages",
    ("cli/ui.py", "StampedStream.write"): "the fitted console's stream: what it writes was "
                                          "escaped by _render_buffer; only the time is added",
}


def _raw_writes() -> set[tuple[str, str]]:
    """(module, function) of every print() and every write/writelines on sys.stdout,
    sys.stderr, a console's stream or (in cli/) an ``out`` stream, but json.dump (which
    escapes) and a lone newline."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        rel = path.relative_to(PACKAGE).as_posix()
        functions = [(None, f) for f in tree.body] + [
            (c.name, f) for c in tree.body if isinstance(c, ast.ClassDef) for f in c.body]
        for owner, scope in functions:
            if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            name = f"{owner}.{scope.name}" if owner else scope.name
            for node in ast.walk(scope):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                streams = ("sys.stdout", "sys.stderr", "self.stream",
                           *(("out",) if rel.startswith("cli/") else ()))
                newline = bool(node.args) and ast.unparse(node.args[0]) == "'\\n'"
                if (isinstance(func, ast.Name) and func.id == "print") or (
                        isinstance(func, ast.Attribute) and func.attr in ("write", "writelines")
                        and ast.unparse(func.value) in streams and not newline):
                    found.add((rel, name))
    return found


def test_every_raw_writer_to_the_terminal_is_reviewed() -> None:
    """A new print() or sys.stdout.write fails here until it goes through the console, the
    error printer, or is added above with the reason its bytes are safe."""
    found = _raw_writes()
    known = {**REVIEWED, ("cli/output.py", "Output.say"): "printable_lines",
             ("cli/ui.py", "print_commands"): "shell words in $'...' form (steps.shell_word)"}
    assert found - known.keys() == set(), found - known.keys()
    assert known.keys() - found == set(), f"stale entries: {known.keys() - found}"


def test_no_console_is_made_but_the_fitted_one() -> None:
    """rich prints what it is given as it is: every console is ui.console's, whose
    _render_buffer escapes (run/ gets it from the CLI)."""
    made = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("Console",
                                                                         "rich.console.Console"):
                made.append(path.relative_to(PACKAGE).as_posix())
    assert made == [], made
