"""Every table and help text fits 80 columns: in a pipe (80 unless COLUMNS says
otherwise), with COLUMNS, and on a real terminal (a pty of 80 columns). Text wraps at spaces
only: a line may be wider than the terminal only when it is one word (a path) or a command
printed whole to paste (tests/cli.py ``too_wide``)."""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from rocbuild.cli import help_text
from rocbuild.cli import main as cli
from tests.cli import REPO, child_env, commands_under, run_cli, too_wide, unstamped
from tests.conftest import require_tool
from tests.support.chain import Chain, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def commands() -> list[list[str]]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out = []
    for name, command in sub.choices.items():
        out.append([name])
        nested = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        out += [[name, child] for a in nested for child in a.choices]
    return out


def help_texts(tmp_path: Path) -> list[str]:
    """Every help text at 80 columns: the top level, the global options, each command and
    nested command, and what `rocbuild --help` and a bare `rocbuild` print in a pipe."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    texts = [parser.format_help(), help_text.global_options_help(parser)]
    for argv in commands():
        command = sub.choices[argv[0]]
        if len(argv) > 1:
            nested = next(a for a in command._actions
                          if isinstance(a, argparse._SubParsersAction))
            command = nested.choices[argv[1]]
        texts.append(command.format_help())
    texts.append(run_cli("--help", cwd=tmp_path, expect=0).stdout)  # a pipe, no COLUMNS
    texts.append(run_cli(cwd=tmp_path, expect=2).stderr)  # bare `rocbuild`: commands, start
    return texts


def test_every_help_text_fits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # argparse sizes help from COLUMNS (shutil.get_terminal_size): in-process is the same
    # text the child prints; the pipe default is checked through `rocbuild --help`
    monkeypatch.setenv("COLUMNS", "80")
    for text in help_texts(tmp_path):  # a path longer than a line stays whole on its own
        assert too_wide(text, 80) == [], text


def test_no_help_text_breaks_a_word_at_its_hyphen(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`env --help` printed "(opt-" and "in, each with ..." on two lines: argparse's textwrap
    breaks at hyphens. Help wraps between words only, as every other output does."""
    monkeypatch.setenv("COLUMNS", "80")
    env_help = run_cli("env", "--help", cwd=tmp_path, env={"COLUMNS": "80"}, expect=0).stdout
    assert "opt-in" in " ".join(env_help.split()) and "opt-\n" not in env_help, env_help
    for text in help_texts(tmp_path):
        broken = [line for line in text.splitlines() if re.search(r"[A-Za-z]-$", line)]
        assert broken == [], text


def in_a_pty(argv: list[str], columns: int, cwd: Path) -> str:
    """What ``rocbuild argv`` prints on a terminal ``columns`` wide (a real pty)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: a terminal of that size on stdin/stdout/stderr
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        os.chdir(cwd)
        env = child_env({"TERM": "dumb"})
        env.pop("COLUMNS", None)
        os.execve(sys.executable, [sys.executable, "-m", "rocbuild", *argv], env)
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], 120)
        if not ready:
            break
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_plan_and_status_fit_a_terminal_of_80_columns(chain: Chain) -> None:
    for argv in (["plan", *chain.flags()], ["status", *chain.flags()], ["targets"]):
        text = in_a_pty(argv, 80, chain.root)
        assert "Traceback" not in text
        assert too_wide(text, 80) == [], text


def test_every_table_fits_in_a_pipe(chain: Chain, tmp_path: Path) -> None:
    """plan, status (pending, failed, done), the build summary (failed and done), verify,
    cache list, doctor, prefixes and targets, at 80 columns in a pipe."""
    flags = chain.flags()
    outputs = [run_cli("plan", *flags, "--why").stdout, run_cli("status", *flags).stdout,
               run_cli("doctor").stdout, run_cli("targets").stdout]
    chain.set_args("beta", "-DBETA_FAIL=ON")  # a failure: its summary, cause and tail
    failed = run_cli("build", *flags, "--no-verify", expect=1)
    outputs += [failed.stdout, run_cli("status", *flags, expect=1).stdout]
    chain.set_args("beta")
    done = run_cli("build", *flags, expect=None)
    outputs += [done.stdout, run_cli("status", *flags, expect=None).stdout,
                run_cli("verify", *flags, expect=None).stdout]
    cache = tmp_path / "cache"
    run_cli("cache", "push", *flags, "--to", str(cache), expect=0)
    outputs.append(run_cli("cache", "list", *flags, "--cache", str(cache), expect=0).stdout)
    outputs.append(run_cli("prefixes", "--prefix", str(chain.prefix), expect=0).stdout)
    for text in outputs:
        assert too_wide(summary_part(text), 80) == [], text


def summary_part(text: str) -> str:
    """What of a command's output is laid out for the width. A build's output in a pipe is
    a log: every line starts with the time and stays whole (for grep and `nohup` files),
    but for the summary table, which fits the width with the time; other commands' output
    is laid out whole."""
    lines = text.splitlines()
    if lines and all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines):
        return "\n".join(line for line in lines if re.search("[┃│┏┡└━]", line))
    return text


def test_columns_widens_a_pipe(chain: Chain) -> None:
    narrow = run_cli("plan", *chain.flags()).stdout
    wide = run_cli("plan", *chain.flags(), env={"COLUMNS": "200"}).stdout
    assert max(map(len, wide.splitlines())) > 80 >= max(
        len(line) for line in narrow.splitlines() if len(line.split()) > 1)
    # the default when nothing says otherwise is 80, not a 150-column table
    done = subprocess.run([sys.executable, "-m", "rocbuild", "plan", *chain.flags()],
                          capture_output=True, text=True, env=child_env(), check=True)
    assert too_wide(done.stdout, 80) == []


def test_a_wrapped_row_stays_in_its_column_and_names_print_as_written(tmp_path: Path) -> None:
    """plan's settings and launcher rows that are longer than the line continue under their
    value, not at the margin; "[base]" is text, not markup that vanishes ("every  component");
    an unset setting reads "(none)" like an empty list, not Python's "None" (all seen at 80
    columns in tmux)."""
    require_tool("ccache")
    work = tmp_path / ("a-workdir-with-a-long-name-" + "x" * 20)
    shown = run_cli("plan", "--target", "gfx906", "--workdir", str(work), "--ccache", "on",
                    cwd=tmp_path, expect=0).stdout.splitlines()
    settings = shown[shown.index("settings:") + 1:next(
        i for i, line in enumerate(shown) if line.startswith("build order"))]
    assert any(line.startswith(" " * 15) for line in settings), settings  # one did wrap
    assert all(line.startswith("  ") for line in settings), settings
    assert not any(line.split()[1:2] == ["None"] for line in settings), settings
    assert "(assumed: the base has every [base] component but the Tensile kernels)" in [
        line.strip() for line in shown], shown


def test_refusals_on_a_terminal_wrap_at_spaces(tmp_path: Path) -> None:
    """An error and its TIP on a terminal of 80 columns wrap between words; the terminal
    broke them inside one ("'--\njobs'", "globa\nl", "proce\nssor", seen in tmux).
    In a pipe each stays one line, for grep (test_cli_refusals reads them so)."""
    for argv, words in ((["plan", "--jbos", "4"], ["'--jobs'?)", "`rocbuild help options`"]),
                        (["plan", "--target", "gfx9066"], [":xnack+/-", "processor"]),
                        (["env", "--shell", "sh"], ["'zsh'?"]),
                        ([], ["tools", "globals"])):
        text = in_a_pty(argv, 80, tmp_path)
        assert "rocbuild: error: " in text and "Traceback" not in text, text
        assert max(len(line) for line in text.splitlines()) <= 80, text
        for word in words:
            assert word in " ".join(text.split()), (word, text)


# --- what was still cut at 80 columns in tmux -----------------------------------


def test_doctor_continues_a_finding_under_its_text(tmp_path: Path) -> None:
    """A finding longer than the line went on at column 0 (its fix line under its text)."""
    hosts = Path(__file__).resolve().parents[1] / "data" / "hosts"
    out = run_cli("doctor", "--root", str(hosts / "rdna2"), "--user", "x", cwd=tmp_path).stdout
    body = out.splitlines()[1:-1]  # between the title and the totals
    assert any(len(line) > 70 for line in body), out  # some finding did wrap
    for line in body:
        assert re.match(r"  (ok|warn|FAIL|skip)\s", line) or line.startswith(" " * 20), out
    assert too_wide(out, 80) == [], out


def test_prefixes_keys_and_plan_paths_fit_80_columns_in_a_pipe(chain: Chain,
                                                               tmp_path: Path) -> None:
    """`prefixes` broke "finished|2026-12-03"; `cache keys list` put "ssh-ed25519" alone at
    the margin; plan's recipes path made a row 81 wide (all in a pipe, 80 columns)."""
    require_tool("ssh-keygen")
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    shown = run_cli("prefixes", "--prefix", str(chain.prefix), expect=0).stdout
    assert not re.search(r"finished$", shown, re.M) and not re.search(r"^\s*\d{4}-\d\d-\d\d",
                                                                      shown, re.M), shown
    assert "points at the one marked *" not in shown, shown  # no link, no mark
    assert too_wide(shown, 80) == [], shown

    run_cli("cache", "keys", "new", "a-rather-long-signer-name", expect=0)
    keys = run_cli("cache", "keys", "list", expect=0).stdout
    assert not re.search(r"^ssh-", keys, re.M), keys
    assert too_wide(keys, 80) == [], keys

    deep = tmp_path / ("r" * max(1, 70 - len(str(tmp_path)) - 9)) / "recipes"
    deep.parent.mkdir(parents=True)
    shutil.copytree(chain.recipes, deep)
    assert len(str(deep)) > 80 - 15  # at the value's column (15) the row was too wide
    plan = run_cli("plan", *chain.flags()[2:], "--recipes", str(deep), expect=0).stdout
    assert too_wide(plan, 80) == [], plan
    assert any(line.strip() == str(deep) for line in plan.splitlines()), plan


def test_step_lines_and_notes_on_a_terminal_wrap_between_words(tmp_path: Path) -> None:
    """On a terminal the build's step lines and `rocbuild: note:` lines were left to the
    terminal, which cut them inside words ("rese|rve", "…/l|ogs")."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    deep = tmp_path / ("w" * 40)
    deep.mkdir()
    broken = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a C)\n"
                                "add_library(a a.c)\n", "a.c": "#error broken on purpose\n"}
    flags = one_component_stack(deep, "a", broken)
    text = in_a_pty(["build", *flags, "--no-verify"], 80, deep)
    assert "compile.log" in text, text
    assert too_wide(text, 80) == [], text
    note = in_a_pty(["status", "--workdir", str(deep / "no-such-workdir")], 80, deep)
    assert "rocbuild: note:" in note and too_wide(note, 80) == [], note


# --- tool output quoted as printed, commands on lines of their own, times -------

# a compile that fails with GCC's long diagnostics: a caret line under a column past 80, a
# fix-it line, and a warning longer than the line
DIAGNOSED = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a C)\n"
                      "add_executable(a main.c)\n",
    "main.c": "#include <stdio.h>\nint main(void) {\n"
              "    int a_rather_long_variable_name_for_the_test = "
              "an_undeclared_function_with_a_long_name(42, \"a string argument\");\n"
              "    printf(\"%d\\n\", a_rather_long_variable_name_for_the_test)\n"
              "    return 0;\n}\n",
}


def diagnosed_stack(tmp_path: Path) -> list[str]:
    for tool in ("git", "cmake", "ninja", "cc"):
        require_tool(tool)
    return one_component_stack(tmp_path, "a", DIAGNOSED)


def log_tail(tmp_path: Path) -> list[str]:
    """The compile log's lines from the first diagnostic on (what a report quotes)."""
    log = (tmp_path / "work/logs/a/compile.log").read_text().splitlines()
    start = next(i for i, line in enumerate(log) if "In function" in line)
    return [line.rstrip() for line in log[start:] if line.strip()][:8]


def test_a_failure_report_quotes_the_compiler_as_it_printed(tmp_path: Path) -> None:
    """The build's summary and `status` re-wrapped the log's last lines at 80 columns: GCC's
    caret line and fix-it landed at the margin, away from the column they point at, and
    its `|` gutter stayed on the first piece. On a terminal of 80 columns and in a pipe each
    quoted line is the tool's line, whole (a terminal wraps it as it wraps the compiler)."""
    flags = diagnosed_stack(tmp_path)
    piped = run_cli("build", *flags, "--no-verify", expect=1).stdout
    tail = log_tail(tmp_path)
    assert any(len(line) > 80 for line in tail), tail  # the case: lines longer than 80
    caret = next(i for i, line in enumerate(tail) if "^" in line)
    report = piped[piped.index("--- the log's last"):]  # the summary's quote, not the steps
    for text in (report, in_a_pty(["build", *flags, "--no-verify"], 80, tmp_path),
                 in_a_pty(["status", *flags], 80, tmp_path)):
        lines = [line.rstrip() for line in unstamped(text).splitlines()]
        for quoted in tail[caret - 1:caret + 2]:  # the source line, the caret, what follows
            assert quoted in lines, (quoted, text)
        at = lines.index(tail[caret])
        assert lines[at - 1] == tail[caret - 1], text  # the caret under its source line
        if text is not report:  # a terminal's text is laid out; a pipe's is a log
            assert too_wide(text, 80) == [], text


def test_a_command_to_paste_is_whole_on_a_line_of_its_own(tmp_path: Path) -> None:
    """`continue with: rocbuild build …` was one 84-column line, cut by the terminal; the
    command is now alone on the line after its label, whole, so a triple-click copies it."""
    flags = diagnosed_stack(tmp_path / ("w" * 30))
    text = in_a_pty(["build", *flags, "--no-verify"], 80, tmp_path)
    (command,) = commands_under(text)
    assert command == shlex.join(["rocbuild", "build", *flags, "--no-verify"]), text
    assert len(command) > 80  # whole although longer than the line
    assert f"  {command}" in text.splitlines(), text
    status = in_a_pty(["status", *flags], 80, tmp_path)
    assert commands_under(status)[-1] == command, status


def test_every_line_of_a_piped_build_starts_with_the_time(tmp_path: Path) -> None:
    """The guide promises the time on every line of plain output; the environment line,
    verify's report and the summary had none, and were wrapped at 80 columns while the step
    lines were not. A build's plain output is a log: every line starts with the time and
    stays whole (for grep); only the summary table is laid out, to 80 columns with the
    time."""
    flags = diagnosed_stack(tmp_path)
    failed = run_cli("build", *flags, "--no-verify", expect=1).stdout
    # the user fixes the checkout; the same command builds it and writes the env files
    (tmp_path / "work/src/a/main.c").write_text("int main(void) { return 0; }\n")
    done = run_cli("build", *flags, expect=0)
    for text in (failed, done.stdout):
        lines = text.splitlines()
        assert lines and all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), text
        table = summary_part(text)
        assert table.count("\n") >= 4 and too_wide(table, 80) == [], text
    log = tmp_path / "work/logs/a/compile.log"
    assert re.search(rf"^\d\d:\d\d:\d\d log: {re.escape(str(log))}$", failed, re.M), failed
    assert re.search(r"^\d\d:\d\d:\d\d environment: source \S+/env.sh$", done.stdout,
                     re.M), done.explain()


def test_doctor_prints_each_command_of_a_fix_whole(tmp_path: Path) -> None:
    """doctor's fixes cut their commands across lines at 80 columns (`lspci -nn -d` | `1002:`,
    an `apt-get install -y ...` of six packages over two lines): a command to paste is now
    whole on one line (in backticks), at 80 columns on a terminal and in a pipe."""
    hosts = Path(__file__).resolve().parents[1] / "data" / "hosts"
    texts = [in_a_pty(["doctor", "--root", str(hosts / name), "--user", "x"], 80, tmp_path)
             for name in ("rdna2", "nodriver")]
    texts.append(in_a_pty(["doctor"], 80, tmp_path))
    texts.append(run_cli("doctor", cwd=tmp_path).stdout)
    commands = 0
    for text in texts:
        for line in text.splitlines():
            assert line.count("`") % 2 == 0, (line, text)  # no command cut across lines
            commands += line.count("`") // 2
        assert too_wide(text, 80) == [], text
    assert commands >= 4, texts


def test_info_lays_out_long_values_under_their_label(tmp_path: Path) -> None:
    """`info rocblas` at 80 columns put a 107-column recipe path and long env values at the
    margin, where they read as labels, and printed "env" alone on a line above its value.
    Now "env" is one label with its values in its column, and a value too long for the
    column goes under its label, indented."""
    deep = tmp_path / ("r" * 60) / "recipes"
    shutil.copytree(REPO / "recipes", deep)
    text = in_a_pty(["info", "rocblas", "--recipes", str(deep)], 80, tmp_path)
    lines = text.splitlines()
    labels = ("recipe", "source", "kind", "depends on", "needed by", "build type",
              "cmake args", "env", "patches", "state", "installed")
    body = lines[1:next(i for i, line in enumerate(lines) if line.startswith("  patches"))]
    for line in body:  # a label at column 2, or a value under one: never a value at 2
        assert line.startswith(tuple(f"  {label} " for label in labels)) or \
            line in ("  recipe",) or line.startswith("    "), (line, text)
    assert sum(line.startswith("  env ") for line in lines) == 1, text
    at = lines.index("  recipe")
    assert lines[at + 1] == f"    {deep}/rocblas.toml", text  # whole, under its label
    assert "TENSILE_ROCM_OFFLOAD_BUNDLER_PATH=" in text and too_wide(text, 80) == [], text
    # env's further values are one word each: one that does not fit its column at 14 goes
    # under the label too (at 14 the terminal broke TENSILE_ROCM_ASSEMBLER_PATH's `clang++`)
    for line in body:
        assert len(line) <= 80 or (line.startswith("    ") and line[4] != " "), (line, text)


def test_paths_and_keys_to_copy_are_whole_lines_of_their_own(tmp_path: Path) -> None:
    """`recipes edit` printed "copied <shipped> to <yours>; it replaces ..." (at 80 columns a
    path ran on into "…toml;" or was cut by the terminal mid-line); each path is now a line
    of its own, the one to open last. `cache keys new`'s public key stays one line."""
    require_tool("ssh-keygen")
    overlay = tmp_path / ("o" * 50) / "recipes"
    text = in_a_pty(["recipes", "edit", "rocm-cmake", "--recipe-overlay", str(overlay)], 80,
                    tmp_path)
    lines = text.splitlines()
    assert lines[-1] == str(overlay / "rocm-cmake.toml"), text
    assert f"  from {REPO}/recipes/rocm-cmake.toml" in lines, text
    again = in_a_pty(["recipes", "edit", "rocm-cmake", "--recipe-overlay", str(overlay)], 80,
                     tmp_path).splitlines()
    assert again[-1] == str(overlay / "rocm-cmake.toml"), again
    made = in_a_pty(["cache", "keys", "new", "a-signer-with-a-rather-long-name"], 80, tmp_path)
    public = next(line for line in made.splitlines() if "ssh-ed25519 " in line)
    assert public.split()[-1] == "a-signer-with-a-rather-long-name", made


def test_cache_push_and_a_verbose_build_fit_a_terminal(tmp_path: Path) -> None:
    """On a terminal `cache push` printed its plain log lines, 134-141 columns, cut inside
    words by the terminal, and so did `build --verbose`. They are fitted to the terminal
    there (a tool's own lines and a command stay whole); in a pipe they stay a log."""
    deep = tmp_path / ("d" * 40)
    deep.mkdir()
    flags = diagnosed_stack(deep)
    (deep / "work/src/a").mkdir(parents=True, exist_ok=True)
    built = in_a_pty(["build", *flags, "--verbose", "--no-verify"], 80, deep)
    assert "a: compile" in built, built
    # rocbuild's own lines wrap under their text, after the time; wider are only the
    # commands it runs ("+ cmake ...") and the tools' own lines, as they printed them
    assert any(re.match(r" {9}\S", line) for line in built.splitlines()), built
    for line in too_wide(built, 80):
        assert re.match(r"\d\d:\d\d:\d\d (\+ |  a:\w+ \| )", line), (line, built)
    (deep / "work/src/a/main.c").write_text("int main(void) { return 0; }\n")
    run_cli("build", *flags, "--no-verify", expect=0)
    pushed = in_a_pty(["cache", "push", *flags, "--to", str(deep / "cache")], 80, deep)
    assert "a:" in pushed and "Traceback" not in pushed, pushed
    assert too_wide(pushed, 80) == [], pushed


def test_plan_on_a_base_continues_why_a_component_is_built_under_its_reason(
        tmp_path: Path) -> None:
    """`plan --base` at 80 columns: the "↻ rocblas  built: base lacks …" row continued at
    column 2, under the marks, where it read as a line of its own."""
    from tests.e2e.test_base import amd_flags, amd_tree

    base = amd_tree(tmp_path)
    shown = run_cli("plan", *amd_flags(tmp_path, base), env={"COLUMNS": "80"}, expect=0)
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  ↻ rocblas "))
    assert "base lacks gfx906 Tensile kernels" in lines[at], shown.explain()
    rest = lines[at + 1:next(i for i, line in enumerate(lines) if i > at
                             and not line.startswith("   "))]
    assert rest, shown.explain()  # the reason is longer than one line
    for line in rest:
        assert line.startswith(" " * 27) and line[27] != " ", (line, shown.stdout)
    assert too_wide(shown.stdout, 80) == [], shown.explain()
