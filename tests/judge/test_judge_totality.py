"""A judge that cannot crash (issue 44): judge/pairs.py and judge/rule.py give every input
within their settings' ranges a verdict whose numbers are finite or None, and an unsure one
says why. Property-based (hypothesis), seeded: CI runs with warnings as errors."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_gpubench.core.records import Judgement, SessionSummary, Status, Versus
from pytest_gpubench.judge.pairs import PairDesign, judge_pairs
from pytest_gpubench.judge.rule import Design, judge

# Deterministic and quick: the same examples in every run, none stored between runs.
TOTAL = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

DESIGN = PairDesign()
TIMERS = ["cuda-graph", "cupti", "cupti-graph", "cuda-event", "cuda-event-cold", "wall"]
timers = st.one_of(
    st.sampled_from([*TIMERS, "synchronizing", "cuda-graph:ratio", "cupti-graph:ratio"]),
    st.text(max_size=12),  # a timer of a plugin, or of a newer version
)
# Alpha from the smallest float up: alpha over a large family rounds to 0, or 1 - it to 1.
alphas = st.one_of(
    st.floats(0, 1, exclude_min=True, exclude_max=True, allow_subnormal=True),
    st.sampled_from([5e-324, 1e-300, 1e-20, 0.5, 0.999999]),
)
thresholds = st.floats(0.001, 1.0)
families = st.integers(1, 10**5)
launches = st.integers(0, 10**6)
# A timer's times (core.samples: 1e-9 to 1e6 ms), their ends, and what no timer reports.
times = st.one_of(st.floats(1e-9, 1e6), st.sampled_from([1e-9, 1e-6, 1.0, 1e6]))
anything = st.one_of(times, st.floats(), st.sampled_from([0.0, -1.0, 5e-324, 1e300]))
versuses = st.none() | st.builds(
    Versus, st.floats(), st.floats(), st.integers(0, 100), st.integers(0, 100)
)


@st.composite
def pair_designs(draw: st.DrawFn) -> PairDesign:
    cap = draw(st.integers(1, 30))
    return PairDesign(draw(st.integers(1, cap)), draw(st.integers(1, 10)), cap)


def summary(median_ms: float) -> SessionSummary:
    return SessionSummary(median_ms, 50, 0.0005)


@st.composite
def sides(draw: st.DrawFn) -> tuple[list[SessionSummary], list[SessionSummary]]:
    """Tight pairs (the same or one change in every pair, within a side equal or spread),
    or any medians at all, of as many or fewer pairs as sessions."""
    if draw(st.integers(0, 3)) == 0:
        base = [draw(anything) for _ in range(draw(st.integers(0, 12)))]
        head = [draw(anything) for _ in range(draw(st.integers(0, 12)))]
    else:
        n = draw(st.integers(1, 12))
        level = draw(times)
        change = draw(st.sampled_from([1.0, 1.0, 1.01, 1.05, 1.5, 1 / 1.5, 1e3]))
        noise = draw(st.sampled_from([0.0, 1e-4, 0.01, 0.2]))
        jitter = st.floats(-noise, noise) if noise else st.just(0.0)
        base = [level * math.exp(draw(jitter)) for _ in range(n)]
        head = [b * change * math.exp(draw(jitter)) for b in base]
    return [summary(m) for m in base], [summary(m) for m in head]


def assert_total(j: Judgement) -> None:
    """A Status, every number finite or None (none printed inf or nan), a reason."""
    assert isinstance(j.status, Status)
    for field in dataclasses.fields(j):
        value = getattr(j, field.name)
        if isinstance(value, float):
            assert math.isfinite(value), (field.name, value)
    json.dumps(j.to_json(), allow_nan=False)
    assert j.reason and not re.search(r"\b(inf|nan)\b", j.reason, re.IGNORECASE), j.reason
    if j.ratio is not None:
        assert (j.ratio_low or 0) <= j.ratio <= (j.ratio_high or math.inf)


@TOTAL
@given(
    sides(),
    thresholds,
    alphas,
    families,
    timers,
    launches,
    st.booleans(),
    pair_designs(),
    versuses,
    st.booleans(),
    st.integers(0, 4),
)
@pytest.mark.slow
def test_the_pair_judge_judges_every_input(
    pairs: tuple[list[SessionSummary], list[SessionSummary]],
    threshold: float,
    alpha: float,
    family: int,
    timer: str,
    launches: int,
    fail_on_improvement: bool,
    design: PairDesign,
    versus: Versus | None,
    lockstep: bool,
    per_duo: int,
) -> None:
    """``per_duo``: pairs per duo (0: not in duos)."""
    base, head = pairs
    count = max(len(base), len(head))
    duos = [1 + i // per_duo for i in range(count)] if per_duo else []
    j = judge_pairs(
        base,
        head,
        threshold=threshold,
        alpha=alpha,
        family=family,
        timer=timer,
        launches=launches,
        fail_on_improvement=fail_on_improvement,
        design=design,
        versus=versus,
        lockstep=lockstep,
        duos=duos,
    )
    assert_total(j)
    assert j.status in (Status.REGRESSED, Status.IMPROVED, Status.SAME, Status.UNSURE)
    if j.status is Status.UNSURE:
        assert "unsure" in j.reason


@TOTAL
@given(
    st.lists(st.builds(summary, times), max_size=25),
    st.lists(
        st.builds(
            SessionSummary,
            times,
            st.integers(1, 100),
            # Untold (one sample), none, and what no session's samples give.
            st.one_of(st.floats(0, 0.1), st.sampled_from([math.nan, math.inf, 1e200, -1.0])),
        ),
        min_size=1,
        max_size=7,
    ),
    thresholds,
    alphas,
    families,
    timers,
    launches,
    st.booleans(),
    st.builds(Design, st.integers(0, 12), st.integers(1, 5)),
    versuses,
)
def test_the_history_judge_judges_every_time(
    history: list[SessionSummary],
    current: list[SessionSummary],
    threshold: float,
    alpha: float,
    family: int,
    timer: str,
    launches: int,
    fail_on_improvement: bool,
    design: Design,
    versus: Versus | None,
) -> None:
    j = judge(
        history,
        current,
        threshold=threshold,
        alpha=alpha,
        family=family,
        timer=timer,
        launches=launches,
        fail_on_improvement=fail_on_improvement,
        design=design,
        versus=versus,
    )
    assert_total(j)


# --- the crash of issue 44 and its neighbours -----------------------------------------------


def pair_verdict(
    base: list[float],
    head: list[float],
    family: int,
    *,
    threshold: float = 0.05,
    alpha: float = 0.01,
    design: PairDesign = DESIGN,
) -> Judgement:
    return judge_pairs(
        [summary(m) for m in base],
        [summary(m) for m in head],
        threshold=threshold,
        alpha=alpha,
        family=family,
        timer="cuda-graph",
        design=design,
    )


def test_one_pair_in_a_family_of_eight_is_unsure_and_asks_for_pairs() -> None:
    """The GPU run's OverflowError: one pair has half a degree of freedom, whose t quantile at
    alpha 0.01 over 8 tests bounds the change at e^1000."""
    j = pair_verdict([0.1], [0.101], family=8)
    assert_total(j)
    assert j.status is Status.UNSURE and j.needs_confirmation
    assert j.reason == (
        "slower by 1.0% than the revision over 1 pair; unsure: 1 pair cannot bound the change "
        "at alpha 0.01 over 8 tests: needs 3 pairs like these to gate 5%; 2 more pairs"
    )
    assert (j.bar, j.ratio_low, j.ratio_high, j.gateable) == (None, None, None, None)
    assert j.ratio == pytest.approx(1.01)


def test_one_pair_at_its_cap_says_how_many_pairs_would_judge_it() -> None:
    j = pair_verdict([0.1], [0.101], family=50, design=PairDesign(first=1, cap=1))
    assert_total(j)
    assert j.status is Status.UNSURE and not j.needs_confirmation
    assert j.reason.endswith(
        "unsure at the cap of 1 pair: 1 pair cannot bound the change at alpha 0.01 over 50 "
        "tests: needs 4 pairs like these to gate 5% (--gpubench-pairs)"
    )


def test_a_level_no_pairs_can_bound_asks_for_a_larger_alpha() -> None:
    j = pair_verdict([0.1] * 3, [0.15] * 3, family=8, alpha=5e-324)  # the level rounds to 0
    assert_total(j)
    assert j.status is Status.UNSURE and not j.needs_confirmation
    assert "needs a larger alpha" in j.reason


def test_fifty_percent_over_three_tight_pairs_is_regressed() -> None:
    base = [0.100, 0.1002, 0.0999]
    j = pair_verdict(base, [b * 1.5 for b in base], family=8)
    assert_total(j)
    assert j.status is Status.REGRESSED and "slower by 50.0%" in j.reason
    assert j.bar is not None and j.ratio_high is not None


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, 1e300])
def test_a_median_no_timer_reports_is_unsure_without_more_pairs(bad: float) -> None:
    j = pair_verdict([0.1, 0.1], [0.1, bad], family=1)
    assert_total(j)
    assert j.status is Status.UNSURE and not j.needs_confirmation
    assert "pair 2's session of the working tree" in j.reason


def test_no_pair_is_unsure_and_asks_for_the_first() -> None:
    j = pair_verdict([0.1], [], family=1)
    assert_total(j)
    assert j.status is Status.UNSURE and j.needs_confirmation
    assert j.reason == "unsure: no pair measured both sides; 3 more pairs"


def test_a_history_judged_at_a_tiny_alpha_has_no_infinite_bound() -> None:
    """1 - alpha rounded to 1 made the interval's quantile inf (Infinity in the results
    file); alpha 5e-324 over a family is a level of 0: the upper end is unbounded, None."""
    history = [summary(0.05 * (1 + 0.001 * i)) for i in range(10)]
    tiny = judge(history, [summary(0.05)], threshold=0.05, alpha=1e-300, family=1, timer="wall")
    assert_total(tiny)
    assert tiny.ratio_high is not None
    zero = judge(history, [summary(0.05)], threshold=0.05, alpha=5e-324, family=8, timer="wall")
    assert_total(zero)
    assert zero.ratio_high is None


@pytest.mark.parametrize("bad", [math.inf, 1e300, 1e-300])
def test_the_history_judge_refuses_a_median_no_timer_reports(bad: float) -> None:
    with pytest.raises(ValueError, match="invalid session median .* not a time between"):
        judge([summary(bad)], [summary(1.0)], threshold=0.05, alpha=0.01, family=1, timer="wall")


@pytest.mark.parametrize("threshold", [0.0, -0.05, math.inf, math.nan])
def test_a_threshold_out_of_range_is_refused_by_both_judges(threshold: float) -> None:
    with pytest.raises(ValueError, match="invalid threshold"):
        pair_verdict([0.1], [0.1], family=1, threshold=threshold)
    with pytest.raises(ValueError, match="invalid threshold"):
        judge([summary(1.0)], [summary(1.0)], threshold=threshold, alpha=0.01, family=1, timer="")


def test_a_ratio_whose_times_are_no_numbers_gets_the_noisiest_prior() -> None:
    """A Versus of NaN made every number of the history's verdict NaN."""
    one, unknown = summary(1.0), Versus(math.nan, 1.0)

    def history(timer: str, versus: Versus | None) -> Judgement:
        return judge(
            [one] * 3, [one], threshold=0.05, alpha=0.01, family=1, timer=timer, versus=versus
        )

    j = history("cuda-graph:ratio", unknown)
    assert_total(j)
    assert j.tau == history("synchronizing", None).tau
    pairs = judge_pairs(
        [one] * 3,
        [one] * 3,
        threshold=0.05,
        alpha=0.01,
        family=1,
        timer="cuda-graph:ratio",
        versus=unknown,
    )
    assert_total(pairs)
