"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.support.chain import Chain, make_chain


@pytest.fixture
def chain(tmp_path: Path) -> Chain:
    """The alpha <- beta <- gamma chain of real CMake projects in local git repos."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    return make_chain(tmp_path)
