"""Which artifacts `rocbuild cache prune` removes: older than some days, beyond the newest N
of each component, or of a key the current recipes (with the current targets and CPU) no
longer produce. Pure selection over index entries; the stores delete (FolderStore.remove,
OciStore.remove)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rules:
    older_than_days: float | None = None
    keep_newest: int | None = None
    wanted_keys: Collection[str] | None = None  # keys of the current recipes (--unused)

    @property
    def any(self) -> bool:
        return (self.older_than_days is not None or self.keep_newest is not None
                or self.wanted_keys is not None)


def select(entries: list[dict[str, Any]], rules: Rules,
           now: float | None = None) -> list[tuple[dict[str, Any], str]]:
    """The entries to remove, each with the first rule that removes it."""
    now = time.time() if now is None else now
    by_component: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        by_component[str(entry.get("component"))].append(entry)
    beyond: set[int] = set()
    if rules.keep_newest is not None:
        for group in by_component.values():
            group.sort(key=lambda e: -_created(e))
            beyond.update(id(e) for e in group[rules.keep_newest:])
    out = []
    for entry in entries:
        age_days = (now - _created(entry)) / 86400
        if rules.older_than_days is not None and age_days > rules.older_than_days:
            out.append((entry, f"{age_days:.0f} days old"))
        elif id(entry) in beyond:
            out.append((entry, f"more than the newest {rules.keep_newest} of "
                               f"{entry.get('component')}"))
        elif rules.wanted_keys is not None and entry.get("key") not in rules.wanted_keys:
            out.append((entry, "no current recipe produces its key"))
    return out


def _created(entry: dict[str, Any]) -> float:
    try:
        return float(entry.get("created", 0))
    except (TypeError, ValueError):
        return 0.0
