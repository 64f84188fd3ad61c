"""A step that failed because the machine did: what the tool's own lines say, put into the
step's failure message (the summary, `status`, `build --json` all show that message).

A full disk is the common case. CMake says it in the middle of its output ("file INSTALL
cannot copy file ... to "/prefix/share/big.txt": No space left on device."), ld says "final
link failed: No space left on device", and the step's message said only "cmake exited with 1".
This finds the tool's line, the path it names (else the folders the step writes), and how
much room that file system has now.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from rocbuild.checks import hostreqs
from rocbuild.model.resources import format_bytes

_FULL = re.compile(r"No space left on device|Disk quota exceeded|\bENOSPC\b|\bEDQUOT\b")
_PATH = re.compile(r"""(?<![\w.-])(/[^\s'"`:,;()]+)""")


def _room(path: Path) -> str:
    base = hostreqs.nearest_existing(path)
    folder = base if base.is_dir() else base.parent
    return f"the file system of {folder} has {format_bytes(hostreqs.free_space(folder)[1])} free"


def full_disk(tail: Sequence[str], writes: Sequence[Path]) -> str | None:
    """"No space left on device while writing X (the file system of Y has N free)" when the
    tool's lines say the disk is full; None otherwise. ``writes``: where the step writes (the
    build tree, the prefix), for a tool that names no path: the fullest of them is named."""
    for i in range(len(tail) - 1, -1, -1):
        found = _FULL.search(tail[i])
        if found is None:
            continue
        quota = found.group() in ("Disk quota exceeded", "EDQUOT")
        what = "the disk quota is used up" if quota else "No space left on device"
        paths = _PATH.findall(tail[i]) or (_PATH.findall(tail[i - 1]) if i else [])
        if paths:
            return f"{what} while writing {paths[-1]} ({_room(Path(paths[-1]))})"
        if writes:
            fullest = min(writes, key=lambda p: hostreqs.free_space(p)[1])
            return f"{what} ({_room(fullest)})"
        return what
    return None
