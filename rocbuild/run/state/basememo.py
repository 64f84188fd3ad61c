"""The --base a workdir was last built on, remembered with its state.

A build records its base (or that it had none) in ``<workdir>/state/base.json`` once its
preflight passed. A later ``plan``, ``status`` or ``build`` on that workdir without a base of
its own (no ``--base``, ``ROCBUILD_BASE`` or ``base =`` in rocbuild.toml) uses the recorded
one and says so; one with another base (``--base none``: from source) is told that this
changes the configuration, and ``plan`` explains what it does. One small record for the whole
workdir, where the state is per configuration (docs/architecture.md, The workdir's
configurations).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rocbuild.model.base import Base
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import Workdir, same_stack, stack_name_of
from rocbuild.run.state.state import read_json, write_json_atomic

SOURCE_PREFIX = "workdir "  # settings.source("base") of a remembered base


@dataclass(frozen=True)
class Remembered:
    path: Path | None  # None: the last build had no base (from source)
    version: str | None
    when: float

    def text(self) -> str:
        if self.path is None:
            return "no base (built from source)"
        return f"{self.path}" + (f" (ROCm {self.version})" if self.version else "")


def record_path(workdir: Path) -> Path:
    return Workdir.shared(workdir).base_memo


def read(workdir: Path, stack: str | None = None) -> Remembered | None:
    """The base of ``stack``'s last build in ``workdir`` (a workdir holds the builds of
    every stack it was given: each has its record, under ``stacks``); a record of an
    earlier rocbuild, which names no stack, counts for any (adopted, so its builds stay
    current). None when nothing (readable) is recorded for it."""
    doc = read_json(record_path(workdir))
    if not isinstance(doc, dict):
        return None
    stacks = doc.get("stacks")
    if stack is not None and isinstance(stacks, dict) and isinstance(stacks.get(stack), dict):
        doc = stacks[stack]
    elif not same_stack(doc, stack, Path()):  # another stack's build was the last
        return None
    if "base" not in doc:
        return None
    raw = doc.get("base")
    version = doc.get("version")
    return Remembered(Path(raw) if isinstance(raw, str) and raw else None,
                      version if isinstance(version, str) else None,
                      float(doc.get("when", 0.0)))


def write(workdir: Path, base: Base | None, stack: str) -> None:
    """Record the base ``stack``'s build runs on (called once its preflight passed), beside
    the other stacks' records."""
    entry: dict[str, Any] = {"base": str(base.path) if base else None,
                             "version": base.version if base else None, "when": time.time()}
    before = read_json(record_path(workdir))
    stacks = before.get("stacks") if isinstance(before, dict) else None
    stacks = {k: v for k, v in stacks.items() if isinstance(v, dict)} \
        if isinstance(stacks, dict) else {}
    stacks[stack] = entry
    write_json_atomic(record_path(workdir), {**entry, "stack": stack, "stacks": stacks})


def apply(settings: Settings) -> Settings:
    """``settings`` with the workdir's remembered base of this stack when the user gave
    none, with a note saying so; a note, too, when the user's base is not the one the
    stack's last build used (another stack's last build says nothing of this one)."""
    memo = read(settings.workdir, stack_name_of(settings.recipes))
    if memo is None:
        return settings
    record = record_path(settings.workdir)
    if settings.source("base") == "default":
        if memo.path is None:
            return settings
        note = (f"base {memo.path}: the base of the last build in this workdir (recorded in "
                f"{record}); give --base none to build from source, or another --base")
        remembered = settings.with_value("base", memo.path, f"{SOURCE_PREFIX}{record}")
        return replace(remembered, notes=(*remembered.notes, note))
    if settings.base == memo.path:
        return settings
    now = str(settings.base) if settings.base else "no base (from source)"
    note = (f"base: {now} ({settings.source('base')}), but the last build in this workdir was "
            f"on {memo.text()}: a configuration change, everything built on it is built again "
            "(`rocbuild plan` shows what)")
    return replace(settings, notes=(*settings.notes, note))


def change(settings: Settings) -> dict[str, str | None] | None:
    """For `plan`: the stack's last build's base and this run's, when they differ; else
    None."""
    memo = read(settings.workdir, stack_name_of(settings.recipes))
    if memo is None or memo.path == settings.base:
        return None
    return {"last": str(memo.path) if memo.path else None,
            "last_version": memo.version,
            "now": str(settings.base) if settings.base else None}


def save_code_memo(workdir: Path, base: Base | None) -> None:
    """Keep what the base audit read (``Base.memo``, by file identity) for the next command,
    so reading a base's libraries of GBs happens once per package version. Only a cache: a
    workdir that cannot be written (another user's, read-only) just reads them again."""
    if base is None or base.memo is None or not base.memo.fresh:
        return
    shared = Workdir.shared(workdir)
    if not shared.state.is_dir():  # a plan of a workdir never built creates nothing
        return
    with contextlib.suppress(OSError):
        write_json_atomic(shared.code_memo, base.memo.to_json())
