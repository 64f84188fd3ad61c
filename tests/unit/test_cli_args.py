"""The CLI's argument table as a whole."""

from __future__ import annotations

import argparse
from collections import Counter

from rocbuild.cli.main import build_parser


def test_no_command_argument_shares_a_global_settings_name() -> None:
    """A command's own argument with the dest of a global option (``prefix``) is overwritten
    by that option's value: `activate P --prefix P` crashed so."""
    clashes = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                counts = Counter(a.dest for a in sub._actions)
                clashes += [f"{name}: {dest}" for dest, n in counts.items() if n > 1]
    assert clashes == []
