"""`rocbuild list [COMPONENT...] [--json]`: what each prefix holds, as `spack find` does.

Per prefix (the one `--prefix` names, else every prefix this user built, prefix/registry.py,
and the configured one), read from records only (prefix/inventory.py), so it runs in a
second and never builds anything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rocbuild.cli.ui import console, plural, print_json
from rocbuild.errors import ConfigError
from rocbuild.model import layout
from rocbuild.model.graph import load_stack
from rocbuild.model.resources import format_bytes
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import Workdir, prefix_key, read_registry
from rocbuild.prefix import registry
from rocbuild.prefix.buildinfo import info_path
from rocbuild.prefix.inventory import PrefixInventory, inventory
from rocbuild.run.state import view

WIDE = 90  # columns from which the install time shows its year


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "list", parents=parents, help="what each prefix holds: components, commits, sizes",
        description="List the components installed in each prefix rocbuild built (only the "
                    "one --prefix names, when given): ref, commit, patches, size, whether it "
                    "was built here or served from the binary cache, and when.")
    parser.add_argument("components", nargs="*", metavar="COMPONENT",
                        help="only these components (default: all)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def prefixes_to_list(settings: Settings) -> list[Path]:
    """The prefix --prefix names, alone; else the configured prefix and every one in the
    user's registry that still has a build-info file. A prefix the workdir remembers
    (prefixmemo) was not named by the user: it comes first, and the others still follow."""
    remembered = settings.source("prefix").startswith(view.REMEMBERED_PREFIX)
    if settings.prefix is not None and not remembered:
        return [Path(os.path.abspath(settings.prefix))]
    found: list[Path] = []
    with contextlib.suppress(ConfigError):  # broken recipes: the registry's still list
        found.append(load_stack(settings).prefix)
    found += registry.known_prefixes()
    unique = dict.fromkeys(Path(os.path.abspath(p)) for p in found)
    # a prefix being built (its first build runs, or stopped) has install records only
    return [p for p in unique if info_path(p).exists() or layout.recorded_components(p)]


def when_text(when: float | None, *, year: bool = True) -> str:
    """The install's local time; without the year on an 80-column terminal, where ROCm's
    long names leave no room for it (JSON has the epoch seconds)."""
    fmt = "%Y-%m-%d %H:%M" if year else "%m-%d %H:%M"
    return time.strftime(fmt, time.localtime(when)) if when else "-"


def run(args: argparse.Namespace, settings: Settings) -> int:
    wanted = set(args.components)
    found = [inventory(p, _configured(settings, p)) for p in prefixes_to_list(settings)]
    for inv in found:
        inv.components[:] = [c for c in inv.components if not wanted or c.name in wanted]
    if args.json:
        print_json({"prefixes": [{**inv.to_json(), "state": _state(inv),
                                  "installing_now": view.installing_now(inv.path)}
                                 for inv in found]})
        return 0
    out = console()
    if not found or all(inv.info is None and inv.error is None and not inv.components
                        for inv in found):
        where = (f"in {settings.prefix}" if settings.prefix is not None
                 else f"in any prefix recorded in {registry.registry_path()}")
        out.print(f"nothing installed {escape(where)} yet; `rocbuild build` fills one and "
                  "`rocbuild plan` shows what it would build")
        return 0
    for i, inv in enumerate(found):
        if i:
            out.print("")
        print_prefix(inv, out)
    return 0


def _configured(settings: Settings, prefix: Path) -> Workdir | None:
    """The configuration of this workdir that builds ``prefix``, when it has one: where a
    prefix without build-info (its first build runs) finds its components' facts."""
    if prefix_key(prefix) not in read_registry(settings.workdir):
        return None
    return Workdir.for_prefix(settings.workdir, prefix)


def _state(inv: PrefixInventory) -> str:
    """One word for the prefix, in the words of `prefixes` and `status`: complete but never
    proved is "unproven"; with no build-info yet, its first build has not ended."""
    info = inv.info
    if info is None:
        return "being built" if inv.components else "no build-info file"
    return ("verified" if info.verified else "complete, unproven" if info.complete
            else "incomplete")


def print_prefix(inv: PrefixInventory, out: Console) -> None:
    out.print(f"[bold]{escape(str(inv.path))}[/]")
    info = inv.info
    total = sum(c.size for c in inv.components)
    count = f"{len(inv.components)} {plural(len(inv.components), 'component')}"
    now = view.installing_now(inv.path)
    running = f"a build is installing into it now ({now})" if now else ""
    if info is None and not inv.components:
        out.print(f"  {escape(inv.error or 'no build-info file')}")
        return
    if info is None:  # its first build runs, or stopped before its end
        out.print(f"  being built: {count} installed so far, {format_bytes(total)}; "
                  f"{escape(running or 'no build runs now: `rocbuild status` shows what is left')}")
    else:
        stack = "ROCm" if info.stack == "rocm" else info.stack
        out.print(f"  {escape(stack)} {escape(info.version)} for "
                  f"{escape(', '.join(info.targets))}; {_state(inv)}; {count}, "
                  f"{format_bytes(total)}" + (f"; {escape(running)}" if running else ""))
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    # every cell one word but the time, which wraps at its space when 80 columns are short
    # (ROCm's "rocprofiler-register" and "rocm-6.4.3" need the room)
    for column in ("component", "ref", "commit", "patches", "size", "from", "installed"):
        table.add_column(column, no_wrap=column != "installed")
    for comp in inv.components:
        patches = "?" if comp.patches is None else str(len(comp.patches))
        table.add_row(escape(comp.name), escape(comp.ref or "-"),
                      (comp.commit or "-")[:8], patches,
                      format_bytes(comp.size), comp.origin or "?",
                      when_text(comp.when, year=out.width >= WIDE))
    out.print(table)
    if info is not None and info.extra.get("workdir"):
        out.print(f"  built in {escape(str(info.extra['workdir']))}")
