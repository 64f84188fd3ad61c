"""Median and spread of one test's repetitions, and whether one setting beat another.

From ``samples_ts`` (tokens/s of every repetition), never ``avg_ts``: the mean is pulled by
the first repetition, which is often an outlier even after llama-bench's own warm-up pass
(recorded: tg128 samples 520.8, 5643.3, 5863.4, ... in vulkan-gpu.json). So the first
repetition is thrown away, and the figure is the median of the rest, with the lowest and
highest as its spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WARMUP = 1  # repetitions discarded at the start of each test


def tokens_text(value: float) -> str:
    """A tokens/s figure as the table and the chart print it."""
    return f"{value:,.1f}" if value < 100_000 else f"{value:,.0f}"


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float
    samples: tuple[float, ...]  # the kept repetitions, in run order
    discarded: tuple[float, ...]  # the warm-up repetitions

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def spread_pct(self) -> float:
        """(high - low) / median, in percent: how far apart the repetitions were."""
        return 100.0 * (self.high - self.low) / self.median if self.median else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"median_ts": self.median, "min_ts": self.low, "max_ts": self.high,
                "spread_pct": round(self.spread_pct, 2), "n": self.n,
                "samples_ts": list(self.samples), "discarded_ts": list(self.discarded)}


def summarize(samples_ts: Sequence[float], warmup: int = WARMUP) -> Summary | None:
    """None when nothing is left after the warm-up (a run of one repetition)."""
    values = [float(v) for v in samples_ts]
    kept, dropped = values[warmup:], values[:warmup]
    if not kept:
        return None
    return Summary(statistics.median(kept), min(kept), max(kept), tuple(kept), tuple(dropped))


HELPED, HURT, WITHIN = "helped", "hurt", "within the spread"


def compare(base: Summary, other: Summary) -> str:
    """``helped`` only when every repetition of ``other`` beat every one of ``base`` (the
    ranges do not overlap), ``hurt`` for the reverse, else ``within the spread``: a
    difference the repetitions themselves cover is not a finding."""
    if other.low > base.high:
        return HELPED
    return HURT if other.high < base.low else WITHIN


def change_pct(base: Summary, other: Summary) -> float:
    return 100.0 * (other.median - base.median) / base.median if base.median else 0.0
