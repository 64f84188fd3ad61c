"""`rocbuild activate PREFIX | --previous [--link PATH]`: switch the stable link (default
/opt/rocm) to a finished prefix, atomically, or back to the one before."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.markup import escape

from rocbuild.cli.argerrors import path_arg
from rocbuild.cli.ui import console
from rocbuild.errors import ConfigError
from rocbuild.model.settings import Settings
from rocbuild.prefix import activate, buildinfo
from rocbuild.run.state.state import prefix_lock


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "activate", parents=parents, help="point /opt/rocm (or --link) at a built prefix",
        description="Point a stable link at a prefix whose build completed and passed verify, "
                    "by an atomic rename, remembering the previous target; --previous switches "
                    "back. A prefix verify did not prove needs --unproven. A real directory at "
                    "the link path (a packaged ROCm) is never replaced.")
    which = parser.add_mutually_exclusive_group(required=True)
    # not "prefix": the global --prefix writes args.prefix too (a string)
    which.add_argument("prefix_path", nargs="?", type=path_arg, metavar="PREFIX",
                       help="the prefix to activate, e.g. /opt/rocm-6.4-gfx906")
    which.add_argument("--previous", action="store_true",
                       help="switch back to what the link pointed at before the last switch")
    parser.add_argument("--unproven", action="store_true",
                        help="accept a complete prefix that verify did not prove (built with "
                             "--no-verify, or its verify failed); `prefixes` and `status` "
                             "show it as activated unproven")
    parser.add_argument("--link", type=path_arg, default=None, metavar="PATH",
                        help=f"the stable link (default {activate.DEFAULT_LINK}) "
                             f"[env {activate.LINK_ENV}]")
    parser.set_defaults(memo_notes=False)


def link_path(args: argparse.Namespace) -> Path:
    if args.link is not None:
        return args.link.expanduser()
    from_env = os.environ.get(activate.LINK_ENV)
    return Path(from_env).expanduser() if from_env else activate.DEFAULT_LINK


def run(args: argparse.Namespace, settings: Settings) -> int:
    link = link_path(args)
    target = (activate.previous_target(link) if args.previous
              else args.prefix_path.expanduser() if args.prefix_path is not None else None)
    if target is None:  # pragma: no cover - argparse requires one of them
        raise ConfigError("name a PREFIX or --previous")
    # a build installing into the prefix holds its lock: busy (exit 3, naming it), and no
    # install starts while the link moves
    with prefix_lock(Path(os.path.abspath(target)), create=False):
        if args.previous:
            switch = activate.activate_previous(link, unproven=args.unproven)
        else:
            switch = activate.activate(target, link, unproven=args.unproven)
    out = console()
    if switch.warning:
        out.print(escape(switch.warning))
    if switch.removed_stray:
        out.print(f"removed {escape(str(activate.temp_link_path(switch.link)))}, left by an "
                  "interrupted switch")
    targets = ", ".join(switch.info.targets)
    if switch.previous == switch.target:
        out.print(f"{escape(str(switch.link))} already points at {escape(str(switch.target))}")
    else:
        before = f" (was {escape(str(switch.previous))})" if switch.previous else ""
        out.print(f"{escape(str(switch.link))} -> {escape(str(switch.target))}{before}")
    if switch.unproven:
        out.print(f"[yellow]unproven[/]: {escape(buildinfo.unproven_why(switch.info))} "
                  "(--unproven); `rocbuild prefixes` marks it so")
    out.print(f"{escape(buildinfo.title_of(switch.info))} {escape(switch.info.version)} for "
              f"{escape(targets)}; load it with:")
    # through the link: the line a shell profile keeps follows the next switch
    out.print(f"  . {escape(str(switch.link))}/env.sh", soft_wrap=True)
    return 0
