"""Unit tests of what a sample may be and of the median's precision (core.samples).

The summaries are core.records' (tests/report/test_report.py); the verdict is judge.rule's
(tests/judge/test_rule.py).
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from pytest_gpubench.core import samples
from pytest_gpubench.core.samples import binomial_quantile, median_halfwidth


def lognormal(seed: int, n: int, median_ms: float = 1.0, sigma: float = 0.01) -> list[float]:
    """Timing-like samples: positive, multiplicative noise of relative size ``sigma``."""
    rng = np.random.default_rng(seed)
    return list(median_ms * rng.lognormal(0.0, sigma, n))


# --- precision of the median ----------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_median_halfwidth_is_infinite_with_too_few_samples(n: int) -> None:
    assert median_halfwidth([1.0] * n) == math.inf


def test_median_halfwidth_is_zero_for_identical_samples() -> None:
    assert median_halfwidth([2.0] * 20) == 0.0


@pytest.mark.parametrize("confidence", [0.5, 0.9, 0.95, 0.99, 0.9999])
def test_binomial_quantile_is_scipy_stats_binom_ppf(confidence: float) -> None:
    from scipy import stats

    q = (1 - confidence) / 2
    for n in [*range(0, 1500), 4999, 10_000, 123_457]:
        assert binomial_quantile(q, n) == int(stats.binom.ppf(q, n, 0.5)), n


@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_binomial_quantile_refuses_what_is_no_quantile(q: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        binomial_quantile(q, 50)


@pytest.mark.slow
def test_median_halfwidth_leaves_scipy_stats_unimported() -> None:
    """Its import cost (1.3-1.9 s in a fresh process on an H200) fell inside the first
    measurement, so inside the device lock of every fresh process."""
    code = (
        "import sys; from pytest_gpubench.core.samples import median_halfwidth; "
        "median_halfwidth([1.0 + i / 100 for i in range(50)]); "
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_median_halfwidth_is_relative_to_the_median() -> None:
    samples = lognormal(1, 50, sigma=0.05)
    assert median_halfwidth([1000 * s for s in samples]) == pytest.approx(median_halfwidth(samples))


def test_median_halfwidth_shrinks_with_more_samples() -> None:
    widths = [median_halfwidth(lognormal(7, n, sigma=0.05)) for n in (20, 80, 320, 1280)]
    assert widths == sorted(widths, reverse=True)
    # A distribution-free interval still narrows like 1/sqrt(n): 4x the samples, ~half width.
    for wide, narrow in zip(widths, widths[1:], strict=False):
        assert 0.3 < narrow / wide < 0.75


def test_median_halfwidth_uses_symmetric_order_statistics() -> None:
    # For n=10 the textbook 95% distribution-free interval of the median is [x(2), x(9)]
    # (coverage 97.9%); [x(2), x(8)] covers only 93.5%, less than the 95% promised.
    data = [float(v) for v in range(1, 11)]
    assert median_halfwidth(data) == pytest.approx((9 - 2) / 2 / 5.5)


# --- what a sample may be -----------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [samples.MIN_SAMPLE_MS, 1.0, 7, np.float32(2.5), samples.MAX_SAMPLE_MS]
)
def test_sample_problem_accepts_times_in_range(value: float) -> None:
    assert samples.sample_problem(value) == ""


@pytest.mark.parametrize(
    "value", [5e-324, 0.0, -1.0, math.nan, math.inf, 1e308, True, "1", None, [1.0]]
)
def test_sample_problem_names_the_value_and_the_range(value: object) -> None:
    assert samples.sample_problem(value) == (  # type: ignore[arg-type]
        f"{value!r} ms, not a time between 1e-09 and 1e+06 ms"
    )
