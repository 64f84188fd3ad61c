"""docs/examples.md runs as written: its files are written where it says, its shell blocks run
in bash one after the other, with `rocbuild` on PATH, from a folder holding rocbuild's
`examples/` (the page's first block makes them the git repositories the recipes fetch, and
points `https://git.example.org/acme/` at them with git's own url.insteadOf, in a global git
config of the test's). Issue 32: the page needed hello-lib and hello-app, which were not
shipped."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import child_env
from tests.conftest import require_tool

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DOC = Path(__file__).resolve().parents[2] / "docs" / "examples.md"

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"  # the two projects, shipped


def doc_parts() -> tuple[dict[str, str], list[str]]:
    text = DOC.read_text(encoding="utf-8")
    files = dict(re.findall(r"File `([^`]+)`:\n\n```toml\n(.*?)```", text, flags=re.S))
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return files, blocks


def test_the_worked_examples_run_as_written(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "cc", "bash"):
        require_tool(tool)
    home = tmp_path / "home"
    gitconfig = tmp_path / "gitconfig"  # the page's `git config --global` writes here
    gitconfig.write_text("")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rocbuild").write_text(f'#!/bin/sh\nexec {sys.executable} -m rocbuild "$@"\n')
    (bin_dir / "rocbuild").chmod(0o755)
    work = tmp_path / "cwd"  # a rocbuild checkout, as far as the page is concerned
    work.mkdir()
    shutil.copytree(EXAMPLES, work / "examples")
    files, blocks = doc_parts()
    assert len(files) == 3 and len(blocks) == 4
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    assert sum(1 for line in files["my-stack/recipes/hello-lib.toml"].splitlines()
               if line.strip()) <= 10
    env = child_env({"HOME": str(home), "GIT_CONFIG_GLOBAL": str(gitconfig),
                     "XDG_CACHE_HOME": str(home / ".cache"),
                     "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    outputs = []
    for block in blocks:
        done = subprocess.run(["bash", "-e", "-c", block], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{block}\n--- out\n{done.stdout}\n--- err\n{done.stderr}"
        assert "Traceback" not in done.stderr
        outputs.append(done.stdout)
    assert (home / "acme" / "hello-app.git").is_dir()
    assert outputs[1].rstrip().endswith("hello from a stack of my own")
    assert (home / "mirrors" / "acme" / "hello-lib.git").is_dir()
    assert outputs[3].rstrip().endswith("hello from a stack of my own")
    # the offline build really read the mirrors: its fetch logs name them
    logs = (home / "offline-work" / "logs" / "hello-lib" / "fetch.log").read_text()
    assert f"file://{home}/mirrors/acme/hello-lib.git" in logs
