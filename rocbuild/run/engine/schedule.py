"""Which ready component starts first when several could (--parallel): the one with the most
work still behind it, as ninja orders its own edges (critical path first), so the longest
chain starts at once and the short ones fill the gaps instead of delaying it."""

from __future__ import annotations

import collections
import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rocbuild.run.engine import outcome

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext


def remaining_work(ctx: BuildContext) -> dict[str, float]:
    """Seconds of compile work on the longest chain that starts at each component of the
    stack (``chain_work``): its own compile is this host's last time, from its stamp, else
    the recipe's ``cpu_hours`` over this host's CPUs (outcome.expected_seconds)."""
    comps = ctx.stack.components
    cpus = ctx.host_snapshot().cpus
    own = {name: ((outcome.expected_seconds(ctx.state, comp, "compile", cpus) or 0.0)
                  if comp.builds else 0.0) for name, comp in comps.items()}
    return chain_work(ctx.stack.order or tuple(comps),
                      {name: comp.depends for name, comp in comps.items()}, own)


def chain_work(order: Sequence[str], depends: Mapping[str, Sequence[str]],
               own: Mapping[str, float]) -> dict[str, float]:
    """For each component of ``order`` (dependencies first): its ``own`` work plus the longest
    chain of the components that depend on it. The chain, not the component's own work, is
    what delays the end of the run: a quick component that a long one waits for starts
    before a longer one that nothing waits for."""
    users: dict[str, list[str]] = {n: [] for n in order}
    for name in order:
        for dep in depends.get(name, ()):
            if dep in users:
                users[dep].append(name)
    work: dict[str, float] = {}
    for name in reversed(order):  # dependents first
        work[name] = own.get(name, 0.0) + max((work.get(u, 0.0) for u in users[name]),
                                              default=0.0)
    return work


def longest_first(names: list[str], work: dict[str, float]) -> list[str]:
    """``names`` with the most remaining work first; ties keep their order (build order)."""
    return sorted(names, key=lambda n: -work.get(n, 0.0))


class ReadyQueue(collections.deque[Any]):
    """doit's queue of tasks ready to run (``TaskDispatcher.ready``, a deque it appends to
    and pops from the left), popping the task of the component with the most work behind
    it first: doit fills it in the order of a set (the tasks that waited for one that
    ended), so without this the next component to start was chance. Run-wide tasks (the
    preflight, the build venv) go first, as everything waits for them."""

    def __init__(self, work: dict[str, float]) -> None:
        super().__init__()
        self.work = work

    def _rank(self, node: Any) -> float:
        _, _, component = str(getattr(node.task, "name", "")).partition(":")
        return self.work.get(component, 0.0) if component else math.inf

    def popleft(self) -> Any:
        best = max(range(len(self)), key=lambda i: (self._rank(self[i]), -i))
        node = self[best]
        del self[best]
        return node


@contextlib.contextmanager
def doit_longest_first(work: dict[str, float]) -> Iterator[None]:
    """While doit runs in this process, its dispatcher starts the ready task of the component
    with the most work behind it first (ReadyQueue): doit has no hook for the order, so its
    TaskControl.task_dispatcher (doit 0.37, control.py) is wrapped for the run."""
    from doit import control

    original = control.TaskControl.task_dispatcher

    def dispatcher(self: Any) -> Any:
        made = original(self)
        made.ready = ReadyQueue(work)  # read by its generator, which has not started yet
        return made

    control.TaskControl.task_dispatcher = dispatcher
    try:
        yield
    finally:
        control.TaskControl.task_dispatcher = original
