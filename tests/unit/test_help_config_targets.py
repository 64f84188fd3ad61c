"""--help (global options once, examples), rocbuild.toml did-you-mean, target hints."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rocbuild.cli import help_text
from rocbuild.cli import main as cli
from rocbuild.model.settings import OPTIONS
from rocbuild.model.targets import TargetError, parse_target, parse_target_list
from tests.cli import run_cli


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def help_of(*argv: str) -> str:
    return run_cli(*argv, "--help", env={"COLUMNS": "80"}, expect=0).stdout


def test_every_subcommand_has_two_or_three_examples() -> None:
    names = subcommands()
    assert set(names) <= set(help_text.EXAMPLES)
    for name in names:
        assert 2 <= len(help_text.EXAMPLES[name]) <= 3, name
        assert all(line.startswith(("rocbuild ", "sudo rocbuild", ". <(rocbuild", "nohup "))
                   for _, line in help_text.EXAMPLES[name])


@pytest.mark.parametrize("command", ["build", "plan", "status", "doctor"])
def test_a_commands_help_shows_its_own_options_and_points_at_the_globals(command: str) -> None:
    text = help_of(command)
    usage = text.partition("\n\n")[0]
    assert "[global options]" in usage and "--workdir" not in usage
    for option in OPTIONS:  # accepted here, described once elsewhere
        assert f"  {option.flag} " not in text, option.flag
    assert "`rocbuild help options`" in " ".join(text.split())
    examples = text.split("examples:\n", 1)[1]
    assert help_text.EXAMPLES[command][0][1] in examples
    assert max(len(line) for line in text.splitlines()) <= 80
    assert len(text.splitlines()) <= 45  # was 53-89 lines with the globals repeated


def test_help_options_lists_each_global_option_once() -> None:
    text = run_cli("help", "options", env={"COLUMNS": "80"}, expect=0).stdout
    for option in OPTIONS:
        assert text.count(f"  {option.flag} ") == 1, option.flag
    assert "rocbuild.toml" in text and "XDG_CONFIG_HOME" in text
    assert help_of().count("  --workdir ") == 1  # and `rocbuild --help` has them all


def test_top_level_help_documents_exit_codes() -> None:
    text = help_of()
    flat = " ".join(text.split())
    for code in ("0 success", "1 a build step failed", "2 bad input", "3 busy",
                 "4 verify found missing GPU code", "130 interrupted"):
        assert code in flat


@pytest.mark.parametrize(("key", "fix"), [("worksdir", "workdir"), ("swap-weight", "swap_weight"),
                                          ("targte", "target")])
def test_misspelled_config_key_gets_did_you_mean(tmp_path: Path, key: str, fix: str) -> None:
    (tmp_path / "rocbuild.toml").write_text(f'[rocbuild]\n{key} = "x"\n')
    result = run_cli("plan", cwd=tmp_path, expect=2)
    assert f"{tmp_path / 'rocbuild.toml'}: key '{key}' is not a setting" in result.stderr
    assert f"Did you mean '{fix}'?" in result.stderr
    assert "TIP:" in result.stderr


@pytest.mark.parametrize(("text", "hint"), [
    ("gfx960", "Did you mean 'gfx906'?"),
    ("gfx9O6", "Did you mean 'gfx906'?"),
    ("906", "Did you mean 'gfx906'?"),
    ("gfx906;gfx90a", "separate GPU targets with commas, as in gfx906,gfx90a"),
    ("gfx906 gfx90a", "separate GPU targets with commas, as in gfx906,gfx90a"),
])
def test_target_hints(text: str, hint: str) -> None:
    with pytest.raises(TargetError, match=hint.replace("?", r"\?")):
        parse_target_list([text])


def test_product_names_resolve_to_gfx906_with_a_note(tmp_path: Path) -> None:
    assert parse_target("mi50") == parse_target("gfx906")
    assert parse_target("Radeon-VII:xnack-") == parse_target("gfx906:xnack-")
    assert [str(t) for t in parse_target_list(["mi60,gfx90a"])] == ["gfx906", "gfx90a"]
    result = run_cli("plan", "rocm-cmake", "--target", "mi50", "--json", cwd=tmp_path,
                     expect=0)
    assert '"gfx906"' in result.stdout
    assert "note: flag --target: 'mi50' is gfx906 (AMD Instinct MI50)" in result.stderr


@pytest.mark.parametrize("command", ["plan", "doctor"])
def test_second_target_after_a_space_is_explained(tmp_path: Path, command: str) -> None:
    result = run_cli(command, "--target", "gfx906", "gfx90a", cwd=tmp_path, expect=2)
    assert "separate them with commas" in result.stderr
    if command == "plan":  # it would have been read as a component name
        assert "'gfx90a' is a GPU target, not a component" in result.stderr


def test_target_with_semicolon_from_cli_exits_2(tmp_path: Path) -> None:
    result = run_cli("plan", "--target", "gfx906;gfx90a", cwd=tmp_path, expect=2)
    assert "separate GPU targets with commas, as in gfx906,gfx90a" in result.stderr
