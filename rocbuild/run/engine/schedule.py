"""Which ready component starts first when several could (--parallel): the one with the most
work still behind it, as ninja orders its own edges (critical path first), so the longest
chain starts at once and the short ones fill the gaps instead of delaying it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocbuild.run.engine import outcome

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext


def remaining_work(ctx: BuildContext) -> dict[str, float]:
    """Seconds of compile work on the longest chain that starts at each component of the
    stack: its own compile (this host's last time, from its stamp, else the recipe's
    ``cpu_hours`` over this host's CPUs: outcome.expected_seconds) plus the longest
    chain of the components that depend on it."""
    comps = ctx.stack.components
    users: dict[str, list[str]] = {n: [] for n in comps}
    for name, comp in comps.items():
        for dep in comp.depends:
            if dep in users:
                users[dep].append(name)
    work: dict[str, float] = {}
    cpus = ctx.host_snapshot().cpus
    for name in reversed(ctx.stack.order or tuple(comps)):  # dependents first
        comp = comps[name]
        own = ((outcome.expected_seconds(ctx.state, comp, "compile", cpus) or 0.0)
               if comp.builds else 0.0)
        work[name] = own + max((work.get(u, 0.0) for u in users[name]), default=0.0)
    return work


def longest_first(names: list[str], work: dict[str, float]) -> list[str]:
    """``names`` with the most remaining work first; ties keep their order (build order)."""
    return sorted(names, key=lambda n: -work.get(n, 0.0))
