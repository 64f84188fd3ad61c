"""The `cache:<component>` step of `rocbuild build --cache X`: install a component from its
artifact instead of fetching and building it, and stamp it as built.

Which components the cache serves is decided once per run, when the tasks are made
(``served``): those with a step the run will run (not current, or built against a dependency
the run installs again) whose artifact's manifest passes cache.choose. For them
tasks.py puts ``cache:<name>`` (the step table's shortcut) before the component's first step
(after its dependencies are built, since the stamps name their runs) and leaves their
checkouts out of the sources-first phase. The step checks, pulls and unpacks the archive,
runs the same post-install work as a build (the recipe's [install] links and files, for this
prefix) and writes every step's stamp through actions.write_stamp, marked ``from_cache``; the
normal steps then count as current (see uptodate.py's output check), so resume, status,
verify and a rerun see a built component. When the artifact is refused (a file does not match
its sha256, the download fails, ...) nothing is stamped and the normal steps build the
component instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rocbuild.errors import BuildFailed, CacheUnavailable
from rocbuild.model.graph import Component
from rocbuild.model.steptable import steps_of
from rocbuild.prefix import ownership, prefixguard
from rocbuild.run.engine import actions
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import SKIPPED, StepOutcome, step_logger

if TYPE_CHECKING:  # the cache's modules (archives, HTTP, signatures) load when one is set
    from rocbuild.run.cache import cache

STEP = "cache"


def served(ctx: BuildContext, trust: cache.Trust | None = None) -> dict[str, cache.Choice]:
    """The components this run installs from the cache (decided once, then kept; ``trust``
    is the signature policy, by default this user's trusted keys and no unsigned ones)."""
    if ctx.cache_choices is not None:
        return ctx.cache_choices
    chosen: dict[str, cache.Choice] = {}
    if not ctx.settings.cache:  # no --cache: a run imports nothing of the binary cache
        ctx.cache_choices = chosen
        return chosen
    from rocbuild.run.cache import cache

    store = cache.open_cache(ctx.settings.cache)
    if store is not None:
        selected = ctx.stack.selected()
        # what this run will run, dependents of a component it installs again included: a
        # dependent current now is not once its dependency is installed again (new run ids),
        # and one served from the cache has no checkout for its own steps (issue 31: its
        # options step failed with "no checkout", and only a second run served it)
        runs = ctx.rule.next_runs(selected)
        for comp in selected:
            if not any(runs.get((comp.name, s), False) for s in steps_of(comp)):
                continue
            try:
                choice = cache.choose(store, ctx.stack, ctx.state, comp, trust)
            except CacheUnavailable as exc:
                ctx.output.say(f"cache: {exc}; building what is not built")
                break
            if choice.usable:
                chosen[comp.name] = choice
            elif choice.use == cache.REFUSED:
                ctx.output.say(f"cache: {comp.name}: {choice.describe()}")
        # a checkout that a component built here needs must really be fetched: its own
        # checkout's owner, and a source-only dependency (HIP headers, Tensile)
        for comp in selected:
            if comp.name in chosen:
                continue
            needs = {comp.checkout} | {d for d in comp.depends
                                       if not ctx.component(d).builds}
            for name in sorted(needs & chosen.keys()):
                ctx.output.say(f"cache: {name}: fetched, since {comp.name} is built here and "
                               "needs its source")
                del chosen[name]
    ctx.cache_choices = chosen
    return chosen


def is_served(ctx: BuildContext, name: str) -> bool:
    return name in served(ctx)


def install_from_cache(ctx: BuildContext, comp: Component, log_file: Path,
                       outcome: StepOutcome) -> None:
    """The action of `cache:<name>` (run by runner.py, bound in stepbind.py). Never fails
    the run: a refused artifact is reported, the step stands aside (SKIPPED: no outcome) and
    the component's normal steps, which come next, build it."""
    from rocbuild.run.cache import cache
    from rocbuild.run.cache.artifacts import ArtifactRefused
    from rocbuild.run.cache.cache_store import ProgressLine

    name = comp.name
    choice = served(ctx)[name]
    store = cache.open_cache(ctx.settings.cache)
    assert store is not None and choice.manifest is not None
    log = step_logger(log_file)
    ctx.output.say(f"  {name}: {choice.describe()}, key {choice.key[:12]}")
    try:
        prefixguard.claim(ctx.stack.prefix)  # rocbuild's from its first install on
        ownership.begin_install(ctx.stack.prefix, comp)  # no link out; not complete meanwhile
        actions.remove_previous_install(ctx, comp, log)
        cache.install(store, ctx.stack, choice, log,
                      ProgressLine(ctx.output.say, f"{name}: pulling"))
        actions.install_extras(ctx, comp, log)  # the recipe's links and files, for this prefix
        actions.finish_install(ctx, comp, log)  # inside the prefix, no clash; recorded
        for step in steps_of(comp):  # in order: each stamp's inputs name the one before
            _stamp(ctx, comp, step, choice)
    except (ArtifactRefused, CacheUnavailable, BuildFailed, OSError) as exc:
        # not a failure of the run: the component's own steps come next and build it (so no
        # outcome either; the summary then lists those steps)
        log(f"refused: {exc}")
        ctx.output.say(f"✘ {name}: the cached artifact is refused: {exc}; building it instead")
        outcome.result = SKIPPED


def _stamp(ctx: BuildContext, comp: Component, step: str, choice: cache.Choice) -> None:
    """The step's stamp as a build writes it (actions.py's own writer, so the run ids chain the
    same way), marked ``from_cache`` with the artifact's key (uptodate.py's output check)."""
    assert choice.manifest is not None
    outcome = StepOutcome(comp.name, step, "done")
    outcome.record["from_cache"] = choice.key
    if step == "fetch":
        outcome.record.update(commit=choice.manifest.commit, checkout_id=None,
                              ref_kind=choice.manifest.ref_kind)  # for a later push
    actions.write_stamp(ctx, comp, step, outcome, 0.0)
