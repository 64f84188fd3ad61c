"""After the last install: environment files, build-info, and verify as the build's last step.

A build counts as complete only when every component of the stack is installed and current
and ``verify`` found code for every target (or the user said ``--no-verify``); only then does
build-info say ``complete``, which ``rocbuild activate`` requires.
"""

from __future__ import annotations

from rich.console import Console

from rocbuild import buildinfo, envfiles
from rocbuild.build import BuildContext
from rocbuild.graph import load_stack
from rocbuild.steps import steps_of
from rocbuild.verify import verify_prefix


def whole_stack_current(ctx: BuildContext) -> bool:
    """Every step of every component in the stack's default set is current (this run may
    have built only a part; earlier runs may have built the rest)."""
    full = BuildContext(stack=load_stack(ctx.settings), settings=ctx.settings,
                        output=ctx.output)
    return all(full.is_current(c, step) for c in full.stack.selected() for step in steps_of(c))


def finish(ctx: BuildContext, out: Console, *, verify: bool, started: str) -> bool:
    """Write env files and build-info; run verify when the whole stack is built. Returns
    False when verify found a missing code object (the build then exits 1)."""
    stack = ctx.stack
    written = envfiles.write_env_files(envfiles.spec_for(stack))
    out.print(f"environment: source {written[0]}", soft_wrap=True)
    commits = {c.name: (ctx.state.read_stamp(c.name, "fetch") or {}).get("commit")
               for c in stack.selected() if c.owns_checkout}
    info = buildinfo.new_build_info(stack, commits={k: v for k, v in commits.items() if v},
                                    started=started)
    if not whole_stack_current(ctx):
        buildinfo.write_build_info(stack.prefix, info)
        out.print("build-info: part of the stack is built; run `rocbuild build` for the rest")
        return True
    previous = buildinfo.read_build_info(stack.prefix)
    nothing_ran = all(o.result == "current" for o in ctx.outcomes)
    if (nothing_ran and previous is not None and previous.complete and previous.verified
            and previous.recipe_fingerprint == info.recipe_fingerprint):
        out.print("verify: passed before for these recipes and nothing was rebuilt")
        return True
    if not verify:
        buildinfo.write_build_info(stack.prefix, info.finish(verified=False))
        out.print("[yellow]verify skipped (--no-verify)[/]: the prefix is complete but unproven")
        return True
    from rocbuild.cmd_verify import print_report  # rendering lives with the verify command

    report = verify_prefix(stack.prefix, stack.targets)
    print_report(report, out)
    buildinfo.write_build_info(stack.prefix, info.finish(verified=report.ok) if report.ok
                               else info)
    if not report.ok:
        out.print("[bold red]verify failed[/]: the stack is built but lacks code for "
                  f"{', '.join(str(t) for t in stack.targets)}; the prefix is not marked "
                  "complete, so `rocbuild activate` refuses it")
    return report.ok
