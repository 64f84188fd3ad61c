"""What a run leaves behind: `clean --all` cleans every configuration's build trees,
and a command that did nothing leaves no empty prefix. Every rocbuild here runs as a child
process (tests/cli.py)."""

from __future__ import annotations

import json

import pytest

from tests.cli import commands_under, run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_clean_all_cleans_every_configurations_build_trees(chain: Chain) -> None:
    other = chain.root / "other-prefix"
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    run_cli("build", *chain.flags(), "--prefix", str(other), "--no-verify", "alpha", expect=0)
    second = next((chain.workdir / "configs").iterdir()) / "build"
    assert (second / "alpha").is_dir()
    dry = run_cli("clean", "--all", "--dry-run", *chain.flags(), expect=0).stdout
    flat = " ".join(dry.split())
    assert f"{second} (the configuration of {other})" in flat, dry
    assert f"{chain.workdir / 'build'} (the configuration of {chain.prefix})" in flat, dry
    done = run_cli("clean", "--all", *chain.flags(), expect=0).stdout
    assert "freed" in done
    assert not second.exists() and not (chain.workdir / "build").exists(), done
    # and the other configuration's next build configures again, as a clean tree does
    again = run_cli("build", *chain.flags(), "--prefix", str(other), "--no-verify", "alpha",
                    expect=0)
    assert "▶ alpha: configure" in again.stdout, again.explain()


def test_a_refused_build_leaves_no_empty_prefix(chain: Chain) -> None:
    flags = chain.flags()
    del flags[flags.index("--mirror"):flags.index("--mirror") + 2]  # --offline cannot fetch
    prefix = chain.root / "new" / "prefix"
    flags[flags.index("--prefix") + 1] = str(prefix)
    run_cli("build", *flags, "--no-verify", "--offline", expect=2)
    assert not prefix.exists() and not prefix.parent.exists()


def test_cache_push_with_nothing_built_leaves_no_empty_prefix(chain: Chain) -> None:
    pushed = run_cli("cache", "push", "--to", str(chain.root / "store"), *chain.flags())
    assert "not built" in pushed.output, pushed.explain()
    assert not chain.prefix.exists(), pushed.explain()


def drop_from_stack(chain: Chain, name: str) -> None:
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace(f', "{name}"', ""))


def test_a_component_dropped_from_the_stack_is_uninstalled_by_the_next_build(
        chain: Chain) -> None:
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    assert (chain.prefix / "bin" / "gamma").is_file()
    drop_from_stack(chain, "gamma")
    again = run_cli("build", *chain.flags(), "--no-verify", expect=0)
    assert "uninstalled gamma: no longer in the stack (1 file," in again.stdout, again.explain()
    assert not (chain.prefix / "bin").exists()  # bin/ held only gamma
    assert (chain.prefix / "lib" / "libbeta.so").exists()
    assert not (chain.prefix / ".rocbuild" / "installed" / "gamma.json").exists()
    status = run_cli("status", *chain.flags(), expect=0).stdout
    assert "gamma" not in status, status


def test_status_and_plan_say_the_next_build_uninstalls_a_dropped_component(
        chain: Chain) -> None:
    """They said "everything is built and current and verified"; the build then said
    "uninstalled gamma"."""
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    drop_from_stack(chain, "gamma")
    status = run_cli("status", *chain.flags(), env={"COLUMNS": "200"}, expect=0).stdout
    assert "uninstalls gamma: no longer in the stack" in status, status
    assert "everything is built" not in status, status
    assert commands_under(status)[0].startswith("rocbuild build "), status
    doc = json.loads(run_cli("status", *chain.flags(), "--json", expect=0).stdout)
    assert doc["uninstalls"] == ["gamma"] and doc["continue"], doc
    plan = run_cli("plan", *chain.flags(), env={"COLUMNS": "200"}, expect=0).stdout
    assert "uninstalls gamma: no longer in the stack" in plan, plan
    assert json.loads(run_cli("plan", *chain.flags(), "--json", expect=0).stdout
                      )["uninstalls"] == ["gamma"]
    # a build of one component keeps what the stack has: gamma still goes, alpha never
    status = run_cli("status", *chain.flags(), "alpha", env={"COLUMNS": "200"}, expect=0)
    assert "uninstalls gamma" in status.stdout and "alpha" not in status.stdout.split(
        "uninstalls")[1], status.stdout
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    status = run_cli("status", *chain.flags(), expect=0).stdout
    assert "uninstalls" not in status and "everything is built" in status, status


def test_uninstall_refuses_a_component_others_need_and_removes_its_files(
        chain: Chain) -> None:
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    refused = run_cli("uninstall", "alpha", *chain.flags(), expect=2)
    assert "beta needs alpha; gamma needs alpha" in refused.stderr, refused.explain()
    assert (chain.prefix / "lib" / "libalpha.so").exists()
    done = run_cli("uninstall", "gamma", *chain.flags(), expect=0)
    assert "uninstalled gamma from" in done.stdout and "1 file," in done.stdout, done.explain()
    assert not (chain.prefix / "bin" / "gamma").exists()
    assert "in the stack: the next `rocbuild build` installs it again" in " ".join(
        done.stdout.split())
    status = {c["name"]: c["state"] for c in json.loads(
        run_cli("status", *chain.flags(), "--json").stdout)["components"]}
    assert status["gamma"] != "done" and status["beta"] == "done", status
    info = json.loads((chain.prefix / ".rocbuild" / "build-info.json").read_text())
    assert info["complete"] is False and "gamma" not in info["components"]
    forced = run_cli("uninstall", "alpha", "--force", *chain.flags(), expect=0)
    assert "uninstalled alpha" in forced.stdout
    assert not (chain.prefix / "lib" / "libalpha.so").exists()
    assert (chain.prefix / "lib" / "libbeta.so").exists()
    unknown = run_cli("uninstall", "alpha", *chain.flags(), expect=2)
    assert "alpha is not installed in" in unknown.stderr
    rebuilt = run_cli("build", *chain.flags(), "--no-verify", expect=0)
    assert chain.run_gamma() == "gamma 11", rebuilt.explain()


def listed(chain: Chain) -> list[str]:
    doc = json.loads(run_cli("prefixes", *chain.flags(), "--json", expect=0).stdout)
    return [entry["prefix"] for entry in doc["prefixes"]]


def test_prefixes_forget_and_remove(chain: Chain) -> None:
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    assert str(chain.prefix) in listed(chain)
    # never a folder rocbuild did not build, nor one with someone else's files in it
    mine = chain.root / "mine"
    (mine / "bin").mkdir(parents=True)
    refused = run_cli("prefixes", "--remove", str(mine), *chain.flags(), expect=2)
    assert "is not a prefix rocbuild built" in refused.stderr and mine.is_dir()
    notes = chain.prefix / "share" / "my-notes.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text("mine")
    refused = run_cli("prefixes", "--remove", str(chain.prefix), *chain.flags(), expect=2)
    assert "holds files no component installed (share/my-notes.txt)" in refused.stderr
    notes.unlink()
    # nor one a link points at
    link = chain.root / "rocm-link"
    run_cli("activate", *chain.flags(), "--unproven", "--link", str(link), str(chain.prefix),
            expect=0)
    refused = run_cli("prefixes", "--remove", str(chain.prefix), "--link", str(link),
                      *chain.flags(), expect=2)
    assert f"{link} points at {chain.prefix}" in refused.stderr, refused.explain()
    link.unlink()
    done = run_cli("prefixes", "--remove", str(chain.prefix), *chain.flags(), expect=0)
    assert f"removed {chain.prefix}" in " ".join(done.stdout.split()), done.explain()
    assert not chain.prefix.exists() and str(chain.prefix) not in listed(chain)
    configs = json.loads((chain.workdir / "state" / "configs.json").read_text())
    assert str(chain.prefix) not in configs["configurations"]
    # --forget takes a prefix off the list and leaves its files
    run_cli("build", *chain.flags(), "--no-verify", "alpha", expect=0)
    run_cli("prefixes", "--forget", str(chain.prefix), *chain.flags(), expect=0)
    registry = json.loads((chain.root / "home" / ".local" / "state" / "rocbuild"
                           / "prefixes.json").read_text())
    assert str(chain.prefix) not in registry["prefixes"]
    assert (chain.prefix / "lib" / "libalpha.so").exists()
