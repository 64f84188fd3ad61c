"""Plan, the run's estimate and `build --json` know the binary cache.

With every component served from a cache, plan said "pending" with the recipes' build time,
"cost of the 3 pending components" with CPU-hours and workdir disk, the build's estimate gave
minutes of compiling, and `build --json` called the steps it never ran "current". Now plan
says "from cache" with the download, the cost is a download and no build, the estimate has
no build time, and the JSON says "served from cache".
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RESOURCES = "[resources]\ncpu_hours = 0.1\ndisk = \"1GiB\"\nsource_disk = \"100MiB\"\n"


def test_a_fully_cached_stack_costs_a_download(chain: Chain, tmp_path: Path) -> None:
    for name in ("alpha", "beta", "gamma"):
        with (chain.recipes / f"{name}.toml").open("a") as f:
            f.write(RESOURCES)
    cache = tmp_path / "cache"
    cache.mkdir()
    run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=0)
    run_cli("cache", "push", *chain.flags(), "--to", str(cache), expect=0)
    # a second machine: its own workdir, the same prefix path (the chain's RUNPATH is
    # absolute), which holds nothing yet (this one's prefix is refused to a second workdir);
    # unsigned artifacts allowed explicitly (signatures are test_cache.py's)
    shutil.rmtree(chain.prefix)
    second = ["--recipes", str(chain.recipes), "--workdir", str(tmp_path / "work-b"),
              "--prefix", str(chain.prefix), "--mirror", chain.mirror, "--cache", str(cache),
              "--allow-unsigned"]

    plan = run_cli("plan", *second, env={"COLUMNS": "120"}, expect=0)
    rows = {line.split()[0]: line for line in plan.stdout.splitlines()
            if line.split()[:1] in (["alpha"], ["beta"], ["gamma"]) and " v1 " in line}
    assert len(rows) == 3, plan.explain()
    for row in rows.values():
        assert "from cache" in row and "pending" not in row and "KiB" in row, plan.explain()
        assert "m00s" not in row and "1.0 GiB" not in row
    assert "from the binary cache: 3 components" in plan.stdout, plan.explain()
    assert "  CPU: " not in plan.stdout and "  wall: " not in plan.stdout
    assert "in the workdir" not in plan.stdout
    assert "pending component" not in plan.stdout and "about " not in plan.stdout

    doc = json.loads(run_cli("plan", *second, "--json", expect=0).stdout)
    assert doc["cost"]["pending"] == [] and doc["cost"]["cpu_hours"] == 0
    assert doc["cost"]["from_cache"] == ["alpha", "beta", "gamma"]
    assert doc["cost"]["download"] == sum(c["download"] for c in doc["components"]) > 0
    assert {c["state"] for c in doc["components"]} == {"from cache"}

    built = run_cli("build", *second, "--no-verify", "--json", expect=0)
    assert "expected:" not in built.stderr, built.explain()  # no build time to expect
    steps = json.loads(built.stdout)["steps"]
    results = {(s["component"], s["step"]): s["result"] for s in steps}
    assert {results[(n, "cache")] for n in ("alpha", "beta", "gamma")} == {"done"}
    others = {r for (n, step), r in results.items() if step != "cache"}
    assert others == {"served from cache"}, results
    assert all(s["log"] is None for s in steps if s["result"] == "served from cache")

    # the next run has nothing to do: its steps are current now, not served again
    again = json.loads(run_cli("build", *second, "--no-verify", "--json", expect=0).stdout)
    assert {s["result"] for s in again["steps"]} == {"current"}
    assert "nothing is pending" in run_cli("plan", *second, expect=0).stdout
