"""Every prefix rocbuild built or activated for this user, and the links it pointed at them:
``$XDG_STATE_HOME/rocbuild/prefixes.json`` (default ``~/.local/state/rocbuild``).

The registry is an index, not the record: what a prefix holds (series, targets, base,
complete, verified, which workdir filled it) is read from the prefix's own build-info each
time it is listed, so the list never disagrees with the prefix. A build adds its prefix when
it writes build-info (buildinfo.py), ``activate`` adds the prefix and the link it switched (a
prefix built elsewhere and activated here is listed too), ``clean --prefix-files`` removes
the prefix (it no longer holds a build record). A registry that cannot be written (a
read-only home) never fails a build: the prefix's build-info still says everything.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from rocbuild.files import read_json, write_text_atomic

FILE = "prefixes.json"


def registry_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "rocbuild" / FILE


def _key(path: Path) -> str:
    return os.path.abspath(path)


def read() -> dict[str, Any]:
    """``{"prefixes": {path: entry}, "links": {link: {"target", "unproven"}}}``; empty
    when there is none or it cannot be read (only a regular file is read: a FIFO there
    never blocks)."""
    doc = read_json(registry_path()) or {}

    def entries(key: str) -> dict[str, Any]:
        found = doc.get(key)
        return ({k: v for k, v in found.items() if isinstance(v, dict)}
                if isinstance(found, dict) else {})

    return {"prefixes": entries("prefixes"), "links": entries("links")}


@contextlib.contextmanager
def _editing() -> Iterator[dict[str, Any]]:
    """The registry to change in place, under a lock (two builds finishing at once), written
    back atomically. Failing to write it is not an error (see the module's note)."""
    path = registry_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(f".{FILE}.lock"), "a")  # noqa: SIM115 - held below
    except OSError:
        yield read()  # changed and dropped: nothing to write to
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        doc = read()
        yield doc
        with contextlib.suppress(OSError):
            write_text_atomic(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def note_built(prefix: Path) -> None:
    """A build wrote the prefix's build-info."""
    with _editing() as doc:
        entry = doc["prefixes"].setdefault(_key(prefix), {})
        entry["built"] = time.time()


def note_activated(prefix: Path, link: Path, *, unproven: bool) -> None:
    """``link`` now points at ``prefix`` (``unproven``: activated with --unproven)."""
    with _editing() as doc:
        entry = doc["prefixes"].setdefault(_key(prefix), {})
        entry["activated"] = time.time()
        doc["links"][_key(link)] = {"target": _key(prefix), "unproven": unproven}


def forget(prefix: Path) -> None:
    """The prefix no longer holds a build record (``clean --prefix-files``)."""
    with _editing() as doc:
        doc["prefixes"].pop(_key(prefix), None)


def known_prefixes() -> list[Path]:
    return [Path(p) for p in sorted(read()["prefixes"])]


def known_links() -> dict[Path, bool]:
    """The links ``activate`` switched, with whether their target went in unproven."""
    return {Path(k): bool(v.get("unproven")) for k, v in sorted(read()["links"].items())}
