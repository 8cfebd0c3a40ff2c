"""lib.polled_figures: held figures are reused while their stamp holds (up to IDLE_SECONDS), computed again at once
after a change when computing them is quick, and at most every REUSE_FACTOR times their cost when it is slow."""

import pytest
from django.core.cache import cache

from lib.polled_figures import IDLE_SECONDS, REUSE_FACTOR, polled_figures


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    cache.clear()
    yield Clock()
    cache.clear()


def counting(clock, cost: float):
    """A compute() that returns how often it ran, and takes `cost` seconds of the clock."""
    calls = []

    def compute():
        calls.append(clock.now)
        clock.now += cost
        return len(calls)

    return compute


def test_the_same_stamp_reuses_the_figures_until_they_are_idle_seconds_old(clock):
    compute = counting(clock, 0.001)
    assert polled_figures("k", (1,), compute, clock=clock) == 1
    clock.now += IDLE_SECONDS - 1
    assert polled_figures("k", (1,), compute, clock=clock) == 1
    clock.now += 2
    assert polled_figures("k", (1,), compute, clock=clock) == 2  # a change the stamp cannot see shows by then


def test_a_new_stamp_recomputes_at_once_when_computing_is_quick(clock):
    compute = counting(clock, 0.001)
    assert polled_figures("k", (1,), compute, clock=clock) == 1
    clock.now += 0.1  # past 30 x 1 ms
    assert polled_figures("k", (2,), compute, clock=clock) == 2
    assert polled_figures("k", (2,), compute, clock=clock) == 2
    assert polled_figures("other", (2,), compute, clock=clock) == 3  # keys are apart


def test_slow_figures_are_recomputed_at_most_every_reuse_factor_times_their_cost(clock):
    compute = counting(clock, 2.0)  # 20,000 tasks' bootstrap intervals
    assert polled_figures("k", (1,), compute, clock=clock) == 1
    computed_at = clock.now - 2.0
    for stamp in range(2, 20):  # polled every 2 s while the work moves on
        clock.now += 2.0
        expected = 1 if clock.now - computed_at < 2.0 * REUSE_FACTOR else 2
        assert polled_figures("k", (stamp,), compute, clock=clock) == expected
    clock.now = computed_at + 2.0 * REUSE_FACTOR + 0.5
    assert polled_figures("k", (99,), compute, clock=clock) == 2
    # While nothing changes they are kept for their reuse time when it is longer than the idle limit.
    clock.now += max(IDLE_SECONDS, 2.0 * REUSE_FACTOR) - 3
    assert polled_figures("k", (99,), compute, clock=clock) == 2
