"""What a run leaves behind (issue 32): `clean --all` cleans every configuration's build trees,
and a command that did nothing leaves no empty prefix. Every rocbuild here runs as a child
process (tests/cli.py)."""

from __future__ import annotations

import pytest

from tests.cli import run_cli
from tests.support.chain import Chain

pytestmark = pytest.mark.e2e


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
