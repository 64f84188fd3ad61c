"""`rocbuild clean` on a real build of the generated chain: what it frees, that the stamps of a
cleaned build tree are no longer current, the run lock, and the prefix left alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rocbuild.model.layout import info_path
from rocbuild.run.sources import sources
from rocbuild.run.state.state import StateDir
from tests.cli import run_flags
from tests.support.chain import Chain

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture
def built(chain: Chain) -> Chain:
    run_flags(chain.flags(), "build", "--quiet", "--no-verify", expect=0)
    return chain


def step_states(chain: Chain) -> dict[tuple[str, str], tuple[str, str]]:
    result = run_flags(chain.flags(), "status", "--json")
    doc = json.loads(result.stdout)
    return {(c["name"], s["step"]): (s["state"], s["why"])
            for c in doc["components"] for s in c["steps"]}


def test_clean_one_build_tree_frees_it_and_its_steps_run_again(built: Chain) -> None:
    beta_build = built.workdir / "build" / "beta"
    assert beta_build.is_dir()
    dry = run_flags(built.flags(), "clean", "beta", "--dry-run", expect=0).stdout
    assert str(beta_build) in dry and "would free" in dry and beta_build.is_dir()
    out = run_flags(built.flags(), "clean", "beta", expect=0).stdout
    freed = re.search(r"freed ([\d.]+) (KiB|MiB|GiB)", out)
    assert freed and float(freed.group(1)) > 0, out
    assert not beta_build.exists()
    assert (built.workdir / "build" / "alpha").is_dir()  # only what was named
    assert (built.workdir / "src" / "beta").is_dir()  # sources only when asked
    states = step_states(built)
    for step in ("configure", "compile", "install"):
        assert states[("beta", step)][0] != "done", (step, states)
    assert "build tree was removed" in states[("beta", "configure")][1]
    assert states[("beta", "fetch")][0] == "done" and states[("alpha", "install")][0] == "done"
    rebuilt = run_flags(built.flags(), "build", "--quiet", "--no-verify", expect=0).stdout
    assert "▶ beta: configure" in rebuilt and "▶ alpha: configure" not in rebuilt
    assert built.run_gamma() == "gamma 11"


def test_clean_all_with_sources_and_caches_keeps_the_prefix(built: Chain) -> None:
    cache = sources.cache_dir(built.workdir / "cache" / "git",
                              f"{built.repos.as_uri()}/alpha.git")
    assert cache.is_dir()
    ccache = built.workdir / "cache" / "ccache"  # rocbuild's compiler cache (launchers.py)
    ccache.mkdir(parents=True, exist_ok=True)
    (ccache / "stats").write_text("0\n")
    run_flags(built.flags(), "clean", "--all", "--sources", "--caches", expect=0)
    for gone in ("build", "src", "cache/git", "cache/ccache"):
        assert not (built.workdir / gone).exists(), gone
    assert built.run_gamma() == "gamma 11"  # the prefix is untouched
    assert info_path(built.prefix).is_file() and (built.prefix / "env.sh").is_file()


def test_prefix_files_removes_only_rocbuilds_own_files(built: Chain) -> None:
    module = built.prefix / "modulefiles" / "chain" / "prefix"  # named after the prefix
    assert module.is_file() and (built.prefix / "env.fish").is_file()
    out = run_flags(built.flags(), "clean", "--all", "--no-builds", "--prefix-files",
                    expect=0).stdout
    assert str(built.prefix / "env.sh") in out
    for path in (info_path(built.prefix), built.prefix / "env.sh", built.prefix / "env.fish",
                 module, module.with_suffix(".lua")):
        assert not path.exists(), path
    assert not (built.prefix / "modulefiles").exists()  # left empty, so removed
    assert built.run_gamma() == "gamma 11"  # what the components installed stays
    assert (built.prefix / "lib" / "libalpha.so").exists()
    assert (built.workdir / "build" / "alpha").is_dir()  # --no-builds


def test_clean_refuses_while_a_build_holds_the_lock(built: Chain) -> None:
    with StateDir.shared(built.workdir).lock():
        result = run_flags(built.flags(), "clean", "beta", expect=3)
    assert "another rocbuild run" in result.stderr
    assert (built.workdir / "build" / "beta").is_dir()


@pytest.mark.parametrize(("args", "message"), [
    ((), "name the components to clean, or --all"),
    (("--all", "beta"), "not both"),
    (("delta",), "unknown component 'delta'"),
])
def test_bad_clean_requests_exit_2(chain: Chain, args: tuple[str, ...], message: str,
                                   tmp_path: Path) -> None:
    result = run_flags(chain.flags(), "clean", *args, expect=2)
    assert message in result.stderr


def test_clean_caches_finds_the_cache_the_build_used_without_its_mirror(built: Chain,
                                                                          ) -> None:
    """`clean alpha --caches` without the build's --mirror said "nothing to clean" and left
    the cached repository: the cache is found by what the fetch recorded."""
    cache = sources.cache_dir(built.workdir / "cache" / "git",
                              f"{built.repos.as_uri()}/alpha.git")
    assert cache.is_dir()
    flags = built.flags()
    del flags[flags.index("--mirror"):flags.index("--mirror") + 2]
    dry = run_flags(flags, "clean", "alpha", "--caches", "--no-builds", "--dry-run",
                    env={"COLUMNS": "300"}, expect=0).stdout
    assert str(cache) in dry, dry
    run_flags(flags, "clean", "alpha", "--caches", "--no-builds", expect=0)
    assert not cache.exists()
    beta = sources.cache_dir(built.workdir / "cache" / "git", f"{built.repos.as_uri()}/beta.git")
    assert beta.is_dir()  # only what was named
    # a stamp of an earlier rocbuild names no cache: found by the repository's name
    stamp = built.workdir / "state" / "stamps" / "beta" / "fetch.json"
    doc = json.loads(stamp.read_text())
    del doc["cache"]
    stamp.write_text(json.dumps(doc))
    run_flags(flags, "clean", "beta", "--caches", "--no-builds", expect=0)
    assert not beta.exists()
    assert sources.cache_dir(built.workdir / "cache" / "git",
                             f"{built.repos.as_uri()}/gamma.git").is_dir()


def test_a_tag_moved_in_the_mirror_is_fetched_after_clean_sources(built: Chain) -> None:
    """Tags are final, so a build uses the cached commit; after `clean --sources` the fetch
    asked nobody ("cached as ...; no download") and built the old commit of a moved tag."""
    from tests.support.chain import git

    src = built.repos / "alpha.git.src"
    (src / "alpha.c").write_text((src / "alpha.c").read_text().replace("return 1 *",
                                                                       "return 2 *"))
    git(src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "moved")
    git(src, "tag", "-f", "v1")
    git(built.repos / "alpha.git", "fetch", "-q", "-f", str(src), "refs/tags/v1:refs/tags/v1")
    same = run_flags(built.flags(), "build", "--quiet", "--no-verify", expect=0)
    assert "nothing to do" in same.stdout and built.run_gamma() == "gamma 11"  # final
    log = (built.workdir / "logs" / "alpha" / "fetch.log")
    run_flags(built.flags(), "clean", "alpha", "--sources", expect=0)
    again = run_flags(built.flags(), "build", "--quiet", "--no-verify",
                      env={"COLUMNS": "300"}, expect=0)
    assert "tag moved: v1 moved in" in log.read_text(), log.read_text()[-2000:]
    flat = " ".join(again.stdout.split())
    assert "warning alpha: fetch: v1 moved in" in flat, again.stdout
    assert "the remote has" in flat and "this build uses the new commit" in flat, again.stdout
    assert built.run_gamma() == "gamma 12"
    # a fresh checkout of a tag that did not move downloads nothing
    run_flags(built.flags(), "clean", "beta", "--sources", expect=0)
    run_flags(built.flags(), "build", "--quiet", "--no-verify", expect=0)
    text = (built.workdir / "logs" / "beta" / "fetch.log").read_text()
    assert "v1 is cached as" in text.rsplit("=== attempt", 1)[1], text[-2000:]
