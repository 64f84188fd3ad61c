"""`rocbuild prefixes [--json]`: every prefix rocbuild built or activated for this user (the
registry, prefix/registry.py), plus /opt/rocm-* and the configured prefix when they hold a
build-info file, with what each holds and which links point at it."""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path
from typing import Any

from rich.markup import escape

from rocbuild.cli import clean
from rocbuild.cli.argerrors import path_arg
from rocbuild.cli.ui import console, glue, print_json
from rocbuild.errors import ConfigError
from rocbuild.files import remove_in_place
from rocbuild.model.graph import load_stack
from rocbuild.model.layout import INFO_DIR
from rocbuild.model.resources import format_bytes
from rocbuild.model.settings import Settings
from rocbuild.prefix import activate, buildinfo, prefixguard, registry, uninstall
from rocbuild.prefix.activate import target_of
from rocbuild.prefix.buildinfo import FoundPrefix, scan_prefixes
from rocbuild.run.state import workdirs
from rocbuild.run.state.state import prefix_lock

SEARCH_DIR = Path("/opt")


def register(sub: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "prefixes", parents=parents, help="list the prefixes rocbuild built",
        description="List every prefix rocbuild built or activated for this user (recorded "
                    f"in {registry.registry_path()}), and {SEARCH_DIR}/rocm-* and the "
                    "configured prefix when they hold a rocbuild build-info file: series, "
                    "targets, base, whether the build completed and was verified, which "
                    "workdir filled it, and which links point at it (the one marked * is "
                    "where the stable link points).")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--link", type=path_arg, default=None, metavar="PATH",
                        help=f"the stable link to mark as active (default "
                             f"{activate.DEFAULT_LINK}) [env {activate.LINK_ENV}]")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--forget", type=path_arg, metavar="PREFIX",
                      help="take PREFIX off the list (its files stay)")
    what.add_argument("--remove", type=path_arg, metavar="PREFIX",
                      help="delete PREFIX: only a prefix rocbuild built, holding nothing but "
                           "what its components installed, that no link points at")


def configured_prefix(settings: Settings) -> Path | None:
    if settings.prefix is not None:
        return settings.prefix
    try:
        return load_stack(settings).prefix
    except ConfigError:  # listing must work even when the recipes are broken
        return None


def entry_json(found: FoundPrefix, active: set[Path],
               links: dict[Path, list[tuple[Path, bool]]]) -> dict[str, Any]:
    info = found.info
    pointing = links.get(found.path, [])
    doc: dict[str, Any] = {"prefix": str(found.path), "active": found.path in active,
                           "links": [str(link) for link, _ in pointing],
                           "activated_unproven": any(unproven for _, unproven in pointing),
                           "error": found.error}
    if info is not None:
        base = info.extra.get("base")
        doc.update(stack=info.stack, title=buildinfo.title_of(info), version=info.version,
                   series=info.series, targets=list(info.targets),
                   base=base.get("path") if isinstance(base, dict) else None,
                   complete=info.complete, verified=info.verified,
                   unproven=info.complete and not info.verified,
                   verify=info.extra.get(buildinfo.VERIFY_FIELD),
                   unproven_why=(buildinfo.unproven_why(info)
                                 if info.complete and not info.verified else None),
                   workdir=info.extra.get("workdir"),
                   configuration=info.extra.get("configuration"),
                   started=info.started, finished=info.finished,
                   rocbuild_version=info.rocbuild_version,
                   recipe_fingerprint=info.recipe_fingerprint)
    return doc


def _state(doc: dict[str, Any]) -> str:
    if doc["error"]:
        return str(doc["error"])
    if doc.get("verified"):
        return "verified"
    if "complete" not in doc:  # install records, no build-info: its first build has not ended
        return "being built (its first build runs, or stopped: `rocbuild list` shows what it holds)"
    return f"complete, unproven: {doc['unproven_why']}" if doc.get("complete") else "incomplete"


def active_links(link: Path, given: bool) -> list[Path]:
    """The stable links that make a prefix active: the one --link (or ROCBUILD_LINK) names;
    without one, the default link and every link `activate` switched (`activate P --link L`
    makes L one of the user's stable links)."""
    if given:
        return [link]
    pointing = [each for each in sorted({*registry.known_links(), link})
                if target_of(each) is not None]
    return pointing or [link]


def active_text(links: list[Path], found: list[FoundPrefix]) -> str:
    """What the stable links say about the list ("points at the one marked *" only when
    a link marks one)."""
    listed = {f.path for f in found}
    marked = [each for each in links if target_of(each) in listed]
    if len(marked) == 1:
        return f"{marked[0]} points at the one marked *"
    if marked:
        return f"{', '.join(map(str, marked))} point at the ones marked *"
    link = links[0]
    active = target_of(link)
    if active is not None:
        return f"{link} points at {active}, not one of these"
    if link.exists():
        return f"{link} is not a link, so none of these is active"
    command = activate.activate_command(link, "PREFIX")
    return f"none is active: {link} does not exist; {glue(f'`{command}`')} makes it"


def run(args: argparse.Namespace, settings: Settings) -> int:
    given = args.link or os.environ.get(activate.LINK_ENV)
    link = Path(os.path.abspath(Path(given or activate.DEFAULT_LINK).expanduser()))
    if args.forget is not None:
        return forget(Path(os.path.abspath(args.forget)))
    if args.remove is not None:
        return remove(Path(os.path.abspath(args.remove)), link)
    recorded_links = registry.known_links()
    # every link that points at a prefix now: the recorded ones, and the one asked about
    links: dict[Path, list[tuple[Path, bool]]] = {}
    for each in sorted({*recorded_links, link}):
        target = target_of(each)
        if target is not None:
            # --unproven counts only while the link still points where it was recorded
            state = activate.read_state(each)
            unproven = bool(state and state.unproven and state.current is not None
                            and Path(os.path.abspath(each.parent / state.current)) == target)
            links.setdefault(target, []).append((each, unproven))
    extra = (*(p for p in (configured_prefix(settings),) if p is not None),
             *registry.known_prefixes(), *links)
    found = scan_prefixes(SEARCH_DIR, tuple(extra))
    stable = active_links(link, bool(given))
    active = {target for each in stable if (target := target_of(each)) is not None}
    docs = [entry_json(f, active, links) for f in found]
    if args.json:
        print_json({"link": str(link), "active_links": [str(each) for each in stable
                                                        if target_of(each) is not None],
                    "registry": str(registry.registry_path()),
                    "prefixes": docs})
        return 0
    out = console()
    if not docs:
        out.print(f"no rocbuild prefixes: none recorded in {registry.registry_path()}, none "
                  f"under {SEARCH_DIR}/rocm-* or at the configured prefix")
        return 0
    # a list, not a table: a prefix path is long and must stay whole (to paste or grep), so
    # each prefix gets its own line and its facts the next ones
    out.print(f"rocbuild prefixes ({escape(active_text(stable, found))}):")
    for where, doc in zip(found, docs, strict=True):
        facts = [f"{doc.get('title', 'ROCm')} {doc.get('version', '?')}",
                 ", ".join(doc.get("targets", [])) or "?",
                 _state(doc)]
        if doc.get("base"):
            facts.append(f"on the base {doc['base']}")
        if doc.get("finished"):
            facts.append(glue(f"finished {str(doc['finished'])[:16].replace('T', ' ')}"))
        out.print(f"{'*' if doc['active'] else ' '} {escape(doc['prefix'])}")
        out.print(f"    {escape('; '.join(facts))}")
        if doc.get("workdir"):
            out.print(f"    built in {escape(str(doc['workdir']))}")
        for each, unproven in links.get(where.path, []):
            note = " (activated with --unproven)" if unproven else ""
            out.print(f"    {escape(str(each))} points here{note}")
    return 0


def forget(prefix: Path) -> int:
    """Take ``prefix`` off the registry; nothing on disk changes."""
    if str(prefix) not in {str(p) for p in registry.known_prefixes()}:
        raise ConfigError(f"{prefix} is not on the list ({registry.registry_path()})",
                          tip="`rocbuild prefixes` shows the list")
    registry.forget(prefix)
    console().print(f"forgot {escape(str(prefix))}: it is off the list; its files are "
                    "untouched (`rocbuild prefixes --remove` deletes a prefix)")
    return 0


def _remove_marker_last(prefix: Path) -> None:
    """Remove ``prefix`` with its marker (``.rocbuild/``: build-info and install records)
    last, so a removal a kill cut short is still a prefix rocbuild built, holding only what
    its records name, and the same command finishes it (rmtree's order may take the marker
    first, and the rest would then be refused for good)."""
    for entry in sorted(prefix.iterdir()):
        if entry.name == INFO_DIR:
            continue
        remove_in_place(entry)
    shutil.rmtree(prefix / INFO_DIR)
    prefix.rmdir()


def _left_by_a_killed_remove(prefix: Path) -> bool:
    """An empty folder: what a removal a kill stopped after the marker leaves (the prefix's
    own folder goes last)."""
    if prefix.is_symlink():
        return False
    try:
        return prefix.is_dir() and next(prefix.iterdir(), None) is None
    except OSError:
        return False


def remove(prefix: Path, link: Path) -> int:
    """Delete a prefix rocbuild built, after the checks that it is rocbuild's alone and
    unused: its marker and build-info, no file that no install record holds, no link
    pointing at it, no build installing into it (the prefix lock)."""
    listed = str(prefix) in {str(p) for p in registry.known_prefixes()}
    if not (prefix.exists() or prefix.is_symlink()):  # removing is done: say it, exit 0
        if listed:
            registry.forget(prefix)
        console().print(f"nothing to remove: {escape(str(prefix))} does not exist"
                        + ("; it is off the list now" if listed else ""))
        return 0
    if listed and _left_by_a_killed_remove(prefix):
        prefix.rmdir()
        registry.forget(prefix)
        console().print(f"finished removing {escape(str(prefix))} (an earlier --remove was "
                        "interrupted); it is off the list")
        return 0
    if prefix.is_symlink():  # rmtree refuses a link (a traceback), and a link is not a prefix
        target = Path(os.path.realpath(prefix))
        raise ConfigError(f"{prefix} is a link (to {target}), not a prefix; rocbuild removes "
                          "a prefix by its own path, never through a link",
                          tip=f"rocbuild prefixes --remove {target}, after pointing {prefix} "
                              "elsewhere (or removing it)" if prefixguard.is_ours(target)
                          else f"remove the link {prefix} yourself if you mean it")
    if not prefixguard.is_ours(prefix):
        raise ConfigError(f"{prefix} is not a prefix rocbuild built (no {INFO_DIR}/ in it); "
                          "rocbuild removes only its own", tip="remove it yourself if you mean it")
    info = buildinfo.read_build_info(prefix)
    stack_name = info.stack if info is not None else "rocm"
    pointing = activate.links_to(prefix, also=[link])
    if pointing:
        # the command names each link: without its --link it would make /opt/rocm instead
        commands = "; ".join(f"`{activate.activate_command(each)}`" for each in pointing)
        raise ConfigError(f"{', '.join(map(str, pointing))} "
                          f"{'points' if len(pointing) == 1 else 'point'} at {prefix}; "
                          "removing it would leave a dangling link",
                          tip=f"point {'it' if len(pointing) == 1 else 'them'} elsewhere "
                              f"first: {commands}")
    foreign = uninstall.foreign_files(prefix, stack_name)
    if foreign:
        raise ConfigError(f"{prefix} holds files no component installed ({', '.join(foreign)}"
                          f"{', …' if len(foreign) >= 5 else ''}); rocbuild removes only what "
                          "it put there", tip=f"move those files out of {prefix} first, or "
                                              "remove the prefix yourself")
    size = clean.tree_size(prefix)
    with prefix_lock(prefix, create=False):  # refused (exit 3) while a build installs there
        _remove_marker_last(prefix)
    owner = info.extra.get("workdir") if info is not None else None
    if isinstance(owner, str) and owner:
        workdirs.release(Path(owner), prefix)  # the workdir no longer builds into it
    registry.forget(prefix)  # last: while listed, a rerun knows it was removing this
    console().print(f"removed {escape(str(prefix))} ({format_bytes(size)}); it is off the list")
    return 0
