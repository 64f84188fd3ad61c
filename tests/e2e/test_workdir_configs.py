"""One workdir, several configurations: the chain built into two prefixes
from one workdir keeps both current, shares the checkouts, a second workdir may not mix its
build into a prefix another workdir filled, and a workdir of the layout before the
registry keeps its build. Every rocbuild here runs as a child process (tests/cli.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

STEP_LINE = re.compile(r"^(?:[\d:]+ )?▶ (\S+): (\w+)$", re.M)


def flags(chain: Chain, *, prefix: Path | None = None, workdir: Path | None = None
          ) -> list[str]:
    return ["--recipes", str(chain.recipes), "--workdir", str(workdir or chain.workdir),
            "--prefix", str(prefix or chain.prefix), "--mirror", chain.mirror]


def build(chain: Chain, *extra: str, expect: int = 0, **where: Path) -> str:
    # --no-verify: the chain has no GPU code for verify to find
    return run_cli("build", *flags(chain, **where), "--no-verify", *extra,
                   expect=expect).output


def ran(output: str) -> list[tuple[str, str]]:
    return STEP_LINE.findall(output)


def status(chain: Chain, expect: int = 0, **where: Path) -> dict:
    result = run_cli("status", *flags(chain, **where), "--json", expect=expect)
    return json.loads(result.stdout)


def states(doc: dict) -> dict[str, str]:
    return {c["name"]: c["state"] for c in doc["components"]}


def test_two_prefixes_built_from_one_workdir_are_both_current(chain: Chain) -> None:
    other = chain.root / "other-prefix"
    build(chain)
    second = build(chain, prefix=other)
    # the checkouts are shared: the second configuration fetches and patches nothing
    assert [s for s in ran(second) if s[1] in ("fetch", "patch")] == [], second
    assert ("gamma", "install") in ran(second)
    for prefix in (chain.prefix, other):
        doc = status(chain, prefix=prefix)
        assert states(doc) == {"alpha": "done", "beta": "done", "gamma": "done"}, doc
        assert subprocess.run([str(prefix / "bin" / "gamma")], capture_output=True, text=True,
                              check=True).stdout.strip() == "gamma 11"
    # and building either again runs nothing
    for prefix in (chain.prefix, other):
        again = build(chain, prefix=prefix)
        assert ran(again) == [], again
    # each prefix knows which workdir and configuration filled it
    first = json.loads((chain.prefix / ".rocbuild" / "build-info.json").read_text())
    second_info = json.loads((other / ".rocbuild" / "build-info.json").read_text())
    assert first["workdir"] == str(chain.workdir) == second_info["workdir"]
    assert first["configuration"] == "."
    assert second_info["configuration"].startswith("configs/")
    assert (chain.workdir / second_info["configuration"] / "build" / "gamma").is_dir()


def test_a_second_workdir_may_not_mix_its_build_into_a_filled_prefix(chain: Chain) -> None:
    build(chain)
    elsewhere = chain.root / "work2"
    refused = build(chain, "alpha", workdir=elsewhere, expect=2)
    assert f"{chain.prefix} was filled from the workdir {chain.workdir}" in refused
    assert f"--workdir {chain.workdir}" in refused
    assert f"rocbuild clean --all --no-builds --prefix-files --workdir {chain.workdir} " \
        f"--prefix {chain.prefix}" in " ".join(refused.split())
    info = json.loads((chain.prefix / ".rocbuild" / "build-info.json").read_text())
    assert info["complete"] is True  # untouched: activate still takes it
    assert states(status(chain)) == {"alpha": "done", "beta": "done", "gamma": "done"}
    # handing it over: the first workdir lets it go, then the second one builds into it
    run_cli("clean", *flags(chain), "--all", "--no-builds", "--prefix-files", expect=0)
    again = build(chain, workdir=elsewhere)
    assert ("gamma", "install") in ran(again)
    info = json.loads((chain.prefix / ".rocbuild" / "build-info.json").read_text())
    assert info["workdir"] == str(elsewhere) and info["complete"] is True


def test_a_workdir_of_the_layout_before_configurations_keeps_its_build(chain: Chain) -> None:
    """Before the registry a workdir held one configuration in build/ and state/stamps: the
    first configuration still lives there, so an upgrade's morning rerun rebuilds nothing."""
    build(chain)
    # what an earlier rocbuild left: no record of configurations, no owner in the prefix
    (chain.workdir / "state" / "configs.json").unlink()
    info_path = chain.prefix / ".rocbuild" / "build-info.json"
    info = json.loads(info_path.read_text())
    del info["workdir"], info["configuration"]
    info_path.write_text(json.dumps(info))
    assert not (chain.workdir / "configs").exists()
    assert states(status(chain)) == {"alpha": "done", "beta": "done", "gamma": "done"}
    again = build(chain)
    assert ran(again) == [], again
    registry = json.loads((chain.workdir / "state" / "configs.json").read_text())
    assert registry["configurations"][str(chain.prefix)]["dir"] == "."
    # a second prefix after the upgrade gets a folder of its own; the first stays current
    other = chain.root / "other-prefix"
    build(chain, prefix=other)
    assert states(status(chain)) == {"alpha": "done", "beta": "done", "gamma": "done"}
    shutil.rmtree(chain.workdir / "configs")  # the second one's trees and stamps are gone
    assert set(states(status(chain, prefix=other)).values()) == {"pending"}

