"""The step actions: fetch, patch, configure, compile and install of one component, and the
run-wide build venv. Plain functions of (ctx, comp, log, outcome): they read what they need
from the BuildContext, write the step log, and fill ``outcome``; runner.run_step (the one
runner, bound to each step kind in stepbind.py) times them, stamps success and records
failure. Configure, compile and install run the component's build system (buildsystems/).
This module knows nothing of doit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocbuild import files, proc
from rocbuild.errors import BuildFailed
from rocbuild.model import buildsystems
from rocbuild.model.buildsystems import venv
from rocbuild.model.buildsystems.venv import PythonVenv
from rocbuild.model.fingerprint import sha256_text
from rocbuild.model.graph import Component, Stack
from rocbuild.model.paths import within
from rocbuild.model.steptable import PYTHON_VENV, steps_of
from rocbuild.prefix import install as prefix_install
from rocbuild.prefix import records
from rocbuild.run.engine import jobs
from rocbuild.run.engine.command import run_all
from rocbuild.run.engine.outcome import StepOutcome, step_logger
from rocbuild.run.sources import patches, sources
from rocbuild.run.state import clockskew, launchstats
from rocbuild.run.state.state import write_text_atomic  # a folder in its place is replaced
from rocbuild.run.state.uptodate import BUILD_ID_FILE, build_id

if TYPE_CHECKING:
    from rocbuild.run.engine.build import BuildContext

Action = Callable[["BuildContext", Component, Path, StepOutcome], None]
assert PYTHON_VENV.record is not None
PYTHON_STAMP = PYTHON_VENV.record  # (folder, name) of the build venv's stamp


def remove_stale(comp: Component, log: Path) -> None:
    """Forget what an earlier configure decided (the build system's stale_files), so an
    option removed from a recipe gets its default again instead of lingering."""
    removed = []
    for path in buildsystems.of(comp).stale_files(comp):
        files.remove_in_place(path)
        removed.append(path.relative_to(comp.build_dir).as_posix())
    if removed:
        shown = ", ".join(removed[:4]) + (f" and {len(removed) - 4} more" if len(removed) > 4
                                          else "")
        step_logger(log)(f"fresh configure: removed {shown} (the objects are kept, so the "
                         "build redoes only what changed)")


def clear_tree_place(comp: Component, log: Path) -> None:
    """A file (or a link to nothing) where the build tree should be is removed: the build
    tree is rocbuild's own, and every run failed creating it (FileExistsError). A
    link to a folder is kept (a build tree on another disk)."""
    tree = comp.build_dir
    if (tree.is_symlink() or tree.exists()) and not tree.is_dir():
        tree.unlink()
        step_logger(log)(f"removed {tree}: a file was in the place of the build tree, "
                         "which is configured afresh")


def ensure_build_id(build_dir: Path) -> str:
    """The token that says this build tree is the one rocbuild configured: kept while the
    tree lives, new when the tree was deleted or replaced (then compile runs again)."""
    current = build_id(build_dir)
    if current is None:
        current = os.urandom(16).hex()  # a run id: 128 random bits (uuid4's)
        write_text_atomic(build_dir / BUILD_ID_FILE, current + "\n")
    return current


def write_stamp(ctx: BuildContext, comp: Component, step: str, outcome: StepOutcome,
                seconds: float) -> None:
    """Write the step's stamp: its inputs, a fresh run id (the next step's input) and
    what status shows. Written last, atomically, so a kill never leaves it half-done."""
    inputs = ctx.rule.expected_inputs(comp, step)
    expected = ctx.rule.expected_fingerprint(comp, step)
    if inputs is None or expected is None:
        raise BuildFailed(f"{comp.name}: {step} ran before its input steps were recorded")
    extra: dict[str, Any] = {
        "run": os.urandom(16).hex(), "seconds": round(seconds, 1), "jobs": outcome.jobs,
        "peak_rss": outcome.peak_rss, "inputs": inputs, "oom_retries": outcome.oom_retries,
        "warnings": outcome.warnings, **time_history(ctx, comp, step, seconds),
        **outcome.record}
    ctx.state.write_stamp(comp.name, step, expected, **extra)


def time_history(ctx: BuildContext, comp: Component, step: str, seconds: float
                 ) -> dict[str, Any]:
    """What the step's estimates read (outcome.expected_seconds): ``attempts_seconds``, the
    time of every attempt since its last success (failed, interrupted, killed) and this one;
    ``cold_seconds``, that total from its last run the compiler cache did not mostly serve,
    kept from the previous stamp across such runs (a served run's seconds would make the
    next real compile's estimate far too short)."""
    before, count = ctx.state.attempts_before(comp.name, step)
    total = before + seconds
    cold = total
    if step == "compile" and _served_by_cache(ctx, comp, seconds):
        previous = ctx.state.read_stamp(comp.name, step) or {}
        kept = previous.get("cold_seconds")
        cold = float(kept) if isinstance(kept, (int, float)) else total
    return {"attempts": count + 1, "attempts_seconds": round(total, 1),
            "cold_seconds": round(cold, 1)}


def _served_by_cache(ctx: BuildContext, comp: Component, seconds: float) -> bool:
    """The compile that just ended got more ccache hits than misses (launchstats keeps its
    counts, written as it ended)."""
    record = launchstats.read_record(ctx.stack.workdir, comp.name) or {}
    when = record.get("when")
    if not isinstance(when, (int, float)) or when < time.time() - seconds - 60:
        return False  # no counts from this compile (no ccache, or an older record)
    hits, misses = record.get("hits"), record.get("misses")
    return isinstance(hits, int) and isinstance(misses, int) and hits > misses


def fetch(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    assert comp.fetch_url is not None and comp.ref is not None
    proc.log_attempt(log, f"fetch {comp.fetch_url} {comp.ref} into {comp.checkout_dir}")
    before = ctx.state.read_stamp(comp.name, "fetch") or {}
    patched = ctx.state.read_stamp(comp.name, "patch") or {}
    req = sources.FetchRequest(
        name=comp.name, url=comp.fetch_url, ref=comp.ref, submodules=comp.submodules,
        checkout_dir=comp.checkout_dir, cache_root=ctx.stack.work.git_cache,
        mirror=ctx.settings.mirror, offline=ctx.offline,
        previous_commit=before.get("commit"), applied=patched.get("applied"),
        save_root=ctx.stack.work.saved(comp.checkout), recheck=not comp.checkout_dir.exists())
    said: list[str] = []
    write = step_logger(log)

    def logger(line: str) -> None:
        write(line)
        if line.startswith(sources.MOVED_TAG):
            said.append(line[len(sources.MOVED_TAG):].strip())

    fetched = sources.fetch(req, logger, registry=ctx.registry())
    outcome.warnings += [line.replace("; fetching it", "; this build uses the new commit")
                         for line in said]
    # where its git cache is: `clean X --caches` finds it without the build's --mirror
    outcome.record.update(commit=fetched.commit, checkout_id=fetched.checkout_id,
                          ref_kind=fetched.ref_kind,
                          cache=str(sources.cache_dir(ctx.stack.work.git_cache,
                                                      comp.fetch_url)))
    if fetched.fresh:
        ctx.fresh_checkouts.add(comp.checkout)
    else:
        ctx.fresh_checkouts.discard(comp.checkout)
    if fetched.saved is not None:
        outcome.warnings.append(f"the old checkout held edits or commits of yours; it was "
                                f"moved to {fetched.saved} instead of being deleted")


def patch(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    proc.log_attempt(log, f"patch {comp.checkout_dir} with {len(comp.patches)} patches")
    fetched = ctx.state.read_stamp(comp.name, "fetch") or {}
    before = ctx.state.read_stamp(comp.name, "patch") or {}
    if (before.get("inputs") or {}).get("checkout") != fetched.get("checkout_id"):
        before = {}  # a new checkout (the old one was deleted or replaced): no edits in it
    # a checkout this run's fetch just made holds the commit and nothing else (the run lock
    # keeps other runs out): no edits to look for (`git status` of llvm-project is slow)
    fresh = comp.checkout in ctx.fresh_checkouts
    ctx.fresh_checkouts.discard(comp.checkout)
    applied, saved = patches.apply_series(
        comp.name, comp.checkout_dir, fetched["commit"], [p.path for p in comp.patches],
        step_logger(log), applied_before=before.get("applied"),
        save_root=ctx.stack.work.saved(comp.checkout), registry=ctx.registry(), fresh=fresh)
    outcome.record["applied"] = applied
    if saved is not None:
        outcome.warnings.append(f"your edits in {comp.checkout_dir} were saved to {saved} "
                                "before the checkout was reset (put them in patches/ to "
                                "keep them)")


def check_patches(ctx: BuildContext, comp: Component) -> None:
    """Preflight: the whole series against the fetched commit, before any long step."""
    fetched = ctx.state.read_stamp(comp.name, "fetch")
    # served by the binary cache: no checkout here, and the series was checked (and is in
    # the artifact's key) where it was built; a rebuild fetches first, then this checks it
    if fetched is not None and comp.patches and not fetched.get("from_cache"):
        patches.check_series(comp.name, comp.checkout_dir, fetched["commit"],
                             [p.path for p in comp.patches], ctx.registry())


def check_clock(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """Files dated in the future in the build tree, the sources or the prefix make ninja loop
    or skip edits: repaired before CMake or ninja runs (clockskew.py)."""
    warning = clockskew.repair(comp.build_dir, [comp.source_dir, ctx.stack.prefix],
                               step_logger(log)).warning()
    if warning and warning not in outcome.warnings:
        outcome.warnings.append(warning)


def configure(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    system = buildsystems.of(comp)
    clear_tree_place(comp, log)
    comp.build_dir.mkdir(parents=True, exist_ok=True)
    check_clock(ctx, comp, log, outcome)
    remove_stale(comp, log)
    outcome.record["build_id"] = ensure_build_id(comp.build_dir)
    counts = jobs.job_counts(ctx, comp)
    commands = system.configure(ctx.stack, comp, {k: c.jobs for k, c in counts.items()})
    start = log.stat().st_size if log.exists() else 0
    try:
        run_all(ctx, comp, "configure", commands, log, outcome,
                extra_env=jobs.configure_env(ctx, comp))
    except BuildFailed:  # the summary shows the first error too: the cause, before the rest
        outcome.first_error = system.first_error(_since(log, start))
        raise
    outcome.warnings += system.configure_warnings(comp, _since(log, start))


def _since(log: Path, start: int) -> str:
    """This run's part of the (appended) step log."""
    with log.open("rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", "replace")


def compile(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """The build with the jobs that fit; jobs.py retries with fewer when one dies of memory."""
    check_clock(ctx, comp, log, outcome)
    date_edits(ctx, comp, log, outcome)
    jobs.compile_step(ctx, comp, log, outcome)


def date_edits(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """Date now each file of the checkout whose content changed since the last compile
    (an edit, or an edit undone), as its blob ids say (the compile stamp keeps them,
    ``edit_blobs``). ninja rebuilds what is older than its sources, so a file copied with
    its old time (``cp -p``, ``rsync -a``, ``tar x``, a clock stepped back) was not
    compiled: the step ran, exit 0, and the old program was installed. rocbuild knows the
    content changed (the compile's input, uptodate.py); this makes the time say so too."""
    now = ctx.rule.edit_blobs(comp)
    outcome.record["edit_blobs"] = now
    before = (ctx.state.read_stamp(comp.name, "compile") or {}).get("edit_blobs")
    before = before if isinstance(before, dict) else {}  # a stamp of an older rocbuild
    # a path in neither is as the patch series left it (an edit may be patches.PRISTINE: a
    # patched file set back to the commit's content, which is another content)
    as_left = object()
    changed = sorted(p for p in now.keys() | before.keys()
                     if now.get(p, as_left) != before.get(p, as_left))
    checkout = comp.checkout_dir
    dated = []
    for rel in changed:
        path = checkout / rel
        if within(path, checkout) and path.is_file() and not path.is_symlink():
            os.utime(path)
            dated.append(rel)
    if dated:
        step_logger(log)(f"dated now, so ninja compiles them whatever their times were: "
                         f"{', '.join(dated)} (changed since the last compile)")


def install(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    prefix = ctx.stack.prefix

    def place(placing: prefix_install.Placing) -> set[str]:
        placing.remove_previous()
        before = records.snapshot(prefix)
        run_all(ctx, comp, "install", buildsystems.of(comp).install(ctx.stack, comp), log,
                outcome)
        # files an install(CODE)/install(SCRIPT) made are in no manifest: taken from the
        # prefix itself, so the record (and an artifact pushed from it) holds them too
        return records.left_by_install(prefix, before)

    prefix_install.install(ctx.stack, comp, step_logger(log), place)


# --- the build venv: Python packages the recipes need, installed before any build ----------
def python_inputs(ctx: BuildContext) -> dict[str, Any]:
    return venv.inputs(ctx.stack, sys.executable)


def _python_fingerprint(ctx: BuildContext) -> str:
    return sha256_text(json.dumps(python_inputs(ctx), sort_keys=True))


def python_users(stack: Stack) -> list[Component]:
    """The selected components whose recipes need the build venv or the wheelhouse."""
    return [c for c in stack.selected()
            if c.recipe.python_packages or c.recipe.python_wheels]


def python_is_current(ctx: BuildContext, comp: Component | None = None) -> bool:
    """The venv holds what the run's recipes need (nothing to do when they need nothing, nor
    when every component that needs it is installed and current: unpacked from the binary
    cache, so `build --cache … --offline` never reaches PyPI)."""
    if ctx.stack.python_needs() == ((), ()):
        return True
    users = python_users(ctx.stack)
    if all(ctx.is_current(c, steps_of(c)[-1]) for c in users if steps_of(c)):
        return True
    return (ctx.state.stamp_matches(*PYTHON_STAMP, _python_fingerprint(ctx))
            and PythonVenv(workdir=ctx.stack.workdir).installed_files(None) is not None)


def python_venv(ctx: BuildContext, comp: Component | None, log: Path,
                outcome: StepOutcome) -> None:
    """Create the build venv, install the recipes' packages into it and download the
    wheels builds will pip-install themselves (buildsystems/venv.py). It runs with the fetch
    steps, while the network is expected; later steps only read what is here."""
    packages, wheels = ctx.stack.python_needs()
    ctx.output.say(f"  build venv: {len(packages)} packages, {len(wheels)} wheels")
    try:
        run_all(ctx, None, PYTHON_VENV.name, PythonVenv().commands(ctx.stack), log, outcome,
                label=PYTHON_VENV.title)
    except BuildFailed as exc:
        raise BuildFailed(f"{exc}; pip needs PyPI or your pip mirror (PIP_INDEX_URL) at this "
                          "step", tip="check the network, then run the build again") from None


def python_stamp(ctx: BuildContext, comp: Component | None, outcome: StepOutcome,
                 seconds: float) -> None:
    inputs = python_inputs(ctx)
    ctx.state.write_stamp(*PYTHON_STAMP, sha256_text(json.dumps(inputs, sort_keys=True)),
                          inputs=inputs, seconds=round(seconds, 1))
