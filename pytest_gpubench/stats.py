"""Statistics on one session's timing samples: what a sample may be, the median's precision.

The verdict across sessions is in rule.py. numpy and scipy are imported by the functions that
need them: a run without --gpubench imports this module and must stay light.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

# Confidence level of the interval of the median that decides when sampling may stop.
CONFIDENCE = 0.95

# The range of one call's time, in ms, that a timer may report and a baseline may hold: a
# femtosecond is no GPU's time for anything, and neither are 16 minutes for one kernel call.
# Bounded, log-times and their ratios stay far from overflow.
MIN_SAMPLE_MS = 1e-9
MAX_SAMPLE_MS = 1e6


def sample_problem(value: float) -> str:
    """'' for a time a sample may have, else what is wrong with it (for error messages)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if MIN_SAMPLE_MS <= value <= MAX_SAMPLE_MS:  # False for NaN
            return ""
    return f"{value!r:.40} ms, not a time between {MIN_SAMPLE_MS:g} and {MAX_SAMPLE_MS:g} ms"


def median_halfwidth(samples_ms: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """Relative half-width of the distribution-free confidence interval of the median.

    The interval is bounded by order statistics chosen from the binomial distribution, so it
    holds whatever the shape of the timing distribution (long right tails are common).
    """
    import numpy as np
    from scipy import stats

    data = np.sort(np.asarray(samples_ms, dtype=float))
    n = len(data)
    # 1-based ranks lower and n + 1 - lower bound the interval: 0-based lower - 1 and n - lower.
    lower = int(stats.binom.ppf((1 - confidence) / 2, n, 0.5))
    upper = n - lower
    if lower < 1 or upper >= n:
        return math.inf
    median = float(np.median(data))
    if median <= 0:
        return math.inf
    return float(data[upper] - data[lower - 1]) / 2 / median
