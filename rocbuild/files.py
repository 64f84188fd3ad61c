"""Small file helpers every layer uses: atomic writes (temp file + fsync + rename) and a JSON
reader that treats a damaged file as absent."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from rocbuild import faults


def write_text_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``path`` so that a reader (or a run after a kill) sees the old file or the new
    one, never a part: a temp file in the same folder, fsynced, then renamed over it. A full
    disk or a read-only file system is one message (faults.py). ``mode``: the file's
    permissions whatever the umask (files in the prefix are read by every user). The one
    atomic writer: state, build-info, env files, activation state and bench reports."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with faults.writing(path):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with tmp.open("w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            if mode is not None:
                os.chmod(tmp, mode)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()


def write_json_atomic(path: Path, doc: Any) -> None:
    write_text_atomic(path, json.dumps(doc, indent=1, sort_keys=True))


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
