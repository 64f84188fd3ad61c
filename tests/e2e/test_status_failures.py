"""Plain `rocbuild status` covers every failure this workdir has seen: a
component built with `rocbuild build X` outside stack.components, a failed ``options`` check
(an option nothing reads) and a failed build venv. Each makes plain status exit 1 and name it,
and `rocbuild logs` opens the failed step's log. Before, status said "everything is built and
current" (exit 0), or "stale" with exit 0 for the options check."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from tests.cli import commands_under, run_cli
from tests.conftest import require_tool
from tests.support.chain import FAKE_HOST, Chain, one_component_stack

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_a_failed_component_outside_the_stack_fails_plain_status(chain: Chain) -> None:
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0
    chain.write_recipe("broken", f"""\
        [source]
        git = "{FAKE_HOST}alpha.git"
        ref = "v1"
        [cmake]
        args = ["-DALPHA_FAIL=ON"]
        """)
    run_cli("build", *chain.flags(), "broken", "--quiet", "--no-verify", expect=1)
    # the last build's command is the whole stack's again: broken keeps its own command
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0

    status = run_cli("status", *chain.flags(), env={"COLUMNS": "200"}, expect=1)
    assert "everything is built and current" not in status.stdout, status.explain()
    assert "FAILED broken: compile" in status.stdout, status.explain()
    assert "4 components: 3 done, 1 failed" in status.stdout
    continues = commands_under(status.stdout)
    assert continues and " build broken " in continues[0], status.explain()
    doc = json.loads(run_cli("status", *chain.flags(), "--json", expect=1).stdout)
    assert doc["failed"] is True
    assert [c["name"] for c in doc["components"] if c["state"] == "failed"] == ["broken"]


def test_a_failed_options_check_is_a_failed_row_with_its_log(chain: Chain) -> None:
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0
    chain.set_args("gamma", "-DNOPE=1")  # no CMake file of gamma (or its dependencies) reads it
    built = run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=1)
    assert "gamma: options" in built.stdout

    status = run_cli("status", *chain.flags(), env={"COLUMNS": "200"}, expect=1)
    rows = [line.replace("│", " ").split() for line in status.stdout.splitlines()]
    assert next(r[:2] for r in rows if r[:1] == ["options"]) == ["options", "failed"], \
        status.explain()
    assert "FAILED gamma: options" in status.stdout
    assert "-DNOPE is never read" in status.stdout
    assert "continue with:" in status.stdout
    doc = json.loads(run_cli("status", *chain.flags(), "--json", expect=1).stdout)
    gamma = next(c for c in doc["components"] if c["name"] == "gamma")
    assert gamma["state"] == "failed" and gamma["failure"]["step"] == "options"
    assert [s["step"] for s in gamma["steps"]][:3] == ["fetch", "patch", "options"]
    log = run_cli("logs", *chain.flags(), "gamma", "options", expect=0)
    assert "not read: -DNOPE is never read" in log.stdout

    chain.set_args("gamma")  # fixed: the next build passes the check, the failure is gone
    assert run_cli("build", *chain.flags(), "--quiet", "--no-verify").returncode == 0
    assert run_cli("status", *chain.flags(), expect=0).stdout.count("FAILED") == 0


PROJECT = {"CMakeLists.txt": textwrap.dedent("""\
    cmake_minimum_required(VERSION 3.20)
    project(hello NONE)
    install(FILES CMakeLists.txt DESTINATION share/hello)
    """)}


def test_a_failed_build_venv_fails_plain_status(tmp_path: Path) -> None:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    flags = one_component_stack(tmp_path, "hello", PROJECT, """\
        [python]
        packages = ["rbnosuchpkg==1.0"]
        [cmake]
        """)
    empty = tmp_path / "index"
    empty.mkdir()
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(empty)}  # pip finds nothing
    run_cli("build", *flags, "--quiet", "--no-verify", env=env, expect=1)
    status = run_cli("status", *flags, expect=1, env=env)
    assert "FAILED build venv: python-venv" in status.stdout, status.explain()
    assert "rbnosuchpkg" in run_cli("logs", *flags, "python-venv", expect=0).stdout
    doc = json.loads(run_cli("status", *flags, "--json", expect=1, env=env).stdout)
    assert doc["run_failures"][0]["step"] == "python-venv"


def test_a_failed_cache_step_is_a_failed_row(chain: Chain) -> None:
    """The cache step fails only on an error inside rocbuild (a refused artifact is built
    instead), which the runner records like any failure: written here as the runner does."""
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    failures = chain.workdir / "state" / "failures"
    failures.mkdir(parents=True, exist_ok=True)
    log = chain.workdir / "logs" / "alpha" / "cache.log"
    log.write_text("Traceback (most recent call last): ...\n")
    (failures / "alpha.json").write_text(json.dumps(
        {"step": "cache", "when": 1.0, "message": "alpha: cache failed: KeyError: 'x'",
         "log": str(log), "tail": []}))
    assert run_cli("status", *chain.flags(), expect=0).stdout.count("FAILED") == 0  # all done
    shutil.rmtree(chain.workdir / "src" / "alpha")  # the next build fetches alpha again
    status = run_cli("status", *chain.flags(), env={"COLUMNS": "200"}, expect=1)
    rows = [line.replace("│", " ").split() for line in status.stdout.splitlines()]
    assert next(r[:3] for r in rows if r[:1] == ["alpha"]) == ["alpha", "cache", "failed"], \
        status.explain()
    assert "FAILED alpha: cache" in status.stdout
