"""`rocbuild prefixes [--json]`: the prefixes rocbuild built (those holding
``.rocbuild/build-info.json``) under /opt/rocm-* and the configured prefix."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocbuild.cli.ui import console
from rocbuild.errors import ConfigError
from rocbuild.model.graph import load_stack
from rocbuild.model.settings import Settings
from rocbuild.prefix import activate
from rocbuild.prefix.buildinfo import FoundPrefix, scan_prefixes

SEARCH_DIR = Path("/opt")


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "prefixes", parents=parents, help="list the prefixes rocbuild built",
        description=f"List {SEARCH_DIR}/rocm-* and the configured prefix when they hold a "
                    "rocbuild build-info file: version, targets, whether the build completed "
                    "and was verified, and which one the stable link points at.")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--link", type=Path, default=None, metavar="PATH",
                        help=f"the stable link to mark as active (default "
                             f"{activate.DEFAULT_LINK}) [env {activate.LINK_ENV}]")
    parser.set_defaults(func=run)


def configured_prefix(settings: Settings) -> Path | None:
    if settings.prefix is not None:
        return settings.prefix
    try:
        return load_stack(settings).prefix
    except ConfigError:  # listing must work even when the recipes are broken
        return None


def entry_json(found: FoundPrefix, active: Path | None) -> dict[str, Any]:
    info = found.info
    doc: dict[str, Any] = {"prefix": str(found.path), "active": found.path == active,
                           "error": found.error}
    if info is not None:
        doc.update(version=info.version, targets=list(info.targets), complete=info.complete,
                   verified=info.verified, started=info.started, finished=info.finished,
                   rocbuild_version=info.rocbuild_version,
                   recipe_fingerprint=info.recipe_fingerprint)
    return doc


def run(args: argparse.Namespace, settings: Settings) -> int:
    link = args.link or Path(os.environ.get(activate.LINK_ENV) or activate.DEFAULT_LINK)
    extra = tuple(p for p in (configured_prefix(settings),) if p is not None)
    found = scan_prefixes(SEARCH_DIR, extra)
    target = activate.current_target(link)
    active = Path(os.path.abspath(link.parent / target)) if target is not None else None
    docs = [entry_json(f, active) for f in found]
    if args.json:
        json.dump({"link": str(link), "prefixes": docs}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    out = console()
    if not docs:
        out.print(f"no rocbuild prefixes under {SEARCH_DIR}/rocm-* or at the configured prefix")
        return 0
    # a list, not a table: a prefix path is long and must stay whole (to paste or grep), so
    # each prefix gets its own line and its facts the next one
    out.print(f"rocbuild prefixes ({escape(str(link))} points at the one marked *):")
    for doc in docs:
        state = doc["error"] or ("verified" if doc.get("verified") else
                                 "complete" if doc.get("complete") else "incomplete")
        facts = [f"ROCm {doc.get('version', '?')}", ", ".join(doc.get("targets", [])) or "?",
                 state]
        if doc.get("finished"):
            facts.append(f"finished {str(doc['finished'])[:16].replace('T', ' ')}")
        out.print(f"{'*' if doc['active'] else ' '} {escape(doc['prefix'])}")
        out.print(f"    {escape('; '.join(facts))}")
    return 0
