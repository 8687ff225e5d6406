"""Change points over a test's history of sessions: a creep or a step toward slower.

The verdict (rule.py) compares a run with its history's level, which absorbs a slowdown that
arrives a little per session (issue 16). This module reads the history itself, oldest first
on the log scale, and flags a ``creep`` or a ``step`` toward slower, with a one-line reason;
a speed-up is the verdict's (``improved``). The method, its rank statistics and what is
reported: docs/verdict.md, "Change points and creep". Pure module: numpy and scipy only.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.baseline import HISTORY_SESSIONS
from ..core.codec import Coded
from ..core.samples import plural
from .rule import nanmedian

# --- constants (bench/simulate_changes.py; tables in docs/verdict.md) -----------------------

# Fewer sessions than this: nothing is claimed. With 6, sessions in order (the clearest
# creep) reach p 0.0016 and a clean step of 3 after 3 p 0.07: a creep is significant at ALPHA
# from 7 sessions (p 0.00026 in order), a step on its own split from 16.
MIN_SESSIONS = 6
# The most sessions judged, the latest of a longer history (issue 46: 400 took 53 s and
# 1.8 GB; 40 take 1.4 s): a saved history and a run's session, with room for a longer
# window (bench/simulate_changes.py).
MAX_SESSIONS = 2 * HISTORY_SESSIONS
# Sessions on each side of a step, and rising sessions of a creep, at least.
MIN_SEGMENT = 3
# Significance per test, steps and rises together: about ALPHA of stationary histories are
# significant when sessions are exchangeable, whatever their distribution (the null is drawn:
# 0.06% of 100 000 normal histories of 20 at 0.05%, 0.12% at 0.1%), so half of the 0.1%
# allowed (table "false flags").
ALPHA = 0.0005
# A flag needs a change of at least this share of the threshold: flagged before the threshold
# is reached, and not for a drift too small to matter (the simulation's power table).
THRESHOLD_SHARE = 0.5
# The default smallest change flagged: half the default threshold of 5%.
MIN_CHANGE = 0.025
# Random orders per length for the permutation null; its p-values resolve 1 / PERMUTATIONS,
# and the share at ALPHA is known to about 14% (50 orders above it).
PERMUTATIONS = 100_000
SEED = 16  # issue 16: the same null every run
CHUNK = 10_000  # random orders at a time


class Flag(str, enum.Enum):
    """What a history shows: a rise session by session, or a level that moved at once."""

    CREEP = "creep"
    STEP = "step"


@dataclass(frozen=True)
class Step(Coded):
    """A slower level from session ``index`` (0-based, oldest first) to the last one."""

    index: int  # the first session of the new level
    size: float  # fraction: 0.10 is 10% slower than the sessions before it
    p: float  # permutation p-value of the split, against the null of its part's length


@dataclass(frozen=True)
class Trend(Coded):
    """The broken stick that fits the history best: flat up to ``onset - 1``, then rising
    (or not) to the end."""

    onset: int  # the first session of the rise (1: the whole window's trend)
    slope: float  # fraction per session (Theil-Sen over sessions onset - 1 to the last)
    change: float  # fraction: the slope over the sessions it rose over
    p: float  # permutation p-value of the most significant rise statistic


@dataclass(frozen=True)
class Changes(Coded):
    """What a test's history shows. ``steps``: the significant slower steps, oldest first
    (small ones included; a flag needs ``min_change``); ``trend``: the best broken stick,
    None below ``MIN_SESSIONS``; ``flag``: creep, step, or None; ``reason``: a line saying why."""

    sessions: int
    steps: tuple[Step, ...] = ()
    trend: Trend | None = None
    flag: Flag | None = None
    reason: str = ""
    min_change: float = MIN_CHANGE
    alpha: float = ALPHA


def min_change_for(threshold: float) -> float:
    """The smallest change flagged for a test gated at ``threshold``."""
    return THRESHOLD_SHARE * threshold


def detect(
    log_medians: Sequence[float], *, min_change: float = MIN_CHANGE, alpha: float = ALPHA
) -> Changes:
    """Steps and creep in ``log_medians`` (the log of each session's median, oldest first;
    of a longer history, the latest MAX_SESSIONS)."""
    x = np.asarray(log_medians, dtype=float)[-MAX_SESSIONS:]
    k = len(x)
    if not np.all(np.isfinite(x)):
        raise ValueError("session medians must be finite")
    if k < MIN_SESSIONS:
        return Changes(
            k,
            min_change=min_change,
            alpha=alpha,
            reason=f"{plural(k, 'session')}: {MIN_SESSIONS} needed to tell a change",
        )
    p_step, p_trend = (float(p[0]) for p in p_values(x))
    steps = tuple(_steps(x, 0, alpha, p_step))
    # The trend: the broken stick that fits best.
    losses, slopes = _ramp_fits(x)
    onset = 1 + int(np.argmin(losses))
    slope = float(slopes[onset - 1])
    trend = Trend(onset, math.expm1(slope), math.expm1(slope * (k - onset)), p_trend)
    step = max((s for s in steps if s.size >= min_change), key=lambda s: s.size, default=None)
    creep = trend if trend.p <= alpha and trend.change >= min_change else None
    if step is not None and creep is not None:
        # Both shapes explain the rise: name the one that fits the sessions better.
        if _step_loss(x, step.index) <= losses[creep.onset - 1]:
            creep = None
        else:
            step = None
    flag, reason = None, ""
    if creep is not None:
        flag = Flag.CREEP
        reason = (
            f"creep: {_pct(creep.slope)}/session over the last {k - creep.onset} of {k} "
            f"sessions, {_pct(creep.change)} in all (p {creep.p:.2g})"
        )
    elif step is not None:
        flag = Flag.STEP
        reason = (
            f"step: {_pct(step.size)} over the last {k - step.index} of {k} sessions "
            f"(p {step.p:.2g})"
        )
    return Changes(k, steps, trend, flag, reason, min_change, alpha)


def _pct(fraction: float) -> str:
    return f"{fraction * 100:+.1f}%"


# --- the statistics on ranks ----------------------------------------------------------------


@functools.cache
def _contrasts(k: int) -> np.ndarray:
    """The step contrasts of ``k`` sessions: column j, the level from session MIN_SEGMENT + j
    on, centered and of unit length."""
    m = np.stack([np.arange(k) >= t for t in range(MIN_SEGMENT, k - MIN_SEGMENT + 1)], axis=1)
    m = m - m.mean(axis=0)
    return np.asarray(m / np.linalg.norm(m, axis=0))


def _statistics(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of sessions (time along the last axis): the step statistics, one per split (a
    standardized Mann-Whitney of the ranks; 0 where all sessions tie: no evidence), and the
    rise statistics, one per onset 1 to ``k - MIN_SEGMENT`` (Kendall's S, unscaled, over the
    pairs whose later session is at the onset or after): docs/verdict.md, "Change points and
    creep"."""
    k = x.shape[-1]
    ranks = rank(x)
    centered = ranks - ranks.mean(axis=-1, keepdims=True)
    scale = np.linalg.norm(centered, axis=-1, keepdims=True) / math.sqrt(k - 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        step = np.nan_to_num((centered @ _contrasts(k)) / scale, nan=0.0)
    # later[..., j] = sum over i < j of sign(x_j - x_i); S at onset s sums it over j >= s.
    later = np.zeros(ranks.shape)
    for j in range(1, k):
        earlier, now = ranks[..., :j], ranks[..., j : j + 1]
        later[..., j] = (earlier < now).sum(axis=-1) - (earlier > now).sum(axis=-1)
    rise = np.cumsum(later[..., ::-1], axis=-1)[..., ::-1]
    # Rounded: orders of equal statistics compare equal, whatever the float arithmetic.
    return np.round(step, 9), rise[..., 1 : k - MIN_SEGMENT + 1]


def rank(x: np.ndarray) -> np.ndarray:
    """The ranks of finite values along the last axis, 1 to k, ties given the mean of theirs:
    ``scipy.stats.rankdata(x, axis=-1)``, without importing scipy.stats (0.8 s of `gpubench
    show`)."""
    k = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    ordered = np.take_along_axis(x, order, axis=-1)
    tie = ordered[..., 1:] == ordered[..., :-1]  # the j+1-th smallest ties the j-th
    edge = np.ones(x.shape[:-1] + (1,), dtype=bool)
    index = np.arange(k)
    # Each value's run of ties: its first place, and (from the right) its last.
    first = np.maximum.accumulate(np.where(np.concatenate([edge, ~tie], axis=-1), index, 0), -1)
    ends = np.where(np.concatenate([~tie, edge], axis=-1), index, k)
    last = np.minimum.accumulate(ends[..., ::-1], axis=-1)[..., ::-1]
    ranks = np.empty(x.shape)
    np.put_along_axis(ranks, order, (first + last) / 2 + 1, axis=-1)
    return ranks


Null = tuple[np.ndarray, ...]  # one family's statistics, each its null sorted


@functools.cache
def _null(k: int) -> tuple[Null, Null, np.ndarray]:
    """Over PERMUTATIONS random orders of ``k`` sessions (seeded: the same every run; ranks
    only, so one null per length): each step and each rise statistic's null, sorted, and the
    smallest share of each order over all of them (:func:`_smallest_p`), sorted."""
    rng = np.random.default_rng([SEED, k])
    parts = []
    for start in range(0, PERMUTATIONS, CHUNK):
        n = min(CHUNK, PERMUTATIONS - start)
        parts.append(_statistics(rng.permuted(np.tile(np.arange(k, dtype=float), (n, 1)), axis=1)))
    out = []
    smallest = []
    for family in zip(*parts, strict=True):
        values = np.concatenate(family)
        shares = np.empty(values.shape)
        levels = []
        for j in range(values.shape[1]):
            # Each order's share: the orders at least as large, by distinct value.
            distinct, where, counts = np.unique(
                values[:, j], return_inverse=True, return_counts=True
            )
            at_least = np.cumsum(counts[::-1])[::-1]
            shares[:, j] = (1 + at_least[where]) / (1 + len(values))
            levels.append(np.repeat(distinct, counts))
        out.append(tuple(levels))
        smallest.append(shares.min(axis=1))
    return out[0], out[1], np.sort(np.minimum(*smallest))


def _smallest_p(null: Null, values: np.ndarray) -> np.ndarray:
    """Per row of ``values``, the smallest over its statistics of the share of its own null at
    least as large: min-p (docs/verdict.md, "Change points and creep")."""
    n = len(null[0])
    shares = np.empty(values.shape)
    for j, levels in enumerate(null):
        below = np.searchsorted(levels, values[..., j] - 1e-9, side="left")
        shares[..., j] = (1 + n - below) / (1 + n)
    return np.asarray(shares.min(axis=-1))


def p_values(log_medians: np.ndarray | Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Permutation p-values of the steps and of the rises of each row (histories of one
    length, at least MIN_SESSIONS): the share of random orders whose most significant
    statistic, steps and rises together, is at least as significant as the row's most
    significant step (or rise), the row's own order counted in. One family: a stationary
    history has either p at most ``a`` with probability at most ``a``. Of a longer history,
    its latest MAX_SESSIONS."""
    x = np.atleast_2d(np.asarray(log_medians, dtype=float))[:, -MAX_SESSIONS:]
    step_null, rise_null, smallest = _null(x.shape[1])
    step, rise = _statistics(x)
    return (
        _p_value(smallest, _smallest_p(step_null, step)),
        _p_value(smallest, _smallest_p(rise_null, rise)),
    )


def _p_value(smallest: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """Share of the null's (sorted) smallest p-values at most ``observed``, the observed
    order counted in."""
    below = np.searchsorted(smallest, observed * (1 + 1e-9), side="right")
    return np.asarray((1 + below) / (1 + len(smallest)))


def _steps(x: np.ndarray, offset: int, alpha: float, p: float | None = None) -> list[Step]:
    """The significant slower steps of ``x`` (indices shifted by ``offset``; ``p``: the step
    p-value of ``x`` if known): the best split, then the best of each side, while
    significant."""
    k = len(x)
    if k < MIN_SESSIONS:
        return []
    if p is None:
        p = float(p_values(x)[0][0])
    if p > alpha:
        return []
    null = _null(k)[0]
    step = _statistics(x[None, :])[0][0]
    shares = [np.searchsorted(levels, step[j] - 1e-9) for j, levels in enumerate(null)]
    t = MIN_SEGMENT + int(np.argmax(shares))  # the split most significant on its own
    size = math.expm1(float(np.median(np.subtract.outer(x[t:], x[:t]))))
    return [
        *_steps(x[:t], offset, alpha),
        Step(offset + t, size, p),
        *_steps(x[t:], offset + t, alpha),
    ]


def _ramp_fits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per onset (1 to ``len(x) - MIN_SEGMENT``), the absolute residuals and the slope of the
    broken stick rising from it, fitted by Theil-Sen (the median of the pairwise slopes, the
    median intercept): one-sided excursions move neither much."""
    k = len(x)
    onsets = np.arange(1, k - MIN_SEGMENT + 1)[:, None]
    ramps = np.maximum(0, np.arange(k)[None, :] - onsets + 1).astype(float)  # (onsets, k)
    dc = ramps[:, :, None] - ramps[:, None, :]
    dx = np.broadcast_to(np.subtract.outer(x, x), dc.shape)
    pairwise = np.where(dc > 0, dx / np.where(dc > 0, dc, 1.0), np.nan)
    slopes = nanmedian(pairwise.reshape(len(onsets), -1))
    residuals = x[None, :] - slopes[:, None] * ramps
    centered = residuals - np.median(residuals, axis=1, keepdims=True)
    return np.abs(centered).sum(axis=1), slopes


def _step_loss(x: np.ndarray, t: int) -> float:
    """Absolute residuals of two levels (medians) split before session ``t``."""
    return float(np.abs(x[:t] - np.median(x[:t])).sum() + np.abs(x[t:] - np.median(x[t:])).sum())
