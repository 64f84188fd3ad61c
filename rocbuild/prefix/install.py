"""Installing into the prefix, one place for the build and the cache alike: ``install``.

Its sequence, under ``INSTALLING`` (one install at a time): ``begin_install`` (the prefix
claimed, no link in it leading out, not complete meanwhile); the caller's ``place`` puts the
files there (the build system's install, or an artifact's files: run/cache/unpack.py), calling
``Placing.remove_previous`` when its files may replace the last install's; ``install_extras``
(the recipe's links and files); ``finish_install``: every path it wrote must lie inside, be
none of rocbuild's own files and none of another component's (unless its recipe says
``install.overwrites = ["other"]``), all compared where the paths really land, and only then
is it recorded (records.py). Extras an earlier install declared and the recipe no longer does
go. A transactional install (the cache's) saves every entry it replaces first
(transaction.py) and commits, or rolls back on any error or refusal; a kill is rolled back by
the next run. uninstall.py takes a component out through the same records.

Writing extras never follows a link out of the prefix: every existing parent folder of a
path is resolved and must stay inside, a link's target must resolve inside, and a file is
written through a temp file opened with O_NOFOLLOW and renamed over the old entry (a link in
the way is replaced, never written through). Knows nothing of doit.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from rocbuild.errors import BuildFailed
from rocbuild.files import write_json_atomic
from rocbuild.model import buildsystems, layout, wording
from rocbuild.model.graph import Component, Stack
from rocbuild.model.layout import INFO_DIR, INFO_FILE
from rocbuild.model.paths import resolves_within, within
from rocbuild.prefix import buildinfo, prefixguard, records
from rocbuild.prefix.realpaths import RealPaths
from rocbuild.prefix.transaction import Transaction

Logger = Callable[[str], None]
EXTRA_TMP_SUFFIX = ".rocbuild-tmp"  # an extra is written to ``.<name>.rocbuild-tmp`` first
# one install into the prefix at a time (doit's --parallel runs steps in threads): what an
# install left is read off the prefix before and after it (``records.snapshot``), so no other
# install may write meanwhile
INSTALLING = threading.Lock()


@dataclass
class Placing:
    """What ``install`` hands the caller's ``place``: the undo log of a transactional install
    (None for the build's), and the removal of the component's previous install."""

    stack: Stack
    comp: Component
    log: Logger
    txn: Transaction | None

    def held(self) -> set[str]:
        """The real prefix-relative paths other components' records hold."""
        return claimed_by_others(self.stack.prefix, self.comp, self.stack.order)

    def remove_previous(self) -> None:
        """``remove_previous_install``, each removed entry saved first in a transaction."""
        save = self.txn.save_path if self.txn is not None else (lambda _path: None)
        remove_previous_install(self.stack, self.comp, self.log, before_remove=save)


def install(stack: Stack, comp: Component, log: Logger,
            place: Callable[[Placing], Iterable[str]], *, transaction: bool = False) -> None:
    """Install ``comp`` into the prefix (the sequence is the module's). ``place`` puts the
    files there and returns what it left beyond the build system's record of them
    (``records.left_by_install``). With ``transaction``, any error or refusal leaves the prefix
    as it was (raised again after the rollback)."""
    prefix = stack.prefix
    with INSTALLING:
        txn = Transaction.begin(prefix) if transaction else None
        try:
            if txn is not None:  # the prefix's files this install writes besides the placed ones
                txn.save(f"{INFO_DIR}/{INFO_FILE}")  # marked incomplete meanwhile
                txn.save(records.record_path(prefix, comp.name).relative_to(prefix).as_posix())
            begin_install(prefix, comp)
            left = place(Placing(stack, comp, log, txn))
            if txn is not None:
                real = RealPaths(prefix)
                for rel, _ in (*comp.install_links, *comp.install_files):
                    if (where := real.of(rel)) is not None:
                        txn.save(where)
            install_extras(stack, comp, log)
            finish_install(stack, comp, log, left)
        except BaseException:
            if txn is not None:
                txn.rollback()
            raise
        if txn is not None:
            txn.commit()


def checked_path(prefix: Path, rel: str, component: str) -> Path:
    """``prefix/rel`` after checking that no existing folder on the way is a link out of the
    prefix (one component's link must not make another's write land outside)."""
    root = prefix.resolve()
    current = prefix
    for part in PurePosixPath(rel).parent.parts:
        current = current / part
        if (current.is_symlink() or current.exists()) and not resolves_within(current, root):
            raise BuildFailed(
                f"{component}: {prefix / rel} would be written through {current}, which leads "
                f"outside the prefix (to {os.path.realpath(current)})",
                tip=f"remove the link {current} (rocbuild never writes outside {prefix})")
    return prefix / rel


def _write_file(path: Path, text: str, component: str) -> None:
    if path.is_dir() and not path.is_symlink():
        raise BuildFailed(f"{component}: cannot write the file {path}: a folder is in the way",
                          tip=f"move {path} away, or fix install.files in {component}'s recipe")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}{EXTRA_TMP_SUFFIX}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # left by a kill; never written through (it could be a link)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)  # replaces a link in the way, never follows it


def install_extras(stack: Stack, comp: Component, log: Logger) -> None:
    """The links and files a recipe declares (what AMD's packages add after install, e.g.
    <prefix>/llvm -> lib/llvm, bin/amdclang++, clang config files). Each is checked where it
    really lands before it is written: not on a file this component's CMake install wrote,
    another of its extras or a file of one of ``others`` (unless install.overwrites names
    it), and not on one of rocbuild's own files (model/layout.py)."""
    prefix, reserved = stack.prefix, layout.reserved_roots(stack.recipes.stack.name)
    root = prefix.resolve()
    claims = _Claims(prefix, comp, stack.order)
    for rel, target in comp.install_links:
        path = checked_path(prefix, rel, comp.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not resolves_within(path.parent / target, root):
            raise BuildFailed(f"{comp.name}: the link {path} -> {target} would lead outside "
                              f"the prefix (to {os.path.realpath(path.parent / target)})",
                              tip=f"point install.links.\"{rel}\" in {comp.recipe.file} at a "
                                  "path inside the prefix")
        claims.check(f'install.links."{rel}"', rel, reserved)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            raise BuildFailed(f"{comp.name}: cannot create the link {path}: a folder is "
                              "in the way", tip=f"move {path} away and run the build again")
        path.symlink_to(target)
        log(f"link {path} -> {target}")
    for rel, text in comp.install_files:
        path = checked_path(prefix, rel, comp.name)
        claims.check(f'install.files."{rel}"', rel, reserved)
        _write_file(path, text, comp.name)
        log(f"wrote {path}")


class _Claims:
    """Who holds each real path of the prefix, for the extras of ``comp`` about to be
    written: its own CMake install, its extras written so far, the other components."""

    def __init__(self, prefix: Path, comp: Component, others: Iterable[str]) -> None:
        self.prefix, self.comp, self.real = prefix, comp, RealPaths(prefix)
        self.held: dict[str, tuple[str, str]] = {}  # real path -> (who, entry as written)
        for entry in sorted(_manifest(comp, prefix)):
            self._hold(entry, f"{comp.name}'s CMake install")
        for other in others_of(prefix, comp, others):
            for entry in sorted(records.installed_by(prefix, other)):
                self._hold(entry, other)

    def _hold(self, entry: str, who: str) -> None:
        real = self.real.of(entry)
        if real is not None:
            self.held.setdefault(real, (who, entry))

    def check(self, key: str, rel: str, reserved: tuple[str, ...]) -> None:
        self.real = RealPaths(self.prefix)  # links written just before count
        real = self.real.of(rel)
        where = self.real.shown(rel)
        root = layout.reserved_by(real, reserved) if real is not None else None
        if root is not None:
            raise BuildFailed(f"{self.comp.name}: {key} would write {where}, which is "
                              f"rocbuild's own ({root})",
                              tip=f"choose another path in {self.comp.recipe.file}")
        if real is not None and real in self.held:
            who, entry = self.held[real]
            raise BuildFailed(
                f"{self.comp.name}: {key} would overwrite {entry} of {who}: {where} is the same "
                f"file; nothing was written", tip=f"choose another path in "
                f"{self.comp.recipe.file}, or if {self.comp.name} is meant to replace another "
                "component's file, name it in install.overwrites")
        if real is not None:
            self.held[real] = (f"{self.comp.name}'s {key}", rel)


def links_out_of(prefix: Path) -> list[Path]:
    """Links to folders outside the prefix (a CMake install can make one; no recipe check
    sees it): anything installed below one would land outside."""
    root, found = prefix.resolve(), []
    for folder, dirs, files in os.walk(prefix):  # never follows links
        for name in (*dirs, *files):
            path = Path(folder) / name
            if path.is_symlink() and path.is_dir() and not resolves_within(path, root):
                found.append(path)
    return found


def begin_install(prefix: Path, comp: Component) -> None:
    """Before files are removed or replaced: the prefix is rocbuild's from its first install on
    (prefixguard.claim), no link in it may lead out of it, and a complete prefix stops
    claiming to be complete."""
    prefixguard.claim(prefix)
    escaping = links_out_of(prefix) if prefix.is_dir() else []
    if escaping:
        link = escaping[0]
        rel = link.relative_to(prefix).as_posix()
        owners = [c for c in layout.recorded_components(prefix)
                  if rel in records.installed_by(prefix, c)]
        by = f" (installed by {', '.join(owners)})" if owners else ""
        raise BuildFailed(
            f"{comp.name}: not installing: {link}{by} is a link which leads outside the prefix "
            f"(to {os.path.realpath(link)}), so an install could write there",
            tip=f"remove {link} and fix what installs it; rocbuild never writes outside {prefix}")
    buildinfo.mark_incomplete(prefix)



def remove_previous_install(stack: Stack, comp: Component, log: Logger,
                            before_remove: Callable[[Path], None] = lambda _: None) -> None:
    """Remove what this component installed last time before installing again: CMake
    skips a file whose time matches to the second ("Up-to-date"), so a quick rebuild could
    keep the old library, and files a new version no longer installs would linger and
    shadow the right ones. Only files inside the prefix are touched; ``before_remove`` sees
    each one first (a cache install saves it for a rollback)."""
    installed = buildsystems.of(comp).installed_files(comp) if comp.builds else None
    if installed is None:  # never installed (a source-only component never is)
        return
    # and what the last install left beyond its manifest (its ownership record's files:
    # a link an install(CODE) made), so that the new install makes them afresh as well
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    listed = {str(p) for p in installed}
    installed = [*installed, *(stack.prefix / rel for rel in sorted(
        records.installed_by(stack.prefix, comp.name) - extras)
        if str(stack.prefix / rel) not in listed)]
    real = RealPaths(stack.prefix)  # links may point anywhere
    # a path that leads, through a link, to another component's file is not this one's
    theirs = claimed_by_others(stack.prefix, comp, stack.order)
    removed = 0
    for path in installed:
        rel = os.path.relpath(path, stack.prefix)
        where = real.of(rel)
        if where in theirs and where != rel:
            log(f"kept {path}: through a link it is {Path(real.root, where)}, another "
                "component's file")
            continue
        if where is not None and (path.is_symlink() or path.is_file()):
            before_remove(path)
            path.unlink()
            removed += 1
    log(f"removed {wording.count(removed, 'file')} of the previous install of {comp.name}")


def others_of(prefix: Path, comp: Component, others: Iterable[str]) -> list[str]:
    """The components whose files ``comp`` may not touch: ``others`` (the run's stack) and
    every component the prefix holds a record of, this run's or not (``build alpha`` into a
    prefix that also holds delta, which alpha does not need: an artifact of alpha carrying
    delta's header overwrote it), less ``comp`` and what its install.overwrites names."""
    return sorted((set(others) | set(layout.recorded_components(prefix))) - {comp.name}
                  - set(comp.recipe.install_overwrites))


def _manifest(comp: Component, prefix: Path) -> set[str]:
    """The prefix-relative entries of what the component's build system recorded as
    installed (CMake's install_manifest.txt). An entry outside the prefix (``install(FILES x
    DESTINATION /abs/path)``) fails the install naming it: rocbuild installs nothing outside
    the prefix, and an ownership record of only the entries inside would hide the write."""
    if not comp.builds:  # a source-only component installs nothing (from the cache neither)
        return set()
    system = buildsystems.of(comp)
    lines = [str(path) for path in system.installed_files(comp) or []]
    real = RealPaths(prefix)
    outside = [line for line in lines
               if not within(line, prefix) or line == str(prefix)
               or real.of(os.path.relpath(line, prefix)) is None]
    if outside:
        shown = ", ".join(outside[:5]) + (f" and {len(outside) - 5} more" if len(outside) > 5
                                          else "")
        raise BuildFailed(
            f"{comp.name}: its {system.title or system.kind} install wrote {len(outside)} "
            "path(s) outside the prefix "
            f"{prefix}: {shown} (listed in {system.installed_record(comp)})",
            tip=f"the project installs to an absolute path (install(... DESTINATION /...)) or "
                f"through a link out of the prefix: fix it with a patch in patches/{comp.checkout}/"
                f" or a CMake option in {comp.recipe.file}, then remove what it wrote there")
    return {os.path.relpath(line, prefix) for line in lines}


def claimed_by_others(prefix: Path, comp: Component, others: Iterable[str]) -> set[str]:
    """The real prefix-relative paths the other components' records hold (for the removal of
    a component's previous install: a path of its old manifest that leads, through a link,
    to another component's file is not its own to remove)."""
    return records.held_by(prefix, others_of(prefix, comp, others))


def _remove_dropped_extras(prefix: Path, comp: Component, wanted: set[str], log: Logger) -> None:
    """Remove the links and files an earlier install of this recipe declared and it no
    longer does (CMake's own files are removed before each install by the build)."""
    for rel in sorted(records.recorded(prefix, comp.name, "extras") - wanted):
        path = checked_path(prefix, rel, comp.name)
        if path.is_symlink() or path.is_file():
            path.unlink()
            log(f"removed {path}: no longer in the recipe's [install] tables")


def finish_install(stack: Stack, comp: Component, log: Logger,
                   left: Iterable[str] = ()) -> None:
    """After ``cmake --install`` and the extras: drop extras the recipe no longer declares,
    refuse a path outside the prefix, one of rocbuild's own files, two entries that are one
    file, and an overwrite of another component's files (the stack's and every one the
    prefix records; unless declared), all compared where the paths really land (through
    links in the prefix), then record what this one installed, as its manifest and recipe
    name the entries. ``left``: what the install left in the prefix besides its manifest
    (``records.left_by_install``)."""
    prefix, others = stack.prefix, stack.order
    reserved = layout.reserved_roots(stack.recipes.stack.name)
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    _remove_dropped_extras(prefix, comp, extras, log)
    mine = _manifest(comp, prefix) | extras
    real = RealPaths(prefix)
    # what the install left beyond them, as the prefix spells it (real folders): a file the
    # manifest names through a link is the manifest's entry already
    named = {real.of(rel) for rel in mine}
    mine |= {rel for rel in left if rel not in named}
    by_real: dict[str, str] = {}
    for rel in sorted(mine):
        where = real.of(rel)
        if where is None:
            raise BuildFailed(f"{comp.name}: {prefix / rel} leads outside the prefix through a "
                              "link", tip=f"remove the link on the way to {prefix / rel}")
        root = layout.reserved_by(where, reserved)
        if root is not None:
            raise BuildFailed(
                f"{comp.name}: its install wrote {real.shown(rel)}, which is rocbuild's own "
                f"file ({root}: the env files, modulefiles and .rocbuild/ are rocbuild's)",
                tip=f"change the install destination of {comp.name} (a patch or an option in "
                    f"{comp.recipe.file}); rocbuild writes its own files again at the end of "
                    "the build")
        if where in by_real:
            raise BuildFailed(
                f"{comp.name}: {by_real[where]} and {rel} are one file ({where}, through a "
                "link in the prefix): one of them overwrote the other",
                tip=f"fix the [install] tables of {comp.recipe.file} or the project's install "
                    "destinations so each path is written once")
        by_real[where] = rel
    for other in others_of(prefix, comp, others):
        theirs = {real.of(e) for e in records.installed_by(prefix, other)}
        clash = sorted(by_real[w] for w in by_real.keys() & theirs)
        if clash:
            shown = ", ".join(real.shown(c) for c in clash[:5]) + (
                f" and {len(clash) - 5} more" if len(clash) > 5 else "")
            raise BuildFailed(
                f"{comp.name}: its install overwrote {len(clash)} file(s) that {other} "
                f"installed into {prefix}: {shown}",
                tip=f"if {comp.name} is meant to replace them, add install.overwrites = "
                    f"[\"{other}\"] to {comp.recipe.file}; otherwise change one of the two "
                    "recipes so they install different files")
    entries = {rel: e for rel in sorted(mine) if (e := records.describe_entry(prefix / rel))}
    write_json_atomic(records.record_path(prefix, comp.name),
                      {"component": comp.name, "format": records.RECORD_FORMAT,
                       "files": sorted(mine), "extras": sorted(extras), "entries": entries})
