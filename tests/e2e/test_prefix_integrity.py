"""The prefix holds what the recipes say and nothing is written outside it: extras
dropped from a recipe are removed, one component overwriting another's file fails naming
both unless declared, no write follows a link out of the prefix, and a prefix being rebuilt
never claims to be complete."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rocbuild.errors import BuildFailed
from tests.cli import child_env, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, Chain, make_repo

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _project(files: dict[str, str], extra_cmake: str = "") -> dict[str, str]:
    installs = "".join(f"install(FILES {name} DESTINATION share)\n" for name in files)
    return {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\n"
                              + extra_cmake + installs, **files}


def _stack(tmp_path: Path, components: dict[str, tuple[dict[str, str], str]]) -> list[str]:
    """Components name -> (project files, recipe tail after [source]); returns flags."""
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir()
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n')
    for name, (files, tail) in components.items():
        make_repo(repos, name, files)
        (recipes / f"{name}.toml").write_text(
            f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n' + textwrap.dedent(tail))
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]


def test_extras_dropped_from_a_recipe_are_removed(tmp_path: Path) -> None:
    flags = _stack(tmp_path, {"a": (_project({"a.txt": "a\n"}), """\
        [cmake]
        [install.links]
        "bin/a-link" = "../share/a.txt"
        [install.files]
        "etc/a.conf" = "x\\n"
        "etc/keep.conf" = "keep\\n"
        """)})
    run_cli("build", *flags, "--no-verify", expect=0)
    prefix = tmp_path / "prefix"
    assert (prefix / "bin" / "a-link").is_symlink() and (prefix / "etc" / "a.conf").is_file()
    record = json.loads((prefix / ".rocbuild" / "installed" / "a.json").read_text())
    assert "share/a.txt" in record["files"] and "etc/a.conf" in record["extras"]
    recipe = tmp_path / "recipes" / "a.toml"
    recipe.write_text(recipe.read_text().replace('"bin/a-link" = "../share/a.txt"\n', "")
                      .replace('"etc/a.conf" = "x\\n"\n', ""))
    run_cli("build", *flags, "--no-verify", expect=0)
    assert not (prefix / "bin" / "a-link").is_symlink()
    assert not (prefix / "etc" / "a.conf").exists()
    assert (prefix / "etc" / "keep.conf").read_text() == "keep\n"


def test_overwriting_another_components_file_fails_unless_declared(tmp_path: Path) -> None:
    flags = _stack(tmp_path, {
        "a": (_project({"same.txt": "from a\n"}), "[cmake]\n"),
        "b": (_project({"same.txt": "from b\n"}), 'depends = []\n[cmake]\n'),
    })
    recipe_b = tmp_path / "recipes" / "b.toml"
    recipe_b.write_text('depends = ["a"]\n' + recipe_b.read_text().replace("depends = []\n", ""))
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "b: its install overwrote 1 file(s) that a installed" in result.output, \
        result.explain()
    assert "share/same.txt" in result.output and 'install.overwrites = ["a"]' in result.output
    recipe_b.write_text(recipe_b.read_text().replace("[cmake]\n",
                                                     '[cmake]\n[install]\noverwrites = ["a"]\n'))
    run_cli("build", *flags, "--no-verify", expect=0)
    assert (tmp_path / "prefix" / "share" / "same.txt").read_text() == "from b\n"


def test_a_component_outside_the_run_keeps_its_files(tmp_path: Path) -> None:
    """b is installed; then a alone is built (it needs nothing, so b is not in the run),
    once with a CMake install and once with a recipe file that both land on b's file: each
    fails naming b, and b's file is as b installed it."""
    flags = _stack(tmp_path, {
        "a": (_project({"a.txt": "a\n"}), "[cmake]\n"),
        "b": (_project({"b.txt": "from b\n"}), "[cmake]\n"),
    })
    run_cli("build", *flags, "--no-verify", expect=0)
    mine = tmp_path / "prefix" / "share" / "b.txt"
    recipe_a = tmp_path / "recipes" / "a.toml"
    recipe_a.write_text(recipe_a.read_text() + '[install.files]\n"share/b.txt" = "from a\\n"\n')
    result = run_cli("build", *flags, "--no-verify", "a", expect=1)
    assert "would overwrite share/b.txt of b" in result.output, result.explain()
    assert mine.read_text() == "from b\n"
    recipe_a.write_text(recipe_a.read_text().replace('[install.files]\n"share/b.txt" = '
                                                     '"from a\\n"\n', ""))
    checkout = tmp_path / "work" / "src" / "a"  # the user's edit of a's sources
    (checkout / "b.txt").write_text("from a\n")
    with (checkout / "CMakeLists.txt").open("a") as f:
        f.write("install(FILES b.txt DESTINATION share)\n")
    result = run_cli("build", *flags, "--no-verify", "a", expect=1)
    assert "a: its install overwrote 1 file(s) that b installed" in result.output, \
        result.explain()
    assert "share/b.txt" in result.output


def test_no_write_follows_a_link_out_of_the_prefix(tmp_path: Path) -> None:
    """A CMake-installed link that leads outside (which no recipe check can see) stops the
    next install before it runs, and the write-time check refuses to write through it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    make_link = (f'file(CREATE_LINK "{outside}" "${{CMAKE_BINARY_DIR}}/out" SYMBOLIC)\n'
                 'install(FILES "${CMAKE_BINARY_DIR}/out" DESTINATION lib)\n')
    flags = _stack(tmp_path, {
        "a": (_project({"a.txt": "a\n"}, make_link), "[cmake]\n"),
        "b": (_project({"b.txt": "b\n"}), '[cmake]\n[install.files]\n"lib/out/evil.txt" = "x"\n'),
    })
    recipe_b = tmp_path / "recipes" / "b.toml"
    recipe_b.write_text('depends = ["a"]\n' + recipe_b.read_text())
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert (tmp_path / "prefix" / "lib" / "out").is_symlink()  # a's install made it
    assert "which leads outside the prefix" in result.output, result.explain()
    assert "(installed by a)" in result.output, result.explain()  # b's install never ran
    assert not (outside / "evil.txt").exists()
    # the write-time check holds on its own too: a link made after b's install started
    from rocbuild.prefix import install
    with pytest.raises(BuildFailed, match="leads outside the prefix"):
        install.checked_path(tmp_path / "prefix", "lib/out/evil.txt", "b")


def test_a_file_onto_a_folder_is_one_failure(tmp_path: Path) -> None:
    flags = _stack(tmp_path, {"a": (_project({"a.txt": "a\n"}),
                                    '[cmake]\n[install.files]\n"share" = "x"\n')})
    result = run_cli("build", *flags, "--no-verify", expect=1)
    said = " ".join(result.output.split())  # the summary wraps at spaces
    assert "a: cannot write the file" in said and "a folder is in the way" in said, \
        result.explain()
    assert (tmp_path / "prefix" / "share" / "a.txt").is_file()


def test_a_prefix_being_rebuilt_is_not_complete(chain: Chain) -> None:
    """Killed in the middle of reinstalling into a complete prefix: build-info says
    incomplete and `activate` refuses the prefix until a rerun finishes it."""
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    info = chain.prefix / ".rocbuild" / "build-info.json"
    assert json.loads(info.read_text())["complete"] is True
    chain.set_args("beta", "-DBETA_FACTOR=2")
    log = chain.workdir / "logs" / "beta" / "install.log"
    size = log.stat().st_size
    argv = [sys.executable, "-m", "rocbuild", "build", *chain.flags(), "--no-verify", "--quiet"]
    proc = subprocess.Popen(argv, cwd=chain.root, env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    while proc.poll() is None and log.stat().st_size == size:  # beta's reinstall has begun
        time.sleep(0.002)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads(info.read_text())["complete"] is False
    link = chain.root / "rocm-current"
    result = run_cli("activate", str(chain.prefix), "--link", str(link), expect=2)
    assert "did not complete" in result.stderr
    # the rerun verifies (the chain is host code only: its linkage is what verify checks)
    run_cli("build", *chain.flags(), expect=0)
    assert json.loads(info.read_text())["complete"] is True
    assert chain.run_gamma() == "gamma 21"
    run_cli("activate", str(chain.prefix), "--link", str(link), expect=0)


# --- ownership where a path really lands, writes outside, rocbuild's own files ---
MID = {"libmid.so.1.2.3": "the real library\n"}


def _lib_project(files: dict[str, str], extra_cmake: str = "") -> dict[str, str]:
    installs = "".join(f"install(FILES {name} DESTINATION lib)\n" for name in files)
    return {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\n"
                              + extra_cmake + installs, **files}


def test_a_file_through_a_link_onto_another_components_file_is_refused(tmp_path: Path) -> None:
    """b's recipe links share/l -> ../lib and writes share/l/libmid.so.1.2.3: that is a's
    lib/libmid.so.1.2.3. Refused before anything is written, naming both."""
    flags = _stack(tmp_path, {
        "a": (_lib_project(MID), "[cmake]\n"),
        "b": (_project({"b.txt": "b\n"}), """\
            depends = ["a"]
            [cmake]
            [install.links]
            "share/l" = "../lib"
            [install.files]
            "share/l/libmid.so.1.2.3" = "overwritten"
            """),
    })
    recipe_b = tmp_path / "recipes" / "b.toml"
    recipe_b.write_text('depends = ["a"]\n' + recipe_b.read_text().replace('depends = ["a"]\n',
                                                                            ""))
    result = run_cli("build", *flags, "--no-verify", expect=1)
    said = " ".join(result.output.split())  # the summary wraps messages at spaces
    assert "b: install.files.\"share/l/libmid.so.1.2.3\" would overwrite lib/libmid.so.1.2.3" \
        " of a" in said, result.explain()
    assert "(= lib/libmid.so.1.2.3 through a link)" in said, result.explain()
    assert (tmp_path / "prefix" / "lib" / "libmid.so.1.2.3").read_text() == "the real library\n"


def test_an_extra_through_a_link_onto_the_components_own_file_is_refused(
        tmp_path: Path) -> None:
    flags = _stack(tmp_path, {"a": (_lib_project(MID), """\
        [cmake]
        [install.links]
        "share/l" = "../lib"
        [install.files]
        "share/l/libmid.so.1.2.3" = "overwritten"
        """)})
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "would overwrite lib/libmid.so.1.2.3 of a's CMake install" in \
        " ".join(result.output.split()), result.explain()
    assert (tmp_path / "prefix" / "lib" / "libmid.so.1.2.3").read_text() == "the real library\n"


def test_a_cmake_install_through_anothers_link_onto_its_file_fails_naming_both(
        tmp_path: Path) -> None:
    """a links share/l -> ../lib; b's own CMake install writes share/l/libmid.so.1.2.3, which
    is a's lib/libmid.so.1.2.3: b's install fails naming a, and a rebuild of b never removes
    a's file as if it were b's own."""
    b_files = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(b NONE)\n"
                                 "install(FILES libmid.so.1.2.3 DESTINATION share/l)\n",
               "libmid.so.1.2.3": "b's copy\n"}
    flags = _stack(tmp_path, {
        "a": (_lib_project(MID), '[cmake]\n[install.links]\n"share/l" = "../lib"\n'),
        "b": (b_files, "[cmake]\n"),
    })
    recipe_b = tmp_path / "recipes" / "b.toml"
    recipe_b.write_text('depends = ["a"]\n' + recipe_b.read_text())
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "b: its install overwrote 1 file(s) that a installed" in result.output, \
        result.explain()
    assert "share/l/libmid.so.1.2.3 (= lib/libmid.so.1.2.3 through a link)" in result.output
    # a is installed again (its file restored); b's next attempt must not delete a's file
    (tmp_path / "work" / "state" / "stamps" / "a" / "install.json").unlink()
    run_cli("build", *flags, "a", "--no-verify", expect=0)
    assert (tmp_path / "prefix" / "lib" / "libmid.so.1.2.3").read_text() == "the real library\n"
    again = run_cli("build", *flags, "--no-verify", expect=1)
    assert "its install overwrote" in again.output
    log = (tmp_path / "work" / "logs" / "b" / "install.log").read_text()
    assert "kept " in log and "another component's file" in log, log


def test_an_install_outside_the_prefix_fails_naming_the_path(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    cmake = (f'install(FILES a.txt DESTINATION "{outside}")\n')
    flags = _stack(tmp_path, {"a": (_project({"a.txt": "a\n"}, cmake), "[cmake]\n")})
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert f"a: its CMake install wrote 1 path(s) outside the prefix {tmp_path / 'prefix'}: " \
        f"{outside / 'a.txt'}" in " ".join(result.output.split()), result.explain()
    assert not (tmp_path / "prefix" / ".rocbuild" / "installed" / "a.json").exists()


def test_a_cmake_install_onto_rocbuilds_own_file_fails(tmp_path: Path) -> None:
    files = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(p NONE)\n"
                               "install(FILES env.sh DESTINATION .)\n", "env.sh": "mine\n"}
    flags = _stack(tmp_path, {"a": (files, "[cmake]\n")})
    result = run_cli("build", *flags, "--no-verify", expect=1)
    assert "a: its install wrote env.sh, which is rocbuild's own file (env.sh" in \
        " ".join(result.output.split()), result.explain()


def test_a_users_edit_of_env_sh_is_kept_aside(tmp_path: Path) -> None:
    flags = _stack(tmp_path, {"a": (_project({"a.txt": "a\n"}), "[cmake]\n")})
    run_cli("build", *flags, "--no-verify", expect=0)
    env_sh = tmp_path / "prefix" / "env.sh"
    written = env_sh.read_text()
    env_sh.write_text(written + "export MY_OWN=1\n")
    again = run_cli("build", *flags, "--no-verify", expect=0)  # a no-op run
    kept = list((tmp_path / "prefix" / ".rocbuild" / "kept").glob("*/env.sh"))
    assert len(kept) == 1 and kept[0].read_text().endswith("export MY_OWN=1\n")
    assert f"they are kept in {kept[0]}" in again.output, again.explain()
    assert env_sh.read_text() == written
    third = run_cli("build", *flags, "--no-verify", expect=0)  # nothing of the user's now
    assert "kept in" not in third.output
    assert len(list((tmp_path / "prefix" / ".rocbuild" / "kept").glob("*/env.sh"))) == 1
