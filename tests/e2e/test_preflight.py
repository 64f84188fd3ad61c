"""Each preflight refusal happens before any build step runs (nothing fetched or built)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocbuild.checks import privilege
from rocbuild.cli.main import main
from tests.cli import REPO, run_cli
from tests.conftest import require_tool
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def refused(chain: Chain, capsys: pytest.CaptureFixture[str], *args: str,
            prefix: Path | None = None) -> str:
    flags = chain.flags()
    if prefix is not None:
        flags[flags.index("--prefix") + 1] = str(prefix)
    # a child process, as the user runs it: exit 2 and no traceback (tests/cli.py)
    result = run_cli("build", *flags, "--quiet", "--no-verify", *args, expect=2)
    assert "▶" not in result.stdout  # no step started
    assert not (chain.workdir / "logs").exists() and not (chain.workdir / "src").exists()
    return result.stderr


def test_prefix_that_cannot_be_created(chain: Chain, capsys: pytest.CaptureFixture[str],
                                       tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = refused(chain, capsys, prefix=blocker / "rocm")
    assert f"the prefix {blocker / 'rocm'} cannot be created: {blocker} is not a folder" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_prefix_not_writable_prints_the_sudo_command(chain: Chain,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(chain, capsys, prefix=Path("/opt/rocbuild-test-prefix"))
    assert "sudo mkdir -p /opt/rocbuild-test-prefix && sudo chown" in err


def test_not_enough_disk(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = (chain.recipes / "beta.toml").read_text()
    (chain.recipes / "beta.toml").write_text(recipe + '[resources]\ndisk = "900TiB"\n')
    err = refused(chain, capsys)
    assert "the pending components need about" in err and "nothing was built" in err


def test_missing_tool(chain: Chain, capsys: pytest.CaptureFixture[str], tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "cmake"):  # no ninja
        (bin_dir / tool).symlink_to(require_tool(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    err = refused(chain, capsys)
    # the same finding, word for word, as `doctor`'s toolchain check (hostreqs.py)
    assert "missing: ninja (not installed, or not on PATH)" in err
    assert privilege.apt_install("ninja-build") in err


def test_offline_without_cached_sources(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    # the recipes' own URLs (no --mirror): a remote host, which --offline may not reach
    flags = chain.flags()
    del flags[flags.index("--mirror"):flags.index("--mirror") + 2]
    result = run_cli("build", *flags, "--quiet", "--no-verify", "--offline", expect=2)
    assert "▶" not in result.stdout and not (chain.workdir / "src").exists()
    assert "alpha: v1 of https://example.invalid/alpha.git" in result.stderr
    assert "--offline forbids downloading it" in result.stderr


def test_offline_with_a_local_file_mirror_builds(chain: Chain) -> None:
    """A file:// mirror is on this machine: --offline ("the source cache and mirrors only")
    fetches from it (it is not the network)."""
    result = run_cli("build", *chain.flags(), "--quiet", "--no-verify", "--offline", expect=0)
    assert "▶ alpha: fetch" in result.stdout, result.explain()
    assert chain.run_gamma() == "gamma 11"


def test_stale_patch_of_a_fetched_source(chain: Chain, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["build", *chain.flags(), "--quiet", "--no-verify"]) == 0
    capsys.readouterr()
    patches = chain.recipes.parent / "patches" / "alpha"
    patches.mkdir(parents=True)
    bad = patches / "0001-stale.patch"
    bad.write_text("--- a/alpha.c\n+++ b/alpha.c\n@@ -1,1 +1,1 @@\n-nothing like this\n+x\n")
    captured = run_cli("build", *chain.flags(), "--quiet", "--no-verify", expect=2)
    assert "▶" not in captured.stdout
    assert f"patch {bad} does not apply" in captured.stderr


def test_hipblas_needs_gfortran_and_preflight_says_so(tmp_path: Path) -> None:
    """hipBLAS's project() enables Fortran on Linux: without gfortran the build is
    refused before the first fetch, not at hipBLAS's configure hours later. A dpkg that knows
    every other package, and a PATH with every tool but gfortran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "cmake", "ninja", "g++", "gcc", "cc", "c++", "perl", "python3",
                 "pkg-config", "xxd"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    dpkg = bin_dir / "dpkg-query"
    dpkg.write_text('#!/bin/sh\nshift 2\nfor p in "$@"; do\n'
                    '  if [ "$p" = gfortran ]; then printf "%s\\tun\\n" "$p"; '
                    'else printf "%s\\tii \\n" "$p"; fi\ndone\n')
    dpkg.chmod(0o755)
    result = run_cli("build", "hipblas", "--recipes", str(REPO / "recipes"), "--offline",
                     "--workdir", str(tmp_path / "work"), "--prefix", str(tmp_path / "p"),
                     "--no-verify", env={"PATH": str(bin_dir)}, expect=2)
    assert "not installed: gfortran (hipblas)" in result.stderr, result.explain()
    assert privilege.apt_install("gfortran") in result.stderr
    assert not (tmp_path / "work" / "src").exists()


def _patch(old: str, new: str) -> str:
    return f"--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-{old}\n+{new}\n"


def test_a_patch_series_is_checked_on_top_of_the_patches_before_it(tmp_path: Path) -> None:
    """Each patch is checked against the commit with the patches before it applied (real
    git): a second patch that applies only on top of the first passes, and two patches that
    each apply to the commit alone but not one after the other are refused at the second."""
    from rocbuild.errors import BuildFailed
    from rocbuild.run.sources import patches
    from tests.support.chain import make_repo

    require_tool("git")
    make_repo(tmp_path, "p", {"f.txt": "one\n"})
    repo = tmp_path / "p.git.src"  # the work tree the bare repo was cloned from
    commit = "v1"
    first = tmp_path / "0001-two.patch"
    first.write_text(_patch("one", "two"))
    on_top = tmp_path / "0002-three.patch"
    on_top.write_text(_patch("two", "three"))  # applies only after 0001
    patches.check_series("p", repo, commit, [first, on_top])
    rival = tmp_path / "0002-four.patch"
    rival.write_text(_patch("one", "four"))  # applies to the commit alone, not after 0001
    patches.check_series("p", repo, commit, [rival])
    with pytest.raises(BuildFailed, match=f"patch {rival} does not apply"):
        patches.check_series("p", repo, commit, [first, rival])
