"""The verdict: a test's current sessions judged against its history, as real GPUs behave.

A session's log-median is a tight floor plus, in a few sessions, a one-sided slow excursion;
each test's floor and excursion rates are fitted and shrunk toward a prior
(bench/fit_prior.py on bench/results/sessions.json). A test regresses when its lowest current
session is unlikely under that model and its change clears the threshold less what noise
explains; a history that cannot gate says so (``not gated``). The model, the rule and what it
does on recorded sessions (bench/resample.py): docs/verdict.md, "The model", "The rule" and
"On recorded sessions". Pure module: numpy and scipy only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

# scipy.special, not scipy.stats: the same functions (stats.t.sf(x, df) is stdtr(df, -x),
# stats.norm.ppf is ndtri), at half the import time of scipy.stats (0.7 s of every command).
from scipy import special

from ..core.records import (
    RATIO_SUFFIX,
    Judgement,
    SessionSummary,
    Status,
    Versus,
    gate_text,
    is_ratio,
)
from ..core.samples import MAX_SAMPLE_MS, MIN_SAMPLE_MS, plural, sample_problem

# --- constants ------------------------------------------------------------------------------

# Target power at a slowdown of exactly the threshold (effect bound) and of ``gateable``:
# 99%, the target of issue 16 at the default threshold from 20 us.
Z_POWER = float(special.ndtri(0.99))
# A session beyond this many floor sds from the median is an excursion (bench/fit_prior.py
# counts them with the same constant).
EXCURSION_Z = 3.0
# The lower half's median distance over this is the normal's sd.
HALF_NORMAL_MEDIAN = 0.6745
# Sampling sd of log(sigma) from the lower half of K sessions is about 1.1 / sqrt(K / 2)
# (simulation, tests/judge/test_rule.py): the history is worth K / (4 * 1.1^2) sessions of a
# variance estimate, the unit of the prior's weight nu0.
OWN_WEIGHT_PER_SESSION = 1 / (4 * 1.1**2)
# The excursion rates' prior weight is at most this many sessions: the fit pools tests of
# machines whose rates differ (one H200 under load: 35-45% of sessions in excursions, the
# other 5-20%), which its between-test weights (up to 50) do not see.
MAX_RATE_WEIGHT = 10.0
# The excursion sizes' prior weight, in excursions.
SIZE_WEIGHT = 2.0
# A run's sessions share the machine's phase, so whether each is in an excursion is correlated:
# fitted by bench/run_correlation.py (docs/verdict.md, "How alike a run's sessions are").
RUN_ICC = 0.042
# One test's excursions are alike in size: n of one run are worth 1 + (n - 1) (1 - SIZE_ICC)
# independent ones (bench/run_correlation.py; docs/verdict.md, "The model").
SIZE_ICC = 0.39
# Nothing is steadier between sessions than this (medians are stored to 6 digits).
MIN_SIGMA = 2e-4
# A history shorter than this tells no spread between sessions: it gates only a change of
# SHORT_GATE or more, judged on its timer's prior (issue 45: one saved session let a 50%
# slowdown pass as `not gated`), each flagged session confirmed in fresh processes.
MIN_GATED_SESSIONS = 3
SHORT_GATE = 0.5
# A spread known mostly (three quarters) from the prior (its weight over the history's) is
# not the test's own: not gated.
MAX_PRIOR_SHARE = 0.75
# A test that cannot catch a slowdown of this much is not gated (no gate of hundreds of
# percent is a gate).
NOT_GATED_BEYOND = 0.5
# A first session is confirmed when its significance is under this (and its change could be
# an effect, at the screen's power): loose, it only buys fresh-process sessions.
SCREEN_P = 0.05
SCREEN_Z = float(special.ndtri(0.99))
# After a look that decided nothing, more sessions are taken while the significance is
# within this factor of the look's level (a borderline test), up to the cap.
CONTINUE_FACTOR = 1e3
# The largest log a float's exp holds: an interval's end beyond it is unbounded (None).
LOG_MAX = math.log(sys.float_info.max)


@dataclass(frozen=True)
class Prior:
    """The typical test of a duration class (bench/fit_prior.py): its floor spread ``sigma``
    (log scale) worth ``nu0`` sessions, and per side (slow, fast) of the excursions their
    rate, the rate's weight in sessions, and their mean size (log scale)."""

    duration_ms: float
    sigma: float
    nu0: float
    slow: tuple[float, float, float]
    fast: tuple[float, float, float]


# Fitted by bench/fit_prior.py to bench/results/sessions.json timed by the graph, by time per
# launch; tests/judge/test_rule.py checks it. Why not the kernel time's: docs/verdict.md, "Prior".
GRAPH_POINTS: tuple[Prior, ...] = (
    Prior(0.00121, sigma=0.015, nu0=0.4, slow=(0.19, 50, 0.13), fast=(0.0071, 23, 0.17)),
    Prior(0.00235, sigma=0.0056, nu0=0.24, slow=(0.23, 31, 0.071), fast=(0.031, 17, 0.012)),
    Prior(0.00405, sigma=0.0025, nu0=0.29, slow=(0.17, 13, 0.064), fast=(0.0048, 50, 0.014)),
    Prior(0.0279, sigma=0.00079, nu0=0.31, slow=(0.079, 9.1, 0.017), fast=(0.023, 22, 0.0049)),
    Prior(0.0539, sigma=0.0017, nu0=0.63, slow=(0.21, 19, 0.02), fast=(0.0047, 38, 0.0069)),
    Prior(0.152, sigma=0.00068, nu0=0.6, slow=(0.19, 21, 0.011), fast=(0.01, 50, 0.00091)),
)
# The floor of a test's sessions shifts between batches of fresh processes more than their
# spread within a batch shows (a history, then A/A sessions hours later on the same GPU: from
# 20 us, 1% of 57 tests ran 0.7% or more faster): the change a verdict reads carries this
# much more error, so that a slowdown of the threshold measured in a faster batch is still
# caught with the target power (bench/fit_prior.py: that 1% quantile over Z_POWER).
CONTEXT_SD = 0.003
# Timers not measured across sessions: the graph's table scaled (TIMER_SCALE), or one of their
# own fitted by bench/fit_prior.py (docs/verdict.md, "Prior").
WALL_POINTS: tuple[Prior, ...] = (
    Prior(0.00168, sigma=0.0064, nu0=3, slow=(0.1, 50, 0.085), fast=(0.0083, 50, 0.014)),
    Prior(0.0993, sigma=0.013, nu0=0.15, slow=(0.054, 9, 0.046), fast=(0.0021, 50, 0.04)),
    Prior(4.38, sigma=0.013, nu0=0.25, slow=(0.037, 50, 0.042), fast=(0.0031, 50, 0.039)),
)
TIMER_SCALE = {
    "cuda-graph": 1.0,
    "cupti-graph": 1.0,
    "cupti": 1.0,
    "cuda-event": 1.5,
    "cuda-event-cold": 2.0,
}
OWN_TABLES: dict[str, tuple[Prior, ...]] = {
    "wall": WALL_POINTS,
    "synchronizing": (
        Prior(1.0, sigma=0.078, nu0=0.5, slow=(0.2, 10.0, 0.1), fast=(0.02, 10.0, 0.05)),
    ),
}
# Timers whose time includes the gaps between a call's launches: indexed per launch.
PER_LAUNCH_TIMERS = frozenset({"cuda-graph", "cuda-event", "cuda-event-cold"})
# An unknown timer gets the noisiest table: judged conservatively, never at random (a ratio
# whose two functions' times are not known, too).
_FALLBACK_TIMER = "synchronizing"
# No ratio sessions are recorded yet: until a fit, a bound. Shifts not negatively correlated give
# var(a - b) <= 2 max(var a, var b) (docs/verdict.md, "Prior").
RATIO_SPREAD = math.sqrt(2)


def prior_for(
    duration_ms: float,
    timer: str,
    launches: int = 1,
    versus: Versus | None = None,
    graph: tuple[Prior, ...] = GRAPH_POINTS,
) -> Prior:
    """The prior of a measurement of ``duration_ms`` by ``timer`` whose call makes
    ``launches`` launches: interpolated in log(duration) between the table's points (sigma
    and sizes in log), flat beyond its ends. A ratio to a reference (its timer ends in
    RATIO_SUFFIX) with what it compares, ``versus``, gets :func:`ratio_prior`. ``graph``:
    the table of the graph's timers (the pair prior keeps the one its scales were fitted
    against)."""
    versus = known_versus(versus)
    if versus is not None and is_ratio(timer):
        return ratio_prior(versus, timer.removesuffix(RATIO_SUFFIX), graph)
    return priors_for([duration_ms], timer, [launches], graph).row(0)


def known_versus(versus: Versus | None) -> Versus | None:
    """``versus``, None where its times are no numbers: a ratio whose times are unknown gets
    the noisiest prior, not one of NaN."""
    if versus is None or math.isfinite(versus.fn_ms + versus.reference_ms):
        return versus
    return None


def priors_for(
    durations_ms: Sequence[float],
    timer: str,
    launches: Sequence[int],
    graph: tuple[Prior, ...] = GRAPH_POINTS,
) -> PriorArrays:
    """:func:`prior_for` of each duration with its launches, one timer and no ratio, as
    arrays: a few array calls for all of them instead of a dozen per prior (``gpubench
    show`` of 10^5 tests)."""
    durations = [
        d / max(1, n) if timer in PER_LAUNCH_TIMERS else d
        for d, n in zip(durations_ms, launches, strict=True)
    ]
    if timer in TIMER_SCALE:
        points, scale = graph, TIMER_SCALE[timer]
    else:
        points, scale = OWN_TABLES.get(timer, OWN_TABLES[_FALLBACK_TIMER]), 1.0
    at = np.array([math.log(max(d, 1e-9)) for d in durations])
    xs = [math.log(p.duration_ms) for p in points]

    def interp(values: list[float], log: bool = False) -> np.ndarray:
        if log:  # math.exp, as the priors always took them (numpy's may differ in the last bit)
            return np.array(list(map(math.exp, np.interp(at, xs, np.log(values)).tolist())))
        return np.asarray(np.interp(at, xs, values))

    def side(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        sides = [getattr(p, name) for p in points]
        rate = interp([s[0] for s in sides])
        weight = interp([s[1] for s in sides])
        size = interp([max(s[2], 1e-6) for s in sides], log=True)
        return rate, weight, scale * size

    return PriorArrays(
        duration_ms=np.array(durations, dtype=float),
        sigma=scale * interp([p.sigma for p in points], log=True),
        nu0=interp([p.nu0 for p in points]),
        slow=side("slow"),
        fast=side("fast"),
    )


def ratio_prior(versus: Versus, timer: str, graph: tuple[Prior, ...] = GRAPH_POINTS) -> Prior:
    """The prior of the ratio of two functions timed alternately by ``timer``: a bound
    (RATIO_SPREAD) from the larger of their own priors, until ratio sessions fit one."""
    own = max(
        prior_for(versus.fn_ms, timer, versus.fn_launches, graph=graph),
        prior_for(versus.reference_ms, timer, versus.reference_launches, graph=graph),
        key=lambda p: p.sigma,
    )
    rate = own.slow[0] + own.fast[0]
    side = (rate, min(own.slow[1], own.fast[1]), RATIO_SPREAD * max(own.slow[2], own.fast[2]))
    return Prior(own.duration_ms, RATIO_SPREAD * own.sigma, own.nu0, slow=side, fast=side)


# --- the sequential design ------------------------------------------------------------------


@dataclass(frozen=True)
class Design:
    """How many sessions a test may take and at which it is judged.

    ``cap``: fresh-process sessions a flagged test may gain (``--gpubench-confirm``); they
    come in batches of ``batch``; after each batch, and at the first session when ``cap`` is
    0, the test is judged, each look at an equal share of the level (Bonferroni over looks:
    valid whatever the looks' correlation)."""

    cap: int = 6
    batch: int = 2

    @property
    def looks(self) -> int:
        """Looks that may decide: one per batch, or the first session alone without any."""
        return max(1, math.ceil(self.cap / self.batch))

    def next_batch(self, sessions: int) -> int:
        """Fresh sessions to add to a test judged on ``sessions`` so far (0: no more)."""
        return max(0, min(self.batch, 1 + self.cap - sessions))


def normal_quantile(level: float) -> float:
    """The normal quantile that a one-sided ``level`` leaves above it: ``ndtri(1 - level)``,
    or from the lower tail where ``1 - level`` rounds to 1 (alpha 1e-20 over a family); inf
    for a level of 0 (alpha 5e-324)."""
    z = float(special.ndtri(1 - level))
    return z if math.isfinite(z) else float(-special.ndtri(level))


def ratio_interval(d: float, half: float) -> tuple[float | None, float | None]:
    """The ratios at ``d`` (log) plus or minus ``half``; none where ``half`` is negative (a
    one-sided level above one half, alpha 0.75: an interval that would end before it began);
    its upper end none where a float cannot hold it (unbounded)."""
    if not half >= 0:
        return None, None
    return math.exp(d - half), math.exp(d + half) if d + half <= LOG_MAX else None


def check_levels(threshold: float, alpha: float) -> None:
    """Raise ValueError, naming it, for a threshold or alpha no verdict can be judged at."""
    if not 0 < threshold < math.inf:
        raise ValueError(f"invalid threshold {threshold!r}: expected a fraction > 0 such as 0.05")
    if not 0 < alpha < 1:
        raise ValueError(f"invalid alpha {alpha!r}: expected a level in (0, 1) such as 0.01")


def corrected_alpha(alpha: float, family: int, fail_on_improvement: bool) -> float:
    """One-sided level of each test: alpha over the measurements judged, in both directions
    when improvements fail too."""
    return alpha / (max(1, family) * (2 if fail_on_improvement else 1))


# --- the rule on arrays (one row per test or per resampled replicate) -----------------------


@dataclass(frozen=True)
class Fit:
    """What a history says, per row: the floor and the excursions (log scale)."""

    m: np.ndarray
    k: np.ndarray
    sigma: np.ndarray
    df: np.ndarray
    prior_share: np.ndarray
    slow_rate: np.ndarray
    slow_size: np.ndarray
    fast_rate: np.ndarray
    fast_size: np.ndarray
    slow_total: np.ndarray  # the rate's evidence in sessions: history plus prior weight
    fast_total: np.ndarray
    # The history's own excursions (log size beyond m): their sizes' survival is these,
    # shrunk toward the prior's exponential (``size0``) worth SIZE_WEIGHT.
    slow_excursions: Excursions
    fast_excursions: Excursions
    slow_size0: np.ndarray
    fast_size0: np.ndarray

    def at(self, n: np.ndarray | int) -> Fit:
        """This fit for ``n`` sessions of one run, judged as a product of ``n`` survivals.

        Each excursion rate is replaced by the one whose n-th power is the chance that the
        ``n`` sessions are all excursions, ``E[pi^n]^(1/n)``, ``pi`` the run's rate: a Beta
        whose variance is the rate's uncertainty (its evidence, ``total`` sessions) plus what
        the run's sessions share (RUN_ICC): ``1 / (c + 1) = 1 / (total + 1) + RUN_ICC``. A
        short history, whose rate is barely known, or a run in a slow phase, so needs more
        sessions to rule excursions out. The prior's excursion size is stretched so that its
        n-th power is that of 1 + (n - 1) (1 - SIZE_ICC) independent sizes."""
        counts: np.ndarray = np.maximum(np.asarray(n), 1)
        steps = np.arange(int(np.max(counts)))
        used = steps < counts[..., None]
        stretch = np.broadcast_to(counts / (1 + (counts - 1) * (1 - SIZE_ICC)), self.m.shape)
        fields = {}
        for side in ("slow", "fast"):
            total = getattr(self, f"{side}_total")
            c = 1 / (1 / (total + 1) + RUN_ICC) - 1
            a = getattr(self, f"{side}_rate")[..., None] * c[..., None]
            terms = np.log((a + steps) / (c[..., None] + steps))
            fields[f"{side}_rate"] = np.exp(np.sum(np.where(used, terms, 0.0), axis=-1) / counts)
            seen: Excursions = getattr(self, f"{side}_excursions")
            fields[f"{side}_size0"] = getattr(self, f"{side}_size0") * stretch
            scale = seen.scale * stretch[seen.some][..., None, None]
            fields[f"{side}_excursions"] = dataclasses.replace(seen, scale=scale)
        return dataclasses.replace(self, **fields)


@dataclass(frozen=True)
class PriorArrays:
    """Priors of many rows, field by field."""

    duration_ms: np.ndarray
    sigma: np.ndarray
    nu0: np.ndarray
    slow: tuple[np.ndarray, np.ndarray, np.ndarray]
    fast: tuple[np.ndarray, np.ndarray, np.ndarray]

    @classmethod
    def of(cls, priors: Sequence[Prior]) -> PriorArrays:
        rows = [(p.duration_ms, p.sigma, p.nu0, *p.slow, *p.fast) for p in priors]
        return cls._of_columns(list(np.array(rows, dtype=float).reshape(len(rows), 9).T))

    def take(self, rows: np.ndarray) -> PriorArrays:
        """The priors of ``rows`` (indices or a mask)."""
        return self._of_columns([c[rows] for c in self._columns()])

    def row(self, i: int) -> Prior:
        """The prior of row ``i``."""
        d, sigma, nu0, s0, s1, s2, f0, f1, f2 = (float(c[i]) for c in self._columns())
        return Prior(d, sigma=sigma, nu0=nu0, slow=(s0, s1, s2), fast=(f0, f1, f2))

    def _columns(self) -> list[np.ndarray]:
        return [self.duration_ms, self.sigma, self.nu0, *self.slow, *self.fast]

    @classmethod
    def _of_columns(cls, c: Sequence[np.ndarray]) -> PriorArrays:
        return cls(c[0], c[1], c[2], slow=(c[3], c[4], c[5]), fast=(c[6], c[7], c[8]))


def nanmedian(x: np.ndarray) -> np.ndarray:
    """``np.nanmedian(x, axis=-1)``: NaN, unwarned, where a row holds no number."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # All-NaN slice encountered
        return np.asarray(np.nanmedian(x, axis=-1))


def _floor(history: np.ndarray, present: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, ...]:
    """(median, lower-half sigma or 0, sessions below) of NaN-padded rows."""
    with np.errstate(invalid="ignore", divide="ignore"):
        m = nanmedian(np.where(k[..., None] > 0, history, 0.0))
        below = np.where(present & (history < m[..., None]), m[..., None] - history, np.nan)
        n_below = np.sum(~np.isnan(below), axis=-1)
        own = np.where(
            n_below > 0,
            nanmedian(np.where(n_below[..., None] > 0, below, 0.0)) / HALF_NORMAL_MEDIAN,
            0.0,
        )
    return m, own, n_below


def fit(history: np.ndarray, prior: PriorArrays) -> Fit:
    """The floor and excursions of NaN-padded rows of log-medians, shrunk toward ``prior``.

    The floor's centre is the median of the sessions that are not slow excursions (beyond
    ``EXCURSION_Z`` lower-half sigmas of the median of all): a history with a third of its
    sessions in excursions has its plain median inside them, and a slowdown of exactly the
    threshold would read short of it."""
    present = ~np.isnan(history)
    k = present.sum(axis=-1)
    m, own, _ = _floor(history, present, k)
    scale = np.maximum(own, MIN_SIGMA)
    floor = present & (history - m[..., None] <= EXCURSION_Z * scale[..., None])
    m, own, n_below = _floor(np.where(floor, history, np.nan), floor, floor.sum(axis=-1))
    own = np.maximum(own, MIN_SIGMA)
    # Sessions that all agree (none below the median) told a spread under MIN_SIGMA; one
    # session tells none.
    w_own = np.where(k >= 2, OWN_WEIGHT_PER_SESSION * k, 0.0)
    nu0 = prior.nu0
    sigma = np.sqrt((nu0 * prior.sigma**2 + w_own * own**2) / (nu0 + w_own))
    share = nu0 / (nu0 + w_own)  # of the information on sigma, not of its value
    dev = np.where(present, history - m[..., None], 0.0)
    out = {}
    for name, side, sign in (("slow", prior.slow, 1.0), ("fast", prior.fast, -1.0)):
        rate0, weight, size0 = side
        beyond = present & (sign * dev > EXCURSION_Z * sigma[..., None])
        count = beyond.sum(axis=-1)
        sizes = np.where(beyond, sign * dev, 0.0).sum(axis=-1)
        weight = np.minimum(weight, MAX_RATE_WEIGHT)
        out[f"{name}_rate"] = (count + weight * rate0) / (k + weight)
        out[f"{name}_total"] = k + weight
        out[f"{name}_size"] = (sizes + SIZE_WEIGHT * size0) / (count + SIZE_WEIGHT)
        out[f"{name}_size0"] = np.broadcast_to(np.asarray(size0, dtype=float), k.shape)
        seen = np.where(beyond, sign * dev, np.nan)
        out[f"{name}_excursions"] = Excursions.of(seen, out[f"{name}_size0"])
    return Fit(
        m=m,
        k=k,
        sigma=sigma,
        df=np.maximum(nu0 + w_own, 1.0),
        prior_share=share,
        **out,
    )


def _spread(f: Fit, se: np.ndarray) -> np.ndarray:
    """sd of one current session about ``m``: floor, the median's own error, its samples'."""
    var_m = (math.pi / 2) * f.sigma**2 / np.maximum(f.k, 1)
    # An error a float cannot square (a damaged record's 1e200) leaves the spread inf: not gated.
    with np.errstate(over="ignore"):
        own = np.where(np.isfinite(se), se, 0.0)  # NaN: untold (one sample), as is inf
        return np.asarray(np.sqrt(f.sigma[..., None] ** 2 + var_m[..., None] + own**2))


@dataclass(frozen=True)
class Excursions:
    """One side's excursions of a fit's rows as :func:`_sizes_beyond` reads them, made once
    per fit (and taken by rows, :meth:`take`): the bisection of ``_bound`` asks a hundred
    times of every row."""

    count: np.ndarray  # per row (a trailing axis of 1)
    some: np.ndarray  # the rows that saw an excursion (most saw none; theirs sum to 0)
    sizes: np.ndarray  # theirs, NaN-padded (an axis of 1 before the sessions)
    scale: np.ndarray  # theirs: the prior's mean size (an axis of 1 before the sessions)

    @classmethod
    def of(cls, seen: np.ndarray, size0: np.ndarray) -> Excursions:
        count = np.sum(~np.isnan(seen), axis=-1)[..., None]
        some = count[..., 0] > 0
        return cls(count, some, seen[some][..., None, :], size0[some][..., None, None])


def _sizes_beyond(seen: Excursions, size0: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(an excursion's size is at least ``y`` (> 0)): the history's own excursions, counted,
    with the prior's exponential worth SIZE_WEIGHT of them. Counted, not fitted: the excursions
    of a test whose sessions fall in two groups (a 50 us kernel at -1.3% or +0.5 to +1.5%) are
    one lump, which an exponential of their mean size puts mostly below itself."""
    above = np.zeros(y.shape)
    if len(seen.sizes):
        beyond = np.maximum(y[seen.some][..., None] - seen.sizes, 0.0)
        above[seen.some] = np.nansum(np.exp(-beyond / seen.scale), axis=-1)
    prior = np.exp(-np.maximum(y, 0) / size0[..., None])
    return np.asarray((above + SIZE_WEIGHT * prior) / (seen.count + SIZE_WEIGHT))


def _change_se(f: Fit, n: np.ndarray) -> np.ndarray:
    """Error of the change read from ``n`` current sessions (their median from three on, their
    mean below) against the history's median, plus the floor's shift between batches."""
    factor = np.where(n >= 3, math.pi / 2, 1.0)
    floor = f.sigma**2 * (factor / n + (math.pi / 2) / np.maximum(f.k, 1))
    return np.asarray(np.sqrt(floor + CONTEXT_SD**2))


def survival(f: Fit, y: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """P(an unchanged session lands at or above ``y``), y relative to ``m``, per element."""
    floor = 1 - f.slow_rate - f.fast_rate
    # The bisections of ``_bound`` call this a hundred times.
    t = special.stdtr(f.df[..., None], -(y / spread))
    # Each side's sizes only where some y is on that side (a bisection asks one side only).
    up, down = y > 0, y < 0
    slow = np.where(up, _sizes_beyond(f.slow_excursions, f.slow_size0, y), 1.0) if up.any() else 1.0
    fast = (
        np.where(down, 1 - _sizes_beyond(f.fast_excursions, f.fast_size0, -y), 0.0)
        if down.any()
        else 0.0
    )
    return np.asarray(
        floor[..., None] * t + f.slow_rate[..., None] * slow + f.fast_rate[..., None] * fast
    )


def below(f: Fit, y: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """P(an unchanged session lands at or below ``y``): the mirror of :func:`survival`."""
    return survival(_mirrored(f), -y, spread)


def _mirrored(f: Fit) -> Fit:
    """``f`` with its slow and fast excursions swapped: each ``slow_`` field and its ``fast_``."""
    sides = (("slow", "fast"), ("fast", "slow"))
    fields = ("rate", "size", "total", "excursions", "size0")
    return dataclasses.replace(
        f, **{f"{to}_{name}": getattr(f, f"{of}_{name}") for to, of in sides for name in fields}
    )


# The bisection of :func:`_bound`: its steps, and its interval (log scale).
BISECTION_STEPS = 48
BISECTION_HIGH = 5.0  # e^5: far beyond any time a timer reports for the same work


def _bound(f: Fit, n: np.ndarray, level: float, spread: np.ndarray) -> np.ndarray:
    """The lowest ``y`` whose ``n``-fold chance is under ``level``: where the significance
    bound of a look lies (bisection on the log scale, monotone)."""
    g = f.at(n)
    lo = np.zeros(f.m.shape)
    hi = np.full(f.m.shape, BISECTION_HIGH)
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        p = survival(g, mid[..., None], spread[..., :1])[..., 0] ** n
        inside = p < level
        hi = np.where(inside, mid, hi)
        lo = np.where(inside, lo, mid)
    return hi


@dataclass(frozen=True)
class Decision:
    """Arrays of one :func:`decide` call, one entry per row."""

    direction: np.ndarray  # +1 regressed, -1 improved, 0 neither
    more: np.ndarray  # bool: undecided and borderline: take more sessions
    gated: np.ndarray  # bool
    d: np.ndarray  # the change (log), current median vs history median
    se: np.ndarray
    p_up: np.ndarray
    p_down: np.ndarray
    bar: np.ndarray  # the log change that fails at this look
    gateable: np.ndarray  # fraction: smallest slowdown caught at the cap with the power
    fit: Fit


def decide(
    history: np.ndarray,
    current: np.ndarray,
    current_se: np.ndarray,
    prior: PriorArrays,
    *,
    threshold: float | np.ndarray,
    alpha1: float,
    design: Design,
    side: int = 0,
) -> Decision:
    """The rule on NaN-padded 2-D arrays of log-medians (rows: tests; columns: sessions;
    each row needs one history and one current session).

    ``threshold``: one for all rows, or each row's (a row moved by an offset's allowance is
    held to the threshold less it). ``alpha1``: each direction's one-sided level after the
    multiplicity correction, ``alpha1 / design.looks`` per look; the look is the number of
    current sessions, and one is screened (``more``) unless ``design.cap`` is 0. ``side``: 1
    slowdowns only, -1 speed-ups only (rows moved by an allowance, judged for the direction
    they were moved against), 0 both.
    """
    f = fit(history, prior)
    present = ~np.isnan(current)
    n = present.sum(axis=-1)
    y = current - f.m[..., None]
    spread = _spread(f, current_se)
    level = alpha1 / design.looks
    with np.errstate(invalid="ignore"):
        lowest = np.nanmin(np.where(present, y, np.inf), axis=-1)
        highest = np.nanmax(np.where(present, y, -np.inf), axis=-1)
        g = f.at(n)
        s_up = survival(g, np.broadcast_to(lowest[..., None], y.shape), spread)
        s_down = below(g, np.broadcast_to(highest[..., None], y.shape), spread)
        p_up = np.prod(np.where(present, s_up, 1.0), axis=-1)
        p_down = np.prod(np.where(present, s_down, 1.0), axis=-1)
        mean = np.nansum(np.where(present, y, 0.0), axis=-1) / n
        d = np.where(n >= 3, nanmedian(np.where(present, y, np.nan)), mean)
    se = _change_se(f, n)
    # A short history (under MIN_GATED_SESSIONS) promises only SHORT_GATE: its effect is that.
    short = (f.k >= 1) & (f.k < MIN_GATED_SESSIONS)
    effect = np.where(short, np.log1p(np.maximum(threshold, SHORT_GATE)), np.log1p(threshold))
    final = (design.cap == 0) | (n > 1)
    slower, faster = side >= 0, side <= 0
    up = slower & final & (p_up < level) & (d > effect - Z_POWER * se)
    down = faster & final & (p_down < level) & (-d > effect - Z_POWER * se)
    # Gateable: at the cap, every session slowed by g, the lowest of them still clearing the
    # significance bound with the target power, Phi(q)^n = power.
    n_cap = 1 + design.cap
    q = float(special.ndtri(special.ndtr(Z_POWER) ** (1 / n_cap)))
    sig_cap = _bound(f, np.full(f.m.shape, n_cap), level, spread)
    with np.errstate(over="ignore"):  # inf: not gated
        gateable = np.expm1(sig_cap + q * spread[..., 0])
    gated = (f.k >= MIN_GATED_SESSIONS) & (f.prior_share <= MAX_PRIOR_SHARE)
    gated &= gateable <= NOT_GATED_BEYOND
    gateable = np.where(short, np.maximum(gateable, SHORT_GATE), gateable)
    gated |= short & (gateable <= SHORT_GATE)
    # The bar shown is the change that fails at the look that decides: a first session that
    # will be confirmed is shown the bar of the first confirmed look (as many sessions, all
    # at that change).
    n_bar = np.where((n == 1) & (design.cap > 0), min(1 + design.batch, n_cap), n)
    bar = np.maximum(_bound(f, n_bar, level, spread), effect - Z_POWER * _change_se(f, n_bar))
    # The screen leaves room for a first session in an excursion, and confirms one reading the
    # threshold less its noise, or for a test gating only more, its gate (issue 45; not less the
    # noise, which would confirm far more unchanged sessions): docs/verdict.md, "The rule".
    reaches = gateable <= threshold
    with np.errstate(invalid="ignore"):
        beyond_gate = ~reaches & (d > np.log1p(gateable))
    near = effect - SCREEN_Z * se

    def screened(p: np.ndarray, change: np.ndarray, other_size: np.ndarray) -> np.ndarray:
        """One direction's screen, ``change`` its way, ``other_size`` the other's excursions."""
        return np.asarray(
            ((p < SCREEN_P) & (change > near - 3 * other_size)) | (reaches & (change > near))
        )

    screen = (
        (n == 1)
        & (design.cap > 0)
        & (
            (slower & (screened(p_up, d, f.fast_size) | beyond_gate))
            | (faster & screened(p_down, -d, f.slow_size))
        )
    )
    borderline = (
        (n > 1)
        & ~up
        & ~down
        & (
            (slower & (p_up < CONTINUE_FACTOR * level) & (d > near))
            | (faster & (p_down < CONTINUE_FACTOR * level) & (-d > near))
        )
    )
    more = gated & (screen | borderline) & (n < n_cap)
    direction = np.where(gated & up, 1, np.where(gated & down, -1, 0))
    return Decision(
        direction=direction,
        more=more,
        gated=gated,
        d=d,
        se=se,
        p_up=p_up,
        p_down=p_down,
        bar=bar,
        gateable=gateable,
        fit=f,
    )


# --- the rule on one test -------------------------------------------------------------------


class Timed(Protocol):
    """A session of a history as the rule reads it: its median (a SessionSummary, or a stored
    SessionRecord as it is)."""

    @property
    def median_ms(self) -> float: ...


def _log_medians(rows: Sequence[Sequence[Timed]]) -> np.ndarray:
    """The log-medians of rows of as many sessions each, as one 2-D array."""
    medians = list(map(operator.attrgetter("median_ms"), itertools.chain.from_iterable(rows)))
    # A time a timer may report (core.samples): their logs and ratios stay far from overflow.
    values = np.array(medians, dtype=float)
    times = (values >= MIN_SAMPLE_MS) & (values <= MAX_SAMPLE_MS)  # false for NaN too
    if not times.all():
        bad = medians[int(np.argmin(times))]
        raise ValueError(f"invalid session median {sample_problem(bad)}")
    # math.log, as the rule always took them (numpy's log may differ in the last bit).
    return np.array(list(map(math.log, medians)), dtype=float).reshape(len(rows), -1)


# Histories asked at once by sessions_to_gate_many: rows of (lengths x limit) floats each.
TO_GATE_CHUNK = 256


def sessions_to_gate_many(
    logs: np.ndarray,
    priors: PriorArrays,
    *,
    threshold: float,
    alpha1: float,
    design: Design,
    limit: int = 50,
) -> list[int | None]:
    """How many history sessions like each row of ``logs`` (log-medians of histories of one
    length), with its prior, would let the test gate ``threshold``: the history repeated in
    its own order (its floor and excursions kept), None beyond ``limit``; one :func:`decide`
    over every length of a chunk of rows."""
    count, k = logs.shape
    lengths = np.arange(max(MIN_GATED_SESSIONS, k), limit + 1)
    if not len(lengths) or not count:
        return [None] * count
    # Each history repeated in its own order to ``limit``, cut at each length.
    repeated = logs[:, np.arange(limit) % k]
    cut = np.arange(limit)[None, :] >= lengths[:, None]  # (lengths, limit)
    found: list[int | None] = []
    for start in range(0, count, TO_GATE_CHUNK):
        chunk = repeated[start : start + TO_GATE_CHUNK]
        rows = np.repeat(chunk, len(lengths), axis=0)
        rows[np.tile(cut, (len(chunk), 1))] = np.nan
        index = np.repeat(np.arange(start, start + len(chunk)), len(lengths))
        dec = decide(
            rows,
            rows[:, :1],
            np.zeros((len(rows), 1)),
            priors.take(index),
            threshold=threshold,
            alpha1=alpha1,
            design=design,
        )
        enough = (dec.gated & (dec.gateable <= threshold)).reshape(len(chunk), len(lengths))
        found += [int(lengths[np.argmax(e)]) if e.any() else None for e in enough]
    return found


@dataclass(frozen=True)
class Case:
    """One measurement for :func:`judge_many`: its history, its current sessions, and what
    picks its prior."""

    history: Sequence[Timed]
    current: Sequence[SessionSummary]
    timer: str
    launches: int = 1
    versus: Versus | None = None


def judge(
    history: Sequence[Timed],
    current: Sequence[SessionSummary],
    *,
    threshold: float,
    alpha: float,
    family: int,
    timer: str,
    launches: int = 1,
    fail_on_improvement: bool = False,
    design: Design = Design(),
    versus: Versus | None = None,
    side: int = 0,
) -> Judgement:
    """Judge the current sessions of one measurement against its history.

    ``history``: the rolling history (at most ``core.baseline.HISTORY_SESSIONS``);
    ``current``: this run's first session, then its confirmations. ``family``: the number of
    measurements judged in the run. ``timer`` and ``launches`` (per call) pick the prior; of a
    ratio to a reference, ``versus``; ``side``, as :func:`decide`'s.
    ``needs_confirmation`` asks the gate for ``design.next_batch`` more sessions.
    """
    [judgement] = judge_many(
        [Case(history, current, timer, launches, versus)],
        threshold=threshold,
        alpha=alpha,
        family=family,
        fail_on_improvement=fail_on_improvement,
        design=design,
        side=side,
    )
    return judgement


def judge_many(
    cases: Sequence[Case],
    *,
    threshold: float,
    alpha: float,
    family: int,
    fail_on_improvement: bool = False,
    design: Design = Design(),
    ask_to_gate: bool = True,
    side: int = 0,
) -> list[Judgement]:
    """:func:`judge` of each case, in order, with one :func:`decide` per shape (sessions of
    history, current sessions) instead of one per case: the rule's arrays are row-wise, so a
    row's verdict is the same either way, and ``gpubench show`` of 10^5 tests makes a few
    passes, not 10^5. ``ask_to_gate=False``: a test not gated does not say how many
    sessions would gate it (``gpubench show`` prints none of it)."""
    check_levels(threshold, alpha)
    if family < 1:
        raise ValueError(f"invalid family {family!r}: expected the number of measurements >= 1")
    if any(not case.current for case in cases):
        raise ValueError("judge needs at least one current session")
    alpha1 = corrected_alpha(alpha, family, fail_on_improvement)
    z = normal_quantile(alpha1 / design.looks)
    judgements: list[Judgement | None] = [None] * len(cases)
    shapes: dict[tuple[int, int], list[int]] = {}
    for i, case in enumerate(cases):
        if not case.history:
            judgements[i] = Judgement(
                Status.NEW, current_sessions=len(case.current), reason="no baseline"
            )
        else:
            shapes.setdefault((len(case.history), len(case.current)), []).append(i)
    for indices in shapes.values():
        h = _log_medians([cases[i].history for i in indices])
        c = _log_medians([cases[i].current for i in indices])
        c_se = np.array([s.se_log for i in indices for s in cases[i].current], dtype=float).reshape(
            c.shape
        )
        medians = [math.exp(m) for m in np.median(h, axis=-1).tolist()]  # each row's own
        prior = PriorArrays.of(
            [
                prior_for(median, cases[i].timer, cases[i].launches, cases[i].versus)
                for i, median in zip(indices, medians, strict=True)
            ]
        )
        dec = decide(
            h, c, c_se, prior, threshold=threshold, alpha1=alpha1, design=design, side=side
        )
        k, n_c = len(cases[indices[0]].history), len(cases[indices[0]].current)
        # Rows not gated, and a short history's (gated on the prior only), say how many
        # sessions would gate the threshold: asked all at once.
        told = [row for row in range(len(indices)) if not dec.gated[row] or k < MIN_GATED_SESSIONS]
        to_gate: dict[int, int | None] = {}
        if ask_to_gate and told:
            found = sessions_to_gate_many(
                h[told],
                prior.take(np.array(told, dtype=int)),
                threshold=threshold,
                alpha1=alpha1,
                design=design,
            )
            to_gate = dict(zip(told, found, strict=True))
        for row, i in enumerate(indices):
            judgements[i] = _verdict(
                k, n_c, dec, row, to_gate.get(row), threshold=threshold, z=z, asked=ask_to_gate
            )
    return [j for j in judgements if j is not None]


# A decision's direction as a status.
DIRECTIONS = {1: Status.REGRESSED, -1: Status.IMPROVED, 0: Status.OK}


def _more(to_gate: int | None, asked: bool, threshold: float) -> str:
    """The reason's words on the sessions that would gate ``threshold`` ('' if not asked)."""
    if not asked:
        return ""
    if to_gate is None:
        return f"; no history of up to 50 sessions like these would gate {threshold:.0%}"
    return f"; {to_gate} sessions like these would gate {threshold:.0%}"


def _verdict(
    k: int,
    n_c: int,
    dec: Decision,
    row: int,
    to_gate: int | None,
    *,
    threshold: float,
    z: float,
    asked: bool,
) -> Judgement:
    """The verdict of ``row`` of ``dec``, of ``k`` history and ``n_c`` current sessions
    (``to_gate``: the sessions like its history's that would gate the threshold, where
    ``asked``; ``z``: the quantile of its interval)."""
    d, se, gateable = float(dec.d[row]), float(dec.se[row]), float(dec.gateable[row])
    gated = bool(dec.gated[row])
    status = DIRECTIONS[int(dec.direction[row])]
    bar = math.expm1(float(dec.bar[row]))
    verb = "slower" if d >= 0 else "faster"
    share = float(dec.fit.prior_share[row])
    reason = f"{verb} by {abs(math.expm1(d)):.1%} vs history of {plural(k, 'session')}"
    low, high = ratio_interval(d, z * se)
    told = f"{k} session{' tells' if k == 1 else 's tell'} no spread between sessions"
    if not gated:
        status = Status.NOT_GATED
        why = []
        if k < MIN_GATED_SESSIONS:
            why.append(told)
        elif share > MAX_PRIOR_SHARE:
            why.append(f"its spread is {share:.0%} the prior's")
        if gateable > NOT_GATED_BEYOND:
            why.append(f"it could not catch a slowdown under {NOT_GATED_BEYOND:.0%}")
        reason += f"; {', '.join(why)}" + _more(to_gate, asked, threshold)
    else:
        reason += f"; {gate_text(gateable, threshold)}"
        if k < MIN_GATED_SESSIONS:  # gated on the prior, only SHORT_GATE
            reason += f": {told}" + _more(to_gate, asked, threshold)
    return Judgement(
        status=status,
        ratio=math.exp(d),
        ratio_low=low,
        ratio_high=high,
        bar=bar if gated else None,
        gateable=gateable if gated else None,
        noisy=gated and gateable > threshold,
        tau=float(dec.fit.sigma[row]),
        prior_share=share,
        needs_confirmation=bool(dec.more[row]),
        against="history",
        history_sessions=k,
        current_sessions=n_c,
        reason=reason,
        gated=gated,
        p_value=float(dec.p_up[row] if d >= 0 else dec.p_down[row]),
        excursions=float(dec.fit.slow_rate[row]),
        sessions_to_gate=to_gate,
    )
