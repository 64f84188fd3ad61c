"""Counts and durations in the words a user reads: "1 file", "2 files", "under a minute",
never "1 files" or "about 0 min"."""

from __future__ import annotations


def count(n: int, singular: str, plural: str | None = None) -> str:
    """``count(1, "file")`` -> "1 file"; ``count(2, "library", "libraries")`` -> "2 libraries"."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def duration(seconds: float) -> str:
    """An estimate: "under a minute", "about 12 min", "about 3.5 h"."""
    if seconds < 60:
        return "under a minute"
    if seconds < 3600:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"
