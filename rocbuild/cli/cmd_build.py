"""`rocbuild build [COMPONENT...]`: build (or continue building) into the prefix."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rocbuild.cli import ui
from rocbuild.cli.output import FittedOutput, Output
from rocbuild.errors import RocbuildError
from rocbuild.model import wording
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.prefix import prefixguard
from rocbuild.run.engine import cache_install, continuation, engine, lifecycle
from rocbuild.run.engine.build import BuildContext
from rocbuild.run.state import basememo

if TYPE_CHECKING:
    from rich.console import Console

    from rocbuild.checks.verify import VerifyReport


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "build", parents=parents, help="build the stack (run it again after any failure)",
        description="Fetch, patch, configure, compile and install each component with "
                    "everything it needs. Finished steps are kept: after a failure or a kill, "
                    "the same command continues where it stopped.")
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help="components to build (default: the whole stack)")
    parser.add_argument("--keep-going", action="store_true",
                        help="after a failure, go on with what does not depend on it")
    parser.add_argument("--quiet", action="store_true",
                        help="show rocbuild's step lines only, not the build output (it is "
                             "always in the logs)")
    parser.add_argument("--verbose", action="store_true",
                        help="on a terminal, stream the build output instead of progress bars")
    parser.add_argument("--no-verify", dest="verify", action="store_false",
                        help="do not check the installed libraries for GPU code at the end "
                             "(the prefix is then complete but unproven)")
    parser.add_argument("--offline", action="store_true",
                        help="never download: use the source cache and mirrors only")
    parser.add_argument("--allow-unsigned", action="store_true",
                        help="with --cache: also install artifacts that are unsigned or signed "
                             "by a key you do not trust (a signature that does not match is "
                             "refused anyway)")
    parser.add_argument(prefixguard.ALLOW_FLAG, action="store_true",
                        help="install into an existing non-empty --prefix that rocbuild did "
                             "not create (its files may be overwritten)")
    parser.add_argument("--json", action="store_true",
                        help="at the end, print the run's outcome as JSON on stdout (steps, "
                             "durations, results, logs, causes); step lines go to stderr")


def make_output(args: argparse.Namespace) -> Output:
    """Bars on a terminal; plain lines (the build output too, unless --quiet) elsewhere, so
    CI logs and nohup files read well."""
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout  # stdout: the JSON
    if stream.isatty() and not args.verbose and stream is sys.stdout:
        from rocbuild.cli.progress import LiveOutput  # rich's live display: terminals only

        return LiveOutput(sys.stdout)
    if stream.isatty():  # --verbose (or --json's lines): the same lines, fitted
        return FittedOutput(stream, show_build_output=not args.quiet)
    return Output(stream, show_build_output=not args.quiet)


def expected_steps(ctx: BuildContext) -> dict[tuple[str, str], float | None]:
    """The steps this run will start (the up-to-date rule's ``next_runs``, which status's
    "not done" is made of; without status's reasons and records) with each one's expected
    seconds, for the whole-run ETA. A component the binary cache serves runs its cache step
    only: a download, with no build time to expect."""
    served = cache_install.served(ctx)
    expected: dict[tuple[str, str], float | None] = {}
    for (name, step), will_run in ctx.rule.next_runs(ctx.stack.selected()).items():
        if not will_run:
            continue
        if name in served:
            expected[(name, "cache")] = None
        else:
            expected[(name, step)] = ctx.expected_seconds(ctx.component(name), step)
    return expected


def _print_verify(report: VerifyReport, out: Console) -> None:
    from rocbuild.cli import cmd_verify  # the checks it draws are imported when verify ran

    cmd_verify.print_report(report, out)


def reports() -> lifecycle.Reports:
    """How a build's end is shown: ui's summary table and the verify command's report."""
    return lifecycle.Reports(summary=ui.print_build_summary, verify=_print_verify)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings, args.components)
    # the whole default set, once: the end of the run tells whether all of it is built
    whole = load_stack(settings) if args.components else stack
    basememo.save_code_memo(settings.workdir, whole.base)  # what the base audit read
    prefixguard.check(stack.prefix, allow_existing=args.allow_existing_prefix,
                      workdir=stack.workdir)
    ctx = BuildContext.start(stack=stack, settings=settings, output=make_output(args),
                       offline=args.offline,
                       command=continuation.command_line(getattr(args, "argv", []), settings))
    ctx.output.say(f"rocbuild: {wording.count(len(stack.order), 'component')} for "
                   f"{', '.join(str(t) for t in stack.targets)} into {stack.prefix} "
                   f"(workdir {stack.workdir})")
    if settings.cache:  # a bad --cache is bad input now, not an error inside doit
        from rocbuild.run.cache.choice import Trust

        cache_install.served(ctx, Trust.default(args.allow_unsigned))
    components = list(args.components) or list(stack.order)
    ctx.output.run_planned(expected_steps(ctx))
    if not args.json:
        return engine.build(ctx, components, whole, reports(), parallel=settings.parallel,
                            keep_going=args.keep_going, verify=args.verify,
                            out=ui.console(ctx.output.stream, stamped=True))
    from rocbuild.cli import build_report  # --json only

    summary = ui.console(sys.stderr, stamped=True)
    try:
        code = engine.build(ctx, components, whole, reports(), parallel=settings.parallel,
                            keep_going=args.keep_going, verify=args.verify, out=summary)
    except RocbuildError as exc:  # busy, preflight: still one document for the script
        code = exc.exit_code
        ui.print_json(build_report.to_json(ctx, code))
        raise
    ui.print_json(build_report.to_json(ctx, code))
    return code
