"""Waiting for what another process does (a marker file, a child that ends): the one polling
helper of the tests.

The guard only turns a regression that would hang into a failure that says what never came;
it is never a speed claim (no test asserts how long something took), so it is generous."""

from __future__ import annotations

import time
from collections.abc import Callable

HANG_GUARD = 120.0  # seconds: only a hung run reaches it


def wait_for(predicate: Callable[[], object], what: str, *, guard: float = HANG_GUARD,
             every: float = 0.05) -> None:
    """Poll ``predicate`` every ``every`` seconds until it is true; an AssertionError naming
    ``what`` once ``guard`` seconds passed without it."""
    give_up = time.monotonic() + guard
    while not predicate():
        assert time.monotonic() < give_up, f"never happened within {guard:.0f} s: {what}"
        time.sleep(every)
