"""The `cache:<component>` step of `rocbuild build --cache X`: install a component from its
artifact instead of fetching and building it, and stamp it as built.

Which components the cache serves is decided once per run, when the tasks are made
(``served``): those with a step the run will run (not current, or built against a dependency
the run installs again) whose artifact's manifest passes choice.choose. For them
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
from rocbuild.files import write_text_atomic
from rocbuild.model import buildsystems
from rocbuild.model.graph import Component
from rocbuild.model.steptable import steps_of
from rocbuild.prefix import install as prefix_install
from rocbuild.run.engine import actions
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import SKIPPED, StepOutcome, step_logger

if TYPE_CHECKING:  # the cache's modules (archives, HTTP, signatures) load when one is set
    from rocbuild.run.cache.choice import Choice, Trust
    from rocbuild.run.cache.stores import ReadStore

STEP = "cache"


def served(ctx: BuildContext, trust: Trust | None = None) -> dict[str, Choice]:
    """The components this run installs from the cache (decided once, then kept; ``trust``
    is the signature policy, by default this user's trusted keys and no unsigned ones)."""
    if ctx.cache_choices is not None:
        return ctx.cache_choices
    chosen: dict[str, Choice] = {}
    if not ctx.settings.cache:  # no --cache: a run imports nothing of the binary cache
        ctx.cache_choices = chosen
        return chosen
    from rocbuild.run.cache import stores
    from rocbuild.run.cache.choice import REFUSED, choose

    store = stores.open_reader(ctx.settings.cache)
    selected = ctx.stack.selected()
    # what this run will run, dependents of a component it installs again included: a
    # dependent current now is not once its dependency is installed again (new run ids),
    # and one served from the cache has no checkout for its own steps (its
    # options step failed with "no checkout", and only a second run served it)
    runs = ctx.rule.next_runs(selected)
    for comp in selected:
        if not any(runs.get((comp.name, s), False) for s in steps_of(comp)):
            continue
        try:
            choice = choose(store, ctx.stack, ctx.state, comp, trust)
        except CacheUnavailable as exc:
            ctx.output.say(f"cache: {exc}; building what is not built")
            break
        if choice.usable:
            chosen[comp.name] = choice
        elif choice.use == REFUSED:
            ctx.output.say(f"cache: {comp.name}: {choice.describe()}")
    # a checkout that a component built here needs must really be fetched: its own
    # checkout's owner, and a source-only dependency (HIP headers, Tensile)
    for comp in selected:
        if comp.name in chosen:
            continue
        needs = {comp.checkout} | {d for d in comp.depends if not ctx.component(d).builds}
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
    from rocbuild.run.cache import stores
    from rocbuild.run.cache.artifacts import ArtifactRefused

    name = comp.name
    choice = served(ctx)[name]
    store = stores.open_reader(str(ctx.settings.cache))
    assert choice.manifest is not None
    log = step_logger(log_file)
    ctx.output.say(f"  {name}: {choice.describe()}, key {choice.key[:12]}")
    # the build tree's record of the install (install_manifest.txt) is rewritten too; it is
    # outside the prefix, so outside the install's transaction
    record = buildsystems.of(comp).installed_record(comp) if comp.builds else None
    old_record = _read(record)
    try:
        prefix_install.install(ctx.stack, comp, log, lambda placing: _place(
            ctx, comp, choice, store, placing), transaction=True)
    except (ArtifactRefused, CacheUnavailable, BuildFailed, OSError) as exc:
        # not a failure of the run: the prefix is as it was, and the component's own steps
        # come next and build it (so no outcome either; the summary then lists those steps)
        _restore(record, old_record)
        log(f"refused: {exc}; the prefix is as it was before")
        ctx.output.say(f"✘ {name}: the cached artifact is refused: {exc}; building it instead")
        outcome.result = SKIPPED
        return
    except BaseException:
        _restore(record, old_record)
        raise
    # the stamps only once the prefix holds the component for good: a kill before the commit
    # is undone by the next run, which must then find the component not built
    for step in steps_of(comp):  # in order: each stamp's inputs name the one before
        _stamp(ctx, comp, step, choice)


def _place(ctx: BuildContext, comp: Component, choice: Choice, store: ReadStore,
           placing: prefix_install.Placing) -> list[str]:
    """The artifact's files into the prefix (the placing of prefix/install.py's sequence):
    the previous install is removed only once the artifact is known good."""
    from rocbuild.run.cache import unpack
    from rocbuild.run.cache.cache_store import ProgressLine

    assert placing.txn is not None
    unpack.install(store, ctx.stack, choice, placing.txn, placing.log,
                   ProgressLine(ctx.output.say, f"{comp.name}: pulling"), placing.held(),
                   before_place=placing.remove_previous)
    return []


def _read(path: Path | None) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path is not None else None
    except OSError:
        return None


def _restore(path: Path | None, text: str | None) -> None:
    """The build tree's install record back as it was (it is outside the prefix)."""
    if path is None:
        return
    if text is None:
        if path.is_symlink() or path.is_file():
            path.unlink()
    else:
        write_text_atomic(path, text)


def _stamp(ctx: BuildContext, comp: Component, step: str, choice: Choice) -> None:
    """The step's stamp as a build writes it (actions.py's own writer, so the run ids chain the
    same way), marked ``from_cache`` with the artifact's key (uptodate.py's output check)."""
    assert choice.manifest is not None
    outcome = StepOutcome(comp.name, step, "done")
    outcome.record["from_cache"] = choice.key
    if step == "fetch":
        outcome.record.update(commit=choice.manifest.commit, checkout_id=None,
                              ref_kind=choice.manifest.ref_kind)  # for a later push
    actions.write_stamp(ctx, comp, step, outcome, 0.0)
