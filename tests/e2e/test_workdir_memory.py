"""What a workdir remembers between commands (issue 32): the prefix of its last build, as it
remembers its base. Every rocbuild here runs as a child process (tests/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = pytest.mark.e2e


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
