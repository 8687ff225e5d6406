"""Fresh processes that behave, and pytest's options that keep their meaning (issue 15).

Release 0.2 failed each of these (hostile trials on a CPU machine): a recording or confirming
child outlived a parent killed by SIGINT, SIGTERM or SIGKILL, saved a session after the user
cancelled, and left its temporary folder; Ctrl-C during a confirmation dropped the test from
every report; children deleted the parent's --basetemp; -x could not stop at a regression;
pytest-rerunfailures multiplied a confirmation's sessions; pytest-timeout charged the
confirmations to the last test (signal method: INTERNALERROR; thread method: orphans).

The parent is a real ``python -m pytest`` process here (signals, exits and orphans are what is
tested), the children its real fresh processes; the fake timer's conftest records their pids
(FAKE_CHILD_PIDS) and makes them slow to start (FAKE_CHILD_START_S), so that the signal lands
while they run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest
from support import BENCH, NO_CONFIRM, output, read_baseline

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc"),
]

SUM, JOIN = "test_bench.py::test_sum", "test_bench.py::test_join"
# How long a killed parent's children may take to notice and go.
GONE_WITHIN_S = 10.0


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


class Parent:
    """``python -m pytest ARGS`` in the pytester directory, with a temporary directory of its
    own (where its children's folders go) and a file its children write their pids to."""

    def __init__(self, pytester: pytest.Pytester, *args: str) -> None:
        self.tmp = pytester.path / "tmp"
        self.tmp.mkdir(exist_ok=True)
        self.pids_file = pytester.path / "child-pids.txt"
        env = dict(os.environ, TMPDIR=str(self.tmp), FAKE_CHILD_PIDS=str(self.pids_file))
        self.log = pytester.path / "parent.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                # faulthandler: a parent that hangs is made to say where (signal_once)
                [sys.executable, "-X", "faulthandler", "-m", "pytest", "-p", "no:cacheprovider"]
                + list(args),
                cwd=pytester.path,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def children(self) -> list[int]:
        if not self.pids_file.exists():
            return []
        return [int(line) for line in self.pids_file.read_text().split()]

    def signal_once(self, sig: signal.Signals, children: int) -> None:
        """Wait for ``children`` children to run, then send ``sig`` to this process alone."""
        running = wait_until(
            lambda: len(self.children()) >= children or self.proc.poll() is not None, 120
        )
        assert running and self.proc.poll() is None, self.output()
        os.kill(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGABRT)  # its threads' stacks into its log
            self.proc.wait(timeout=30)
            raise AssertionError(f"no exit 120 s after {sig!r}:\n{self.output()}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def folders(self) -> list[str]:
        return sorted(p.name for p in self.tmp.iterdir() if p.name.startswith("gpubench-child"))


def assert_children_gone_and_clean(parent: Parent) -> None:
    pids = parent.children()
    assert pids
    gone = wait_until(lambda: not any(alive(pid) for pid in pids), GONE_WITHIN_S)
    for pid in pids:  # do not leave one running when this fails
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert gone, f"fresh processes outlived their parent:\n{parent.output()}"
    assert wait_until(lambda: parent.folders() == [], GONE_WITHIN_S), parent.folders()


@pytest.fixture
def slow_children(monkeypatch: pytest.MonkeyPatch) -> None:
    """Children that take half a minute to start: alive whenever the parent is signalled."""
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=str)
def test_a_cancelled_recording_leaves_no_process_no_folder_and_no_session(
    fake: pytest.Pytester, slow_children: None, sig: signal.Signals
) -> None:
    fake.makepyfile(test_bench=BENCH)
    parent = Parent(fake, "--gpubench-save", "--gpubench-sessions=3")
    parent.signal_once(sig, children=1)  # session 1 is saved, session 2 runs in a child
    assert_children_gone_and_clean(parent)
    data = read_baseline(fake)
    assert len(data["sessions"]) == 1  # no session saved after the cancel
    assert len(data["benchmarks"][SUM]["history"]) == 1
    if sig is not signal.SIGKILL:  # the parent had its say: one consistent story
        text = parent.output()
        # SIGTERM (a cancelled CI job) ends the run as Ctrl-C does: interrupted, not killed
        assert parent.proc.returncode == pytest.ExitCode.INTERRUPTED, text
        assert "gpubench: session 2/3: interrupted, not recorded" in text
        assert "baseline written: " in text
        assert "ERROR: interrupted: 1 of 3 sessions written, 2 not" in text
        assert "baseline not written" not in text


@pytest.fixture
def flagged(saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """BENCH with a baseline of three sessions, test_sum now 30% slower: flagged, and
    confirmed in two fresh processes."""
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.3}))
    return saved


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=str)
def test_a_killed_parent_takes_its_confirming_children_with_it(
    flagged: pytest.Pytester, slow_children: None, sig: signal.Signals
) -> None:
    before = read_baseline(flagged)
    parent = Parent(flagged, "--gpubench")
    parent.signal_once(sig, children=2)
    assert_children_gone_and_clean(parent)
    assert read_baseline(flagged) == before


def test_a_child_that_hangs_importing_conftest_dies_with_its_killed_parent(
    flagged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its lifeline starts before the user's conftest files load."""
    monkeypatch.setenv("FAKE_CHILD_IMPORT_S", "30")
    parent = Parent(flagged, "--gpubench")
    parent.signal_once(signal.SIGKILL, children=2)
    assert_children_gone_and_clean(parent)


def test_a_confirmation_that_cannot_run_leaves_the_verdict_unconfirmed(
    flagged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh processes that crash (here: at their start) confirm nothing: the first session's
    verdict stands as unconfirmed and fails nothing, and says why."""
    monkeypatch.setenv("FAKE_CHILD_CRASH", "1")
    result = flagged.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_sum *unconfirmed *",
            "test_sum: unconfirmed: not confirmed: a fresh process measured nothing (exit code 3: "
            "internal error): *RuntimeError: no GPU here*; its first session: slower by *",
        ]
    )
    results = {r["key"]: r for r in json.loads((flagged.path / "out.json").read_text())["results"]}
    assert (results[SUM]["status"], results[SUM]["confirmations"]) == ("unconfirmed", [])


def test_recorded_sessions_refuse_a_selection_that_changes_from_run_to_run(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(test_bench=BENCH)
    for option in ("--lf", "--sw"):
        result = fake.runpytest(
            "--gpubench-save", "--gpubench-sessions=2", "-p", "cacheprovider", option
        )
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(
            [f"ERROR: --gpubench-sessions 2 records the selection of the command line * {option} *"]
        )


def test_fresh_processes_leave_the_parents_log_file_alone(flagged: pytest.Pytester) -> None:
    flagged.makepyfile(
        test_bench=BENCH.replace(
            "def test_sum(gpubench):",
            "def test_sum(gpubench):\n"
            "    import logging, os\n"
            "    logging.getLogger('user').warning('LINE from pid %d', os.getpid())\n",
        )
    )
    result = flagged.runpytest_subprocess("--gpubench", "--log-file=run.log")
    result.stdout.fnmatch_lines(["test_sum: confirmed in 2 fresh processes *"])
    lines = (flagged.path / "run.log").read_text().splitlines()
    assert len([line for line in lines if "LINE from pid" in line]) == 1  # the parent's alone


@pytest.mark.parametrize("options", [[], ["-x"]], ids=["at the run's end", "in the test"])
def test_ctrl_c_during_a_confirmation_stops_the_run_and_keeps_the_test_in_its_reports(
    flagged: pytest.Pytester, slow_children: None, options: list[str]
) -> None:
    args = ["--gpubench", "--gpubench-json=out.json", "--junitxml=junit.xml", "-rA", *options]
    parent = Parent(flagged, *args)
    parent.signal_once(signal.SIGINT, children=2)
    assert_children_gone_and_clean(parent)
    text = parent.output()
    assert parent.proc.returncode == pytest.ExitCode.INTERRUPTED, text
    assert "no tests ran" not in text
    # Its verdict was interrupted: not passed, as pytest passes no test it interrupts; it
    # fails nothing either (unconfirmed). Skipped, with why, in the terminal and in JUnit.
    why = f"no verdict: interrupted while confirming {SUM}"
    assert "PASSED test_bench.py::test_sum" not in text
    assert f"SKIPPED [1] test_bench.py:8: {why}" in text  # at the test, as pytest.skip
    assert "not timed (skipped)" not in text  # it was timed
    cases = ElementTree.parse(flagged.path / "junit.xml").getroot().iter("testcase")
    [case] = [c for c in cases if c.get("name") == "test_sum"]
    [skipped] = case.findall("skipped")
    assert skipped.get("message") == why
    assert f"Interrupted: interrupted while confirming {SUM}" in text
    assert "test_sum: unconfirmed: not confirmed: interrupted; its first session: slower by" in text
    # (flagged tests are confirmed at the run's end: the others ran before it)
    results = json.loads((flagged.path / "out.json").read_text())["results"]
    [result] = [r for r in results if r["key"] == SUM]
    assert (result["confirmations"], result["status"]) == ([], "unconfirmed")


def test_fresh_processes_leave_the_parents_basetemp_alone(flagged: pytest.Pytester) -> None:
    """pytester, like many users, passes --basetemp; a child given the same one deletes it
    when its test first asks for a temporary directory, under the parent's running tests
    (with xdist, under the other workers' tests too)."""
    flagged.makepyfile(
        test_a_keeps="""
        def test_keeps(tmp_path):
            (tmp_path / "kept.txt").write_text("mine")
        """,
        test_bench=BENCH.replace("def test_sum(gpubench):", "def test_sum(gpubench, tmp_path):"),
    )
    basetemp = flagged.path / "basetemp"
    result = flagged.runpytest("--gpubench", f"--basetemp={basetemp}")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["test_sum: confirmed in 2 fresh processes *"])
    [kept] = basetemp.rglob("kept.txt")
    assert kept.read_text() == "mine"


@pytest.mark.parametrize("option", ["-x", "--maxfail=1"])
def test_a_confirmed_regression_stops_the_run_under_x_and_maxfail(
    flagged: pytest.Pytester, option: str
) -> None:
    result = flagged.runpytest("--gpubench", option)
    result.assert_outcomes(failed=1)  # test_join, after test_sum, never ran
    result.stdout.fnmatch_lines(["test_sum regressed: *", "*stopping after 1 failures*"])


def test_lf_reruns_the_confirmed_regression(flagged: pytest.Pytester) -> None:
    flagged.runpytest("--gpubench", "-p", "cacheprovider").assert_outcomes(passed=1, failed=1)
    again = flagged.runpytest("--gpubench", "-p", "cacheprovider", "--lf")
    again.assert_outcomes(failed=1)  # test_join is not run again
    again.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure*"])


def test_a_rerun_repeats_the_test_and_its_confirmation_without_adding_sessions(
    flagged: pytest.Pytester,
) -> None:
    pytest.importorskip("pytest_rerunfailures")
    result = flagged.runpytest("--gpubench", "--reruns=1", "--gpubench-json=out.json")
    assert result.parseoutcomes() == {"passed": 1, "failed": 1, "rerun": 1}
    result.stdout.fnmatch_lines(["test_sum: confirmed in 2 fresh processes (medians *)"])
    results = {r["key"]: r for r in json.loads((flagged.path / "out.json").read_text())["results"]}
    assert len(results[SUM]["confirmations"]) == 2
    assert len({r["session"] for r in results[SUM]["confirmations"]}) == 2


def test_a_save_under_reruns_records_each_session_once(flagged: pytest.Pytester) -> None:
    """A save fails a confirmed regression, and the rerun fails it again: saved by neither
    attempt. Accepted, it is saved once: a new epoch of the last attempt's own session."""
    pytest.importorskip("pytest_rerunfailures")
    before = read_baseline(flagged)["benchmarks"][SUM]
    refused = flagged.runpytest("--gpubench-save", "--reruns=1")
    assert refused.parseoutcomes() == {"passed": 1, "failed": 1, "rerun": 1}
    assert read_baseline(flagged)["benchmarks"][SUM] == before
    accepted = flagged.runpytest("--gpubench-save", "--gpubench-accept", "--reruns=1")
    accepted.assert_outcomes(passed=2)
    history = read_baseline(flagged)["benchmarks"][SUM]["history"]
    assert len(history) == 1 and history[0]["session"] not in {
        r["session"] for r in before["history"]
    }


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_confirmations_are_not_charged_to_the_tests_timeout(
    flagged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """Each fresh process takes 10 s to start, the test's timeout is 8 s: only the time of the
    test itself counts (the children bound their own tests by the same timeout, which a
    loaded CI machine must not reach: 4 s once did)."""
    pytest.importorskip("pytest_timeout")
    monkeypatch.setenv("FAKE_CHILD_START_S", "10")
    pids = flagged.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    result = flagged.runpytest_subprocess(
        "--gpubench", "--timeout=8", f"--timeout-method={method}", "--gpubench-json=out.json"
    )
    text = output(result)
    assert "INTERNALERROR" not in text and "Timeout" not in text, text
    result.assert_outcomes(passed=1, failed=1)
    results = {r["key"]: r for r in json.loads((flagged.path / "out.json").read_text())["results"]}
    assert len(results[SUM]["confirmations"]) == 2
    assert not any(alive(int(pid)) for pid in pids.read_text().split())


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_a_flagged_tests_evidence_trace_is_not_charged_to_its_timeout(
    flagged: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """Issue 46: a flagged test's evidence trace, taken inside its call, added 3.4 s there,
    and a regression read as a pytest-timeout failure with no measurements. The trace takes
    6 s here, the test's timeout is 4 s: the regression is reported as one."""
    pytest.importorskip("pytest_timeout")
    monkeypatch.setenv("FAKE_TRACE_S", "6")
    result = flagged.runpytest_subprocess(
        "--gpubench", NO_CONFIRM, "--timeout=4", f"--timeout-method={method}"
    )
    text = output(result)
    assert "Timeout" not in text and "INTERNALERROR" not in text, text
    result.assert_outcomes(passed=1, failed=1)
    assert "test_sum regressed" in text and "evidence: a profiler trace of one call" in text


def test_a_test_that_times_out_costs_the_others_nothing(fake: pytest.Pytester) -> None:
    pytest.importorskip("pytest_timeout")
    fake.makepyfile(
        test_bench=BENCH
        + """

def test_hangs(gpubench):
    import time

    gpubench(sum, [1, 2])
    time.sleep(60)
"""
    )
    result = fake.runpytest_subprocess(
        "--gpubench-save", NO_CONFIRM, "--timeout=3", "--gpubench-json=out.json"
    )
    result.assert_outcomes(passed=2, failed=1)
    assert "INTERNALERROR" not in output(result)
    saved = read_baseline(fake)["benchmarks"]
    assert sorted(saved) == [JOIN, SUM]  # the timed-out test alone is not saved
    results = json.loads((fake.path / "out.json").read_text())["results"]
    passed = {r["key"]: r["passed"] for r in results}  # what it measured is reported
    assert passed == {JOIN: True, SUM: True, "test_bench.py::test_hangs": False}
