"""Statistics the review's reports share: the interval of a share, for the diagnoses' precision (review.precision)
and the reviewers' agreement with adjudicated outcomes (review.agreement)."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054  # the standard normal quantile of 0.975


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of a share successes/n (no continuity correction), or None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} out of {n} is not a proportion")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)
