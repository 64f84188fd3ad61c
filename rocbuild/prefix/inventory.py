"""What a prefix holds, component by component: ``rocbuild list`` and ``rocbuild info``.

``inventory(prefix)`` reads only records: the prefix's build-info (ref, commit), its install
records (``.rocbuild/installed/<component>.json``: the files, whose sizes are summed), and the
stamps of the workdir configuration that filled it (build-info's ``workdir`` and
``configuration``): the install stamp says when and whether the component was built or served
from the binary cache (``from_cache``, the artifact's key), the patch stamp which patches were
applied. A workdir that is gone leaves those facts unknown (None), never an error: the prefix
is still listed. Nothing here writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocbuild.errors import ConfigError
from rocbuild.files import read_json
from rocbuild.model import layout
from rocbuild.model.workdir import ROOT_CONFIG, Workdir
from rocbuild.prefix import records
from rocbuild.prefix.buildinfo import BuildInfo, read_build_info


@dataclass(frozen=True)
class Installed:
    """One component in a prefix. ``origin``: "built", "fetched" (a source-only component),
    "cache" (served from the binary cache, ``cache_key`` its artifact) or None when the
    workdir's stamps are gone."""

    name: str
    ref: str | None
    commit: str | None
    patches: tuple[str, ...] | None
    files: tuple[str, ...]
    size: int
    origin: str | None
    cache_key: str | None
    when: float | None  # the install's end, seconds since the epoch

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ref": self.ref, "commit": self.commit,
                "patches": list(self.patches) if self.patches is not None else None,
                "files": len(self.files), "size": self.size, "origin": self.origin,
                "cache_key": self.cache_key, "installed": self.when}


@dataclass(frozen=True)
class PrefixInventory:
    path: Path
    info: BuildInfo | None
    error: str | None = None  # a build-info file that exists but cannot be read
    components: list[Installed] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        info = self.info
        doc: dict[str, Any] = {"prefix": str(self.path), "error": self.error,
                               "components": [c.to_json() for c in self.components]}
        if info is not None:
            doc.update(stack=info.stack, version=info.version, targets=list(info.targets),
                       complete=info.complete, verified=info.verified,
                       workdir=info.extra.get("workdir"), finished=info.finished,
                       size=sum(c.size for c in self.components))
        return doc


def filled_by(info: BuildInfo) -> Workdir | None:
    """The workdir configuration that filled the prefix (build-info's record), when it is
    still there."""
    root, folder = info.extra.get("workdir"), info.extra.get("configuration", ROOT_CONFIG)
    if not isinstance(root, str) or not isinstance(folder, str) or not os.path.isdir(root):
        return None
    return Workdir(Path(root), Path(root) if folder == ROOT_CONFIG else Path(root) / folder)


def _size(prefix: Path, files: tuple[str, ...]) -> int:
    total = 0
    for rel in files:
        try:
            total += os.lstat(prefix / rel).st_size  # a link counts as itself, not its target
        except OSError:
            continue  # removed by hand since: not there, not counted
    return total


def component(prefix: Path, name: str, info: BuildInfo | None,
              work: Workdir | None) -> Installed:
    """One component's facts from the prefix's records and ``work``'s stamps."""
    recorded = info.components.get(name) if info is not None else None
    files = tuple(sorted(records.installed_by(prefix, name)))
    stamp: dict[str, Any] = {}
    patches: tuple[str, ...] | None = None
    fetched_only = False
    if work is not None:
        stamp = read_json(work.stamp(name, "install")) or {}
        if not stamp:  # a source-only component: its last step is the patch of its checkout
            stamp = read_json(work.stamp(name, "patch")) or {}
            fetched_only = bool(stamp)
        # a component inside another's checkout (source.from) has no patch stamp: unknown
        patch = read_json(work.stamp(name, "patch")) or {}
        applied = (patch.get("inputs") or {}).get("patches") if patch else None
        patches = tuple(sorted(applied)) if isinstance(applied, dict) else None
    key = stamp.get("from_cache")
    origin = None if not stamp else "cache" if key else "fetched" if fetched_only else "built"
    when = stamp.get("finished")
    ref, commit = (recorded.ref, recorded.commit) if recorded else _fetched(work, name)
    return Installed(name, ref, commit, patches, files,
                     _size(prefix, files), origin, key if isinstance(key, str) else None,
                     float(when) if isinstance(when, (int, float)) else None)


def _fetched(work: Workdir | None, name: str) -> tuple[str | None, str | None]:
    """The ref and commit of the component's last fetch, for a component build-info does not
    name yet (its build has not ended): the fetch stamp of its checkout. A component inside
    another's checkout has none of its own: unknown."""
    stamp = read_json(work.stamp(name, "fetch")) or {} if work is not None else {}
    ref = (stamp.get("inputs") or {}).get("ref")
    commit = stamp.get("commit")
    return (ref if isinstance(ref, str) else None, commit if isinstance(commit, str) else None)


def inventory(prefix: Path, work: Workdir | None = None) -> PrefixInventory:
    """Every component the prefix's build-info names (in its order), with its facts, then
    each one installed since (an install record, no build-info entry yet: a build into it
    runs, or stopped before its end). A prefix whose first build has not ended has no
    build-info: ``info`` None, its components from the install records, and ``work`` (the
    workdir configuration that builds it, when the caller knows it) for their facts."""
    prefix = Path(os.path.abspath(prefix))
    try:
        info = read_build_info(prefix)
    except ConfigError as exc:
        return PrefixInventory(prefix, None, str(exc))
    recorded = layout.recorded_components(prefix)
    if info is None:
        return PrefixInventory(prefix, None, None,
                               [component(prefix, name, None, work) for name in recorded])
    work = filled_by(info) or work
    names = [*info.components, *(n for n in recorded if n not in info.components)]
    return PrefixInventory(prefix, info, None,
                           [component(prefix, name, info, work) for name in names])
