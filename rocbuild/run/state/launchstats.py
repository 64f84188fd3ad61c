"""What ccache and distcc saved in each compile step, kept in ``state/cache-stats/`` for
``rocbuild status`` and the build's summary.

ccache's stats log (CCACHE_STATSLOG, one counter name per line) and distcc's log are
appended to by every compile of a component; ``observe`` reads only the part one step
added. Where the logs are and which variables point at them is model/launchers.py's.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rocbuild.model.graph import Component
from rocbuild.model.launchers import Launch, distcc_log, distributes, stats_log
from rocbuild.run.state.state import read_json, write_json_atomic

_HIT_COUNTERS = ("direct_cache_hit", "preprocessed_cache_hit")
_FALLBACK = re.compile(r"failed to distribute")
_REMOTE_DONE = re.compile(r"compile \S+ on (\S+) completed ok")


@dataclass
class StepStats:
    hits: int = 0
    misses: int = 0
    remote: int = 0  # compiles distcc ran on another host
    fallbacks: int = 0  # compiles distcc meant to send away and ran here instead

    @property
    def hit_rate(self) -> float | None:
        total = self.hits + self.misses
        return self.hits / total if total else None

    def text(self) -> str:
        parts = []
        if self.hit_rate is not None:
            parts.append(f"ccache {self.hit_rate:.0%} hits ({self.hits}/"
                         f"{self.hits + self.misses})")
        if self.remote or self.fallbacks:
            parts.append(f"distcc {self.remote} remote, {self.fallbacks} fell back to local")
        return ", ".join(parts)


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def parse_stats(stats_text: str, distcc_text: str) -> StepStats:
    """Counters from a part of ccache's stats log (one counter name per line, each line one
    increment, ``#`` lines name the source) and of distcc's log."""
    stats = StepStats()
    for line in stats_text.splitlines():
        line = line.strip()
        if line in _HIT_COUNTERS:
            stats.hits += 1
        elif line == "cache_miss":
            stats.misses += 1
    for line in distcc_text.splitlines():
        if _FALLBACK.search(line):
            stats.fallbacks += 1
        else:
            done = _REMOTE_DONE.search(line)
            if done and done.group(1) != "localhost":
                stats.remote += 1
    return stats


def record_path(workdir: Path, component: str) -> Path:
    return workdir / "state" / "cache-stats" / f"{component}.json"


def read_record(workdir: Path, component: str) -> dict[str, Any] | None:
    return read_json(record_path(workdir, component))


@contextmanager
def observe(launch: Launch | None, comp: Component, warnings: list[str]) -> Iterator[None]:
    """Around a compile step: what ccache and distcc did in it, kept for ``status`` and the
    summary; compiles that fell back to local become a warning of the step. A compile with
    neither (``--ccache off``) leaves no counts: an earlier compile's would read as this one's
    ("ccache 0% hits" after a run without the cache)."""
    if launch is None or (launch.ccache is None and not distributes(launch, comp)):
        if launch is not None:  # this compile counts nothing: the last one's counts go
            record_path(launch.workdir, comp.name).unlink(missing_ok=True)
        yield
        return
    logs = (stats_log(launch.workdir, comp.name), distcc_log(launch.workdir, comp.name))
    for log in logs:
        log.parent.mkdir(parents=True, exist_ok=True)
    if distributes(launch, comp):
        # distcc does not create its DISTCC_DIR, and without its lock folder it never sends
        # a job away (every compile "fails to distribute")
        (launch.workdir / "distcc").mkdir(parents=True, exist_ok=True)
    starts = [_size(log) for log in logs]
    try:
        yield
    finally:
        stats = parse_stats(_read_from(logs[0], starts[0]), _read_from(logs[1], starts[1]))
        write_json_atomic(record_path(launch.workdir, comp.name), {
            **asdict(stats), "when": time.time(), "ccache": launch.ccache_state,
            "hosts": launch.hosts if distributes(launch, comp) else ""})
        if stats.fallbacks:
            warnings.append(f"distcc: {stats.fallbacks} compile(s) fell back to local (a host "
                            f"in '{launch.hosts}' was down or refused; see {logs[1]})")


def summary_lines(workdir: Path, components: list[str]) -> list[str]:
    """One line per component compiled in this run: its cache hit rate and distcc counts."""
    return [f"{name}: {text}" for name in components if (text := status_text(workdir, name))]


def status_text(workdir: Path, component: str) -> str:
    """The last compile's hit rate for ``rocbuild status``; "" when nothing was recorded."""
    record = read_record(workdir, component)
    if record is None:
        return ""
    return StepStats(record.get("hits", 0), record.get("misses", 0), record.get("remote", 0),
                     record.get("fallbacks", 0)).text()
