"""`rocbuild build [COMPONENT...]`: build (or continue building) into the prefix."""

from __future__ import annotations

import argparse
import sys

from rocbuild import cache_install, engine, prefixguard
from rocbuild.build import BuildContext, Output
from rocbuild.graph import load_stack
from rocbuild.progress import LiveOutput
from rocbuild.settings import Settings


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
    parser.add_argument(prefixguard.ALLOW_FLAG, action="store_true",
                        help="install into an existing non-empty --prefix that rocbuild did "
                             "not create (its files may be overwritten)")
    parser.set_defaults(func=run)


def make_output(args: argparse.Namespace) -> Output:
    """Bars on a terminal; plain lines (the build output too, unless --quiet) elsewhere, so
    CI logs and nohup files read well."""
    if sys.stdout.isatty() and not args.verbose:
        return LiveOutput(sys.stdout)
    return Output(sys.stdout, show_build_output=not args.quiet)


def run(args: argparse.Namespace, settings: Settings) -> int:
    stack = load_stack(settings, args.components)
    prefixguard.check(stack.prefix, allow_existing=args.allow_existing_prefix)
    ctx = BuildContext(stack=stack, settings=settings, output=make_output(args),
                       offline=args.offline)
    ctx.output.say(f"rocbuild: {len(stack.order)} components for "
                   f"{', '.join(str(t) for t in stack.targets)} into {stack.prefix} "
                   f"(workdir {stack.workdir})")
    cache_install.served(ctx)  # a bad --cache is bad input now, not an error inside doit
    components = list(args.components) or list(stack.order)
    return engine.build(ctx, components, parallel=settings.parallel,
                        keep_going=args.keep_going, verify=args.verify)
