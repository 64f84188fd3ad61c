"""Taking one component out of a prefix: the files its install record lists
(records.installed_by), never one another component's record also holds (compared where
the paths really land, through links in the prefix), never through a link out of the prefix
and never rocbuild's own files; folders it leaves empty go too, then its record.

Used by `rocbuild uninstall COMPONENT` and by a build whose stack no longer has a component
it finds installed (run/engine/finish.py). Knows nothing of doit or the workdir.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocbuild.errors import BuildFailed
from rocbuild.files import remove_empty_folders
from rocbuild.model import layout
from rocbuild.model.resources import format_bytes
from rocbuild.prefix import install, records
from rocbuild.prefix.realpaths import RealPaths


@dataclass(frozen=True)
class Removed:
    component: str
    files: int  # files and links removed
    size: int  # their bytes
    kept: tuple[str, ...]  # paths of its record another component also owns (left in place)

    def text(self) -> str:
        """What was removed, for a line: ``3 files, 20 KiB`` (and what was kept)."""
        kept = (f"; kept {len(self.kept)} that other components installed too"
                if self.kept else "")
        return (f"{self.files} file{'' if self.files == 1 else 's'}, "
                f"{format_bytes(self.size)}{kept}")


def installed_components(prefix: Path) -> list[str]:
    """The components with an install record in ``prefix``, sorted."""
    return layout.recorded_components(prefix)


def uninstall(prefix: Path, component: str, stack_name: str) -> Removed:
    """Remove what ``component`` installed into ``prefix`` and its record (see the module)."""
    real = RealPaths(prefix)
    theirs = records.held_by(prefix, set(installed_components(prefix)) - {component})
    reserved = layout.reserved_roots(stack_name)
    files = size = 0
    kept: list[str] = []
    folders: set[Path] = set()
    for rel in sorted(records.installed_by(prefix, component)):
        where = real.of(rel)
        if where is None or layout.reserved_by(where, reserved) is not None:
            continue  # outside the prefix, or rocbuild's own file: never this one's to remove
        if where in theirs:
            kept.append(rel)
            continue
        try:
            path = install.checked_path(prefix, rel, component)
        except BuildFailed:
            continue  # a folder on the way leads out of the prefix: nothing there is removed
        if path.is_symlink() or path.is_file():
            size += path.lstat().st_size
            path.unlink()
            files += 1
            folders.add(path.parent)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        remove_empty_folders(folder, prefix)
    records.record_path(prefix, component).unlink(missing_ok=True)
    return Removed(component, files, size, tuple(kept))


def foreign_files(prefix: Path, stack_name: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` prefix-relative files in ``prefix`` that no install record holds and
    that are not rocbuild's own: a prefix with such files holds someone else's work, so
    `rocbuild prefixes --remove` refuses it."""
    recorded: set[str] = set()
    for name in installed_components(prefix):
        recorded |= {os.path.normpath(rel) for rel in records.installed_by(prefix, name)}
    reserved = layout.reserved_roots(stack_name)
    found: list[str] = []
    for folder, dirs, files in os.walk(prefix):  # never follows links
        rel_dir = os.path.relpath(folder, prefix)
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel not in recorded and layout.reserved_by(rel, reserved) is None:
                found.append(rel)
                if len(found) >= limit:
                    return found
    return found
