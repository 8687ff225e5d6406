"""A save never spoils a history silently (issue 45): a session unlike its history's own that
would leave it unable to gate is refused, and fails its test, unless accepted; accepting names
what it accepted, and ``--gpubench-accept-only`` limits it to the tests an expression
matches. Through pytester, with the fake timer (conftest.py)."""

from __future__ import annotations

import json

import pytest
from support import BENCH, NO_CONFIRM, USAGE_ERROR, baseline_file, entry, medians, read_baseline

pytest_plugins = ["pytester"]

SUM, JOIN = "test_bench.py::test_sum", "test_bench.py::test_join"
HOW = (
    "accept it with --gpubench-save --gpubench-accept (or @pytest.mark.gpubench(accept=True) "
    "on the test)"
)
# A history of one session gates 50% on its timer's prior; 40% slower is under that, and
# unlike the history's own: appended, no history of the two would gate.
SPOILS = (
    "appending this session would leave its history not gated, where it gates 50.0%; the "
    "baseline keeps its history; save it again on a quiet machine, or " + HOW
)


@pytest.fixture
def once(fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """BENCH with one saved session per test; later runs use another seed."""
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench-save", NO_CONFIRM).assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SEED", "2")
    return fake


def test_a_short_history_grows_by_plain_saves(once: pytest.Pytester) -> None:
    """One and two sessions tell no spread between sessions: sessions like its own are
    appended by a plain save, with no line."""
    for sessions in (2, 3):
        result = once.runpytest("--gpubench-save", NO_CONFIRM)
        result.assert_outcomes(passed=2)
        result.stdout.no_fnmatch_line("*not saved*")
        result.stdout.no_fnmatch_line("*accepted*")
        assert len(medians(once, SUM)) == len(medians(once, JOIN)) == sessions
    once.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)


def test_a_session_that_would_spoil_its_history_fails_the_save_until_accepted(
    once: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded host's session, 40% slower than the history's one (a pass at the first look of
    a one-session history): appended, the history would gate nothing. The save says so in one
    line and fails; the file is left as it was. Accepted for one test (an -k expression), that
    test's session is appended and named, the other's history is unchanged; accepted for all,
    both."""
    path = baseline_file(once)
    before = path.read_bytes()
    monkeypatch.setenv("FAKE_SCALE", "1.4")
    refused = once.runpytest("--gpubench-save", NO_CONFIRM)
    refused.assert_outcomes(failed=2)
    refused.stdout.fnmatch_lines(
        [
            "test_sum ok: 1.00 ms -> 1.40 ms (+40.0%; *)",
            f"  not saved: {SPOILS}",
            f"baseline unchanged: {path}",
        ]
    )
    assert path.read_bytes() == before
    join = entry(once, JOIN)
    only = once.runpytest("--gpubench-save", "--gpubench-accept-only", "sum", NO_CONFIRM)
    only.assert_outcomes(passed=1, failed=1)
    only.stdout.fnmatch_lines(
        [
            f"  not saved: {SPOILS}",
            "test_sum: ok, accepted: appended to its history, which it may leave its history "
            "not gated, where it gates 50.0%",
            "baseline written: 1 test, 1 session (*)",
        ]
    )
    only.stdout.no_fnmatch_line("test_join: *accepted*")
    assert medians(once, SUM) == [pytest.approx(1.0, rel=0.01), pytest.approx(1.4, rel=0.01)]
    assert entry(once, JOIN) == join
    assert entry(once, SUM)["epoch"] == join["epoch"]  # appended: no new epoch
    every = once.runpytest("--gpubench-save", "--gpubench-accept", NO_CONFIRM)
    every.assert_outcomes(passed=2)
    every.stdout.fnmatch_lines(
        ["test_join: ok, accepted: appended to its history, which it may leave its *"]
    )
    assert len(medians(once, JOIN)) == 2
    # the file stays whole: read back, and judged from
    assert set(read_baseline(once)["benchmarks"]) == {SUM, JOIN}
    json.loads(path.read_text())
    once.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)


def test_a_session_like_its_history_is_saved_beside_one_that_is_refused(
    once: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the test whose session would spoil its history fails; the others are saved."""
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.4}))
    result = once.runpytest("--gpubench-save", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"  not saved: {SPOILS}", "baseline written: 1 test, 1 session *"])
    assert (len(medians(once, SUM)), len(medians(once, JOIN))) == (1, 2)


def test_accept_only_takes_a_k_expression_with_save(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    alone = fake.runpytest("--gpubench", "--gpubench-accept-only", "sum")
    assert alone.ret == USAGE_ERROR
    alone.stderr.fnmatch_lines(
        [
            "*--gpubench-accept-only 'sum' takes the sessions of the tests it matches into the "
            "baseline: use it with --gpubench-save"
        ]
    )
    broken = fake.runpytest("--gpubench-save", "--gpubench-accept-only", "sum and")
    assert broken.ret == USAGE_ERROR
    broken.stderr.fnmatch_lines(
        ["*invalid --gpubench-accept-only 'sum and': *; expected a -k style expression such as *"]
    )
    assert not (fake.path / ".gpubench").exists()
