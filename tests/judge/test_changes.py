"""Change points over a test's history (judge/changes.py): creep and steps toward slower.

The calibration checks are seeded, smaller runs of bench/simulate_changes.py (its tables are
in docs/verdict.md, "Change points and creep"), and the recorded GPU sessions of unchanged
code (bench/results/sessions.json) judged as the histories they make.
"""

from __future__ import annotations

import itertools
import json
import math
from types import ModuleType

import numpy as np
import pytest
from support import BENCH, NO_CONFIRM, ROOT, bench_module

from pytest_gpubench import cli
from pytest_gpubench.core.baseline import HISTORY_SESSIONS
from pytest_gpubench.judge import changes
from pytest_gpubench.judge.changes import Changes, Flag, detect
from pytest_gpubench.report import changes as report_changes


@pytest.fixture(scope="module")
def simulation() -> ModuleType:
    return bench_module("simulate_changes")


def quiet(n: int, seed: int = 1) -> np.ndarray:
    """Log medians of a quiet kernel: a floor within +-0.2%."""
    return np.log1p(np.random.default_rng(seed).uniform(-0.002, 0.002, n))


def creeping(flat: int, rising: int, per_session: float, seed: int = 1) -> np.ndarray:
    x = quiet(flat + rising, seed)
    x[flat:] += np.arange(1, rising + 1) * math.log1p(per_session)
    return x


def test_the_null_of_each_statistic_is_every_order_sorted() -> None:
    """Each statistic's null is searched (``np.searchsorted``) for a history's share: it
    holds the statistic of every random order, ascending."""
    steps, rises, _ = changes._null(8)
    for levels in (*steps, *rises):
        assert len(levels) == changes.PERMUTATIONS
        assert np.all(np.diff(levels) >= 0)


# --- what is claimed, and when --------------------------------------------------------------


@pytest.mark.parametrize("n", range(changes.MIN_SESSIONS))
def test_short_histories_claim_nothing(n: int) -> None:
    x = np.arange(n) * math.log1p(0.05)  # +5% a session: were there enough, a creep
    found = detect(x)
    assert found == Changes(n, reason=found.reason)
    assert found.flag is None and found.trend is None and not found.steps
    assert f"{changes.MIN_SESSIONS} needed" in found.reason


def test_a_creep_of_one_percent_a_session_is_flagged_with_its_slope_and_onset() -> None:
    x = creeping(flat=12, rising=8, per_session=0.01)
    found = detect(x)
    assert found.flag is Flag.CREEP
    assert found.trend is not None
    assert found.trend.onset == 12
    assert found.trend.slope == pytest.approx(0.01, abs=0.001)
    assert found.trend.change == pytest.approx(1.01**8 - 1, abs=0.01)
    assert found.trend.p <= changes.ALPHA
    assert found.reason.startswith("creep: +1.0%/session over the last 8 of 20 sessions, +8.")


def test_a_clean_creep_of_one_percent_is_flagged_before_five_percent() -> None:
    """Sessions in order from the fourth rising one (+4.1%, half the default threshold
    reached): three in order at the end are not enough (p 0.0012)."""
    flagged = [detect(creeping(20 - n, n, 0.01)).flag for n in range(1, 7)]
    assert flagged == [None, None, None, Flag.CREEP, Flag.CREEP, Flag.CREEP]
    # a larger threshold asks for more
    x = creeping(16, 4, 0.01)
    assert detect(x, min_change=changes.min_change_for(0.10)).flag is None
    assert detect(x, min_change=changes.min_change_for(0.07)).flag is Flag.CREEP


def test_a_single_ten_percent_step_is_flagged_at_its_index() -> None:
    x = quiet(20)
    x[10:] += math.log1p(0.10)
    found = detect(x)
    assert found.flag is Flag.STEP
    [step] = found.steps
    assert step.index == 10
    assert step.size == pytest.approx(0.10, abs=0.005)
    assert step.p <= changes.ALPHA
    assert (
        found.reason == f"step: +{step.size:.1%} over the last 10 of 20 sessions (p {step.p:.2g})"
    )


def test_two_steps_are_both_found() -> None:
    x = quiet(30)
    x[10:] += math.log1p(0.05)
    x[20:] += math.log1p(0.05)
    found = detect(x)
    assert [s.index for s in found.steps] == [10, 20]
    assert found.flag is not None  # a staircase: as much a creep as a step


def test_a_small_significant_step_is_reported_without_a_flag() -> None:
    x = quiet(20)
    x[10:] += math.log1p(0.01)
    found = detect(x)
    assert [s.index for s in found.steps] == [10]
    assert found.flag is None and found.reason == ""


def test_faster_is_not_a_change() -> None:
    x = quiet(20)
    x[10:] -= math.log1p(0.10)
    assert detect(x).flag is None and not detect(x).steps
    assert detect(-creeping(10, 10, 0.01)).flag is None


def test_a_slow_episode_that_ended_is_not_a_step() -> None:
    x = quiet(20)
    x[8:13] += math.log1p(0.10)
    assert detect(x).flag is None


# --- robust to one-sided excursions ---------------------------------------------------------


def test_an_isolated_slow_session_is_not_a_step() -> None:
    for at in range(20):
        x = quiet(20)
        x[at] += math.log1p(0.20)
        found = detect(x)
        assert found.flag is None and not found.steps, at


def test_three_excursions_in_twenty_sessions_are_never_a_creep_wherever_they_fall() -> None:
    """The 33.6 us kernel of issue 16: 17 sessions within +-0.2%, three at +2.0/+2.6/+3.8%,
    in every order and every place, the last three included."""
    floor = quiet(17)
    excursions = np.log1p([0.020, 0.026, 0.038])
    rows = []
    for places in itertools.combinations(range(20), 3):
        for sizes in itertools.permutations(excursions):
            x = np.empty(20)
            x[list(places)] = sizes
            x[[i for i in range(20) if i not in places]] = floor
            rows.append(x)
    p_step, p_trend = changes.p_values(np.array(rows))
    assert len(rows) == 6840
    assert min(p_step.min(), p_trend.min()) > changes.ALPHA


def test_false_flags_of_stationary_histories_with_excursions(simulation: ModuleType) -> None:
    """At most 0.1% of 20-session histories of unchanged code are flagged, with slow
    excursions of 15-20% of the sessions, sessions independent (the full table: iid rows of
    docs/verdict.md, 0.01-0.06%). 20 000 histories per kind: a bound of 0.1% allows 20."""
    rng = np.random.default_rng(20261124)
    for kind in simulation.KINDS:
        found = simulation.flags(simulation.sessions(rng, kind, "iid", 20_000, 20))
        assert sum(map(bool, found)) <= 20, kind.name


def test_the_tables_of_verdict_md_are_the_committed_simulation(simulation: ModuleType) -> None:
    """docs/verdict.md, "Change points and creep", is what bench/simulate_changes.py prints
    from bench/results/changes-simulation.json (the file it wrote)."""
    result = json.loads((ROOT / "bench/results/changes-simulation.json").read_text())
    assert (result["alpha"], result["min_change"]) == (changes.ALPHA, changes.MIN_CHANGE)
    assert result["permutations"] == changes.PERMUTATIONS
    assert simulation.markdown(result) in (ROOT / "docs/verdict.md").read_text()


@pytest.mark.slow
def test_false_flags_on_the_recorded_gpu_sessions(simulation: ModuleType) -> None:
    """Every history the recorded sessions of unchanged code make (bench/results/sessions.json:
    134 test series, 1794 histories): at most 0.1% flagged (none is: docs/verdict.md)."""
    path = simulation.SESSIONS
    if not path.exists():
        pytest.skip(f"no {path}")
    result = simulation.recorded(path)
    assert result["histories"] >= 1000
    assert result["flagged"] <= 0.001 * result["histories"]


# --- how soon -------------------------------------------------------------------------------


def test_half_a_percent_a_session_on_a_quiet_kernel_is_flagged_before_five_percent(
    simulation: ModuleType,
) -> None:
    """docs/verdict.md: 87% of lifetimes before +5% (median 7 sessions, +3.6%)."""
    rng = np.random.default_rng(7)
    kind = simulation.KINDS[0]
    n = 200
    x = simulation.sessions(rng, kind, "iid", n, simulation.HISTORY + simulation.AFTER)
    j = np.arange(x.shape[1]) - simulation.HISTORY + 1
    x = x + np.maximum(j, 0) * math.log1p(0.005)
    first = simulation.first_flags(x)
    change = (1.005) ** first - 1
    assert np.mean((first > 0) & (change < 0.05)) >= 0.8
    assert np.all(first > 0)


# --- the record -----------------------------------------------------------------------------


def test_the_record_as_json() -> None:
    found = detect(creeping(12, 8, 0.01))
    data = found.to_json()
    assert data["flag"] == "creep" and data["sessions"] == 20
    assert data["reason"] == found.reason
    assert data["trend"] == {
        "onset": 12,
        "slope": found.trend.slope if found.trend else None,
        "change": found.trend.change if found.trend else None,
        "p": found.trend.p if found.trend else None,
    }
    assert data["steps"] == [s.to_json() for s in found.steps]
    assert data["min_change"] == changes.MIN_CHANGE and data["alpha"] == changes.ALPHA
    assert detect([0.0, 0.1]).to_json()["flag"] is None


def test_tied_sessions_are_no_evidence() -> None:
    assert detect(np.zeros(20)).flag is None
    with pytest.raises(ValueError, match="finite"):
        detect([0.0] * 5 + [math.nan] * 5)


def test_the_threshold_sets_the_smallest_change() -> None:
    assert changes.min_change_for(0.05) == changes.MIN_CHANGE
    assert changes.min_change_for(0.02) == pytest.approx(0.01)


# --- what users see: the save run, gpubench show, a gated run and its JSON report ----------


def test_a_creep_of_one_percent_a_session_is_flagged_by_the_save_run_show_and_a_run(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Five saves at one speed, then one save per session 1% slower than the last: from the
    second, a plain save refuses the session (it would widen the gate beyond the threshold:
    issue 45), so the user accepts each; the fourth (+4.1%, below the 5% threshold, every
    verdict ok) is the first whose saved history is flagged, with a warning that fails
    nothing; gpubench show lists it; a run without save notes it beside its verdict and
    carries it in the JSON report."""
    fake.makepyfile(test_bench=BENCH)
    outputs = []
    for i, scale in enumerate([1.0] * 5 + [1.01, 1.02, 1.03, 1.04]):
        monkeypatch.setenv("FAKE_SEED", str(i + 1))
        monkeypatch.setenv("FAKE_SCALE", str(scale))
        if scale == 1.02:
            refused = fake.runpytest("--gpubench-save", NO_CONFIRM)
            refused.assert_outcomes(failed=2)
            refused.stdout.fnmatch_lines(
                ["*not saved: appending this session would widen its gate*"]
            )
        accept = ("--gpubench-accept",) if scale >= 1.02 else ()
        result = fake.runpytest("--gpubench-save", NO_CONFIRM, *accept)
        result.assert_outcomes(passed=2)
        outputs.append(result.stdout.str())
    assert all(report_changes.SAVED_HEADING not in out for out in outputs[:-1])
    result.stdout.fnmatch_lines(
        [
            report_changes.SAVED_HEADING,
            "  test_join: creep: +1.0%/session over the last 4 of 9 sessions, +4.*% in all (p *)",
            "  test_sum: creep: +1.0%/session over the last 4 of 9 sessions, +4.*% in all (p *)",
        ]
    )
    result.stdout.no_fnmatch_line("*regressed*")
    result.stdout.no_fnmatch_line("*a note, not a failure")  # said once, of the saved history

    monkeypatch.chdir(fake.path)
    assert cli.main(["show"]) == 0
    shown = capsys.readouterr().out.splitlines()
    at = shown.index(report_changes.SHOW_HEADING)
    assert [line.split(": ")[:2] for line in shown[at + 1 : at + 3]] == [
        ["  test_bench.py::test_join", "creep"],
        ["  test_bench.py::test_sum", "creep"],
    ]

    monkeypatch.setenv("FAKE_SEED", "10")
    monkeypatch.setenv("FAKE_SCALE", "1.05")
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["test_sum: creep: +1.0%/session over the last 5 of 10 sessions, *; a note, not a failure"]
    )
    report = json.loads((fake.path / "out.json").read_text())
    by_test = {r["test"]: r for r in report["results"]}
    assert by_test["test_sum"]["changes"]["flag"] == "creep"
    assert by_test["test_sum"]["changes"]["sessions"] == 10
    assert by_test["test_sum"]["changes"]["trend"]["onset"] == 5


def test_the_json_report_says_null_without_a_history(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json").assert_outcomes(passed=2)
    report = json.loads((fake.path / "out.json").read_text())
    assert [r["changes"] for r in report["results"]] == [None, None]


@pytest.mark.parametrize("shape", [(5,), (300, 10), (40, 7), (6, 3, 20), (4, 1)])
def test_ranks_are_scipys_average_ranks(shape: tuple[int, ...]) -> None:
    from scipy import stats

    rng = np.random.default_rng(1)
    for x in (rng.integers(0, 4, size=shape).astype(float), rng.normal(size=shape)):  # ties
        assert np.array_equal(changes.rank(x), stats.rankdata(x, axis=-1))


@pytest.mark.slow
def test_a_history_longer_than_a_save_keeps_is_judged_on_its_latest_sessions() -> None:
    """Issue 46: the null grows with the square of the length (400 sessions took 53 s)."""
    flat, rising = [0.0] * 5000, [0.02 * i for i in range(changes.MAX_SESSIONS)]
    found = changes.detect(flat + rising)
    assert found.sessions == changes.MAX_SESSIONS == 2 * HISTORY_SESSIONS
    assert found == changes.detect(rising)
    p_step, p_rise = changes.p_values([flat + rising])
    assert (p_step, p_rise) == changes.p_values([rising])
