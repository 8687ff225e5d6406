"""What a timing sample may be, and what one session's samples say: their median, the
standard error of its logarithm (the within-session error the verdict needs) and the
precision of the median (when the timing engine may stop sampling).

numpy is imported when a summary is computed, and scipy when the median's precision is: a
pytest run without ``--gpubench`` imports this module and must stay light. Only scipy.special:
scipy.stats took 1.3-1.9 s to import in a fresh process on an H200, inside the first
measurement's sampling, so inside the device lock of every process that confirms a verdict
or times a side of a comparison (bench/results/h200x2-2026-11-28e).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

# The range of one call's time, in ms, that a timer may report and a baseline may hold: a
# femtosecond is no GPU's time for anything, and neither are 16 minutes for one kernel call.
# Bounded, log-times and their ratios stay far from overflow.
MIN_SAMPLE_MS = 1e-9
MAX_SAMPLE_MS = 1e6

# sd of the median of n iid normal values, times sqrt(n): the median's cost over the mean.
# Monte Carlo, 2e6 draws per n (tests/judge/test_rule.py re-checks it); sqrt(pi/2) beyond.
_MEDIAN_FACTOR = (
    1.0,
    1.0,
    1.160,
    1.091,
    1.198,
    1.135,
    1.215,
    1.159,
    1.223,
    1.177,
    1.229,
    1.188,
    1.232,
    1.196,
    1.234,
)


def sample_problem(value: object) -> str:
    """'' for a time a sample may have, else what is wrong with it (for error messages)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if MIN_SAMPLE_MS <= float(value) <= MAX_SAMPLE_MS:  # False for NaN
            return ""
    return f"{value!r:.40} ms, not a time between {MIN_SAMPLE_MS:g} and {MAX_SAMPLE_MS:g} ms"


def median_factor(n: int | np.ndarray) -> np.ndarray:
    """sd of the median of ``n`` normal values relative to that of their mean (1 for n <= 2)."""
    import numpy as np

    counts = np.asarray(n)
    table = np.asarray(_MEDIAN_FACTOR)
    inside = np.clip(counts, 1, len(table)) - 1
    return np.where(counts > len(table), math.sqrt(math.pi / 2), table[inside])


def session_summary(samples_ms: Sequence[float]) -> tuple[float, int, float]:
    """(median in ms, count, standard error of the log-median; nan for one sample) of one
    session's samples (milliseconds, all positive).

    The spread of log-samples is the normal-consistent MAD from 10 samples on (robust to the
    long right tails of timings) and the sample sd below (a MAD of 3 values is biased low);
    the median's standard error is that spread times :func:`median_factor` over sqrt(n).
    """
    import numpy as np

    data = np.asarray(samples_ms, dtype=float)
    if data.ndim != 1 or not np.all(data > 0):
        raise ValueError("a session summary needs a sequence of positive samples (ms)")
    n = len(data)
    if n < 1:
        raise ValueError("a session summary needs at least one sample")
    x = np.log(data)
    median = np.median(x)
    if n == 1:
        return float(np.exp(median)), n, math.nan
    if n >= 10:
        spread = 1.4826 * np.median(np.abs(x - median))
    else:
        spread = np.std(x, ddof=1)
    return float(np.median(data)), n, float(median_factor(n) * spread / math.sqrt(n))


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
    gives it (tests/core/test_stats.py), by bisection on the CDF."""
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


# The units a time is shown in, by size in ms: the largest in which it is at least 1.
TIME_UNITS = (("ns", 1e-6), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3))


def time_unit(ms: float) -> tuple[str, float]:
    """The unit of TIME_UNITS a time is shown in, and its size in ms."""
    unit, scale = TIME_UNITS[0]
    for name, size in TIME_UNITS:
        value = abs(ms / size)
        # As rounded to three figures: 999.7 µs is 1.00 ms. Rounding moves no value from
        # 1 or more below 1, nor one under 0.999 up to 1: only those between are formatted.
        if value >= 1 or (value >= 0.999 and abs(float(f"{ms / size:.3g}")) >= 1):
            unit, scale = name, size
        elif value < 0.999:
            break  # each next unit is larger: the time is under 1 in it too
    return unit, scale


def time_text(ms: float) -> str:
    """A time as every table and message shows it: three significant figures, trailing
    zeros kept, in the largest unit of ns, µs, ms and s in which it is at least 1
    (``19.9 ms``, ``106 µs``, ``17.0 µs``, ``1.00 ms``): one precision whatever the size."""
    if not math.isfinite(ms) or ms == 0:
        return f"{ms:g} ms"
    unit, scale = time_unit(ms)
    value = ms / scale
    if abs(value) >= 999.5:  # past the largest unit
        return f"{value:.0f} {unit}"
    return f"{f'{value:#.3g}'.rstrip('.')} {unit}"  # 106 µs, not "106. µs"


def plural(n: int, noun: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


def bytes_text(n: float) -> str:
    """A size for a line of text: bytes, or KiB, MiB, GiB to three significant figures."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def energy_text(joules: float) -> str:
    """Energy for a line of text, to three significant figures: J, mJ, µJ or nJ."""
    for unit, size in (("J", 1.0), ("mJ", 1e-3), ("µJ", 1e-6)):
        if abs(joules) >= size:
            return f"{f'{joules / size:#.3g}'.rstrip('.')} {unit}"
    return f"{f'{joules / 1e-9:#.3g}'.rstrip('.')} nJ"
