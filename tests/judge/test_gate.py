"""Unit tests of the gate (judge/gate.py), the one place that decides what a verdict does:
what makes a comparison meaningless, then the rule; which verdicts are confirmed, which fail
their test, which start a new epoch; and what each process's gate is."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from pytest_gpubench.core.baseline import BaselineEntry, Binary
from pytest_gpubench.core.kernels import Launch, fingerprint
from pytest_gpubench.core.records import (
    Context,
    Floors,
    Judgement,
    Measurement,
    Result,
    SessionRecord,
    SessionSummary,
    Status,
    Verdict,
)
from pytest_gpubench.core.settings import MeasureSettings, Settings
from pytest_gpubench.judge.gate import MIN_JUDGED_SAMPLES, Gate
from pytest_gpubench.judge.rule import judge

SETTINGS = MeasureSettings()
K = Launch("triton_per_fused_softmax_0", grid=(64, 1, 1), block=(128, 1, 1), share=1.0)


def baseline(*medians: float, timer: str = "cuda-graph", **extra: Any) -> BaselineEntry:
    records = tuple(SessionRecord(f"s{i}", m, 50, 0.0005) for i, m in enumerate(medians or (1.0,)))
    return BaselineEntry(
        timer=timer, epoch="s0", anchor=records[:5], history=records, samples_ms=(1.0,), **extra
    )


def current(*medians: float, n: int = 50) -> list[SessionSummary]:
    return [SessionSummary(m, n, 0.0005) for m in medians]


def measurement(
    sessions: list[SessionSummary], timer: str = "cuda-graph", launches: tuple[Launch, ...] = ()
) -> Measurement:
    """A measurement of ``sessions``: samples at the first one's median, then confirmations."""
    return Measurement(
        key="k",
        test="t",
        timer=timer,
        samples_ms=(sessions[0].median_ms,) * sessions[0].n,
        warmup=0,
        calls_per_sample=1,
        threshold=0.05,
        session="c0",
        confirmations=tuple(
            SessionRecord(f"c{i}", s.median_ms, s.n, s.se_log)
            for i, s in enumerate(sessions[1:], 1)
        ),
        kernels=launches,
    )


def assessed(entry: BaselineEntry | None, sessions: list[SessionSummary], **kw: Any) -> Verdict:
    gate = Gate(
        family=kw.pop("family", 2),
        fail_on_improvement=kw.pop("fail_on_improvement", False),
        changed_fails=kw.pop("changed_fails", False),
        work_fails=kw.pop("work_fails", True),
    )
    settings = kw.pop("settings", SETTINGS)
    return gate.verdict(measurement(sessions, **kw), entry, settings)


def test_without_a_baseline_a_measurement_is_new() -> None:
    a = assessed(None, current(1.0))
    assert (a.status, a.judgement, a.reason, a.kernel_changes) == (
        Status.NEW,
        None,
        "no baseline",
        (),
    )
    assert a.judgement is None


def test_a_baseline_of_another_timer_is_incomparable_whatever_the_times() -> None:
    a = assessed(baseline(1.0, 1.0, timer="wall"), current(1.0))
    assert a.status is Status.INCOMPARABLE and a.judgement is None
    assert a.reason == (
        "baseline timed by wall, now by cuda-graph: times of different timers are never "
        "compared; accept the new timer with --gpubench-save --gpubench-accept"
    )


def test_a_host_caveat_is_said_where_the_history_cannot_gate_and_nowhere_else() -> None:
    gate = Gate(family=2)
    caveat = "the process ran on a CPU 40% of the time it timed (a loaded machine, or ...)"
    steady = dataclasses.replace(measurement(current(1.0)), context=Context(caveat=caveat))
    gated = gate.verdict(steady, baseline(*[1.0, 1.001, 0.999] * 7), SETTINGS)
    assert gated.status is Status.OK and gated.judgement is not None and gated.judgement.gated
    assert caveat not in gated.reason  # a test that gates needs no excuse
    short = gate.verdict(steady, baseline(1.0), SETTINGS)  # gates only 50%: noisy
    assert short.status is Status.OK and short.noisy
    assert short.reason.endswith(f"; on this host {caveat}")


def test_other_kernels_are_another_binary_and_name_the_change() -> None:
    entry = baseline(1.0, kernels=(K,))
    launches = (K, Launch("k2"))
    a = assessed(entry, current(1.0), launches=launches)
    assert a.status is Status.CHANGED and a.judgement is None
    assert a.reason == (
        f"another binary than the baseline's ({fingerprint((K,))} -> {fingerprint(launches)}): "
        "1 kernel added: k2; +0.0% against that binary's history, for information only: "
        "another binary is not judged on time; accept it with --gpubench-save --gpubench-accept"
    )
    assert a.kernel_changes == ("1 kernel added: k2",)
    twice = Launch(K.name, grid=K.grid, block=K.block, count=2, share=1.0)
    assert assessed(entry, current(1.0), launches=(twice,)).status is Status.CHANGED


# The case (two H200s): a compiled GeLU ran 32768x256 blocks of 16 registers on one,
# 16384x128 blocks of 26 on the other, and read +11.9%: another binary, not a regression.
GELU = Launch("triton_poi_fused_gelu_0", grid=(32768, 1, 1), block=(256, 1, 1), registers=16)
GELU_B = Launch(GELU.name, grid=(16384, 1, 1), block=(128, 1, 1), registers=26)


@pytest.mark.parametrize(
    "launch, change",
    [
        (dataclasses.replace(GELU, registers=26), "registers 16 -> 26"),
        (dataclasses.replace(GELU, grid=(16384, 1, 1)), "grid (32768,1,1) -> (16384,1,1)"),
        (dataclasses.replace(GELU, block=(128, 1, 1)), "block (256,1,1) -> (128,1,1)"),
        (dataclasses.replace(GELU, shared_memory=4096), None),  # recorded on one side only
    ],
)
def test_another_configuration_is_judged_on_time_less_what_a_pick_explains(
    launch: Launch, change: str | None
) -> None:
    """Issue 45: another pick is judged on time. A history of one binary of Inductor's code
    cannot tell a pick of +11.9% from a change of the code (Inductor's picks reach +82%):
    not gated, and said; ``--gpubench-changed=fail`` makes any other binary fail by itself,
    its time for information only."""
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0, kernels=(dataclasses.replace(GELU, share=1.0),))
    a = assessed(entry, current(1.119, 1.119, 1.119), launches=(launch,))
    assert a.judgement is not None and a.judgement.ratio == pytest.approx(1.119)
    if change is None:  # a field one side did not record matches any value: its own binary
        assert a.status is Status.REGRESSED and a.kernel_changes == ()
        return
    assert a.status is Status.NOT_GATED and not a.judgement.gated
    assert a.kernel_changes == (f"triton_poi_fused_gelu_0 {change}",) and a.same_kernels
    assert a.reason == (
        "slower by 11.9% vs history of 5 sessions; another pick of the same work: "
        f"triton_poi_fused_gelu_0 {change} (a pick by the inductor alone may move it by more "
        "than 50% here: 1 binary of this work seen): it could not catch a slowdown under 50%; "
        "saved, this pick joins the history, and a run that picks it again is judged against "
        "its own sessions"
    )
    assert (a.baseline_binary, a.reference_ms, a.history_sessions) == (
        fingerprint((GELU,)),
        pytest.approx(1.0),
        5,
    )
    told = assessed(entry, current(1.119, 1.119, 1.119), launches=(launch,), changed_fails=True)
    assert (told.status, told.judgement) == (Status.CHANGED, None)
    assert told.previous_ratio == pytest.approx(1.119)  # for information only
    assert "+11.9% against that binary's history, for information only" in told.reason


def test_a_pick_among_close_picks_is_gated_and_fails_beyond_them() -> None:
    """A test whose own picks of the same work lie within 0.4% of each other gates another
    pick: +12% regressed, the same speed ok; each verdict names the pick."""
    axpy = Launch("_axpy_kernel", grid=(65536, 1, 1), block=(128, 1, 1), share=1.0)
    times = [1.0, 1.002, 0.998, 1.001, 0.999, 1.0, 1.001, 0.999]
    entry = baseline(*times, kernels=(axpy,))
    others = []
    for grid, scale in ((16384, 1.002), (4096, 0.997), (32768, 1.004)):
        history = tuple(
            SessionRecord(f"{grid}-{i}", t * scale, 50, 0.0005) for i, t in enumerate(times)
        )
        launch = dataclasses.replace(axpy, grid=(grid, 1, 1))
        others.append(Binary((launch,), f"{grid}-0", history, history))
    entry = entry.with_binaries([entry.binary, *others])
    pick = dataclasses.replace(axpy, grid=(8192, 1, 1))
    slower = assessed(entry, current(1.12, 1.12, 1.12), launches=(pick,))
    assert slower.status is Status.REGRESSED and slower.same_kernels
    assert slower.kernel_changes == ("_axpy_kernel grid (65536,1,1) -> (8192,1,1)",)
    assert "another pick of the same work: _axpy_kernel grid (65536,1,1) -> (8192,1,1)" in (
        slower.reason
    )
    assert "4 binaries of this work seen" in slower.reason
    same = assessed(entry, current(1.0, 1.0, 1.0), launches=(pick,))
    assert same.status is Status.OK and same.judgement is not None
    gate = same.judgement.gateable
    assert gate is not None and 0.03 < gate < 0.12  # widened by the pick, still a gate
    # Other kernels fail by themselves unless told not to; then their time is judged.
    other = (axpy, Launch("k2"))
    assert assessed(entry, current(1.12, 1.12, 1.12), launches=other).status is Status.CHANGED
    judged = assessed(entry, current(1.12, 1.12, 1.12), launches=other, work_fails=False)
    assert judged.status is Status.REGRESSED and not judged.same_kernels
    assert judged.reason.endswith("; other kernels than the baseline's: 1 kernel added: k2")


def test_each_run_is_judged_against_the_history_of_the_binary_it_ran() -> None:
    """Two machines of one model that compile differently keep their own spread: the run of
    the other binary is judged against that binary's sessions, never a mix."""
    a_entry = baseline(1.0, 1.01, 0.99, 1.0, 1.0, kernels=(GELU,))
    b_history = tuple(SessionRecord(f"b{i}", m, 50, 0.0005) for i, m in enumerate([1.12] * 5))
    b = Binary((GELU_B,), "b0", b_history, b_history)
    entry = a_entry.with_binaries([b, a_entry.binary])  # b saved last
    on_a = assessed(entry, current(1.0, 1.0, 1.0), launches=(GELU,))
    on_b = assessed(entry, current(1.12, 1.12, 1.12), launches=(GELU_B,))
    assert (on_a.status, on_a.baseline_binary) == (Status.OK, fingerprint((GELU,)))
    assert (on_b.status, on_b.baseline_binary) == (Status.OK, fingerprint((GELU_B,)))
    assert on_b.reference_ms == pytest.approx(1.12) and on_b.history_sessions == 5
    assert on_b.judgement is not None and on_b.judgement.ratio == pytest.approx(1.0)
    slower_a = assessed(entry, current(1.12, 1.12, 1.12), launches=(GELU,))
    assert slower_a.judgement is not None  # against a's history, not b's
    assert slower_a.judgement.ratio == pytest.approx(1.12, rel=0.01)
    assert slower_a.status is Status.REGRESSED
    third = dataclasses.replace(GELU, registers=40)
    c = assessed(entry, current(1.0), launches=(third,))  # two picks 12% apart: not gated
    assert (c.status, c.baseline_binary) == (Status.NOT_GATED, fingerprint((GELU_B,)))
    assert "2 binaries of this work seen" in c.reason
    assert c.kernel_changes == (
        "triton_poi_fused_gelu_0 grid (16384,1,1) -> (32768,1,1)",
        "triton_poi_fused_gelu_0 block (128,1,1) -> (256,1,1)",
        "triton_poi_fused_gelu_0 registers 26 -> 40",
    )
    # a timer that cannot tell what ran is judged against the latest binary
    unknown = assessed(entry, current(1.12, 1.12, 1.12))
    assert (unknown.status, unknown.baseline_binary) == (Status.OK, fingerprint((GELU_B,)))
    assert unknown.judgement is not None and unknown.judgement.ratio == pytest.approx(1.0)


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
    judged = assessed(baseline(1.0, 1.0, 1.0), current(3.0, 3.0, 3.0, n=3))
    assert judged.status is Status.REGRESSED


@pytest.mark.parametrize("fail_on_improvement", [False, True])
@pytest.mark.parametrize("family", [1, 54])
def test_otherwise_the_verdict_is_the_rules_on_the_history(
    family: int, fail_on_improvement: bool
) -> None:
    entry = baseline(1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 0.98)
    now = current(1.06, 1.055, 1.058)
    a = assessed(entry, now, family=family, fail_on_improvement=fail_on_improvement)
    expected = judge(
        [r.summary for r in entry.history],
        [r.summary for r in measurement(now).sessions],
        threshold=SETTINGS.threshold,
        alpha=SETTINGS.alpha,
        family=family,
        timer="cuda-graph",
        fail_on_improvement=fail_on_improvement,
        design=Gate().design,
    )
    assert a.judgement == expected
    assert (a.status, a.reason) == (expected.status, expected.reason)


def test_a_flagged_first_session_needs_confirmation() -> None:
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0)

    def flagged(v: Verdict) -> bool:
        return v.judgement is not None and v.judgement.needs_confirmation

    assert flagged(assessed(entry, current(1.06)))
    assert not flagged(assessed(entry, current(1.06, 1.06, 1.06)))
    assert not flagged(assessed(entry, current(1.0)))


def test_the_measure_settings_are_what_judges() -> None:
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0)
    loose = MeasureSettings(threshold=0.3)
    assert assessed(entry, current(1.2, 1.2, 1.2)).status is Status.REGRESSED
    assert assessed(entry, current(1.2, 1.2, 1.2), settings=loose).status is Status.OK


def test_the_verdict_names_what_it_was_judged_against() -> None:
    entry = baseline(1.0, 1.0, 1.0)
    v = assessed(entry, current(1.0), family=7)
    assert (v.reference_ms, v.history_sessions, v.family) == (pytest.approx(1.0), 3, 7)
    new = assessed(None, current(1.0), family=7)
    assert (new.reference_ms, new.history_sessions, new.family) == (None, 0, 7)


@pytest.mark.parametrize(
    "status, fail_on_improvement, allow_incomparable, changed_fails, failing",
    [
        (Status.REGRESSED, False, False, False, True),
        (Status.REGRESSED, True, True, True, True),
        (Status.IMPROVED, False, False, True, False),
        (Status.IMPROVED, True, False, True, True),
        (Status.CHANGED, False, False, True, True),
        (Status.CHANGED, True, True, False, True),  # other kernels: work_fails by default
        (Status.INCOMPARABLE, False, False, True, True),
        (Status.INCOMPARABLE, True, True, True, False),
        (Status.UNSTABLE, True, False, True, False),
        (Status.NEW, True, False, True, False),
        (Status.OK, True, False, True, False),
        (Status.CRASHED, False, False, False, True),  # the working tree's process died
        (Status.UNMEASURABLE, True, True, True, False),
    ],
)
def test_fails(
    status: Status,
    fail_on_improvement: bool,
    allow_incomparable: bool,
    changed_fails: bool,
    failing: bool,
) -> None:
    gate = Gate(
        fail_on_improvement=fail_on_improvement,
        allow_incomparable=allow_incomparable,
        changed_fails=changed_fails,
    )
    assert gate.fails(Verdict(status)) is failing
    # A gate that does not enforce (a fresh process: its parent judges) fails nothing.
    assert not dataclasses.replace(gate, enforcing=False).fails(Verdict(status))


@pytest.mark.parametrize("status", list(Status))
def test_only_an_accepted_change_starts_a_new_epoch(status: Status) -> None:
    changed = status in (Status.REGRESSED, Status.IMPROVED, Status.INCOMPARABLE, Status.CHANGED)
    saving = Gate(accepting=True)
    assert saving.starts_epoch(Verdict(status, accepted=True)) is changed
    assert not saving.starts_epoch(Verdict(status))


def flagged(ratio: float, sessions: int = 1, status: Status = Status.OK) -> Result:
    judgement = Judgement(status, ratio=ratio, needs_confirmation=sessions == 1)
    m = measurement(current(*([ratio] * sessions)))
    return Result(m, Verdict(status, judgement))


def test_a_slower_flagged_session_is_confirmed_in_every_process_that_confirms() -> None:
    assert Gate().needs_confirmation(flagged(1.06))
    assert Gate(accepting=True, enforcing=False).needs_confirmation(flagged(1.06))
    assert not Gate(confirm=0).needs_confirmation(flagged(1.06))


def test_a_faster_one_is_confirmed_like_a_slower_one() -> None:
    assert Gate().needs_confirmation(flagged(0.94))
    assert Gate(fail_on_improvement=True).needs_confirmation(flagged(0.94))
    assert Gate(accepting=True, enforcing=False).needs_confirmation(flagged(0.94))
    assert not Gate(confirm=0).needs_confirmation(flagged(0.94))


def test_what_is_confirmed_already_or_never_flagged_is_not_confirmed_again() -> None:
    assert not Gate().needs_confirmation(flagged(1.06, sessions=3, status=Status.REGRESSED))
    assert not Gate().needs_confirmation(Result(measurement(current(1.0)), Verdict(Status.NEW)))
    unflagged = Result(measurement(current(1.0)), Verdict(Status.OK, Judgement(Status.OK, 1.0)))
    assert not Gate().needs_confirmation(unflagged)


def test_a_borderline_verdict_gains_batches_of_two_up_to_the_cap() -> None:
    """After each batch the rule may ask for more (a borderline test); the gate adds batches
    of two fresh sessions while the cap allows, the last batch cut to what is left."""
    gate = Gate(confirm=6)

    def borderline(sessions: int) -> Result:
        m = measurement(current(*([1.06] * sessions)))
        return Result(m, Verdict(Status.OK, Judgement(Status.OK, 1.06, needs_confirmation=True)))

    assert [gate.next_batch(borderline(n)) for n in (1, 3, 5, 6, 7)] == [2, 2, 2, 1, 0]
    assert [gate.needs_confirmation(borderline(n)) for n in (1, 3, 5, 7)] == [True] * 3 + [False]
    assert Gate(confirm=3).next_batch(borderline(3)) == 1
    assert not Gate(confirm=2).needs_confirmation(borderline(3))


@pytest.mark.parametrize(
    "child, save, confirm, accepting, enforcing",
    [
        (None, False, 6, False, True),  # the user's run: verdicts fail tests
        (None, True, 6, True, True),  # a save: fails what a run fails, unless it accepts
        ("child.json", False, 0, False, False),  # confirming: its parent judges
        ("child.json", True, 0, False, False),  # recording: its parent appends what it timed
    ],
)
def test_each_process_gets_the_gate_of_its_role(
    child: str | None, save: bool, confirm: int, accepting: bool, enforcing: bool
) -> None:
    settings = Settings.resolve(
        {"save": save}, {}, Path("/project"), Path(child) if child else None
    )
    gate = Gate.of(settings, family=54)
    assert (gate.confirm, gate.accepting, gate.enforcing, gate.family) == (
        confirm,
        accepting,
        enforcing,
        54,
    )


@pytest.mark.parametrize(
    "options, work_fails, changed_fails",
    [
        ({}, True, False),
        ({"changed": "work"}, True, False),
        ({"changed": "fail"}, True, True),
        ({"changed": "warn"}, False, False),
        ({"allow_incomparable": True}, False, False),  # as it passed other kernels before
    ],
)
def test_a_changed_binary_fails_as_told(
    options: dict[str, object], work_fails: bool, changed_fails: bool
) -> None:
    gate = Gate.of(Settings.resolve(options, {}, Path("/project")))
    assert (gate.work_fails, gate.changed_fails) == (work_fails, changed_fails)


def test_another_configuration_of_the_same_kernels_warns_by_default() -> None:
    """An autotuner picks among configurations of one kernel from process to process (an
    H100: grid 65536, 16384 and 4096 blocks of one axpy, 68 us each): by default only other
    kernels fail."""
    regrid = Verdict(Status.CHANGED, same_kernels=True)
    other_work = Verdict(Status.CHANGED, same_kernels=False)
    assert not Gate().fails(regrid) and Gate().fails(other_work)
    assert Gate(changed_fails=True).fails(regrid)
    assert not Gate(work_fails=False).fails(other_work)


def test_what_a_save_leaves_out_and_why() -> None:
    gate = Gate(accepting=True)
    one = Result(
        dataclasses.replace(measurement(current(1.0, n=1)), samples_ms=(1.0,)), Verdict(Status.OK)
    )
    assert gate.unsaved(one) == (
        "t: not saved: 1 sample in the budget: too few to judge, raise --gpubench-budget-s "
        "(a baseline needs 2)"
    )
    two = Result(measurement(current(1.0, n=2)), Verdict(Status.OK))
    assert gate.unsaved(two) is None  # saved
    assert gate.unsaved(two, passed=False) == ""  # its test's failure says why


# --- saves never accept silently ------------------------------------------------------------

ACCEPT = MeasureSettings(accept=True)
HOW = (
    "accept it with --gpubench-save --gpubench-accept (or @pytest.mark.gpubench(accept=True) "
    "on the test)"
)


def changed(status: Status, sessions: int = 3) -> Result:
    """A final verdict of ``status`` on ``sessions`` sessions (confirmed: no screen flag)."""
    ratio = {Status.REGRESSED: 1.2, Status.IMPROVED: 0.8}.get(status, 1.0)
    judgement = Judgement(status, ratio=ratio) if status is not Status.INCOMPARABLE else None
    return Result(measurement(current(*([ratio] * sessions))), Verdict(status, judgement))


@pytest.mark.parametrize("status", list(Status))
def test_a_save_accepts_a_final_session_only_when_told(status: Status) -> None:
    """Told to accept, a save takes a change, and what it would append or leave out
    (unstable), whatever it judged; never what is no time of the work."""
    acceptable = status in (
        Status.REGRESSED,
        Status.IMPROVED,
        Status.MORE_MEMORY,
        Status.INCOMPARABLE,
        Status.CHANGED,
        Status.OK,
        Status.NEW,
        Status.NOT_GATED,
        Status.UNSTABLE,
    )
    result = changed(status)
    assert Gate(accepting=True).accepts(result, ACCEPT) is acceptable
    assert not Gate(accepting=True).accepts(result, SETTINGS)  # not told to accept
    assert not Gate().accepts(result, ACCEPT)  # no save: nothing to accept into


def test_a_first_session_that_awaits_its_confirmation_is_not_accepted_yet() -> None:
    saving = Gate(accepting=True)
    first = flagged(1.3, status=Status.REGRESSED)
    assert saving.needs_confirmation(first) and not saving.accepts(first, ACCEPT)
    assert Gate(confirm=0, accepting=True).accepts(first, ACCEPT)  # its first is final


def test_the_gate_judges_an_accepted_change_accepted() -> None:
    entry = baseline(1.0, 1.0, 1.0, 1.0, 1.0)
    slower = measurement(current(1.3, 1.3, 1.3))
    saving = Gate(accepting=True)
    accepted = saving.judge(slower, entry, ACCEPT)
    assert (accepted.status, accepted.verdict.accepted) == (Status.REGRESSED, True)
    assert not saving.fails(accepted.verdict) and saving.starts_epoch(accepted.verdict)
    refused = saving.judge(slower, entry, SETTINGS)
    assert (refused.status, refused.verdict.accepted) == (Status.REGRESSED, False)
    assert saving.fails(refused.verdict) and not saving.starts_epoch(refused.verdict)
    # an unchanged test is appended as ever, accept or not: never a new epoch
    same = saving.judge(measurement(current(1.0, 1.0, 1.0)), entry, ACCEPT)
    assert (same.status, same.verdict.accepted) == (Status.OK, True)
    assert not saving.starts_epoch(same.verdict) and saving.accepted_line(same, False) is None


@pytest.mark.parametrize(
    "status, fail_on_improvement, allow_incomparable, failing",
    [
        (Status.REGRESSED, False, False, True),
        (Status.IMPROVED, False, False, False),  # left out of the save, with a line
        (Status.IMPROVED, True, False, True),
        (Status.INCOMPARABLE, False, False, True),
        (Status.INCOMPARABLE, False, True, False),  # left out of the save, with a line
    ],
)
def test_a_save_fails_a_change_it_does_not_accept_as_a_run_would(
    status: Status, fail_on_improvement: bool, allow_incomparable: bool, failing: bool
) -> None:
    options = {"fail_on_improvement": fail_on_improvement, "allow_incomparable": allow_incomparable}
    saving = Gate(accepting=True, **options)
    verdict = changed(status).verdict
    assert saving.fails(verdict) is Gate(**options).fails(verdict) is failing
    assert saving.refusal(verdict) == f"not saved: the baseline keeps its history; {HOW}"
    assert Gate(**options).refusal(verdict) == ""  # a run that saves nothing: no such line
    accepted = dataclasses.replace(verdict, accepted=True)
    assert not saving.fails(accepted) and saving.refusal(accepted) == ""
    # whether it failed or not, a save leaves it out
    assert saving.unsaved(changed(status), passed=not failing) == (
        "" if failing else f"t: not saved: {status.value}; {HOW}"
    )


@pytest.mark.parametrize("status", [Status.OK, Status.NEW, Status.UNSTABLE, Status.UNCONFIRMED])
def test_a_save_fails_no_verdict_that_is_no_change(status: Status) -> None:
    saving = Gate(accepting=True, fail_on_improvement=True)
    assert not saving.fails(Verdict(status)) and saving.refusal(Verdict(status)) == ""


def test_ok_new_and_not_gated_are_saved_and_unstable_and_unconfirmed_are_left_out() -> None:
    saving = Gate(accepting=True)
    for status in (Status.OK, Status.NEW, Status.NOT_GATED):
        assert saving.unsaved(changed(status)) is None, status
    unstable = Result(changed(Status.OK).measurement, Verdict(Status.UNSTABLE, reason="too few"))
    assert saving.unsaved(unstable) == f"t: not saved: unstable: too few; or {HOW}"
    assert not saving.fails(unstable.verdict)  # left out with a line, as an improvement
    taken = dataclasses.replace(
        unstable, verdict=dataclasses.replace(unstable.verdict, accepted=True)
    )
    assert saving.unsaved(taken) is None
    assert saving.accepted_line(taken, False) == (
        "t: unstable, accepted: appended to its history (50 samples in the budget: too few to "
        "judge, raise --gpubench-budget-s)"
    )
    unconfirmed = saving.unconfirmed(flagged(1.3, status=Status.REGRESSED), "interrupted")
    assert saving.unsaved(unconfirmed) == (
        "t: not saved: unconfirmed (its first session may be a change); save again"
    )


def test_a_save_writes_the_session_that_took_the_samples_and_not_its_confirmations() -> None:
    saving = Gate(accepting=True)
    confirmed = changed(Status.OK, sessions=3)
    assert len(confirmed.measurement.sessions) == 3
    update = saving.saved(confirmed)
    assert update.records == (confirmed.measurement.record,) and not update.new_epoch
    regressed = changed(Status.REGRESSED)
    accepted = Result(regressed.measurement, dataclasses.replace(regressed.verdict, accepted=True))
    update = saving.saved(accepted)
    assert update.records == (accepted.measurement.record,) and update.new_epoch
    # a session recorded in a fresh process is appended: never a new epoch
    assert not saving.saved(accepted, recorded=True).new_epoch


def test_a_recorded_session_is_appended_whatever_it_judged_unless_it_timed_other_work() -> None:
    saving = Gate(accepting=True)
    for status in (Status.OK, Status.NEW, Status.REGRESSED, Status.IMPROVED):
        assert saving.unrecorded(changed(status), passed=True) is None, status
    other = Result(
        measurement(current(1.0)), Verdict(Status.INCOMPARABLE, reason="baseline timed by wall")
    )
    assert saving.unrecorded(other, passed=True) == (
        "t: a recorded session not saved: baseline timed by wall"
    )
    assert saving.unrecorded(changed(Status.OK), passed=False) == (
        "t: a recorded session not saved: its test did not pass in the fresh process"
    )


def test_only_fresh_processes_that_timed_the_same_thing_confirm_it() -> None:
    first = measurement(current(1.06))
    same = dataclasses.replace(first, session="c1", samples_ms=(1.0, 1.01, 0.99))
    others = [
        dataclasses.replace(same, key="other"),  # another test
        dataclasses.replace(same, timer="cupti"),  # another timer
        dataclasses.replace(same, samples_ms=(1.0,)),  # one sample tells no median's error
    ]
    confirmed = Gate.confirmed(first, [same, *others])
    assert confirmed.sessions == (first.record, same.record)


def test_a_flagged_verdict_whose_confirmation_did_not_run_stays_unconfirmed() -> None:
    gate = Gate()
    first = flagged(1.3, status=Status.REGRESSED)
    unconfirmed = gate.unconfirmed(first, "interrupted")
    assert unconfirmed.status is Status.UNCONFIRMED and not gate.fails(unconfirmed.verdict)
    assert unconfirmed.verdict.reason.startswith("not confirmed: interrupted; its first session")
    assert unconfirmed.verdict.judgement == first.verdict.judgement  # what it measured stays
    settled = flagged(1.0, sessions=3)
    assert gate.unconfirmed(settled, "interrupted") is settled  # nothing was left to confirm


# --- the physical floor (issue 18) ------------------------------------------------------------


def floored(median_ms: float, bytes: float, cache_bytes: int | None = 50 << 20) -> Measurement:
    """A call of ``bytes`` at ``median_ms`` on a device whose copies ran 3000 GB/s from
    memory and 9000 GB/s from a cache of ``cache_bytes``."""
    floors = Floors(bytes, peak_gbs=3000.0, cached_gbs=9000.0, cache_bytes=cache_bytes)
    return dataclasses.replace(measurement(current(median_ms)), floors=floors)


def test_the_floor_is_the_cache_rate_where_the_bytes_fit_and_memory_for_the_rest() -> None:
    # 9 MB fit the cache: 9e6 bytes at 9000 GB/s take 1 µs
    assert floored(1.0, 9e6).floors.floor_ms == pytest.approx(1e-3)
    # 300 MB do not: what the 50 MiB cache cannot hold comes from memory at 3000 GB/s
    assert floored(1.0, 3e8).floors.floor_ms == pytest.approx((3e8 - (50 << 20)) / 3e9)
    # no cache size known (a CPU): the faster rate for all of it
    assert floored(1.0, 3e8, cache_bytes=None).floors.floor_ms == pytest.approx(3e8 / 9e9)
    assert dataclasses.replace(floored(1.0, 9e6).floors, peak_gbs=None).floor_ms is None
    # a file written before the cache's rate was measured: no floor (its L2 data would read
    # as impossible against the memory's rate alone)
    assert dataclasses.replace(floored(1.0, 9e6).floors, cached_gbs=None).floor_ms is None
    assert dataclasses.replace(floored(1.0, 9e6).floors, bytes=None).floor_ms is None


def test_a_call_faster_than_its_bytes_allow_is_impossible_fails_and_is_never_saved() -> None:
    gate = Gate(accepting=True)
    floor_ms = floored(1.0, 3e8).floors.floor_ms
    assert floor_ms is not None
    # within the margin (a kernel may beat a plain copy): judged as any other
    assert gate.verdict(floored(floor_ms / 2.9, 3e8), None, MeasureSettings()).status is Status.NEW
    verdict = gate.verdict(floored(floor_ms / 3.1, 3e8), baseline(1.0), MeasureSettings())
    assert verdict.status is Status.IMPOSSIBLE and gate.fails(verdict)
    assert "over 3x the fastest this device's copies allow" in verdict.reason
    assert "9000 GB/s measured, what exceeds its 50 MiB cache at 3000 GB/s" in verdict.reason
    result = Result(floored(floor_ms / 3.1, 3e8), verdict)
    assert (
        gate.unsaved(result, passed=True)
        == "t: not saved: impossible (its number is not a time of its work)"
    )
    assert not gate.accepts(result, MeasureSettings(accept=True))
    # nor appended as a session recorded in a fresh process (--gpubench-sessions)
    assert "a recorded session not saved: " in (gate.unrecorded(result, passed=True) or "")


def test_a_call_faster_than_its_flops_allow_is_impossible_and_its_share_is_of_the_matmul() -> None:
    """Declared flops are held to the rate a matmul of the call's dtype reached on its
    device: under a third of that time is impossible; the share is of that measured rate."""
    gate = Gate()

    def computed(median_ms: float) -> Measurement:
        # 1e12 flops on a device whose bfloat16 matmul reached 500 TFLOP/s: 2 ms at best
        floors = Floors(flops=1e12, matmul_tflops=500.0, matmul_dtype="bfloat16")
        return dataclasses.replace(measurement(current(median_ms)), floors=floors)

    assert computed(1.0).floors.flops_floor_ms == pytest.approx(2.0)
    assert computed(4.0).tflops_share == pytest.approx(0.5)
    assert computed(1.0).tflops_share is None  # beyond the yardstick: no share of it
    assert gate.verdict(computed(0.7), None, MeasureSettings()).status is Status.NEW
    verdict = gate.verdict(computed(0.6), baseline(1.0), MeasureSettings())
    assert verdict.status is Status.IMPOSSIBLE and gate.fails(verdict)
    assert "over 3x what a bfloat16 matmul reached on this device" in verdict.reason
    assert "500 TFLOP/s measured" in verdict.reason and "flops= says more" in verdict.reason
    # no rate measured (a dtype without a matmul, an older file): no floor
    assert dataclasses.replace(computed(0.01).floors, matmul_tflops=None).flops_floor_ms is None


# --- peak memory (issue 18) -------------------------------------------------------------------

MiB = 1 << 20


def with_peaks(entry: BaselineEntry, *peaks: int | None) -> BaselineEntry:
    """``entry`` with its history's sessions holding ``peaks`` (the latest last)."""
    history = tuple(
        dataclasses.replace(r, peak_bytes=p) for r, p in zip(entry.history, peaks, strict=True)
    )
    return dataclasses.replace(entry, history=history)


def judged_memory(peak: int | None, *peaks: int | None, **settings: Any) -> Verdict:
    entry = with_peaks(baseline(*(1.0,) * len(peaks)), *peaks)
    m = dataclasses.replace(measurement(current(1.0)), peak_bytes=peak)
    return Gate(family=2).verdict(m, entry, dataclasses.replace(SETTINGS, **settings))


def test_a_call_that_holds_more_memory_fails_whatever_its_time_says() -> None:
    v = judged_memory(80 * MiB, 16 * MiB, 16 * MiB, 16 * MiB)
    assert v.status is Status.MORE_MEMORY
    assert Gate().fails(v)
    assert v.reason.startswith("peak memory 80 MiB per call, was 16 MiB: +64 MiB (+400.0%)")
    assert "its time: ok" in v.reason  # the time's verdict is kept beside it
    # Exact: more sessions of time would change nothing, so none are asked for.
    assert not Gate().needs_confirmation(Result(measurement(current(1.0)), v))


@pytest.mark.parametrize(
    ("peak", "failing"),
    [
        (16 * MiB + MiB, False),  # +1 MiB: the slack
        (int(16 * MiB * 1.05), False),  # +5%: the threshold
        (int(16 * MiB * 1.07), True),  # over both
        (15 * MiB, False),  # less memory never fails
    ],
)
def test_memory_fails_only_past_both_its_threshold_and_its_slack(peak: int, failing: bool) -> None:
    assert (judged_memory(peak, 16 * MiB).status is Status.MORE_MEMORY) is failing


def test_small_calls_grow_by_the_slack_and_the_options_move_both_bounds() -> None:
    assert judged_memory(900_000, 1000).status is not Status.MORE_MEMORY  # +90000%, under 1 MiB
    assert judged_memory(900_000, 1000, memory_slack=0).status is Status.MORE_MEMORY
    assert judged_memory(40 * MiB, 16 * MiB, memory_threshold=2.0).status is not Status.MORE_MEMORY
    assert judged_memory(10**12, 1, memory_threshold=float("inf")).status is not Status.MORE_MEMORY


def test_the_reference_is_the_most_recent_sessions_largest_peak() -> None:
    # A process that held more (an autotuner's other workspace) never flags the next...
    assert judged_memory(20 * MiB, 16 * MiB, 20 * MiB, 16 * MiB).status is not Status.MORE_MEMORY
    # ...and a lower peak is the reference once the higher one rolls out (5 sessions).
    rolled = (20 * MiB, 16 * MiB, 16 * MiB, 16 * MiB, 16 * MiB, 16 * MiB)
    assert judged_memory(20 * MiB, *rolled).status is Status.MORE_MEMORY
    # Sessions that do not know it (a file of an older version, a CPU) judge nothing.
    assert judged_memory(80 * MiB, None, None).status is not Status.MORE_MEMORY
    assert judged_memory(None, 16 * MiB).status is not Status.MORE_MEMORY


def test_a_slower_call_that_also_holds_more_stays_regressed_and_says_both() -> None:
    entry = with_peaks(baseline(1.0, 1.0, 1.0), 16 * MiB, 16 * MiB, 16 * MiB)
    m = dataclasses.replace(measurement(current(1.5, 1.5, 1.5)), peak_bytes=80 * MiB)
    v = Gate(family=2).verdict(m, entry, SETTINGS)
    assert v.status is Status.REGRESSED
    assert "and peak memory 80 MiB" in v.reason


def test_an_accepted_memory_growth_is_saved_without_restarting_the_times() -> None:
    v = judged_memory(80 * MiB, 16 * MiB)
    saving = Gate(accepting=True)
    assert saving.unsaved(Result(measurement(current(1.0)), v)) is not None  # not accepted
    accepted = dataclasses.replace(v, accepted=True)
    assert not saving.starts_epoch(accepted)
    assert not saving.fails(accepted)


def test_memory_off_never_fails_even_against_a_reference_of_nothing() -> None:
    """Review: inf * 0 is nan, and max(slack, nan) was the slack: off failed at 1 MiB."""
    assert judged_memory(8 * MiB, 0).status is Status.MORE_MEMORY  # gated: 8 MiB over nothing
    assert judged_memory(8 * MiB, 0, memory_threshold=float("inf")).status is not (
        Status.MORE_MEMORY
    )


def test_a_flagged_regression_that_also_holds_more_fails_on_memory_at_once() -> None:
    """A flagged first session is not final (its confirmation may not run, and unconfirmed
    fails nothing); the memory is exact: it fails now, without confirmation."""
    entry = with_peaks(baseline(1.0, 1.0, 1.0, 1.0, 1.0), *(16 * MiB,) * 5)
    m = dataclasses.replace(measurement(current(1.08)), peak_bytes=80 * MiB)
    gate = Gate(family=2)
    v = gate.verdict(m, entry, SETTINGS)
    assert v.status is Status.MORE_MEMORY and gate.fails(v)
    assert not gate.needs_confirmation(Result(m, v))
    assert gate.unconfirmed(Result(m, v), "crashed").status is Status.MORE_MEMORY


def test_accepted_memory_restarts_the_times_only_where_the_time_changed_too() -> None:
    saving = Gate(accepting=True)
    same_time = Verdict(Status.MORE_MEMORY, Judgement(Status.OK), accepted=True)
    faster = Verdict(Status.MORE_MEMORY, Judgement(Status.IMPROVED), accepted=True)
    assert not saving.starts_epoch(same_time)
    assert saving.starts_epoch(faster)


# --- a save never spoils a history silently (issue 45) ---------------------------------------

TIGHT = (1.0, 1.001, 0.999, 1.0005, 0.9995)


def session_at(median: float) -> Measurement:
    """A first session of 50 samples around ``median`` (0.05% apart, as the fake timer's)."""
    samples = tuple(median * (1 + 0.0005 * ((i % 5) - 2) / 2) for i in range(50))
    return dataclasses.replace(measurement(current(median)), samples_ms=samples)


@pytest.mark.parametrize(
    "history, median, spoils",
    [
        # a gate within the threshold widened beyond it by a session unlike its history's
        (TIGHT, 1.03, "widen its gate from 4.2% to 6.3%, beyond its threshold 5%"),
        # a short history, gated at 50% on the prior, made not gated
        ((1.0,), 1.3, "leave its history not gated, where it gates 50.0%"),
        # a short history grows; so does a long one by a session like its own
        ((1.0,), 1.0004, ""),
        ((1.0, 1.0004), 1.0002, ""),
        (TIGHT, 1.0012, ""),
        (TIGHT, 1.0003, ""),  # within the range its sessions hold: nothing new
        # a slow excursion the rule's model absorbs leaves the gate within the threshold
        ((1.0, 1.002), 1.3, ""),
    ],
)
def test_a_save_refuses_a_session_that_would_widen_the_gate_beyond_the_threshold(
    history: tuple[float, ...], median: float, spoils: str
) -> None:
    """Both histories judged as the next run would (here without confirmations): a session
    that a gated history would no longer gate its threshold with, or that leaves a gated
    history not gated, fails the save and is left out unless accepted; the line says what it
    would do, and how to accept it."""
    saving = Gate(confirm=0, accepting=True, family=2)
    entry = baseline(*history)
    result = saving.judge(session_at(median), entry, SETTINGS)
    assert result.status is Status.OK and result.verdict.spoils == spoils
    assert saving.fails(result.verdict) is bool(spoils)
    if spoils:
        assert saving.refusal(result.verdict) == (
            f"not saved: appending this session would {spoils}; the baseline keeps its history; "
            f"save it again on a quiet machine, or {HOW}"
        )
        accepted = saving.judge(session_at(median), entry, ACCEPT)
        assert accepted.verdict.accepted and not saving.fails(accepted.verdict)
        assert saving.unsaved(accepted) is None and not saving.saved(accepted).new_epoch
        assert saving.accepted_line(accepted, False) == (
            f"t: ok, accepted: appended to its history, which it may {spoils}"
        )
    # a run that saves nothing asks nothing of it
    assert Gate(confirm=0, family=2).judge(session_at(median), entry, SETTINGS).verdict.spoils == ""


def test_a_recorded_unstable_session_is_appended_only_where_its_test_was_accepted() -> None:
    saving = Gate(accepting=True)
    unstable = Result(changed(Status.OK).measurement, Verdict(Status.UNSTABLE, reason="too few"))
    assert saving.unrecorded(unstable, passed=True) == (
        "t: a recorded session not saved: unstable: too few"
    )
    assert saving.unrecorded(unstable, passed=True, accepted=True) is None
