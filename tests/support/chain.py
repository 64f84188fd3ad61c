"""A three-component chain of real CMake projects in local git repos, for end-to-end tests.

``alpha`` installs a library and a CMake package; ``beta`` finds it with find_package and
installs its own; ``gamma`` finds beta and installs an executable that prints a value from
both. Recipes point at ``https://example.invalid/<name>.git``, which the tests rewrite to the
local repos with ``--mirror``; nothing touches the network.
"""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

FAKE_HOST = "https://example.invalid/"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _library_project(name: str, upstream: str | None, value: int) -> dict[str, str]:
    up_find = f"find_package({upstream} CONFIG REQUIRED)\n" if upstream else ""
    up_link = f"target_link_libraries({name} PUBLIC {upstream}::{upstream})\n" if upstream else ""
    up_call = f"{upstream}_value() + " if upstream else ""
    up_decl = f"int {upstream}_value();\n" if upstream else ""
    find_dep = f"find_dependency({upstream})" if upstream else ""
    return {
        "CMakeLists.txt": textwrap.dedent(f"""\
            cmake_minimum_required(VERSION 3.20)
            project({name} C)
            set(CMAKE_INSTALL_RPATH "${{CMAKE_INSTALL_PREFIX}}/lib")
            option({name.upper()}_FAIL "fail on purpose" OFF)
            set({name.upper()}_FACTOR "1" CACHE STRING "a value compiled into the library")
            {up_find}add_library({name} SHARED {name}.c)
            target_compile_definitions({name} PRIVATE FACTOR=${{{name.upper()}_FACTOR}})
            if({name.upper()}_FAIL)
              target_compile_definitions({name} PRIVATE BROKEN=1)
            endif()
            {up_link}target_include_directories({name} PUBLIC $<INSTALL_INTERFACE:include>)
            install(TARGETS {name} EXPORT {name}Targets LIBRARY DESTINATION lib)
            install(FILES {name}.h DESTINATION include)
            install(EXPORT {name}Targets NAMESPACE {name}:: DESTINATION lib/cmake/{name})
            file(WRITE ${{CMAKE_CURRENT_BINARY_DIR}}/{name}Config.cmake
                 "include(CMakeFindDependencyMacro)\\n{find_dep}\\n"
                 "include(\\${{CMAKE_CURRENT_LIST_DIR}}/{name}Targets.cmake)\\n")
            install(FILES ${{CMAKE_CURRENT_BINARY_DIR}}/{name}Config.cmake
                    DESTINATION lib/cmake/{name})
            """),
        f"{name}.h": f"int {name}_value(void);\n",
        f"{name}.c": textwrap.dedent(f"""\
            #ifdef BROKEN
            #error {name} was configured to fail
            #endif
            {up_decl}int {name}_value(void) {{ return {up_call}{value} * FACTOR; }}
            """),
    }


def _app_project(upstream: str) -> dict[str, str]:
    return {
        "CMakeLists.txt": textwrap.dedent(f"""\
            cmake_minimum_required(VERSION 3.20)
            project(gamma C)
            set(CMAKE_INSTALL_RPATH "${{CMAKE_INSTALL_PREFIX}}/lib")
            find_package({upstream} CONFIG REQUIRED)
            add_executable(gamma main.c)
            target_link_libraries(gamma PRIVATE {upstream}::{upstream})
            install(TARGETS gamma RUNTIME DESTINATION bin)
            """),
        "main.c": textwrap.dedent(f"""\
            #include <stdio.h>
            #include "{upstream}.h"
            int main(void) {{ printf("gamma %d\\n", {upstream}_value()); return 0; }}
            """),
    }


def make_repo(root: Path, name: str, files: dict[str, str], tag: str = "v1") -> Path:
    repo = root / f"{name}.git.src"
    repo.mkdir(parents=True)
    for rel, text in files.items():
        path = repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "initial")
    git(repo, "tag", tag)
    bare = root / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    return bare


@dataclass
class Chain:
    root: Path
    recipes: Path
    repos: Path
    workdir: Path
    prefix: Path

    @property
    def mirror(self) -> str:
        return f"{FAKE_HOST}={self.repos.as_uri()}/"

    def flags(self) -> list[str]:
        return ["--recipes", str(self.recipes), "--workdir", str(self.workdir),
                "--prefix", str(self.prefix), "--mirror", self.mirror]

    def write_recipe(self, name: str, text: str) -> None:
        (self.recipes / f"{name}.toml").write_text(textwrap.dedent(text))

    def set_args(self, name: str, *args: str) -> None:
        """Rewrite a chain component's recipe with these cmake args (same source and deps)."""
        depends = {"alpha": [], "beta": ["alpha"], "gamma": ["beta"]}[name]
        self.write_recipe(name, f"""\
            depends = {depends!r}
            [source]
            git = "{FAKE_HOST}{name}.git"
            ref = "v1"
            [cmake]
            args = {list(args)!r}
            """.replace("'", '"'))

    def run_gamma(self) -> str:
        return subprocess.run([str(self.prefix / "bin" / "gamma")], check=True,
                              capture_output=True, text=True).stdout.strip()


def make_chain(tmp_path: Path) -> Chain:
    repos = tmp_path / "repos"
    make_repo(repos, "alpha", _library_project("alpha", None, 1))
    make_repo(repos, "beta", _library_project("beta", "alpha", 10))
    make_repo(repos, "gamma", _app_project("beta"))
    recipes = tmp_path / "project" / "recipes"
    recipes.mkdir(parents=True)
    (recipes / "stack.toml").write_text(textwrap.dedent("""\
        [stack]
        name = "chain"
        version = "1.0"
        targets = ["gfx906"]
        prefix = "/opt/chain-{{ series }}"
        components = ["alpha", "beta", "gamma"]
        """))
    chain = Chain(tmp_path, recipes, repos, tmp_path / "work", tmp_path / "prefix")
    for name, depends in (("alpha", []), ("beta", ["alpha"]), ("gamma", ["beta"])):
        chain.write_recipe(name, f"""\
            summary = "{name} test component"
            depends = {depends!r}
            [source]
            git = "{FAKE_HOST}{name}.git"
            ref = "v1"
            [cmake]
            args = []
            """.replace("'", '"'))
    return chain


def one_component_stack(tmp_path: Path, name: str, files: dict[str, str],
                        recipe_tail: str = "[cmake]\n", version: str = "6.4.3") -> list[str]:
    """A stack of one component built from ``files`` (a CMake project in a local git repo);
    ``recipe_tail`` is the recipe after its [source] table. Returns the rocbuild flags that
    point at it (recipes, workdir, prefix, mirror) inside ``tmp_path``."""
    repos = tmp_path / "repos"
    make_repo(repos, name, files)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        f'[stack]\nversion = "{version}"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n')
    (recipes / f"{name}.toml").write_text(
        f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n' + textwrap.dedent(recipe_tail))
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]


def add_gamma_patch(chain: Chain) -> Path:
    """A patch for gamma (patches/gamma/0001-say-hello.patch beside the recipes) that makes it
    print "hello" instead of "gamma"; returns its path."""
    folder = chain.recipes.parent / "patches" / "gamma"
    folder.mkdir(parents=True, exist_ok=True)
    patch = folder / "0001-say-hello.patch"
    patch.write_text(
        "--- a/main.c\n+++ b/main.c\n@@ -1,3 +1,3 @@\n #include <stdio.h>\n"
        ' #include "beta.h"\n-int main(void) { printf("gamma %d\\n", beta_value()); return 0; }\n'
        '+int main(void) { printf("hello %d\\n", beta_value()); return 0; }\n')
    return patch


def require_gpu_code(chain: Chain, name: str) -> None:
    """Mark a chain component's recipe ``gpu_code = true``: its installed files must carry GPU
    code, which the chain's host-only projects never do, so the build's verify fails."""
    path = chain.recipes / f"{name}.toml"
    path.write_text("gpu_code = true\n" + path.read_text())
