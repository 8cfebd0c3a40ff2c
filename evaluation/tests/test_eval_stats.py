"""The statistics of evaluation runs against small reference computations written the slow, obvious way."""

import itertools
import random
import statistics

import numpy as np
import pytest

from evaluation import stats
from evaluation.figures import TaskRow, compare_figures, run_figures


def brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    """Over every way of choosing k of the repeats: the share where at least one passes."""
    draws = list(itertools.combinations(outcomes, k))
    return sum(any(d) for d in draws) / len(draws)


def brute_pass_hat_k(outcomes: list[bool], k: int) -> float:
    draws = list(itertools.combinations(outcomes, k))
    return sum(all(d) for d in draws) / len(draws)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_pass_at_k_and_pass_hat_k_equal_the_enumeration_over_every_draw(n):
    for c in range(n + 1):
        outcomes = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert stats.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(outcomes, k))
            assert stats.pass_hat_k(n, c, k) == pytest.approx(brute_pass_hat_k(outcomes, k))


def test_a_runs_pass_rates_average_over_the_tasks_with_enough_repeats():
    at, hat = stats.pass_rates([(3, 1), (3, 3), (2, 0)], max_k=3)
    assert at[1] == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert at[3] == pytest.approx((1 + 1) / 2)  # the 2-repeat task has no draw of 3
    assert hat[2] == pytest.approx((0 + 1 + 0) / 3)


def test_the_bootstrap_interval_is_the_percentile_interval_of_resampled_means():
    values = [0.0, 0.25, 1.0, 1.0, 0.5, 0.75, 0.0, 1.0]
    rng = np.random.default_rng(7)
    means = []
    for _ in range(500):
        picks = rng.integers(0, len(values), size=len(values))
        means.append(sum(values[i] for i in picks) / len(values))
    reference = np.quantile(means, [0.025, 0.975]).tolist()
    assert stats.bootstrap_ci(values, seed=7, samples=500) == pytest.approx(reference)
    lo, hi = stats.bootstrap_ci(values)
    assert lo < statistics.mean(values) < hi
    assert stats.bootstrap_ci(values) == [lo, hi]  # seeded: the same figures every time


def test_degenerate_intervals():
    assert stats.bootstrap_ci([]) == [None, None]
    assert stats.bootstrap_ci([0.4]) == [0.4, 0.4]
    assert stats.bootstrap_ci([1.0, 1.0, 1.0]) == [1.0, 1.0]


def test_the_exact_sign_flip_p_value_counts_every_sign_pattern():
    differences = [0.5, 0.25, -0.25, 1.0, 0.75]
    observed = abs(statistics.mean(differences))
    patterns = list(itertools.product([-1, 1], repeat=len(differences)))
    extreme = sum(
        abs(statistics.mean(s * d for s, d in zip(p, differences, strict=True))) >= observed - 1e-12 for p in patterns
    )
    assert stats.sign_flip_p_value(differences) == pytest.approx(extreme / len(patterns))
    assert stats.sign_flip_p_value([0.0, 0.0]) == 1.0


def test_the_sampled_sign_flip_p_value_is_near_the_exact_one():
    rng = random.Random(3)
    differences = [rng.uniform(-0.2, 0.6) for _ in range(24)]
    sampled = stats.sign_flip_p_value(differences)
    assert 0.0 < sampled < 0.01  # a consistent positive shift over 24 tasks
    assert stats.sign_flip_p_value([rng.uniform(-1, 1) for _ in range(24)]) > 0.01


def test_task_figures_use_the_sample_standard_deviation():
    assert stats.task_figures([1.0, 0.5, 0.0]) == {"mean": 0.5, "std": 0.5, "min": 0.0, "max": 1.0, "n": 3}
    assert stats.task_figures([0.3]) == {"mean": 0.3, "std": 0.0, "min": 0.3, "max": 0.3, "n": 1}
    assert stats.task_figures([])["mean"] is None


def rows():
    return [
        TaskRow("t1", "analysis", False, (1.0, 0.0)),
        TaskRow("t2", "analysis", True, (1.0, 1.0)),
        TaskRow("t3", None, False, (0.5, None)),
        TaskRow("t4", "systems", False, (None, None)),
    ]


def test_run_figures_by_hand():
    figures = run_figures(rows(), repeats=2, pass_threshold=1.0)
    assert figures["overall"]["mean"] == pytest.approx((0.5 + 1.0 + 0.5) / 3)
    assert figures["overall"]["tasks"] == 3 and figures["overall"]["tasks_total"] == 4
    assert figures["categories"]["analysis"]["mean"] == pytest.approx(0.75)
    assert figures["categories"]["uncategorized"]["mean"] == 0.5
    assert figures["categories"]["systems"] == {"mean": None, "ci": [None, None], "tasks": 0}
    assert figures["grading"]["hybrid"]["mean"] == 1.0
    assert figures["grading"]["code"]["mean"] == pytest.approx(0.5)
    # Repeat 0: t1 1.0, t2 1.0, t3 0.5 -> 5/6; repeat 1: t1 0, t2 1 -> 0.5.
    assert figures["repeat_means"] == pytest.approx([5 / 6, 0.5])
    assert figures["overall"]["std_across_repeats"] == pytest.approx(statistics.stdev([5 / 6, 0.5]))
    # pass@1 over the three tasks with a score: t1 1/2, t2 1, t3 0; pass@2 over t1, t2 only.
    assert figures["pass_at_k"] == pytest.approx({"1": 0.5, "2": 1.0})
    assert figures["pass_hat_k"] == pytest.approx({"1": 0.5, "2": 0.5})
    assert figures["missing"] == ["t3", "t4"] and figures["unscored"] == ["t4"]
    assert figures["tasks"]["t4"] == {"mean": None, "std": None, "min": None, "max": None, "n": 0}


def test_the_comparison_pairs_tasks_both_runs_scored_and_names_the_flips():
    a = rows()
    b = [
        TaskRow("t1", "analysis", False, (1.0, 1.0)),
        TaskRow("t2", "analysis", True, (0.0, 0.5)),
        TaskRow("t3", None, False, (0.5, 0.5)),
        TaskRow("t4", "systems", False, (1.0, 1.0)),
    ]
    figures = compare_figures(a, b, pass_threshold=1.0)
    assert figures["tasks_compared"] == 3 and figures["tasks_not_compared"] == ["t4"]
    assert figures["mean_difference"] == pytest.approx(((0.5 - 1.0) + (1.0 - 0.25) + 0) / 3)
    assert figures["flipped"] == {"a_only": ["t2"], "b_only": ["t1"]}
    assert figures["categories"] == pytest.approx({"analysis": ((0.5 - 1.0) + 0.75) / 2, "uncategorized": 0.0})
    lo, hi = figures["ci"]
    assert lo <= figures["mean_difference"] <= hi
