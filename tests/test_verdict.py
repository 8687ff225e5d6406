"""Unit tests of pytest_gpubench.verdict: what makes a comparison meaningless, then the rule;
and which final verdicts fail their test."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_gpubench.baseline import BaselineEntry, SessionRecord
from pytest_gpubench.kernels import Launch
from pytest_gpubench.rule import SessionSummary, Status, judge
from pytest_gpubench.settings import MeasureSettings
from pytest_gpubench.verdict import MIN_JUDGED_SAMPLES, assess, fails

SETTINGS = MeasureSettings()
K = Launch("triton_per_fused_softmax_0", grid=(64, 1, 1), block=(128, 1, 1), share=1.0)


def baseline(*medians: float, timer: str = "cuda-graph", **extra: Any) -> BaselineEntry:
    records = tuple(SessionRecord(f"s{i}", m, 50, 0.0005) for i, m in enumerate(medians or (1.0,)))
    return BaselineEntry(
        timer=timer, epoch="s0", anchor=records[:5], history=records, samples_ms=(1.0,), **extra
    )


def current(*medians: float, n: int = 50) -> list[SessionSummary]:
    return [SessionSummary(m, n, 0.0005) for m in medians]


def assessed(entry: BaselineEntry | None, sessions: list[SessionSummary], **kw: Any) -> Any:
    options: dict[str, Any] = dict(
        timer="cuda-graph",
        launches=(),
        settings=SETTINGS,
        family=2,
        fail_on_improvement=False,
    )
    return assess(entry, sessions=sessions, **(options | kw))


def test_without_a_baseline_a_measurement_is_new() -> None:
    a = assessed(None, current(1.0))
    assert (a.status, a.judgement, a.reason, a.kernel_changes) == (
        Status.NEW,
        None,
        "no baseline",
        (),
    )
    assert not a.needs_confirmation


def test_a_baseline_of_another_timer_is_incomparable_whatever_the_times() -> None:
    a = assessed(baseline(1.0, 1.0, timer="wall"), current(1.0))
    assert a.status is Status.INCOMPARABLE and a.judgement is None
    assert a.reason == (
        "baseline timed by wall, now by cuda-graph: times of different timers are never "
        "compared; accept the new timer with --gpubench-save"
    )


def test_other_kernels_are_incomparable_and_name_the_change() -> None:
    entry = baseline(1.0, kernels=(K,))
    a = assessed(entry, current(1.0), launches=(K, Launch("k2")))
    assert a.status is Status.INCOMPARABLE
    assert a.reason == (
        "calls run other kernels than the baseline's: 1 kernel added: k2; accept the new "
        "kernels with --gpubench-save"
    )
    assert a.kernel_changes == ("1 kernel added: k2",)
    twice = Launch(K.name, grid=K.grid, block=K.block, count=2, share=1.0)
    assert assessed(entry, current(1.0), launches=(twice,)).status is Status.INCOMPARABLE


def test_another_configuration_of_the_same_kernels_is_judged_and_reported() -> None:
    entry = baseline(1.0, 1.0, 1.0, kernels=(K,))
    regrid = Launch(K.name, grid=(32, 1, 1), block=K.block, share=1.0)
    a = assessed(entry, current(1.0), launches=(regrid,))
    assert a.status is Status.OK and a.judgement is not None
    assert a.kernel_changes == ("triton_per_fused_softmax_0 grid (64,1,1) -> (32,1,1)",)


@pytest.mark.parametrize("launches", [(), (Launch("k2"),)], ids=["not-recorded-now", "other"])
def test_kernels_are_compared_only_when_both_sides_recorded_them(
    launches: tuple[Launch, ...],
) -> None:
    unrecorded = baseline(1.0, 1.0, 1.0)
    a = assessed(unrecorded, current(1.0), launches=launches)
    assert (a.status, a.kernel_changes) == (Status.OK, ())
    if not launches:  # a timer that cannot tell what ran, against a baseline that can
        b = assessed(baseline(1.0, 1.0, 1.0, kernels=(K,)), current(1.0), launches=launches)
        assert (b.status, b.kernel_changes) == (Status.OK, ())


@pytest.mark.parametrize("n, words", [(1, "1 sample"), (2, "2 samples")])
def test_too_few_samples_are_unstable_and_say_how_to_fix_it(n: int, words: str) -> None:
    a = assessed(baseline(1.0), current(3.0, n=n))
    assert a.status is Status.UNSTABLE and a.judgement is None
    assert a.reason == (
        f"{words} in the budget: too few to judge, raise --gpubench-budget-s (judging needs "
        f"{MIN_JUDGED_SAMPLES})"
    )
    assert MIN_JUDGED_SAMPLES == 3
    assert assessed(baseline(1.0), current(3.0, n=3)).status is Status.REGRESSED


@pytest.mark.parametrize("fail_on_improvement", [False, True])
@pytest.mark.parametrize("family", [1, 54])
def test_otherwise_the_verdict_is_the_rules_on_the_history_and_anchor(
    family: int, fail_on_improvement: bool
) -> None:
    entry = baseline(1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 0.98)
    now = current(1.06, 1.055, 1.058)
    a = assessed(entry, now, family=family, fail_on_improvement=fail_on_improvement)
    expected = judge(
        [r.summary for r in entry.history],
        [r.summary for r in entry.anchor],
        now,
        threshold=SETTINGS.threshold,
        alpha=SETTINGS.alpha,
        family=family,
        timer="cuda-graph",
        fail_on_improvement=fail_on_improvement,
    )
    assert a.judgement == expected
    assert (a.status, a.reason) == (expected.status, expected.reason)


def test_a_flagged_first_session_needs_confirmation() -> None:
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0)
    assert assessed(entry, current(1.06)).needs_confirmation
    assert not assessed(entry, current(1.06, 1.06, 1.06)).needs_confirmation
    assert not assessed(entry, current(1.0)).needs_confirmation


def test_the_measure_settings_are_what_judges() -> None:
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0)
    loose = MeasureSettings(threshold=0.3)
    assert assessed(entry, current(1.2, 1.2, 1.2)).status is Status.REGRESSED
    assert assessed(entry, current(1.2, 1.2, 1.2), settings=loose).status is Status.OK


@pytest.mark.parametrize(
    "status, fail_on_improvement, allow_incomparable, failing",
    [
        (Status.REGRESSED, False, False, True),
        (Status.REGRESSED, True, True, True),
        (Status.IMPROVED, False, False, False),
        (Status.IMPROVED, True, False, True),
        (Status.INCOMPARABLE, False, False, True),
        (Status.INCOMPARABLE, True, True, False),
        (Status.UNSTABLE, True, False, False),
        (Status.NEW, True, False, False),
        (Status.OK, True, False, False),
    ],
)
def test_fails(
    status: Status, fail_on_improvement: bool, allow_incomparable: bool, failing: bool
) -> None:
    verdict = fails(
        status, fail_on_improvement=fail_on_improvement, allow_incomparable=allow_incomparable
    )
    assert verdict is failing
