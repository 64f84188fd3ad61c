"""`rocbuild status` and `rocbuild logs` after real builds of the generated chain
(alpha <- beta <- gamma): failures with their log and the command that continues, stale steps
and why, known causes found in real CMake output, and the JSON document."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from rocbuild.cli.main import main
from rocbuild.run.state.state import StateDir, write_json_atomic
from tests.cli import commands_under, run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain, add_gamma_patch, git, make_chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# "15:20:03 ▶ beta: configure": a step starts (plain output carries the time)
STEP_LINE = re.compile(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$", re.M)
STEPS = ["fetch", "patch", "configure", "compile", "install"]
STEP_KEYS = {"step", "state", "why", "seconds", "peak_rss", "jobs", "oom_retries", "log"}


@pytest.fixture
def chain(tmp_path: Path) -> Chain:
    for tool in ("git", "cmake", "ninja"):
        require_tool(tool)
    return make_chain(tmp_path)


def recipe(name: str, depends: list[str], args: list[str], ref: str = "v1") -> str:
    return (f"depends = {json.dumps(depends)}\n[source]\n"
            f'git = "https://example.invalid/{name}.git"\nref = "{ref}"\n'
            f"[cmake]\nargs = {json.dumps(args)}\n")


def build(chain: Chain, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    # --no-verify: the chain has no GPU code for verify to find
    rc = main(["build", *chain.flags(), "--quiet", "--no-verify", *args])
    return rc, capsys.readouterr().out


def failing_build(chain: Chain, *args: str) -> tuple[int, str]:
    """A build that fails, run as the user does: a child process (tests/cli.py run_cli, which
    asserts that no traceback reached the user); (exit code, stdout)."""
    result = run_cli("build", *chain.flags(), "--quiet", "--no-verify", *args)
    return result.returncode, result.stdout


def status_text(chain: Chain, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with mock.patch.dict(os.environ, {"COLUMNS": "160"}):  # the wide table these tests read
        rc = main(["status", *chain.flags(), *args])
    out = capsys.readouterr().out
    assert rc == (1 if "FAILED" in out else 0), out  # 1 when a step failed, for scripts
    return out


def status_json(chain: Chain, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    rc = main(["status", *chain.flags(), "--json"])
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert rc == (1 if doc["failed"] else 0)
    return doc


def table_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """(component, step) -> the row's cells, from the rendered table (component names appear
    on the first row of each component only)."""
    rows: dict[tuple[str, str], list[str]] = {}
    component = ""
    for line in text.splitlines():
        cells = [c.strip() for c in re.split(r"[│|┃]", line)[1:-1]]
        if len(cells) < 8 or cells[1] not in STEPS:
            continue
        component = cells[0] or component
        rows[(component, cells[1])] = cells[2:]  # state, time, jobs, peak, retries, why
    return rows


def steps_by_name(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["name"], s["step"]): s for c in doc["components"] for s in c["steps"]}


def break_beta(chain: Chain) -> None:
    chain.write_recipe("beta", recipe("beta", ["alpha"], ["-DBETA_FAIL=ON"]))


def test_after_a_failed_build_status_shows_the_failure_and_what_waits(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    break_beta(chain)
    assert failing_build(chain)[0] == 1
    out = status_text(chain, capsys)
    rows = table_rows(out)
    for step in STEPS:
        state, seconds = rows[("alpha", step)][:2]
        assert state == "done" and re.fullmatch(r"\d+\.\ds", seconds), rows[("alpha", step)]
    assert rows[("alpha", "compile")][2].isdigit()  # the jobs it ran with
    assert rows[("beta", "configure")][0] == "done"
    assert rows[("beta", "compile")][0] == "failed"
    assert rows[("beta", "install")][:1] + rows[("beta", "install")][-1:] == [
        "pending", "after compile"]
    assert rows[("gamma", "patch")][0] == "done"  # every source is fetched first
    assert rows[("gamma", "configure")][0] == "pending"
    assert rows[("gamma", "configure")][-1] == "waits for beta (failed)"

    log = chain.workdir / "logs/beta/compile.log"
    assert "FAILED beta: compile" in out
    assert f"log:   {log}" in out
    # the command the build ran, whole (not narrowed to beta), with its flags
    ran = shlex.join(["rocbuild", "build", *chain.flags(), "--quiet", "--no-verify"])
    assert ran in commands_under(out)
    # no known pattern for this error: the log's last lines are shown instead
    assert "not a known failure" in out
    assert "error: #error beta was configured to fail" in out


def test_json_document_has_a_stable_shape(chain: Chain,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    break_beta(chain)
    assert failing_build(chain)[0] == 1
    doc = status_json(chain, capsys)
    assert set(doc) == {"workdir", "prefix", "components", "verify", "run_failures",
                        "running", "leftovers", "failed", "continue", "uninstalls",
                        "launcher_notes"}
    assert doc["uninstalls"] == [] and doc["launcher_notes"] == {}
    assert doc["run_failures"] == []
    assert doc["workdir"] == str(chain.workdir) and doc["prefix"] == str(chain.prefix)
    assert [c["name"] for c in doc["components"]] == ["alpha", "beta", "gamma"]
    for comp in doc["components"]:
        assert {"name", "steps", "failure"} <= set(comp)
        assert [s["step"] for s in comp["steps"]] == STEPS
        for step in comp["steps"]:
            assert set(step) == STEP_KEYS
    steps = steps_by_name(doc)
    alpha_compile = steps[("alpha", "compile")]
    assert alpha_compile["state"] == "done" and alpha_compile["why"] == ""
    assert alpha_compile["seconds"] >= 0 and alpha_compile["jobs"] >= 1
    assert alpha_compile["oom_retries"] == 0
    assert alpha_compile["log"] == str(chain.workdir / "logs/alpha/compile.log")
    assert steps[("gamma", "configure")]["log"] is None

    beta, gamma = doc["components"][1], doc["components"][2]
    assert beta["state"] == "failed" and gamma["state"] == "pending"
    assert doc["components"][0]["failure"] is None and gamma["failure"] is None
    failure = beta["failure"]
    assert failure["step"] == "compile"
    assert failure["log"] == str(chain.workdir / "logs/beta/compile.log")
    assert failure["continue"] == shlex.join(["rocbuild", "build", *chain.flags(), "--quiet",
                                              "--no-verify"])
    assert failure["diagnosis"] is None
    assert any("beta was configured to fail" in line for line in failure["tail"])


def test_a_recipe_change_marks_what_runs_again_and_says_why(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = build(chain, capsys)
    assert rc == 0, out
    assert "everything is built and current" in status_text(chain, capsys)
    assert all(s["state"] == "done" for s in steps_by_name(status_json(chain, capsys)).values())

    chain.write_recipe("alpha", recipe("alpha", [], ["-DALPHA_FACTOR=2"]))
    out = status_text(chain, capsys)
    rows = table_rows(out)
    assert rows[("alpha", "configure")][0] == "stale"
    assert rows[("alpha", "configure")][-1] == "recipe options changed"
    assert rows[("alpha", "compile")][-1] == "follows configure, which runs again"
    assert rows[("beta", "configure")][-1] == "dependency alpha changed"
    assert rows[("gamma", "configure")][-1] == "dependency beta changed"
    assert rows[("alpha", "fetch")][0] == rows[("alpha", "patch")][0] == "done"
    assert commands_under(out)[-1].startswith("rocbuild build")

    # status predicted exactly the steps the build runs
    stale = {k for k, s in steps_by_name(status_json(chain, capsys)).items()
             if s["state"] != "done"}
    rc = main(["build", *chain.flags(), "--quiet", "--no-verify"])
    ran = {tuple(m) for m in STEP_LINE.findall(capsys.readouterr().out)}
    assert rc == 0 and ran == stale
    assert chain.run_gamma() == "gamma 12"  # 1 * 2 + 10
    assert "everything is built and current" in status_text(chain, capsys)


def predicted_and_run(chain: Chain, capsys: pytest.CaptureFixture[str]
                      ) -> tuple[dict[tuple[str, str], str], set[tuple[str, str]]]:
    """Status's not-done steps with their why, then the steps the next build really runs."""
    doc = status_json(chain, capsys)
    predicted = {k: s["why"] for k, s in steps_by_name(doc).items() if s["state"] != "done"}
    rc, out = build(chain, capsys)
    assert rc == 0, out
    return predicted, {tuple(m) for m in STEP_LINE.findall(out)}


def _rebuilt_from(first: str, why: str) -> dict[tuple[str, str], str]:
    """alpha runs again from ``first`` on (``why`` is that step's reason); beta and gamma
    follow, because a step that runs gives the steps after it a new input."""
    steps = ["fetch", "patch", "configure", "compile", "install"]
    expected = {("alpha", first): why}
    for before, step in itertools.pairwise(steps):
        if steps.index(step) > steps.index(first):
            expected[("alpha", step)] = f"follows {before}, which runs again"
    for user, dep in (("beta", "alpha"), ("gamma", "beta")):
        expected[(user, "configure")] = f"dependency {dep} is rebuilt first"
        expected[(user, "compile")] = "follows configure, which runs again"
        expected[(user, "install")] = "follows compile, which runs again"
    return expected


@pytest.mark.parametrize(("damage", "expected"), [
    # a configure that runs again is followed by compile and install (a stale artifact must
    # never stay installed), and the components built on it follow
    ("build/alpha/CMakeCache.txt", _rebuilt_from(
        "configure", "the build tree was removed or replaced (CMakeCache.txt or build.ninja or "
                      "its build id)")),
    ("prefix/lib/libalpha.so",
     _rebuilt_from("install", "installed files are missing from the prefix")),
    # a new checkout: everything built from it, and everything built on that, runs again
    ("work/src/alpha", _rebuilt_from("fetch", "the checkout changed or was removed")),
])
def test_status_predicts_the_steps_the_next_build_runs(
        chain: Chain, capsys: pytest.CaptureFixture[str], damage: str,
        expected: dict[tuple[str, str], str]) -> None:
    rc, out = build(chain, capsys)
    assert rc == 0, out
    root = {"build": chain.workdir, "prefix": chain.root, "work": chain.root}[
        damage.split("/")[0]]
    target = root / damage
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()
    predicted, ran = predicted_and_run(chain, capsys)
    assert predicted == expected
    assert ran == set(expected)
    assert chain.run_gamma() == "gamma 11"


def test_a_rebuilt_dependency_and_a_new_patch_are_named(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = build(chain, capsys)
    assert rc == 0, out
    chain.write_recipe("beta", recipe("beta", ["alpha"], ["-DBETA_FACTOR=3"]))
    rc, out = build(chain, capsys, "beta")
    assert rc == 0, out  # beta only: gamma is left behind
    patch = add_gamma_patch(chain)
    steps = steps_by_name(status_json(chain, capsys))
    assert steps[("beta", "install")]["state"] == "done"
    assert steps[("gamma", "patch")]["state"] == "stale"
    assert steps[("gamma", "patch")]["why"] == "patches changed: 0001-say-hello.patch (new)"
    assert steps[("gamma", "configure")]["state"] == "stale"
    assert steps[("gamma", "configure")]["why"] == ("dependency beta was rebuilt; follows "
                                                    "patch, which runs again")
    # without the patch, the rebuilt dependency is the reason
    patch.unlink()
    steps = steps_by_name(status_json(chain, capsys))
    assert steps[("gamma", "patch")]["state"] == "done"
    assert steps[("gamma", "configure")]["why"] == "dependency beta was rebuilt"


def test_a_known_cause_is_found_in_real_cmake_output(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    """beta v2 asks for CMake 99: the real error line is matched to "CMake too old"."""
    src = chain.repos / "beta.git.src"
    cmakelists = src / "CMakeLists.txt"
    cmakelists.write_text(cmakelists.read_text().replace("VERSION 3.20", "VERSION 99.0"))
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "needs cmake 99")
    git(src, "tag", "v2")
    git(chain.repos / "beta.git", "fetch", "-q", str(src), "refs/tags/v2:refs/tags/v2")
    chain.write_recipe("beta", recipe("beta", ["alpha"], [], ref="v2"))
    assert failing_build(chain)[0] == 1

    out = status_text(chain, capsys)
    assert table_rows(out)[("beta", "configure")][0] == "failed"
    assert "cause: The project needs a newer CMake than the one on PATH." in out
    assert "cmake>=99.0" in out and "rocbuild build beta" in out
    assert "CMake 99.0 or higher is required" in out  # the line it was seen on
    diagnosis = status_json(chain, capsys)["components"][1]["failure"]["diagnosis"]
    assert diagnosis["id"] == "cmake-too-old"


def test_oom_retries_and_the_job_cap_are_reported(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    """The fields the OOM recovery writes (stamp `oom_retries`, state/caps/<name>.json) show
    up; they are not part of any fingerprint, so the step stays done."""
    rc, out = build(chain, capsys)
    assert rc == 0, out
    state = StateDir.shared(chain.workdir)
    stamp = state.read_stamp("alpha", "compile")
    assert stamp is not None
    write_json_atomic(state.stamp_path("alpha", "compile"),
                      {**stamp, "oom_retries": 2, "peak_rss": 3 * 2**30, "jobs": 2})
    write_json_atomic(chain.workdir / "state/caps/alpha.json",
                      {"jobs": 2, "reason": "killed for lack of memory at 4 jobs"})
    out = status_text(chain, capsys)
    state_, _, jobs, peak, retries, _ = table_rows(out)[("alpha", "compile")]
    assert (state_, jobs, peak, retries) == ("done", "2", "3.00 GiB", "2")
    assert "job cap for alpha: 2 jobs (killed for lack of memory at 4 jobs)" in out
    doc = status_json(chain, capsys)
    assert steps_by_name(doc)[("alpha", "compile")]["oom_retries"] == 2
    assert doc["components"][0]["job_cap"]["jobs"] == 2
    assert doc["components"][1]["job_cap"] is None


def test_status_reads_while_a_build_holds_the_lock(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    break_beta(chain)
    assert failing_build(chain)[0] == 1
    with StateDir.shared(chain.workdir).lock():
        assert "FAILED beta: compile" in status_text(chain, capsys, "beta")


def test_status_of_an_unknown_component_is_bad_input(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_cli("status", *chain.flags(), "delta", expect=2)
    assert "unknown component 'delta'" in result.stderr


def test_logs(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    break_beta(chain)
    assert failing_build(chain)[0] == 1
    logs = chain.workdir / "logs"

    # the last lines: the compiler's error, ninja's, cmake's exit and the step's end line
    assert main(["logs", *chain.flags(), "beta", "--tail", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8
    assert any("error: #error beta was configured to fail" in line for line in lines)
    assert "step ended: failed after" in lines[-1]
    assert lines == (logs / "beta/compile.log").read_text().splitlines()[-8:]

    # default: the failed step, whole
    assert main(["logs", *chain.flags(), "beta"]) == 0
    assert capsys.readouterr().out == (logs / "beta/compile.log").read_text()
    assert main(["logs", *chain.flags(), "beta", "configure"]) == 0
    assert capsys.readouterr().out == (logs / "beta/configure.log").read_text()
    # no failure: the last step that has a log
    assert main(["logs", *chain.flags(), "gamma"]) == 0
    assert capsys.readouterr().out == (logs / "gamma/patch.log").read_text()

    result = run_cli("logs", *chain.flags(), "gamma", "configure", expect=2)  # not there: bad input
    assert "no log for gamma: configure yet" in result.stderr
    result = run_cli("logs", *chain.flags(), "delta", expect=2)
    assert "known: alpha, beta, gamma" in result.stderr
    err = run_cli("logs", *chain.flags(), "beta", "link", expect=2).stderr
    assert "unknown step 'link' for beta" in err
    assert "fetch, patch, configure, compile, install" in err


def test_status_before_any_build_is_one_line_and_names_a_missing_workdir(
        chain: Chain, tmp_path: Path) -> None:
    """Issue 32: before any build, status printed a table of 18 x 4 "pending" rows (108
    lines); a mistyped --workdir read the same, without saying the folder does not exist."""
    fresh = run_cli("status", *chain.flags(), expect=0)
    assert fresh.stdout.split() == (f"nothing built yet in {chain.workdir}: 3 components "
                                    "pending; `rocbuild plan` shows them, `rocbuild build` "
                                    "starts").split(), fresh.explain()
    typo = tmp_path / "no-such-workdir"
    wrong = run_cli("status", "--workdir", str(typo), cwd=tmp_path, expect=0)
    assert f"the workdir {typo} does not exist" in " ".join(wrong.stderr.split()), \
        wrong.explain()
    assert "nothing built yet" in wrong.stdout and "pending  " not in wrong.stdout, \
        wrong.explain()
    assert not typo.exists()  # status creates nothing
