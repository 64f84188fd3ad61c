"""What a workdir remembers between commands: the prefix of its last build, as it
remembers its base. Every rocbuild here runs as a child process (tests/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import commands_under, run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def plain(chain: Chain) -> list[str]:
    """The chain's flags without --prefix."""
    return ["--recipes", str(chain.recipes), "--workdir", str(chain.workdir),
            "--mirror", chain.mirror]


def own_default_prefix(chain: Chain) -> Path:
    """Point the chain stack's own prefix into the test's folder (not /opt) and return it."""
    default = chain.root / "default-prefix"
    stack = chain.recipes / "stack.toml"
    stack.write_text(stack.read_text().replace('"/opt/chain-{{ series }}"', f'"{default}"'))
    return default


def test_a_plain_build_continues_the_prefix_the_last_build_was_given(chain: Chain) -> None:
    default = own_default_prefix(chain)
    mine = chain.root / "opt" / "mystack"
    run_cli("build", *plain(chain), "--prefix", str(mine), "--no-verify", expect=0)
    again = run_cli("build", *plain(chain), "--no-verify", expect=0)
    assert f"rocbuild: note: prefix {mine}: the prefix of the last build in this workdir" \
        in again.stderr, again.explain()
    assert f"into {mine}" in again.output, again.explain()
    assert "▶" not in again.output, again.explain()  # everything is current there
    assert not default.exists(), again.explain()
    # plan and status show the same prefix, and where it came from
    plan = json.loads(run_cli("plan", *plain(chain), "--json", expect=0).stdout)
    assert plan["prefix"] == str(mine)
    assert plan["settings"]["prefix"]["source"].startswith("workdir "), plan["settings"]
    status = json.loads(run_cli("status", *plain(chain), "--json", expect=0).stdout)
    assert status["prefix"] == str(mine)
    assert {c["state"] for c in status["components"]} == {"done"}
    # another --prefix is a second configuration, which the next plain build continues
    other = chain.root / "opt" / "other"
    run_cli("build", *plain(chain), "--prefix", str(other), "--no-verify", "alpha", expect=0)
    third = run_cli("build", *plain(chain), "--no-verify", "alpha", expect=0)
    assert f"into {other}" in third.output, third.explain()


def test_a_build_into_the_stacks_own_prefix_leaves_nothing_to_remember(chain: Chain) -> None:
    default = own_default_prefix(chain)
    run_cli("build", *plain(chain), "--no-verify", "alpha", expect=0)
    again = run_cli("build", *plain(chain), "--no-verify", "alpha", expect=0)
    assert "the prefix of the last build" not in again.stderr, again.explain()
    assert f"into {default}" in again.output, again.explain()


def test_a_passing_verify_of_a_prefix_counts_for_prefixes_activate_and_status(
        chain: Chain) -> None:
    run_cli("build", *chain.flags(), "--no-verify", expect=0)
    listed = json.loads(run_cli("prefixes", *chain.flags(), "--json", expect=0).stdout)
    entry = next(e for e in listed["prefixes"] if e["prefix"] == str(chain.prefix))
    assert entry["unproven"] and entry["verify"]["result"] == "skipped", entry
    text = " ".join(run_cli("prefixes", *chain.flags(), expect=0).stdout.split())
    assert "not verified (skipped with --no-verify)" in text and "did not pass" not in text
    link = chain.root / "rocm-link"
    refused = run_cli("activate", *chain.flags(), str(chain.prefix), "--link", str(link),
                      expect=2)
    assert "not verified (skipped with --no-verify)" in refused.stderr, refused.explain()
    # `rocbuild verify DIR` of the prefix verifies it as a prefix, and the pass is recorded
    verified = run_cli("verify", *chain.flags(), "--no-smoke", str(chain.prefix), expect=0)
    assert "verify: PASS" in verified.stdout, verified.explain()
    assert "verified" in verified.stdout.rsplit("recorded in", 1)[1], verified.explain()
    info = json.loads((chain.prefix / ".rocbuild" / "build-info.json").read_text())
    assert info["verified"] is True and info["verify"]["result"] == "pass"
    assert info["verify"]["targets"] == ["gfx906"]
    status = json.loads(run_cli("status", *chain.flags(), "--json", expect=0).stdout)
    assert status["verify"]["state"] == "done", status["verify"]
    run_cli("activate", *chain.flags(), str(chain.prefix), "--link", str(link), expect=0)
    assert link.resolve() == chain.prefix.resolve()


def test_list_without_prefix_shows_every_prefix_not_only_the_remembered_one(chain: Chain) -> None:
    """`rocbuild list` names only the prefix --prefix gives; a prefix the workdir remembers
    was not given, so list shows every prefix (the week's replay hid ~/opt/second)."""
    own_default_prefix(chain)
    first, second = chain.root / "opt" / "first", chain.root / "opt" / "second"
    for prefix in (second, first):
        run_cli("build", *plain(chain), "--prefix", str(prefix), "--no-verify", "alpha",
                expect=0)
    shown = run_cli("list", *plain(chain), expect=0)
    assert str(first) in shown.stdout and str(second) in shown.stdout, shown.explain()
    doc = json.loads(run_cli("list", *plain(chain), "--json", expect=0).stdout)
    assert {p["prefix"] for p in doc["prefixes"]} == {str(first), str(second)}, doc
    # --prefix still names one
    only = run_cli("list", *plain(chain), "--prefix", str(second), expect=0).stdout
    assert str(second) in only and str(first) not in only, only


def test_commands_that_never_read_the_prefix_setting_print_no_note_about_it(
        chain: Chain) -> None:
    """The remembered-prefix note (three lines at 80 columns) is for commands that act on the
    prefix setting; `activate PREFIX`, `config` (its prefix row says where the value came
    from), `targets` and `lint-recipes` never read it, and printed it anyway in the week."""
    own_default_prefix(chain)
    mine = chain.root / "opt" / "mystack"
    run_cli("build", *plain(chain), "--prefix", str(mine), "--no-verify", expect=0)
    note = "the prefix of the last build in this workdir"
    for command in (["activate", "--unproven", str(mine), "--link", str(chain.root / "rocm")],
                    ["config"], ["targets"], ["lint-recipes"]):
        done = run_cli(*command, *plain(chain), expect=0)
        assert note not in done.stderr, (command, done.explain())
    shown = run_cli("config", *plain(chain), expect=0).stdout
    assert str(mine) in shown, shown  # the value is still in force, and shown
    status = run_cli("status", *plain(chain), expect=0)
    assert note in status.stderr, status.explain()  # a command that reads it still says so


def other_stack(chain: Chain, name: str) -> Path:
    """A second stack (another name, the same components) in its own recipes folder."""
    import shutil

    folder = chain.root / f"{name}-recipes"
    shutil.copytree(chain.recipes, folder)
    stack = folder / "stack.toml"
    stack.write_text(stack.read_text().replace('name = "chain"', f'name = "{name}"'))
    return folder


def test_a_shared_workdir_keeps_each_stacks_memory_apart(chain: Chain) -> None:
    """The default workdir is shared by every stack: the notes about "the last build in this
    workdir" mixed them (a tutorial's build, then another stack's plan read "a configuration
    change, everything built on it is built again"; its remembered base was lost)."""
    from tests.e2e.test_base import chain_with_base_tables

    chain_with_base_tables(chain)
    base_prefix = chain.root / "A"  # a base made by rocbuild: alpha and beta
    run_cli("build", *plain(chain), "--prefix", str(base_prefix), "--workdir",
            str(chain.root / "work-a"), "alpha", "beta", "--quiet", "--no-verify", expect=0)
    top = chain.root / "top"
    run_cli("build", *plain(chain), "--prefix", str(top), "--base", str(base_prefix),
            "--quiet", "--no-verify", expect=0)
    # a tutorial of another name builds in the same workdir, from source, into its prefix
    tutorial = other_stack(chain, "tutorial")
    mine = chain.root / "opt" / "tutorial"
    run_cli("build", "--recipes", str(tutorial), "--workdir", str(chain.workdir),
            "--mirror", chain.mirror, "--prefix", str(mine), "--quiet", "--no-verify",
            expect=0)
    # the chain's plan: its own base and prefix, nothing about the tutorial's build
    again = run_cli("plan", *plain(chain), "--json", expect=0)
    doc = json.loads(again.stdout)
    assert doc["settings"]["base"]["value"] == str(base_prefix), again.explain()
    assert doc["prefix"] == str(top) and doc["base_change"] is None
    assert [c["state"] for c in doc["components"]] == ["done"], doc["components"]
    assert "a configuration change" not in again.stderr, again.explain()
    given = run_cli("plan", *plain(chain), "--base", str(base_prefix), expect=0)
    assert "a configuration change" not in given.stderr, given.explain()
    assert "base changed" not in given.stdout
    # the tutorial's status: its own prefix, never the chain's
    status = run_cli("status", "--recipes", str(tutorial), "--workdir", str(chain.workdir),
                     expect=0)
    assert str(top) not in status.output and str(base_prefix) not in status.output, \
        status.explain()
    assert "everything is built" in status.stdout, status.explain()


def test_an_earlier_rocbuilds_records_are_adopted(chain: Chain) -> None:
    """Records written before they named their stack count for the stack at hand, so a user's
    existing workdir keeps its base and prefix and nothing is built again."""
    from tests.e2e.test_base import chain_with_base_tables

    chain_with_base_tables(chain)
    base_prefix = chain.root / "A"
    run_cli("build", *plain(chain), "--prefix", str(base_prefix), "--workdir",
            str(chain.root / "work-a"), "alpha", "beta", "--quiet", "--no-verify", expect=0)
    top = chain.root / "top"
    run_cli("build", *plain(chain), "--prefix", str(top), "--base", str(base_prefix),
            "--quiet", "--no-verify", expect=0)
    memo = chain.workdir / "state" / "base.json"
    old = json.loads(memo.read_text())
    memo.write_text(json.dumps({k: old[k] for k in ("base", "version", "when")}))
    configs = chain.workdir / "state" / "configs.json"
    doc = json.loads(configs.read_text())
    for entry in doc["configurations"].values():
        entry.pop("stack", None)
    configs.write_text(json.dumps(doc))
    again = run_cli("build", *plain(chain), "--no-verify", expect=0)
    assert "steps are current; nothing to do" in again.stdout, again.explain()
    assert f"into {top}" in again.output and "base" in again.stderr, again.explain()


def test_status_names_the_recipes_a_workdir_was_built_with(chain: Chain) -> None:
    """`status` without the --recipes a workdir was built with said "nothing built yet"."""
    run_cli("build", *chain.flags(), "--no-verify", "--quiet", expect=0)
    shown = run_cli("status", "--workdir", str(chain.workdir), env={"COLUMNS": "80"},
                    expect=0).stdout
    flat = " ".join(shown.split())
    assert "nothing built yet" in flat, shown
    assert "this workdir holds builds of another stack than rocm" in flat, shown
    # the command to paste whole on the line under its stack's name, nothing else on it
    command = (f"rocbuild status --recipes {chain.recipes} --prefix {chain.prefix} "
               f"--workdir {chain.workdir}")
    assert commands_under(shown, "chain:") == [command], shown
    follow = run_cli(*command.split()[1:], expect=0).stdout
    assert "everything is built" in follow, follow
