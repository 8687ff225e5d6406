"""The verdict on recorded GPU sessions, resampled (bench/resample.py): the bounds of issue 16.

Seeded, so the counts are exact; each check's runs are chosen so that its bound is more
than a count of one (a bound of 0.1% over 2000 runs allows 2). The full tables, more runs,
are in docs/verdict.md ("On recorded sessions": python bench/resample.py).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from support import bench_module

# These resample the recorded sessions: the slow selection.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def resample():
    return bench_module("resample")


@pytest.fixture(scope="module")
def machines(resample):
    return resample.load()


def test_the_recorded_sessions_are_there(machines) -> None:
    suites = sorted((m.suite, m.x.shape[0]) for m in machines)
    assert suites == [("example", 54)] * 4 + [("user", 13)] * 2
    assert min(m.x.shape[1] for m in machines) >= 16
    assert sum("H100" in m.gpu_name for m in machines) == 2  # and four H200s


@pytest.mark.parametrize(
    "threshold, outliers, tests, runs, bound",
    [
        (0.05, False, 54, 2000, 0.001),
        (0.05, True, 54, 800, 0.005),
        (0.05, False, 500, 200, 0.01),
        (0.02, False, 54, 2000, 0.001),
        (0.02, True, 54, 800, 0.005),
    ],
)
@pytest.mark.slow
def test_unchanged_runs_at_twenty_sessions_rarely_fail(
    resample, machines, threshold, outliers, tests, runs, bound
) -> None:
    """Histories of up to 20 distinct sessions (9-20: the example suite's GPUs hold 16-27, a
    run takes 7). Issue 45: repeating sessions to 20, which no real history does and the rule
    counts as evidence, failed 4 and 3 of these 2000 runs without outliers."""
    cfg = resample.Config(k=20, tests=tests, outliers=outliers, threshold=threshold)
    outcome = resample.simulate(machines, cfg, runs)
    assert outcome.false_rate <= bound, outcome.failed_runs


@pytest.mark.parametrize("k", [1, 5, 20])
def test_confirmations_are_never_sessions_of_the_history(resample, machines, k) -> None:
    """Issue 45: when fewer sessions than the cap were left, the resampling confirmed with
    sessions of the history itself, and a test whose sessions fall in two groups never failed;
    and it repeated sessions in a history, which no real history holds."""
    rng = resample.np.random.default_rng(0)
    for m in machines:
        for c in range(m.x.shape[1]):
            history, spare = resample._draw(rng, m.x.shape[1], c, k)
            assert len(spare) >= min(resample.RESERVE, m.x.shape[1] - 2)
            assert len(set(history)) == len(history) == min(k, m.x.shape[1] - 1 - len(spare))
            assert not set(history) & set(spare) and c not in set(history) | set(spare)


def test_the_held_out_sessions_are_there(resample) -> None:
    held = resample.load(held_out=True)
    assert sorted((m.suite, m.x.shape) for m in held) == [("example", (96, 10)), ("user", (13, 11))]


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [0.05, 0.02])
def test_held_out_sessions_in_two_groups_do_not_fail_five_session_histories(
    resample, threshold
) -> None:
    """Held-out H100 sessions replayed whole (docs/verdict.md, "Held out"), a run's fresh
    sessions distinct while the spare ones last: no more than 0.1% of unchanged runs fail
    (the bound of a 54-test run). That draw is the lower bound of a fresh process's: distinct
    spares cannot all fall in the group a history never showed where they hold both."""
    for m in resample.load(held_out=True):
        outcome = resample.held_out(m, resample.Config(k=5, threshold=threshold))
        assert outcome.false_rate <= 0.001, (m.suite, outcome.failed_runs)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="issue 45: two groups, 0.22-0.40% with repeated sessions")
@pytest.mark.parametrize("threshold", [0.05, 0.02])
def test_held_out_runs_of_repeated_sessions_in_two_groups_pass_too(resample, threshold) -> None:
    """The same replays with a run's fresh sessions drawn with replacement from the start:
    the other bound of a fresh process's draw (docs/verdict.md, "Held out")."""
    for m in resample.load(held_out=True):
        config = resample.Config(k=5, threshold=threshold, distinct=False)
        assert resample.held_out(m, config).false_rate <= 0.001, m.suite


@pytest.mark.parametrize(
    "threshold, slowdown, low_us, high_us, power",
    [(0.05, 0.05, 20, float("inf"), 0.98), (0.05, 0.05, 3, 20, 0.70)],
)
def test_slowdowns_of_the_threshold_are_caught(
    resample, machines, threshold, slowdown, low_us, high_us, power
) -> None:
    """Every test of the class, the noisy ones too (issue 16 asks 99% from 20 us: the
    recorded H100s' tests whose sessions fall in two groups say they cannot gate 5%, and
    miss; docs/verdict.md, Limits). At 3-20 us 70.2% with histories of distinct sessions and
    a run's sessions taken as correlated (84% before: rule.RUN_ICC's cost, docs/verdict.md)."""
    outcome = resample.simulate(
        machines, resample.Config(k=20, slowdown=slowdown, threshold=threshold), 200
    )
    sel = (outcome.duration_us >= low_us) & (outcome.duration_us < high_us)
    assert sel.sum() > 1000
    assert outcome.flagged[sel].mean() >= power


@pytest.mark.parametrize(
    "threshold, low_us, high_us",
    [(0.05, 3, 20), (0.05, 20, float("inf")), (0.02, 20, float("inf"))],
)
def test_a_test_that_gates_the_threshold_catches_it(
    resample, machines, threshold, low_us, high_us
) -> None:
    """The gate's promise on real sessions: a test whose gate is the threshold or less catches
    a slowdown of the threshold 99% of the time. Not yet under 3 us (98.6% at 5%, 250 runs:
    docs/verdict.md, Limits); at 2% under 20 us too few tests gate it to tell."""
    outcome = resample.simulate(
        machines, resample.Config(k=20, slowdown=threshold, threshold=threshold), 200
    )
    sel = (outcome.duration_us >= low_us) & (outcome.duration_us < high_us)
    sel &= ~outcome.not_gated & (outcome.gateable <= threshold)
    assert sel.sum() > 900
    assert outcome.flagged[sel].mean() >= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 2])
def test_a_history_of_one_or_two_sessions_gates_half_again_without_false_failures(
    resample, machines, k
) -> None:
    """A history too short to tell its spread gates only 50% on its timer's prior (issue 45:
    one saved session passed +50%). On the recorded sessions no unchanged run fails (54
    tests, 1000 runs; with the resampling's gross outliers a history of one session fails
    many: a session 1.3-3 times faster, which one session cannot reveal, docs/verdict.md),
    and a doubling is caught in nearly every test, +50% in most."""
    cfg = resample.Config(k=k, tests=54, threshold=0.05)
    assert resample.simulate(machines, cfg, 1000).failed_runs == 0
    doubled = resample.simulate(machines, resample.Config(k=k, slowdown=1.0), 200)
    assert doubled.flagged.mean() >= 0.94
    half = resample.simulate(machines, resample.Config(k=k, slowdown=0.5), 200)
    assert half.flagged.mean() >= 0.85


@pytest.fixture(scope="module")
def cpu(resample):
    """The host clock's sessions its prior was fitted to (bench/results/cpu-2026-12-05)."""
    fit_prior = bench_module("fit_prior")
    return resample.machines_of(fit_prior.sessions_of(fit_prior.WALL))


@pytest.mark.slow
@pytest.mark.parametrize("k", [5, 13])
def test_the_wall_prior_on_its_cpu_sessions_catches_eight_percent(resample, cpu, k) -> None:
    """The `wall` prior (rule.WALL_POINTS) on the recorded CPU sessions, in sample: 32-test
    runs with 5-session and 13-session histories (the most beside a run's 7) catch +8% in
    most runs of a test (the guessed prior it replaced: 12% and 29%), and 8 and 6 of 1000
    unchanged runs fail at 5%: Python loops, whose sessions sit on levels 2% apart
    (docs/verdict.md)."""
    [machine] = cpu
    assert machine.x.shape == (32, 20)
    config = resample.Config(k=k, tests=32)
    assert resample.simulate(cpu, config, 1000).false_rate <= 0.01
    caught = resample.simulate(cpu, replace(config, slowdown=0.08), 300).flagged.mean()
    assert caught >= 0.7
