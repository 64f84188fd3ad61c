"""The README's shell blocks run in a real bash: every block parses (`bash -n`), and the
overnight block's prefix lines work as root in a container."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_tool
from tests.unit.test_readme import overnight_block, sections

pytestmark = pytest.mark.e2e


def test_every_readme_shell_block_is_valid_bash() -> None:
    require_tool("bash")
    for heading, blocks in sections().items():
        for block in blocks:
            checked = subprocess.run(["bash", "-n", "-c", block], capture_output=True,
                                     text=True)
            assert checked.returncode == 0, (heading, checked.stderr)


def test_the_overnight_block_works_as_root_in_a_container(tmp_path: Path) -> None:
    """A root shell in a container has neither `sudo` nor "$USER" (the README promises that
    case): the block uses neither, and its prefix lines run in a real bash with no sudo on
    PATH and no USER, on a folder under tmp_path."""
    require_tool("bash")
    block = overnight_block()
    assert not re.search(r"(^|[\s&;(])sudo\s", block), block
    assert "$USER" not in block, block
    lines = block.split("rocbuild doctor", 1)[0].split("\n")
    prefix_lines = "\n".join(lines[next(i for i, line in enumerate(lines) if "mkdir" in line):])
    script = prefix_lines.replace("/opt/rocm-6.4-gfx906", str(tmp_path / "prefix"))
    done = subprocess.run(["bash", "-e", "-c", script], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, (script, done.stderr)
    assert (tmp_path / "prefix").is_dir()
