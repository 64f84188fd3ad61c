"""For `rocbuild plan`: what the cache setting does with each component (one line, from
choice.choose), why the artifacts a cache holds are not this build's, and the download the
served ones add up to."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from rocbuild.model import wording
from rocbuild.model.graph import Component, Stack
from rocbuild.model.resources import format_bytes
from rocbuild.run.cache.artifacts import ArtifactRefused, Manifest
from rocbuild.run.cache.cache import artifact_inputs
from rocbuild.run.cache.cache_store import CacheUnavailable
from rocbuild.run.cache.choice import NO_ARTIFACT, Trust, choose
from rocbuild.run.cache.stores import open_reader
from rocbuild.run.state.state import StateDir

# the key's inputs (artifact_inputs) in plan's words
INPUT_WORDS = {"recipe": "another recipe", "command": "another configure command",
               "targets": "targets", "machine": "CPU", "format": "another artifact format"}


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


class PlanLines:
    """Called with each component: its line; ``downloads`` and ``total`` then add them up."""

    def __init__(self, settings: Any, stack: Stack, state: StateDir,
                 trust: Trust | None = None) -> None:
        self.store = open_reader(settings.cache) if settings.cache else None
        self.stack, self.state, self.trust = stack, state, trust or Trust.default()
        self.downloads: dict[str, int] = {}  # component -> archive bytes, for those served
        self.unavailable = ""
        self._index: list[dict[str, Any]] | None = None  # read once, for "why not" lines

    def __call__(self, comp: Component) -> str:
        if self.store is None:
            return ""
        if self.unavailable:  # said once; the rest is built as without a cache
            return f"cache unavailable: {self.unavailable}"
        try:
            choice = choose(self.store, self.stack, self.state, comp, self.trust)
        except CacheUnavailable as exc:
            self.unavailable = str(exc)
            return f"cache unavailable: {exc}"
        if choice.usable:
            self.downloads[comp.name] = choice.download
        if choice.use == NO_ARTIFACT:
            other = self._other_build(comp)
            if other:
                return f"{choice.describe()} ({other})"
        return choice.describe()

    def _other_build(self, comp: Component) -> str:
        """Why the artifacts the cache does hold for ``comp`` are not this build's: the
        inputs of the newest one that differ from this build's ("" when it holds none). A
        stack built for other targets or another CPU is then told apart from an empty cache."""
        assert self.store is not None
        try:
            if self._index is None:
                self._index = self.store.index()
            held = sorted((e for e in self._index if e.get("component") == comp.name),
                          key=lambda e: float(e.get("created") or 0))
            if not held:
                return ""
            doc = self.store.read_manifest(comp.name, str(held[-1].get("key")))
            there = Manifest.from_json(doc).inputs if doc else {}
        except (CacheUnavailable, ArtifactRefused):
            return ""
        here = artifact_inputs(self.stack, comp)
        differ = [INPUT_WORDS.get(name, name) + (
                  f" {_shown(there.get(name))} there, {_shown(here.get(name))} here"
                  if name in ("targets", "machine") else "")
                  for name in sorted(set(there) | set(here)) if there.get(name) != here.get(name)]
        count = wording.count(len(held), "artifact")
        return (f"the cache holds {count} of {comp.name} for another build: "
                + (", ".join(differ) if differ else "other inputs"))

    def total(self, done: Collection[str] = ()) -> str:
        """The line under plan's cache lines ("" when nothing comes from the cache); the
        components in ``done`` are built here already and download nothing."""
        wanted = {n: size for n, size in self.downloads.items() if n not in done}
        if self.store is None or not wanted:
            return ""
        return (f"download from {self.store.location}: {format_bytes(sum(wanted.values()))} for "
                f"{wording.count(len(wanted), 'component')}")

