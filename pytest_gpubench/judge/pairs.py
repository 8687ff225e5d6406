"""The paired verdict: the head's sessions against a revision's, measured in the same job.

A paired t-test on the differences of log-medians of alternating pairs, its spread shrunk
toward a prior of a pair's spread: a process in a slow excursion moves one pair, widening the
spread more than the mean, so it makes a test unsure, never regressed. The rule and its
constants (fitted and checked by bench/pair_resample.py; tests/judge/test_pair_resample.py):
docs/verdict.md, "The verdict against a revision". Pure: arrays in, arrays out;
:func:`judge_pairs` on one test.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special  # not scipy.stats: rule.py says why

from ..core.records import (
    RATIO_SUFFIX,
    Judgement,
    SessionSummary,
    Status,
    Versus,
    gate_text,
)
from ..core.samples import MAX_SAMPLE_MS, MIN_SAMPLE_MS, plural, sample_problem
from .rule import (
    DIRECTIONS,
    NOT_GATED_BEYOND,
    Z_POWER,
    Prior,
    check_levels,
    corrected_alpha,
    known_versus,
    prior_for,
    ratio_interval,
)

# A pair's spread before its own pairs say: the history prior's spread of a difference of two
# sessions (:func:`prior_pair_spread`) times the timer's scale (1 for a timer not recorded in
# pairs), worth PAIR_PRIOR_WEIGHT pairs: bench/pair_resample.py (docs/verdict.md).
PAIR_PRIOR_SCALE: dict[str, float] = {"cuda-graph": 0.93, "cupti": 0.88, "cupti-graph": 0.095}
PAIR_PRIOR_WEIGHT = 0.5
# The history prior the scales were fitted against (release 0.3's, four H200s): only its shape
# over durations counts, a pair's spread is its own data's.
PAIR_BASIS: tuple[Prior, ...] = (
    Prior(0.00121, sigma=0.015, nu0=0.4, slow=(0.19, 50, 0.13), fast=(0.0071, 23, 0.17)),
    Prior(0.00235, sigma=0.0056, nu0=0.24, slow=(0.23, 31, 0.071), fast=(0.031, 17, 0.012)),
    Prior(0.004, sigma=0.002, nu0=0.42, slow=(0.2, 26, 0.056), fast=(0.006, 50, 0.014)),
    Prior(0.00992, sigma=0.0016, nu0=0.8, slow=(0.05, 8.3, 0.0093), fast=(0.013, 50, 0.0054)),
    Prior(0.0339, sigma=0.00076, nu0=0.64, slow=(0.077, 10, 0.013), fast=(0.027, 28, 0.0049)),
    Prior(0.0531, sigma=0.00068, nu0=2.6, slow=(0.13, 15, 0.011), fast=(0.0054, 29, 0.0014)),
    Prior(0.221, sigma=0.00072, nu0=0.43, slow=(0.075, 4.2, 0.0035), fast=(0.062, 14, 0.0046)),
)
# "same": a change of the threshold is ruled out at this one-sided level each way.
SAME_LEVEL = 0.05
# The smallest pair spread believed (log scale): below it, pairs that agree to the last digit
# would make any difference significant.
MIN_PAIR_SIGMA = 2e-4
# A lockstep pair's sd per timer and bin of LOCKSTEP_BINS_MS (a bin without data takes its
# neighbour's): bench/lockstep_prior.py and bench/lockstep_runs.py (docs/verdict.md, "Lockstep
# pairs"). A timer without lockstep data takes half the pair prior's variance.
LOCKSTEP_SIGMA: dict[str, tuple[float, float, float]] = {
    "cuda-graph": (0.00362, 0.00362, 0.00486),
    "cupti-graph": (0.00912, 0.00431, 0.00431),
}
LOCKSTEP_BINS_MS = (0.005, 0.1)
# What one process adds to the mean of the lockstep pairs it sets up again (sd, log scale, per
# timer and bin): bench/lockstep_runs.py, "what a process adds" (H200s, 2026-11-29 to 12-02).
LOCKSTEP_PROCESS_SIGMA: dict[str, tuple[float, float, float]] = {
    "cuda-graph": (0.0027, 0.0027, 0.0015),
    "cupti-graph": (0.0, 0.0037, 0.0037),
}
LOCKSTEP_PRIOR_WEIGHT = 1.6
# The widest log-ratio two medians a timer reports can have: an interval beyond it is none.
RATIO_LOG_MAX = math.log(MAX_SAMPLE_MS / MIN_SAMPLE_MS)
# The most pairs :func:`pairs_to_gate` looks through.
PAIRS_TO_GATE_LIMIT = 10_000


@dataclass(frozen=True)
class PairDesign:
    """How many pairs a test takes: ``first`` before the first look, then batches of
    ``batch`` while it is unsure, up to ``cap``; each look at an equal share of the level.
    The default: bench/pair_resample.py (docs/verdict.md, "The verdict against a revision");
    10 pairs are 20 sessions, the longest recorded histories: a larger cap could not be
    checked."""

    first: int = 3
    batch: int = 7
    cap: int = 10

    def __post_init__(self) -> None:
        if not 1 <= self.first <= self.cap or self.batch < 1:
            raise ValueError(f"invalid pair design {self}: expected 1 <= first <= cap, batch >= 1")

    @property
    def looks(self) -> int:
        return 1 + math.ceil((self.cap - self.first) / self.batch)

    def next_batch(self, pairs: int) -> int:
        """Pairs to add to a test judged on ``pairs`` so far (0: no more)."""
        if pairs < self.first:
            return self.first - pairs
        return max(0, min(self.batch, self.cap - pairs))


# Lockstep pairs: the test's own process's pair, then batches of 4 set up again there for the
# unsure, up to 10: replayed on 475 recorded processes of 10 pairs, as many caught as 9 more
# at once (+2% at 2%: 163 of 185 at 20-100 µs against 162), no unchanged one failing, and an
# unchanged test takes 3.0 pairs at 2% on average where 9 more at once took 5.1 (5.8 against
# 10 at 1%; bench/lockstep_resample.py --min-pairs 10 --design; docs/verdict.md, "Lockstep
# pairs"; a cap of 5 left +1% unsure from 100 µs at 1%).
LOCKSTEP_DESIGN = PairDesign(first=1, batch=4, cap=10)
# Where the more pairs come from fresh processes (a call's inputs held in place), a process
# each: 4 more, the cap the lockstep prior was fitted at (bench/lockstep_prior.py).
LOCKSTEP_FRESH_DESIGN = PairDesign(first=1, batch=4, cap=5)
# Duos count as pairs of fresh processes, since what differs between a duo's two processes
# stays in all its pairs: bench/pair_resample.py --design 2 6 8 (docs/verdict.md, "Duos").
DUO_DESIGN = PairDesign(first=2, batch=6, cap=8)
DUO_PAIRS = 3


@dataclass(frozen=True)
class PairDecision:
    """Per row: the direction (1 regressed, -1 improved, 0 neither), ``same``, ``more``
    (unsure, and the cap allows more pairs), the location ``d`` and its ``se``, the spread
    ``s`` of one pair, the prior's share of it, the one-sided chances, the bar (log scale),
    the gateable slowdown at the cap (a fraction) and ``same_margin``: the half-width (log
    scale) of the interval ``same`` is read on, ``d`` plus or minus it within the threshold
    both ways."""

    direction: np.ndarray
    same: np.ndarray
    more: np.ndarray
    d: np.ndarray
    se: np.ndarray
    s: np.ndarray
    df: np.ndarray
    prior_share: np.ndarray
    p_up: np.ndarray
    p_down: np.ndarray
    bar: np.ndarray
    gateable: np.ndarray
    same_margin: np.ndarray


def decide_pairs(
    diffs: np.ndarray,
    sigma0: np.ndarray,
    *,
    threshold: float,
    alpha1: float,
    design: PairDesign,
    weight: float | None = None,
) -> PairDecision:
    """The rule on NaN-padded rows of pair differences (log scale), each row with the prior
    spread ``sigma0`` of one pair, worth ``weight`` pairs (PAIR_PRIOR_WEIGHT by default).
    ``alpha1``: the one-sided level of each direction after the multiplicity correction,
    spent over ``design.looks``."""
    weight = PAIR_PRIOR_WEIGHT if weight is None else weight
    present = ~np.isnan(diffs)
    n = present.sum(axis=-1)
    if (n < 1).any():
        raise ValueError("every row needs at least one pair")
    with np.errstate(invalid="ignore"):
        d = np.nansum(np.where(present, diffs, 0.0), axis=-1) / n
        ss = np.nansum(np.where(present, (diffs - d[..., None]) ** 2, 0.0), axis=-1)
    df = weight + (n - 1)  # n >= 1 (above)
    s = np.maximum(np.sqrt((weight * sigma0**2 + ss) / df), MIN_PAIR_SIGMA)
    se = s / np.sqrt(n)
    level = alpha1 / design.looks
    t = d / se
    p_up = special.stdtr(df, -t)
    p_down = special.stdtr(df, t)
    effect = math.log1p(threshold)
    up = (p_up < level) & (d > effect - Z_POWER * se)
    down = (p_down < level) & (-d > effect - Z_POWER * se)
    same_margin = special.stdtrit(df, 1 - SAME_LEVEL) * se
    same = ~up & ~down & (d + same_margin < effect) & (d - same_margin > -effect)
    # Fewer pairs than the first look's (a process that failed): more before any verdict.
    more = (~up & ~down & ~same & (n < design.cap)) | (n < design.first)
    q = t_quantile(df, level)
    # Few pairs at a small level make these overflow to inf: judge_pairs reads that as no bound.
    with np.errstate(over="ignore"):
        bar = np.maximum(q * se, effect - Z_POWER * se)
        # At the cap: its pairs' error and degrees of freedom, this spread.
        se_cap = s / math.sqrt(design.cap)
        df_cap = weight + design.cap - 1
        gateable = np.expm1(np.maximum(effect, (t_quantile(df_cap, level) + Z_POWER) * se_cap))
    return PairDecision(
        direction=np.where(up, 1, np.where(down, -1, 0)),
        same=same,
        more=more,
        d=d,
        se=se,
        s=s,
        df=df,
        prior_share=weight / df,
        p_up=p_up,
        p_down=p_down,
        bar=bar,
        gateable=gateable,
        same_margin=same_margin,
    )


def second_process_agrees(
    first: Judgement,
    second: Judgement,
    *,
    threshold: float,
    alpha: float,
    process_sigma: float = 0.0,
) -> bool:
    """Whether a second process's pairs (judged on their own: ``second``) bear out a
    failure judged on pairs from one process (``first``): their change goes the same way,
    significant at the one-sided ``alpha`` (the failure already spent the family's level),
    and a change of the threshold is not ruled out (their mean within Z_POWER errors of it,
    as a failure's own test asks, its error counting what a process adds to its pairs'
    mean, ``process_sigma``: :func:`lockstep_process_sigma`). One process's two sides can
    differ by more than the pairs it sets up again show; a second process's is its own."""
    if first.ratio is None or second.ratio is None or second.tau is None:
        return False
    if second.p_value is None or not second.current_sessions:
        return False
    way = 1.0 if first.ratio >= 1 else -1.0
    d = way * math.log(second.ratio)
    se = math.hypot(second.tau / math.sqrt(second.current_sessions), process_sigma)
    return d > 0 and second.p_value < alpha and d > math.log1p(threshold) - Z_POWER * se


def lockstep_process_sigma(duration_ms: float, timer: str) -> float:
    """What a process adds to the mean of its lockstep pairs (LOCKSTEP_PROCESS_SIGMA); 0
    for a timer without data."""
    table = LOCKSTEP_PROCESS_SIGMA.get(timer)
    return table[sum(duration_ms >= edge for edge in LOCKSTEP_BINS_MS)] if table else 0.0


def t_quantile(df: np.ndarray | float, level: float) -> np.ndarray:
    """The t quantile that a one-sided ``level`` leaves above it: ``stdtrit(df, 1 - level)``,
    or from the lower tail where ``1 - level`` rounds to 1 (alpha 1e-20); inf where neither
    holds it (a level of 0)."""
    q = special.stdtrit(df, 1 - level)
    # abs: stdtrit answers +inf, not -inf, where the lower tail overflows too.
    return np.asarray(np.where(np.isfinite(q), q, np.abs(special.stdtrit(df, level))))


def pairs_to_gate(
    s: float, level: float, threshold: float, weight: float = PAIR_PRIOR_WEIGHT
) -> int | None:
    """The fewest pairs of spread ``s`` (log scale) that would catch a slowdown of
    ``threshold`` at ``level`` with the target power (:func:`decide_pairs`' gateable at their
    count) and a degree of freedom (:func:`judge_pairs`); None beyond PAIRS_TO_GATE_LIMIT."""
    counts = np.arange(max(1, math.ceil(2 - weight)), PAIRS_TO_GATE_LIMIT + 1)
    with np.errstate(over="ignore"):
        q = t_quantile(weight + counts - 1, level)
        gates = (q + Z_POWER) * s / np.sqrt(counts) <= math.log1p(threshold)
    return int(counts[np.argmax(gates)]) if gates.any() else None


def prior_pair_spread(prior: Prior) -> float:
    """sd (log scale) of the difference of two independent sessions under ``prior``: its
    floor and both sides' excursions (exponential sizes: mean ``size``, mean square
    ``2 size^2``)."""
    slow_rate, _, slow_size = prior.slow
    fast_rate, _, fast_size = prior.fast
    mean = slow_rate * slow_size - fast_rate * fast_size
    square = 2 * (slow_rate * slow_size**2 + fast_rate * fast_size**2)
    return math.sqrt(2 * (prior.sigma**2 + square - mean**2))


def pair_sigma0(
    duration_ms: float, timer: str, launches: int = 1, versus: Versus | None = None
) -> float:
    """The prior spread of one pair of a test of ``duration_ms`` timed by ``timer`` (of a
    ratio to a reference, comparing ``versus``)."""
    versus = known_versus(versus)
    prior = prior_for(duration_ms, timer, launches, versus, graph=PAIR_BASIS)
    # A ratio whose two times are unknown keeps its noisiest prior whole.
    scaled = timer.removesuffix(RATIO_SUFFIX) if versus is not None else timer
    return PAIR_PRIOR_SCALE.get(scaled, 1.0) * prior_pair_spread(prior)


def lockstep_sigma0(duration_ms: float, timer: str, launches: int = 1) -> float:
    """The prior spread of one lockstep pair (LOCKSTEP_SIGMA) of a call of ``duration_ms``."""
    table = LOCKSTEP_SIGMA.get(timer)
    if table is None:
        return pair_sigma0(duration_ms, timer, launches) / math.sqrt(2)
    return table[sum(duration_ms >= edge for edge in LOCKSTEP_BINS_MS)]


def judge_pairs(
    base: Sequence[SessionSummary],
    head: Sequence[SessionSummary],
    *,
    threshold: float,
    alpha: float,
    family: int,
    timer: str,
    launches: int = 1,
    fail_on_improvement: bool = False,
    design: PairDesign = PairDesign(),
    against: str = "the revision",
    versus: Versus | None = None,
    lockstep: bool = False,
    duos: Sequence[int] = (),
) -> Judgement:
    """Judge one test's head sessions against its base sessions, paired by index (the
    first ``min(len)`` of each). ``needs_confirmation`` asks for ``design.next_batch`` more
    pairs. ``against`` names the base side in the reason; ``versus``, what a ratio to a
    reference compares (its prior: rule.prior_for); ``lockstep``: each pair's sides shared
    one process (the lockstep prior, :func:`lockstep_sigma0`); ``duos``: per pair, the duo
    that timed it (DUO_DESIGN): each duo's mean difference is one unit, judged by the pair
    prior, and ``design`` counts duos.

    Every set of sessions gets a verdict (no pair, a median no timer reports or a bound beyond
    a float is ``unsure``, saying what would judge it); only a threshold or alpha out of range
    raises ValueError."""
    check_levels(threshold, alpha)
    n = min(len(base), len(head))
    pairs = plural(n, "pair")
    unit = "pair"  # what the design counts

    def unsure(
        reason: str,
        more: bool,
        ratio: float | None = None,
        tau: float | None = None,
        share: float | None = None,
        p_value: float | None = None,
    ) -> Judgement:
        return Judgement(
            Status.UNSURE,
            ratio=ratio,
            tau=tau,
            prior_share=share,
            p_value=p_value,
            needs_confirmation=more,
            against="revision",
            history_sessions=n,
            current_sessions=n,
            reason=reason,
        )

    if n < 1:
        more = plural(design.next_batch(0), "more pair")
        return unsure(f"unsure: no pair measured both sides; {more}", True)
    for side, sessions in ((against, base), ("the working tree", head)):
        for i, s in enumerate(sessions[:n]):
            # Outside a timer's range (core.samples); more pairs would not drop it.
            if sample_problem(s.median_ms):
                return unsure(
                    f"unsure: pair {i + 1}'s session of {side} has a median no timer reports: "
                    "needs its pairs timed again",
                    False,
                )
    b = np.log([s.median_ms for s in base[:n]])
    h = np.log([s.median_ms for s in head[:n]])
    base_ms = math.exp(float(np.median(b)))
    diffs = h - b
    if duos:
        if len(duos) < n:
            raise ValueError(f"{len(duos)} duos named for {n} pairs")
        groups = list(dict.fromkeys(duos[:n]))
        diffs = np.array([diffs[np.asarray(duos[:n]) == g].mean() for g in groups])
        pairs += f" in {plural(len(groups), 'duo')}"
        unit = "duo"
    if lockstep and not duos:
        sigma0, weight = lockstep_sigma0(base_ms, timer, launches), LOCKSTEP_PRIOR_WEIGHT
    else:
        sigma0, weight = pair_sigma0(base_ms, timer, launches, versus), PAIR_PRIOR_WEIGHT
    units = len(diffs)
    alpha1 = corrected_alpha(alpha, family, fail_on_improvement)
    dec = decide_pairs(
        diffs[None, :],
        np.array([sigma0]),
        threshold=threshold,
        alpha1=alpha1,
        design=design,
        weight=weight,
    )
    d, se, tau, share = (float(x[0]) for x in (dec.d, dec.se, dec.s, dec.prior_share))
    p_value = float(dec.p_up[0] if d >= 0 else dec.p_down[0])
    status = DIRECTIONS[int(dec.direction[0])]
    if status is Status.OK:
        status = Status.SAME if dec.same[0] else Status.UNSURE
    level = alpha1 / design.looks
    ratio = math.exp(d)
    verb = "slower" if d >= 0 else "faster"
    where = " in lockstep" if lockstep and not duos else ""
    reason = f"{verb} by {abs(math.expm1(d)):.1%} than {against} over {pairs}{where}"
    cap = plural(design.cap, unit)
    bar_log = float(dec.bar[0])
    if float(dec.df[0]) < 1 or not bar_log <= RATIO_LOG_MAX:
        # Too few pairs for the level: under one degree of freedom (one pair of processes has
        # half of one) a t quantile is the level's, not the pairs' (at alpha 0.01 over 2 tests
        # 1.6e4, an interval of [-100.0%, +1.8e7%]; over 8, e^1000); and no two times a timer
        # reports are further apart than RATIO_LOG_MAX. What would judge it: the pairs that
        # would gate the threshold.
        needed = pairs_to_gate(tau, level, threshold, weight)
        tests = plural(max(1, family), "test")
        why = f"{pairs} cannot bound the change at alpha {alpha:g} over {tests}"
        if needed is None:
            reason += (
                f"; unsure: {why}, nor could {PAIRS_TO_GATE_LIMIT} pairs: needs a larger alpha"
            )
        else:
            to_gate = f"needs {plural(needed, unit)} like these to gate {threshold * 100:g}%"
            if units < design.cap:
                more = plural(design.next_batch(units), f"more {unit}")
                reason += f"; unsure: {why}: {to_gate}; {more}"
            else:
                reason += f"; unsure at the cap of {cap}: {why}: {to_gate} (--gpubench-pairs)"
        return unsure(reason, needed is not None and units < design.cap, ratio, tau, share, p_value)
    bar = math.expm1(bar_log)
    gateable = float(dec.gateable[0])
    z = float(t_quantile(float(dec.df[0]), level))
    gates = gateable <= NOT_GATED_BEYOND  # a gate of hundreds of percent is no gate
    if status is Status.UNSURE and units < design.cap:
        reason += f"; unsure: {plural(design.next_batch(units), 'more ' + unit)}"
    elif gates:
        at_cap = f"unsure at the cap of {cap}: " if status is Status.UNSURE else ""
        reason += f"; {at_cap}{gate_text(gateable, threshold)}"
    elif status is Status.UNSURE:
        reason += (
            f"; unsure at the cap of {cap}: it could not catch a slowdown under "
            f"{NOT_GATED_BEYOND:.0%}: run more pairs (--gpubench-pairs) to gate it"
        )
    else:  # a gate of hundreds of percent says nothing: what would judge it does
        reason += f"; it could not catch a slowdown under {NOT_GATED_BEYOND:.0%} from {pairs}"
    # A same is read on its own interval, narrower than the corrected one (which bisect reads).
    same = status is Status.SAME
    margin = float(dec.same_margin[0])
    low, high = ratio_interval(d, z * se)
    return Judgement(
        status=status,
        ratio=ratio,
        ratio_low=low,
        ratio_high=high,
        same_low=math.exp(d - margin) if same else None,
        same_high=math.exp(d + margin) if same else None,
        bar=bar if gates else None,
        gateable=gateable if gates else None,
        noisy=gates and gateable > threshold,
        tau=tau,
        prior_share=share,
        needs_confirmation=bool(dec.more[0]),
        against="revision",
        history_sessions=n,
        current_sessions=n,
        reason=reason,
        p_value=p_value,
    )
