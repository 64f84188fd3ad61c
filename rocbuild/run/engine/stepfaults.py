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

from rocbuild.model.resources import format_bytes

_FULL = re.compile(r"No space left on device|Out of diskspace|Disk quota exceeded|\bENOSPC\b|"
                   r"\bEDQUOT\b")
_PATH = re.compile(r"""(?<![\w.-])(/[^\s'"`:,;()]+)""")


def _room(path: Path) -> str:
    from rocbuild.checks import hostreqs  # the host's probes: only when a disk was full

    base = hostreqs.nearest_existing(path)
    folder = base if base.is_dir() else base.parent
    return f"the file system of {folder} has {format_bytes(hostreqs.free_space(folder)[1])} free"


def full_disk(tail: Sequence[str], writes: Sequence[Path]) -> str | None:
    """"No space left on device while writing X (the file system of Y has N free)" when the
    tool's lines say the disk is full; None otherwise. ``writes``: where the step writes (the
    build tree, the prefix), for a tool that names no path: the fullest of them is named.
    The lines are read as one text, since CMake wraps a long message ("No space left on" /
    "device.") and names the path on the line before."""
    text = " ".join(line.strip() for line in tail)
    matches = list(_FULL.finditer(text))
    if not matches:
        return None
    found = matches[-1]  # the newest: the one that ended the tool
    quota = found.group() in ("Disk quota exceeded", "EDQUOT")
    what = "the disk quota is used up" if quota else "No space left on device"
    paths = _PATH.findall(text[max(0, found.start() - 400):found.start()])
    if paths:
        return f"{what} while writing {paths[-1]} ({_room(Path(paths[-1]))})"
    if writes:
        from rocbuild.checks import hostreqs

        fullest = min(writes, key=lambda p: hostreqs.free_space(p)[1])
        return f"{what} ({_room(fullest)})"
    return what
