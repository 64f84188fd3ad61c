"""The step actions: fetch, patch, configure, compile and install of one component, and the
build venv. Plain functions of (ctx, comp, log, outcome): they read what they need from the
BuildContext, write the step log, and fill ``outcome``; build.BuildContext.run_step times
them, stamps success and records failure. This module knows nothing of doit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocbuild import proc
from rocbuild.checks.lint import unused_cmake_variables
from rocbuild.errors import BuildFailed
from rocbuild.model import layout
from rocbuild.model.graph import Component, sha256_text, venv_dir
from rocbuild.model.steps import configure_argv, install_argv, step_env, venv_commands
from rocbuild.prefix import ownership
from rocbuild.run import clockskew, jobs, patches, sources, stepfaults
from rocbuild.run.outcome import StepOutcome, log_path, step_logger
from rocbuild.run.state import write_text_atomic
from rocbuild.run.uptodate import BUILD_ID_FILE, build_id

if TYPE_CHECKING:
    from rocbuild.run.build import BuildContext

Action = Callable[["BuildContext", Component, Path, StepOutcome], None]
PYTHON_STAMP = ("_python", "venv")


def fresh_cache(build_dir: Path) -> list[str]:
    """Forget what an earlier configure decided, so an option removed from a recipe gets its
    default again instead of lingering in CMakeCache.txt. Keeps the object files: with Ninja
    they live in CMakeFiles/<target>.dir/, which `cmake --fresh` deletes (tested with 3.25),
    so this removes the cache and the rest of the top CMakeFiles/ (compiler checks, logs)."""
    removed = []
    cache = build_dir / "CMakeCache.txt"
    if cache.is_file():
        cache.unlink()
        removed.append("CMakeCache.txt")
    files = build_dir / "CMakeFiles"
    if files.is_dir():
        for entry in files.iterdir():
            if entry.name.endswith(".dir") and entry.is_dir():
                continue  # a target's object files
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        removed.append("CMakeFiles/ (except the object folders)")
    return removed


def ensure_build_id(build_dir: Path) -> str:
    """The token that says this build tree is the one rocbuild configured: kept while the
    tree lives, new when the tree was deleted or replaced (then compile runs again)."""
    current = build_id(build_dir)
    if current is None:
        current = uuid.uuid4().hex
        write_text_atomic(build_dir / BUILD_ID_FILE, current + "\n")
    return current


def saved_dir(ctx: BuildContext, comp: Component) -> Path:
    """Where the user's edits of a checkout are kept before rocbuild resets it."""
    return ctx.stack.workdir / "saved" / comp.checkout


def write_stamp(ctx: BuildContext, comp: Component, step: str, outcome: StepOutcome,
                seconds: float) -> None:
    """Write the step's stamp: its inputs, a fresh run id (the next step's input) and
    what status shows. Written last, atomically, so a kill never leaves it half-done."""
    inputs = ctx.rule.expected_inputs(comp, step)
    expected = ctx.rule.expected_fingerprint(comp, step)
    if inputs is None or expected is None:
        raise BuildFailed(f"{comp.name}: {step} ran before its input steps were recorded")
    extra: dict[str, Any] = {
        "run": uuid.uuid4().hex, "seconds": round(seconds, 1), "jobs": outcome.jobs,
        "peak_rss": outcome.peak_rss, "inputs": inputs, "oom_retries": outcome.oom_retries,
        "warnings": outcome.warnings, **outcome.record}
    ctx.state.write_stamp(comp.name, step, expected, **extra)


def run_tool(ctx: BuildContext, comp: Component, step: str, argv: list[str], log: Path,
             outcome: StepOutcome) -> proc.RunResult:
    """One command of a step, in the component's build environment; BuildFailed when it
    fails."""
    env = step_env(ctx.stack, comp)
    ctx.output.command(comp.name, step, argv)
    result = proc.run_logged(
        argv, log=log, cwd=comp.build_dir if comp.build_dir.is_dir() else None, env=env,
        on_line=lambda line: ctx.output.build_line(comp.name, step, line),
        registry=ctx.registry())
    outcome.peak_rss = max(outcome.peak_rss, result.peak_rss)
    outcome.tail = result.tail
    if not result.ok:
        how = (f"was killed by signal {result.signal}" if result.signal
               else f"exited with {result.returncode}")
        # a full disk, in the tool's words and where: the message is what the summary shows
        full = stepfaults.full_disk(result.tail, [comp.build_dir, ctx.stack.prefix])
        raise BuildFailed(f"{comp.name}: {step} failed: {argv[0]} {how}"
                          + (f": {full}" if full else ""))
    return result


def fetch(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    assert comp.fetch_url is not None and comp.ref is not None
    proc.log_attempt(log, f"fetch {comp.fetch_url} {comp.ref} into {comp.checkout_dir}")
    before = ctx.state.read_stamp(comp.name, "fetch") or {}
    patched = ctx.state.read_stamp(comp.name, "patch") or {}
    req = sources.FetchRequest(
        name=comp.name, url=comp.fetch_url, ref=comp.ref, submodules=comp.submodules,
        checkout_dir=comp.checkout_dir, cache_root=ctx.stack.workdir / "cache" / "git",
        mirror=ctx.settings.mirror, offline=ctx.offline,
        previous_commit=before.get("commit"), applied=patched.get("applied"),
        save_root=saved_dir(ctx, comp))
    fetched = sources.fetch(req, step_logger(log), registry=ctx.registry())
    outcome.record.update(commit=fetched.commit, checkout_id=fetched.checkout_id,
                          ref_kind=fetched.ref_kind)
    if fetched.saved is not None:
        outcome.warnings.append(f"the old checkout held edits or commits of yours; it was "
                                f"moved to {fetched.saved} instead of being deleted")


def patch(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    proc.log_attempt(log, f"patch {comp.checkout_dir} with {len(comp.patches)} patches")
    fetched = ctx.state.read_stamp(comp.name, "fetch") or {}
    before = ctx.state.read_stamp(comp.name, "patch") or {}
    if (before.get("inputs") or {}).get("checkout") != fetched.get("checkout_id"):
        before = {}  # a new checkout (the old one was deleted or replaced): no edits in it
    applied, saved = patches.apply_series(
        comp.name, comp.checkout_dir, fetched["commit"], [p.path for p in comp.patches],
        step_logger(log), applied_before=before.get("applied"),
        save_root=saved_dir(ctx, comp), registry=ctx.registry())
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
                             [p.path for p in comp.patches])


def check_clock(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """Files dated in the future in the build tree, the sources or the prefix make ninja loop
    or skip edits: repaired before CMake or ninja runs (clockskew.py)."""
    warning = clockskew.repair(comp.build_dir, [comp.source_dir, ctx.stack.prefix],
                               step_logger(log)).warning()
    if warning and warning not in outcome.warnings:
        outcome.warnings.append(warning)


def configure(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    comp.build_dir.mkdir(parents=True, exist_ok=True)
    check_clock(ctx, comp, log, outcome)
    removed = fresh_cache(comp.build_dir)
    if removed:
        step_logger(log)(f"fresh configure: removed {', '.join(removed)} (the objects "
                         "are kept, so ninja redoes only what changed)")
    outcome.record["build_id"] = ensure_build_id(comp.build_dir)
    counts = jobs.job_counts(ctx, comp)
    argv = configure_argv(ctx.stack, comp, {k: c.jobs for k, c in counts.items()})
    start = log.stat().st_size if log.exists() else 0
    run_tool(ctx, comp, "configure", argv, log, outcome)
    with log.open("rb") as f:  # only this run's part of the (appended) log
        f.seek(start)
        unused = unused_cmake_variables(f.read().decode("utf-8", "replace"))
    # only the recipe's own options: a project without targets (rocm-cmake) never reads
    # the RUNPATH rocbuild passes to every project, which is no mistake of the recipe's
    unused = [name for name in unused
              if any(a.startswith((f"-D{name}=", f"-D{name}:")) for a in comp.cmake_args)]
    if unused:
        outcome.warnings.append(
            f"CMake did not use {', '.join(unused)}: the recipe passes options this "
            f"version of {comp.name} never reads (check {comp.recipe.file})")


def compile(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    """ninja with the jobs that fit; jobs.py retries with fewer when one dies of memory."""
    check_clock(ctx, comp, log, outcome)
    jobs.compile_step(ctx, comp, log, outcome,
                      lambda c, step, argv, lg, o: run_tool(ctx, c, step, argv, lg, o))


def install(ctx: BuildContext, comp: Component, log: Path, outcome: StepOutcome) -> None:
    prefix = ctx.stack.prefix
    write = step_logger(log)
    ownership.begin_install(prefix, comp)  # no link out; not complete while replaced
    remove_previous_install(ctx, comp, write)
    run_tool(ctx, comp, "install", install_argv(comp), log, outcome)
    install_extras(ctx, comp, write)
    finish_install(ctx, comp, write)


def install_extras(ctx: BuildContext, comp: Component, log: Callable[[str], None]) -> None:
    """The recipe's links and files (ownership.py never writes them through a link out of
    the prefix, nor onto a file another entry holds)."""
    ownership.install_extras(ctx.stack.prefix, comp, log, ctx.stack.order,
                             layout.reserved_roots(ctx.stack.recipes.stack.name))


def finish_install(ctx: BuildContext, comp: Component, log: Callable[[str], None]) -> None:
    """Check what the install wrote (inside the prefix, no clash) and record it."""
    ownership.finish_install(ctx.stack.prefix, comp, ctx.stack.order, log,
                             layout.reserved_roots(ctx.stack.recipes.stack.name))


def remove_previous_install(ctx: BuildContext, comp: Component,
                            log: Callable[[str], None]) -> None:
    """Remove what this component installed last time before installing again: CMake
    skips a file whose time matches to the second ("Up-to-date"), so a quick rebuild could
    keep the old library, and files a new version no longer installs would linger and
    shadow the right ones. Only files inside the prefix are touched."""
    manifest = comp.build_dir / "install_manifest.txt"
    if not manifest.is_file():
        return
    prefix = ctx.stack.prefix.resolve()
    # a path that leads, through a link, to another component's file is not this one's
    theirs = ownership.claimed_by_others(ctx.stack.prefix, comp, ctx.stack.order)
    removed = 0
    for line in manifest.read_text().splitlines():
        path = Path(line)
        real = path.parent.resolve() / path.name  # links may point anywhere
        inside = bool(line) and real.parent.is_relative_to(prefix)
        real_rel = real.relative_to(prefix).as_posix() if inside else ""
        if real_rel in theirs and real_rel != os.path.relpath(path, ctx.stack.prefix):
            log(f"kept {path}: through a link it is {real}, another component's file")
            continue
        if inside and (path.is_symlink() or path.is_file()):
            path.unlink()
            removed += 1
    log(f"removed {removed} files of the previous install of {comp.name}")


STEP_ACTIONS: dict[str, Action] = {
    "fetch": fetch, "patch": patch, "configure": configure, "compile": compile,
    "install": install}


# --- the build venv: Python packages the recipes need, installed before any build ----------
def python_inputs(ctx: BuildContext) -> dict[str, Any]:
    packages, wheels = ctx.stack.python_needs()
    return {"python": sys.version.split()[0], "executable": sys.executable,
            "packages": list(packages), "wheels": list(wheels)}


def python_is_current(ctx: BuildContext) -> bool:
    fingerprint = sha256_text(json.dumps(python_inputs(ctx), sort_keys=True))
    return (ctx.state.stamp_matches(*PYTHON_STAMP, fingerprint)
            and (venv_dir(ctx.stack.workdir) / "bin" / "python").exists())


def setup_python(ctx: BuildContext) -> StepOutcome:
    """Create the build venv, install the recipes' packages into it and download the
    wheels builds will pip-install themselves. It runs with the fetch steps, while the
    network is expected; later steps only read what is here (rocBLAS gets PIP_NO_INDEX
    and PIP_FIND_LINKS pointing at the wheelhouse through its recipe)."""
    inputs = python_inputs(ctx)
    log = log_path(ctx.stack.workdir, "_python", "venv")
    outcome = StepOutcome("(python)", "venv", "done", log=log)
    ctx.output.say(f"▶ build venv: {len(inputs['packages'])} packages, "
                   f"{len(inputs['wheels'])} wheels")
    started = time.monotonic()
    for argv in venv_commands(ctx.stack, sys.executable):
        result = proc.run_logged(argv, log=log, registry=ctx.registry())
        outcome.tail = result.tail
        if not result.ok:
            outcome.result = "failed"
            outcome.message = (f"build venv: `{' '.join(argv[:5])} …` failed (exit "
                               f"{result.returncode}); pip needs PyPI or your pip mirror "
                               "(PIP_INDEX_URL) at this step\nTIP: check the network, then "
                               "run the build again")
            break
    outcome.seconds = time.monotonic() - started
    if outcome.result == "done":
        ctx.state.write_stamp(*PYTHON_STAMP, sha256_text(json.dumps(inputs, sort_keys=True)),
                              inputs=inputs, seconds=round(outcome.seconds, 1))
        ctx.output.say(f"✔ build venv ({outcome.seconds:.1f}s)")
    else:
        ctx.output.say(f"✘ build venv failed — log: {log}")
    ctx.outcomes.append(outcome)
    return outcome
