"""Flagged tests confirmed together (issue 45, item 2): every test flagged in a run is timed
again in the same fresh processes at the run's end, so a look costs its processes once,
whatever the number of tests it confirms; each test's outcome is still its own."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import FAKE_NAME, KIND, record_history, timer_calls

TWELVE = """
import pytest


def work(n):
    return sum(range(n))


@pytest.mark.parametrize("n", range(12))
def test_kernel(gpubench, n):
    gpubench(work, 100 + n)
"""


@pytest.fixture
def twelve(fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """Twelve tests with a history of three sessions; later runs another seed."""
    fake.makepyfile(test_twelve=TWELVE)
    for seed in ("1", "3", "4"):
        monkeypatch.setenv("FAKE_SEED", seed)
        record_history(fake, sessions=1)[0].assert_outcomes(passed=12)
    monkeypatch.setenv("FAKE_SEED", "2")
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(fake.path / "pids.log"))
    return fake


def children(pytester: pytest.Pytester) -> int:
    log = pytester.path / "pids.log"
    return len(log.read_text().split()) if log.exists() else 0


@pytest.mark.slow
def test_twelve_flagged_tests_are_confirmed_in_the_same_two_processes(
    twelve: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve tests made 20% slower: one look of two fresh processes confirms all twelve
    (one at a time, it took 24); each fails on its own, in JUnit too."""
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = twelve.runpytest("--gpubench", "--junitxml=junit.xml")
    result.assert_outcomes(failed=12)
    result.stdout.fnmatch_lines(
        ["gpubench: confirming 12 flagged tests in 2 fresh processes (2 at once)"]
    )
    assert result.stdout.str().count("gpubench: confirming") == 1
    assert children(twelve) == 2
    result.stdout.fnmatch_lines(["*test_kernel?0? regressed: 1.00 ms -> 1.20 ms (+20.0%*"])
    result.stdout.fnmatch_lines(["test_kernel[[]11[]]: confirmed in 2 fresh processes (*"])
    cases = ET.parse(twelve.path / "junit.xml").getroot().iter("testcase")
    failures = [c.find("failure") for c in cases]
    assert len(failures) == 12 and all(f is not None for f in failures)
    assert all("regressed" in (f.get("message") or "") for f in failures if f is not None)
    # each child timed the twelve: the parent's twelve and two children's
    assert len(timer_calls(twelve)) >= 12 * 3


@pytest.mark.slow
def test_only_the_flagged_tests_are_timed_again_and_the_others_pass(
    twelve: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    slowed = {f"test_kernel[{n}]": 1.2 for n in (0, 3, 5, 7, 9, 11)}
    monkeypatch.setenv("FAKE_SCALES", json.dumps(slowed))
    result = twelve.runpytest("--gpubench", "-v", "--gpubench-json=out.json")
    result.assert_outcomes(failed=6, passed=6)
    result.stdout.fnmatch_lines(["gpubench: confirming 6 flagged tests in 2 fresh processes *"])
    assert children(twelve) == 2
    for n in range(12):
        outcome = "FAILED" if f"test_kernel[{n}]" in slowed else "PASSED"
        result.stdout.fnmatch_lines([f"test_twelve.py::test_kernel[[]{n}[]] {outcome}*"])
    results = json.loads((twelve.path / "out.json").read_text())["results"]
    confirmed = {r["test"]: len(r["confirmations"]) for r in results}
    assert confirmed == {
        f"test_kernel[{n}]": 2 if f"test_kernel[{n}]" in slowed else 0 for n in range(12)
    }


@pytest.mark.slow
def test_with_x_a_confirmed_failure_still_stops_the_run_at_once(
    twelve: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-x (and --maxfail) keep their meaning: each flagged test is confirmed right after
    its body, and the first confirmed regression stops the run there."""
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = twelve.runpytest("--gpubench", "-x")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["gpubench: confirming test_kernel[[]0[]] in 2 fresh processes *"])
    assert children(twelve) == 2


def test_a_run_that_stops_leaves_its_waiting_tests_unconfirmed_and_reported(
    twelve: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that stops the session (pytest.exit) after flagged tests ran: they are reported,
    unconfirmed (failing nothing), and no fresh process starts."""
    twelve.makepyfile(
        test_zz_exit="""
import pytest


def test_stop():
    pytest.exit("stopped by the test")
"""
    )
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = twelve.runpytest("--gpubench", "--gpubench-json=out.json", "-p", "no:randomly")
    result.assert_outcomes(passed=12)
    assert children(twelve) == 0
    results = json.loads((twelve.path / "out.json").read_text())["results"]
    assert {r["status"] for r in results} == {"unconfirmed"}
    assert "the run stopped before its confirmation" in results[0]["reason"]


@pytest.mark.slow
def test_under_xdist_each_worker_confirms_a_flagged_test_as_it_runs(
    twelve: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An xdist worker reports a test only while it runs: its flagged tests are confirmed
    one by one, each in its own two fresh processes."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_kernel[0]": 1.2, "test_kernel[7]": 1.2}))
    result = twelve.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench")
    result.assert_outcomes(failed=2, passed=10)
    assert children(twelve) == 4
    result.stdout.fnmatch_lines(["*test_kernel?0? regressed: 1.00 ms -> 1.20 ms (+20.0%*"])


def test_the_measured_line_is_the_parent_timers(twelve: pytest.Pytester) -> None:
    """Nothing flagged: no fresh process, the tests' reports as ever."""
    result = twelve.runpytest("--gpubench")
    result.assert_outcomes(passed=12)
    assert children(twelve) == 0
    assert timer_calls(twelve)[-12:] == [f"{FAKE_NAME} {KIND} False"] * 12
    assert not Path(twelve.path / "pids.log").exists()
