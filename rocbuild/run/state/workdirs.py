"""The workdir's record of its configurations (``state/configs.json``, model/workdir.py): a
build claims its prefix's folder when it starts, so later runs, `status` and `plan` find the
build trees and stamps of that prefix, and a prefix filled from another workdir is refused
before anything is built into it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from rocbuild.model.graph import Stack
from rocbuild.model.settings import Settings
from rocbuild.model.workdir import (
    ROOT_CONFIG,
    prefix_key,
    read_registry,
    registry_path,
    same_stack,
    stack_name_of,
)
from rocbuild.prefix.buildinfo import BuildInfo
from rocbuild.run.state.state import write_json_atomic  # a folder in its place is replaced


def claim(stack: Stack, settings: Settings) -> None:
    """Record that ``stack``'s prefix is built in its configuration's folder, with the
    targets and base it is built for now, the recipes, and whether the user chose the prefix
    (``given``: a later command without --prefix continues it, run/state/prefixmemo.py)."""
    work = stack.work
    registry = read_registry(work.root)
    folder = ROOT_CONFIG if work.is_root_config else str(work.config.relative_to(work.root))
    registry[prefix_key(stack.prefix)] = {
        "dir": folder, "series": stack.series, "targets": [str(t) for t in stack.targets],
        "base": str(stack.base.path) if stack.base else None, "used": time.time(),
        "given": settings.source("prefix") != "default", "recipes": str(settings.recipes),
        "stack": stack.recipes.stack.name}
    write_json_atomic(registry_path(work.root), {"configurations": registry})


def release(workdir: Path, prefix: Path) -> bool:
    """Forget ``prefix`` in ``workdir``'s record (rocbuild's files were cleaned out of the
    prefix), so another workdir may build into it. True when it was there."""
    registry = read_registry(workdir)
    if registry.pop(prefix_key(prefix), None) is None:
        return False
    write_json_atomic(registry_path(workdir), {"configurations": registry})
    return True


def other_owner(stack: Stack, info: BuildInfo | None) -> Path | None:
    """The other workdir that filled ``stack``'s prefix and still builds it, else None. A
    prefix holds one build: two workdirs installing into it would each believe their own
    stamps while the prefix holds a mix (and each would mark the other's build incomplete)."""
    owner = info.extra.get("workdir") if info is not None else None
    if not isinstance(owner, str) or not owner:
        return None  # built by an earlier rocbuild, or nothing built yet
    if os.path.abspath(owner) == os.path.abspath(stack.workdir):
        return None
    if prefix_key(stack.prefix) not in read_registry(Path(owner)):
        return None  # that workdir is gone or let the prefix go: this one takes it over
    return Path(owner)


def viewed_prefix(settings: Settings, default: Path) -> tuple[Settings, str | None]:
    """For the views of what happened (`status`, `logs`): when no --prefix was given and the
    stack's default prefix was never built in this workdir, the prefix of the workdir's last
    build, as the view then shows what the last night did (a build keeps the default: it
    never installs into another prefix unasked), with the note that says so."""
    if settings.source("prefix") != "default":
        return settings, None
    name = stack_name_of(settings.recipes)
    registry = {k: v for k, v in read_registry(settings.workdir).items()
                if same_stack(v, name, settings.recipes)}  # not another stack's last build
    if not registry or prefix_key(default) in registry:
        return settings, None
    last = max(registry, key=lambda k: float(registry[k].get("used") or 0))
    where = registry_path(settings.workdir)
    note = (f"prefix {last}: the last build in this workdir (recorded in {where}); give "
            "--prefix for another")
    return settings.with_value("prefix", Path(last), f"workdir {where}"), note


def other_stacks(settings: Settings) -> list[tuple[str, dict[str, Any]]]:
    """The configurations of ``settings.workdir`` built from another stack than the one
    ``settings.recipes`` holds, the last built first: what a view of this stack that found
    nothing should point at (`status` without the --recipes the workdir was built with)."""
    name = stack_name_of(settings.recipes)
    found = [(prefix, entry) for prefix, entry in read_registry(settings.workdir).items()
             if not same_stack(entry, name, settings.recipes)]
    return sorted(found, key=lambda item: -float(item[1].get("used") or 0))
