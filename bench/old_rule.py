"""Release 0.1's verdict, kept as the reference the simulation compares against.

One-sided Mann-Whitney U on the samples of one session against the samples of one baseline
session, at a Bonferroni-corrected alpha, plus a Hodges-Lehmann ratio of at least
1 + threshold (``judge``). The plugin no longer uses it (see pytest_gpubench/rule.py and
docs/verdict.md for why); bench/simulate_rule.py checks its vectorized copy against it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
REGRESSED, IMPROVED, OK, NEW, UNSTABLE = "regressed", "improved", "ok", "new", "unstable"


def samples_to_reach(alpha: float, margin: float = 1e-3) -> int:
    """Fewest samples per side with which Mann-Whitney U can reach ``alpha * margin``.

    With n samples on each side, the most extreme one-sided p-value is that of
    z = sqrt(3 n^2 / (2n + 1)); a margin below alpha leaves room for real noise. Without this
    floor, a small sample after a Bonferroni correction could never be significant.
    """
    n = 2
    while stats.norm.sf(math.sqrt(3 * n * n / (2 * n + 1))) > alpha * margin and n < 10_000:
        n += 1
    return n


@dataclass(frozen=True)
class Verdict:
    """The judgement of current samples against a baseline."""

    status: str
    ratio: float | None = None  # Hodges-Lehmann estimate of current / baseline
    ratio_low: float | None = None  # confidence interval of that ratio
    ratio_high: float | None = None
    p_slower: float | None = None  # one-sided Mann-Whitney U p-value that current is slower
    p_faster: float | None = None
    alpha: float | None = None  # the corrected level the p-values were held to
    reason: str = ""

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1

    @property
    def p_value(self) -> float | None:
        """The p-value of the direction the estimate points to."""
        if self.ratio is None:
            return None
        return self.p_slower if self.ratio >= 1 else self.p_faster


def ratio_estimate(
    current_ms: Sequence[float], baseline_ms: Sequence[float], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """Hodges-Lehmann ratio current/baseline with its distribution-free confidence interval.

    Works on log-times: the estimate is exp(median of all pairwise differences); the interval
    takes the order statistics of those differences given by the Mann-Whitney U distribution
    (normal approximation, fine for the sample sizes used here).
    """
    cur = np.log(np.asarray(current_ms, dtype=float))
    base = np.log(np.asarray(baseline_ms, dtype=float))
    diffs = np.sort(np.subtract.outer(cur, base).ravel())
    m, n = len(cur), len(base)
    estimate = float(np.median(diffs))
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    k = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    if k < 1:
        return _exp(estimate), 0.0, math.inf
    return _exp(estimate), _exp(float(diffs[k - 1])), _exp(float(diffs[-k]))


def _exp(value: float) -> float:
    """exp that saturates to inf instead of raising OverflowError."""
    return math.exp(value) if value < 700 else math.inf


def judge(
    current_ms: Sequence[float],
    baseline_ms: Sequence[float],
    *,
    threshold: float,
    alpha: float,
) -> Verdict:
    """Compare current samples with the baseline's.

    - ``regressed``: significantly slower (one-sided Mann-Whitney U, p < alpha) and the
      estimated slowdown is at least ``threshold``;
    - ``improved``: the same the other way;
    - ``unstable``: neither, and the confidence interval of the ratio still reaches a change
      of ``threshold`` in either direction: the noise is too high to tell;
    - ``ok``: the interval rules out a change of ``threshold`` size.

    ``alpha`` is the level after any correction for multiple tests.
    """
    from scipy import stats

    if len(current_ms) < 2 or len(baseline_ms) < 2:
        return Verdict(NEW, reason="too few samples to compare")
    ratio, low, high = ratio_estimate(current_ms, baseline_ms)
    p_slower = float(stats.mannwhitneyu(current_ms, baseline_ms, alternative="greater").pvalue)
    p_faster = float(stats.mannwhitneyu(current_ms, baseline_ms, alternative="less").pvalue)
    common = dict(
        ratio=ratio,
        ratio_low=low,
        ratio_high=high,
        p_slower=p_slower,
        p_faster=p_faster,
        alpha=alpha,
    )
    if p_slower < alpha and ratio >= 1 + threshold:
        return Verdict(REGRESSED, **common)
    if p_faster < alpha and ratio <= 1 / (1 + threshold):
        return Verdict(IMPROVED, **common)
    if high > 1 + threshold or low < 1 / (1 + threshold):
        return Verdict(
            UNSTABLE,
            reason=f"the {CONFIDENCE:.0%} interval of the ratio, {low:.3f}-{high:.3f}, "
            f"cannot rule out a change of {threshold:.0%}",
            **common,
        )
    return Verdict(OK, **common)
