"""``--gpubench-against REF --gpubench-pairing=lockstep`` as users run it, on generated git
repositories with the fake timer: both revisions of a test in one process, timed alternately
(versus/lockstep.py), and the tests one process cannot hold timed in fresh processes instead.

The fake timer multiplies a function's time by its ``fake_factor`` attribute and by a factor
drawn once per process (FAKE_SHIFT): a commit that sets the attribute makes that function
slower on its side only, and a process's own shift falls on both sides alike."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import json
import math
import random
import shutil
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import (
    IMPORT_HOOK,
    KERNELS,
    TESTS,
    USAGE_ERROR,
    commit,
    failing_on,
    git,
    in_lib,
    kernels,
    output,
    slower,
)

from pytest_gpubench import cli
from pytest_gpubench.judge.pairs import LOCKSTEP_DESIGN, LOCKSTEP_FRESH_DESIGN, PairDesign
from pytest_gpubench.run.session import _remade_pair
from pytest_gpubench.run.sides import MORE_PAIR_SAMPLES
from pytest_gpubench.timing.device import placeable, placed_anew
from pytest_gpubench.timing.engine import Sampler, Workload
from pytest_gpubench.versus.ab import _news, design_of

if shutil.which("git") is None:
    pytest.skip("git is not on PATH", allow_module_level=True)

pytest_plugins = ["pytester"]

LOCKSTEP = ("--gpubench-pairing=lockstep", "--gpubench-confirm=0")
# A test file's start whose fixture yields the project's module to its tests: one process
# cannot hold both sides of those (timed in duos).
MODULE_FIXTURE = """
import pytest

import kernels


@pytest.fixture
def module():
    yield kernels
"""
# The tests of a file like MODULE_TESTS against HEAD in lockstep, with the JSON report.
MODULE_IN_DUOS = (
    "--gpubench-against=HEAD",
    "--gpubench-pairing=lockstep",
    "--gpubench-json=ab.json",
    "-k",
    "test_module",
)
MODULE_TESTS = (
    MODULE_FIXTURE
    + """

@pytest.mark.parametrize("n", [10, 20])
def test_module(gpubench, module, n):
    assert gpubench(module.work, n) == sum(range(n))
"""
)


@pytest.mark.slow
def test_kernel_time_is_judged_beside_time_per_call_and_says_which_moved(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each side's kernel time (the fake graph's: FAKE_BESIDE of its time) is judged on its
    own pairs beside the time per call, each at half the test's level: the kernel time
    decides where the time per call is unsure, a test where they disagree is unsure, the
    reason says which of the two moved, and the report holds both sides' kernel times."""
    monkeypatch.setenv("FAKE_BESIDE", "0.8")

    def judged() -> tuple[pytest.RunResult, dict[str, Any]]:
        args = ("--gpubench-against=HEAD", "--gpubench-json=ab.json", *LOCKSTEP)
        result = repo.runpytest_subprocess(*args)
        report = json.loads((repo.path / "ab.json").read_text())
        [summed] = [r for r in report["results"] if r["test"] == "test_sum"]
        for side in ("base_sessions", "head_sessions"):
            assert all(r["beside_ms"] > 0 for r in summed["against"][side]), summed
        return result, summed

    slower(repo, 1.2)  # its time per call, not its kernels' (the gaps between launches)
    result, summed = judged()
    result.assert_outcomes(passed=1, failed=1)
    assert summed["status"] == "regressed" and summed["beside"]["status"] == "same"
    assert (
        "kernel time faster by" in summed["reason"] or "kernel time slower by" in summed["reason"]
    )
    assert "(same): the time per call moved, the kernel time did not" in summed["reason"]

    repo.makepyfile(kernels=KERNELS.format(factor=1.0) + "\nwork.fake_kernel_factor = 1.2\n")
    result, summed = judged()
    result.assert_outcomes(passed=2)  # what a call costs did not move: nothing fails
    assert summed["status"] == "unsure" and summed["beside"]["status"] == "regressed"
    assert (
        "kernel time slower by 20.0% (regressed): the kernel time moved, the time per call did not"
        in summed["reason"]
    )
    assert "than HEAD (" in summed["beside"]["reason"]
    assert "'s kernel time over 1 pair in lockstep" in summed["beside"]["reason"]
    assert "kernel time slower by 20.0%" in output(result), output(result)
    monkeypatch.chdir(repo.path)  # the file judged again: the same two judgements
    assert cli.main(["compare", "ab.json"]) == 0
    assert "kernel time slower by 20.0% (regressed)" in capsys.readouterr().out

    # The time per call unsure (its bar at one pair is wide), the kernel time regressed: the
    # steadier number fails the test, here and judged again from the file.
    repo.makepyfile(kernels=KERNELS.format(factor=1.08) + "\nwork.fake_kernel_factor = 1.2\n")
    result, summed = judged()
    result.assert_outcomes(passed=1, failed=1)
    assert summed["status"] == "regressed" and summed["beside"]["status"] == "regressed"
    assert "the kernel time moved, the time per call was unsure" in summed["reason"], summed
    assert cli.main(["compare", "ab.json"]) == 1
    capsys.readouterr()
    slower(repo, 1.0)

    monkeypatch.delenv("FAKE_BESIDE")  # a timer without another number: its own alone
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "-v", *LOCKSTEP)
    result.assert_outcomes(passed=2)
    assert "kernel time" not in output(result)

    # Taking it failed: the time per call judged alone, and the measurement says why.
    monkeypatch.setenv("FAKE_BESIDE", "fail")
    args = ("--gpubench-against=HEAD", "--gpubench-json=ab.json", "-v", *LOCKSTEP)
    result = repo.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
    [summed] = [
        r
        for r in json.loads((repo.path / "ab.json").read_text())["results"]
        if r["test"] == "test_sum"
    ]
    assert summed["beside"] is None and "kernel time" not in summed["reason"], summed
    assert "kernel time not taken: 9 graph launches in the trace of 8 replays" in summed["note"]

    # Taken on the first pair, not on the later ones: judged on the one, and the note says
    # why the others have none.
    monkeypatch.setenv("FAKE_BESIDE", "0.8")
    monkeypatch.setenv("FAKE_BESIDE_FAIL_FROM", "2")
    slower(repo, 1.06)  # unsure on its first pair at a strict level: more pairs
    strict = ("--gpubench-alpha=0.0001", "--gpubench-pairing=lockstep")
    repo.runpytest_subprocess("--gpubench-against=HEAD", "--gpubench-json=ab.json", *strict)
    [summed] = [
        r
        for r in json.loads((repo.path / "ab.json").read_text())["results"]
        if r["test"] == "test_sum"
    ]
    sides = summed["against"]["head_sessions"]
    assert len(sides) > 1 and sides[0]["beside_ms"] > 0, summed
    assert all("beside_ms" not in s for s in sides[1:]), sides
    assert "kernel time not taken: 9 graph launches in the trace of 8 replays" in summed["note"]
    assert summed["beside"]["current_sessions"] == 1


@pytest.mark.slow
def test_against_its_own_revision_both_sides_run_here(repo: pytest.Pytester) -> None:
    """Lockstep is the default pairing: no option asks for it."""
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "--gpubench-confirm=0")
    result.assert_outcomes(passed=2)
    text = output(result)
    assert "2 tests to time in lockstep in this process" in text
    assert "fresh processes" not in text  # no process but this one
    assert "regressed" not in text and "Traceback" not in text


@pytest.mark.slow
def test_a_slower_commit_fails_in_one_process_whatever_its_shift(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A process's shift of 10% (sd) falls on both sides: the 8% slower commit is judged
    on their ratio."""
    slower(repo, 1.08)
    commit(repo.path, "a slower kernel")
    monkeypatch.setenv("FAKE_SHIFT", "0.1")
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD~1", "--gpubench-json=ab.json", *LOCKSTEP
    )
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "FAILED test_bench.py::test_sum" in text
    assert "slower by 8.0% than HEAD~1" in text
    # The file is judged again as the run judged it: its pairs in lockstep, its design.
    report = json.loads((repo.path / "ab.json").read_text())
    [summed] = [r for r in report["results"] if r["test"] == "test_sum"]
    assert summed["against"]["lockstep"] is True and summed["against"]["pairs"] == 1
    monkeypatch.chdir(repo.path)
    assert cli.main(["compare", "ab.json"]) == 1
    assert "over 1 pair in lockstep" in capsys.readouterr().out


@pytest.mark.slow
def test_the_working_tree_is_the_head_side_and_a_lazy_import_finds_its_side(
    repo: pytest.Pytester,
) -> None:
    """A function that imports its module when called: each side's call finds its own
    (the revision's sees the committed factor, the working tree's its uncommitted one)."""
    repo.makepyfile(
        test_lazy="""
def lazily(n):
    import kernels

    return kernels.work(n)


def test_lazy(gpubench):
    import kernels

    lazily.fake_factor = kernels.work.fake_factor
    assert gpubench(lazily, 10) == 45
"""
    )
    commit(repo.path, "a lazy test")
    slower(repo, 0.8)  # not committed
    result = repo.runpytest_subprocess("--gpubench-against=main", *LOCKSTEP)
    result.assert_outcomes(passed=3)
    text = output(result)
    assert text.count("improved") >= 2  # test_sum and test_lazy, each against its own side
    assert "faster by 20.0% than main" in text


@pytest.mark.slow
def test_a_module_imported_during_timed_calls_stays_its_sides(repo: pytest.Pytester) -> None:
    """A submodule a timed call imports lazily, after its first calls: each side imports
    its own once (the working tree's was dropped with each revision's call and imported
    again in every call of its own: a false regression where importing costs time)."""
    repo.mkpydir("lazypkg")
    log = repo.path / "imports.txt"  # outside the revision's checkout
    repo.path.joinpath("lazypkg", "sub.py").write_text(
        f"with open({str(log)!r}, 'a') as out:\n    out.write(__file__ + '\\n')\n\n\n"
        "def work(n):\n    return sum(range(n))\n"
    )
    repo.makepyfile(
        test_late="""
calls = []


def late(n):
    calls.append(n)
    if len(calls) < 4:  # its first calls
        return sum(range(n))
    from lazypkg.sub import work

    return work(n)


def test_late(gpubench):
    assert gpubench(late, 10) == 45
"""
    )
    commit(repo.path, "a late lazy import")
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP, "-k", "late")
    result.assert_outcomes(passed=1)
    lines = [Path(line) for line in log.read_text().split()]
    mine = [p for p in lines if p.is_relative_to(repo.path)]
    assert len(mine) == 1 and len(lines) == 2, lines  # the revision's from its checkout


@pytest.mark.slow
def test_a_revision_whose_duos_import_the_working_trees_code_is_one_line(
    repo: pytest.Pytester,
) -> None:
    """An import hook maps the kernels to the working tree for both sides (as setuptools'
    editable finder does): one process cannot hold both sides, nor can duos, whose
    revision's process timed the working tree's code (+8% read `same`)."""
    in_lib(repo, IMPORT_HOOK)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP, "-k", "test_sum")
    assert result.ret == USAGE_ERROR
    text = output(result)
    [line] = [line for line in text.splitlines() if "code not of its side" in line]
    assert f"imported kernels ({repo.path.resolve() / 'lib' / 'kernels.py'})" in line
    assert "nothing is judged" in line and "Traceback" not in text


@pytest.mark.slow
def test_tests_on_one_side_only_are_new_or_removed(repo: pytest.Pytester) -> None:
    """A test only in the working tree is `new`; one only in the revision is not run in
    lockstep (it runs the working tree's tests), and is said under the table: a file the
    working tree removed, a function its file lost (a test without gpubench is none of
    ours). It said nothing: a change could delete the benchmark of the kernel it slowed."""
    repo.makepyfile(
        test_gone="def test_old(gpubench):\n    assert gpubench(len, 'ab') == 2\n",
        test_kept="""
def test_stays(gpubench):
    assert gpubench(len, 'a') == 1


class TestGroup:
    def test_dropped(self, gpubench):
        assert gpubench(len, 'abc') == 3


def test_plain():
    pass
""",
    )
    commit(repo.path, "tests that the working tree removes")
    git(repo.path, "rm", "-q", "test_gone.py")
    repo.makepyfile(
        test_new="def test_fresh(gpubench):\n    assert gpubench(abs, -1) == 1\n",
        test_kept="def test_stays(gpubench):\n    assert gpubench(len, 'a') == 1\n",
    )
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP)
    text = output(result)
    result.assert_outcomes(passed=4)
    assert "test_fresh" in text and " new " in text
    assert (
        "2 tests only in the revision, not run in lockstep: "
        "test_kept.py::TestGroup::test_dropped, test_gone.py::test_old "
        "(--gpubench-pairing=processes times them as removed)"
    ) in text
    assert "Traceback" not in text
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP, "test_new.py")
    assert "test_gone.py::test_old" not in output(result)  # (a path that holds none of it)


@pytest.mark.slow
def test_a_fixture_holding_the_projects_code_serves_each_side_its_own(
    repo: pytest.Pytester,
) -> None:
    """A fixture that hands its tests the project's module (as the example suite's
    ``cuda_ext`` hands its extension): the revision's test gets the value the revision's
    fixture gives, made on its side once per the fixture's scope, and both sides run in
    this process; the revision's own module is what makes the working tree 30% slower."""
    conftest = repo.path / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\n\n@pytest.fixture(scope='session')\ndef module():\n"
        + "    import kernels\n\n    return kernels\n"
    )
    repo.makepyfile(
        test_fixture="""
import pytest


@pytest.mark.parametrize("n", [10, 20])
def test_module(gpubench, module, n):
    assert gpubench(module.work, n) == sum(range(n))
"""
    )
    commit(repo.path, "a fixture that returns a module")
    slower(repo, 1.3)
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "--gpubench-pairs=2", "test_fixture.py", *LOCKSTEP
    )
    text = output(result)
    result.assert_outcomes(failed=2)
    assert "2 tests to time in lockstep in this process" in text
    assert "in duos" not in text and "Traceback" not in text
    assert "test_module[20]: regressed: slower by 30.0% than HEAD" in text


@pytest.mark.slow
def test_a_fixture_holding_code_is_timed_in_duos(repo: pytest.Pytester) -> None:
    """A fixture that yields the project's module would hand the working tree's code to
    the revision's test (a generator fixture is not made again on its side): that test,
    and the later ones using the fixture, are timed in duos (a fresh process per side at
    once, their calls alternated: run/duo.py), one batch, and the reason is said."""
    repo.makepyfile(test_fixture=MODULE_TESTS)
    commit(repo.path, "a fixture that yields a module")
    slower(repo, 1.3)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "--gpubench-pairs=2", *LOCKSTEP)
    text = output(result)
    result.assert_outcomes(passed=1, failed=3)  # test_sum in lockstep, the others apart
    assert "test_sum regressed: 1.00 ms -> 1.30 ms (+30.0% [" in text
    assert "2 pairs in lockstep, threshold 5%" in text  # --gpubench-pairs: every first look
    assert "2 tests in duos, a fresh process per side at once: its fixture 'module'" in text
    # Only those (test_sum ran here): --gpubench-pairs sets the first look's duos too.
    assert "duos 1-2: both sides at once, 2 tests, 3 pairs each" in text
    rows = [line.split()[0] for line in text.splitlines() if " cuda-graph " in line]
    assert sorted(rows) == ["test_join", "test_module[10]", "test_module[20]", "test_sum"]
    assert "2 duos (a fresh process per side, at once)" in text
    assert "slower by 30.0% than HEAD (" in text and "over 6 pairs in 2 duos; gate" in text
    assert "test_module[20]: regressed: slower by 30.0% than HEAD" in text
    assert "holds code of the working tree and yields it: timed in duos" in text


@pytest.mark.slow
def test_duos_take_turns_leading_and_set_their_pairs_up_again(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests timed in duos: a duo's pairs share its two processes, so a duo is the unit of
    the verdict (judge.pairs.DUO_DESIGN): the first look takes two, the working tree's
    process leading the first and the revision's the second. Each duo takes DUO_PAIRS
    pairs of each call, the later ones set up again in its processes, each making a call's
    later samplers as it made its first (Sampler.again). Both processes start their
    profilers as they join, so a slow first timer (CUPTI's start, seconds on a GPU) costs
    no pair its samples. +30% is caught on the first look's two duos."""
    factor, duos = 1.3, 2
    repo.makepyfile(
        test_fixture=MODULE_TESTS,
        slow_start="""
import os
import time

import pytest

made = []


@pytest.hookimpl(wrapper=True)
def pytest_gpubench_make_timer(settings, device, with_setup):
    role = os.environ.get("GPUBENCH_DUO", "parent").split(" ")[0]
    if not made:
        if role == "follower":
            time.sleep(3)  # longer than a pair's budget
        with open(os.environ["FIRST_TIMERS"], "a") as out:  # made in which test, if any
            out.write(f"{role} {os.environ.get('PYTEST_CURRENT_TEST', '-').split(' ')[0]}\\n")
    made.append(1)
    return (yield)


def pytest_configure(config):
    if "GPUBENCH_DUO" in os.environ:
        with open(os.environ["TURNS"], "a") as out:
            out.write(f"{duo()} started {time.time()}\\n")


def duo():
    return os.environ["GPUBENCH_DUO"].split(" ")[-1].rsplit("/", 1)[-1].removesuffix(".sock")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    began = time.time()
    try:
        return (yield)
    finally:
        if "GPUBENCH_DUO" in os.environ:
            with open(os.environ["TURNS"], "a") as out:
                out.write(f"{duo()} test {began} {time.time()}\\n")
""",
    )
    conftest = repo.path / "conftest.py"
    conftest.write_text(conftest.read_text() + '\npytest_plugins = ["slow_start"]\n')
    commit(repo.path, "a fixture that yields a module, a slow first timer")
    slower(repo, factor)
    made = repo.path.parent / f"{repo.path.name}-samplers.log"
    monkeypatch.setenv("FAKE_AGAIN_LOG", str(made))
    first_timers = repo.path.parent / f"{repo.path.name}-first-timers.log"
    monkeypatch.setenv("FIRST_TIMERS", str(first_timers))
    turns = repo.path.parent / f"{repo.path.name}-turns.log"
    monkeypatch.setenv("TURNS", str(turns))
    result = repo.runpytest_subprocess(*MODULE_IN_DUOS)
    text = output(result)
    result.assert_outcomes(failed=2, deselected=2)
    assert "duos 1-2: both sides at once, 2 tests, 3 pairs each, each side leading in" in text
    # Both duos' four processes start together; their tests (fixtures, first calls, pairs)
    # take the device one duo after the other.
    started: dict[str, list[float]] = collections.defaultdict(list)
    tested: dict[str, list[float]] = collections.defaultdict(list)
    for line in turns.read_text().splitlines():
        name, what, *times = line.split(" ")
        (started if what == "started" else tested)[name] += map(float, times)
    assert sorted(started) == sorted(tested) == ["duo-1", "duo-2"]
    first, second = sorted(tested.values(), key=min)
    assert max(first) <= min(second)  # one duo's tests on the device at a time
    assert max(t for ts in started.values() for t in ts) < max(first)  # set up together
    assert f"{duos} duos (a fresh process per side, at once)" in text
    assert "each duo is judged as one pair of processes" in text
    found = {r["test"]: r for r in json.loads((repo.path / "ab.json").read_text())["results"]}
    for n in (10, 20):
        against = found[f"test_module[{n}]"]["against"]
        assert against["verdict"] == "regressed" and against["pairs"] == 3 * duos
        assert against["duos"] == [d for d in range(1, duos + 1) for _ in range(3)]
        # Its later pairs' time is its more pairs' cost, as in one process.
        assert found[f"test_module[{n}]"]["costs"]["confirm_s"] > 0
        assert against["ratio"] == pytest.approx(factor, rel=0.01)
        # The first pair sampled in full on both sides, the first test's included.
        assert against["base_sessions"][0]["n"] >= 20 and against["head_sessions"][0]["n"] >= 20
    # Both start their profilers (their first timers) as they join, before any test: the
    # leader does not wait for the follower's to make its own.
    firsts = sorted(first_timers.read_text().splitlines())
    assert firsts == ["follower -"] * duos + ["leader -"] * duos
    # Two tests, a process per side: each side's first sampler made, its later ones again.
    lines = made.read_text().splitlines()
    assert lines.count("made work") == 4 * duos and lines.count("again work") == 8 * duos


@pytest.mark.slow
def test_a_duos_processes_that_differ_fail_nothing(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An A/A run whose every process runs its code 2% faster or slower than another (as
    GPU processes differ: FAKE_SHIFT, seeded): a duo's pairs agree with each other but not
    with the next duo's, so the tests take more duos, up to the design's cap, and none
    fails."""
    repo.makepyfile(test_fixture=MODULE_TESTS)
    commit(repo.path, "a fixture that yields a module")
    monkeypatch.setenv("FAKE_SHIFT", "0.02")
    monkeypatch.setenv("FAKE_SHIFT_SEED", "0")
    result = repo.runpytest_subprocess(*MODULE_IN_DUOS)
    text = output(result)
    result.assert_outcomes(passed=2, deselected=2)
    assert "8 duos (a fresh process per side, at once)" in text
    found = {r["test"]: r for r in json.loads((repo.path / "ab.json").read_text())["results"]}
    against = found["test_module[10]"]["against"]
    assert against["verdict"] in ("same", "unsure") and against["duos"][-1] == 8
    ds = [
        math.log(h["median_ms"] / b["median_ms"])
        for b, h in zip(against["base_sessions"], against["head_sessions"], strict=True)
    ]
    # Within a duo its pairs agree to the timer's noise; between duos they moved by more.
    within = max(max(ds[i : i + 3]) - min(ds[i : i + 3]) for i in range(0, 24, 3))
    means = [sum(ds[i : i + 3]) / 3 for i in range(0, 24, 3)]
    assert within < 0.01 < max(means) - min(means)


# The working tree's kernel, 8% slower in the run's own process only: what differs between
# one process's two sides (conftest.CHILD: set in a process the plugin started).
ONE_PROCESS_SLOWER = """
import conftest


def work(n):
    return sum(range(n))


work.fake_factor = 1.0 if conftest.CHILD else 1.08
"""


@pytest.mark.slow
@pytest.mark.parametrize("everywhere", [False, True])
def test_a_failure_in_lockstep_rests_on_two_processes(
    repo: pytest.Pytester, everywhere: bool
) -> None:
    """A test regressed on pairs from the run's process only is timed again in a fresh
    process (both sides, the design's 10 pairs there): where that process's verdict fails
    too, the failure stands and says so; where it does not (the difference was the first
    process's, between its two sides), the test is unsure and passes."""
    if everywhere:
        slower(repo, 1.08)
    else:
        repo.makepyfile(kernels=ONE_PROCESS_SLOWER)
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "--gpubench-pairing=lockstep", "--gpubench-json=ab.json"
    )
    text = output(result)
    found = {r["test"]: r for r in json.loads((repo.path / "ab.json").read_text())["results"]}
    verdict = found["test_sum"]["against"]["verdict"]
    assert "a second process's 10 pairs read" in text
    if everywhere:
        result.assert_outcomes(passed=1, failed=1)
        assert verdict == "regressed"
        assert "a second process's 10 pairs read +8.0% by cuda-graph" in text
    else:
        result.assert_outcomes(passed=2)
        assert verdict == "unsure"
        reason = found["test_sum"]["reason"]
        assert reason.startswith("a second process's 10 pairs read +0.0% by cuda-graph, which")
        assert "which does not bear out this process's pairs: a difference between" in reason
        assert "(a failure in lockstep needs two processes); this process's: slower by" in reason


@pytest.mark.slow
@pytest.mark.parametrize("confirm", [(), ("--gpubench-confirm=0",)], ids=["second", "one"])
def test_a_failure_in_lockstep_keeps_the_trace_of_each_side(
    repo: pytest.Pytester, confirm: tuple[str, ...]
) -> None:
    """A test that fails against the revision keeps its evidence, decided by that verdict,
    not by the history (which has none: the test is new to it): a profiler trace of one
    call of each side, taken in this process while both calls live (its second process's
    verdict comes at the run's end); a test that passes keeps none."""
    slower(repo, 1.5)
    args = ("--gpubench-against=HEAD", "--gpubench-pairing=lockstep", "--gpubench-json=ab.json")
    result = repo.runpytest_subprocess(*args, *confirm)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    found = {r["test"]: r for r in json.loads((repo.path / "ab.json").read_text())["results"]}
    summed, joined = found["test_sum"], found["test_join"]
    assert summed["status"] == "regressed" and summed["trace"] and summed["reference_trace"]
    assert f"evidence: a profiler trace of one call, {summed['trace']}" in text, text
    assert f"evidence: the revision's, {summed['reference_trace']}" in text
    evidence = sorted(p.name for p in (repo.path / "gpubench-evidence").glob("*.json"))
    assert evidence == [Path(summed["reference_trace"]).name, Path(summed["trace"]).name]
    assert joined["trace"] is None is joined["reference_trace"]


@pytest.mark.slow
def test_a_side_of_a_pair_is_judged_against_the_revision_alone(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each side of a lockstep pair is judged against the revision only: a verdict against
    the history (6 ms a measurement with 20 sessions, on a CPU) would be thrown away."""
    from pytest_gpubench.run.session import BenchSession

    judged: list[str] = []
    judge = BenchSession.judge

    def counted(self: BenchSession, measurement: Any, settings: Any) -> Any:
        judged.append(measurement.key)
        return judge(self, measurement, settings)

    monkeypatch.setattr(BenchSession, "judge", counted)
    slower(repo, 1.5)
    result = repo.runpytest("--gpubench-against=HEAD", *LOCKSTEP)
    result.assert_outcomes(passed=1, failed=1)
    assert "slower by 50.0% than HEAD" in output(result)
    assert judged == []


# A kernel module whose first call in a process pays what is done once for both sides (a
# shared library's compile or autotuning): whichever side the process calls first. With
# ALWAYS_SLOW set, every call is slow.
ONCE_KERNELS = """
import builtins
import os
import time


def work(n):
    if not getattr(builtins, "compiled_once", False) or os.environ.get("ALWAYS_SLOW"):
        builtins.compiled_once = True
        time.sleep(0.3)
    return sum(range(n))
"""


@pytest.mark.slow
def test_a_first_call_that_paid_a_one_time_cost_does_not_make_its_sampler_slow(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first call over a tenth of the budget (0.3 s here) is timed once more: a sampler is
    asked for a slow call's (one call per sample, no calibration) only where that call is
    slow too. The side a lockstep process calls first pays the one-time cost: on an H200
    such sides, one slow and one not, read a planted slowdown backwards
    (bench/results/h200-2026-12-05); a plain run's first session, caches cold, would be
    sampled unlike the next."""
    repo.makepyfile(kernels=ONCE_KERNELS)
    commit(repo.path, "a kernel whose first call compiles")
    made = repo.path.parent / f"{repo.path.name}-samplers.log"
    monkeypatch.setenv("FAKE_AGAIN_LOG", str(made))
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "-k", "test_sum", *LOCKSTEP)
    result.assert_outcomes(passed=1, deselected=1)
    assert made.read_text().splitlines()[:2] == ["made work", "made work"]
    made.unlink()
    repo.runpytest_subprocess("--gpubench", "-k", "test_sum").assert_outcomes(passed=1)
    assert made.read_text().splitlines()[:1] == ["made work"]
    made.unlink()
    monkeypatch.setenv("ALWAYS_SLOW", "1")  # a slow call stays one
    repo.runpytest_subprocess("--gpubench", "-k", "test_sum").assert_outcomes(passed=1)
    assert made.read_text().splitlines()[:1] == ["made work slow"]


@pytest.mark.slow
def test_a_slow_call_is_called_once_more_per_side_not_at_every_pair(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function whose every call is slow is called once more after its first, to tell
    its timer so (BenchSession.call_durations), on each side of a lockstep pair once: not
    again at each pair set up again (--gpubench-pairs=2), which would pay a slow call more
    on each side at every look."""
    from pytest_gpubench.run.session import BenchSession

    called: list[str] = []
    first_call = BenchSession.first_call

    def counted(self: BenchSession, workload: Any) -> Any:
        called.append(workload.fn.__name__)
        return first_call(self, workload)

    monkeypatch.setattr(BenchSession, "first_call", counted)
    monkeypatch.setenv("ALWAYS_SLOW", "1")
    repo.makepyfile(kernels=ONCE_KERNELS)
    commit(repo.path, "a kernel whose every call is slow")
    args = ("--gpubench-against=HEAD", "--gpubench-pairs=2", "-k", "test_sum", *LOCKSTEP)
    repo.runpytest(*args, "--gpubench-json=ab.json").assert_outcomes(passed=1, deselected=1)
    assert called == ["work"] * 4  # each side's first call and one more
    # Its costs count both untimed calls of each side (0.3 s each).
    (result,) = json.loads((repo.path / "ab.json").read_text())["results"]
    assert result["costs"]["first_call_s"] >= 0.6 and result["costs"]["other_first_call_s"] >= 0.6


@pytest.mark.slow
@pytest.mark.parametrize(
    ("base", "head", "device_ms", "alike"),
    [(10, 40, "0.01", True), (10, 40, "0.5", False), (1, 40, "0.01", False)],
    ids=["alike", "replay-too-long", "one-call-graph"],
)
def test_the_two_sides_batch_as_many_calls_per_sample(
    repo: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    base: int,
    head: int,
    device_ms: str,
    alike: bool,
) -> None:
    """The side whose sampler batches fewer calls per sample is made again with the other's
    count (timing.engine.alike): on recorded GPU pairs of unchanged tests a side batching 3
    or more times fewer read slower (0.42% median; a 4.4 µs dropout 2.3% at 22 against 98).
    Not where the remade replay would last over ALIKE_REPLAY_MS (40 calls of 0.5 ms), nor
    from a one-call graph (validated for no more)."""
    monkeypatch.setenv("FAKE_KERNELS", kernels({"name": "work_kernel"}))
    monkeypatch.setenv("FAKE_DEVICE_MS", device_ms)
    repo.makepyfile(kernels=KERNELS.format(factor=1.0) + f"work.fake_calls = {base}\n")
    commit(repo.path, "a kernel batched by tens")
    repo.makepyfile(kernels=KERNELS.format(factor=1.0) + f"work.fake_calls = {head}\n")
    monkeypatch.setenv("FAKE_AGAIN_LOG", str(repo.path.parent / "samplers.log"))
    args = ("--gpubench-against=HEAD", "--gpubench-json=ab.json", "--gpubench-pairs=3")
    repo.runpytest(*args, "-k", "test_sum", *LOCKSTEP).assert_outcomes(passed=1, deselected=1)
    (result,) = json.loads((repo.path / "ab.json").read_text())["results"]
    against = result["against"]
    assert len(against["base_sessions"]) == 3  # the pairs set up again are made alike too
    sides = [{s["calls_per_sample"] for s in against[f"{k}_sessions"]} for k in ("base", "head")]
    assert sides == ([{head}, {head}] if alike else [{base}, {head}])


MANY_TESTS = """
import pytest

import kernels


@pytest.mark.parametrize("n", [10, 20, 30])
def test_many(gpubench, n):
    assert gpubench(kernels.work, n) == sum(range(n))
"""


@pytest.mark.slow
def test_the_failures_of_a_run_share_one_second_process(repo: pytest.Pytester) -> None:
    """The tests failing on their own process's pairs are timed again together, in one
    second process at the run's end (the design's pairs each), not one process per test:
    each failure stands on that process's pairs. With -x it cannot wait (the run stops at
    the first confirmed failure): that test's second process runs at once."""
    repo.makepyfile(test_many=MANY_TESTS)
    commit(repo.path, "three tests of one function")
    slower(repo, 1.08)
    args = ("--gpubench-against=HEAD", "--gpubench-pairing=lockstep", "-k", "test_many")
    result = repo.runpytest_subprocess(*args, "--gpubench-json=ab.json")
    text = output(result)
    result.assert_outcomes(failed=3, deselected=2)
    assert "more pairs of 3 flagged tests from a fresh process" in text
    assert text.count("from a fresh process") == 1
    for r in json.loads((repo.path / "ab.json").read_text())["results"]:
        assert r["against"]["verdict"] == "regressed"
        assert "a second process's 10 pairs read +8.0% by cuda-graph" in r["reason"], r
        assert r["costs"]["confirm_s"] > 0, r

    result = repo.runpytest_subprocess(*args, "-x")
    result.assert_outcomes(failed=1, deselected=2)
    assert "more pairs of test_many[10] from a fresh process" in output(result)


# The working tree's kernel 8% slower, its pairs in the run's own process scattered (a
# disturbed stretch: conftest.SCATTER), enough to leave it unsure at the cap of 10 pairs.
ONE_PROCESS_SCATTERED = KERNELS.format(factor=1.08) + "work.fake_scattered = True\n"


@pytest.mark.slow
def test_an_unsure_test_reading_beyond_the_threshold_asks_a_second_process(
    repo: pytest.Pytester,
) -> None:
    """A test left unsure at the cap of pairs whose change reads beyond the threshold is
    timed in a second process too: it fails where that process's pairs fail it on their
    own at the run's level (on an H200 a +5% copy's pairs were once scattered so in one
    process)."""
    repo.makepyfile(kernels=ONE_PROCESS_SCATTERED)
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "--gpubench-pairing=lockstep", "--gpubench-json=ab.json"
    )
    text = output(result)
    found = {r["test"]: r for r in json.loads((repo.path / "ab.json").read_text())["results"]}
    summed = found["test_sum"]
    result.assert_outcomes(passed=1, failed=1)
    assert summed["against"]["verdict"] == "regressed"
    assert (
        "(a second process's pairs, as this process's left it unsure reading beyond"
        in (summed["reason"])
    )
    assert "slower by 8.0% than HEAD" in summed["reason"]
    assert "over 10 pairs in lockstep; unsure at the cap of 10 pairs" in summed["reason"]
    assert text.count("from a fresh process") == 1


@pytest.mark.slow
def test_a_build_step_times_every_test_in_duos(repo: pytest.Pytester) -> None:
    """With --gpubench-build the revision's checkout holds what its build made (native
    code, perhaps), which one process cannot hold beside yours: every test is timed in
    duos, the revision's side in its built checkout, and the reason says so."""
    slower(repo, 1.3)
    build = "--gpubench-build=echo built > built.txt"
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", build, *LOCKSTEP)
    text = output(result)
    result.assert_outcomes(passed=1, failed=1)
    assert "2 tests in duos, a fresh process per side at once: --gpubench-build" in text
    assert "tests to time in lockstep in this process" not in text
    assert "test_sum: regressed: slower by 30.0% than HEAD" in text
    assert "builds the revision's code: timed in duos" in text
    assert "2 duos (a fresh process per side, at once)" in text


@pytest.mark.slow
def test_other_inputs_in_a_duo_are_reported_not_judged(repo: pytest.Pytester) -> None:
    """A test timed in duos whose working tree gives its call other inputs than the
    revision's: `changed`, naming them, as in one process."""
    body = (
        MODULE_FIXTURE
        + """

def test_module(gpubench, module):
    gpubench(module.work, {n})
"""
    )
    repo.makepyfile(test_fixture=body.format(n=100))
    commit(repo.path, "a fixture that yields a module")
    repo.makepyfile(test_fixture=body.format(n=200))
    slower(repo, 1.3)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP, "-k", "test_module")
    text = output(result)
    result.assert_outcomes(passed=1, deselected=2)
    assert "2 duos (a fresh process per side, at once)" in text
    assert "test_module: changed: inputs changed (argument 1: 100 -> 200), not judged" in text


@pytest.mark.slow
def test_a_duo_judges_each_sides_peak_memory(repo: pytest.Pytester) -> None:
    """A test timed in duos whose working tree holds 64 MiB more per call: each side's
    process measures its own call's peak, and the test fails on memory, as in one process."""
    kernels = "def work(n):\n    return sum(range(n))\n\n\nwork.fake_peak_bytes = {peak}\n"
    repo.makepyfile(kernels=kernels.format(peak=16 << 20), test_fixture=MODULE_TESTS)
    commit(repo.path, "a fixture that yields a module, 16 MiB a call")
    repo.makepyfile(kernels=kernels.format(peak=80 << 20))
    result = repo.runpytest_subprocess(*MODULE_IN_DUOS, "--gpubench-confirm=0")
    text = output(result)
    result.assert_outcomes(failed=2, deselected=2)
    assert "2 duos (a fresh process per side, at once)" in text
    assert "test_module[10]: more memory: peak memory 80 MiB per call, was 16 MiB" in text


@pytest.mark.slow
def test_a_duo_whose_revision_process_dies_says_so(repo: pytest.Pytester) -> None:
    """The revision's process of a duo exits in the middle of a test (following or
    leading): the working tree's fails its tests there, and a run in which no duo measured
    anything ends in one line saying why."""
    body = (
        "\nimport os\n"
        + MODULE_FIXTURE
        + """

def test_module(gpubench, module):
    if {crash} and os.environ.get("GPUBENCH_DUO", "").split(" ")[1:2] == ["base"]:
        os._exit(3)
    assert gpubench(module.work, 10) == 45
"""
    )
    repo.makepyfile(test_fixture=body.format(crash=True))
    commit(repo.path, "a test that ends its process on the revision's side of a duo")
    repo.makepyfile(test_fixture=body.format(crash=False))
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "-k", "module", *LOCKSTEP)
    text = output(result)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "no duo measured anything" in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ("    assert gpubench(work, 100) == 4951", "failed on the revision's side (AssertionError"),
        (
            "    pytest.skip('needs a newer kernel')",
            "did not pass on the revision's side (Skipped: needs a newer kernel)",
        ),
    ],
)
@pytest.mark.slow
def test_a_revision_whose_test_fails_or_skips_there_is_unmeasurable_not_failed(
    repo: pytest.Pytester, body: str, said: str
) -> None:
    repo.makepyfile(
        test_bench="import pytest\n" + TESTS.replace("    assert gpubench(work, 100) == 4950", body)
    )
    commit(repo.path, "a test that does not pass on the revision")
    repo.makepyfile(test_bench=TESTS)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP)
    result.assert_outcomes(passed=2)
    text = output(result)
    assert f"its test {said}" in text
    assert "1 unmeasurable" in text and "unsure" not in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("broken", "error", "remedy"),
    [
        ("import no_such_module_anywhere", "ModuleNotFoundError", "with --gpubench-build"),
        ("def broken(:", "SyntaxError", "name a revision whose tests can be collected"),
    ],
    ids=["import", "syntax"],
)
def test_a_revision_file_that_cannot_be_imported_here_goes_to_duos(
    repo: pytest.Pytester, broken: str, error: str, remedy: str
) -> None:
    repo.makepyfile(test_bench=TESTS + f"\n{broken}\n")
    commit(repo.path, "a broken test file")
    repo.makepyfile(test_bench=TESTS)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", "--gpubench-pairs=2", *LOCKSTEP)
    text = output(result)
    assert "INTERNALERROR" not in text and "Traceback" not in text
    assert "2 tests in duos, a fresh process per side at once: its file cannot be imported" in text
    assert error in text and remedy in text
    # The revision's process could not collect it: unmeasurable, with its error, not new
    # nor unsure; a run that judged nothing fails as a failed build does.
    assert "2 unmeasurable" in text and "unsure" not in text
    assert "ERROR: --gpubench-against HEAD: nothing is judged, 2 tests unmeasurable" in text
    assert result.ret == pytest.ExitCode.USAGE_ERROR


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="bug: the revision's test runs in the run's own process; an abort there ends it",
)
def test_a_revision_test_that_aborts_in_lockstep_leaves_the_others_judged(
    repo: pytest.Pytester,
) -> None:
    repo.makepyfile(kernels="import os\n\n\ndef work(n):\n    os.abort()\n")
    commit(repo.path, "a kernel that aborts its process")
    repo.makepyfile(kernels=KERNELS.format(factor=1.0))
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP)
    text = output(result)
    assert result.ret == pytest.ExitCode.OK, text
    assert "test_sum: unmeasurable" in text and "killed by SIGABRT" in text


@pytest.mark.slow
def test_an_unsure_test_gets_more_pairs_from_fresh_processes_in_lockstep(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GPUBENCH_LOCKSTEP_MORE=fresh: a change one pair cannot tell at a strict level is
    unsure: fresh processes, each running both sides in lockstep (the parent's checkout),
    add pairs up to their design's cap (4 more, 5 pairs; from its own process 9 more)."""
    slower(repo, 1.06)
    commit(repo.path, "a kernel 6% slower")
    monkeypatch.setenv("GPUBENCH_LOCKSTEP_MORE", "fresh")
    monkeypatch.setenv("FAKE_SHIFT", "0.05")  # each fresh process its own shift
    monkeypatch.setenv("FAKE_SHIFT_SEED", "3")
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD~1", "--gpubench-pairing=lockstep", "--gpubench-alpha=0.0001"
    )
    text = output(result)
    result.assert_outcomes(passed=1, failed=1)
    assert "more pairs of test_sum from 4 fresh processes" in text
    # Each process's shift (5%) falls on both of its sides: the ratio stays 1.06.
    assert "slower by 6.0% than HEAD~1" in text and "over 5 pairs in lockstep" in text
    assert "1 unsure got 4 more from fresh processes" in text
    assert not list(repo.path.parent.glob("gpubench-ref-*"))  # the checkout is gone


def against_previous(repo: pytest.Pytester) -> tuple[pytest.RunResult, str, dict[str, Any]]:
    """A lockstep run against HEAD~1 at a strict level: its result, output and test_sum's
    record in its JSON report."""
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD~1",
        "--gpubench-pairing=lockstep",
        "--gpubench-alpha=0.0001",
        "--gpubench-json=ab.json",
    )
    report = json.loads((repo.path / "ab.json").read_text())
    [summed] = [r for r in report["results"] if r["test"] == "test_sum"]
    return result, output(result), summed


@pytest.mark.slow
def test_more_pairs_in_this_process(repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """By default an unsure test's more pairs are timed here, each side's inputs placed
    anew; the summary says where. Each more pair's samplers are made again as the first
    pair's were (Sampler.again: a graph is not probed again). The one fresh process is the
    failure's second (its 10 pairs there, made the same way)."""
    slower(repo, 1.06)
    commit(repo.path, "a kernel 6% slower")
    made = repo.path.parent / f"{repo.path.name}-samplers.log"
    monkeypatch.setenv("FAKE_AGAIN_LOG", str(made))
    result, text, summed = against_previous(repo)
    lines = made.read_text().splitlines()
    # Each side's first pair here and there, a batch of 4 more here (failed at 5) and the
    # second process's 9.
    assert lines.count("made work") == 2 * 2 and lines.count("again work") == (4 + 9) * 2
    result.assert_outcomes(passed=1, failed=1)
    assert text.count("from a fresh process") == 1
    assert "a second process's 10 pairs read +6.0%" in text
    assert "slower by 6.0% than HEAD~1" in text and "over 5 pairs in lockstep" in text
    assert "1 unsure got 4 more from this process" in text
    # Its calls take no device tensor: timed again as they were, and the note says so.
    assert summed["against"]["pairs"] == 5
    assert "fresh" not in summed["against"]  # its more pairs from this process
    assert (
        "4 pairs set up again in this process, inputs placed anew for 0 of 1 call"
        in (summed["note"])
    )
    # The first pair takes the settings' least samples (20), the more pairs
    # MORE_PAIR_SAMPLES.
    first, *more = summed["against"]["head_sessions"]
    assert first["n"] >= 20 and {s["n"] for s in more} == {MORE_PAIR_SAMPLES}
    assert summed["costs"]["confirm_s"] > 0


def test_what_each_pair_notes_is_said_once_whatever_its_numbers() -> None:
    """A call that cannot be captured notes its share of host work in every pair (55% of a
    call's 82.7 µs, then 59% of 87.7 µs: on an H100, h100-2026-12-07f, a test of 5 pairs
    said it five times); a later pair adds only what the first did not say."""
    first = "not captured: it synchronizes; kernel time only: gaps, 55% of a call's 82.7 µs"
    later = "not captured: it synchronizes; kernel time only: gaps, 59% of a call's 87.7 µs"
    assert _news(first, later) == ""
    assert _news(first, later + "; no more pairs in this process: OOM") == (
        "no more pairs in this process: OOM"
    )
    assert _news("", later) == later
    # A figure's unit may change (999 µs, then 1.00 ms); other numbers are what is said.
    assert _news("a call's 999 µs", "a call's 1.00 ms") == ""
    assert _news("capture failed (CUDA error 700)", "capture failed (CUDA error 2)") == (
        "capture failed (CUDA error 2)"
    )
    assert _news("x", "y; y") == "y"


@pytest.mark.slow
def test_inputs_held_in_place_take_their_more_pairs_from_fresh_processes(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where inputs' place moves time (a GPU; FAKE_PLACED says the fake's CPU too), a call
    whose inputs this process cannot place anew (test_sum's take no tensor) takes its more
    pairs from fresh processes, one pair each (4 more, up to 5 pairs: the fresh processes'
    design), and its result says so: each process's shift (5%, as a buffer's place in L2)
    falls on both sides, and no second process is asked."""
    slower(repo, 1.06)
    commit(repo.path, "a kernel 6% slower")
    monkeypatch.setenv("FAKE_PLACED", "1")
    monkeypatch.setenv("FAKE_SHIFT", "0.05")
    monkeypatch.setenv("FAKE_SHIFT_SEED", "3")
    result, text, summed = against_previous(repo)
    result.assert_outcomes(passed=1, failed=1)
    assert "more pairs of test_sum from 4 fresh processes" in text
    assert "1 unsure got 4 more from fresh processes" in text
    assert "from a fresh process" not in text  # no second process
    assert "slower by 6.0% than HEAD~1" in text and summed["against"]["pairs"] == 5
    assert "cannot place them anew (setup=, a global, a module" in summed["note"]
    # The file says where they came from, for gpubench compare to judge it by that design.
    assert summed["against"]["fresh"] is True
    # test_join, sure on its first pair, took none and says nothing of where they would be.
    report = json.loads((repo.path / "ab.json").read_text())
    [joined] = [r for r in report["results"] if r["test"] == "test_join"]
    assert joined["against"]["pairs"] == 1 and "place them anew" not in joined.get("note", "")


def test_inputs_can_be_placed_anew_where_a_device_tensor_is_given() -> None:
    """placeable: a device tensor among the arguments, or one level into a list, tuple or
    dict, and no setup=; a CPU tensor, a deeper one, or one placed_anew leaves where it is,
    no."""
    torch = pytest.importorskip("torch")
    on = torch.empty(4, device="meta")

    def fn(*args: object, **kwargs: object) -> None:
        pass

    assert placeable(Workload(fn, (on,)))
    assert placeable(Workload(fn, ([1, on],))) and placeable(Workload(fn, kwargs={"x": {"a": on}}))
    assert not placeable(Workload(fn, (torch.empty(4),)))
    assert not placeable(Workload(fn, ([[on]],)))
    assert not placeable(Workload(fn, (on,), setup=lambda: ((on,), {})))
    # What placed_anew leaves as it is: a list too long to look into, overlapping elements.
    assert not placeable(Workload(fn, ([0] * 16 + [on],)))
    assert placeable(Workload(fn, ([0] * 15 + [on],)))
    assert not placeable(Workload(fn, (torch.empty(1, device="meta").expand(4),)))


@pytest.mark.slow
def test_a_revisions_call_that_fails_while_timed_leaves_its_test_unmeasurable(
    repo: pytest.Pytester,
) -> None:
    """The revision's function fails on its 10th call, inside the first pair (the working
    tree's mends it): the revision's failure, said as such, fails nothing; the working tree's
    test passed (it failed with the revision's error, unattributed)."""
    repo.makepyfile(kernels=failing_on(10, "raise ValueError('call 10')"))
    commit(repo.path, "a kernel failing on its 10th call")
    slower(repo, 1.0)  # not committed
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP, "-k", "test_sum")
    result.assert_outcomes(passed=1)
    text = output(result)
    assert "unmeasurable: its call failed on the revision's side (ValueError: call 10)" in text
    assert "Traceback" not in text


@pytest.mark.slow
def test_a_pair_set_up_again_that_raises_ends_the_more_pairs(repo: pytest.Pytester) -> None:
    """The working tree's function fails on its 38th call, in the second more pair (a
    test's code that fails on its inputs placed anew, or out of memory): no more pairs are
    timed, the note says why, and the test keeps the verdict of the pairs it has; no
    traceback of ours."""
    repo.makepyfile(kernels=failing_on(38, "raise RuntimeError('no memory left')"))
    commit(repo.path, "a kernel 6% slower, failing on its 38th call")
    result, text, summed = against_previous(repo)
    result.assert_outcomes(passed=2)
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert summed["status"] == "unsure" and summed["against"]["pairs"] == 2
    assert "no more pairs in this process: RuntimeError: no memory left" in summed["note"]
    assert "1 pair set up again in this process" in summed["note"]


@pytest.mark.slow
def test_a_pair_set_up_again_that_times_another_call_ends_the_more_pairs(
    repo: pytest.Pytester,
) -> None:
    """From its 38th call the function makes every sampler after it three times faster, on
    both sides (as a copy that changes what a call does: an autograd graph's tensor copied
    to a leaf read 40 times faster): that pair is left out, no more are timed, and the note
    says why; the test keeps the verdict of the pairs it has (6% slower: regressed)."""
    repo.makepyfile(kernels=failing_on(38, "__import__('os').environ['FAKE_SCALE'] = '0.3'"))
    commit(repo.path, "a kernel 6% slower, another call from its 38th")
    result, text, summed = against_previous(repo)
    result.assert_outcomes(passed=1, failed=1)
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert summed["against"]["pairs"] == 3 and summed["status"] == "regressed"
    assert (
        "no more pairs in this process: its inputs placed anew, test_sum read 0.3 times its "
        "first pair's time on both sides: another call than the test's" in summed["note"]
    )


@pytest.mark.slow
def test_a_duos_later_pair_the_revision_cannot_time_ends_its_pairs(
    repo: pytest.Pytester,
) -> None:
    """In a duo, the revision's function fails on its 38th call, in a later pair (its code
    on its inputs placed anew): that call's pairs end there, saying why, and the test keeps
    the verdict of the pairs it has; the duo goes on."""
    repo.makepyfile(
        kernels=failing_on(38, "raise RuntimeError('no memory left')"),
        test_fixture=MODULE_FIXTURE + "\n\ndef test_module(gpubench, module):\n"
        "    gpubench(module.work, 100)\n",
    )
    commit(repo.path, "a kernel 6% slower, failing on its 38th call")
    slower(repo, 1.0)
    result = repo.runpytest_subprocess(*MODULE_IN_DUOS)
    text = output(result)
    result.assert_outcomes(passed=1, deselected=2)
    assert "Traceback" not in text and "INTERNALERROR" not in text
    [found] = json.loads((repo.path / "ab.json").read_text())["results"]
    assert 1 < found["against"]["pairs"] < 5
    assert "no more pairs in this duo: RemoteCallError: " in found["note"]
    assert "RuntimeError: no memory left" in found["note"]


@pytest.mark.slow
def test_a_pair_set_up_again_is_bounded_by_the_tests_timeout(repo: pytest.Pytester) -> None:
    """pytest-timeout's timer is paused while a verdict is confirmed, but a pair timed in
    the test's own process runs its code: a hang there is the test's timeout, not a hung
    run."""
    repo.makepyfile(kernels=failing_on(38, "time.sleep(60)"))
    commit(repo.path, "a kernel 6% slower, hanging on its 38th call")
    started = time.monotonic()
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD~1", "--gpubench-pairing=lockstep", "-p", "timeout", "--timeout=3"
    )
    assert time.monotonic() - started < 40
    text = output(result)
    result.assert_outcomes(passed=1, failed=1)
    assert "Timeout" in text and "INTERNALERROR" not in text


@pytest.mark.slow
def test_pairs_asked_are_every_tests_first_look_in_lockstep(repo: pytest.Pytester) -> None:
    """``--gpubench-pairs 3`` in lockstep (as bisect's steps ask): each test's 3 pairs
    from this process, sure or not; no more with confirm 0; no fresh process."""
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "--gpubench-pairs=3", "--gpubench-json=ab.json", *LOCKSTEP
    )
    result.assert_outcomes(passed=2)
    text = output(result)
    assert "fresh process" not in text
    report = json.loads((repo.path / "ab.json").read_text())
    assert {r["against"]["pairs"] for r in report["results"]} == {3}
    assert all(r["against"]["lockstep"] for r in report["results"])


def test_inputs_placed_anew_are_copies_behind_pads_and_the_rest_as_it_was() -> None:
    """Device tensors (``meta`` stands in for a GPU's here), one level into a list or dict,
    are copied once each, a pad held before each, keeping strides, offset and the need of a
    gradient; an expanded tensor, one an autograd graph computed (a copy would be a leaf),
    a namedtuple's fields, host tensors, other values and a call with ``setup`` stay as
    they were."""
    torch = pytest.importorskip("torch")
    w = torch.empty(4, 6, device="meta", requires_grad=True)
    computed, view = w * 3, w[1:3, 2:]
    expanded = torch.empty(1, 4, device="meta").expand(1000, 4)
    y, host = torch.empty(4, device="meta"), torch.zeros(2)
    pair = collections.namedtuple("pair", "a b")(y, 1)
    given = (w, computed, view, expanded, pair, [y, y, 3], host)
    plain = Workload(fn=print, args=given, kwargs={"z": {"a": y}, "n": 5})
    fresh = Workload(fn=print, setup=lambda: None)
    with placed_anew([plain, fresh], random.Random(1)) as ((again, same), copied):
        assert copied == 3 and same is fresh  # w, view, y
        (w2, c2, v2, e2, p2, (y2, y3, three), h2), kwargs = again.args, again.kwargs
        assert w2 is not w and w2.shape == w.shape and w2.requires_grad and w2.is_leaf
        assert c2 is computed
        assert (v2.stride(), v2.storage_offset()) == (view.stride(), view.storage_offset())
        assert v2 is not view and v2.requires_grad
        assert e2 is expanded and p2 is pair and h2 is host and three == 3
        assert y2 is y3 is kwargs["z"]["a"] and y2 is not y and kwargs["n"] == 5


def test_a_backward_through_a_graph_is_not_placed_anew() -> None:
    """``lambda: y.backward(dy, retain_graph=True)``: a copy of ``y`` would be a leaf, its
    backward a copy of ``dy`` into its grad, not the graph's kernels (on an H100 the user
    suite's 0.39 ms backward read 9.6 µs in its pairs set up again, h100-2026-12-07b). ``y``
    and its views stay, given or held: the call is not placeable, so its more pairs come
    from fresh processes; a leaf that needs a gradient is still copied."""
    torch = pytest.importorskip("torch")
    x = torch.empty(4, 4, device="meta", requires_grad=True)
    y, dy = x * 2, torch.empty(4, 4, device="meta")

    def step() -> None:
        y.backward(dy, retain_graph=True)

    own = [y, dy]  # y and dy are step's cells: this frame reads what they hold meanwhile
    assert not placeable(Workload(step)) and not placeable(Workload(print, (y[1:], dy)))
    assert placeable(Workload(print, (x, dy)))
    with placed_anew([Workload(step), Workload(print, (y[1:], x))], random.Random(1)) as (
        (_, given),
        copied,
    ):
        assert y is own[0] and dy is not own[1] and copied == 2  # dy, x
        assert given.args[0]._base is y and given.args[1] is not x and given.args[1].is_leaf
    assert dy is own[1]


def test_inputs_a_closure_holds_are_placed_anew_and_put_back() -> None:
    """A closure's device tensors (a buffer alone and in a list) point at copies while the
    inputs are placed anew, one copy for a tensor also given, and at the test's own
    tensors after; a host tensor, a function, a list of no tensor (the same list) and a
    cell still empty stay as they are."""
    torch = pytest.importorskip("torch")
    out, x, host = torch.empty(8, device="meta"), torch.empty(8, device="meta"), torch.zeros(2)
    buffers, names = [out, 3], ["a", 1]

    def helper() -> None:
        pass

    def step(given: object, end: bool = False) -> object:
        return later if end else (out, buffers, host, helper, names, given)

    seen, held = step(x), out  # out is step's cell: it reads the copy meanwhile
    assert placeable(Workload(step)) and not placeable(Workload(lambda: host))
    with placed_anew([Workload(step, (x,)), Workload(step)], random.Random(1)) as (
        (again, _),
        copied,
    ):
        out2, buffers2, host2, fn, names2, given = step(again.args[0])
        assert copied == 2 and out2 is not held and buffers2[0] is out2 and buffers2[1] == 3
        assert host2 is host and fn is helper and names2 is names
        assert given is again.args[0] is not x
    later = "filled after"
    assert step(x) == seen and step(x, end=True) == later


def test_a_closure_holding_what_cannot_be_moved_is_not_placeable() -> None:
    """A closure that holds a module's weights or an object's tensor fields keeps them where
    they are: its more pairs come from elsewhere (placeable is false). A sparse tensor has
    no strides to keep: never copied, and asking does not raise. A cycle of __wrapped__
    ends."""
    torch = pytest.importorskip("torch")
    x = torch.empty(8, device="meta")
    model = torch.nn.Linear(2, 2, device="meta")
    holder = types.SimpleNamespace(weight=torch.empty(4, device="meta"))
    plain = types.SimpleNamespace(size=4)
    sparse = torch.sparse_coo_tensor(
        torch.zeros(2, 0, dtype=torch.long),
        torch.zeros(0),
        (4, 4),
        device="meta",
        check_invariants=False,
    )
    assert not placeable(Workload(lambda: model(x))) and not placeable(
        Workload(lambda: [holder, x])
    )
    assert placeable(Workload(lambda: (plain, x))) and placeable(Workload(lambda: (types, x)))
    assert not placeable(Workload(lambda: sparse)) and placeable(Workload(lambda: (sparse, x)))

    def f() -> object:
        return x

    def g() -> object:
        return x

    f.__wrapped__, g.__wrapped__ = g, f  # type: ignore[attr-defined]
    own = [x]  # x is f's and g's cell: this frame reads the copy meanwhile
    assert placeable(Workload(f))
    with placed_anew([Workload(f)], random.Random(1)) as (_, copied):
        assert copied == 1 and f() is not own[0] and g() is f()
    assert f() is own[0]


def test_a_closure_behind_a_wrapper_is_placed_anew(tmp_path: Path) -> None:
    """A closure reached through functools.wraps (lockstep's side wrapper, TwoSides.on_side,
    or a user's decorator) is placed anew as the function's own: on an H100 the side
    wrapper hid a copy's closure, and its more pairs went to fresh processes
    (bench/results/h100-2026-12-06)."""
    import functools

    from pytest_gpubench.versus.lockstep import TwoSides
    from pytest_gpubench.versus.revision import Revision

    torch = pytest.importorskip("torch")
    src, dst = torch.empty(8, device="meta"), torch.empty(8, device="meta")
    given = (src, dst)  # the test's own: step's cells are this frame's src and dst

    def step() -> object:
        return src, dst

    @functools.wraps(step)
    def decorated() -> object:
        return step()

    two = TwoSides(
        Revision("HEAD", "0" * 40, tmp_path / "repo", tmp_path / "checkout"), tmp_path / "plugin"
    )
    for fn in (two.on_side(True, Workload(step)).fn, decorated):
        assert placeable(Workload(fn))
        with placed_anew([Workload(fn)], random.Random(1)) as (_, copied):
            moved = fn()
            assert copied == 2 and moved[0] is not given[0] and moved[1] is not given[1]
        assert fn()[0] is given[0] and fn()[1] is given[1]


def test_a_revisions_call_raises_its_own_error_and_is_told_as_the_revisions(
    tmp_path: Path,
) -> None:
    """A revision's timed call raises its own error, not one of ours: a timer's probe
    catches it by its type (timing.cuda.synchronizes: an `.item()` under the sync debug mode
    is a RuntimeError; wrapped, every A/A run read such a test `unmeasurable` on an H100).
    The fixture still tells it, or an error raised from it, as the revision's; not the
    working tree's."""
    from pytest_gpubench.versus.lockstep import TwoSides
    from pytest_gpubench.versus.revision import Revision

    def fails() -> None:
        raise RuntimeError("called a synchronizing CUDA operation")

    two = TwoSides(
        Revision("HEAD", "0" * 40, tmp_path / "repo", tmp_path / "checkout"), tmp_path / "plugin"
    )
    head, base = two.on_side(False, Workload(fails)), two.on_side(True, Workload(fails))
    with pytest.raises(RuntimeError) as mine:
        head.fn()
    with pytest.raises(RuntimeError) as theirs:
        base.fn()
    assert two.revision_error(mine.value) is None
    line = "RuntimeError: called a synchronizing CUDA operation"
    assert two.revision_error(theirs.value) == line
    try:
        raise ValueError("a timer's own") from theirs.value
    except ValueError as exc:
        assert two.revision_error(exc) == line


def test_a_side_is_made_current_as_its_calls_are_prepared_not_in_each_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A side's modules are put in place as a timer prepares its calls, before its clock
    starts, and stay while its calls run; a call finding the other side's puts its own.
    Swapped around each call, they cost 4-17 µs a call (5-50 modules a side), timed with
    the call: a host-timed function read that much slower, and the sides' costs differed."""
    from pytest_gpubench.versus.lockstep import TwoSides
    from pytest_gpubench.versus.revision import Revision

    for side, folder in (("head", "repo"), ("base", "checkout")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "sidemod.py").write_text(f"SIDE = {side!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "repo"))
    monkeypatch.delitem(sys.modules, "sidemod", raising=False)
    two = TwoSides(
        Revision("HEAD", "0" * 40, tmp_path / "repo", tmp_path / "checkout"), tmp_path / "plugin"
    )
    try:
        importlib.import_module("sidemod")
        with two.base():
            assert importlib.import_module("sidemod").SIDE == "base"
        seen: list[str] = []

        def which() -> None:
            seen.append(sys.modules["sidemod"].SIDE)

        head, base = two.on_side(False, Workload(which)), two.on_side(True, Workload(which))
        swaps: list[bool] = []
        swap = two._swap
        monkeypatch.setattr(two, "_swap", lambda b: (swaps.append(b), swap(b))[1])
        for workload in (base, base, head, head, base):
            call = workload.prepare()
            assert sys.modules["sidemod"].SIDE == ("base" if workload is base else "head")
            for _ in range(3):
                call()
        assert seen == ["base"] * 6 + ["head"] * 6 + ["base"] * 3
        assert swaps == [True, False, True]  # one for each change of side, none for a call
        head.fn()  # (a call prepared once, made again after the other side's)
        assert seen[-1] == "head" and swaps[-1] is False
        two.current(False)
        assert sys.modules["sidemod"].SIDE == "head"
    finally:
        sys.modules.pop("sidemod", None)


def test_the_pairs_asked_set_the_first_look_of_either_pairing() -> None:
    """None is the pairing's own: 3 pairs of processes then 7 more, or 1 in lockstep then
    up to 9 more from its process, 4 at a time (4 more where they come from fresh processes,
    a process each); pairs asked replace the first look, confirm 0 the more."""
    assert design_of(None, True) == PairDesign(3, 7, 10)
    assert design_of(None, True, lockstep=True) == LOCKSTEP_DESIGN == PairDesign(1, 4, 10)
    fresh = design_of(None, True, lockstep=True, fresh=True)
    assert fresh == LOCKSTEP_FRESH_DESIGN == PairDesign(1, 4, 5)
    assert design_of(None, False, lockstep=True) == PairDesign(1, 1, 1)
    assert design_of(None, False, lockstep=True, fresh=True) == PairDesign(1, 1, 1)
    assert design_of(3, False, lockstep=True) == PairDesign(3, 1, 3)
    assert design_of(2, True, lockstep=True) == PairDesign(2, 4, 11)
    assert design_of(2, True, lockstep=True, fresh=True) == PairDesign(2, 4, 6)
    assert design_of(5, True) == PairDesign(5, 7, 12)


def test_inputs_the_device_cannot_copy_stay_where_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test whose inputs fill the device: the copy that runs out of memory is not made,
    that tensor is timed again where it is, the others still move, and nothing is raised."""
    torch = pytest.importorskip("torch")
    big, small = torch.empty(1 << 20, device="meta"), torch.empty(4, device="meta")
    empty_like = torch.empty_like

    def out_of_memory(t: object, **kwargs: object) -> object:
        if t is big:
            raise torch.OutOfMemoryError("CUDA out of memory (a test's stand-in)")
        return empty_like(t, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(torch, "empty_like", out_of_memory)
    given = Workload(fn=print, args=(big, small, big))
    with placed_anew([given], random.Random(1)) as ([again], copied):
        assert copied == 1
        assert again.args[0] is big and again.args[2] is big and again.args[1] is not small


def test_fixture_values_that_hold_code_are_named() -> None:
    """A module, a function or class of the project, an instance of one of its classes, in
    a container, a partial, a bound method or an object's attributes (a few levels deep):
    the revision's test would run the working tree's code."""
    import functools
    import types

    from pytest_gpubench.versus.lockstep import holding_code

    project = types.ModuleType("kernels")
    project.__file__ = "/repo/kernels.py"
    exec("class Config: pass\ndef work(): pass", project.__dict__)
    native = types.ModuleType("ext")
    native.__file__ = "/tmp/build/ext.cpython-311-x86_64-linux-gnu.so"
    import sys

    sys.modules["kernels"] = project
    try:

        def ours(m: object) -> bool:
            return m is project

        assert holding_code({"n": 3, "x": [1.0], "m": project}, ours) == "m"
        assert holding_code({"f": project.work}, ours) == "f"
        assert holding_code({"c": project.Config()}, ours) == "c"
        assert holding_code({"pair": (1, project.Config)}, ours) == "pair"
        assert holding_code({"ext": native}, ours) == "ext"
        assert holding_code({"n": 3, "text": "kernels", "d": {"a": 1}}, ours) == ""
        assert holding_code({"p": functools.partial(project.work, 0.5)}, ours) == "p"
        assert holding_code({"ns": types.SimpleNamespace(fn=project.work)}, ours) == "ns"
        assert holding_code({"deep": {"a": [types.SimpleNamespace(c=project.Config)]}}, ours)
        assert holding_code({"bound": functools.partial(print).__call__}, ours) == ""
        cycle: list[object] = [1]
        cycle.append(cycle)
        assert holding_code({"cycle": cycle, "many": list(range(10**6))}, ours) == ""
        assert holding_code({"far": [[[[[project.work]]]]]}, ours) == ""  # past HOLD_DEPTH
        held = dataclasses.make_dataclass("Held", ["fn"])(project.work)
        assert holding_code({"data": held}, ours) == "data"
        other = type("Request", (), {})()  # not the project's
        other.item = project.work  # as pytest's request holds the test: its own insides
        assert holding_code({"request": other}, ours) == ""
    finally:
        del sys.modules["kernels"]


def test_a_compilers_cached_library_is_no_native_extension_of_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Triton loads a launcher per kernel from its cache (content-addressed): not the
    project's library; one loaded from elsewhere on the revision's side is."""
    import sys
    import types

    from pytest_gpubench.versus.lockstep import TwoSides
    from pytest_gpubench.versus.revision import Revision

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    two = TwoSides(
        Revision("HEAD", "0" * 40, tmp_path / "repo", tmp_path / "checkout"), tmp_path / "plugin"
    )
    launcher = types.ModuleType("__triton_launcher")
    launcher.__file__ = str(tmp_path / "triton" / "ab12" / "__triton_launcher.so")
    built = types.ModuleType("my_ext")
    built.__file__ = str(tmp_path / "build" / "my_ext.so")
    with two.base():
        monkeypatch.setitem(sys.modules, "__triton_launcher", launcher)
    assert two.native() == ""
    with two.base():
        monkeypatch.setitem(sys.modules, "my_ext", built)
    assert two.native() == "it loads a native extension (my_ext), which one process holds once"


def test_a_native_library_is_checked_before_it_loads_on_the_revisions_side(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A native module the revision's side imports is checked before it loads: one not
    built by torch here, or one registering torch operators (a second registration aborts
    the process), is never loaded and says why; a torch extension that registers none
    loads (its dlopen then fails here: the file is no library)."""
    import importlib.util

    from torch.utils import cpp_extension

    from pytest_gpubench.versus.lockstep import TwoSides
    from pytest_gpubench.versus.revision import Revision

    def imported(two: TwoSides, name: str, content: bytes) -> str:
        file = tmp_path / f"{name}.so"
        file.write_bytes(content)
        spec = importlib.util.spec_from_file_location(name, file)
        assert spec is not None
        with two.base(), pytest.raises(ImportError) as raised:
            importlib.util.module_from_spec(spec)
        return str(raised.value)

    def fresh() -> TwoSides:
        return TwoSides(
            Revision("HEAD", "0" * 40, tmp_path / "repo", tmp_path / "co"), tmp_path / "plugin"
        )

    two = fresh()
    assert imported(two, "my_ext", b"ELF") == "it loads a native extension (my_ext), " + (
        "which one process holds once"
    )
    assert two.native() == "it loads a native extension (my_ext), which one process holds once"
    entries = {"built": cpp_extension.JIT_EXTENSION_VERSIONER.entries.get("x")}
    monkeypatch.setattr(cpp_extension.JIT_EXTENSION_VERSIONER, "entries", entries)
    two = fresh()
    why = imported(two, "built_v1", b"ELF _ZN5torch7LibraryC1ENS0_4KindE")
    assert why == "its torch extension built_v1 registers torch operators, " + (
        "which one process holds once"
    )
    two = fresh()
    assert "registers" not in imported(two, "built_v2", b"ELF")  # dlopen's own error
    assert two.native() == ""


@pytest.mark.slow
def test_a_torch_extension_built_on_each_side_runs_both_in_one_process(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CUDA C++ loaded into PyTorch, as users write it (``load_inline``), here in C++ on
    the CPU, handed to the tests by a fixture: torch builds each side's source as a module
    of its own, and the revision's fixture gives its side's, so both run in this process,
    each calling its own (the revision's assertion holds only with its own);
    an extension registering torch operators is never loaded twice (which aborts a
    process): that test goes to duos, and says why."""
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("no C++ compiler or ninja here")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    extension = """
import pytest
import torch
from torch.utils.cpp_extension import load_inline

FACTOR = {factor}
LIBRARY = {library!r}


def load(name):
    source = f"torch::Tensor scale(torch::Tensor x) {{{{ return x * {{FACTOR}}; }}}}"
    if LIBRARY:
        source += f"\\nTORCH_LIBRARY({{name}}, m) {{{{ m.def(\\"scale\\", &scale); }}}}"
    return load_inline(name, cpp_sources=source, functions=["scale"])


@pytest.fixture(scope="session")
def ext():  # as the example suite's cuda_ext: a fixture hands the tests the extension
    return load("{test}_ext")


def {test}(gpubench, ext):
    def scale(x):
        return ext.scale(x)

    scale.fake_factor = {slow}
    assert gpubench(scale, torch.ones(4)).tolist() == [FACTOR] * 4
"""

    def files(factor: int, slow: float) -> None:
        repo.makepyfile(
            test_a_scale=extension.format(factor=factor, library="", test="test_a", slow=slow),
            test_b_ops=extension.format(factor=factor, library="yes", test="test_b", slow=slow),
        )

    files(2, 1.0)
    commit(repo.path, "two extensions")
    files(3, 1.3)
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "test_a_scale.py", "test_b_ops.py", *LOCKSTEP
    )
    text = output(result)
    assert "Aborted" not in text and "Traceback" not in text
    result.assert_outcomes(failed=2)
    assert (
        "1 test in duos, a fresh process per side at once: its torch extension test_b_ext" in text
    )
    assert "registers torch operators, which one process holds once" in text
    [a] = [line for line in text.splitlines() if line.startswith("test_a: regressed")]
    assert "slower by 30.0% than HEAD" in a and " in lockstep; gate" in a  # in this process
    assert "test_b: regressed: slower by 30.0% than HEAD" in text


@pytest.mark.slow
def test_other_inputs_on_the_two_sides_are_reported_not_judged(repo: pytest.Pytester) -> None:
    """The working tree's test gives its function other inputs than the revision's: the
    pair times other work, so it is `changed` and names the inputs, whatever it read."""
    repo.makepyfile(
        test_bench=TESTS.replace("gpubench(work, 100) == 4950", "gpubench(work, n=100)")
    )
    commit(repo.path, "keyword inputs")
    repo.makepyfile(
        test_bench=TESTS.replace("gpubench(work, 100) == 4950", "gpubench(work, n=200)")
    )
    slower(repo, 1.3)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *LOCKSTEP)
    result.assert_outcomes(passed=2)
    text = output(result)
    assert "test_sum: changed: inputs changed (argument 1: n=100 -> n=200), not judged" in text
    assert "slower by 30.0%" in text


def test_a_calls_inputs_are_described_by_the_work_they_set() -> None:
    import torch

    from pytest_gpubench.run.sides import inputs_changed
    from pytest_gpubench.timing.device import inputs_of
    from pytest_gpubench.timing.engine import Workload

    def described(*args: object, **kwargs: object) -> tuple[str, ...]:
        return inputs_of(Workload(print, args, kwargs))

    x = torch.zeros(4, 3)
    assert described(x, [1, x], scale=2.0) == ("(4, 3) float32", "[1, (4, 3) float32]", "scale=2.0")
    assert inputs_changed(described(x), described(x.double())) == (
        "argument 1: (4, 3) float32 -> (4, 3) float64"
    )
    assert inputs_changed(described(x), described(x, 1)) == "1 arguments -> 2"
    assert inputs_changed(described(x, n=3), described(torch.ones(4, 3), n=3)) == ""
    # fresh inputs from setup: not described
    assert inputs_of(Workload(print, (), {}, setup=lambda: None)) == ()


@pytest.mark.slow
def test_pairs_set_up_again_copy_each_side_first_in_turn(repo: pytest.Pytester) -> None:
    """PyTorch's caching allocator gives a large copy the lowest free block of its size
    whatever the pads: were one side always copied first, it would always get that block
    and every pair would carry the blocks' difference. The side copied first alternates,
    the revision's first in the first pair set up again."""
    repo.makeconftest(
        """
        import inspect
        import pytest_gpubench.timing.device as device

        placed = device.placed_anew

        def logged(workloads, draw):
            first = inspect.unwrap(workloads[0].fn).__code__.co_filename
            here = first.startswith(str(__import__("pathlib").Path.cwd()))
            with open("order.txt", "a") as f:
                f.write("head\\n" if here else "base\\n")
            return placed(workloads, draw)

        device.placed_anew = logged
        """
    )
    result = repo.runpytest_subprocess(
        "--gpubench-against=HEAD", "--gpubench-pairs=5", "-k", "test_sum", *LOCKSTEP
    )
    assert "INTERNALERROR" not in output(result)
    order = (repo.path / "order.txt").read_text().split()
    assert order == ["base", "head", "base", "head"]


def test_a_pair_set_up_again_makes_each_sides_sampler_first_in_turn() -> None:
    """A graph's outputs land by the order of capture as a copy's do: the revision's sampler
    is made first where the revision was copied first, and the pair comes back as (the
    working tree's, the revision's) either way; where one cannot be made, none is kept."""
    made: list[str] = []
    closed: list[str] = []

    def again(side: str, timer: str = "cuda-graph") -> Callable[..., Sampler]:
        def make(workload: Workload, count: int | None = None) -> Sampler:
            made.append(side)
            return Sampler(timer=timer, sample=lambda: 1.0, close=lambda: closed.append(side))

        return make

    mine, theirs = Workload(print), Workload(print)
    for base_first, order in ((True, ["base", "head"]), (False, ["head", "base"])):
        made.clear()
        pair = _remade_pair(again("head"), again("base"), mine, theirs, base_first)
        assert made == order and pair is not None
        pair[0].close()
        pair[1].close()
        assert closed[-2:] == ["head", "base"]
    closed.clear()
    assert _remade_pair(again("head"), again("base", "cupti"), mine, theirs, True) is None
    assert sorted(closed) == ["base", "head"]
