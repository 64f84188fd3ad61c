"""The build engine end to end: real git, cmake and ninja on a generated three-component chain
(alpha <- beta <- gamma, each finding the previous one with find_package from the prefix)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from rocbuild.cli.main import main
from rocbuild.run.state.state import StateDir
from tests.cli import commands_under, run_cli, unstamped
from tests.conftest import REPO
from tests.support.chain import Chain, git, make_chain
from tests.support.wait import wait_for

# the doit of this interpreter: a venv that is not activated has it in its bin/ only
DOIT = [sys.executable, "-m", "doit"]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def build(chain: Chain, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["build", *chain.flags(), "--quiet", "--no-verify", *args])
    return rc, capsys.readouterr().out


def failing_build(chain: Chain, *args: str) -> tuple[int, str]:
    """A build that fails, run as the user does: a child process (tests/cli.py run_cli, which
    asserts that no traceback reached the user); (exit code, stdout)."""
    result = run_cli("build", *chain.flags(), "--quiet", "--no-verify", *args)
    return result.returncode, result.stdout


def started_steps(out: str) -> list[str]:
    """'alpha:configure' for every '▶ alpha: configure' line."""
    return [f"{m[0]}:{m[1]}" for m in re.findall(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$",
                                                     out, re.M)]


def installed_tree(prefix: Path) -> dict[str, str]:
    """Each installed file: text files with the prefix path taken out, ELF files by kind only
    (CMake rewrites RPATHs in place, so their size follows the build folder's path length;
    that they work is checked by running gamma)."""
    tree = {}
    for path in sorted(prefix.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if data.startswith(b"\x7fELF"):
                tree[str(path.relative_to(prefix))] = "ELF"
            elif path.name == "build-info.json":
                tree[str(path.relative_to(prefix))] = "build-info (times differ)"
            elif path.name == "own-files.json":  # sha256 of the env files, which hold the prefix
                tree[str(path.relative_to(prefix))] = "own-files record"
            elif path.parent.name == "installed":  # the sha256 and sizes of files holding the
                doc = json.loads(data)  # prefix (and ELF files) follow its path: paths only
                tree[str(path.relative_to(prefix))] = json.dumps(
                    [doc["files"], doc["extras"], {k: (e["type"], e.get("mode"))
                                                   for k, e in doc["entries"].items()}])
            else:
                tree[str(path.relative_to(prefix))] = data.replace(
                    str(prefix).encode(), b"<prefix>").decode(errors="replace")
    return tree


def test_full_build_then_noop(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out = build(chain, capsys)
    assert rc == 0, out
    assert chain.run_gamma() == "gamma 11"
    steps = started_steps(out)
    # every source is fetched and patched before the first configure
    first_configure = steps.index("alpha:configure")
    assert {s for s in steps[:first_configure]} == {f"{c}:{s}" for c in ("alpha", "beta", "gamma")
                                                    for s in ("fetch", "patch")}
    assert steps.index("alpha:install") < steps.index("beta:configure")
    for name in ("alpha", "beta", "gamma"):
        for step in ("fetch", "patch", "configure", "compile", "install"):
            assert (chain.workdir / "logs" / name / f"{step}.log").is_file()
            stamp = StateDir.shared(chain.workdir).read_stamp(name, step)
            assert stamp is not None and stamp["fingerprint"]
    fetch_stamp = StateDir.shared(chain.workdir).read_stamp("beta", "fetch")
    assert fetch_stamp is not None
    assert fetch_stamp["commit"] == git(chain.repos / "beta.git", "rev-parse", "v1")
    rc, out = build(chain, capsys)
    assert rc == 0 and started_steps(out) == []
    assert "all 15 steps are current; nothing to do" in out


def test_failure_in_the_middle_is_resumed_without_recompiling_the_first(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    chain.set_args("beta", "-DBETA_FAIL=ON")
    rc, out = failing_build(chain)
    assert rc == 1
    assert "FAILED beta: compile" in out
    log = chain.workdir / "logs/beta/compile.log"
    assert f"log: {log}" in " ".join(unstamped(out).split())
    assert "beta was configured to fail" in log.read_text()
    assert "beta was configured to fail" in out  # the tail of the log is shown
    ran = shlex.join(["rocbuild", "build", *chain.flags(), "--quiet", "--no-verify"])
    assert commands_under(out) == [ran]  # the command that ran, not narrowed to beta
    assert not (chain.prefix / "bin/gamma").exists()
    alpha_lib = chain.workdir / "build/alpha/libalpha.so"
    alpha_mtime = alpha_lib.stat().st_mtime_ns
    failure = json.loads((chain.workdir / "state/failures/beta.json").read_text())
    assert failure["step"] == "compile" and failure["log"] == str(log)

    chain.set_args("beta", "-DBETA_FAIL=OFF")
    rc, out = build(chain, capsys)
    assert rc == 0, out
    steps = started_steps(out)
    assert not [s for s in steps if s.startswith("alpha:")]
    assert steps == ["beta:configure", "beta:compile", "beta:install", "gamma:configure",
                     "gamma:compile", "gamma:install"]
    assert alpha_lib.stat().st_mtime_ns == alpha_mtime
    assert chain.run_gamma() == "gamma 11"
    assert not (chain.workdir / "state/failures/beta.json").exists()


def test_changed_option_rebuilds_only_what_depends_on_it(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert build(chain, capsys)[0] == 0
    chain.set_args("beta", "-DBETA_FACTOR=2")
    rc, out = build(chain, capsys)
    assert rc == 0, out
    assert started_steps(out) == ["beta:configure", "beta:compile", "beta:install",
                                  "gamma:configure", "gamma:compile", "gamma:install"]
    assert chain.run_gamma() == "gamma 21"  # 1 + 10 * 2


def test_patches_apply_once_and_a_broken_one_stops_before_any_build(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    patches = chain.recipes.parent / "patches"
    (patches / "gamma").mkdir(parents=True)
    (patches / "gamma" / "0001-say-hello.patch").write_text(
        "--- a/main.c\n+++ b/main.c\n@@ -1,3 +1,3 @@\n #include <stdio.h>\n"
        ' #include "beta.h"\n-int main(void) { printf("gamma %d\\n", beta_value()); return 0; }\n'
        '+int main(void) { printf("hello %d\\n", beta_value()); return 0; }\n')
    (patches / "beta").mkdir(parents=True)
    broken = patches / "beta" / "0001-broken.patch"
    broken.write_text("--- a/beta.c\n+++ b/beta.c\n@@ -1,1 +1,1 @@\n-no such line\n+x\n")
    rc, out = failing_build(chain)
    assert rc == 1
    assert f"patch {broken} does not apply" in " ".join(out.split())  # wrapped at spaces
    assert not [s for s in started_steps(out) if s.endswith(":configure")]
    assert not (chain.workdir / "build").exists()

    broken.unlink()
    rc, out = build(chain, capsys)
    assert rc == 0, out
    assert chain.run_gamma() == "hello 11"
    rc, out = build(chain, capsys)  # applied once: the rerun touches nothing
    assert rc == 0 and started_steps(out) == []
    assert git(chain.workdir / "src/gamma", "diff", "--stat").count("main.c") == 1


def test_second_build_on_the_same_workdir_is_refused(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    with StateDir.shared(chain.workdir).lock():
        result = run_cli("build", *chain.flags(), "--quiet")
    rc, err = result.returncode, result.stderr
    assert rc == 3  # busy, not bad input
    assert f"another rocbuild run (pid {os.getpid()}) is using the workdir" in err


def test_unknown_ref_fails_with_a_clear_message(chain: Chain,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    chain.write_recipe("alpha", """\
        [source]
        git = "https://example.invalid/alpha.git"
        ref = "v9"
        [cmake]
        """)
    rc, out = failing_build(chain)
    assert rc == 1
    assert "alpha: cannot fetch v9 from" in out
    assert "check that 'v9' exists" in out
    assert not (chain.workdir / "src/alpha").exists()  # nothing half-done left behind


def test_clean_rebuild_uses_the_source_cache(chain: Chain,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert build(chain, capsys)[0] == 0
    for sub in ("src", "build", "state"):
        subprocess.run(["rm", "-rf", str(chain.workdir / sub)], check=True)
    (chain.repos / "alpha.git").rename(chain.repos / "gone.git")  # the "network" is down
    rc, out = build(chain, capsys, "--offline")
    assert rc == 0, out
    assert chain.run_gamma() == "gamma 11"


def cli_env(chain: Chain) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCBUILD_")}
    env.update(PYTHONPATH=str(REPO), ROCBUILD_RECIPES=str(chain.recipes),
               ROCBUILD_WORKDIR=str(chain.workdir), ROCBUILD_PREFIX=str(chain.prefix),
               ROCBUILD_MIRROR=chain.mirror)
    return env


def slow_beta(chain: Chain) -> Path:
    """beta's compile runs a silent 30 s step after its library, like a long link, while the
    returned marker file exists (so the resumed build is quick)."""
    marker = chain.root / "slow-marker"
    marker.touch()
    src = chain.repos / "beta.git.src"
    with (src / "CMakeLists.txt").open("a") as f:
        f.write(f"add_custom_target(slow ALL COMMAND sh -c \"test -f {marker} && sleep 30 || "
                "true\" DEPENDS beta VERBATIM)\n")
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "slow")
    git(src, "tag", "-f", "v1")
    git(chain.repos / "beta.git", "fetch", "-q", "-f", str(src), "refs/tags/v1:refs/tags/v1")
    return marker


def sleepers(marker: Path) -> list[psutil.Process]:
    """The `sleep 30` processes started by this test's slow step (found through the shell
    that names this test's marker, so leftovers of other runs never match)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if (p.info["cmdline"] or [])[-2:] == ["sleep", "30"]:
            try:
                parent = p.parent()
                if parent is not None and str(marker) in " ".join(parent.cmdline()):
                    found.append(p)
            except psutil.Error:
                pass
    return found


def test_sigkill_of_rocbuild_mid_build_resumes_to_the_same_tree(chain: Chain,
                                                                 tmp_path: Path) -> None:
    marker = slow_beta(chain)
    env = cli_env(chain)
    argv = [sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify"]
    runner = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    state = StateDir.shared(chain.workdir)
    wait_for(lambda: bool(sleepers(marker)) or runner.poll() is not None,
             "the slow step started")
    assert runner.poll() is None, "the build ended before the slow step"
    assert state.read_stamp("alpha", "install") is not None
    # only rocbuild, and its watchdog (which would end the step: test_leftover_processes.py),
    # so the next run is the one to find the step's session still running
    for kid in psutil.Process(runner.pid).children():
        if "_watch()" in " ".join(kid.cmdline()):
            kid.kill()
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait()
    assert sleepers(marker), "the silent step outlived rocbuild, as a real link step would"
    marker.unlink()

    result = subprocess.run([*argv, "--jobs", "2"], env=env, cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ended a leftover process of an earlier run" in result.stdout
    steps = started_steps(result.stdout)
    assert not [s for s in steps if s.startswith("alpha:")]
    assert steps[0] == "beta:compile"
    assert chain.run_gamma() == "gamma 11"
    # the compile log says the first attempt was cut off, and where the second began
    log = (chain.workdir / "logs" / "beta" / "compile.log").read_text()
    second = log.index("\n=== attempt 2 · ")
    assert "# attempt 1 has no end line: rocbuild was stopped while it ran" in log[second:]
    assert "\n=== attempt 1 · " in log[:second] and "] exit " not in log[:second]

    # the same tree as a clean, uninterrupted build
    fresh = make_chain(tmp_path / "fresh")
    slow_beta(fresh).unlink()
    result = subprocess.run(argv, env=cli_env(fresh), cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0
    assert installed_tree(chain.prefix) == installed_tree(fresh.prefix)


def test_sigterm_stops_the_build_and_its_children(chain: Chain, tmp_path: Path) -> None:
    marker = slow_beta(chain)
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify"],
                              env=cli_env(chain), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: bool(sleepers(marker)) or runner.poll() is not None,
             "the slow step started")
    assert runner.poll() is None, "the build ended before the slow step"
    runner.send_signal(signal.SIGTERM)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, out
    assert "interrupted" in out
    # piped output carries the time on every line rocbuild writes
    steps = [line for line in out.splitlines() if "▶" in line]
    assert steps and all(re.match(r"\d\d:\d\d:\d\d ▶ ", line) for line in steps), out
    log = (chain.workdir / "logs" / "beta" / "compile.log").read_text()
    attempt = log[log.rindex("\n=== attempt "):]  # not `marker`: the check below needs that
    assert re.match(r"\n=== attempt 1 · \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4} ===\n"
                    r"\$ cmake --build ", attempt), attempt[:300]
    # the variables rocbuild set: the prefix first on PATH; the chain's recipes provide no
    # ROCm variable to their steps (model/provides.py), so none is set
    assert "# env PATH=" in attempt and "# env ROCM_PATH" not in attempt, attempt[:600]
    assert re.search(r"\] attempt 1 interrupted by SIGTERM after [\d.]+s; its process group "
                     r"was ended", attempt), attempt[-500:]
    wait_for(lambda: not sleepers(marker), "the slow step's children are gone")
    assert StateDir.shared(chain.workdir).read_stamp("alpha", "install") is not None
    assert StateDir.shared(chain.workdir).read_stamp("beta", "compile") is None


def test_sighup_stops_the_build_like_sigterm(chain: Chain, tmp_path: Path) -> None:
    """A closed terminal (SIGHUP, the ssh session of an overnight build that dropped) ends
    the run as SIGTERM does: the step's children are ended, exit 130 and the "interrupted"
    line (never a death by the signal, without either)."""
    slow = slow_beta(chain)
    runner = subprocess.Popen([sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify"],
                              env=cli_env(chain), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: bool(sleepers(slow)) or runner.poll() is not None,
             "the slow step started")
    assert runner.poll() is None, "the build ended before the slow step"
    runner.send_signal(signal.SIGHUP)
    out, _ = runner.communicate(timeout=60)
    assert runner.returncode == 130, out
    assert "interrupted" in out, out
    wait_for(lambda: not sleepers(slow), "the slow step's children are gone")
    assert StateDir.shared(chain.workdir).read_stamp("alpha", "install") is not None
    assert StateDir.shared(chain.workdir).read_stamp("beta", "compile") is None


def test_doit_from_the_repo_root_runs_the_same_graph(chain: Chain, tmp_path: Path) -> None:
    env = cli_env(chain)
    # verify=no like --no-verify: the chain has no GPU code, and a failed verify fails plain
    # doit too (test_doit_and_the_cli_end_a_failing_verify_alike)
    result = subprocess.run([*DOIT, "build:gamma", "verify=no"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert chain.run_gamma() == "gamma 11"
    # the same two ends as `rocbuild build`: preflight before the first step, and the
    # environment files and build-info after the last one
    assert "preflight: ok" in result.stdout.split("▶", 1)[0], result.stdout
    env_file = re.search(r"environment: source (\S+)", result.stdout.rsplit("▶", 1)[1])
    assert env_file is not None and Path(env_file[1]).is_file(), result.stdout
    info = json.loads((chain.prefix / ".rocbuild/build-info.json").read_text())
    assert sorted(info["components"]) == ["alpha", "beta", "gamma"]
    listing = subprocess.run([*DOIT, "list", "--all"], env=env, cwd=REPO, capture_output=True,
                             text=True).stdout
    assert "build:gamma" in listing and "compile:beta" in listing
    groups = subprocess.run([*DOIT, "list"], env=env, cwd=REPO, capture_output=True,
                            text=True).stdout.splitlines()
    docs = [line.split(None, 1)[1] for line in groups if len(line.split(None, 1)) == 2]
    assert len(docs) >= 8 and len(set(docs)) == len(docs), groups  # each group its own doc
    # the CLI reads the same stamps: nothing left to do
    result = subprocess.run([sys.executable, "-m", "rocbuild", "build", "--quiet", "--no-verify"],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and started_steps(result.stdout) == []
    # and doit sees a changed option through the same fingerprints (a CMake variable: an
    # option no CMake file reads would stop the build before configure, optcheck.py)
    chain.set_args("gamma", "-DCMAKE_C_FLAGS=-DUNUSED_BY_GAMMA=1")
    result = subprocess.run([*DOIT, "build:gamma", "verify=no"], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0
    assert started_steps(result.stdout) == ["gamma:configure", "gamma:compile", "gamma:install"]


def test_options_cmake_never_read_are_reported(chain: Chain,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # ALPHA_FACTOR is in a CMake file of gamma's dependency alpha, so the source check before
    # configure lets it through; gamma's own configure does not use it, and CMake says so
    chain.set_args("gamma", "-DALPHA_FACTOR=2")
    rc, out = build(chain, capsys)
    assert rc == 0
    assert "warning gamma: configure: CMake did not use ALPHA_FACTOR" in out
    stamp = StateDir.shared(chain.workdir).read_stamp("gamma", "configure")
    assert stamp is not None and "ALPHA_FACTOR" in stamp["warnings"][0]


def test_build_info_after_a_partial_run_names_the_whole_stack(
        chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert build(chain, capsys)[0] == 0
    assert build(chain, capsys, "alpha")[0] == 0  # only alpha asked for; all of it is current
    info = json.loads((chain.prefix / ".rocbuild/build-info.json").read_text())
    assert sorted(info["components"]) == ["alpha", "beta", "gamma"] and info["complete"]
    chain.set_args("alpha", "-DALPHA_FACTOR=3")
    assert build(chain, capsys, "alpha")[0] == 0  # beta and gamma are now stale
    info = json.loads((chain.prefix / ".rocbuild/build-info.json").read_text())
    assert info["complete"] is False


def test_plan_shows_each_components_state(chain: Chain,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    def states() -> dict[str, str]:
        assert main(["plan", *chain.flags(), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        return {c["name"]: c["state"] for c in doc["components"]}

    assert states() == {"alpha": "pending", "beta": "pending", "gamma": "pending"}
    chain.set_args("beta", "-DBETA_FAIL=ON")
    assert failing_build(chain)[0] == 1
    assert states() == {"alpha": "done", "beta": "failed", "gamma": "pending"}
