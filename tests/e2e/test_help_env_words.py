"""`rocbuild help env` says what the env file sets, no more (never that the file puts
the prefix in LD_LIBRARY_PATH, which it does not: programs find their libraries through
their RUNPATH)."""

from __future__ import annotations

import re

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_help_env_names_exactly_the_variables_env_sh_sets(chain: Chain) -> None:
    run_cli("build", *chain.flags(), expect=0)
    script = run_cli("env", "--shell", "bash", *chain.flags(), expect=0).stdout
    exported = set(re.findall(r"export (\w+)=", script))
    words = " ".join(run_cli("help", "env", cwd=chain.root, expect=0).stdout.split())
    said = words.split("It sets ", 1)[1].split(";", 1)[0]
    named = set(re.findall(r"\b[A-Z][A-Z_]{3,}\b", said))
    # every variable the file sets is named; nothing is named that no env file sets (a
    # stack of its own may set fewer: no ROCm identity)
    assert exported <= named, (named, exported)
    assert "LD_LIBRARY_PATH" not in named | exported, (named, exported)
    assert "never LD_LIBRARY_PATH" in words, words
