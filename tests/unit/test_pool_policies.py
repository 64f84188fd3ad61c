"""The policies of building many components at once, each where it lives and without a
build: how many compiles --parallel auto runs (parallel.decide_for, given the host as
numbers), which component goes first (schedule.chain_work, given the graph and each one's
own work) and the job pool's refill (jobserver.JobPool, driven here as a jobserver client
drives it: tests/support/jobfifo.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocbuild.model.settings import AUTO
from rocbuild.run.engine import parallel, schedule
from rocbuild.run.engine.jobserver import JobPool
from tests.support.jobfifo import drain, put_back, take

NINJA = "ninja 1.13.2"


def auto(cpus: int, pending: int = 20, ninja: str = NINJA) -> int:
    return parallel.decide_for(AUTO, parallel.Host(cpus, pending, ninja))[0]


def test_auto_compiles_one_component_per_four_cpus() -> None:
    assert [auto(cpus) for cpus in (4, 8, 12, 16, 24, 32)] == [2, 2, 3, 4, 6, 8]
    _, why = parallel.decide_for(AUTO, parallel.Host(16, 20, NINJA))
    assert why == ("--parallel auto: 4 (16 CPUs, 20 components to build, ninja 1.13.2 a "
                   "jobserver client)")


def test_auto_keeps_to_one_where_more_cannot_help() -> None:
    assert auto(2) == 1 and auto(3) == 1  # one ninja keeps 2 or 3 cores busy
    assert auto(16, pending=1) == 1  # nothing to build beside it
    assert auto(16, ninja="") == 1  # no jobserver client: no pool to share
    assert auto(16, pending=3) == 3  # never more than the components left
    assert auto(128) == parallel.MAX_AUTO == 8


def test_a_count_the_user_gave_is_kept() -> None:
    assert parallel.decide_for("3", parallel.Host(2, 1, "")) == (3, "")
    assert parallel.decide_for(1, parallel.Host(64, 20, NINJA)) == (1, "")


def test_the_chain_behind_a_component_counts_not_only_its_own_work() -> None:
    """a -> b -> c (c needs b, b needs a): a's own compile is short, but everything after it
    waits for it; d is longer than a alone and shorter than the chain a starts."""
    order = ["a", "b", "c", "d"]
    depends = {"b": ["a"], "c": ["b"]}
    work = schedule.chain_work(order, depends, {"a": 1.0, "b": 2.0, "c": 10.0, "d": 5.0})
    assert work == {"a": 13.0, "b": 12.0, "c": 10.0, "d": 5.0}
    assert schedule.longest_first(["d", "a"], work) == ["a", "d"]


def test_a_component_two_others_wait_for_gets_the_longer_chain() -> None:
    order = ["base", "short", "long"]
    work = schedule.chain_work(order, {"short": ["base"], "long": ["base"]},
                               {"base": 1.0, "short": 2.0, "long": 7.0})
    assert work["base"] == 8.0


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[JobPool]:
    made = JobPool(4, folder=tmp_path)
    yield made
    made.close()


def test_the_tokens_of_a_killed_client_come_back_when_the_last_client_ends(
        pool: JobPool) -> None:
    with pool.hold(1, client=True):
        take(pool, 2)  # the client's ninja is killed with two tokens in hand
    assert drain(pool) == 4


def test_the_refill_leaves_out_what_rocbuild_still_holds(pool: JobPool) -> None:
    with pool.hold(2):  # a build with an explicit count (an older ninja) holds two
        with pool.hold(1, client=True):
            take(pool, 1)
        assert drain(pool) == 2


def test_a_client_that_ends_beside_another_gives_back_its_slot_and_the_last_all(
        pool: JobPool) -> None:
    with pool.hold(1, client=True):
        with pool.hold(1, client=True):
            take(pool, 1)  # the inner client is killed with a token in hand
        assert drain(pool) == 2  # its own slot is back; the lost one waits for the refill
        put_back(pool, 2)
    assert drain(pool) == 4


def test_remaining_work_of_a_stack_counts_the_chain_from_each_recipe(
        write_recipes, tmp_path: Path) -> None:
    """The same policy read from recipes (their cpu_hours over this host's CPUs, no stamps
    yet): a short component that a long one needs comes before a longer one that nothing
    needs."""
    import sys

    from rocbuild.cli.output import Output
    from rocbuild.model.graph import load_stack
    from rocbuild.model.resources import GIB, HostSnapshot
    from rocbuild.model.settings import resolve
    from rocbuild.run.engine.build import BuildContext

    def recipe(hours: float, depends: str = "") -> str:
        return (depends + '[source]\ngit = "https://example.com/x.git"\nref = "v1"\n'
                f"[cmake]\n[resources]\ncpu_hours = {hours}\n")

    folder = write_recipes(
        stack='[stack]\nversion = "6.4.3"\ntargets = ["gfx906"]\nprefix = "/opt/p"\n'
              'components = ["a", "b", "c", "d"]\n',
        a=recipe(0.1), b=recipe(0.1, 'depends = ["a"]\n'), c=recipe(1.0, 'depends = ["b"]\n'),
        d=recipe(0.5))
    settings = resolve({"recipes": str(folder), "workdir": str(tmp_path / "work")}, env={},
                       cwd=folder)
    sixteen = HostSnapshot(16, "16 CPUs", 64 * GIB, 0, "memory")
    ctx = BuildContext(stack=load_stack(settings, []), settings=settings,
                       output=Output(sys.stdout), host_snapshot=lambda: sixteen)
    work = schedule.remaining_work(ctx)
    assert work["a"] == pytest.approx(1.2 * 3600 / 16)
    assert work["d"] == pytest.approx(0.5 * 3600 / 16)
    assert schedule.longest_first(["d", "a"], work) == ["a", "d"]
