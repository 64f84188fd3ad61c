"""The job pool's size as compiles start and end (poolsize, jobserver.JobPool.resize) and
the gates that let so many compiles and light steps run at once (stepgate, parallel), each
without a build."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocbuild.run.engine import parallel, poolsize
from rocbuild.run.engine.jobserver import JobPool
from rocbuild.run.engine.stepgate import Gate, RunStopped
from tests.support.jobfifo import drain, put_back, take


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[JobPool]:
    made = JobPool(4, folder=tmp_path)
    yield made
    made.close()


def test_light_steps_run_beside_as_many_compiles_and_at_least_two() -> None:
    assert [parallel.light_steps(n) for n in (1, 2, 4, 8)] == [2, 2, 4, 8]


def test_the_pool_is_each_compiles_own_jobs_added_up_within_memory_and_jobs() -> None:
    assert poolsize.capacity([16, 16, 16, 16], memory_fit=120, cap=None) == 64
    assert poolsize.capacity([16, 16, 16, 16], memory_fit=40, cap=None) == 40
    assert poolsize.capacity([16, 16], memory_fit=120, cap=2) == 2
    assert poolsize.capacity([], memory_fit=120, cap=None) == 1


def test_compiles_that_fit_with_their_own_counts_run_with_them() -> None:
    """Four builds of 16 jobs fit in memory for 120 with their own counts (no jobserver: a
    ninja 1.13 client that starts after the others ran one job until its first ended); not
    in memory for 40, nor with --jobs 32."""
    assert poolsize.own_counts_fit([16, 16, 16, 16], memory_fit=120, cap=None)
    assert not poolsize.own_counts_fit([16, 16, 16, 16], memory_fit=40, cap=None)
    assert not poolsize.own_counts_fit([16, 16, 16, 16], memory_fit=120, cap=32)
    sizing = poolsize.PoolSizing({"a": 20, "b": 20}, cap=None)
    sizing.started("a", 16)
    assert sizing.own_counts_fit()
    sizing.started("b", 16)
    assert not sizing.own_counts_fit()  # 32 jobs, 20 fit: they share the pool


def test_the_pool_grows_when_the_most_demanding_component_is_done() -> None:
    sizing = poolsize.PoolSizing({"llama": 10, "ggml": 40}, cap=None)
    assert sizing.started("llama", 16) == 10  # a llama job needs more memory: 10 fit
    assert sizing.ended("llama", compiled=True) == 1
    assert sizing.started("ggml", 16) == 16  # llama is done: only ggml's memory counts
    assert sizing.started("ggml-b", 16) == 32
    assert sizing.ended("ggml", compiled=False) == 16


def test_a_pool_that_grows_puts_the_new_tokens_in_at_once(pool: JobPool) -> None:
    pool.resize(6)
    assert pool.size == 6 and drain(pool) == 6


def test_a_pool_that_shrinks_takes_tokens_back_as_they_return(pool: JobPool) -> None:
    with pool.hold(1, client=True):
        take(pool, 2)  # a client runs two jobs beyond its first
        pool.resize(2)  # one token is in the FIFO: taken out now; one more is owed
        put_back(pool, 2)  # the client's two jobs end
        assert pool.size == 2
    assert drain(pool) == 2  # the last client ended: exactly the new size


def test_a_gate_lets_the_step_with_the_most_work_behind_it_go_first() -> None:
    gate = Gate(1)
    order: list[str] = []
    started = threading.Event()

    def step(name: str, rank: float) -> None:
        with gate.slot(rank):
            order.append(name)

    with gate.slot(0.0):  # the slot is taken: both wait
        waiters = [threading.Thread(target=step, args=("short", 1.0)),
                   threading.Thread(target=step, args=("long", 9.0))]
        for waiter in waiters:
            waiter.start()
        while len(gate._waiting) < 2:
            started.wait(0.01)
    for waiter in waiters:
        waiter.join()
    assert order == ["long", "short"]


def test_a_stopped_gate_lets_its_waiters_go_without_running() -> None:
    gate = Gate(1)
    outcome: list[str] = []

    def step() -> None:
        try:
            with gate.slot():
                outcome.append("ran")
        except RunStopped:
            outcome.append("not started")

    with gate.slot():
        waiter = threading.Thread(target=step)
        waiter.start()
        while not gate._waiting:
            threading.Event().wait(0.01)
        gate.stop()
        waiter.join()
    assert outcome == ["not started"]


def test_plain_doits_worker_threads_open_the_runs_one_pool_and_the_main_thread_none() -> None:
    """`doit -n N -P thread` picks its worker threads itself: the first compile in one of them
    opens the run's pool, every other draws from that same pool, and the run's end closes
    it. A compile in doit's main thread (no -n, or -P process) runs alone: no pool."""
    import sys
    from types import SimpleNamespace

    from rocbuild.cli.output import Output
    from rocbuild.run.engine import jobs
    from rocbuild.run.engine.build import BuildContext

    def context(doit_threads: bool) -> BuildContext:
        return BuildContext(stack=SimpleNamespace(components={}),  # type: ignore[arg-type]
                            settings=SimpleNamespace(jobs=None),  # type: ignore[arg-type]
                            output=Output(sys.stdout), doit_threads=doit_threads)

    def from_threads(ctx: BuildContext) -> list[JobPool | None]:
        seen: list[JobPool | None] = []
        threads = [threading.Thread(target=lambda: seen.append(jobs.pool_of(ctx)))
                   for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return seen

    ctx = context(doit_threads=True)
    assert jobs.pool_of(ctx) is None  # the main thread
    seen = from_threads(ctx)
    assert seen[0] is not None and all(p is seen[0] for p in seen), seen
    assert jobs.pool_of(ctx) is seen[0]  # once open, the run's pool for every compile
    ctx.release()
    assert ctx.pool is None and not seen[0].path.exists()
    assert from_threads(context(doit_threads=False)) == [None] * 4  # rocbuild build's own
