"""Unit tests of bench/old_rule.py: release 0.1's verdict, which the simulation of the rule
(bench/simulate_rule.py, table in docs/verdict.md) compares the new one against.

Moved from tests/test_stats.py when the plugin stopped using it: the simulation's "old rule"
column is only as right as this reference.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_SPEC = importlib.util.spec_from_file_location(
    "old_rule", Path(__file__).resolve().parent.parent / "bench" / "old_rule.py"
)
assert _SPEC is not None and _SPEC.loader is not None
stats = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = stats  # its dataclasses look their module up
_SPEC.loader.exec_module(stats)
IMPROVED, NEW, OK, REGRESSED, UNSTABLE = (
    stats.IMPROVED,
    stats.NEW,
    stats.OK,
    stats.REGRESSED,
    stats.UNSTABLE,
)
Verdict, judge, ratio_estimate = stats.Verdict, stats.judge, stats.ratio_estimate


def lognormal(seed: int, n: int, median_ms: float = 1.0, sigma: float = 0.01) -> list[float]:
    """Timing-like samples: positive, multiplicative noise of relative size ``sigma``."""
    rng = np.random.default_rng(seed)
    return list(median_ms * rng.lognormal(0.0, sigma, n))


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
