"""Confirmations beside an xdist worker's next tests (issue 20): a flagged test is confirmed in
fresh processes while its worker goes on, and is reported with its final verdict once they
end; what pytest's options and plugins mean stays the same.

One worker (``-n 1``) makes the order deterministic: test_sum, flagged, comes first in the
file, so a worker that waited for its confirmation reports it before test_join, and a worker
that confirms aside reports test_join first.
"""

from __future__ import annotations

import json
import re
import signal

import pytest
from support import BENCH, output, read_baseline
from test_lifecycle import Parent, assert_children_gone_and_clean

pytestmark = [pytest.mark.slow]

SUM, JOIN = "test_bench.py::test_sum", "test_bench.py::test_join"
XDIST = ("-p", "xdist", "-n", "1", "-v", "--gpubench-json=out.json")


@pytest.fixture
def flagged(saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """BENCH with three sessions saved; test_sum now 30% slower (a true regression), and
    fresh processes slow to start: a worker that waited for them would report it first."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.3}))
    monkeypatch.setenv("FAKE_CHILD_START_S", "2")
    return saved


def order(result: pytest.RunResult) -> list[str]:
    """The tests in the order the controller reported their outcomes (-v)."""
    return re.findall(r"\] (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)", output(result))


def results(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    document = json.loads((pytester.path / "out.json").read_text())
    return {r["key"]: r for r in document["results"]}


def test_a_worker_goes_on_while_fresh_processes_confirm_and_reports_the_verdict_after(
    flagged: pytest.Pytester,
) -> None:
    result = flagged.runpytest_subprocess("--gpubench", *XDIST)
    result.assert_outcomes(passed=1, failed=1)
    assert order(result) == [JOIN, SUM], output(result)
    result.stdout.fnmatch_lines(
        [
            "*test_sum regressed: 1.00 ms -> 1.30 ms (+30.0%*",
            "test_sum: confirmed in 2 fresh processes *",
            f"FAILED {SUM} - Failed: test_sum regressed: *",
        ]
    )
    found = results(flagged)
    assert found[SUM]["status"] == "regressed"
    assert len(found[SUM]["confirmations"]) == 2  # type: ignore[arg-type]
    assert found[JOIN]["status"] == "ok"
    assert "Traceback" not in output(result) and "INTERNALERROR" not in output(result)


def test_an_unconfirmed_flag_passes_once_reported(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_sum slower in this process alone (FAKE_PARENT_SCALES): flagged at first look,
    its fresh processes measure it as before: it passes, after test_join."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKE_PARENT_SCALES", json.dumps({"test_sum": 1.3}))
    monkeypatch.setenv("FAKE_CHILD_START_S", "2")
    result = saved.runpytest_subprocess("--gpubench", *XDIST)
    result.assert_outcomes(passed=2)
    assert order(result) == [JOIN, SUM], output(result)
    found = results(saved)
    assert found[SUM]["status"] == "ok"
    assert len(found[SUM]["confirmations"]) == 2  # type: ignore[arg-type]


def test_a_rerun_plugin_keeps_the_protocol_and_the_confirmation_waits(
    flagged: pytest.Pytester,
) -> None:
    """pytest-rerunfailures owns the protocol of a test it may repeat: such a test is
    confirmed as without xdist, before the worker goes on, and rerun."""
    pytest.importorskip("pytest_rerunfailures")
    result = flagged.runpytest_subprocess("--gpubench", *XDIST, "--reruns=1")
    assert result.parseoutcomes() == {"passed": 1, "failed": 1, "rerun": 1}
    assert order(result) == [SUM, JOIN], output(result)


def test_an_xfail_test_is_confirmed_in_place(flagged: pytest.Pytester) -> None:
    flagged.makepyfile(
        test_bench=BENCH.replace(
            "def test_sum(gpubench):", "@pytest.mark.xfail(strict=True)\ndef test_sum(gpubench):"
        )
    )
    result = flagged.runpytest_subprocess("--gpubench", *XDIST)
    result.assert_outcomes(passed=1, xfailed=1)
    assert order(result) == [SUM, JOIN], output(result)


@pytest.mark.parametrize("option", ["-x", "--maxfail=1"])
def test_a_confirmed_regression_still_stops_the_run(flagged: pytest.Pytester, option: str) -> None:
    """Under xdist, -x stops after the failure is reported: here, after test_join ran."""
    result = flagged.runpytest_subprocess("--gpubench", *XDIST, option)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])


def test_two_flagged_tests_are_confirmed_at_once_and_reported_in_the_order_flagged(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two confirmations run aside at once (aside.MAX_ASIDE); the second flagged test's
    processes are started before the first's end, and its report follows the first's."""
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKE_SCALE", "1.3")
    spans = saved.path / "spans.txt"
    monkeypatch.setenv("FAKE_CHILD_SPANS", str(spans))
    monkeypatch.setenv("FAKE_CHILD_START_S", "3")
    result = saved.runpytest_subprocess("--gpubench", *XDIST)
    result.assert_outcomes(failed=2)
    lines = [line.split() for line in spans.read_text().splitlines()]
    starts = sorted(float(t) for _, event, t in lines if event == "start")
    ends = sorted(float(t) for _, event, t in lines if event == "end")
    assert len(starts) == len(ends) == 4
    assert starts[-1] < ends[0]  # every process started before any ended: at once
    assert order(result) == [SUM, JOIN], output(result)
    found = results(saved)
    assert all(len(found[k]["confirmations"]) == 2 for k in (SUM, JOIN))  # type: ignore[arg-type]


def test_without_xdist_the_confirmation_is_in_place_and_reported_alike(
    flagged: pytest.Pytester,
) -> None:
    result = flagged.runpytest_subprocess("--gpubench", "-v", "-p", "no:xdist")
    result.assert_outcomes(passed=1, failed=1)
    assert re.findall(r"(test_bench.py::\w+) (?:PASSED|FAILED)", output(result)) == [SUM, JOIN]
    result.stdout.fnmatch_lines([f"FAILED {SUM} - Failed: test_sum regressed: *"])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=str)
def test_a_killed_controller_takes_the_workers_confirming_processes_with_it(
    flagged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")
    before = read_baseline(flagged)
    parent = Parent(flagged, "--gpubench", "-p", "xdist", "-n", "1")
    parent.signal_once(sig, children=2)
    assert_children_gone_and_clean(parent)
    assert read_baseline(flagged) == before
