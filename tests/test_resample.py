"""The verdict on recorded GPU sessions, resampled (bench/resample.py): the bounds of issue 16.

Seeded, so the counts are exact; each check's runs are chosen so that its bound is more
than a count of one (a bound of 0.1% over 2000 runs allows 2). The full tables, more runs,
are in docs/verdict.md ("On recorded sessions": python bench/resample.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support import bench_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def resample():
    return bench_module("resample")


@pytest.fixture(scope="module")
def machines(resample):
    return resample.load()


def test_the_recorded_sessions_are_there(machines) -> None:
    suites = sorted((m.suite, m.x.shape[0]) for m in machines)
    assert suites == [("example", 54), ("example", 54), ("user", 13), ("user", 13)]
    assert min(m.x.shape[1] for m in machines) >= 16


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
def test_unchanged_runs_at_twenty_sessions_rarely_fail(
    resample, machines, threshold, outliers, tests, runs, bound
) -> None:
    cfg = resample.Config(k=20, tests=tests, outliers=outliers, threshold=threshold)
    outcome = resample.simulate(machines, cfg, runs)
    assert outcome.false_rate <= bound, outcome.failed_runs


@pytest.mark.parametrize(
    "threshold, slowdown, low_us, high_us, power",
    [(0.05, 0.05, 20, float("inf"), 0.99), (0.02, 0.02, 20, 100, 0.90)],
)
def test_slowdowns_of_the_threshold_are_caught(
    resample, machines, threshold, slowdown, low_us, high_us, power
) -> None:
    outcome = resample.simulate(
        machines, resample.Config(k=20, slowdown=slowdown, threshold=threshold), 200
    )
    sel = (outcome.duration_us >= low_us) & (outcome.duration_us < high_us)
    assert sel.sum() > 1000
    assert outcome.flagged[sel].mean() >= power
