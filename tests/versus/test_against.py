"""``--gpubench-against REF`` as users run it, on generated git repositories with the fake
timer: the working tree against a revision, both measured in alternating fresh processes.

The fake timer multiplies a function's time by its ``fake_factor`` attribute: a commit that
sets it is a commit that makes that function slower, and only a process that imports that
commit's code sees it (the revision's side imports the revision's module, not the working
tree's)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from support import (
    IMPORT_HOOK,
    KERNELS,
    PATH_HOOK,
    TESTS,
    USAGE_ERROR,
    commit,
    failing_on,
    git,
    in_lib,
    output,
    slower,
)

if shutil.which("git") is None:
    pytest.skip("git is not on PATH", allow_module_level=True)

pytest_plugins = ["pytester"]

# The structure these tests were written for (lockstep has its own: test_lockstep.py).
pytestmark = pytest.mark.usefixtures("processes_pairing")

# Fewer pairs than the default: each pair is two fresh pytest processes.
FAST = ("--gpubench-pairs=2", "--gpubench-confirm=0")


@pytest.mark.slow
def test_against_its_own_revision_nothing_fails(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a bisect step after BAD's: judged in BAD's family (versus/bisect.py's Focus).
    monkeypatch.setenv("PYTEST_GPUBENCH_FAMILY", "7")
    result = repo.runpytest("--gpubench-against=HEAD", *FAST, "--gpubench-json=out.json")
    result.assert_outcomes(passed=2)
    text = output(result)
    assert "against HEAD (" in text and "2 pairs of fresh processes" in text
    assert text.count(" same ") >= 2 or "2 same" in text
    assert "regressed" not in text
    assert "evidence" not in text  # nothing failed: no process more for evidence
    results = json.loads((repo.path / "out.json").read_text())["results"]
    assert {r["family"] for r in results} == {7}


@pytest.mark.slow
@pytest.mark.parametrize("where", ["working tree", "revision"])
def test_a_function_failing_while_timed_on_one_side_is_that_sides(
    repo: pytest.Pytester, where: str
) -> None:
    """``work`` fails on its 10th call, while timed (its first calls pass, as in your run's
    untimed call): on your side the test fails, saying why (it passed as `removed`); on the
    revision's it is `unmeasurable` with the error (it had no line)."""
    repo.makepyfile(kernels=failing_on(10, "raise ValueError('call 10')"))
    if where == "revision":
        commit(repo.path, "a kernel failing on its 10th call")
        repo.makepyfile(kernels=KERNELS.format(factor=1.0))
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_sum", *FAST)
    text = output(result)
    if where == "working tree":
        result.assert_outcomes(failed=1)
        assert "crashed: its test failed in the working tree's timed process" in text
    else:
        result.assert_outcomes(passed=1)
        assert "unmeasurable: its test failed on HEAD" in text
    assert "(ValueError: call 10)" in text and "Traceback" not in text


@pytest.mark.slow
def test_a_slower_commit_fails_its_test_and_names_both_medians(repo: pytest.Pytester) -> None:
    slower(repo, 1.08)
    commit(repo.path, "a slower kernel")
    result = repo.runpytest("--gpubench-against=HEAD~1", *FAST)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "test_sum" in text and "regressed" in text
    assert "slower by 8.0% than HEAD~1" in text
    # the revision's median and the working tree's: 1.00 ms against 1.08 ms
    assert "1.00 ms" in text and "1.08 ms" in text
    # Issue 18: the evidence of both sides, from one more fresh process of each, named in
    # the failure; none of the test that passed.
    evidence = repo.path / "gpubench-evidence"
    [base] = (evidence / "base").iterdir()
    [head] = (evidence / "head").iterdir()
    assert base.name.startswith("test_bench.py_test_sum-") and base.name == head.name
    assert f"evidence: a profiler trace of one call, {head}" in text
    assert f"evidence: the revision's, {base}" in text
    assert "a profiler trace of one call of 1 failing test" in text


@pytest.mark.slow
def test_the_working_tree_is_the_head_side_dirty_or_not(repo: pytest.Pytester) -> None:
    slower(repo, 0.9)  # not committed
    result = repo.runpytest("--gpubench-against=main", *FAST)
    result.assert_outcomes(passed=2)
    assert "improved" in output(result)


@pytest.mark.slow
def test_tests_on_one_side_only_are_reported_not_failed(repo: pytest.Pytester) -> None:
    repo.makepyfile(test_gone="def test_old(gpubench):\n    assert gpubench(len, 'ab') == 2\n")
    commit(repo.path, "a test that the working tree removes")
    git(repo.path, "rm", "-q", "test_gone.py")
    repo.makepyfile(test_new="def test_fresh(gpubench):\n    assert gpubench(abs, -1) == 1\n")
    result = repo.runpytest("--gpubench-against=HEAD", *FAST)
    result.assert_outcomes(passed=3)
    text = output(result)
    assert "test_fresh" in text and " new " in text
    assert "test_old" in text and "removed" in text


@pytest.mark.slow
def test_under_xdist_a_slower_commit_fails_its_test_in_a_worker(repo: pytest.Pytester) -> None:
    """-n 2: the workers collect and run the tests, the controller times both sides once
    they have collected; a worker's test takes its verdict, a marker's threshold holds."""
    repo.makepyfile(
        test_loose="""
import pytest
from kernels import work


@pytest.mark.gpubench(threshold=0.5)
def test_loose(gpubench):
    assert gpubench(work, 100) == 4950
"""
    )
    commit(repo.path, "a test with a loose threshold")
    slower(repo, 1.3)
    result = repo.runpytest_subprocess("-n", "2", "--gpubench-against=HEAD", *FAST)
    result.assert_outcomes(passed=2, failed=1)
    text = output(result)
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert re.search(r"FAILED test_bench.py::test_sum", text)
    assert "slower by 30.0% than HEAD" in text and "1.30 ms" in text
    assert "test_loose" in text and "2 pairs of fresh processes" in text
    # the fresh processes' tests were timed there, none in a worker
    assert re.search(r"test_loose .*same", text)


@pytest.mark.slow
def test_under_xdist_loadgroup_a_grouped_test_still_takes_its_verdict(
    repo: pytest.Pytester,
) -> None:
    """--dist loadgroup renames a grouped test in the workers (``id@group``); its verdict,
    found under the id the fresh processes know, still reaches it."""
    repo.makepyfile(
        test_bench="""
import pytest
from kernels import work


@pytest.mark.xdist_group("gpu")
def test_sum(gpubench):
    assert gpubench(work, 100) == 4950
"""
    )
    commit(repo.path, "a grouped test")
    slower(repo, 1.3)
    args = ("-n", "2", "--dist", "loadgroup", "--gpubench-against=HEAD", *FAST)
    result = repo.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    assert "test_sum@gpu" in output(result) and "slower by 30.0% than HEAD" in output(result)


@pytest.mark.slow
def test_under_xdist_a_collection_error_stops_before_anything_runs(
    repo: pytest.Pytester,
) -> None:
    """As pytest does without xdist: no test runs, none passes untimed."""
    slower(repo, 1.3)
    repo.makepyfile(test_broken="import not_a_module\n")
    result = repo.runpytest_subprocess("-n", "2", "--gpubench-against=HEAD", *FAST)
    text = output(result)
    assert result.ret == pytest.ExitCode.INTERRUPTED, text
    assert "errors during collection" in text or "error during collection" in text
    assert " passed" not in text and "pair 1/" not in text


# A test that worker gw1 collects twice and any other process once.
APART = """
import os

import pytest


@pytest.mark.parametrize("n", [1, 2] if os.environ.get("PYTEST_XDIST_WORKER") == "gw1" else [1])
def test_apart(gpubench, n):
    assert gpubench(abs, -n) == n
"""


@pytest.mark.slow
def test_under_xdist_workers_that_collect_different_tests_time_nothing(
    repo: pytest.Pytester,
) -> None:
    """xdist runs nothing when its workers' collections differ: nothing is timed either."""
    repo.makepyfile(test_apart=APART)
    result = repo.runpytest_subprocess("-n", "2", "--gpubench-against=HEAD", *FAST)
    text = output(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    # xdist's own message, its workers in the order they collected
    assert re.search(r"Different tests were collected between gw[01] and gw[01]", text)
    assert "gpubench: workers gw0 and gw1 collected different tests: nothing is timed" in text
    assert " passed" not in text and "pair 1/" not in text
    assert "Traceback" not in text and "INTERNALERROR" not in text


@pytest.mark.slow
def test_under_xdist_dist_each_compares_workers_that_collect_different_tests(
    repo: pytest.Pytester,
) -> None:
    """--dist each runs each worker's own collection: the comparison goes ahead."""
    repo.makepyfile(test_apart=APART)
    args = ("-n", "2", "--dist", "each", "--gpubench-against=HEAD", *FAST)
    result = repo.runpytest_subprocess(*args)
    text = output(result)
    assert result.ret == pytest.ExitCode.OK, text
    assert "pair 1/2" in text and "collected different tests" not in text


@pytest.mark.slow
def test_under_xdist_against_its_own_revision_nothing_fails(repo: pytest.Pytester) -> None:
    result = repo.runpytest_subprocess("-n", "2", "--gpubench-against=HEAD", *FAST)
    result.assert_outcomes(passed=2)
    text = output(result)
    assert "regressed" not in text and text.count(" same") >= 2
    assert "lockstep runs without" not in text  # processes were asked (processes_pairing)
    # Lockstep asked, explicitly or by default: the run says why it pairs processes instead.
    lockstep = ("-n", "2", "--gpubench-against=HEAD", "--gpubench-pairing=lockstep", *FAST)
    asked = repo.runpytest_subprocess(*lockstep)
    asked.assert_outcomes(passed=2)
    said = "timed in pairs of fresh processes, one of each side (lockstep runs without pytest-x"
    assert said in output(asked)


# What each fresh process timed, on which GPU and side, to the file $LANE_LOG (read at import:
# the plugin takes its variables from the environment as it configures).
LANE_EVENTS = """
import os as _os

_LANE = (_os.environ.get("PYTEST_GPUBENCH_CHILD"), _os.environ.get("PYTEST_GPUBENCH_DEVICE"))


def pytest_collection_finish(session):
    if _LANE[0] and "LANE_LOG" in _os.environ:
        side = "head" if _os.getcwd() == {repo!r} else "base"
        with open(_os.environ["LANE_LOG"], "a") as log:
            log.write(" ".join([_LANE[1], side, *(i.nodeid for i in session.items)]) + "\\n")
"""


def two_gpus_logged(repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two GPUs faked in this process, and each fresh process writing what it timed, on
    which GPU and side (LANE_EVENTS, committed) to the log returned."""
    from pytest_gpubench.timing import gpus

    conftest = repo.path / "conftest.py"
    conftest.write_text(conftest.read_text() + LANE_EVENTS.format(repo=str(repo.path)))
    commit(repo.path, "lane events")
    log = repo.path / "lanes.log"
    monkeypatch.setenv("LANE_LOG", str(log))
    monkeypatch.setattr(gpus, "visible_devices", lambda: 2)
    return log


def lanes_of(log: Path) -> dict[str, list[tuple[str, ...]]]:
    """Each GPU's processes in the order they ran: (side, test ids...)."""
    lanes: dict[str, list[tuple[str, ...]]] = {}
    for line in log.read_text().splitlines():
        device, side, *tests = line.split()
        lanes.setdefault(device, []).append((side, *tests))
    return lanes


@pytest.mark.slow
def test_under_xdist_with_two_gpus_each_times_its_share_in_its_own_pairs(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-n 2 where two GPUs are visible: a relay of fresh processes on each, over half the
    tests each, in alternating pairs of its own; the verdicts as on one GPU."""
    log = two_gpus_logged(repo, monkeypatch)
    slower(repo, 1.3)
    # in this process (its GPUs faked): pytest-benchmark's warning under xdist is an error here
    result = repo.runpytest("-p", "no:benchmark", "-n", "2", "--gpubench-against=HEAD", *FAST)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "slower by 30.0% than HEAD" in text and "FAILED test_bench.py::test_sum" in text
    assert "GPU 0, pair 1/" in text and "GPU 1, pair 1/" in text
    lanes = lanes_of(log)
    # the first GPU the first test, the second the other; base first in odd pairs
    order = ["base", "head", "head", "base"]
    # then on the first GPU, one process of each side traces the failing test (evidence)
    evidence = [("base", "test_bench.py::test_sum"), ("head", "test_bench.py::test_sum")]
    assert lanes["0"] == [(side, "test_bench.py::test_sum") for side in order] + evidence
    assert lanes["1"] == [(side, "test_bench.py::test_join") for side in order]


@pytest.mark.slow
def test_under_xdist_with_two_gpus_a_later_look_splits_its_pairs_between_them(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tests still unsure after the first look take their next pairs in blocks, one per
    GPU, each with every unsure test: fewer processes than a share of the tests in every
    pair; each GPU goes on alternating base and head; a test's pairs come from both."""
    log = two_gpus_logged(repo, monkeypatch)
    slower(repo, 1.3)
    # one pair judges nothing: both tests are unsure, and take 7 more
    result = repo.runpytest(
        "-p", "no:benchmark", "-n", "2", "--gpubench-against=HEAD", "--gpubench-pairs=1"
    )
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "GPU 0, pair 5/8" in text and "GPU 1, pair 6/8" in text and "pair 8/8" in text
    lanes = lanes_of(log)
    both = ("test_bench.py::test_join", "test_bench.py::test_sum")
    # the first look: each GPU its test; then GPU 0 pairs 2-5, GPU 1 pairs 6-8, both tests
    assert lanes["0"][:2] == [
        ("base", "test_bench.py::test_sum"),
        ("head", "test_bench.py::test_sum"),
    ]
    assert lanes["1"][:2] == [
        ("base", "test_bench.py::test_join"),
        ("head", "test_bench.py::test_join"),
    ]
    assert [(side, *sorted(tests)) for side, *tests in lanes["0"][2:-2]] == [
        (side, *both) for side in ["head", "base", "base", "head"] * 2
    ]
    # the failing test's evidence, one process of each side on the first GPU
    assert lanes["0"][-2:] == [
        ("base", "test_bench.py::test_sum"),
        ("head", "test_bench.py::test_sum"),
    ]
    assert [(side, *sorted(tests)) for side, *tests in lanes["1"][2:]] == [
        (side, *both) for side in ["head", "base", "base", "head", "head", "base"]
    ]
    assert "over 8 pairs" in text


def test_pair_blocks_keep_each_gpus_sides_alternating() -> None:
    from pytest_gpubench.versus.ab import pair_blocks

    assert pair_blocks(range(4, 11), 2) == [range(4, 8), range(8, 11)]
    assert pair_blocks(range(4, 11), 4) == [range(4, 6), range(6, 8), range(8, 10), range(10, 11)]
    assert pair_blocks(range(2, 3), 2) == [range(2, 2), range(2, 3)]
    assert pair_blocks(range(3, 10), 1) == [range(3, 10)]
    # every block but the last starts a pair of the same parity as the look's first
    for lanes in (2, 3, 4):
        for count in range(1, 12):
            blocks = pair_blocks(range(4, 4 + count), lanes)
            assert [i for b in blocks for i in b] == list(range(4, 4 + count))
            assert all(len(b) % 2 == 0 for b in blocks[:-1])


# What each fresh process does, in order, to the file $RELAY_LOG: "start" when its conftest
# loads, "session" as its session starts (after the plugin's own start: the device pinned),
# "measure" as its first test starts, "slept" 6 s later, "exit" as it ends; each with its
# pid, side (the revision's side runs in its checkout) and time.
RELAY_EVENTS = """
import os as _os, time as _time

_SIDE = "head" if _os.getcwd() == {repo!r} else "base"
_CHILD = bool(_os.environ.get("PYTEST_GPUBENCH_CHILD"))  # read before the plugin takes it
_FIRST = []


def _event(what):
    if _CHILD and "RELAY_LOG" in _os.environ:
        with open(_os.environ["RELAY_LOG"], "a") as log:
            log.write(f"{{what}} {{_os.getpid()}} {{_SIDE}} {{_time.time()}}\\n")


_event("start")


def pytest_sessionstart(session):
    _event("session")


def pytest_runtest_call(item):
    if not _FIRST:
        _FIRST.append(1)
        _event("measure")
        if _CHILD:
            _time.sleep(6)
            _event("slept")


def pytest_unconfigure(config):
    _event("exit")
"""


@pytest.mark.slow
def test_the_sides_take_the_device_in_turn_each_starting_while_the_one_before_times(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """ABBA order on the device, each process's start-up overlapping the one before it, and
    its session (the device pinned, collection) only once the one before it is done."""
    conftest = repo.path / "conftest.py"
    conftest.write_text(conftest.read_text() + RELAY_EVENTS.format(repo=str(repo.path)))
    commit(repo.path, "events")
    log = tmp_path / "events.log"
    monkeypatch.setenv("RELAY_LOG", str(log))
    result = repo.runpytest("--gpubench-against=HEAD", *FAST)
    result.assert_outcomes(passed=2)
    events = [line.split() for line in log.read_text().splitlines()]
    measured = [(pid, side) for what, pid, side, _ in events if what == "measure"]
    assert [side for _, side in measured] == ["base", "head", "head", "base"], events
    where = {(what, pid): n for n, (what, pid, _, _) in enumerate(events)}
    when = {(what, pid): float(t) for what, pid, _, t in events}
    for (before, _), (after, _) in itertools.pairwise(measured):
        # the next one loaded its conftest while this one still held the device
        assert where["start", after] < where["exit", before], events
        # and started its session once this one's test was over (its start-up takes ~3 s)
        assert when["session", after] >= when["slept", before], events


@pytest.mark.slow
def test_the_revisions_side_finds_its_code_where_the_working_tree_finds_its_own(
    repo: pytest.Pytester,
) -> None:
    in_lib(repo, PATH_HOOK)
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_sum", *FAST)
    result.assert_outcomes(failed=1)
    assert "slower by 8.0% than HEAD" in output(result)


@pytest.mark.slow
def test_a_revisions_side_that_imports_the_working_trees_code_is_one_line(
    repo: pytest.Pytester,
) -> None:
    in_lib(repo, IMPORT_HOOK)
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_sum", *FAST)
    assert result.ret == USAGE_ERROR
    text = output(result)
    [line] = [line for line in text.splitlines() if "code not of its side" in line]
    assert f"imported kernels ({repo.path.resolve() / 'lib' / 'kernels.py'})" in line
    assert "nothing is judged" in line and "Traceback" not in text
    assert "pair 2/" not in text  # stopped at the revision's first process, not after the look


@pytest.mark.slow
def test_with_two_gpus_a_side_that_imports_the_other_sides_code_stops_both_relays(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check at each process holds on every GPU's relay: the first that finds it stops
    them all, in one line, before a second pair."""
    from pytest_gpubench.timing import gpus

    in_lib(repo, IMPORT_HOOK)
    monkeypatch.setattr(gpus, "visible_devices", lambda: 2)
    result = repo.runpytest("-p", "no:benchmark", "-n", "2", "--gpubench-against=HEAD", *FAST)
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert [line for line in text.splitlines() if "code not of its side" in line]
    assert "GPU 0, pair 1/" in text and "GPU 1, pair 1/" in text  # both relays ran
    assert "pair 2/" not in text and "Traceback" not in text


# A fresh process started after a process died (the file {died} made): slow to start.
SLOW_AFTER_A_DEATH = """
import os as _os, time as _time

if _os.environ.get("PYTEST_GPUBENCH_CHILD") and _os.path.exists({died!r}):
    _time.sleep(120)
"""

# The revision's tests: test_sum ends its process (saying so first), test_join takes 4 s.
DYING_TESTS = """
import os, time

from kernels import work


def test_sum(gpubench):
    open({died!r}, "w").close()
    os.abort()


def test_join(gpubench):
    time.sleep(4)
    assert gpubench(",".join, ["a", "b"]) == "a,b"
"""


@pytest.mark.slow
def test_with_two_gpus_a_relay_timing_a_rest_again_stops_with_the_others(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On GPU 0 the revision's process dies in test_sum, and a fresh one (120 s to start
    here) is to time its rest; on GPU 1 the revision's side turns out to import the other
    side's code, which stops every relay: GPU 0's stops at once, not once its rest is timed."""
    from pytest_gpubench.timing import gpus

    in_lib(repo, IMPORT_HOOK)
    died = str(repo.path / "died")
    conftest = repo.path / "conftest.py"
    conftest.write_text(conftest.read_text() + SLOW_AFTER_A_DEATH.format(died=died))
    repo.makepyfile(test_bench=DYING_TESTS.format(died=died))
    commit(repo.path, "a test that ends its process, and a slow one")
    repo.makepyfile(test_bench=TESTS)
    monkeypatch.setattr(gpus, "visible_devices", lambda: 2)
    started = time.monotonic()
    result = repo.runpytest("-p", "no:benchmark", "-n", "2", "--gpubench-against=HEAD", *FAST)
    assert time.monotonic() - started < 75
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert [line for line in text.splitlines() if "code not of its side" in line]
    assert "died in test_bench.py::test_sum" in text and "Traceback" not in text


@pytest.mark.slow
def test_a_path_inside_the_repository_given_apart_reaches_both_sides(
    repo: pytest.Pytester,
) -> None:
    """Inside the user's directory, a path given apart from its option is accepted there;
    the revision's side, in its checkout, runs with the same arguments."""
    report = repo.path / "out.json"
    result = repo.runpytest("--gpubench-against=HEAD", "--gpubench-json", str(report), *FAST)
    result.assert_outcomes(passed=2)
    assert "measured nothing" not in output(result) and report.exists()


@pytest.mark.slow
def test_an_unknown_revision_is_one_line_and_judges_nothing(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--gpubench-against=nosuchbranch", *FAST)
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert "nosuchbranch" in text and "Traceback" not in text and "INTERNALERROR" not in text


@pytest.mark.slow
def test_a_failed_build_is_one_line_and_judges_nothing(repo: pytest.Pytester) -> None:
    result = repo.runpytest("--gpubench-against=HEAD", "--gpubench-build=exit 3", *FAST)
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert "--gpubench-build 'exit 3' failed" in text and "Traceback" not in text
    assert "passed" not in text  # nothing ran
    log = re.search(r"its output: (\S+\.log)", text)
    assert log is not None, text  # kept for the user, named
    Path(log.group(1)).unlink()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpubench-against=main", "--gpubench-save"), "run them separately"),
        (("--gpubench-build=make",), "name the revision"),
        (("--gpubench-against=main", "--gpubench-pairs=0"), "from 1 to 20"),
    ],
)
def test_option_errors(repo: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    result = repo.runpytest(*args)
    assert result.ret == USAGE_ERROR
    assert message in output(result)
