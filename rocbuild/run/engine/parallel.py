"""``--parallel auto``: how many components a run compiles at once, decided for this host and
this run, never slower than one at a time; and how many of the light steps (fetch, patch,
options, configure, install) run beside the compiles.

More than one compile helps only where a build cannot use the whole host by itself (a serial
link, a component with few files, the long files ninja starts last) and costs nothing where
compiles draw from one job pool (jobserver.py): the pool keeps the jobs within what fits. So
auto picks more than one only with a build program that is a jobserver client (the build
systems' ``pool_client``: CMake's ninja >= 1.13), at least ``MIN_CPUS`` CPUs (on 2 cores one
ninja keeps them busy) and at least two components left to build; then one component per
``CPUS_PER_COMPONENT`` CPUs, at most ``MAX_AUTO``.

The light steps are one process each, mostly waiting on the network or the disk, or one
CPU (a configure) beside a compile that has the host; they take no job from the pool and
next to no memory, so they run beside the compiles at any --parallel, up to ``light_steps``
at once: the next components' fetch and configure are done when their compile may start.

``decide`` and ``light_steps`` are pure: the host and the work come in as numbers
(``Host``), so each policy is tested without a build (tests/unit/test_pool_policies.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocbuild.checks import buildtools
from rocbuild.model import buildsystems
from rocbuild.model.settings import AUTO

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext

MIN_CPUS = 4
CPUS_PER_COMPONENT = 4
MAX_AUTO = 8
MIN_LIGHT = 2  # a fetch beside a configure, even where one compile runs at a time


@dataclass(frozen=True)
class Host:
    """What ``decide`` needs to know of the host and the run."""

    cpus: int
    pending: int  # components of the run left to build (not installed and current)
    client: str  # a build program here that is a jobserver client ("ninja 1.13.2"), "": none


def decide_for(requested: int | str, host: Host) -> tuple[int, str]:
    """The components compiled at once and why ("" for a count the user gave, or when auto
    keeps to one)."""
    if requested != AUTO:
        return int(requested), ""
    if host.cpus < MIN_CPUS or host.pending < 2 or not host.client:
        return 1, ""
    count = min(host.pending, max(2, host.cpus // CPUS_PER_COMPONENT), MAX_AUTO)
    return count, (f"--parallel auto: {count} ({host.cpus} CPUs, {host.pending} components to "
                   f"build, {host.client} a jobserver client)")


def light_steps(at_once: int) -> int:
    """Light steps at once beside ``at_once`` compiles: as many, at least ``MIN_LIGHT``."""
    return max(MIN_LIGHT, at_once)


def decide(ctx: BuildContext, requested: int | str, components: Sequence[str]) -> tuple[int, str]:
    """``decide_for`` this host and this run; ``components`` are the run's (their closure is
    ``ctx.stack``). Nothing is probed for a count the user gave."""
    if requested != AUTO:
        return decide_for(requested, Host(0, 0, ""))
    cpus = ctx.host_snapshot().cpus
    if cpus < MIN_CPUS:
        return 1, ""
    pending = [c for c in ctx.stack.order
               if ctx.component(c).builds and not ctx.is_current(ctx.component(c), "install")]
    if len(pending) < 2:
        return 1, ""
    kinds = {ctx.component(c).recipe.kind for c in pending}
    client, _ = buildsystems.pool_client(kinds, buildtools)
    return decide_for(requested, Host(cpus, len(pending), client))
