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
import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath

from rocbuild.errors import BuildFailed
from rocbuild.files import read_json, write_json_atomic
from rocbuild.model.graph import Component
from rocbuild.model.inputcheck import is_within
from rocbuild.prefix import buildinfo

Logger = Callable[[str], None]
RECORDS = Path(buildinfo.INFO_DIR) / "installed"
EXTRA_TMP_SUFFIX = ".rocbuild-tmp"  # an extra is written to ``.<name>.rocbuild-tmp`` first


def record_path(prefix: Path, component: str) -> Path:
    return prefix / RECORDS / f"{component}.json"


def _recorded(prefix: Path, component: str, key: str) -> set[str]:
    doc = read_json(record_path(prefix, component)) or {}
    items = doc.get(key)
    return {f for f in items if isinstance(f, str)} if isinstance(items, list) else set()


def installed_by(prefix: Path, component: str) -> set[str]:
    """Prefix-relative paths the component's last finished install put there."""
    return _recorded(prefix, component, "files")


def _inside(path: Path, root: Path) -> bool:
    return is_within(os.path.realpath(path), str(root))


def checked_path(prefix: Path, rel: str, component: str) -> Path:
    """``prefix/rel`` after checking that no existing folder on the way is a link out of the
    prefix (one component's link must not make another's write land outside)."""
    root = prefix.resolve()
    current = prefix
    for part in PurePosixPath(rel).parent.parts:
        current = current / part
        if (current.is_symlink() or current.exists()) and not _inside(current, root):
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


def install_extras(prefix: Path, comp: Component, log: Logger) -> None:
    """The links and files a recipe declares (what AMD's packages add after install, e.g.
    <prefix>/llvm -> lib/llvm, bin/amdclang++, clang config files)."""
    root = prefix.resolve()
    for rel, target in comp.install_links:
        path = checked_path(prefix, rel, comp.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not _inside(path.parent / target, root):
            raise BuildFailed(f"{comp.name}: the link {path} -> {target} would lead outside "
                              f"the prefix (to {os.path.realpath(path.parent / target)})",
                              tip=f"point install.links.\"{rel}\" in {comp.recipe.file} at a "
                                  "path inside the prefix")
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            raise BuildFailed(f"{comp.name}: cannot create the link {path}: a folder is "
                              "in the way", tip=f"move {path} away and run the build again")
        path.symlink_to(target)
        log(f"link {path} -> {target}")
    for rel, text in comp.install_files:
        path = checked_path(prefix, rel, comp.name)
        _write_file(path, text, comp.name)
        log(f"wrote {path}")


def links_out_of(prefix: Path) -> list[Path]:
    """Links to folders outside the prefix (a CMake install can make one; no recipe check
    sees it): anything installed below one would land outside."""
    root, found = prefix.resolve(), []
    for folder, dirs, files in os.walk(prefix):  # never follows links
        for name in (*dirs, *files):
            path = Path(folder) / name
            if path.is_symlink() and path.is_dir() and not _inside(path, root):
                found.append(path)
    return found


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
    return sorted(p.stem for p in (prefix / RECORDS).glob("*.json"))


def _manifest(comp: Component, prefix: Path) -> set[str]:
    manifest = comp.build_dir / "install_manifest.txt"
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except OSError:
        return set()
    return {os.path.relpath(line, prefix) for line in lines
            if line and is_within(line, str(prefix))}


def _remove_dropped_extras(prefix: Path, comp: Component, wanted: set[str], log: Logger) -> None:
    """Remove the links and files an earlier install of this recipe declared and it no
    longer does (CMake's own files are removed before each install by the build)."""
    for rel in sorted(_recorded(prefix, comp.name, "extras") - wanted):
        path = checked_path(prefix, rel, comp.name)
        if path.is_symlink() or path.is_file():
            path.unlink()
            log(f"removed {path}: no longer in the recipe's [install] tables")


def finish_install(prefix: Path, comp: Component, others: Iterable[str], log: Logger) -> None:
    """After ``cmake --install`` and the extras: drop extras the recipe no longer declares,
    refuse an overwrite of another component's files, then record what this one installed.
    ``others`` are the components whose records count (the stack's other components)."""
    extras = {rel for rel, _ in (*comp.install_links, *comp.install_files)}
    _remove_dropped_extras(prefix, comp, extras, log)
    mine = _manifest(comp, prefix) | extras
    allowed = set(comp.recipe.install_overwrites)
    for other in sorted(set(others) - {comp.name} - allowed):
        clash = sorted(mine & installed_by(prefix, other))
        if clash:
            shown = ", ".join(clash[:5]) + (f" and {len(clash) - 5} more" if len(clash) > 5
                                            else "")
            raise BuildFailed(
                f"{comp.name}: its install overwrote {len(clash)} file(s) that {other} "
                f"installed into {prefix}: {shown}",
                tip=f"if {comp.name} is meant to replace them, add install.overwrites = "
                    f"[\"{other}\"] to {comp.recipe.file}; otherwise change one of the two "
                    "recipes so they install different files")
    write_json_atomic(record_path(prefix, comp.name),
                      {"component": comp.name, "files": sorted(mine), "extras": sorted(extras)})
