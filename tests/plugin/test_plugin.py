"""Behaviour seen by users, through pytester: generated test files, a deterministic fake timer
(tests/support.py, fixtures in tests/conftest.py).
"""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from support import (
    BENCH,
    CUDA,
    FAKE_NAME,
    KIND,
    MARKDOWN_HEADER,
    NO_CONFIRM,
    ROOT,
    USAGE_ERROR,
    baseline_file,
    binary_of,
    device_key,
    entry,
    kernels,
    medians,
    output,
    read_baseline,
    record_history,
    timer_calls,
)

SUM, JOIN = "test_bench.py::test_sum", "test_bench.py::test_join"
TABLE_HEADER = (
    "test *timer *median *noise *spread *baseline *sessions *change *gate *verdict *GB/s *% peak"
)

# --- without --gpubench ---------------------------------------------------------------------


def test_without_the_flag_the_function_runs_once_untimed(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        f"""
        calls = []

        def work(x, y=0):
            calls.append((x, y))
            return x + y

        def test_a(gpubench):
            assert gpubench(work, 1, y=2) == 3
            assert calls == [(1, 2)]
            assert gpubench.device == {KIND!r}
            assert gpubench.results == ()
        """
    )
    result = fake.runpytest()
    result.assert_outcomes(passed=1)
    assert timer_calls(fake) == []
    assert not (fake.path / ".gpubench").exists()
    result.stdout.no_fnmatch_line("*gpubench:*")


def test_without_the_flag_pedantic_runs_setup_and_function_once(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        calls = []

        def test_a(gpubench):
            out = gpubench.pedantic(
                lambda v: calls.append(v) or v,
                setup=lambda: calls.append("setup") or ((7,), {}),
                warmup=3,
                rounds=5,
            )
            assert out == 7
            assert calls == ["setup", 7]
        """
    )
    fake.runpytest().assert_outcomes(passed=1)
    assert timer_calls(fake) == []


# --- new, save, and the verdicts -----------------------------------------------------------


def test_without_a_baseline_tests_are_new_and_pass(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"*= gpubench: * ({device_key()}) =*",
            TABLE_HEADER,
            f"test_join *{FAKE_NAME} * ms * - * - * - * - * - * new * - * -",
            f"test_sum *{FAKE_NAME} * ms * - * - * - * - * - * new * - * -",
            f"no baseline yet at {fake.path}/.gpubench/{device_key()}.json: "
            "run with --gpubench-save",
            "gpubench: 2 new (threshold 5%, alpha 0.01 over 2 measurements)",
        ]
    )
    # no baseline without a save: the run's results only, stored (issue 19)
    assert [p.name for p in (fake.path / ".gpubench").iterdir()] == ["runs"]
    assert timer_calls(fake) == [f"auto {KIND} False"] * 2


def test_no_file_names_the_host_unless_asked(fake: pytest.Pytester) -> None:
    """Issue 19: release 0.2 wrote the host's name into pytest-benchmark's JSON
    (machine_info.node), beside baselines that are committed; --gpubench-record-host (or ini
    gpubench_record_host) writes it into each saved session and that field on purpose."""
    fake.makepyfile(test_bench=BENCH)
    host = socket.gethostname()
    files = ("--gpubench-json=out.json", "--gpubench-benchmark-json=bench.json")
    fake.runpytest("--gpubench-save", *files).assert_outcomes(passed=2)
    for name in (baseline_file(fake), fake.path / "out.json", fake.path / "bench.json"):
        assert json.dumps(host) not in name.read_text(encoding="utf-8"), name  # as a value
    node = json.loads((fake.path / "bench.json").read_text())["machine_info"]["node"]
    assert re.fullmatch("host-[0-9a-f]{12}", node)
    [before] = read_baseline(fake)["sessions"]

    fake.makeini("[pytest]\ngpubench_record_host = true\n")
    fake.runpytest("--gpubench-save", *files).assert_outcomes(passed=2)
    sessions = read_baseline(fake)["sessions"]
    [after] = set(sessions) - {before}
    assert sessions[after]["host"] == host and "host" not in sessions[before]
    assert json.loads((fake.path / "bench.json").read_text())["machine_info"]["node"] == host
    assert json.loads((fake.path / "out.json").read_text())["session"]["host"] == host


def test_the_footer_counts_only_what_was_measured(fake: pytest.Pytester) -> None:
    """Issue 19: a collected test that skips before it measures is in the family alpha is
    divided over, not among the measurements: "2 new (... over 3 measurements)" had said
    three were measured."""
    fake.makepyfile(
        test_bench=BENCH
        + """
def test_needs_a_gpu(gpubench):
    pytest.skip("no GPU")
"""
    )
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        ["gpubench: 2 new (threshold 5%, alpha 0.01 over 3 measurements known at collection)"]
    )


def test_save_writes_the_baseline_of_this_device(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench-save", "--gpubench-json=out.json")
    result.assert_outcomes(passed=2)
    path = baseline_file(fake)
    assert path.name == f"{device_key()}.json"
    result.stdout.fnmatch_lines([f"baseline written: 2 tests, 1 session each ({path})"])
    data = read_baseline(fake)
    assert data["schema"] == "pytest-gpubench/2"
    assert data["device"]["name"]
    assert sorted(data["benchmarks"]) == ["test_bench.py::test_join", "test_bench.py::test_sum"]
    stored = data["benchmarks"]["test_bench.py::test_sum"]
    assert stored["timer"] == FAKE_NAME
    assert len(stored["samples_ms"]) >= 10
    # one session: it starts the epoch, it is the anchor and the history
    [record] = stored["history"]
    assert stored["anchor"] == [record]
    assert record["median_ms"] == pytest.approx(1.0, rel=0.01)
    assert record["n"] == len(stored["samples_ms"]) and record["calls_per_sample"] == 1
    assert 0 < record["se_log"] < 0.001
    session = record["session"]
    assert stored["epoch"] == session
    assert data["benchmarks"]["test_bench.py::test_join"]["history"][0]["session"] == session
    # the table of sessions says once what the session's measurements share
    assert list(data["sessions"]) == [session]
    info = data["sessions"][session]
    assert info["date"] and info["machine"]
    assert info["versions"]["python"] == data["device"]["python"]
    # a committed file says which sessions ran on one host, never the host's name (issue 19)
    assert re.fullmatch("host-[0-9a-f]{12}", info["machine"])
    assert info["machine"] != f"host-{socket.gethostname()}"
    report = json.loads((fake.path / "out.json").read_text())
    assert report["session"]["id"] == session
    [measured] = [r for r in report["results"] if r["key"] == "test_bench.py::test_sum"]
    assert measured["warmup"] >= 6 and measured["calls_per_sample"] == 1
    text = path.read_text(encoding="utf-8")
    assert '"samples_ms": [' in text and text.count("\n") < 60  # samples on one line
    # no temporary file left; the lock file and a .gitignore for both; the stored runs
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".gitignore",
        path.name,
        f"{path.name}.lock",
        "runs",
    ]


def test_save_keeps_the_entries_of_tests_that_did_not_run(saved: pytest.Pytester) -> None:
    before = read_baseline(saved)
    result = saved.runpytest("--gpubench-save", "-k", "test_sum")
    result.assert_outcomes(passed=1, deselected=1)
    after = read_baseline(saved)
    join, total = "test_bench.py::test_join", "test_bench.py::test_sum"
    assert after["benchmarks"][join] == before["benchmarks"][join]
    # test_sum's history grew by this session; the epoch is the first one's
    assert after["benchmarks"][total]["history"][0] == before["benchmarks"][total]["history"][0]
    assert len(after["benchmarks"][total]["history"]) == 4
    assert after["benchmarks"][total]["epoch"] == before["benchmarks"][total]["epoch"]
    # the table keeps the sessions test_join refers to and adds the new one
    assert set(after["sessions"]) > set(before["sessions"])
    assert len(after["sessions"]) == 4


def test_save_twice_with_nothing_to_measure_leaves_the_file_alone(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    result = saved.runpytest("--gpubench-save", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([f"baseline unchanged: {path}"])
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_a_a_run_passes(saved: pytest.Pytester) -> None:
    before = baseline_file(saved).read_bytes()
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"test_join *{FAKE_NAME} *1.00 ms * 1.00 ms * 3 * ok *",
            f"test_sum *{FAKE_NAME} *1.00 ms * 1.00 ms * 3 * ok *",
            "gpubench: 2 ok (threshold 5%, alpha 0.01 over 2 measurements)",
        ]
    )
    result.stdout.no_fnmatch_line("*noisy*")  # a 1 ms graph replay gates 5% from 3 sessions
    result.stdout.no_fnmatch_line("*confirm*")
    assert baseline_file(saved).read_bytes() == before  # only --gpubench-save writes


def test_twenty_percent_slower_fails_as_regressed(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    calls = len(timer_calls(saved))
    result = saved.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "test_sum regressed: 1.00 ms -> 1.20 ms (+20.0%; gate 5.0%, 1 session against the "
            "history of 3, threshold 5%)",
            "test_join regressed: 1.00 ms -> 1.20 ms (+20.0%; gate 5.0%, 1 session against the "
            "history of 3, threshold 5%)",
            "gpubench: 2 regressed (threshold 5%, alpha 0.01 over 2 measurements)",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*def test_sum*")  # a one-line failure, no source
    result.stdout.no_fnmatch_line("*timed by*")  # the failure says which timer unless a graph
    for measured in json.loads((saved.path / "out.json").read_text())["results"]:
        assert measured["status"] == "regressed"
        assert measured["judgement"]["ratio"] == pytest.approx(1.2, rel=1e-3)
        assert measured["judgement"]["bar"] < 0.05
        assert measured["family"] == 2  # two measurements judged: alpha / 2
        assert measured["confirmations"] == []  # --gpubench-confirm 0: the first is final
        assert measured["passed"] is False  # the test failed: such results are never saved
    # measured once each, in this process (by the baseline's graph timer, asked by name): no
    # re-measure shares its shift
    assert timer_calls(saved)[calls:] == [f"{FAKE_NAME} {KIND} False"] * 2


@pytest.mark.slow
def test_twenty_percent_faster_passes_as_improved(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An improvement is confirmed in fresh processes like a regression (only test_sum is
    faster: one confirmation to pay for), and passes."""
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 0.8}))
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpubench: confirming test_sum in 2 fresh processes (2 at once)",
            "test_sum *-20.0%* improved *",
            "test_sum: improved: faster by 20.0% vs history of 3 sessions; gate *%",
            "test_sum: confirmed in 2 fresh processes (medians 800 µs, 800 µs)",
            "gpubench: 1 improved, 1 ok (*)",
        ]
    )
    result.stdout.no_fnmatch_line("*confirming test_join*")


def test_improved_fails_with_fail_on_improvement(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "0.8")
    result = saved.runpytest("--gpubench", "--gpubench-fail-on-improvement", NO_CONFIRM)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            # over the threshold at alpha / 2 (improvements fail too): "gate 6.x%"
            "test_sum improved: 1.00 ms -> 800 µs (-20.0%; gate *%, 1 session against the "
            "history of 3, threshold 5%*); refresh the baseline with --gpubench-save "
            "--gpubench-accept"
        ]
    )


def test_very_noisy_timings_pass_as_noisy_with_what_they_can_gate(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 2% within a session: three sessions gate about 26% (much more is not gated at all)
    monkeypatch.setenv("FAKE_NOISE", "0.02")
    monkeypatch.setenv("FAKE_SCALE", "1.1")  # above the threshold, below what it can gate
    result = saved.runpytest("--gpubench", "--gpubench-max-samples=30", NO_CONFIRM)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"test_join *{FAKE_NAME} * ok (gate > 5%) *",
            "test_join: ok: * vs history of 3 sessions; gate *% (over the 5% threshold)",
            "gpubench: 2 ok (*threshold 5%*)",
        ]
    )


def test_an_unknown_timer_is_judged_against_the_conservative_prior(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timer of the user's the rule knows nothing of: judged at the prior of the noisiest
    timers (7.8%), never at random: with a short history its spread is mostly the prior's,
    and 20% slower passes as not gated, saying why."""
    monkeypatch.setenv("FAKE_NAME", "my-timer")
    fake.makepyfile(test_bench=BENCH)
    for saved in record_history(fake):
        saved.assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_join *my-timer *1.20 ms * 5.2% *1.00 ms * 3 * +20.0% * - * not gated *",
            "test_join: not gated: slower by 20.0% vs history of 3 sessions; *could not catch a "
            "slowdown under 50%; no history of up to 50 sessions like these would gate 5%",
        ]
    )


HOW_TO_ACCEPT = (
    "accept it with --gpubench-save --gpubench-accept (or @pytest.mark.gpubench(accept=True) "
    "on the test)"
)


def test_a_save_over_a_regression_fails_it_and_keeps_its_history(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saves never accept silently: the save that a main-branch job runs fails on a
    regression that slipped through, as a run without --gpubench-save would, and the
    baseline keeps its history; the other tests' sessions are appended as ever."""
    path = baseline_file(saved)
    before = path.read_bytes()
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    alone = saved.runpytest("--gpubench-save", NO_CONFIRM, "-k", "test_sum")
    alone.assert_outcomes(failed=1, deselected=1)
    alone.stdout.fnmatch_lines(
        [
            "test_sum regressed: 1.00 ms -> 1.20 ms (+20.0%; *)",
            f"  not saved: the baseline keeps its history; {HOW_TO_ACCEPT}",
            f"baseline unchanged: {path}",
        ]
    )
    assert path.read_bytes() == before  # nothing else to save: the file is left alone
    result = saved.runpytest("--gpubench-save", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            f"  not saved: the baseline keeps its history; {HOW_TO_ACCEPT}",
            "test_sum *+20.0%* regressed *",
            f"baseline written: 1 test, 1 session ({path})",
        ]
    )
    after = read_baseline(saved)
    assert after["benchmarks"][SUM] == json.loads(before)["benchmarks"][SUM]
    assert len(after["benchmarks"][JOIN]["history"]) == 4
    saved.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=1, failed=1)  # still


def test_a_save_with_accept_takes_a_regression_as_a_new_epoch(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = entry(saved, SUM)
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench-save", "--gpubench-accept", NO_CONFIRM)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_join *+20.0%* regressed *",
            "test_sum: regressed, accepted: its history starts over from this run",
            "test_join: regressed, accepted: its history starts over from this run",
            "baseline written: 2 tests, 1 session each (*)",
        ]
    )
    # accepted: a new epoch of this session alone
    after = entry(saved, SUM)
    assert [r["median_ms"] for r in after["history"]] == [pytest.approx(1.2, rel=0.01)]
    assert after["anchor"] == after["history"]
    assert after["epoch"] == after["history"][0]["session"] != before["epoch"]
    # the old epoch's session is no longer referred to: gone from the table
    assert list(read_baseline(saved)["sessions"]) == [after["epoch"]]
    saved.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)


def test_a_marker_accepts_the_change_of_its_own_test(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``@pytest.mark.gpubench(accept=True)``: a commit that changes a kernel on purpose says
    so on its test; the main-branch save accepts that test's change and no other."""
    fake.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.gpubench(accept=True)
        def test_sum(gpubench):
            gpubench(sum, range(100))

        def test_join(gpubench):
            gpubench(",".join, ["a", "b"])
        """
    )
    for seed in ("1", "3", "4"):
        monkeypatch.setenv("FAKE_SEED", seed)
        fake.runpytest("--gpubench-save", NO_CONFIRM).assert_outcomes(passed=2)
    epoch = entry(fake, SUM)["epoch"]
    join = entry(fake, JOIN)
    monkeypatch.setenv("FAKE_SEED", "2")
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = fake.runpytest("--gpubench-save", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_join regressed: *",
            "test_sum: regressed, accepted: its history starts over from this run",
            "baseline written: 1 test, 1 session (*)",
        ]
    )
    assert entry(fake, SUM)["epoch"] != epoch and len(entry(fake, SUM)["history"]) == 1
    assert entry(fake, JOIN) == join
    # a marker's accept=False keeps its test's change out of a save with --gpubench-accept
    fake.makepyfile(
        test_bench="""
        import pytest

        def test_sum(gpubench):
            gpubench(sum, range(100))

        @pytest.mark.gpubench(accept=False)
        def test_join(gpubench):
            gpubench(",".join, ["a", "b"])
        """
    )
    monkeypatch.setenv("FAKE_SCALE", "1.5")
    refused = fake.runpytest("--gpubench-save", "--gpubench-accept", NO_CONFIRM)
    refused.assert_outcomes(passed=1, failed=1)
    refused.stdout.fnmatch_lines(["*test_join regressed: *", f"  not saved: *{HOW_TO_ACCEPT}"])
    assert entry(fake, JOIN) == join


def test_a_save_over_an_improvement_leaves_it_out_and_says_how_to_accept_it(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A faster test fails nothing (unless --gpubench-fail-on-improvement), and a save
    without accept does not take it as the new baseline: it is left out, with a line."""
    path = baseline_file(saved)
    before = path.read_bytes()
    monkeypatch.setenv("FAKE_SCALE", "0.8")
    result = saved.runpytest("--gpubench-save", NO_CONFIRM)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"test_sum: not saved: improved; {HOW_TO_ACCEPT}",
            f"test_join: not saved: improved; {HOW_TO_ACCEPT}",
            f"baseline unchanged: {path}",
        ]
    )
    assert path.read_bytes() == before
    strict = saved.runpytest("--gpubench-save", "--gpubench-fail-on-improvement", NO_CONFIRM)
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines([f"  not saved: the baseline keeps its history; {HOW_TO_ACCEPT}"])
    assert path.read_bytes() == before
    accepted = saved.runpytest("--gpubench-save", "--gpubench-accept", NO_CONFIRM)
    accepted.assert_outcomes(passed=2)
    assert medians(saved, SUM) == [pytest.approx(0.8, rel=0.01)]


def test_the_regression_fails_the_call_phase(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench", NO_CONFIRM, "--junitxml=junit.xml", "-k", "test_sum")
    result.assert_outcomes(failed=1, deselected=1)
    [case] = ET.parse(saved.path / "junit.xml").getroot().iter("testcase")
    assert case.get("name") == "test_sum"
    [failure] = case.findall("failure")
    assert "test_sum regressed: " in (failure.get("message") or "")
    assert case.findall("error") == []


def test_a_baseline_of_another_timer_is_incomparable_and_fails(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    data = json.loads(path.read_text())
    data["benchmarks"]["test_bench.py::test_sum"]["timer"] = "wall"
    path.write_text(json.dumps(data))
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=1, failed=1)
    reason = (
        f"baseline timed by wall, now by {FAKE_NAME}: times of different timers are never "
        "compared; accept the new timer with --gpubench-save --gpubench-accept"
    )
    result.stdout.fnmatch_lines(
        [
            f"test_sum incomparable: {reason}",
            f"test_sum *{FAKE_NAME} * 1.00 ms * - * 1.00 ms * 3 * - * - * incomparable *",
            f"test_sum: incomparable: {reason}",
            "gpubench: 1 incomparable, 1 ok (*)",
        ]
    )
    allowed = saved.runpytest("--gpubench", "--gpubench-allow-incomparable")
    allowed.assert_outcomes(passed=2)
    allowed.stdout.fnmatch_lines([f"test_sum: incomparable: {reason}"])
    # a save fails it too, and saves the other test; accepted, a new epoch
    refused = saved.runpytest("--gpubench-save")
    refused.assert_outcomes(passed=1, failed=1)
    refused.stdout.fnmatch_lines([f"  not saved: the baseline keeps its history; {HOW_TO_ACCEPT}"])
    assert entry(saved, "test_bench.py::test_sum")["timer"] == "wall"
    saved.runpytest("--gpubench-save", "--gpubench-accept").assert_outcomes(passed=2)
    assert entry(saved, "test_bench.py::test_sum")["timer"] == FAKE_NAME
    assert len(entry(saved, "test_bench.py::test_sum")["history"]) == 1
    comparable = saved.runpytest("--gpubench")
    comparable.assert_outcomes(passed=2)
    comparable.stdout.no_fnmatch_line("* incomparable*")


def test_a_baseline_from_other_software_is_reported(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    data = json.loads(path.read_text())
    for info in data["sessions"].values():  # the software each session ran with
        version, info["versions"]["torch"] = info["versions"]["torch"], "1.0.0"
    path.write_text(json.dumps(data))
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [f"baseline was recorded with other software: torch 1.0.0 -> {version}"]
    )


def test_alpha_is_corrected_for_the_tests_that_run(saved: pytest.Pytester) -> None:
    result = saved.runpytest("--gpubench", "-k", "test_sum", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["gpubench: 1 ok (threshold 5%, alpha 0.01 over 1 measurement)"])
    [measured] = json.loads((saved.path / "out.json").read_text())["results"]
    assert measured["family"] == 1


# --- settings from the marker and the ini file ----------------------------------------------


def test_marker_threshold_overrides_the_command_line(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved.makepyfile(
        test_bench=BENCH.replace(
            "def test_sum(", '@pytest.mark.gpubench(threshold="30%")\ndef test_sum('
        )
    )
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["test_join regressed: *(+20.0%; gate *, threshold 5%)"])
    result.stdout.fnmatch_lines(["test_sum *+20.0%* ok *"])


def test_ini_settings_apply_and_the_command_line_wins(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved.makeini("[pytest]\ngpubench_threshold = 30%\ngpubench_confirm = 0\n")
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    saved.runpytest("--gpubench").assert_outcomes(passed=2)
    result = saved.runpytest("--gpubench", "--gpubench-threshold=10%")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["test_sum regressed: *threshold 10%)"])
    result.stdout.no_fnmatch_line("*confirm*")  # ini gpubench_confirm = 0


def test_ini_can_enable_gpubench(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_enabled = true\n")
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest().assert_outcomes(passed=2)
    assert len(timer_calls(fake)) == 2


def test_marker_timer_reaches_the_timer_hook(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(timer="cuda-event", group="g", bytes=1000)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    fake.runpytest("--gpubench", "--gpubench-timer=wall").assert_outcomes(passed=1)
    # the test's measurement, then the session's measurement of peak bandwidth (bytes given)
    assert timer_calls(fake)[0] == f"cuda-event {KIND} False"


def assert_marker_error(result: pytest.RunResult, message: str, passed: int = 0) -> None:
    """A marker error fails its test at setup with one line; the other tests run."""
    result.assert_outcomes(errors=1, passed=passed)
    result.stdout.fnmatch_lines(["*_ ERROR at setup of test_a _*", message, "*short test summary*"])
    result.stdout.fnmatch_lines(["ERROR test_*.py::test_a*"])
    text = output(result)
    assert "Traceback" not in text
    assert "def test_a" not in text
    assert "GpubenchError" not in text and "ConfigError" not in text


def test_unknown_marker_keyword_is_an_error_of_its_test(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.gpubench(treshold="10%")
        def test_a(gpubench):
            gpubench(abs, -1)

        def test_b(gpubench):
            gpubench(abs, -1)
        """
    )
    for args in ((), ("--gpubench",)):
        result = fake.runpytest(*args)
        assert_marker_error(
            result,
            "test_bench.py::test_a: unknown keyword 'treshold' in @pytest.mark.gpubench; "
            "expected one of accept, threshold, memory_threshold, *",
            passed=1,
        )
    # the test that errored was not measured; the other one was
    assert timer_calls(fake) == [f"auto {KIND} False"]


def test_invalid_marker_value_is_an_error_of_its_test(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(threshold="abc")
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    assert_marker_error(
        fake.runpytest("--gpubench"),
        "test_invalid_marker_value_is_an_error_of_its_test.py::test_a: invalid "
        "@pytest.mark.gpubench(threshold=...) 'abc': expected a percentage such as 5%",
    )


def test_positional_marker_arguments_are_an_error_of_its_test(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench("5%")
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    assert_marker_error(
        fake.runpytest(),
        "test_*.py::test_a: @pytest.mark.gpubench takes keywords only, got positional ('5%',)",
    )


def test_markers_merge_closest_first_per_keyword(fake: pytest.Pytester) -> None:
    """A function's marker over its class's over its module's pytestmark, keyword by keyword;
    resolved once per test, at collection."""
    fake.makepyfile(
        test_bench="""
        import pytest

        pytestmark = pytest.mark.gpubench(threshold="30%", group="module", timer="wall")


        class TestK:
            pytestmark = [pytest.mark.gpubench(threshold="20%", bytes=1000)]

            @pytest.mark.gpubench(threshold="10%")
            def test_a(self, gpubench):
                gpubench(abs, -1)

            def test_b(self, gpubench):
                gpubench(abs, -1)


        def test_c(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(passed=3)
    found = {
        r["test"]: (r["threshold"], r["group"], r["bytes"])
        for r in json.loads((fake.path / "out.json").read_text())["results"]
    }
    assert found == {
        "test_a": (0.1, "module", 1000.0),
        "test_b": (0.2, "module", 1000.0),
        "test_c": (0.3, "module", None),
    }
    # the module's timer reached every measurement (then the peak bandwidth's, with bytes)
    assert [line for line in timer_calls(fake) if line != f"auto {KIND} False"] == [
        f"wall {KIND} False"
    ] * 3


def test_marker_sample_bounds_are_checked_against_the_session_settings(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(min_samples=300)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    fake.runpytest("--gpubench", "--gpubench-max-samples=500").assert_outcomes(passed=1)


def test_marker_sample_bounds_beyond_the_session_ones_are_an_error_of_its_test(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(min_samples=50)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    assert_marker_error(
        fake.runpytest("--gpubench", "--gpubench-max-samples=20"),
        "test_*.py::test_a: invalid sample bounds: min_samples 50 exceeds max_samples 20: *",
    )


# --- bad command-line values ----------------------------------------------------------------


@pytest.mark.parametrize(
    "option, message",
    [
        (
            "--gpubench-threshold=abc",
            "ERROR: invalid --gpubench-threshold 'abc': expected a percentage such as 5%",
        ),
        (
            "--gpubench-alpha=2",
            "ERROR: invalid --gpubench-alpha '2': "
            "expected a significance level between 0 and 1 such as 0.01",
        ),
        (
            "--gpubench-timer=gpu",
            "ERROR: invalid --gpubench-timer 'gpu': expected one of auto, cuda-graph, *",
        ),
        (
            "--gpubench-min-samples=1",
            "ERROR: invalid --gpubench-min-samples '1': expected a whole number of at least 2",
        ),
    ],
)
def test_invalid_options_are_usage_errors_naming_the_option(
    fake: pytest.Pytester, option: str, message: str
) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", option)
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in output(result)


def test_invalid_ini_value_is_a_usage_error_naming_the_key(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_alpha = 5%\n")
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest()
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: invalid ini gpubench_alpha '5%': expected a significance level such as 0.01"]
    )


def test_unknown_option_values_only_matter_for_their_option(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", "--gpubench-min-samples=50", "--gpubench-max-samples=20")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: invalid sample bounds: min_samples 50 exceeds *"])


# --- damaged baselines ----------------------------------------------------------------------

DAMAGED = {
    "corrupt": ("{{{", "is not valid JSON (Expecting property name * at line 1)"),
    "truncated": ('{\n  "schema": "pytest-gpubench/2",\n  "benchm', "is not valid JSON (*)"),
    "empty": ("", "is not valid JSON (Expecting value at line 1)"),
    "bare-value": ("null", "is the bare value null, not a JSON object"),
    "duplicate-key": (
        '{"schema": "pytest-gpubench/2", "schema": "pytest-gpubench/2"}',
        "is not valid JSON (the key 'schema' appears twice in one object)",
    ),
    "foreign": (
        json.dumps({"machine_info": {}, "benchmarks": [], "version": "5.1.0"}),
        "has schema None, expected 'pytest-gpubench/2'",
    ),
    "bad-entry-v1": (
        json.dumps(
            {
                "schema": "pytest-gpubench/1",
                "device": {},
                "benchmarks": {"test_bench.py::test_sum": {"timer": "fake", "samples_ms": [1]}},
            }
        ),
        "has an entry 'test_bench.py::test_sum' that has fewer than 2 samples",
    ),
    "bad-entry": (
        json.dumps(
            {
                "schema": "pytest-gpubench/2",
                "device": {},
                "sessions": {},
                "benchmarks": {
                    "test_bench.py::test_sum": {
                        "timer": "fake",
                        "epoch": "s",
                        "anchor": [],
                        "history": [{"session": "s", "median_ms": 1.0, "n": 20, "se_log": None}],
                    }
                },
            }
        ),
        "has an entry 'test_bench.py::test_sum' that refers to session 's', not in 'sessions'",
    ),
}


@pytest.mark.parametrize("save", [False, True], ids=["run", "save"])
@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_baseline_is_a_usage_error_and_left_alone(
    fake: pytest.Pytester, damage: str, save: bool
) -> None:
    content, problem = DAMAGED[damage]
    fake.makepyfile(test_bench=BENCH)
    path = fake.path / ".gpubench" / f"{device_key()}.json"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    before = path.read_bytes()
    result = fake.runpytest("--gpubench-save" if save else "--gpubench")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: baseline file {path} {problem}; "
            "fix it, restore it from version control, or delete it and re-run with "
            "--gpubench-save"
        ]
    )
    assert "Traceback" not in output(result)
    assert [line for line in result.stderr.lines if line.strip()] == [
        line for line in result.stderr.lines if line.startswith("ERROR: baseline file")
    ]
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert timer_calls(fake) == []  # nothing was measured


def test_a_damaged_baseline_does_not_matter_without_the_flag(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    path = fake.path / ".gpubench" / f"{device_key()}.json"
    path.parent.mkdir()
    path.write_text("{{{")
    fake.runpytest().assert_outcomes(passed=2)


# --- failing functions and misuse -----------------------------------------------------------


def test_a_function_that_raises_fails_its_test_and_is_not_saved(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def boom():
            raise ValueError("boom from the kernel")

        def test_raises(gpubench):
            gpubench(boom)

        def test_fails_after(gpubench):
            assert gpubench(abs, -1) == 2

        def test_good(gpubench):
            assert gpubench(abs, -1) == 1
        """
    )
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*ValueError: boom from the kernel"])
    assert sorted(read_baseline(fake)["benchmarks"]) == ["test_bench.py::test_good"]


def test_a_non_callable_is_a_type_error(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        def test_a(gpubench):
            gpubench(42)
        """
    )
    for args in ((), ("--gpubench",)):
        result = fake.runpytest(*args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["*TypeError: gpubench expects a function to time as its first argument, got int 42"]
        )


def test_named_measurements_are_stored_separately(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def test_two(gpubench):
            assert gpubench(abs, -1, name="small") == 1
            assert gpubench(abs, -1000, name="large") == 1000
        """
    )
    result = record_history(fake)[0]
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [f"test_two#large *{FAKE_NAME} *", f"test_two#small *{FAKE_NAME} *"]
    )
    assert sorted(read_baseline(fake)["benchmarks"]) == [
        "test_bench.py::test_two#large",
        "test_bench.py::test_two#small",
    ]
    fake.runpytest("--gpubench").stdout.fnmatch_lines(
        ["gpubench: 2 ok (threshold 5%, alpha 0.01 over 2 measurements)"]
    )


@pytest.mark.parametrize(
    "calls, message",
    [
        (
            "gpubench(abs, -1)\n    gpubench(abs, -2)",
            "gpubench was called more than once in test_a; give each measurement its own name, "
            "e.g. gpubench(fn, x, name='fp16')",
        ),
        (
            "gpubench(abs, -1, name='x')\n    gpubench(abs, -2)",
            "gpubench was called more than once in test_a; *",
        ),
        (
            "gpubench(abs, -1, name='x')\n    gpubench(abs, -2, name='x')",
            "gpubench measurement name 'x' is used twice in test_a; names must be unique within "
            "a test",
        ),
        (
            "gpubench(abs, -1, name='')",
            "invalid gpubench name '': expected a non-empty string",
        ),
        (
            "gpubench.pedantic(abs, (-1,), rounds=1)",
            "invalid gpubench.pedantic rounds=1: expected a whole number of at least 2",
        ),
        (
            "gpubench.pedantic(abs, (-1,), warmup=-1)",
            "invalid gpubench.pedantic warmup=-1: expected a whole number of at least 0",
        ),
    ],
    ids=["twice", "named-then-unnamed", "same-name", "empty-name", "rounds", "warmup"],
)
def test_misuse_fails_with_one_line_and_no_traceback(
    fake: pytest.Pytester, calls: str, message: str
) -> None:
    fake.makepyfile(f"def test_a(gpubench):\n    {calls}\n")
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*_ test_a _*", message, "*short test summary*"])
    text = output(result)
    assert "Traceback" not in text
    assert "def test_a" not in text
    assert "GpubenchError" not in text


def test_the_device_is_cuda_or_cpu(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        f"""
        def test_a(gpubench):
            assert gpubench.device == {KIND!r}
            gpubench(abs, -1)
            assert gpubench.device == {KIND!r}
        """
    )
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    fake.runpytest().assert_outcomes(passed=1)


# --- pedantic -------------------------------------------------------------------------------


def test_pedantic_setup_runs_before_every_sample_with_fixed_rounds_and_warmup(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        test_bench="""
        import itertools

        counter = itertools.count()
        setups, calls = [], []

        def setup():
            i = next(counter)
            setups.append(i)
            return (i,), {"scale": 10}

        def fn(i, scale):
            calls.append(i * scale)
            return i * scale

        def test_pedantic(gpubench):
            out = gpubench.pedantic(fn, setup=setup, warmup=3, rounds=5)
            assert out == 0  # the untimed first call, on the first setup's arguments
            # untimed call + 3 warmup samples + 5 samples, each with fresh arguments
            assert setups == list(range(9))
            assert calls == [10 * i for i in range(9)]
        """
    )
    result = fake.runpytest("--gpubench-save", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1)
    assert timer_calls(fake) == [f"auto {KIND} True"]
    [measured] = json.loads((fake.path / "out.json").read_text())["results"]
    assert (measured["warmup"], len(measured["samples_ms"])) == (3, 5)
    stored = entry(fake, "test_bench.py::test_pedantic")
    assert len(stored["samples_ms"]) == 5 and stored["history"][0]["n"] == 5


def test_pedantic_without_setup_uses_the_given_arguments(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        calls = []

        def test_pedantic(gpubench):
            out = gpubench.pedantic(lambda a, b: calls.append((a, b)) or a + b, (1,), {"b": 2},
                                    rounds=4, warmup=0)
            assert out == 3
            assert calls == [(1, 2)] * 5
        """
    )
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    assert timer_calls(fake) == [f"auto {KIND} False"]


# --- output files ---------------------------------------------------------------------------


def test_json_and_markdown_outputs(saved: pytest.Pytester) -> None:
    (saved.path / "sub").mkdir()
    result = saved.runpytest(
        "--gpubench", "--gpubench-json=sub/out.json", "--gpubench-markdown=sub/summary.md"
    )
    result.assert_outcomes(passed=2)
    document = json.loads((saved.path / "sub" / "out.json").read_text())
    assert document["device"]["name"]
    settings = document["settings"]
    assert (settings["threshold"], settings["alpha"], settings["confirm"]) == (0.05, 0.01, 6)
    assert settings["enabled"] is True and settings["save"] is False
    assert settings["json"] == str(saved.path / "sub" / "out.json")
    session = document["session"]
    assert session["id"] and session["date"] and session["machine"]
    assert [r["key"] for r in document["results"]] == [
        "test_bench.py::test_join",
        "test_bench.py::test_sum",
    ]
    first = document["results"][0]
    assert first["timer"] == FAKE_NAME
    assert first["status"] == "ok" and first["judgement"]["status"] == "ok"
    assert first["summary"]["samples"] == len(first["samples_ms"]) >= 10
    assert first["reference_ms"] == pytest.approx(1.0, rel=0.01)
    assert first["history_sessions"] == 3 and first["family"] == 2
    assert first["session"] == session["id"]
    assert first["median_ms"] == first["summary"]["median_ms"]
    # where the test's time went: the sampling took most of it with the fake timer
    costs = first["costs"]
    steps = {"first_call_s", "lock_wait_s", "timer_setup_s", "sampling_s", "confirm_s"}
    assert set(costs) == steps | {"other_first_call_s"}  # and the reference's first call
    assert costs["confirm_s"] == 0  # nothing was flagged
    assert all(value >= 0 for value in costs.values())
    assert costs["sampling_s"] > 0  # (the lock wait depends on who else times on this host)
    markdown = (saved.path / "sub" / "summary.md").read_text().splitlines()
    assert markdown[0].startswith("### gpubench: ")
    assert MARKDOWN_HEADER in markdown
    assert any(line.startswith(f"| test_sum | {FAKE_NAME} | ") for line in markdown)
    assert "2 ok" in markdown


def test_the_summary_is_appended_to_the_github_step_summary(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = saved.path / "step-summary.md"
    summary.write_text("## earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    saved.runpytest("--gpubench").assert_outcomes(passed=2)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n### gpubench: ")
    assert MARKDOWN_HEADER in text.splitlines()
    assert "\n2 ok\n" in text
    saved.runpytest().assert_outcomes(passed=2)  # nothing timed, nothing appended
    assert summary.read_text(encoding="utf-8") == text


def test_the_step_summary_starts_on_a_line_of_its_own(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: an earlier step that wrote no final newline had our heading glued to its
    last line ("## earlier step### gpubench: ...")."""
    summary = saved.path / "step-summary.md"
    summary.write_text("## earlier step", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    saved.runpytest("--gpubench").assert_outcomes(passed=2)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## earlier step\n### gpubench: ")
    summary.write_text("", encoding="utf-8")  # an empty file gets no blank first line
    saved.runpytest("--gpubench").assert_outcomes(passed=2)
    assert summary.read_text(encoding="utf-8").startswith("### gpubench: ")


def test_json_output_is_standard_json(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def test_few(gpubench):
            gpubench.pedantic(abs, (-1,), rounds=2, warmup=0)
        """
    )
    fake.runpytest("--gpubench-save").assert_outcomes(passed=1)
    fake.runpytest("--gpubench", "--gpubench-json=out.json").assert_outcomes(passed=1)

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    [measured] = json.loads((fake.path / "out.json").read_text(), parse_constant=refuse)["results"]
    # two samples: the median's own error is unknown (an unbounded interval, written as null)
    assert measured["status"] == "unstable" and measured["judgement"] is None


def test_baseline_dir_on_the_command_line_is_relative_to_the_cwd(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench-save", "--gpubench-dir=perf/base").assert_outcomes(passed=2)
    assert baseline_file(fake, "perf/base").name == f"{device_key()}.json"
    assert not (fake.path / ".gpubench").exists()


# --- the real timer -------------------------------------------------------------------------


def test_the_wall_timer_works_without_a_hook(pytester: pytest.Pytester) -> None:
    # Real timings are not judged here: they depend on what else the machine is doing.
    pytester.makepyfile(
        test_bench="""
        def test_sum(gpubench):
            assert gpubench(sum, range(100)) == 4950
        """
    )
    result = pytester.runpytest(
        "--gpubench-save",
        "--gpubench-timer=wall",
        "--gpubench-budget-s=0.2",
        "--gpubench-json=out.json",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_sum *wall *s *new *"])
    [entry] = json.loads((pytester.path / "out.json").read_text())["results"]
    assert entry["timer"] == "wall"
    assert entry["calls_per_sample"] > 1  # a fast function is batched within one sample
    assert entry["summary"]["median_ms"] > 0
    assert read_baseline(pytester)["benchmarks"]["test_bench.py::test_sum"]["timer"] == "wall"


@pytest.mark.skipif(CUDA, reason="auto means a CUDA timer where CUDA is available")
def test_auto_is_the_wall_timer_without_cuda(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(gpubench):\n    gpubench(abs, -1)\n")
    result = pytester.runpytest("--gpubench", "--gpubench-budget-s=0.1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_a *wall *new *"])


# --- xdist ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_xdist_workers_measure_and_the_controller_alone_writes(fake: pytest.Pytester) -> None:
    """Workers measure, the controller saves; a marker error is its test's error, carried
    from the worker like any other."""
    pytest.importorskip("xdist")
    fake.makepyfile(
        test_bench=BENCH
        + """

@pytest.mark.gpubench(threshold="abc")
def test_a(gpubench):
    gpubench(abs, -1)
"""
    )
    saved = fake.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench-save")
    saved.assert_outcomes(passed=2, errors=1)
    saved.stdout.fnmatch_lines(
        [
            "*_ ERROR at setup of test_a _*",
            "test_bench.py::test_a: invalid @pytest.mark.gpubench(threshold=...) 'abc': "
            "expected a percentage such as 5%",
        ]
    )
    saved.stdout.fnmatch_lines([f"*test_join *{FAKE_NAME}*new*", f"*test_sum *{FAKE_NAME}*new*"])
    assert "Traceback" not in output(saved) and "INTERNALERROR" not in output(saved)
    files = list((fake.path / ".gpubench").glob("*.json"))
    assert len(files) == 1
    entries = json.loads(files[0].read_text())["benchmarks"]
    assert sorted(entries) == ["test_bench.py::test_join", "test_bench.py::test_sum"]


@pytest.mark.slow
def test_xdist_saves_a_baseline_that_later_runs_read(fake: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    fake.makepyfile(test_bench=BENCH)
    assert fake.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench-save").ret == 0
    data = read_baseline(fake)
    used = {r["session"] for e in data["benchmarks"].values() for r in e["history"]}
    assert used <= set(data["sessions"])
    fake.runpytest("--gpubench").assert_outcomes(passed=2)


@pytest.mark.slow
def test_xdist_workers_judge_against_the_baseline(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    slower = saved.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench", NO_CONFIRM)
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["test_sum regressed: 1.00 ms -> 1.20 ms (+20.0%*"])
    # the controller collects no tests: the family travels with the workers' results
    slower.stdout.fnmatch_lines(
        ["gpubench: 2 regressed (threshold 5%, alpha 0.01 over 2 measurements)"]
    )


@pytest.mark.slow
def test_xdist_workers_fail_a_save_over_a_regression_and_carry_its_accept(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker fails the change its save does not accept; an accepted verdict travels to the
    controller, which saves it as a new epoch."""
    pytest.importorskip("xdist")
    before = entry(saved, SUM)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    xdist = ("-p", "xdist", "-n", "2", "--gpubench-save", NO_CONFIRM)
    refused = saved.runpytest_subprocess(*xdist)
    refused.assert_outcomes(passed=1, failed=1)
    refused.stdout.fnmatch_lines([f"  not saved: the baseline keeps its history; {HOW_TO_ACCEPT}"])
    assert entry(saved, SUM) == before
    accepted = saved.runpytest_subprocess(*xdist, "--gpubench-accept")
    accepted.assert_outcomes(passed=2)
    accepted.stdout.fnmatch_lines(
        ["test_sum: regressed, accepted: its history starts over from this run"]
    )
    assert medians(saved, SUM) == [pytest.approx(1.2, rel=0.01)]


# --- the kernels behind a number (issue 8) -----------------------------------------------

SOFTMAX = {"name": "triton_per_fused_softmax_0", "grid": [64, 1, 1], "block": [128, 1, 1]}


def test_the_kernels_of_a_call_are_stored_and_other_registers_are_another_binary(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's compiled softmax: the same kernel with other registers (and 45% slower) on
    another machine is another binary, ``changed``, never ``regressed``. Another
    configuration of the same kernels (an autotuner's or compiler's choice) warns by default
    and fails with --gpubench-changed=fail (or its ini key)."""
    fake.makepyfile(test_bench=BENCH)
    compiled = SOFTMAX | {"registers": 16, "share": 1.0}
    monkeypatch.setenv("FAKE_KERNELS", kernels(compiled))
    fake.runpytest("--gpubench-save", "-k", "test_sum").assert_outcomes(passed=1, deselected=1)
    stored = entry(fake, "test_bench.py::test_sum")
    assert stored["kernels"] == [
        {
            "name": "triton_per_fused_softmax_0",
            "kind": "kernel",
            "count": 1,
            "grid": [64, 1, 1],
            "block": [128, 1, 1],
            "registers": 16,
            "share": 1.0,
        }
    ]
    before = binary_of(compiled)
    assert stored["binary"] == before and "others" not in stored
    other = compiled | {"registers": 48}
    monkeypatch.setenv("FAKE_KERNELS", kernels(other))
    monkeypatch.setenv("FAKE_SCALE", "1.45")
    change = "triton_per_fused_softmax_0 registers 16 -> 48"
    reason = (
        f"another binary than the baseline's ({before} -> {binary_of(other)}): {change}; "
        "+45.0% against that binary's history, for information only: another binary is not "
        "judged on time; accept it with --gpubench-save --gpubench-accept"
    )
    args = ("--gpubench", "-k", "test_sum", "--gpubench-json=out.json")
    result = fake.runpytest(*args, "--gpubench-changed=fail")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            f"test_sum changed: {reason}",
            f"test_sum *{FAKE_NAME} * 1.45 ms * - * 1.00 ms * 1 * (+45.0%) * - * changed *",
            f"test_sum: changed: {reason}",
            "gpubench: 1 changed (*)",
        ]
    )
    result.stdout.no_fnmatch_line("*regressed*")
    result.stdout.no_fnmatch_line("*kernels: *")  # said once, in the reason
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    assert f"test_sum changed: {reason}\n" in guide  # the guide's example is this line
    [measured] = json.loads((fake.path / "out.json").read_text())["results"]
    assert (measured["status"], measured["judgement"]) == ("changed", None)
    assert measured["kernel_changes"] == [change]
    assert (measured["binary"], measured["baseline_binary"]) == (binary_of(other), before)
    assert measured["previous_ratio"] == pytest.approx(1.45, rel=0.01)
    assert timer_calls(fake)[-1:] == [f"{FAKE_NAME} {KIND} False"]  # not confirmed: no child ran
    # The default: only other kernels fail by themselves; another pick is judged on time,
    # and a history of one binary cannot tell an Inductor pick from a change of the code.
    warned = fake.runpytest(*args)
    warned.assert_outcomes(passed=1, deselected=1)
    warned.stdout.fnmatch_lines(
        [
            "test_sum * 1.45 ms * +45.0% * not gated (another pick) *",
            "test_sum: not gated: slower by 45.0% vs history of 1 session; another pick of the "
            f"same work: {change} (a pick by the inductor alone may move it by more than 50% "
            "here: 1 binary of this work seen): it could not catch a slowdown under 50%; saved, "
            "this pick joins the history, and a run that picks it again is judged against its "
            "own sessions",
            "gpubench: 1 not gated (*)",
        ]
    )
    fake.runpytest(*args, "--gpubench-changed=warn").assert_outcomes(passed=1, deselected=1)
    fake.makeini("[pytest]\ngpubench_changed = fail\n")
    fake.runpytest(*args).assert_outcomes(failed=1, deselected=1)


def test_other_kernels_than_the_baselines_are_another_binary(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=BENCH)
    monkeypatch.setenv("FAKE_KERNELS", kernels(SOFTMAX | {"share": 1.0}))
    fake.runpytest("--gpubench-save", "-k", "test_sum").assert_outcomes(passed=1, deselected=1)
    monkeypatch.setenv("FAKE_KERNELS", kernels(SOFTMAX | {"share": 0.5}, {"name": "k2"}))
    result = fake.runpytest("--gpubench", "-k", "test_sum")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum changed: another binary than the baseline's (* -> *): 1 kernel added: k2; "
            "+0.0% against that binary's history, for information only: *",
            "gpubench: 1 changed (*)",
        ]
    )
    # the old flag passes them as it passed other kernels before
    allowed = fake.runpytest("--gpubench", "-k", "test_sum", "--gpubench-allow-incomparable")
    allowed.assert_outcomes(passed=1, deselected=1)


def other_binaries(
    pytester: pytest.Pytester, key: str, binaries: list[tuple[dict[str, Any], float]]
) -> list[list[dict[str, Any]]]:
    """Other binaries of ``key`` stored beside its own, as other machines' saves keep them:
    each launch's history that of the entry times its scale; their histories."""
    path = baseline_file(pytester)
    data = json.loads(path.read_text())
    stored = data["benchmarks"][key]
    histories = [
        [r | {"median_ms": float(f"{r['median_ms'] * scale:.6g}")} for r in stored["history"]]
        for _, scale in binaries
    ]
    stored["others"] = [
        {"epoch": stored["epoch"], "anchor": h, "history": h, "kernels": [launch | {"share": 1.0}]}
        for (launch, _), h in zip(binaries, histories, strict=True)
    ]
    path.write_text(json.dumps(data))
    return histories


# Three picks of an autotuned kernel from other machines: grid and time against the entry's.
PICKS = ((16384, 1.002), (4096, 0.997), (32768, 1.004))


def test_each_binary_keeps_its_own_history_and_a_run_is_judged_against_its_own(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines of one model that compile different binaries (the issue's compiled GeLU:
    a wide grid of 16 registers on one, a narrow one of 26 on the other, 45% apart): each
    is judged against its own sessions, and a save extends the history of the binary it
    ran, never a mix."""
    fake.makepyfile(test_bench=BENCH)
    wide = {"name": "gelu", "grid": [32768, 1, 1], "block": [256, 1, 1], "registers": 16}
    narrow = wide | {"grid": [16384, 1, 1], "block": [128, 1, 1], "registers": 26}
    monkeypatch.setenv("FAKE_KERNELS", kernels(wide | {"share": 1.0}))
    for seed in ("1", "3", "4"):
        monkeypatch.setenv("FAKE_SEED", seed)
        fake.runpytest("--gpubench-save", NO_CONFIRM, "-k", "test_sum").assert_outcomes(
            passed=1, deselected=1
        )
    # The other machine's binary, its sessions 45% slower, as the file keeps it.
    stored = entry(fake, "test_bench.py::test_sum")
    [slower] = other_binaries(fake, "test_bench.py::test_sum", [(narrow, 1.45)])

    def run(launches: dict[str, Any], scale: float, *args: str) -> dict[str, Any]:
        monkeypatch.setenv("FAKE_KERNELS", kernels(launches | {"share": 1.0}))
        monkeypatch.setenv("FAKE_SCALE", str(scale))
        monkeypatch.setenv("FAKE_SEED", "2")
        result = fake.runpytest(*args, NO_CONFIRM, "-k", "test_sum", "--gpubench-json=out.json")
        [measured] = json.loads((fake.path / "out.json").read_text())["results"]
        assert measured["passed"] is (result.ret == 0)
        return measured

    on_narrow = run(narrow, 1.45, "--gpubench")
    assert on_narrow["passed"] and on_narrow["status"] != "regressed"
    assert on_narrow["baseline_binary"] == on_narrow["binary"] == binary_of(narrow)
    assert on_narrow["reference_ms"] == pytest.approx(1.45, rel=0.002)
    on_wide = run(wide, 1.0, "--gpubench")
    assert on_wide["passed"] and on_wide["baseline_binary"] == binary_of(wide)
    assert on_wide["reference_ms"] == pytest.approx(1.0, rel=0.002)
    wide_but_slow = run(wide, 1.45, "--gpubench")  # against the wide binary's own sessions
    assert (wide_but_slow["status"], wide_but_slow["passed"]) == ("regressed", False)
    # A save of the narrow binary extends its history, which becomes the latest; the wide
    # binary's history is kept as it was.
    run(narrow, 1.45, "--gpubench-save")
    saved = entry(fake, "test_bench.py::test_sum")
    assert saved["binary"] == binary_of(narrow) and len(saved["history"]) == 4
    assert saved["history"][:3] == slower
    [kept] = saved["others"]
    assert kept["binary"] == binary_of(wide) and kept["history"] == stored["history"]


@pytest.mark.slow
def test_a_gpu_the_history_lacks_is_judged_less_what_another_gpu_explains(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: a history saved on another GPU of the model (its sessions' ``machine``)
    judges this one less what another GPU alone may move the test: 9% slower (one H100 runs a
    compiled softmax so against another) passes and says why, where the history's own GPU
    fails it. Saving three sessions here, as the verdict says, is not refused as spoiling the
    history, and from then on this GPU is judged against its own sessions."""
    fake.makepyfile(test_bench=BENCH)
    for seed in ("1", "3", "4", "5", "6"):
        monkeypatch.setenv("FAKE_SEED", seed)
        fake.runpytest("--gpubench-save", NO_CONFIRM, "-k", "test_sum").assert_outcomes(
            passed=1, deselected=1
        )
    path = baseline_file(fake)
    data = json.loads(path.read_text())
    [here] = {info["machine"] for info in data["sessions"].values()}
    elsewhere = "GPU-618df060-2da1-c4d5-0033-a18f0e868e94"
    for info in data["sessions"].values():
        info["machine"] = elsewhere
    path.write_text(json.dumps(data))
    monkeypatch.setenv("FAKE_SEED", "2")
    monkeypatch.setenv("FAKE_SCALE", "1.03")
    args = ("-k", "test_sum", NO_CONFIRM, "--gpubench-threshold=2%")
    there = fake.runpytest("--gpubench", *args)
    there.assert_outcomes(passed=1, deselected=1)
    there.stdout.fnmatch_lines(
        [
            "test_sum: ok: slower by 3.0% vs history of 5 sessions; gate * (over the 2% "
            f"threshold); {here[:12]} is not in its history (5 sessions on 1 GPU): another GPU "
            "of this model alone may move it by up to *% (some tests' GPUs fall in two groups*",
        ]
    )
    # Three sessions saved here (the first judged, two recorded), none refused.
    saved = fake.runpytest("--gpubench-save", "--gpubench-sessions=3", *args)
    saved.assert_outcomes(passed=1, deselected=1)
    stored = read_baseline(fake)
    machines = [
        stored["sessions"][r["session"]]["machine"] for r in stored["benchmarks"][SUM]["history"]
    ]
    assert machines == [elsewhere] * 5 + [here] * 3
    own = fake.runpytest("--gpubench", *args)
    own.assert_outcomes(passed=1, deselected=1)
    own.stdout.no_fnmatch_line("*not in its history*")
    monkeypatch.setenv("FAKE_SCALE", str(1.03 * 1.5))
    fake.runpytest("--gpubench", *args).assert_outcomes(failed=1, deselected=1)
    # The history's own GPU fails the same +3%.
    for info in data["sessions"].values():
        info["machine"] = here
    path.write_text(json.dumps(data))
    monkeypatch.setenv("FAKE_SCALE", "1.03")
    fake.runpytest("--gpubench", *args).assert_outcomes(failed=1, deselected=1)


def test_another_pick_is_judged_on_time_and_named(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 45: an autotuner's pick the history has not seen is judged on time against the
    test's binary of the same work with the longest history, less what a pick alone
    explains (here the test's own four binaries within 0.4% of each other): +8% fails and
    names the pick, the same speed passes and is saved as another binary without an accept,
    and a run that picks it again is judged against its own sessions."""
    fake.makepyfile(test_bench=BENCH)
    axpy = {"name": "_axpy_kernel", "grid": [65536, 1, 1], "block": [128, 1, 1]}
    monkeypatch.setenv("FAKE_KERNELS", kernels(axpy | {"share": 1.0}))
    for seed in ("1", "3", "4", "5", "6"):
        monkeypatch.setenv("FAKE_SEED", seed)
        fake.runpytest("--gpubench-save", NO_CONFIRM, "-k", "test_sum").assert_outcomes(
            passed=1, deselected=1
        )
    # Three other picks of the same kernel, each from another machine, within 0.4%.
    picks = [(axpy | {"grid": [grid, 1, 1]}, scale) for grid, scale in PICKS]
    other_binaries(fake, "test_bench.py::test_sum", picks)
    pick = axpy | {"grid": [8192, 1, 1]}
    monkeypatch.setenv("FAKE_KERNELS", kernels(pick | {"share": 1.0}))
    monkeypatch.setenv("FAKE_SEED", "2")
    args = ("--gpubench", NO_CONFIRM, "-k", "test_sum", "--gpubench-json=out.json")
    monkeypatch.setenv("FAKE_SCALE", "1.08")
    slower = fake.runpytest(*args)
    slower.assert_outcomes(failed=1, deselected=1)
    change = "_axpy_kernel grid (65536,1,1) -> (8192,1,1)"
    slower.stdout.fnmatch_lines(
        [
            "test_sum regressed: 1.00 ms -> 1.08 ms (+8.0%; gate *",
            f"  another pick of the same work: {change}",
            "test_sum * +8.0% * regressed (another pick) *",
            "test_sum: regressed: slower by 8.0% vs history of 5 sessions; gate *; another pick "
            f"of the same work: {change} (a pick by the autotuner alone may move it by up to "
            "*% here: 4 binaries of this work seen)",
        ]
    )
    [line] = [x for x in slower.outlines if x.startswith("test_sum: regressed: ")]
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    assert f"\n{line}\n" in guide  # the guide's example is this line
    [measured] = json.loads((fake.path / "out.json").read_text())["results"]
    assert measured["kernel_changes"] == [change]
    assert measured["baseline_binary"] == binary_of(axpy)  # the longest history
    bar = measured["judgement"]["bar"]
    assert 0.03 < bar < 0.08  # the allowance widened it
    monkeypatch.setenv("FAKE_SCALE", "1.0")
    same = fake.runpytest(*args)
    same.assert_outcomes(passed=1, deselected=1)
    same.stdout.fnmatch_lines(
        [
            "test_sum * +0.0% * ok (another pick) (gate > 5%) *",
            "test_sum: ok: slower by 0.0% vs history of 5 sessions; gate * (over the 5% "
            f"threshold); another pick of the same work: {change} (*)",
        ]
    )
    saved = fake.runpytest("--gpubench-save", NO_CONFIRM, "-k", "test_sum")
    saved.assert_outcomes(passed=1, deselected=1)
    saved.stdout.no_fnmatch_line("*not saved*")
    kept = entry(fake, "test_bench.py::test_sum")
    assert kept["binary"] == binary_of(pick) and len(kept["history"]) == 1
    assert len(kept["others"]) == 3  # the oldest pick dropped: MAX_BINARIES
    again = fake.runpytest(*args)
    again.assert_outcomes(passed=1, deselected=1)
    [measured] = json.loads((fake.path / "out.json").read_text())["results"]
    assert measured["baseline_binary"] == measured["binary"] == binary_of(pick)
    assert measured["kernel_changes"] == []


def test_launch_gaps_of_a_graph_replay_are_noted(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=BENCH)
    monkeypatch.setenv("FAKE_KERNELS", kernels(SOFTMAX | {"share": 1.0}))
    monkeypatch.setenv("FAKE_DEVICE_MS", "0.5")
    result = fake.runpytest("--gpubench", "-k", "test_sum")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum: launch gaps are 50% of the graph time (kernels 500 µs of 1.00 ms per "
            "call: 1 launch (triton_per_fused_softmax_0 100%))"
        ]
    )


def test_auto_asks_for_the_graph_timer_a_baseline_was_taken_by(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function near the boundary between graph time and kernel time (launch gaps of 5%)
    is judged by the timer of its baseline in every session: never incomparable by a flip."""
    fake.makepyfile(test_bench=BENCH)
    monkeypatch.setenv("FAKE_NAME", "cupti-graph")
    fake.runpytest("--gpubench-save", "-k", "test_sum", NO_CONFIRM).assert_outcomes(
        passed=1, deselected=1
    )
    (fake.path / "timer-calls.log").unlink()
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    assert sorted(timer_calls(fake)) == [f"auto {KIND} False", f"cupti-graph {KIND} False"]
    (fake.path / "timer-calls.log").unlink()
    # a timer named by the user is the user's choice
    fake.runpytest("--gpubench", "--gpubench-timer=cuda-event", "-k", "test_sum", NO_CONFIRM)
    assert timer_calls(fake) == [f"cuda-event {KIND} False"]


def test_a_test_that_fails_skips_or_xfails_after_measuring_keeps_its_numbers(
    fake: pytest.Pytester,
) -> None:
    """pytest's outcomes are no Exception: the measurement still reaches the reports, and a
    test that did not pass is not saved."""
    fake.makepyfile(
        test_outcomes="""
        import pytest

        def test_fails(gpubench):
            gpubench(sum, [1, 2])
            pytest.fail("after measuring")

        def test_skips(gpubench):
            gpubench(sum, [1, 2])
            pytest.skip("after measuring")

        def test_xfails(gpubench):
            gpubench(sum, [1, 2])
            pytest.xfail("after measuring")

        def test_passes(gpubench):
            gpubench(sum, [1, 2])
        """
    )
    result = fake.runpytest("--gpubench-save", "--gpubench-json=out.json")
    result.assert_outcomes(failed=1, skipped=1, xfailed=1, passed=1)
    reported = json.loads((fake.path / "out.json").read_text())["results"]
    assert {r["test"]: r["passed"] for r in reported} == {
        "test_fails": False,
        "test_skips": False,
        "test_xfails": False,
        "test_passes": True,
    }
    assert list(read_baseline(fake)["benchmarks"]) == ["test_outcomes.py::test_passes"]


def test_no_more_sessions_are_recorded_when_the_first_saved_nothing(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile("def test_plain():\n    assert True\n")
    result = fake.runpytest("--gpubench-save", "--gpubench-sessions=3")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("*recording session*")
    result.stdout.no_fnmatch_line("*session 2/3*")
    assert timer_calls(fake) == []


def test_declared_flops_show_as_tflops_in_every_report(fake: pytest.Pytester) -> None:
    """Issue 18: flops given to the fixture or the marker show as TFLOP/s in the terminal
    table, the Markdown report and the JSON report."""
    fake.makepyfile(
        test_bench="""
        import pytest

        def test_a(gpubench):
            gpubench(abs, -1, flops=2e8)

        @pytest.mark.gpubench(flops=1e5)
        def test_b(gpubench):
            gpubench(abs, -1)

        def test_c(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest("--gpubench", "--gpubench-json=r.json", "--gpubench-markdown=r.md")
    result.assert_outcomes(passed=3)
    text = output(result)
    [header] = [line for line in text.splitlines() if line.startswith("test ")]
    assert header.split()[-1] == "TFLOP/s"
    document = json.loads((fake.path / "r.json").read_text())
    tflops = {r["test"]: r["tflops"] for r in document["results"]}
    assert tflops["test_c"] is None and tflops["test_a"] == pytest.approx(2e3 * tflops["test_b"])
    assert "| TFLOP/s |" in (fake.path / "r.md").read_text()


def test_a_call_faster_than_its_declared_flops_allow_fails_as_impossible(
    fake: pytest.Pytester,
) -> None:
    """Issue 18: flops= far beyond what this machine's float32 matmul does in the call's time
    fails the test as impossible, naming the measured rate; the JSON carries the rate, its
    dtype and the share of it."""
    fake.makepyfile(
        test_bench="""
        def test_skipped(gpubench):
            gpubench(abs, -1, flops=1e18)

        def test_honest(gpubench):
            gpubench(abs, -1, flops=10)
        """
    )
    result = fake.runpytest("--gpubench", "--gpubench-json=r.json")
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "FAILED test_bench.py::test_skipped" in text and "Traceback" not in text
    assert "over 3x what a float32 matmul reached on this device" in text
    results = {r["test"]: r for r in json.loads((fake.path / "r.json").read_text())["results"]}
    assert results["test_skipped"]["status"] == "impossible"
    honest = results["test_honest"]
    assert honest["status"] != "impossible" and honest["matmul_dtype"] == "float32"
    assert honest["matmul_tflops"] > 0 and 0 < honest["tflops_share"] < 1


def test_a_call_faster_than_its_declared_bytes_allow_fails_as_impossible(
    fake: pytest.Pytester,
) -> None:
    """Issue 18: bytes= far beyond what this machine's measured copies move in the call's
    time fails the test as impossible, in a run and in a save, which does not write it; the
    other tests are judged and saved as ever."""
    fake.makepyfile(
        test_bench="""
        def test_cached(gpubench):
            gpubench(abs, -1, bytes=1e15)

        def test_honest(gpubench):
            gpubench(abs, -1, bytes=1000)
        """
    )
    for args in (("--gpubench",), ("--gpubench-save",)):
        result = fake.runpytest(*args, "--gpubench-json=r.json")
        result.assert_outcomes(passed=1, failed=1)
        text = output(result)
        assert "FAILED test_bench.py::test_cached" in text and "Traceback" not in text
        assert "impossible" in text and "over 3x the fastest this device's copies allow" in text
        statuses = {
            r["test"]: r["status"]
            for r in json.loads((fake.path / "r.json").read_text())["results"]
        }
        assert statuses["test_cached"] == "impossible" and statuses["test_honest"] != "impossible"
    stored = json.loads(next((fake.path / ".gpubench").glob("*.json")).read_text())
    assert list(stored["benchmarks"]) == ["test_bench.py::test_honest"]


IN_PLACE = """
import torch

def test_in_place(gpubench):
    x = torch.zeros(4)
    y = gpubench(torch.Tensor.add_, x, 1)
    assert y.tolist() == [1.0] * 4  # the first call's result
    assert x[0].item() > 1  # what the timed calls did to their argument

def test_views_in_a_tuple(gpubench):
    q, k = torch.zeros(4), torch.ones(4)
    a, b, c = gpubench(lambda q, k: (q[1:].add_(1), k, torch.ones(2)), q, k)
    assert a.tolist() == [1.0] * 3 and b.tolist() == [1.0] * 4
    assert q[1].item() > 1

def test_a_result_of_its_own_is_not_copied(gpubench):
    made = []
    y = gpubench(lambda t: made.append(t * 2) or made[-1], torch.ones(4))
    assert y is made[0] and len(made) > 1
"""


def test_the_result_returned_is_the_first_calls_where_later_calls_write_into_it(
    pytester: pytest.Pytester,
) -> None:
    """Found on Liger-Kernel's rotary embedding, which rotates its arguments in place and
    returns views of them: the timed calls after the first rotated them again, and the
    fixture returned what the last call left, not the first call's result (a test that
    passed without --gpubench failed with it). A tensor of the result that shares memory
    with an argument is now copied after the first call."""
    pytest.importorskip("torch")
    pytester.makepyfile(IN_PLACE)
    result = pytester.runpytest("--gpubench", "--gpubench-timer=wall", "--gpubench-budget-s=0.05")
    result.assert_outcomes(passed=3)
