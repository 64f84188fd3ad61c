"""The build venv: a recipe's Python packages are installed into <workdir>/venv before any
build step, builds find them on PATH (`python3`), and wheels for builds that pip-install by
themselves land in the wheelhouse. A local wheel stands in for PyPI (PIP_NO_INDEX)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import textwrap
import zipfile
from pathlib import Path

import pytest

from rocbuild.cli.main import main
from tests.conftest import require_tool
from tests.support.chain import make_repo, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def make_wheel(folder: Path, name: str = "rbtinypkg", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, written by hand so no build backend or index is needed."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "ANSWER = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                         "Tag: py3-none-any\n",
    }
    record = []
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, text in files.items():
            data = text.encode()
            zf.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{path},sha256={digest.decode()},{len(data)}")
        record.append(f"{dist}/RECORD,,")
        zf.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return wheel


def test_python_packages_are_installed_before_the_build_and_found_by_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    index = tmp_path / "index"
    make_wheel(index)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(index))
    project = {"CMakeLists.txt": textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.20)
        project(usespy NONE)
        # like clr's `import CppHeaderParser` check: fails unless the build venv is on PATH
        find_program(PY python3 REQUIRED)
        execute_process(COMMAND ${PY} -c "import rbtinypkg; print(rbtinypkg.ANSWER)"
                        OUTPUT_VARIABLE answer RESULT_VARIABLE failed)
        if(failed)
          message(FATAL_ERROR "rbtinypkg is not importable")
        endif()
        file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/answer.txt "${answer}")
        install(FILES ${CMAKE_CURRENT_BINARY_DIR}/answer.txt DESTINATION share)
        """)}
    flags = one_component_stack(tmp_path, "usespy", project, """\
        [python]
        packages = ["rbtinypkg==1.0"]
        wheels = ["rbtinypkg"]
        [cmake]
        """)
    workdir = tmp_path / "work"
    assert main(["build", *flags, "--quiet", "--no-verify"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.index("▶ build venv") < out.index("▶ usespy: configure")
    assert (tmp_path / "prefix/share/answer.txt").read_text().strip() == "42"
    assert list((workdir / "wheels").glob("rbtinypkg-1.0-*.whl"))
    # current on the next run: no second pip install
    assert main(["build", *flags, "--quiet", "--no-verify"]) == 0
    assert "build venv" not in capsys.readouterr().out


def test_an_offline_install_from_the_cache_never_reaches_pypi(tmp_path: Path) -> None:
    """`build --cache DIR --offline` of a stack whose recipe pip-installs (rocBLAS's Tensile):
    every component comes from the cache, so the wheelhouse is not filled and PyPI, here
    unreachable, is never asked (it stopped the documented offline install before anything
    was unpacked)."""
    from tests.cli import run_cli

    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    index = tmp_path / "index"
    make_wheel(index)
    project = {"CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(usespy NONE)\n"
                                 "install(FILES a.txt DESTINATION share)\n", "a.txt": "a\n"}
    # usespy depends on a component of its own (as rocBLAS on Tensile): both from the cache
    flags = one_component_stack(tmp_path, "usespy", project, """\
        [python]
        wheels = ["rbtinypkg"]
        [cmake]
        """)
    make_repo(tmp_path / "repos", "lower", {
        "CMakeLists.txt": "cmake_minimum_required(VERSION 3.20)\nproject(lower NONE)\n"
                          "install(FILES b.txt DESTINATION share)\n", "b.txt": "b\n"})
    recipes = tmp_path / "recipes"
    (recipes / "lower.toml").write_text(
        '[source]\ngit = "https://example.invalid/lower.git"\nref = "v1"\n[cmake]\n')
    usespy = recipes / "usespy.toml"
    usespy.write_text('depends = ["lower"]\n' + usespy.read_text())
    home = tmp_path / "home"
    env = {"XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
           "PIP_CONFIG_FILE": "/dev/null"}
    run_cli("build", *flags, "--no-verify", "--quiet",
            env={**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}, expect=0)
    cache = tmp_path / "cache"
    run_cli("cache", "keys", "new", "alice", env=env, expect=0)
    run_cli("cache", "push", *flags, "--to", str(cache), "--sign", "alice", env=env, expect=0)
    shutil.rmtree(tmp_path / "prefix")
    # the second machine: a fresh workdir, no source mirror, PyPI unreachable (a closed port)
    second = [*flags[:2], "--workdir", str(tmp_path / "work-b"), *flags[4:6],
              "--mirror", "https://example.invalid/=file:///nonexistent/", "--cache", str(cache)]
    offline = {**env, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
               "PIP_TIMEOUT": "2"}
    built = run_cli("build", *second, "--offline", "--no-verify", env=offline)
    assert built.returncode == 0, built.explain()
    assert "build venv" not in built.stdout, built.stdout
    assert (tmp_path / "prefix" / "share" / "a.txt").read_text() == "a\n"
    assert not list((tmp_path / "work-b" / "wheels").glob("*.whl"))
