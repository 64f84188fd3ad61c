"""Who installed what in the prefix, and writing rocbuild's own extras there safely.

After each install, ``<prefix>/.rocbuild/installed/<component>.json`` records the files that
component put there: CMake's manifest and the links and files its recipe declares
(``[install.links]``, ``[install.files]``). The record lets the next install remove an extra
the recipe no longer declares, and stops an install that overwrote a file another component
installed (unless its recipe says ``install.overwrites = ["other"]``), naming both.

Writing extras never follows a link out of the prefix: every existing parent folder of a
path is resolved and must stay inside, a link's target must resolve inside, and a file is
written through a temp file opened with O_NOFOLLOW and renamed over the old entry (a link in
the way is replaced, never written through). Knows nothing of doit.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from rocbuild.errors import BuildFailed
from rocbuild.files import read_json, write_json_atomic
from rocbuild.model import buildsystems, layout
from rocbuild.model.graph import Component
from rocbuild.model.paths import resolves_within, within
from rocbuild.model.recipes import Recipe
from rocbuild.prefix import buildinfo, transaction
from rocbuild.prefix.realpaths import RealPaths

Logger = Callable[[str], None]
RECORDS = layout.INSTALL_RECORDS
# the unpack folders of a cache install (transaction.py): ``<prefix>/.rocbuild-unpack-<pid>-*``
STAGING_NAME = transaction.STAGING_NAME
EXTRA_TMP_SUFFIX = ".rocbuild-tmp"  # an extra is written to ``.<name>.rocbuild-tmp`` first


RECORD_FORMAT = 2  # 2: with "entries" (type, size, sha256, mode, link target per path)
# one install into the prefix at a time (doit's --parallel runs steps in threads): what an
# install left is read off the prefix before and after it (``snapshot``), so no other
# install may write meanwhile
INSTALLING = threading.Lock()


def record_path(prefix: Path, component: str) -> Path:
    return prefix / RECORDS / f"{component}.json"


def stale_install(prefix: Path, component: str) -> str | None:
    """Why what the component's last install left is no longer in the prefix as it was
    (``stale_entry`` of each recorded entry; None: all is), or that its record is damaged."""
    record = read_record(prefix, component)
    if record is DAMAGED:
        return f"its record of installed files ({record_path(prefix, component)}) is damaged"
    entries = (record or {}).get("entries") or {}
    try:
        recorded_ns = record_path(prefix, component).stat().st_mtime_ns
    except OSError:
        recorded_ns = 0
    for rel, want in entries.items():
        if isinstance(want, dict) and (why := stale_entry(prefix, rel, want, recorded_ns)):
            return why
    return None


def read_record(prefix: Path, component: str) -> dict[str, Any] | None:
    """The component's ownership record when it is sound (a JSON object whose "files" and
    "extras" are lists of paths); None when there is none; DAMAGED when something else is
    in its place (emptied, garbage, ``[]``, a FIFO, a folder): never "owns nothing"."""
    path = record_path(prefix, component)
    if not (path.exists() or path.is_symlink()):
        return None
    doc = read_json(path) if not path.is_symlink() else None
    if doc is None or not all(isinstance(doc.get(k, []), list) and
                              all(isinstance(f, str) for f in doc.get(k, []))
                              for k in ("files", "extras")) or "files" not in doc \
            or not isinstance(doc.get("entries", {}), dict):
        return DAMAGED
    return doc


DAMAGED: dict[str, Any] = {"damaged": True}


def _recorded(prefix: Path, component: str, key: str) -> set[str]:
    doc = read_record(prefix, component) or {}
    return set(doc.get(key, []))


def installed_by(prefix: Path, component: str) -> set[str]:
    """Prefix-relative paths the component's last finished install put there."""
    return _recorded(prefix, component, "files")


def gpu_duties(prefix: Path, recipes: Iterable[Recipe],
               ) -> dict[str, tuple[Recipe, list[Path] | None]]:
    """The components among ``recipes`` whose recipe says a GPU shape ([gpu], or
    ``gpu_code = true``), with the files each installed into the prefix (None when no install
    record says: then any file with GPU code counts): what verify holds each one to
    (checks/verify.py ``shape_results``)."""
    expected: dict[str, tuple[Recipe, list[Path] | None]] = {}
    for recipe in recipes:
        if recipe.gpu and recipe.builds:
            files = installed_by(prefix, recipe.name)
            expected[recipe.name] = (recipe, [prefix / f for f in sorted(files)] if files
                                     else None)
    return expected


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


def install_extras(prefix: Path, comp: Component, log: Logger,
                   others: Iterable[str] = (), reserved: tuple[str, ...] = ()) -> None:
    """The links and files a recipe declares (what AMD's packages add after install, e.g.
    <prefix>/llvm -> lib/llvm, bin/amdclang++, clang config files). Each is checked where it
    really lands before it is written: not on a file this component's CMake install wrote,
    another of its extras or a file of one of ``others`` (unless install.overwrites names
    it), and not on one of rocbuild's own files (``reserved``, model/layout.py)."""
    root = prefix.resolve()
    claims = _Claims(prefix, comp, others)
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
        for other in sorted(set(others) - {comp.name} - set(comp.recipe.install_overwrites)):
            for entry in sorted(installed_by(prefix, other)):
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


Snapshot = dict[str, tuple[int, int, int, int, str]]


def snapshot(prefix: Path) -> Snapshot:
    """Every file and link of the prefix (rocbuild's own folder and unpack folders left out)
    with what changes when it is written: inode, size, mtime and ctime (ns), link target."""
    out: Snapshot = {}
    for folder, dirs, files in os.walk(prefix):  # never follows links
        if folder == str(prefix):
            dirs[:] = [d for d in dirs if d != layout.INFO_DIR
                       and not d.startswith(STAGING_NAME)]
        for name in (*files, *[d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
                link = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            except OSError:
                continue
            out[os.path.relpath(path, prefix)] = (st.st_ino, st.st_size, st.st_mtime_ns,
                                                  st.st_ctime_ns, link)
    return out


def left_by_install(prefix: Path, before: Snapshot) -> set[str]:
    """The prefix-relative files and links that are new or were written since ``before``:
    what an install left, those its build system's manifest does not list included (CMake's
    ``install(CODE …)``/``install(SCRIPT …)`` making a link or a generated file)."""
    after = snapshot(prefix)
    return {rel for rel, facts in after.items() if before.get(rel) != facts}


def describe_entry(path: Path) -> dict[str, Any] | None:
    """What a record keeps of one installed path: a link's target, a file's size, mode and
    sha256 (the same for the same install: a record is byte for byte reproducible); None
    when nothing (or a folder) is there."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return {"type": "link", "link": os.readlink(path)}
    if not stat.S_ISREG(st.st_mode):
        return None
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return {"type": "file", "size": st.st_size, "mode": stat.S_IMODE(st.st_mode),
            "sha256": digest.hexdigest()}


def stale_entry(prefix: Path, rel: str, want: Mapping[str, Any],
                recorded_ns: int = 0) -> str | None:
    """Why ``prefix/rel`` is no longer what the install left (None: it is). Type, size,
    mode and link target are compared always; the sha256 only when the file's ctime is
    later than ``recorded_ns`` (when the record was written): a truncated library with its
    mtime put back has another size, and the same size with other bytes has a new ctime,
    which no one can set back."""
    path = prefix / rel
    try:
        st = path.lstat()
    except OSError:
        return f"{rel} is missing"
    if want.get("type") == "link":
        if not stat.S_ISLNK(st.st_mode) or os.readlink(path) != want.get("link"):
            return f"{rel} is no longer the link to {want.get('link')}"
        return None
    if not stat.S_ISREG(st.st_mode):
        return f"{rel} is no longer a file"
    if st.st_size != want.get("size"):
        return f"{rel} is {st.st_size} bytes, the install left {want.get('size')}"
    if stat.S_IMODE(st.st_mode) != want.get("mode"):
        return f"{rel} has the mode {stat.S_IMODE(st.st_mode):04o}, the install left " \
               f"{int(want.get('mode') or 0):04o}"
    if st.st_ctime_ns > recorded_ns:
        now = describe_entry(path)
        if now is None or now.get("sha256") != want.get("sha256"):
            return f"{rel} was changed after the install (another sha256)"
    return None


def begin_install(prefix: Path, comp: Component) -> None:
    """Before files are removed or replaced: no link in the prefix may lead out of it, and a
    complete prefix stops claiming to be complete."""
    escaping = links_out_of(prefix) if prefix.is_dir() else []
    if escaping:
        link = escaping[0]
        rel = link.relative_to(prefix).as_posix()
        owners = [c for c in _owners(prefix) if rel in installed_by(prefix, c)]
        by = f" (installed by {', '.join(owners)})" if owners else ""
        raise BuildFailed(
            f"{comp.name}: not installing: {link}{by} is a link which leads outside the prefix "
            f"(to {os.path.realpath(link)}), so an install could write there",
            tip=f"remove {link} and fix what installs it; rocbuild never writes outside {prefix}")
    buildinfo.mark_incomplete(prefix)


def _owners(prefix: Path) -> list[str]:
    return layout.recorded_components(prefix)


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
    real = RealPaths(prefix)
    held = set()
    for other in set(others) - {comp.name} - set(comp.recipe.install_overwrites):
        held |= {r for e in installed_by(prefix, other) if (r := real.of(e)) is not None}
    return held


def _remove_dropped_extras(prefix: Path, comp: Component, wanted: set[str], log: Logger) -> None:
    """Remove the links and files an earlier install of this recipe declared and it no
    longer does (CMake's own files are removed before each install by the build)."""
    for rel in sorted(_recorded(prefix, comp.name, "extras") - wanted):
        path = checked_path(prefix, rel, comp.name)
        if path.is_symlink() or path.is_file():
            path.unlink()
            log(f"removed {path}: no longer in the recipe's [install] tables")


def finish_install(prefix: Path, comp: Component, others: Iterable[str], log: Logger,
                   reserved: tuple[str, ...] = (), left: Iterable[str] = ()) -> None:
    """After ``cmake --install`` and the extras: drop extras the recipe no longer declares,
    refuse a path outside the prefix, one of rocbuild's own files (``reserved``), two entries
    that are one file, and an overwrite of another component's files (unless declared), all
    compared where the paths really land (through links in the prefix), then record what
    this one installed, as its manifest and recipe name the entries. ``others`` are the
    components whose records count (the stack's other components); ``left``: what the
    install left in the prefix besides its manifest (``left_by_install``)."""
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
    allowed = set(comp.recipe.install_overwrites)
    for other in sorted(set(others) - {comp.name} - allowed):
        theirs = {real.of(e) for e in installed_by(prefix, other)}
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
    entries = {rel: e for rel in sorted(mine) if (e := describe_entry(prefix / rel))}
    write_json_atomic(record_path(prefix, comp.name),
                      {"component": comp.name, "format": RECORD_FORMAT, "files": sorted(mine),
                       "extras": sorted(extras), "entries": entries})


def repair_records(prefix: Path, comps: Iterable[Component], say: Logger) -> list[str]:
    """Rebuild every damaged ownership record (``read_record``) from what the build tree
    and the prefix show: the build system's manifest and the recipe's extras that are there.
    Without a manifest the record is removed and the component's install is not current
    (its output check fails), so it is installed again. Returns the repaired components."""
    repaired = []
    for comp in comps:
        if read_record(prefix, comp.name) is not DAMAGED:
            continue
        path = record_path(prefix, comp.name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
        repaired.append(comp.name)
        installed = buildsystems.of(comp).installed_files(comp) if comp.builds else None
        if installed is None:
            say(f"{comp.name}: its record of installed files ({path}) was damaged and its "
                "build tree has no install record: removed; it is installed again")
            continue
        extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)
                  if (prefix / rel).is_symlink() or (prefix / rel).exists()}
        files = {os.path.relpath(p, prefix) for p in installed if within(p, prefix)} | extras
        write_json_atomic(path, {"component": comp.name, "format": RECORD_FORMAT,
                                 "files": sorted(files), "extras": sorted(extras),
                                 "rebuilt": True})
        say(f"{comp.name}: its record of installed files ({path}) was damaged; rebuilt from "
            f"{buildsystems.of(comp).installed_record(comp)} ({len(files)} paths)")
    return repaired
