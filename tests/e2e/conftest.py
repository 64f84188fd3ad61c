"""Fixtures shared by the end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.support.chain import Chain, make_chain, one_component_stack


@pytest.fixture
def chain(tmp_path: Path) -> Chain:
    """The alpha <- beta <- gamma chain of real CMake projects in local git repos."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    return make_chain(tmp_path)


SMALL_PROJECT = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                      "install(FILES a.txt DESTINATION share)\n",
    "a.txt": "a\n",
}


@pytest.fixture
def small(tmp_path: Path) -> list[str]:
    """One component that installs one file: the flags of its stack."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    return one_component_stack(tmp_path, "a", SMALL_PROJECT)
