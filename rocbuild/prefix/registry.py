"""Every prefix rocbuild built or activated for this user, and the links it pointed at them:
``$XDG_STATE_HOME/rocbuild/prefixes.json`` (default ``~/.local/state/rocbuild``).

The registry is an index, not the record: what a prefix holds (series, targets, base,
complete, verified, which workdir filled it) is read from the prefix's own build-info each
time it is listed, so the list never disagrees with the prefix. A build adds its prefix when
it writes build-info (buildinfo.py), ``activate`` adds the prefix and the link it switched (a
prefix built elsewhere and activated here is listed too), ``clean --prefix-files`` removes
the prefix (it no longer holds a build record). A registry that cannot be written (a
read-only or full home, a file where its folder should be) never fails a build: the
prefix's build-info still says everything, and the writers return one warning line saying
what was not recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild.errors import StateWriteError
from rocbuild.files import open_lock, read_json, remove_stale_temps, write_text_atomic

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


@dataclass
class _Edit:
    doc: dict[str, Any]
    problem: str | None = None  # why the change could not be written


@contextlib.contextmanager
def _editing() -> Iterator[_Edit]:
    """The registry to change in place, under a lock (two builds finishing at once), written
    back atomically. Failing to write it is not an error (see the module's note): the edit
    then carries the reason."""
    path = registry_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open_lock(path.with_name(f".{FILE}.lock"))  # never through a link
    except OSError as exc:
        yield _Edit(read(), _reason(exc, path))  # changed and dropped: nothing to write to
        return
    with os.fdopen(lock, "rb"):
        fcntl.flock(lock, fcntl.LOCK_EX)
        remove_stale_temps(path)  # every writer holds this lock: a temp here is a kill's
        edit = _Edit(read())
        yield edit
        try:
            write_text_atomic(path, json.dumps(edit.doc, indent=2, sort_keys=True) + "\n")
        except (OSError, StateWriteError) as exc:
            edit.problem = _reason(exc, path)


def _reason(exc: BaseException, path: Path) -> str:
    what = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{what} ({path})"


def _warning(edit: _Edit, what: str) -> str | None:
    if edit.problem is None:
        return None
    return (f"warning: {what} is not recorded in the list of your prefixes: {edit.problem}; "
            "the prefix itself is complete and its build-info says everything "
            "(`rocbuild prefixes` will not list it until the file can be written)")


def note_built(prefix: Path) -> str | None:
    """A build wrote the prefix's build-info. Returns a warning line when the registry could
    not be written (never raises for that)."""
    with _editing() as edit:
        entry = edit.doc["prefixes"].setdefault(_key(prefix), {})
        entry["built"] = time.time()
    return _warning(edit, f"the prefix {prefix}")


def note_started(prefix: Path) -> str | None:
    """The first install into ``prefix`` is about to run (prefixguard.claim)."""
    with _editing() as edit:
        edit.doc["prefixes"].setdefault(_key(prefix), {}).setdefault("started", time.time())
    return _warning(edit, f"the prefix {prefix}")


def note_activated(prefix: Path, link: Path, *, unproven: bool) -> str | None:
    """``link`` now points at ``prefix`` (``unproven``: activated with --unproven)."""
    with _editing() as edit:
        entry = edit.doc["prefixes"].setdefault(_key(prefix), {})
        entry["activated"] = time.time()
        edit.doc["links"][_key(link)] = {"target": _key(prefix), "unproven": unproven}
    return _warning(edit, f"the link {link}")


def forget(prefix: Path) -> str | None:
    """The prefix no longer holds a build record (``clean --prefix-files``)."""
    with _editing() as edit:
        edit.doc["prefixes"].pop(_key(prefix), None)
    return _warning(edit, f"the removal of {prefix}")


def known_prefixes() -> list[Path]:
    return [Path(p) for p in sorted(read()["prefixes"])]


def known_links() -> dict[Path, bool]:
    """The links ``activate`` switched, with whether their target went in unproven."""
    return {Path(k): bool(v.get("unproven")) for k, v in sorted(read()["links"].items())}
