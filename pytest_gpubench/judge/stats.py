"""Statistics of one session's samples: the precision of their median.

The verdict across sessions is in rule.py. scipy is imported when the function runs: the
timing engine imports this module, and a run without --gpubench must stay light. Only
scipy.special: scipy.stats took 1.3-1.9 s to import in a fresh process on an H200, inside
the first measurement's sampling, so inside the device lock of every process that confirms
a verdict or times a side of a comparison (bench/results/h200x2-2026-11-28e).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Confidence level of the interval of the median that decides when sampling may stop.
CONFIDENCE = 0.95


def median_halfwidth(samples_ms: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """Relative half-width of the distribution-free confidence interval of the median.

    The interval is bounded by order statistics chosen from the binomial distribution, so it
    holds whatever the shape of the timing distribution (long right tails are common).
    """
    import numpy as np

    data = np.sort(np.asarray(samples_ms, dtype=float))
    n = len(data)
    # 1-based ranks lower and n + 1 - lower bound the interval: 0-based lower - 1 and n - lower.
    lower = binomial_quantile((1 - confidence) / 2, n)
    upper = n - lower
    if lower < 1 or upper >= n:
        return math.inf
    median = float(np.median(data))
    if median <= 0:
        return math.inf
    return float(data[upper] - data[lower - 1]) / 2 / median


def binomial_quantile(q: float, n: int) -> int:
    """The ``q`` quantile of the number of heads in ``n`` fair tosses (0 < q < 1): the least
    ``k`` whose cumulative chance ``P(X <= k)`` reaches ``q``, as ``scipy.stats.binom.ppf``
    gives it (tests/test_stats.py), by bisection on the CDF."""
    from scipy import special

    if not 0 < q < 1:  # NaN too: scipy.stats raised, a bisection would answer n
        raise ValueError(f"a quantile must lie between 0 and 1, got {q!r}")
    low, high = 0, n  # P(X <= n) = 1 >= q
    while low < high:
        mid = (low + high) // 2
        if special.bdtr(mid, n, 0.5) >= q:
            high = mid
        else:
            low = mid + 1
    return low
