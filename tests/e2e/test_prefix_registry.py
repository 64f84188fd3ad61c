"""`rocbuild prefixes` is a registry: every prefix this user built, wherever
it is, and every prefix activated here, with the active one marked; `clean --prefix-files`
takes a prefix off it. Every rocbuild runs as a child process (tests/cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def flags(chain: Chain, prefix: Path) -> list[str]:
    return ["--recipes", str(chain.recipes), "--workdir", str(chain.workdir),
            "--prefix", str(prefix), "--mirror", chain.mirror]


def listed(chain: Chain, link: Path, env: dict[str, str] | None = None) -> dict[str, dict]:
    # no --prefix: the configured prefix is the recipes' /opt/chain-1.0, which nobody built
    result = run_cli("prefixes", "--recipes", str(chain.recipes), "--json", "--link",
                     str(link), env=env, expect=0)
    return {p["prefix"]: p for p in json.loads(result.stdout)["prefixes"]}


def test_every_prefix_built_or_activated_is_listed_with_the_active_one(chain: Chain,
                                                                      tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for prefix in (first, second):  # --no-verify: complete but unproven, activated as such
        run_cli("build", *flags(chain, prefix), "--quiet", "--no-verify", expect=0)
    link = tmp_path / "rocm"
    prefixes = listed(chain, link)
    assert set(prefixes) >= {str(first), str(second)}, prefixes
    entry = prefixes[str(first)]
    assert entry["series"] == "1.0" and entry["targets"] == ["gfx906"]
    assert entry["complete"] is True and entry["verified"] is False and entry["unproven"]
    assert entry["workdir"] == str(chain.workdir) and entry["active"] is False

    run_cli("activate", "--unproven", str(second), "--link", str(link), expect=0)
    prefixes = listed(chain, link)
    assert prefixes[str(second)]["active"] is True
    assert prefixes[str(second)]["links"] == [str(link)]
    assert prefixes[str(first)]["active"] is False
    text = run_cli("prefixes", "--recipes", str(chain.recipes), "--link", str(link),
                   expect=0).stdout
    assert f"* {second}" in text and f"  {first}" in text
    assert f"{link} points here (activated with --unproven)" in " ".join(text.split())
    assert prefixes[str(second)]["activated_unproven"] is True
    # a link activate switched is found again without --link
    other_link = tmp_path / "elsewhere" / "rocm"
    assert listed(chain, other_link)[str(second)]["links"] == [str(link)]

    # a prefix another user built (another registry) and activated here is listed too
    foreign = tmp_path / "foreign"
    stranger = {"XDG_STATE_HOME": str(tmp_path / "stranger-state")}
    run_cli("build", *flags(chain, foreign), "--workdir", str(tmp_path / "work-foreign"),
            "--quiet", env=stranger, expect=0)  # verified: no component must carry GPU code
    assert str(foreign) not in listed(chain, link)
    run_cli("activate", str(foreign), "--link", str(link), expect=0)
    prefixes = listed(chain, link)
    assert prefixes[str(foreign)]["active"] is True and prefixes[str(second)]["active"] is False

    # clean --prefix-files takes rocbuild's files, and the prefix, off the list
    run_cli("clean", *flags(chain, first), "--all", "--no-builds", "--prefix-files", expect=0)
    assert str(first) not in listed(chain, link)


def test_the_link_of_activate_is_the_active_one_everywhere(chain: Chain, tmp_path: Path) -> None:
    """After `activate P --link L`, plain `prefixes` marks P (it said "none is active:
    /opt/rocm does not exist"), `prefixes --remove P` names the command with its --link (the
    TIP's `rocbuild activate OTHER_PREFIX` would have made /opt/rocm), `uninstall` from P
    warns, and `list` says "unproven" as `prefixes` and `status` do."""
    prefix = tmp_path / "lab-prefix"
    run_cli("build", *flags(chain, prefix), "--quiet", "--no-verify", expect=0)
    link = tmp_path / "opt" / "lab"
    run_cli("activate", "--unproven", str(prefix), "--link", str(link), expect=0)

    shown = run_cli("prefixes", "--recipes", str(chain.recipes), env={"COLUMNS": "200"},
                    expect=0).stdout
    assert f"rocbuild prefixes ({link} points at the one marked *):" in shown, shown
    assert f"* {prefix}" in shown and "none is active" not in shown
    doc = json.loads(run_cli("prefixes", "--recipes", str(chain.recipes), "--json",
                             expect=0).stdout)
    assert doc["active_links"] == [str(link)]
    assert [p["active"] for p in doc["prefixes"] if p["prefix"] == str(prefix)] == [True]

    removed = run_cli("prefixes", "--remove", str(prefix), env={"COLUMNS": "200"}, expect=2)
    assert f"TIP: point it elsewhere first: `rocbuild activate OTHER_PREFIX --link {link}`" \
        in removed.stderr, removed.explain()
    # on an 80-column terminal the command stays whole on one line (it broke before --link's
    # folder, so a copy of the line ran `rocbuild activate OTHER_PREFIX --link` alone)
    from tests.e2e.test_output_width import in_a_pty
    shown = in_a_pty(["prefixes", "--remove", str(prefix)], 80, tmp_path)
    command = f"`rocbuild activate OTHER_PREFIX --link {link}`"
    assert any(command in line for line in shown.splitlines()), shown

    listed_text = run_cli("list", "--prefix", str(prefix), env={"COLUMNS": "200"},
                          expect=0).stdout
    assert "complete, unproven;" in listed_text and "not verified" not in listed_text, \
        listed_text

    gone = run_cli("uninstall", *flags(chain, prefix), "gamma", env={"COLUMNS": "200"},
                   expect=0).stdout
    assert (f"warning: {link} points at this prefix (it is activated): what uses it through "
            "the link no longer finds gamma") in " ".join(gone.split()), gone
