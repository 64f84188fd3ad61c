"""Names that become paths and bytes that could reach a terminal: a stack, component or module
name is refused at load when it could leave its folder (exit 2, nothing run), and every field
read from a file or an argument reaches the terminal with its control characters escaped.
Every case runs rocbuild as a child."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.e2e.conftest import SMALL_PROJECT
from tests.support.chain import one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RECIPE = '[source]\ngit = "https://example.invalid/a.git"\nref = "v1"\n[cmake]\n'


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (json's escapes are TOML's, \\u included)."""
    return json.dumps(text)


def write_stack(folder: Path, stack_lines: str = "", recipe: str = RECIPE) -> list[str]:
    """A recipes folder with one component ``a`` and ``stack_lines`` in [stack]; the flags."""
    recipes = folder / "recipes"
    recipes.mkdir(parents=True, exist_ok=True)
    (recipes / "stack.toml").write_text('[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\n'
                                        'prefix = "/opt/unused"\n' + stack_lines)
    (recipes / "a.toml").write_text(recipe)
    return ["--recipes", str(recipes), "--workdir", str(folder / "work"),
            "--prefix", str(folder / "prefix")]


HOSTILE_NAMES = ["../../victim", "a/b", "", "-rocm", ".", "..", "x\ny", "x\x1b[31m", "a b",
                 "x" * 65]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_a_stack_name_that_is_not_one_folder_name_is_refused_at_load(tmp_path: Path,
                                                                     name: str) -> None:
    flags = write_stack(tmp_path, f"name = {toml_string(name)}\n")
    result = run_cli("plan", *flags, expect=2)
    assert "key 'stack.name'" in result.stderr and "not a name rocbuild can make a folder" \
        in result.stderr, result.explain()
    assert "\x1b" not in result.output and "x\ny" not in result.output


def test_a_stack_name_leading_out_of_the_prefix_writes_nothing_there(tmp_path: Path) -> None:
    """``name = "../../victim"`` made the modulefiles ``<prefix>/modulefiles/../../victim``,
    replacing a file there, and ``clean --prefix-files`` deleted that folder."""
    flags = one_component_stack(tmp_path, "a", SMALL_PROJECT)
    stack = tmp_path / "recipes" / "stack.toml"
    stack.write_text(stack.read_text() + 'name = "../../victim"\n')
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("mine\n")
    result = run_cli("build", *flags, "--no-verify", expect=2)
    assert "key 'stack.name'" in result.stderr, result.explain()
    assert not (tmp_path / "work" / "src").exists()  # nothing ran
    run_cli("clean", *flags, "--prefix-files", expect=2)
    assert sorted(p.name for p in victim.iterdir()) == ["keep"]
    assert (victim / "keep").read_text() == "mine\n"


UNSETS = [["-UCMAKE_INSTALL_PREFIX"], ["-U", "CMAKE_INSTALL_PREFIX"], ["-UCMAKE_INSTALL_*"],
          ["-U*"], ["-U[C]MAKE_INSTALL_PREFIX"], ["-U?MAKE_INSTALL_PREFIX"],
          ["-U[^X]MAKE_INSTALL_PREFIX"], ["-DX=1", "-UCMAKE_*_PREFIX"]]


@pytest.mark.parametrize("args", UNSETS, ids=" ".join)
@pytest.mark.parametrize("table_key", ["args", "job_args"])
def test_a_cmake_unset_of_the_install_prefix_is_refused_at_load(tmp_path: Path,
                                                                args: list[str],
                                                                table_key: str) -> None:
    """``-UCMAKE_INSTALL_PREFIX`` after rocbuild's ``-DCMAKE_INSTALL_PREFIX=<prefix>`` made
    CMake install into /usr/local, and the files stayed there."""
    flags = write_stack(tmp_path, recipe=RECIPE + f"{table_key} = {json.dumps(args)}\n")
    result = run_cli("plan", *flags, expect=2)
    assert f"key 'cmake.{table_key}[" in result.stderr, result.explain()
    assert "removes CMAKE_INSTALL_PREFIX from CMake's cache" in result.stderr, result.explain()


def test_a_cmake_unset_of_other_variables_still_loads(tmp_path: Path) -> None:
    flags = write_stack(tmp_path, recipe=RECIPE + 'args = ["-UMY_OPTION", "-UCMAKE_INSTALL_'
                                                  'PREFIX_OLD", "-Ucmake_install_prefix"]\n')
    run_cli("plan", *flags, expect=0)


def provides(value: str, comment: str | None = None) -> str:
    entry = (f"{{ value = {toml_string(value)}, comment = {toml_string(comment)} }}"
             if comment is not None else toml_string(value))
    return RECIPE + f"[provides_env]\nMY_VAR = {entry}\n"


LATE_TEXTS = {
    # a newline in a comment: the rest of the line was a command in env.sh
    "comment-newline": ("", provides("1", "hi\ntouch /tmp/owned"), "provides_env.MY_VAR.comment"),
    "comment-escape": ("", provides("1", "hi \x1b]0;title\x07"), "provides_env.MY_VAR.comment"),
    "value-newline": ("", provides("a\nb"), "provides_env.MY_VAR"),
    "value-renders-newline": ("", provides("a{{ '\\n' }}b"), "provides_env.MY_VAR"),
    "value-undefined": ("", provides("{{ nosuch }}"), "provides_env.MY_VAR"),
    "value-tree-path-space": ("", provides("{{ prefix }}/my dir"), "provides_env.MY_VAR"),
    "runpath-reason-newline": ("", RECIPE + '[install]\nrunpath = false\nrunpath_reason = '
                                           '"x\\ntouch /tmp/owned"\n', "install.runpath_reason"),
    # refused only after every component was built (exit 1)
    "summary-braces": ('summary = "x } ]] y"\n', RECIPE, "stack.summary"),
    "summary-undefined": ('summary = "{{ nosuch }}"\n', RECIPE, "stack.summary"),
}


@pytest.mark.parametrize("case", sorted(LATE_TEXTS))
def test_what_the_env_files_say_is_checked_when_the_stack_loads(tmp_path: Path,
                                                                case: str) -> None:
    """A text the env files write (a provides_env value or comment, a runpath reason, the
    stack's summary) that could run as a command, or that fails to render, is refused by
    `plan` (exit 2): it was refused only when the env files were written, after the builds,
    or not at all."""
    stack_lines, recipe, key = LATE_TEXTS[case]
    flags = write_stack(tmp_path, stack_lines, recipe)
    result = run_cli("plan", *flags, expect=2)
    assert f"'{key}'" in result.stderr, result.explain()
    assert "\x1b" not in result.output


def test_a_summary_the_env_files_cannot_print_stops_the_build_before_it_runs(
        tmp_path: Path) -> None:
    flags = one_component_stack(tmp_path, "a", SMALL_PROJECT)
    stack = tmp_path / "recipes" / "stack.toml"
    stack.write_text(stack.read_text() + 'summary = "x } ]] y"\n')
    result = run_cli("build", *flags, "--no-verify", expect=2)
    assert "key 'stack.summary'" in result.stderr, result.explain()
    assert not (tmp_path / "work" / "src").exists()  # nothing ran


# what a terminal would act on: retitle the window, clear the screen, the C1 CSI, a bidi
# override (a name that reads as another)
SEQUENCES = ("\x1b]0;owned\x07", "\x1b[2J", "\x9b", "\u202e")


def assert_escaped(text: str) -> None:
    """None of SEQUENCES' control characters is in ``text``; their escapes are."""
    for raw in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert raw not in text, (raw, text[-3000:])
    assert "\\x1b]0;owned" in text, text[-3000:]


HOSTILE = "x" + "".join(SEQUENCES)


def test_info_shows_a_recipe_summary_escaped(tmp_path: Path) -> None:
    flags = write_stack(tmp_path, recipe=f"summary = {toml_string(HOSTILE)}\n" + RECIPE)
    assert_escaped(run_cli("info", "a", *flags, expect=0).stdout)


def test_cache_list_shows_the_index_fields_escaped(tmp_path: Path) -> None:
    """Anyone who may write the store writes its index.json (no key is needed for that):
    its signer, component, targets are shown escaped; entries of the wrong shape are
    skipped, never a traceback."""
    store = tmp_path / "cache"
    store.mkdir()
    (store / "index.json").write_text(json.dumps({"artifacts": [
        {"component": HOSTILE, "key": HOSTILE, "targets": [HOSTILE], "size": 1,
         "archive_size": 1, "signer": HOSTILE, "created": HOSTILE},
        {"component": "b", "targets": 5, "size": "many", "signer": 7}, 3, None]}))
    result = run_cli("cache", "list", "--cache", str(store), expect=0)
    assert_escaped(result.stdout)
    assert "untrusted key 1" in result.stdout


def test_a_patch_file_name_in_a_failure_is_shown_escaped(tmp_path: Path) -> None:
    flags = one_component_stack(tmp_path, "a", SMALL_PROJECT)
    patches = tmp_path / "patches" / "a"
    patches.mkdir(parents=True)
    (patches / f"0001-{SEQUENCES[0]}.patch").write_text(
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-zzz\n+b\n")
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "does not apply" in result.output, result.explain()
    assert_escaped(result.output)
    assert_escaped(run_cli("status", *flags, expect=1).output)


@pytest.mark.parametrize("argv", [
    ["build", f"a{SEQUENCES[0]}\nrocbuild: all is well"],  # a component name
    ["plan", f"--target=gfx906{SEQUENCES[0]}"],  # a flag's value
    ["plan", f"--{SEQUENCES[0]}"],  # an option that is none
    [f"pl{SEQUENCES[0]}an"],  # a command that is none
], ids=["component", "flag-value", "option", "command"])
def test_an_argument_echoed_in_an_error_is_shown_escaped_on_one_line(tmp_path: Path,
                                                                     argv: list[str]) -> None:
    flags = write_stack(tmp_path)
    result = run_cli(*argv, *flags, expect=2)
    assert_escaped(result.stderr)
    assert "\nrocbuild: all is well" not in result.stderr, result.explain()


def test_a_config_key_and_a_variable_name_are_shown_escaped(tmp_path: Path) -> None:
    flags = write_stack(tmp_path)
    (tmp_path / "rocbuild.toml").write_text(f"[rocbuild]\n{toml_string(HOSTILE)} = 1\n")
    assert_escaped(run_cli("plan", *flags, cwd=tmp_path, expect=2).stderr)
    (tmp_path / "rocbuild.toml").unlink()
    result = run_cli("plan", *flags, env={f"ROCBUILD_{SEQUENCES[0]}": "1"}, expect=0)
    assert "is not a rocbuild setting" in result.stderr, result.explain()
    assert "\x1b" not in result.stderr and "\\x1b]0;owned" in result.stderr


def test_plan_commands_writes_a_control_character_of_an_argument_as_a_shell_escape(
        tmp_path: Path) -> None:
    """The line still means the same argument when pasted into bash."""
    flags = write_stack(tmp_path, recipe=RECIPE + f"args = [{toml_string('-DX=' + HOSTILE)}]\n")
    text = run_cli("plan", "--commands", *flags, expect=0).stdout
    assert_escaped(text)
    line = next(line for line in text.splitlines() if line.startswith("cmake ") or
                " cmake -G" in line)
    assert "$'-DX=x\\x1b]0;owned\\x07\\x1b[2J\\u009b\\u202e'" in line, line


ESCAPING_PROJECT = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                      "string(ASCII 27 ESC)\nstring(ASCII 7 BEL)\n"
                      'message(STATUS "title ${ESC}]0;owned${BEL} cleared ${ESC}[2J")\n'
                      "install(FILES a.txt DESTINATION share)\n",
    "a.txt": "a\n",
}


def test_a_tools_output_is_shown_escaped_and_the_log_keeps_it(tmp_path: Path) -> None:
    """A project's configure prints a terminal sequence (a source tree is files too): the
    build's plain output shows it escaped, `rocbuild logs` on a terminal too, and the log
    itself, and `logs` into a pipe, keep the bytes as the tool wrote them."""
    from tests.e2e.test_output_width import in_a_pty

    flags = one_component_stack(tmp_path, "a", ESCAPING_PROJECT)
    built = run_cli("build", *flags, "--no-verify", expect=0)
    assert "title \\x1b]0;owned\\x07 cleared" in built.stdout, built.explain()
    assert "\x1b]0;owned" not in built.stdout
    piped = run_cli("logs", "a", "configure", *flags, expect=0).stdout
    assert "\x1b]0;owned\x07" in piped
    shown = in_a_pty(["logs", "a", "configure", *flags], 80, tmp_path)
    assert "title \\x1b]0;owned\\x07 cleared \\x1b[2J" in shown, shown
    assert "\x1b]0;owned" not in shown


def test_an_empty_components_list_is_refused_not_read_as_every_recipe(tmp_path: Path) -> None:
    """``components = []`` built every recipe of the folder without a word; without the
    key, every recipe is what a bare build means."""
    flags = write_stack(tmp_path, "components = []\n")
    result = run_cli("build", *flags, expect=2)
    assert "key 'stack.components' is empty" in result.stderr, result.explain()
    assert not (tmp_path / "work" / "src").exists()
    flags = write_stack(tmp_path / "without", "")
    assert "a " in run_cli("plan", *flags, expect=0).stdout
