"""The statistics of evaluation runs, on plain numbers (no Django): means with bootstrap confidence intervals,
pass@k and pass^k, and the paired comparison of two runs.

Conventions (what the pages and `evaluate --json` report):
- A task's std is the sample standard deviation over its scored repeats (0.0 for one repeat).
- A mean's 95% interval is a percentile bootstrap over tasks, seeded (BOOTSTRAP_SEED), BOOTSTRAP_SAMPLES draws.
  With repeats, the tasks are the clusters: a draw takes whole tasks (all their repeats), and its statistic is the
  mean of the drawn tasks' means, so repeats of one task never count as independent evidence.
- pass@k (at least one of k repeats passes) and pass^k (all k pass) use the unbiased estimators over the n scored
  repeats of a task, c of which pass: pass@k = 1 - C(n-c, k) / C(n, k), pass^k = C(c, k) / C(n, k); a run's value
  is their mean over the tasks with n >= k.
- The paired comparison of runs A and B takes the tasks both scored; its interval is a bootstrap over those tasks
  of the mean difference, its p-value a sign-flip permutation test (exact up to EXACT_FLIP_TASKS tasks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

BOOTSTRAP_SEED = 20261201
BOOTSTRAP_SAMPLES = 2000
PERMUTATIONS = 10000
EXACT_FLIP_TASKS = 16  # up to 2^16 sign patterns are enumerated instead of sampled
CONFIDENCE = 0.95
_BYTE_BITS = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(float)  # 256 x 8, high bit first


def task_figures(scores: Sequence[float]) -> dict:
    """mean, std, min, max, n of one task's scored repeats (all None but n when it has none)."""
    n = len(scores)
    if not n:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    values = np.asarray(scores, dtype=float)
    std = float(values.std(ddof=1)) if n > 1 else 0.0
    return {"mean": float(values.mean()), "std": std, "min": float(values.min()), "max": float(values.max()), "n": n}


def bootstrap_ci(values: Sequence[float], *, seed: int = BOOTSTRAP_SEED, samples: int = BOOTSTRAP_SAMPLES) -> list:
    """The percentile bootstrap 95% interval of the mean of `values` (one value per task): [lo, hi], or
    [None, None] for no values."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return [None, None]
    if data.size == 1 or np.all(data == data[0]):
        return [float(data[0]), float(data[0])] if data.size == 1 else [float(data.mean())] * 2
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, data.size, size=(samples, data.size))
    means = data[draws].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    lo, hi = np.quantile(means, [tail, 1 - tail])
    return [float(lo), float(hi)]


def mean_with_ci(values: Sequence[float], **options) -> dict:
    """{"mean", "ci", "tasks"} over per-task values (mean None when there are none)."""
    mean = float(np.mean(values)) if len(values) else None
    return {"mean": mean, "ci": bootstrap_ci(values, **options), "tasks": len(values)}


def std_across_repeats(per_repeat_means: Sequence[float | None]) -> float | None:
    """The sample standard deviation of the overall score across repeats (the stability figure), over the repeats
    that have a score; None with fewer than two."""
    values = [v for v in per_repeat_means if v is not None]
    if len(values) < 2:
        return None
    return float(np.std(values, ddof=1))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k repeats drawn from n (c of them passing) passes."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all of k repeats drawn from n (c of them passing) pass."""
    return math.comb(c, k) / math.comb(n, k) if c >= k else 0.0


def pass_rates(tasks: Sequence[tuple[int, int]], max_k: int) -> tuple[dict, dict]:
    """({k: pass@k}, {k: pass^k}) for k = 1..max_k over tasks given as (n scored repeats, c passing); a k that no
    task has enough repeats for is left out."""
    at, hat = {}, {}
    for k in range(1, max_k + 1):
        eligible = [(n, c) for n, c in tasks if n >= k]
        if not eligible:
            continue
        at[k] = sum(pass_at_k(n, c, k) for n, c in eligible) / len(eligible)
        hat[k] = sum(pass_hat_k(n, c, k) for n, c in eligible) / len(eligible)
    return at, hat


def sign_flip_p_value(
    differences: Sequence[float], *, seed: int = BOOTSTRAP_SEED, permutations: int = PERMUTATIONS
) -> float | None:
    """Two-sided p-value of "the mean difference is 0" by flipping the signs of the per-task differences: exact
    (every sign pattern) for up to EXACT_FLIP_TASKS tasks, else sampled (with the +1 correction)."""
    d = np.asarray(differences, dtype=float)
    if d.size == 0:
        return None
    observed = abs(d.mean())
    eps = 1e-12
    if not np.any(d):
        return 1.0
    if d.size <= EXACT_FLIP_TASKS:
        patterns = ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        means = np.abs((patterns * d).mean(axis=1))
        return float(np.mean(means >= observed - eps))
    # Each sampled sign pattern is a row of random bytes, one bit per task (set: +1). Summed through a table of
    # what each byte value adds (the differences over its set bits), a pattern costs m lookups instead of n
    # multiplications: the page that compares two runs of hundreds of tasks does this on every view.
    rng = np.random.default_rng(seed)
    m = (d.size + 7) // 8
    padded = np.zeros(m * 8)
    padded[: d.size] = d
    table = _BYTE_BITS @ padded.reshape(m, 8).T  # [byte value, byte position] -> sum of d over its set bits
    patterns = rng.integers(0, 256, size=(permutations, m), dtype=np.uint8)
    plus = table[patterns, np.arange(m)].sum(axis=1)  # sum of d where the sign is +1
    means = np.abs(2 * plus - d.sum()) / d.size
    return float((np.sum(means >= observed - eps) + 1) / (permutations + 1))


def paired_difference(a: Sequence[float], b: Sequence[float], **options) -> dict:
    """{"mean_difference", "ci", "p_value", "tasks"} of A − B over paired per-task means."""
    if len(a) != len(b):
        raise ValueError("paired values must have the same length")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return {
        "mean_difference": float(d.mean()) if d.size else None,
        "ci": bootstrap_ci(d, **options),
        "p_value": sign_flip_p_value(d),
        "tasks": int(d.size),
    }


def histogram(values: Sequence[float], bins: int = 10) -> list[dict]:
    """Counts of values in [0, 1] over `bins` equal bins (the last one closed): [{"lo", "hi", "count"}]."""
    counts = [0] * bins
    for value in values:
        index = min(int(value * bins), bins - 1) if value >= 0 else 0
        counts[index] += 1
    return [{"lo": i / bins, "hi": (i + 1) / bins, "count": c} for i, c in enumerate(counts)]
