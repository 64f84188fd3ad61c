"""docs/examples.md runs as written: its files are written where it says, its shell blocks run
in bash one after the other, with `rocbuild` on PATH and `https://git.example.org/` served from
local repositories (git's own url.insteadOf, so the commands stay verbatim)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli import child_env
from tests.conftest import require_tool
from tests.support.chain import make_repo

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[2] / "docs" / "examples.md"

HELLO_LIB = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(hello-lib C)
        add_library(hello hello.c)
        target_include_directories(hello PUBLIC $<INSTALL_INTERFACE:include>)
        install(TARGETS hello EXPORT hello-lib-targets LIBRARY DESTINATION lib)
        install(FILES hello.h DESTINATION include)
        install(EXPORT hello-lib-targets NAMESPACE hello:: DESTINATION lib/cmake/hello-lib
                FILE hello-lib-config.cmake)
        """),
    "hello.h": "const char *hello(void);\n",
    "hello.c": 'const char *hello(void) { return "hello from a stack of my own"; }\n',
}
HELLO_APP = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(hello-app C)
        find_package(hello-lib CONFIG REQUIRED)
        add_executable(hello-app main.c)
        target_link_libraries(hello-app PRIVATE hello::hello)
        install(TARGETS hello-app RUNTIME DESTINATION bin)
        """),
    "main.c": '#include <stdio.h>\n#include "hello.h"\n'
              'int main(void) { puts(hello()); return 0; }\n',
}


def doc_parts() -> tuple[dict[str, str], list[str]]:
    text = DOC.read_text(encoding="utf-8")
    files = dict(re.findall(r"File `([^`]+)`:\n\n```toml\n(.*?)```", text, flags=re.S))
    blocks = re.findall(r"```sh\n(.*?)```", text, flags=re.S)
    return files, blocks


def test_the_worked_examples_run_as_written(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja", "cc", "bash"):
        require_tool(tool)
    upstream = tmp_path / "upstream"
    make_repo(upstream / "acme", "hello-lib", HELLO_LIB, tag="v1.0")
    make_repo(upstream / "acme", "hello-app", HELLO_APP, tag="v1.0")
    home = tmp_path / "home"
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "{upstream.as_uri()}/"]\n\tinsteadOf = https://git.example.org/\n')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rocbuild").write_text(f'#!/bin/sh\nexec {sys.executable} -m rocbuild "$@"\n')
    (bin_dir / "rocbuild").chmod(0o755)
    work = tmp_path / "cwd"
    work.mkdir()
    files, blocks = doc_parts()
    assert len(files) == 3 and len(blocks) == 3
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
    assert outputs[0].rstrip().endswith("hello from a stack of my own")
    assert (home / "mirrors" / "acme" / "hello-lib.git").is_dir()
    assert outputs[2].rstrip().endswith("hello from a stack of my own")
    # the offline build really read the mirrors: its fetch logs name them
    logs = (home / "offline-work" / "logs" / "hello-lib" / "fetch.log").read_text()
    assert f"file://{home}/mirrors/acme/hello-lib.git" in logs
