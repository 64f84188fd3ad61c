"""What each component installed into the prefix: its record, and whether the prefix still
holds what the install left.

After each install, ``<prefix>/.rocbuild/installed/<component>.json`` records the files that
component put there (CMake's manifest, what the install left beyond it, the links and files
its recipe declares) with each path's type, size, mode, sha256 and link target. The install
step is current only while each is unchanged (``stale_install``); a damaged record is rebuilt
from the build tree (``repair_records``), never read as "owns nothing". The checks an install
passes before it is recorded are install.py's.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from rocbuild.files import read_json, remove_in_place, write_json_atomic
from rocbuild.model import buildsystems, layout
from rocbuild.model.graph import Component
from rocbuild.model.paths import within
from rocbuild.model.recipes import Recipe
from rocbuild.prefix import transaction
from rocbuild.prefix.realpaths import RealPaths

Logger = Callable[[str], None]
RECORDS = layout.INSTALL_RECORDS
# the unpack folders of a cache install (transaction.py): ``<prefix>/.rocbuild-unpack-<pid>-*``
STAGING_NAME = transaction.STAGING_NAME
RECORD_FORMAT = 2  # 2: with "entries" (type, size, sha256, mode, link target per path)


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
    return next((why for rel, want in entries.items() if isinstance(want, dict)
                 and (why := stale_entry(prefix, rel, want, recorded_ns))), None)


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


def recorded(prefix: Path, component: str, key: str) -> set[str]:
    doc = read_record(prefix, component) or {}
    return set(doc.get(key, []))


def installed_by(prefix: Path, component: str) -> set[str]:
    """Prefix-relative paths the component's last finished install put there."""
    return recorded(prefix, component, "files")


def held_by(prefix: Path, components: Iterable[str]) -> set[str]:
    """Where the paths these components' records hold really land (prefix-relative, through
    links in the prefix): a path that leads to one of them is theirs, however it is spelled."""
    real = RealPaths(prefix)
    return {r for c in components for e in installed_by(prefix, c) if (r := real.of(e))}


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
        remove_in_place(path)
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
