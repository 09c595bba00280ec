"""Confidence intervals for episode metrics."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval for a binomial rate; (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    if successes <= 0:  # exact ends: the formula's float noise would give 1e-18 instead of 0
        return 0.0, z * z / (n + z * z)
    if successes >= n:
        return n / (n + z * z), 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_ci(values: Sequence[float], z: float = Z95) -> dict[str, float]:
    """Mean with a 95% interval: Wilson for 0/1 values, normal approximation otherwise."""
    n = len(values)
    if n == 0:
        return {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n": 0}
    mean = sum(values) / n
    if all(v in (0, 1) for v in values):
        low, high = wilson_interval(sum(values), n, z)
    else:
        var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
        half = z * math.sqrt(var / n)
        low, high = mean - half, mean + half
    return {"mean": mean, "ci_low": low, "ci_high": high, "n": n}
