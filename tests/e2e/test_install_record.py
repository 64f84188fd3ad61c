"""The record of what a component installed (``<prefix>/.rocbuild/installed/<c>.json``, issues
31 and 33): it holds what the install left in the prefix, links and files an
``install(CODE …)``/``install(SCRIPT …)`` made included, so an artifact pushed from it serves
a prefix equal to the built one; it carries each file's size, mode and sha256 (a link's
target), so a library truncated with its mtime kept is found and installed again; and a
damaged record is rebuilt at the start of the next run, never read as "owns nothing"."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, make_repo
from tests.support.trees import tree

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# a library with its versioned name, and what CMake's install(CODE) and install(SCRIPT) make
# beside it: the unversioned link and a generated file (ROCm's projects do both)
MAKER = {
    "CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(maker NONE)
        install(FILES libm.so.1 DESTINATION lib)
        install(PROGRAMS tool.sh DESTINATION bin)
        install(CODE "file(CREATE_LINK libm.so.1
            \\"\\$ENV{DESTDIR}\\${CMAKE_INSTALL_PREFIX}/lib/libm.so\\" SYMBOLIC)")
        install(SCRIPT gen.cmake)
        """),
    "gen.cmake": 'file(WRITE "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/share/maker/gen.txt" '
                 '"generated at install\\n")\n',
    "libm.so.1": "\x7fELF not really, but 40 bytes of library\n",
    "tool.sh": "#!/bin/sh\necho maker\n",
}
HEADER = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(a NONE)\n"
                      "install(FILES a.h DESTINATION include)\n",
    "a.h": "int a_value(void);\n",
}


def _stack(tmp_path: Path, components: dict[str, tuple[dict[str, str], str]]) -> list[str]:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    repos, recipes = tmp_path / "repos", tmp_path / "recipes"
    recipes.mkdir(exist_ok=True)
    (recipes / "stack.toml").write_text(
        '[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/unused"\n')
    for name, (files, tail) in components.items():
        if not (repos / f"{name}.git").exists():
            make_repo(repos, name, files)
        head, _, tail = tail.rpartition("@@\n")  # top-level keys before [source]
        (recipes / f"{name}.toml").write_text(
            head + f'[source]\ngit = "{FAKE_HOST}{name}.git"\nref = "v1"\n'
            + textwrap.dedent(tail))
    return ["--recipes", str(recipes), "--workdir", str(tmp_path / "work"),
            "--prefix", str(tmp_path / "prefix"), "--mirror", f"{FAKE_HOST}={repos.as_uri()}/"]


# rocbuild's own files name the workdir or the time of the run; all else must be equal
OWN = (".rocbuild/build-info.json", ".rocbuild/installed", "env.", "modulefiles")


def test_a_served_prefix_equals_the_built_one_with_install_code_files(tmp_path: Path) -> None:
    flags = _stack(tmp_path, {"maker": (MAKER, "[cmake]\n")})
    prefix = tmp_path / "prefix"
    run_cli("build", *flags, "--no-verify", expect=0)
    assert os.readlink(prefix / "lib" / "libm.so") == "libm.so.1"
    record = json.loads((prefix / ".rocbuild" / "installed" / "maker.json").read_text())
    assert {"lib/libm.so", "share/maker/gen.txt"} <= set(record["files"]), record
    assert record["entries"]["lib/libm.so"] == {"type": "link", "link": "libm.so.1"}
    assert record["entries"]["bin/tool.sh"]["mode"] == 0o755
    cache = tmp_path / "cache"
    run_cli("cache", "push", *flags, "--to", str(cache), expect=0)
    built = tree(prefix, OWN)
    shutil.move(prefix, tmp_path / "built")
    served = run_cli("build", *flags[:2], "--workdir", str(tmp_path / "work-b"), *flags[4:],
                     "--cache", str(cache), "--allow-unsigned", "--no-verify", expect=0)
    assert "maker: cache" in served.stdout, served.explain()
    assert not (tmp_path / "work-b" / "logs" / "maker" / "compile.log").exists()
    now = tree(prefix, OWN)
    assert now == built, {k: (built.get(k), now.get(k)) for k in built.keys() | now.keys()
                          if built.get(k) != now.get(k)}


@pytest.mark.parametrize("how", ["truncated", "emptied", "same-size-other-bytes"])
def test_an_installed_file_changed_with_its_mtime_kept_is_installed_again(
        tmp_path: Path, how: str) -> None:
    """A full disk leaves a 0-byte file, a crash a truncated one, both with the old mtime:
    CMake's install would skip them as "Up-to-date" and the old status said "current"."""
    flags = _stack(tmp_path, {"maker": (MAKER, "[cmake]\n")})
    run_cli("build", *flags, "--no-verify", expect=0)
    lib = tmp_path / "prefix" / "lib" / "libm.so.1"
    good = lib.read_bytes()
    st = lib.stat()
    data = {"truncated": good[:10], "emptied": b"",
            "same-size-other-bytes": good.replace(b"library", b"LIBRARY")}[how]
    lib.write_bytes(data)
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = run_cli("build", *flags, "--no-verify", expect=0)
    assert "nothing to do" not in again.stdout, again.explain()
    assert lib.read_bytes() == good
    status = run_cli("build", *flags, "--no-verify", expect=0)
    assert "nothing to do" in status.stdout, status.explain()


def _damage(record: Path, how: str) -> None:
    record.unlink()
    if how == "fifo":
        os.mkfifo(record)
    elif how == "folder":
        record.mkdir()
    else:
        record.write_text({"emptied": "", "garbage": "\x00garbage{", "list": "[]",
                           "no-files": "{}"}[how])


@pytest.mark.parametrize("how", ["emptied", "garbage", "list", "no-files", "fifo", "folder"])
def test_a_damaged_record_is_rebuilt_and_still_protects_its_files(tmp_path: Path,
                                                                 how: str) -> None:
    """a's record of installed files is damaged; then b's recipe writes a's header through
    [install.files]. The run rebuilds a's record from its build tree first (and says so), so
    b's extra is refused naming a, and a's header is intact (it was overwritten, exit 0)."""
    flags = _stack(tmp_path, {"a": (HEADER, "[cmake]\n")})
    run_cli("build", *flags, "--no-verify", expect=0)
    prefix = tmp_path / "prefix"
    _damage(prefix / ".rocbuild" / "installed" / "a.json", how)
    empty = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(b NONE)\n"}
    _stack(tmp_path, {"a": (HEADER, "[cmake]\n"),
                      "b": (empty, 'depends = ["a"]\n@@\n[cmake]\n'
                                   '[install.files]\n"include/a.h" = "int evil;\\n"\n')})
    result = run_cli("build", *flags, "--no-verify")
    assert "Traceback" not in result.stdout + result.stderr, result.explain()
    assert "a: its record of installed files" in result.stdout, result.explain()
    assert "was damaged; rebuilt from" in result.stdout, result.explain()
    assert result.returncode == 1, result.explain()
    assert "would overwrite include/a.h of a" in result.output, result.explain()
    assert (prefix / "include" / "a.h").read_text() == HEADER["a.h"]
    record = json.loads((prefix / ".rocbuild" / "installed" / "a.json").read_text())
    assert record["files"] == ["include/a.h"]
