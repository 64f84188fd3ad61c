"""Issue 25: a command imports only its own module (cli/main.py ``chosen_command``); help,
typos and a bare `rocbuild` still see every command."""

from __future__ import annotations

import argparse

import pytest

from rocbuild.cli import main as cli


@pytest.mark.parametrize(("argv", "command"), [
    (["status"], "status"),
    (["--workdir", "build", "status"], "status"),  # a global option's value is not a command
    (["--workdir=/w", "plan", "--json"], "plan"),
    (["build", "--help"], "build"),  # the command's own help needs only its parser
    (["lint-recipes", "--sources"], "lint-recipes"),
    (["cache", "push", "llvm"], "cache"),
    (["--help", "build"], None),  # the top help lists every command
    (["--workdir", "status", "-h", "status"], None),
    (["--version"], None),
    (["help", "build"], None),  # `help` describes other commands
    (["statsu"], None),  # a typo: the did-you-mean needs every name
    ([], None),
])
def test_the_command_is_found_without_importing_any(argv: list[str],
                                                    command: str | None) -> None:
    assert cli.chosen_command(argv) == command


def _commands(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_a_partial_parser_holds_the_chosen_command_and_help() -> None:
    assert _commands(cli.build_parser("status")) == {"status", "help"}
    whole = _commands(cli.build_parser())
    assert {"plan", "build", "status", "cache", "lint-recipes"} <= whole
    assert {name.replace("-", "_") for name in whole - {"help"}} == {
        m.removeprefix(cli.COMMAND_PACKAGE) for m in cli.COMMAND_MODULES}
