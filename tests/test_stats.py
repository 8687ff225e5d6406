"""Unit tests of pytest_gpubench.stats: summaries, the median's precision and the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpubench import stats
from pytest_gpubench.stats import (
    IMPROVED,
    NEW,
    OK,
    REGRESSED,
    UNSTABLE,
    Verdict,
    judge,
    median_halfwidth,
    ratio_estimate,
    summarize,
)


def lognormal(seed: int, n: int, median_ms: float = 1.0, sigma: float = 0.01) -> list[float]:
    """Timing-like samples: positive, multiplicative noise of relative size ``sigma``."""
    rng = np.random.default_rng(seed)
    return list(median_ms * rng.lognormal(0.0, sigma, n))


# --- summaries ------------------------------------------------------------------------------


def test_summarize_reports_order_statistics_and_mean() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.n, s.median_ms, s.mean_ms, s.min_ms) == (5, 3.0, 3.0, 1.0)
    assert (s.q1_ms, s.q3_ms, s.iqr_ms) == (2.0, 4.0, 2.0)
    assert s.noise == pytest.approx(2.0 / 3.0)


def test_summary_noise_is_infinite_for_a_zero_median() -> None:
    assert summarize([0.0, 0.0, 0.0]).noise == math.inf


# --- precision of the median ----------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_median_halfwidth_is_infinite_with_too_few_samples(n: int) -> None:
    assert median_halfwidth([1.0] * n) == math.inf


def test_median_halfwidth_is_zero_for_identical_samples() -> None:
    assert median_halfwidth([2.0] * 20) == 0.0


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


# --- ratio of the two distributions --------------------------------------------------------


def test_ratio_estimate_of_identical_samples_is_one() -> None:
    samples = lognormal(3, 30)
    ratio, low, high = ratio_estimate(samples, samples)
    assert ratio == pytest.approx(1.0)
    assert low < 1.0 < high


def test_ratio_estimate_recovers_a_pure_scale_change_exactly() -> None:
    baseline = lognormal(4, 25)
    ratio, low, high = ratio_estimate([1.2 * b for b in baseline], baseline)
    assert ratio == pytest.approx(1.2)
    assert low < 1.2 < high


def test_ratio_estimate_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    truth, trials, covered = 1.07, 400, 0
    for seed in range(trials):
        baseline = lognormal(2 * seed, 30, sigma=0.03)
        current = lognormal(2 * seed + 1, 30, median_ms=truth, sigma=0.03)
        ratio, low, high = ratio_estimate(current, baseline)
        assert ratio == pytest.approx(truth, rel=0.03)
        covered += low <= truth <= high
    assert 0.92 <= covered / trials <= 0.99


def test_ratio_estimate_interval_is_unbounded_for_tiny_samples() -> None:
    ratio, low, high = ratio_estimate([1.0, 1.1], [1.0, 1.05])
    assert 1.0 < ratio < 1.1
    assert (low, high) == (0.0, math.inf)


def test_ratio_estimate_saturates_instead_of_overflowing() -> None:
    # Once OverflowError: math range error, for a baseline of 5e-324 ms samples.
    ratio, low, high = ratio_estimate([1.0] * 20, [5e-324] * 20)
    assert ratio == low == high == math.inf
    assert judge([1.0] * 20, [5e-324] * 20, threshold=0.05, alpha=0.01).status == REGRESSED


@pytest.mark.parametrize(
    "value", [stats.MIN_SAMPLE_MS, 1.0, 7, np.float32(2.5), stats.MAX_SAMPLE_MS]
)
def test_sample_problem_accepts_times_in_range(value: float) -> None:
    assert stats.sample_problem(value) == ""


@pytest.mark.parametrize(
    "value", [5e-324, 0.0, -1.0, math.nan, math.inf, 1e308, True, "1", None, [1.0]]
)
def test_sample_problem_names_the_value_and_the_range(value: object) -> None:
    assert stats.sample_problem(value) == (  # type: ignore[arg-type]
        f"{value!r} ms, not a time between 1e-09 and 1e+06 ms"
    )


# --- the verdict ----------------------------------------------------------------------------


def judge_scaled(scale: float, sigma: float = 0.01, n: int = 50) -> Verdict:
    baseline = lognormal(11, n, sigma=sigma)
    current = lognormal(12, n, median_ms=scale, sigma=sigma)
    return judge(current, baseline, threshold=0.05, alpha=0.01)


def test_judge_a_a_is_ok() -> None:
    verdict = judge_scaled(1.0)
    assert verdict.status == OK
    assert verdict.ratio == pytest.approx(1.0, abs=0.01)
    assert verdict.ratio_low < 1.0 < verdict.ratio_high
    assert verdict.p_value > 0.01
    assert verdict.reason == ""


def test_judge_ten_percent_slower_is_regressed() -> None:
    verdict = judge_scaled(1.10)
    assert verdict.status == REGRESSED
    assert verdict.ratio == pytest.approx(1.10, rel=0.01)
    assert verdict.change == pytest.approx(0.10, abs=0.01)
    assert verdict.p_value == verdict.p_slower < 1e-6
    assert verdict.p_faster > 0.5
    assert verdict.alpha == 0.01


def test_judge_ten_percent_faster_is_improved() -> None:
    verdict = judge_scaled(0.90)
    assert verdict.status == IMPROVED
    assert verdict.ratio == pytest.approx(0.90, rel=0.01)
    assert verdict.change == pytest.approx(-0.10, abs=0.01)
    assert verdict.p_value == verdict.p_faster < 1e-6


def test_judge_very_noisy_samples_are_unstable() -> None:
    verdict = judge_scaled(1.0, sigma=0.3, n=20)
    assert verdict.status == UNSTABLE
    assert verdict.ratio_high > 1.05 or verdict.ratio_low < 1 / 1.05
    assert verdict.reason.startswith("the 95% interval of the ratio, ")
    assert verdict.reason.endswith("cannot rule out a change of 5%")


def test_judge_a_significant_change_smaller_than_the_threshold_is_not_a_regression() -> None:
    verdict = judge_scaled(1.02, sigma=0.002)
    assert verdict.p_slower < 0.01
    assert verdict.status == OK


def test_judge_a_large_threshold_tolerates_a_large_slowdown() -> None:
    baseline, current = lognormal(11, 50), lognormal(12, 50, median_ms=1.2)
    assert judge(current, baseline, threshold=0.30, alpha=0.01).status == OK


def test_judge_holds_p_values_to_the_given_alpha() -> None:
    baseline, current = lognormal(21, 10, sigma=0.05), lognormal(22, 10, 1.15, sigma=0.05)
    loose = judge(current, baseline, threshold=0.05, alpha=0.05)
    strict = judge(current, baseline, threshold=0.05, alpha=1e-12)
    assert loose.status == REGRESSED
    assert strict.status == UNSTABLE


@pytest.mark.parametrize("current, baseline", [([1.0], [1.0, 1.1]), ([1.0, 1.1], [1.0]), ([], [])])
def test_judge_with_too_few_samples_is_new(current: list[float], baseline: list[float]) -> None:
    verdict = judge(current, baseline, threshold=0.05, alpha=0.01)
    assert verdict == Verdict(NEW, reason="too few samples to compare")
    assert verdict.change is None and verdict.p_value is None


def test_verdict_order_puts_what_needs_attention_first() -> None:
    assert stats.VERDICT_ORDER[:2] == (REGRESSED, IMPROVED)
    assert stats.VERDICT_ORDER[-1] == OK
    assert set(stats.VERDICT_ORDER) == {REGRESSED, IMPROVED, OK, NEW, UNSTABLE}


# --- the sample floor for corrected levels --------------------------------------------------


@pytest.mark.parametrize("alpha", [0.01, 0.01 / 20, 0.01 / 1000])
def test_samples_to_reach_makes_the_corrected_alpha_reachable(alpha: float) -> None:
    n = stats.samples_to_reach(alpha)
    baseline, current = lognormal(1, n), lognormal(2, n, median_ms=1.2)
    assert judge(current, baseline, threshold=0.05, alpha=alpha).status == REGRESSED


def test_samples_to_reach_grows_as_alpha_shrinks() -> None:
    floors = [stats.samples_to_reach(0.01 / tests) for tests in (1, 10, 100, 1000)]
    assert floors == sorted(floors)
    assert floors[0] < floors[-1]
    # Three samples a side can never be significant at 1e-5: complete separation gives 0.05.
    assert stats.samples_to_reach(1e-5) > 3
