"""After the last install: environment files and build-info (the finish phase), and verify as
the build's last step (the verify phase); lifecycle.py runs the two in this order.

A build counts as complete only when every component of the stack is installed and current
and ``verify`` found code for every target (or the user said ``--no-verify``); only then does
build-info say ``complete``, which ``rocbuild activate`` requires.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from rocbuild.errors import RocbuildError
from rocbuild.model import buildsystems
from rocbuild.model.graph import Stack, profile_components
from rocbuild.model.steptable import steps_of
from rocbuild.prefix import buildinfo, envfiles, records, uninstall
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.engine.outcome import CURRENT, SERVED
from rocbuild.run.state.state import write_json_atomic

if TYPE_CHECKING:  # the checks are imported when verify runs (a no-op build skips them)
    from rocbuild.checks.verify import VerifyReport

# shows a verify report (the CLI's, cmd_verify.print_report): finish decides, never draws it
VerifyPrinter = Callable[["VerifyReport", Console], None]


def _complete_stack(ctx: BuildContext, whole: Stack) -> Stack | None:
    """The stack's whole default set (``whole``, loaded when the run began) when every step
    of it is current (this run may have built only a part; earlier runs the rest), else
    None."""
    rule = ctx.rule_for(whole)  # the run's record of each checkout's edits
    current = all(rule.is_current(c, step) for c in whole.selected() for step in steps_of(c))
    return whole if current else None


def _build_info(ctx: BuildContext, stack: Stack, started: str) -> buildinfo.BuildInfo:
    commits = {c.name: (ctx.state.read_stamp(c.name, "fetch") or {}).get("commit")
               for c in stack.selected() if c.owns_checkout}
    return buildinfo.new_build_info(stack, commits={k: v for k, v in commits.items() if v},
                                    started=started)


def record_verify(ctx: BuildContext, ok: bool, seconds: float, summary: str) -> None:
    """The verify's outcome for `rocbuild status` (a failed verify is a failed row there).
    Bookkeeping outside the prefix: a record that cannot be written is a warning, never a
    failed build (the prefix's build-info says whether verify passed)."""
    path = ctx.stack.work.verify_record
    try:
        write_json_atomic(path, {"prefix": str(ctx.stack.prefix), "ok": ok, "when": time.time(),
                                 "seconds": round(seconds, 1), "summary": "" if ok else summary})
    except (OSError, RocbuildError) as exc:
        ctx.output.say(f"warning: {path} (what `rocbuild status` shows of verify) could not "
                       f"be written: {exc}; the prefix's build-info holds the result")


@dataclass(frozen=True)
class Finished:
    """What the finish phase found: the whole stack when all of it is built (then the
    verify phase judges it), with the build-info to write once verify has spoken."""

    complete: Stack | None
    info: buildinfo.BuildInfo | None = None


def finish(ctx: BuildContext, out: Console, whole: Stack, *, started: str) -> Finished:
    """Write the env files; when only part of the stack is built, its build-info too."""
    prefix = ctx.stack.prefix
    written = envfiles.write_env_files(envfiles.spec_for(ctx.stack), ctx.output.say,
                                       compiled=ctx.stack.workdir / "cache" / "templates")
    out.print(f"environment: source {written[0]}", soft_wrap=True)  # to paste: one line
    complete = _complete_stack(ctx, whole)
    if complete is None:
        buildinfo.write_build_info(prefix, _build_info(ctx, ctx.stack, started),
                                   ctx.output.say)
        out.print("build-info: part of the stack is built; run `rocbuild build` for the rest")
        return Finished(None)
    _uninstall_dropped(ctx, out, complete)
    return Finished(complete, _build_info(ctx, complete, started))  # names every component


def _uninstall_dropped(ctx: BuildContext, out: Console, whole: Stack) -> None:
    """Take out of the prefix each component it holds that the stack no longer has (dropped
    from ``stack.components`` and every profile, or its recipe removed) and that this run did
    not build: its recorded files, never one another component owns (prefix/uninstall.py)."""
    # a component of another profile stays: the prefix may hold the llama.cpp set and the
    # PyTorch libraries, each built with its own --profile
    keep = {*whole.order, *ctx.stack.order, *profile_components(whole.recipes)}
    prefix = ctx.stack.prefix
    for name in uninstall.installed_components(prefix):
        if name in keep:
            continue
        done = uninstall.uninstall(prefix, name, ctx.stack.recipes.stack.name)
        out.print(f"uninstalled {name}: no longer in the stack ({done.text()})")


def verify(ctx: BuildContext, out: Console, finished: Finished, print_report: VerifyPrinter,
           *, verify: bool) -> bool:
    """Run verify when the whole stack is built and write its build-info. Returns False
    when verify found a problem (missing code or linkage; the build then exits 4)."""
    complete, info = finished.complete, finished.info
    if complete is None or info is None:
        return True
    prefix = ctx.stack.prefix
    previous = buildinfo.read_build_info_lenient(prefix, ctx.output.say)
    nothing_ran = all(o.result in (CURRENT, SERVED) for o in ctx.outcomes)
    if (nothing_ran and previous is not None and previous.complete and previous.verified
            and previous.recipe_fingerprint == info.recipe_fingerprint):
        out.print("verify: passed before for these recipes and nothing was rebuilt")
        return True
    if not verify:
        with contextlib.suppress(OSError):  # no verify to report (bookkeeping: never fails)
            ctx.stack.work.verify_record.unlink(missing_ok=True)
        buildinfo.write_build_info(prefix, buildinfo.with_verify(
            info.finish(verified=False), buildinfo.SKIPPED, info.targets), ctx.output.say)
        out.print("[yellow]verify skipped (--no-verify)[/]: the prefix is complete but unproven")
        return True
    started_verify = time.monotonic()
    from rocbuild.checks.verify import verify_prefix

    report = verify_prefix(prefix, complete.targets, linkage_exempt=_runpath_opt_outs(complete),
                           components=records.gpu_duties(
                               prefix, (c.recipe for c in complete.selected())),
                           library_dirs=complete.base.lib_dirs if complete.base else ())
    print_report(report, out)
    record_verify(ctx, report.ok, time.monotonic() - started_verify,
                  f"lacks code for {', '.join(str(t) for t in complete.targets)} "
                  "(`rocbuild verify` lists the files); the prefix is not complete")
    done = info.finish(verified=False) if report.ok else info
    buildinfo.write_build_info(prefix, buildinfo.with_verify(
        done, buildinfo.PASSED if report.ok else buildinfo.FAILED,
        tuple(str(t) for t in complete.targets)), ctx.output.say)
    if not report.ok:
        what = []
        if not report.code_ok:
            what.append(f"lacks code for {', '.join(str(t) for t in complete.targets)}")
        if report.linkage is not None and not report.linkage.ok:
            what.append("has installed files that do not find their libraries with a bare "
                        "environment (see the linkage table)")
        out.print(f"[bold red]verify failed[/]: the stack is built but {' and '.join(what)}; "
                  "the prefix is not marked complete, so `rocbuild activate` refuses it")
    return report.ok


def _runpath_opt_outs(stack: Stack) -> dict[Path, str]:
    """Installed files of recipes that opted out of the RUNPATH, with their reason: verify
    shows them, and does not fail on them."""
    return {path: f"{comp.name}: {comp.recipe.runpath_reason}" for comp in stack.selected()
            if comp.builds and not comp.recipe.runpath
            for path in buildsystems.of(comp).installed_files(comp) or []}
