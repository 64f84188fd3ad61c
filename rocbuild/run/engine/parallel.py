"""``--parallel auto``: how many components a run builds at once, decided for this host and
this run, never slower than one at a time.

More than one helps only where a build cannot use the whole host by itself (its configure,
install, a serial link, a component with few files) and costs nothing where compiles draw
from one job pool (jobserver.py): the pool keeps the jobs at what one build would get. So
auto picks more than one only with a ninja that is a jobserver client (>= 1.13), at least
``MIN_CPUS`` CPUs (on 2 cores one ninja keeps them busy) and at least two components left to
build; then one component per ``CPUS_PER_COMPONENT`` CPUs, at most ``MAX_AUTO``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rocbuild.model.settings import AUTO
from rocbuild.run.engine import jobserver

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext

MIN_CPUS = 4
CPUS_PER_COMPONENT = 4
MAX_AUTO = 8


def decide(ctx: BuildContext, requested: int | str, components: Sequence[str]) -> tuple[int, str]:
    """The components at once for this run and why ("" for a count the user gave, or when
    auto keeps to one); ``components`` are the run's (their closure is ``ctx.stack``)."""
    if requested != AUTO:
        return int(requested), ""
    cpus = ctx.host_snapshot().cpus
    if cpus < MIN_CPUS:
        return 1, ""
    pending = [c for c in ctx.stack.order
               if ctx.component(c).builds and not ctx.is_current(ctx.component(c), "install")]
    if len(pending) < 2:
        return 1, ""
    ninja = jobserver.jobserver_ninja()
    if ninja is None:
        return 1, ""
    count = min(len(pending), max(2, cpus // CPUS_PER_COMPONENT), MAX_AUTO)
    version = ".".join(map(str, jobserver.ninja_version(ninja) or ()))
    return count, (f"--parallel auto: {count} ({cpus} CPUs, {len(pending)} components to "
                   f"build, ninja {version} a jobserver client)")
