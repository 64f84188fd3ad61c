"""Every step the build's summary can show has a log that `rocbuild logs` opens: the
``options`` check, the ``cache`` step and the run-wide ``python-venv`` too (the step table
names them all; before, `rocbuild logs hello options` said "unknown step")."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.conftest import require_tool
from tests.e2e.test_build_venv import make_wheel
from tests.support.chain import Chain, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

PROJECT = {"CMakeLists.txt": textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(hello NONE)
    set(HELLO_GREETING "hi" CACHE STRING "what it says")
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hello.txt "${HELLO_GREETING}")
    install(FILES ${CMAKE_CURRENT_BINARY_DIR}/hello.txt DESTINATION share)
    """)}


def test_options_and_python_venv_have_logs(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    index = tmp_path / "index"
    make_wheel(index)
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    flags = one_component_stack(tmp_path, "hello", PROJECT, """\
        [python]
        packages = ["rbtinypkg==1.0"]
        [cmake]
        args = ["-DHELLO_GREETING=hey"]
        """)
    built = run_cli("build", *flags, "--quiet", "--no-verify", env=env)
    assert built.returncode == 0, built.explain()
    summary = built.stdout[built.stdout.index("steps run"):]
    assert "options" in summary and "python-venv" in summary  # rows of the build's table

    options = run_cli("logs", *flags, "hello", "options")
    assert options.returncode == 0, options.explain()
    assert "checked 1 options of" in options.stdout and "HELLO_GREETING: read by hello" \
        in options.stdout
    for args in (["hello", "python-venv"], ["python-venv"]):
        venv = run_cli("logs", *flags, *args)
        assert venv.returncode == 0, venv.explain()
        assert "-m pip install --disable-pip-version-check rbtinypkg==1.0" in venv.stdout
    unknown = run_cli("logs", *flags, "hello", "link")
    assert unknown.returncode == 2
    assert ("its steps: fetch, patch, configure, compile, install; with a log too: "
            "python-venv, cache, options") in unknown.stderr


def test_the_cache_step_has_a_log(chain: Chain, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0
    pushed = run_cli("cache", "push", *chain.flags(), "--to", str(cache))
    assert pushed.returncode == 0, pushed.explain()
    # another machine with the same prefix path (the chain's artifacts are not relocatable):
    # the prefix goes, since a second workdir may not build into the first one's prefix
    shutil.rmtree(chain.prefix)
    second = ["--recipes", str(chain.recipes), "--workdir", str(tmp_path / "work-b"),
              "--prefix", str(chain.prefix), "--mirror", chain.mirror, "--cache", str(cache)]
    # unsigned artifacts (signatures are test_cache.py's matter) are allowed explicitly
    built = run_cli("build", *second, "--quiet", "--no-verify", "--allow-unsigned")
    assert built.returncode == 0 and "▶ alpha: cache" in built.stdout, built.explain()
    log = run_cli("logs", *second, "alpha", "cache")
    assert log.returncode == 0, log.explain()
    assert "pull " in log.stdout
    # the default log of a component the cache installed is its cache step's
    assert run_cli("logs", *second, "alpha").stdout == log.stdout
