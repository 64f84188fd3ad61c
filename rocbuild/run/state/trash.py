"""Removing a folder of the workdir so that a kill at any moment leaves it whole or gone, and
the next command finishes what a killed one began.

A SIGKILL in the middle of ``shutil.rmtree`` of a checkout left its ``.git`` and half of its
files: every later build failed ("options: no checkout", "file INSTALL cannot find"). So a
folder is first renamed into ``<workdir>/state/trash/`` (one rename on one file system: the
folder is in its place or in the trash, nothing between) and only then removed there. Where
the rename cannot work (another file system is mounted at the folder), it is removed in
place after a note in the trash names it. ``finish`` (run under the workdir's run lock by
`clean` and by every build's first phase) removes whatever a killed run left in the trash
and every folder a note names, so the deletion a user asked for is finished by the next
command, whichever it is.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from rocbuild.files import write_text_atomic
from rocbuild.model.paths import link_on_the_way, within

NOTE_SUFFIX = ".in-place"  # a note naming a folder removed where it is (no rename possible)
# rename(2) cannot move a mount point (EBUSY) or across file systems (EXDEV)
_NO_RENAME = (errno.EXDEV, errno.EBUSY)

Say = Callable[[str], None]


def discard(path: Path, trash: Path) -> None:
    """Remove ``path`` (a file, a link or a folder of the workdir ``trash`` belongs to): a
    link or a file is unlinked (never followed), a folder renamed into ``trash`` and removed
    there (see the module)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    trash.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f"{path.name}-", dir=trash))
    try:
        os.rename(path, holder / path.name)
    except OSError as exc:
        if exc.errno not in _NO_RENAME:
            holder.rmdir()
            raise
        note = holder.with_name(holder.name + NOTE_SUFFIX)
        write_text_atomic(note, str(path) + "\n")
        holder.rmdir()
        shutil.rmtree(path)
        note.unlink()
        return
    shutil.rmtree(holder)


def finish(root: Path, trash: Path, say: Say) -> None:
    """Finish the removals a killed `clean` left (call under the run lock): every entry of
    ``trash`` removed, and every folder a note names while it is still inside ``root``
    through no link."""
    if not trash.is_dir() or trash.is_symlink():
        return
    for entry in sorted(trash.iterdir()):
        if entry.name.endswith(NOTE_SUFFIX) and entry.is_file():
            named = Path(entry.read_text(encoding="utf-8", errors="replace").strip())
            if (named.is_absolute() and within(named, root) and named != Path(root)
                    and link_on_the_way(root, named) is None and not named.is_symlink()
                    and named.is_dir()):
                shutil.rmtree(named, ignore_errors=True)
                say(f"finished removing what an interrupted clean left: {named}")
            entry.unlink()
            continue
        if entry.is_dir() and not entry.is_symlink():
            names = ", ".join(sorted(p.name for p in entry.iterdir())) or entry.name
            shutil.rmtree(entry, ignore_errors=True)
        else:
            names = entry.name
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
        say(f"finished removing what an interrupted clean left: {names} (in {trash})")
