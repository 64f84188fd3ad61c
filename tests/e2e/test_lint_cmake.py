"""lint's reading of CMake's "Manually-specified variables were not used" warning, on the
output of a real cmake (an e2e test: it starts cmake; moved from tests/unit/test_lint.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rocbuild.model.buildsystems.cmake import unused_cmake_variables
from tests.conftest import require_tool


@pytest.mark.e2e
def test_unused_variables_from_real_cmake(tmp_path: Path) -> None:
    cmake = require_tool("cmake")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(t LANGUAGES NONE)\n"
        "if(USED_ONE)\nendif()\n")
    run = subprocess.run([cmake, "-S", str(src), "-B", str(tmp_path / "b"), "-DUSED_ONE=ON",
                          "-DNOT_READ_A=1", "-DNOT_READ_B:BOOL=ON"],
                         capture_output=True, text=True, check=True)
    assert unused_cmake_variables(run.stdout + run.stderr) == ["NOT_READ_A", "NOT_READ_B"]
