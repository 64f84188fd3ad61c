"""`rocbuild build X` and plain `doit build:X` run one lifecycle (run/engine/lifecycle.py): ready ->
preflight -> tasks -> finish -> verify -> report. Both fail a failing verify, write the same
state files and the same build-info, and accept the same components."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli import child_env, run_cli
from tests.conftest import REPO
from tests.support.chain import FAKE_HOST, Chain, require_gpu_code

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def places(chain: Chain, name: str) -> tuple[Path, Path]:
    """A workdir and a prefix of their own, building from the chain's repos and recipes."""
    return chain.root / f"work-{name}", chain.root / f"prefix-{name}"


def rocbuild(chain: Chain, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    workdir, prefix = places(chain, name)
    result = run_cli("build", "--recipes", str(chain.recipes), "--workdir", str(workdir),
                     "--prefix", str(prefix), "--mirror", chain.mirror, "--quiet", *args)
    return subprocess.CompletedProcess(result.argv, result.returncode, result.stdout,
                                       result.stderr)


def doit(chain: Chain, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    workdir, prefix = places(chain, name)
    env = child_env({"ROCBUILD_RECIPES": str(chain.recipes), "ROCBUILD_WORKDIR": str(workdir),
                     "ROCBUILD_PREFIX": str(prefix), "ROCBUILD_MIRROR": chain.mirror})
    result = subprocess.run([sys.executable, "-m", "doit", *args], env=env, cwd=REPO,
                            capture_output=True, text=True, timeout=300,
                            stdin=subprocess.DEVNULL)
    assert "Traceback (most recent call last)" not in result.stdout + result.stderr, \
        result.stdout + result.stderr
    return result


def state(chain: Chain, name: str) -> dict[str, Any]:
    """The run's records: what the last build was, its verify, the stamps, the failures."""
    workdir, _ = places(chain, name)
    root = workdir / "state"
    last = json.loads((root / "last-build.json").read_text())
    verify_doc = root / "verify.json"
    verify = json.loads(verify_doc.read_text()) if verify_doc.is_file() else None
    if verify is not None:
        verify = {k: v for k, v in verify.items() if k in ("ok", "summary")}
    return {"last-build": sorted(last), "verify": verify,
            "stamps": sorted(str(p.relative_to(root / "stamps"))
                             for p in (root / "stamps").rglob("*.json")),
            "failures": sorted(p.name for p in (root / "failures").glob("*.json"))}


def build_info(chain: Chain, name: str) -> dict[str, Any]:
    """build-info without what differs between two prefixes (paths, times, fingerprints)."""
    _, prefix = places(chain, name)
    info = json.loads((prefix / ".rocbuild/build-info.json").read_text())
    return {"components": {n: {"ref": c["ref"], "commit": c["commit"]}
                           for n, c in info["components"].items()},
            "complete": info["complete"], "verified": info["verified"],
            "targets": info["targets"], "version": info["version"]}


def test_a_failing_verify_fails_both_ways_alike(chain: Chain) -> None:
    # gamma must carry GPU code and the chain installs host code only: verify fails
    require_gpu_code(chain, "gamma")
    cli = rocbuild(chain, "cli", "gamma")
    plain = doit(chain, "doit", "build:gamma")
    assert cli.returncode == 4, cli.stdout + cli.stderr  # the exit-code table: verify failed
    assert plain.returncode == 1, plain.stdout + plain.stderr  # doit's code: a task failed
    for result in (cli, plain):
        assert "verify failed: the stack is built but lacks code for gfx906" in result.stdout
        # the phases in their order: preflight, the steps, finish, verify, the summary
        out = result.stdout
        assert out.index("preflight: ok") < out.index("▶ alpha: fetch") \
            < out.index("environment: source") < out.index("verify failed") \
            < out.index("steps run")
    assert state(chain, "cli") == state(chain, "doit")
    assert state(chain, "cli")["verify"] == {"ok": False, "summary": (
        "lacks code for gfx906 (`rocbuild verify` lists the files); the prefix is not "
        "complete")}
    assert build_info(chain, "cli") == build_info(chain, "doit")
    info = build_info(chain, "doit")
    assert info["complete"] is False and info["verified"] is False
    assert all(c["commit"] for c in info["components"].values()), info
    # `rocbuild status` tells both the same: every step done, the verify failed
    for name in ("cli", "doit"):
        workdir, prefix = places(chain, name)
        status = run_cli("status", "--recipes", str(chain.recipes), "--workdir", str(workdir),
                         "--prefix", str(prefix), "--json")
        assert status.returncode == 1
        assert json.loads(status.stdout)["verify"]["state"] == "failed"
    last = json.loads((places(chain, "doit")[0] / "state/last-build.json").read_text())
    assert last["command"].endswith("doit build:gamma") and "ROCBUILD_WORKDIR=" in last["command"]


def test_a_partial_run_records_what_it_built_both_ways(chain: Chain) -> None:
    # only beta (and alpha, which it needs) is asked for: build-info names those two, each
    # with its commit, not gamma with a null one
    assert rocbuild(chain, "cli", "beta", "--no-verify").returncode == 0
    assert doit(chain, "doit", "build:beta", "verify=no").returncode == 0
    info = build_info(chain, "doit")
    assert sorted(info["components"]) == ["alpha", "beta"], info
    assert all(c["commit"] for c in info["components"].values()), info
    assert build_info(chain, "cli") == info
    assert state(chain, "cli") == state(chain, "doit")


def test_doit_accepts_every_component_rocbuild_build_accepts(chain: Chain) -> None:
    # delta is a recipe outside stack.components: `rocbuild build delta` builds it, and so
    # must `doit build:delta`
    subprocess.run(["git", "clone", "-q", "--bare", str(chain.repos / "alpha.git"),
                    str(chain.repos / "delta.git")], check=True)
    chain.write_recipe("delta", f"""\
        [source]
        git = "{FAKE_HOST}delta.git"
        ref = "v1"
        [cmake]
        """)
    assert rocbuild(chain, "cli", "delta", "--no-verify").returncode == 0
    plain = doit(chain, "doit", "build:delta", "verify=no")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "▶ delta: install" in plain.stdout
    assert build_info(chain, "cli") == build_info(chain, "doit")
    assert "build:delta" in doit(chain, "doit", "list", "--all").stdout
    # and a bare `doit` builds the stack's default set, like a bare `rocbuild build`
    plain = doit(chain, "default", "verify=no")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "▶ delta" not in plain.stdout and "▶ gamma: install" in plain.stdout
    info = build_info(chain, "default")
    assert sorted(info["components"]) == ["alpha", "beta", "gamma"] and info["complete"]


def test_plain_doit_refuses_a_busy_workdir_like_the_cli(chain: Chain) -> None:
    workdir, _ = places(chain, "doit")
    (workdir / "state").mkdir(parents=True)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); "
        "print('locked', flush=True); time.sleep(120)"), str(workdir / "state/lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        plain = doit(chain, "doit", "build:gamma")
        assert plain.returncode != 0
        assert f"another rocbuild run (pid {holder.pid}) is using the workdir" in plain.stderr
        assert "▶" not in plain.stdout
    finally:
        holder.kill()
        holder.wait()
