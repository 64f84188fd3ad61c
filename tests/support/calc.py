"""A one-component stack that shows every rebuild-correctness case.

``calc`` is a CMake project with a cache option (CALC_EXTRA) and a cache string (CALC_VALUE),
a shared library used by an executable (``calc-tool``, installed without any RUNPATH of its
own, so only rocbuild's makes it start), a git submodule (``sub``, served like every source
through ``--mirror``) and ROCM_PATH baked in at configure time (its recipe provides it to
the stack's steps, as clr.toml does for ROCm's). ``calc-tool`` prints
``value=<n> sub=<m> rocm=<ROCM_PATH at configure>``.
"""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.chain import FAKE_HOST, git

COMMIT = ["-c", "user.name=t", "-c", "user.email=t@t"]

CMAKE = """\
cmake_minimum_required(VERSION 3.20)
project(calc C)
option(CALC_EXTRA "add 100 to the value" OFF)
set(CALC_VALUE "1" CACHE STRING "the value compiled into libcalc")
add_library(calc SHARED calc.c)
target_compile_definitions(calc PRIVATE VALUE=${CALC_VALUE})
if(CALC_EXTRA)
  target_compile_definitions(calc PRIVATE EXTRA=100)
endif()
add_executable(calc-tool main.c)
target_include_directories(calc-tool PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/sub)
target_compile_definitions(calc-tool PRIVATE "ROCM=\\"$ENV{ROCM_PATH}\\"")
target_link_libraries(calc-tool PRIVATE calc)
install(TARGETS calc LIBRARY DESTINATION lib)
install(TARGETS calc-tool RUNTIME DESTINATION bin)
"""

CALC_C = """\
#ifndef EXTRA
#define EXTRA 0
#endif
int calc_value(void) { return VALUE + EXTRA; }
"""

MAIN_C = """\
#include <stdio.h>
#include "sub.h"
int calc_value(void);
int main(void) { printf("value=%d sub=%d rocm=%s\\n", calc_value(), SUB_VALUE, ROCM); return 0; }
"""


def _commit_all(repo: Path, message: str) -> None:
    git(repo, *COMMIT, "add", "-A")
    git(repo, *COMMIT, "commit", "-qm", message)


def _publish(src: Path, bare: Path) -> None:
    if bare.exists():
        git(bare, "fetch", "-q", str(src), "+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
    else:
        subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)


@dataclass
class Calc:
    root: Path
    repos: Path
    recipes: Path
    workdir: Path
    prefix: Path

    @property
    def src(self) -> Path:
        return self.repos / "calc.git.src"

    @property
    def checkout(self) -> Path:
        return self.workdir / "src" / "calc"

    @property
    def build_dir(self) -> Path:
        return self.workdir / "build" / "calc"

    def flags(self) -> list[str]:
        return ["--recipes", str(self.recipes), "--workdir", str(self.workdir),
                "--prefix", str(self.prefix), "--mirror", f"{FAKE_HOST}={self.repos.as_uri()}/"]

    def write_recipe(self, args: Sequence[str] = (), ref: str = "v1", tail: str = "") -> None:
        quoted = ", ".join(f'"{a}"' for a in args)
        (self.recipes / "calc.toml").write_text(textwrap.dedent(f"""\
            summary = "calc test component"
            [source]
            git = "{FAKE_HOST}calc.git"
            ref = "{ref}"
            submodules = true
            [cmake]
            args = [{quoted}]
            # calc-tool bakes ROCM_PATH in at configure: the stack's steps need it, as
            # clr.toml says for ROCm's (model/provides.py)
            [provides_env]
            ROCM_PATH = {{ value = "{{{{ prefix }}}}", steps = "always" }}
            """) + textwrap.dedent(tail))

    def tag(self, tag: str, calc_c: str) -> None:
        """A new commit of calc with ``calc_c``, tagged and published."""
        (self.src / "calc.c").write_text(calc_c)
        git(self.src, *COMMIT, "commit", "--allow-empty", "-qm", tag, "calc.c")
        git(self.src, "tag", tag)
        _publish(self.src, self.repos / "calc.git")

    def add_patch(self, name: str, text: str) -> Path:
        folder = self.recipes.parent / "patches" / "calc"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        path.write_text(text)
        return path

    def run_tool(self, env: dict[str, str] | None = None) -> str:
        """calc-tool from the prefix with a bare environment (nothing but PATH for libc's
        sake): it must find libcalc.so through its RUNPATH alone."""
        done = subprocess.run([str(self.prefix / "bin" / "calc-tool")], capture_output=True,
                              text=True, env=env if env is not None else {"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()


def value_patch(old: int, new: int) -> str:
    """A patch of calc.c (as tagged v1) that adds ``new - old`` to the value."""
    return (f"--- a/calc.c\n+++ b/calc.c\n@@ -1,4 +1,4 @@\n #ifndef EXTRA\n #define EXTRA 0\n"
            f" #endif\n-int calc_value(void) {{ return VALUE + EXTRA; }}\n"
            f"+int calc_value(void) {{ return VALUE + EXTRA + {new - old}; }}\n")


def make_calc(tmp_path: Path) -> Calc:
    repos = tmp_path / "repos"
    repos.mkdir()
    sub = repos / "sub.git.src"
    sub.mkdir()
    (sub / "sub.h").write_text("#define SUB_VALUE 7\n")
    git(sub, "init", "-q", "-b", "main")
    _commit_all(sub, "sub")
    _publish(sub, repos / "sub.git")
    sub_commit = git(sub, "rev-parse", "HEAD")

    src = repos / "calc.git.src"
    src.mkdir()
    for name, text in (("CMakeLists.txt", CMAKE), ("calc.c", CALC_C), ("main.c", MAIN_C)):
        (src / name).write_text(text)
    # the submodule's URL is the fake host: only the mirror rules make it reachable
    (src / ".gitmodules").write_text(
        f'[submodule "sub"]\n\tpath = sub\n\turl = {FAKE_HOST}sub.git\n')
    git(src, "init", "-q", "-b", "main")
    git(src, *COMMIT, "add", "-A")
    # a gitlink without a work tree folder: `add -A` would stage its removal again
    git(src, "update-index", "--add", "--cacheinfo", f"160000,{sub_commit},sub")
    git(src, *COMMIT, "commit", "-qm", "initial")
    git(src, "tag", "v1")
    _publish(src, repos / "calc.git")

    recipes = tmp_path / "project" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / "stack.toml").write_text(
        '[stack]\nname = "calc"\nversion = "1.0"\ntargets = ["gfx906"]\n'
        'prefix = "/opt/unused"\ncomponents = ["calc"]\n')
    calc = Calc(tmp_path, repos, recipes, tmp_path / "work", tmp_path / "prefix")
    calc.write_recipe()
    return calc
