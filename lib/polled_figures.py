"""Figures a polling page shows that cost a pass over thousands of rows (a run's confidence intervals, a batch's
funnel): computed again only when the work they describe has changed, and then at most so often.

    figures = polled_figures(f"run:{run.pk}:{stamp_of_creation}", stamp, compute)

`stamp` is cheap to read and changes whenever the work moves on (a run's counters, a batch's item counts and usage):
- the stamp is the one the held figures were computed at: they are reused, for up to IDLE_SECONDS (so that a change
  the stamp does not see, such as a task moved to another category, shows within that time);
- the stamp has changed: they are computed again, unless computing them took long and was done a short while ago
  (less than REUSE_FACTOR times what it took): then the held ones are shown a little longer. A run of 200 tasks
  (a few ms) is so recomputed on every poll after a change; one of 20,000 (about 2 s) at most every minute or so,
  so that a page polled every 2 s costs a full pass on about one poll in 30, not on each.
They are held in Django's cache (per web process unless a shared cache is configured).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

REUSE_FACTOR = 30
IDLE_SECONDS = 60.0
KEY_PREFIX = "polled-figures:"


def polled_figures(key: str, stamp: Any, compute: Callable[[], Any], *, clock: Callable[[], float] | None = None):
    """compute(), or the value it gave for `key` before, as the module's docstring says. `stamp` must pickle and
    compare by value (a tuple of numbers and strings); `clock` gives the time (time.time)."""
    clock = clock or time.time
    now = clock()
    held = cache.get(KEY_PREFIX + key)
    if held is not None:
        age = now - held["at"]
        busy_for = held["took"] * REUSE_FACTOR
        if age < busy_for or (held["stamp"] == stamp and age < max(IDLE_SECONDS, busy_for)):
            return held["value"]
    value = compute()
    took = max(clock() - now, 0.0)
    entry = {"stamp": stamp, "at": now, "took": took, "value": value}
    cache.set(KEY_PREFIX + key, entry, timeout=max(IDLE_SECONDS, took * REUSE_FACTOR) * 2)
    return value
