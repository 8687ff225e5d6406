"""``gpubench bisect GOOD BAD``: the search and its report on fake steps (versus/bisect.py, no
git), then the command as users run it on generated git repositories with the fake timer.

The fake timer multiplies a function's time by its ``fake_factor``: the commit that sets it
is the slow commit to find, and only a step whose checkout has it sees it."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support import IMPORT_HOOK, KERNELS, commit, git, in_lib, running

from pytest_gpubench import cli
from pytest_gpubench.core.records import Status
from pytest_gpubench.versus.bisect import (
    BisectError,
    Bisection,
    Commit,
    Focus,
    Outcome,
    Range,
    Reading,
    State,
    Step,
    StepRun,
    StepVerdict,
    classify,
    fitted,
    more_pairs,
    report_json,
    report_lines,
    search,
    step_line,
    unfollowed,
)

pytest_plugins = ["pytester"]

# The structure these tests were written for (lockstep has its own: test_lockstep.py).
pytestmark = pytest.mark.usefixtures("processes_pairing")

SUM = "test_bench.py::test_sum"
JOIN = "test_bench.py::test_join"
# Two pairs: a +50% slowdown is regressed, nothing changed is same (one pair is unsure);
# no further pairs for unsure tests, no re-runs with more.
FAST = ("--pairs", "2", "--max-pairs", "2")
AFTER = ("--", "-k", "test_sum")


# --- the search, on fake steps ----------------------------------------------------------------


def reading(
    key: str = SUM,
    status: Status = Status.SAME,
    ratio: float | None = 1.0,
    high: float | None = None,
    pairs: int = 3,
    low: float | None = None,
) -> Reading:
    if high is None and ratio is not None:
        high = ratio * 1.01
    if low is None and ratio is not None:
        low = ratio / 1.01
    return Reading(key, status, ratio, low, high, 0.05, pairs, f"{status.value} by the fake")


def unsure(pairs: int) -> Reading:
    """Neither like GOOD nor like a BAD of 1.5: its interval spans the halfway point (1.22)."""
    return reading(status=Status.UNSURE, ratio=1.2, low=1.05, high=1.4, pairs=pairs)


def commits(count: int) -> list[Commit]:
    return [Commit(f"{i:07x}" + "f" * 33, f"change {i + 1}") for i in range(count)]


GOOD = Commit("0" * 40, "the good one")
Behaviour = Callable[[int, int], dict[str, Reading]]


class FakeSteps:
    """A runner whose readings at a position come from ``behaviour(position, pairs)``; it
    records what it was asked."""

    def __init__(self, history: list[Commit], behaviour: Behaviour) -> None:
        self.position = {c: i for i, c in enumerate(history)}
        self.behaviour = behaviour
        self.asked: list[tuple[int, int]] = []
        self.focus: list[Focus] = []  # by step, what it was asked to time

    def __call__(self, commit_: Commit, pairs: int, focus: Focus) -> StepRun:
        position = self.position[commit_]
        self.asked.append((position, pairs))
        self.focus.append(focus)
        readings = self.behaviour(position, pairs)
        return StepRun(readings, pairs, 10.0, family=len(readings))


def slow_from(first_bad: int) -> Behaviour:
    """test_sum regressed from ``first_bad`` on, the same before."""

    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        if position >= first_bad:
            return {SUM: reading(status=Status.REGRESSED, ratio=1.5, pairs=pairs)}
        return {SUM: reading(pairs=pairs)}

    return behaviour


def bisected(count: int, behaviour: Behaviour, **options: int) -> tuple[Bisection, FakeSteps]:
    history = commits(count)
    steps = FakeSteps(history, behaviour)
    lines: list[str] = []
    found = search(
        GOOD,
        "v1",
        history,
        steps,
        pairs=options.get("pairs", 3),
        max_pairs=options.get("max_pairs", 12),
        announce=lines.append,
        clock=iter([0.0, 42.0]).__next__,  # the search's start and end
    )
    assert lines == [step_line(s, "v1") for s in found.steps]  # each step said as it ended
    return found, steps


@pytest.mark.parametrize("first_bad", range(16))
def test_the_search_finds_the_first_bad_of_16_in_five_steps(first_bad: int) -> None:
    found, steps = bisected(16, slow_from(first_bad))
    assert found.state is State.FOUND
    assert found.first_bad == commits(16)[first_bad]
    assert [s.position for s in found.steps][0] == 15  # BAD first
    assert len(found.steps) == 1 + 4  # BAD, then log2(16)
    for step in found.steps:
        expected = Outcome.BAD if step.position >= first_bad else Outcome.GOOD
        assert step.verdict.outcome is expected
        assert step.total == 5
    assert found.pairs == 15 and steps.asked == [(s.position, 3) for s in found.steps]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7, 9, 20])
def test_the_search_takes_at_most_log2_steps_after_bad(count: int) -> None:
    for first_bad in range(count):
        found, _ = bisected(count, slow_from(first_bad))
        assert found.first_bad == commits(count)[first_bad]
        assert len(found.steps) <= 1 + math.ceil(math.log2(count))
        assert len({s.position for s in found.steps}) == len(found.steps)  # none twice
        assert found.steps[-1].total == len(found.steps)
        assert all(s.number <= s.total <= 1 + math.ceil(math.log2(count)) for s in found.steps)


def test_an_unsure_step_runs_again_with_twice_the_pairs_then_stops_naming_the_range() -> None:
    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        if position == 7:  # the first midpoint of 16: never decided
            return {SUM: unsure(pairs)}
        return slow_from(4)(position, pairs)

    found, steps = bisected(16, behaviour)
    assert steps.asked == [(15, 3), (7, 3), (7, 6), (7, 12)]
    assert found.state is State.UNSURE and found.first_bad is None
    assert found.remaining == tuple(commits(16))  # nothing was learnt: GOOD .. BAD
    lines = [step_line(s, "v1") for s in found.steps]
    assert lines[1].startswith(f'step 2/5: {commits(16)[7].short} "change 8": unsure (test_sum')
    assert lines[1].endswith(": again with 6 pairs") and lines[2].endswith(": again with 12 pairs")
    assert "again" not in lines[3] and lines[3].startswith("step 2/2: ")
    report = report_lines(found)
    assert report[0].startswith(f"stopped: {commits(16)[7].short} stayed unsure at 12 pairs")
    assert "one of these 16, after v1 0000000:" in report[0]
    assert report[1:17] == [f"  {c.sha} {c.subject}" for c in commits(16)]
    assert report[-1] == "cost: 2 steps (4 runs), 24 pairs (48 timing processes), 42 s"


def test_an_unsure_step_decided_by_more_pairs_goes_on() -> None:
    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        if position == 7 and pairs < 6:
            return {SUM: unsure(pairs)}
        return slow_from(10)(position, pairs)

    found, steps = bisected(16, behaviour, max_pairs=20)
    assert found.state is State.FOUND and found.first_bad == commits(16)[10]
    assert (7, 3) in steps.asked and (7, 6) in steps.asked and (7, 12) not in steps.asked


def test_a_test_not_measured_at_a_commit_stops_without_more_pairs() -> None:
    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        return {} if position == 7 else slow_from(3)(position, pairs)

    found, steps = bisected(16, behaviour)
    assert steps.asked == [(15, 3), (7, 3)]
    assert found.state is State.UNSURE
    assert found.steps[-1].verdict.why == "test_sum was not measured at this commit"
    assert found.remaining == tuple(commits(16))
    stopped = f"stopped: {commits(16)[7].short} is unsure: test_sum was not measured at this"
    assert report_lines(found)[0].startswith(stopped)


def test_the_range_left_by_an_unsure_step_is_what_the_good_and_bad_steps_left() -> None:
    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        if position == 5:
            return {SUM: unsure(pairs)}
        return slow_from(5)(position, pairs)

    found, _ = bisected(16, behaviour, max_pairs=3)
    # BAD (15) bad, 7 bad, 3 good, 5 unsure: the first bad commit is 4, 5, 6 or 7
    assert [s.position for s in found.steps] == [15, 7, 3, 5]
    assert found.range == Range(3, 7)
    assert found.remaining == tuple(commits(16)[4:8])
    assert f"after {commits(16)[3].short}:" in report_lines(found)[0]


def test_bad_not_slower_than_good_stops_after_one_step() -> None:
    found, steps = bisected(16, lambda position, pairs: {SUM: reading(), JOIN: reading(key=JOIN)})
    assert steps.asked == [(15, 3)]
    assert found.state is State.NOT_BAD
    assert report_lines(found)[0] == (
        f"nothing to bisect: BAD {commits(16)[15].short} is not slower than v1 0000000 (2 same)"
    )


def test_an_unsure_bad_gets_more_pairs_before_it_is_called_not_bad() -> None:
    found, steps = bisected(
        4, lambda p, pairs: {SUM: reading(status=Status.UNSURE, ratio=1.02, pairs=pairs)}
    )
    assert steps.asked == [(3, 3), (3, 6), (3, 12)]
    assert found.state is State.NOT_BAD
    assert "test_sum unsure, slower by 2.0% than v1" in step_line(found.steps[-1], "v1")


def test_the_tests_followed_are_those_bad_regressed() -> None:
    def behaviour(position: int, pairs: int) -> dict[str, Reading]:
        if position == 15:
            return {SUM: reading(status=Status.REGRESSED, ratio=1.2), JOIN: reading(key=JOIN)}
        if position >= 9:  # test_sum's commit
            return {SUM: reading(status=Status.REGRESSED, ratio=1.2), JOIN: reading(key=JOIN)}
        # test_join slower for a while, fixed before BAD: not the regression hunted
        join = reading(key=JOIN, status=Status.REGRESSED, ratio=1.3)
        return {SUM: reading(), JOIN: join if position >= 2 else reading(key=JOIN)}

    found, steps = bisected(16, behaviour)
    assert found.first_bad == commits(16)[9]
    # BAD's step times the whole selection; the later ones leave out what BAD did not
    # regress, and judge what they time in BAD's family.
    later = Focus(("test_bench.py::test_join",), family=2, later=True)
    assert steps.focus == [Focus(), *[later] * (len(steps.focus) - 1)]


def test_left_out_tests_too_many_for_a_command_line_are_timed_with_the_rest() -> None:
    """Each left-out node id is an argument of the step's pytest: beyond what a command line
    holds (about 2 MB on Linux) the process would not start."""
    few = Focus(("t.py::a", "t.py::b"), family=3, later=True)
    assert fitted(few) == (few, ", 2 tests that BAD did not regress left out")
    many = Focus(tuple(f"t.py::test[{i}-{'x' * 9000}]" for i in range(60)), family=61, later=True)
    whole, said = fitted(many)
    assert whole == Focus((), family=61, later=True)  # still judged in BAD's family
    assert said == ", the whole selection (60 tests that BAD did not regress: too many to name)"


def test_a_test_left_out_is_never_one_a_followed_test_belongs_to() -> None:
    """pytest's --deselect takes prefixes: ``test_x`` would deselect ``test_x_y`` too, and
    named measurements of a followed test (``node id#name``) keep their test."""
    keys = ("a.py::test_x", "a.py::test_x_y", "a.py::test_z#one", "a.py::test_z#two", "b.py::t")
    readings = {k: reading(key=k) for k in keys}
    followed = {"a.py::test_x_y": 1.2, "a.py::test_z#two": 1.2}
    assert unfollowed(readings, followed) == ("b.py::t",)


def test_report_names_the_first_bad_commit_its_tests_and_the_cost() -> None:
    found, _ = bisected(16, slow_from(12))
    first = commits(16)[12]
    assert report_lines(found) == [
        f"first bad commit: {first.sha} {first.subject}",
        f"  {SUM}: x1.500 (slower by 50.0% than v1, 3 pairs)",
        "cost: 5 steps, 15 pairs (30 timing processes), 42 s",
    ]
    document = json.loads(json.dumps(report_json(found, ["-k", "softmax"])))
    assert document["state"] == "found" and document["first_bad"]["commit"] == first.sha
    assert document["pytest_args"] == ["-k", "softmax"] and document["commits"] == 16
    assert [s["position"] for s in document["steps"]] == [s.position for s in found.steps]
    assert document["steps"][0]["tests"][0]["status"] == "regressed"
    assert document["cost"] == {
        "steps": 5,
        "runs": 5,
        "skipped": 0,
        "pairs": 15,
        "processes": 30,
        "seconds": 42.0,
    }


def test_a_step_line_says_commit_subject_outcome_evidence_pairs_and_time() -> None:
    head = Commit("abc1234" + "0" * 33, "faster softmax, they said")
    run = StepRun({SUM: reading(status=Status.REGRESSED, ratio=1.052)}, 3, 41.2)
    step = Step(2, 4, 7, head, 3, run, classify(run.readings, None))
    assert step_line(step, "v1.2") == (
        'step 2/4: abc1234 "faster softmax, they said": bad (test_sum slower by 5.2% than '
        "v1.2, 3 pairs, 41 s)"
    )


@pytest.mark.parametrize(
    ("found", "outcome", "more"),
    [
        (reading(status=Status.REGRESSED, ratio=1.2), Outcome.BAD, False),
        (reading(status=Status.SAME), Outcome.GOOD, False),
        (reading(status=Status.IMPROVED, ratio=0.8), Outcome.GOOD, False),
        # its interval below halfway to BAD's 1.2 (1.095), whatever its own verdict
        (reading(status=Status.CHANGED, ratio=1.0, high=1.03), Outcome.GOOD, False),
        (reading(status=Status.UNSURE, ratio=1.05, high=1.09), Outcome.GOOD, False),
        # above halfway: like BAD, though not regressed at the threshold
        (reading(status=Status.UNSURE, ratio=1.15, low=1.1, high=1.3), Outcome.BAD, False),
        # across halfway: more pairs may tell
        (reading(status=Status.CHANGED, ratio=1.09, low=1.03, high=1.15), Outcome.UNSURE, True),
        (reading(status=Status.UNSURE, ratio=1.1, low=1.0, high=1.2), Outcome.UNSURE, True),
        # no pair to judge (its test failed, another timer): more pairs would not tell
        (reading(status=Status.CHANGED, ratio=None), Outcome.UNSURE, False),
        (reading(status=Status.UNSURE, ratio=None), Outcome.UNSURE, False),
        (reading(status=Status.REMOVED, ratio=None), Outcome.UNSURE, False),
    ],
)
def test_classify_one_followed_test(found: Reading, outcome: Outcome, more: bool) -> None:
    verdict = classify({SUM: found}, {SUM: 1.2})
    assert (verdict.outcome, verdict.more_pairs) == (outcome, more)


def test_a_slowdown_under_the_threshold_found_at_bad_is_found_where_it_is() -> None:
    """BAD regressed by 4% (the gate fails some changes under its 5% threshold): a commit
    that carries the 4% reads `same` at 5% but lies above halfway, so it is bad."""
    carried = reading(status=Status.SAME, ratio=1.04, low=1.03, high=1.05)
    assert classify({SUM: carried}, {SUM: 1.04}).outcome is Outcome.BAD
    assert classify({SUM: reading(low=0.995, high=1.005)}, {SUM: 1.04}).outcome is Outcome.GOOD


def test_classify_bad_counts_what_was_measured_on_both_sides() -> None:
    new = reading(key=JOIN, status=Status.NEW, ratio=None)
    assert classify({SUM: reading(), JOIN: new}, None).outcome is Outcome.GOOD
    assert classify({JOIN: new}, None) == StepVerdict(
        Outcome.UNSURE, why="no gpubench test was measured on both sides"
    )
    regressed = {SUM: reading(status=Status.REGRESSED, ratio=1.1), JOIN: reading(key=JOIN)}
    assert [r.key for r in classify(regressed, None).decisive] == [SUM]


def test_more_pairs_doubles_up_to_the_cap() -> None:
    assert [more_pairs(p, 12) for p in (3, 6, 12)] == [6, 12, None]
    assert [more_pairs(p, 20) for p in (3, 12, 20)] == [6, 20, None]


def test_a_range_halves_toward_the_first_bad() -> None:
    known = Range(-1, 15)
    assert (known.midpoint, known.steps_left, known.done) == (7, 4, False)
    assert known.narrowed(7, Outcome.BAD) == Range(-1, 7)
    assert known.narrowed(7, Outcome.GOOD) == Range(7, 15)
    assert known.narrowed(7, Outcome.UNSURE) == known
    assert Range(6, 7).done and Range(6, 7).steps_left == 0


@pytest.mark.parametrize(
    ("argv", "pytest_args"),
    [
        (["bisect", "v1", "HEAD"], []),
        (["bisect", "v1", "HEAD", "--pairs", "4", "--", "-k", "softmax"], ["-k", "softmax"]),
        # options after the revisions; a second "--" passes on to pytest
        (
            ["bisect", "v1", "HEAD", "--json", "b.json", "--", "t.py::x", "--", "y"],
            ["t.py::x", "--", "y"],
        ),
    ],
)
def test_the_pytest_arguments_are_those_after_the_dashes(
    argv: list[str], pytest_args: list[str]
) -> None:
    args = cli.parser().parse_args(argv)
    assert (args.good, args.bad, args.pytest_args) == ("v1", "HEAD", pytest_args)


# --- the command, on generated repositories -------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")


@pytest.fixture
def temp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary directory of the command's processes: what a run leaves there is its."""
    return tmp_path_factory.mktemp("tmpdir")


def changes(repo: pytest.Pytester, count: int, slow_at: int | None = None) -> list[str]:
    """``count`` commits, each adding a file; the ``slow_at``-th (from 1) also makes
    ``work`` 50% slower. Their shas, oldest first."""
    shas = []
    for i in range(1, count + 1):
        repo.path.joinpath(f"note{i}.txt").write_text(f"{i}\n")
        if i == slow_at:
            repo.makepyfile(kernels=KERNELS.format(factor=1.5))
        shas.append(commit(repo.path, f"change {i}"))
    return shas


def gpubench(
    repo: pytest.Pytester, temp: Path, *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``gpubench ARGS`` as a user runs it in the repository."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_gpubench", *args],
        cwd=repo.path,
        env={**os.environ, "TMPDIR": str(temp)},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def left_in(temp: Path) -> list[str]:
    """What a run left in its temporary directory, but the device locks (kept on purpose)."""
    return sorted(p.name for p in temp.iterdir() if p.name != "pytest-gpubench-locks")


def worktrees(repo: pytest.Pytester) -> list[str]:
    listed = git(repo.path, "worktree", "list", "--porcelain")
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("gpubench: error:")]
    return line


@pytest.mark.slow
@needs_git
def test_an_unknown_revision_is_one_line(repo: pytest.Pytester, temp: Path) -> None:
    changes(repo, 2)
    line = one_error_line(gpubench(repo, temp, "bisect", "nosuchtag", "HEAD"))
    assert "GOOD 'nosuchtag' is not a revision of the repository" in line
    assert left_in(temp) == []


@pytest.mark.slow
@needs_git
def test_good_not_an_ancestor_of_bad_is_one_line(repo: pytest.Pytester, temp: Path) -> None:
    git(repo.path, "checkout", "-q", "-b", "side")
    repo.path.joinpath("side.txt").write_text("a commit of its own\n")
    commit(repo.path, "on the side")
    git(repo.path, "checkout", "-q", "main")
    changes(repo, 2)
    line = one_error_line(gpubench(repo, temp, "bisect", "side", "main"))
    assert "GOOD 'side' (" in line and "is not an ancestor of BAD 'main'" in line
    line = one_error_line(gpubench(repo, temp, "bisect", "main", "main~2"))
    assert "the wrong way round" in line


@pytest.mark.slow
@needs_git
def test_good_on_a_branch_merged_into_bad_is_one_line(repo: pytest.Pytester, temp: Path) -> None:
    """A release tagged on a branch merged back: main's first parents after it lack its
    changes, so none of them may be named the first bad commit."""
    changes(repo, 1)
    git(repo.path, "checkout", "-q", "-b", "release")
    repo.path.joinpath("fix.txt").write_text("a fix on the release branch\n")
    commit(repo.path, "fix")
    git(repo.path, "tag", "v1")
    git(repo.path, "checkout", "-q", "main")
    repo.path.joinpath("later.txt").write_text("main goes on\n")
    commit(repo.path, "later on main")
    git(repo.path, "merge", "-q", "--no-ff", "-m", "merge the release", "release")
    line = one_error_line(gpubench(repo, temp, "bisect", "v1", "main"))
    assert "GOOD 'v1' (" in line and "is not on BAD's first-parent line" in line


@pytest.mark.slow
def test_outside_a_git_repository_is_one_line(fake: pytest.Pytester, temp: Path) -> None:
    line = one_error_line(gpubench(fake, temp, "bisect", "HEAD~1", "HEAD"))
    assert "is not in a git repository" in line


@pytest.mark.slow
@needs_git
def test_good_and_bad_one_commit_is_nothing_to_bisect(repo: pytest.Pytester, temp: Path) -> None:
    changes(repo, 1)
    done = gpubench(repo, temp, "bisect", "HEAD", "main")
    assert done.returncode == 1, done.stderr
    assert done.stdout == "nothing to bisect: GOOD 'HEAD' and BAD 'main' are one commit\n"


@pytest.mark.slow
@needs_git
def test_a_failed_build_is_one_line_and_leaves_its_log_only(
    repo: pytest.Pytester, temp: Path
) -> None:
    changes(repo, 2)
    line = one_error_line(
        gpubench(repo, temp, "bisect", "HEAD~2", "HEAD", "--build", "echo no; exit 3")
    )
    assert f"bisect at {git(repo.path, 'rev-parse', '--short=7', 'HEAD')}: --build " in line
    assert ": exit code 3: no; its output: " in line
    [log] = left_in(temp)
    assert log.startswith("gpubench-bisect-build-") and (temp / log).read_text() == "no\n"
    assert len(worktrees(repo)) == 1


@pytest.mark.slow
@needs_git
def test_a_step_whose_code_comes_from_the_users_tree_is_one_line(
    repo: pytest.Pytester, temp: Path
) -> None:
    """An import hook maps the kernels to the user's tree for every checkout (as
    setuptools' editable finder does): each step would time that code on both sides (BAD
    read `good`); the step says so instead."""
    in_lib(repo, IMPORT_HOOK)  # the working tree's kernels 8% slower
    commit(repo.path, "slower kernels")
    lockstep = ("--", "--gpubench-pairing=lockstep")
    line = one_error_line(gpubench(repo, temp, "bisect", "HEAD~1", "HEAD", *FAST, *lockstep))
    lib = repo.path.resolve() / "lib" / "kernels.py"
    assert f"this process's side imported kernels ({lib}), code not of its side" in line
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bisect", "a", "b", "--pairs", "0"], "from 1 to 20"),
        (["bisect", "a", "b", "--max-pairs", "x"], "expected a whole number of pairs"),
        (["bisect", "a", "b", "--timeout", "-1"], "expected seconds such as 3600, got '-1'"),
        (["bisect", "a"], "the following arguments are required: BAD"),
        (["bisect", "a", "b", "-k", "x"], "unrecognized arguments: -k x: pytest's go after --"),
    ],
)
def test_invalid_options_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("gpubench bisect: error: ") and message in line


def test_max_pairs_below_pairs_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """An unsure step could never get more pairs: said before any step runs."""
    assert cli.main(["bisect", "a", "b", "--pairs", "5", "--max-pairs", "2"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line == "gpubench: error: --max-pairs 2 is below --pairs 5"


@pytest.mark.slow
@needs_git
def test_no_gpubench_test_selected_is_one_line(repo: pytest.Pytester, temp: Path) -> None:
    changes(repo, 2)
    done = gpubench(repo, temp, "bisect", "HEAD~2", "HEAD", *FAST, "--", "-k", "nomatch")
    line = one_error_line(done)
    assert "no gpubench test selected at BAD" in line and "(-k nomatch)" in line
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


@pytest.mark.slow
@needs_git
@pytest.mark.parametrize("slow_at", [12])  # every position: the fake-runner tests above
def test_bisect_finds_the_slow_commit_among_16(
    repo: pytest.Pytester, temp: Path, slow_at: int
) -> None:
    shas = changes(repo, 16, slow_at=slow_at)
    good = git(repo.path, "rev-parse", "HEAD~16")
    done = gpubench(repo, temp, "bisect", good[:10], "HEAD", *FAST, "--json", "b.json", *AFTER)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"first bad commit: {shas[slow_at - 1]} change {slow_at}" in lines
    assert f"  {SUM}: x1.500 (slower by 50.0% than {good[:10]}, 2 pairs)" in lines
    steps = [line for line in lines if line.startswith("step ")]
    assert len(steps) == 5 and all(
        line.startswith(f"step {i + 1}/5: ") for i, line in enumerate(steps)
    )
    document = json.loads((repo.path / "b.json").read_text())
    assert document["first_bad"]["commit"] == shas[slow_at - 1]
    for step in document["steps"]:  # every step's outcome as the planted commit says
        assert step["outcome"] == ("bad" if step["position"] >= slow_at - 1 else "good"), step
    assert document["steps"][0]["commit"] == shas[-1]  # BAD first
    assert lines[-1].startswith("cost: 5 steps, 10 pairs (20 timing processes), ")
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


@pytest.mark.slow
@needs_git
def test_bisect_in_lockstep_finds_the_slow_commit(repo: pytest.Pytester, temp: Path) -> None:
    """Each step's pytest pairs in lockstep: a test's first pair from the step's process
    (both commits side by side), the second set up again there. The whole file is selected:
    BAD's step times both tests, the later ones only test_sum, which BAD regressed."""
    shas = changes(repo, 4, slow_at=3)
    good = git(repo.path, "rev-parse", "HEAD~4")
    lockstep = ("--", "--gpubench-pairing=lockstep")
    done = gpubench(repo, temp, "bisect", good[:10], "HEAD", *FAST, "--json", "b.json", *lockstep)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"first bad commit: {shas[2]} change 3" in lines
    assert f"  {SUM}: x1.500 (slower by 50.0% than {good[:10]}, 2 pairs)" in lines
    assert ": 2 pairs, 1 test that BAD did not regress left out" in done.stderr, done.stderr
    document = json.loads((repo.path / "b.json").read_text())
    for step in document["steps"]:
        assert step["outcome"] == ("bad" if step["position"] >= 2 else "good"), step
        assert all(r["lockstep"] and r["pairs"] == 2 for r in step["tests"]), step
    timed = [sorted(r["key"] for r in step["tests"]) for step in document["steps"]]
    assert timed == [[JOIN, SUM], *[[SUM]] * (len(timed) - 1)], timed
    assert document["cost"]["processes"] is None
    assert re.match(r"cost: \d steps, \d+ pairs in lockstep, \d+ s$", lines[-1]), lines[-1]
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


@pytest.mark.slow
@needs_git
@pytest.mark.parametrize("gone", ["test_join", "test_sum", "test_bench.py"])
def test_a_test_named_after_the_dashes_and_gone_at_a_commit_stops_the_search_there(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, gone: str
) -> None:
    """``gone`` (a test, or the tests' file) is renamed by the first change and back by the
    third; the fourth slows test_sum. Named after --, pytest refuses a node id where it is
    not: that step measured nothing, and the search stops there, saying what pytest did not
    find (not a followed test that is there). A family in the user's environment is not BAD's
    step's (it would leave BAD's +50% unsure)."""
    tests = repo.path / "test_bench.py"
    original = tests.read_text()
    shas = []
    for i in range(1, 4):
        if i == 1 and gone.endswith(".py"):
            tests.rename(repo.path / "test_moved.py")
        elif i == 1:
            tests.write_text(original.replace(gone, "test_renamed"))
        elif i == 3:
            (repo.path / "test_moved.py").unlink(missing_ok=True)
            tests.write_text(original)
        repo.path.joinpath(f"note{i}.txt").write_text(f"{i}\n")
        shas.append(commit(repo.path, f"change {i}"))
    shas += changes(repo, 1, slow_at=1)
    good = git(repo.path, "rev-parse", "HEAD~4")
    monkeypatch.setenv("PYTEST_GPUBENCH_FAMILY", "1000000")
    done = gpubench(repo, temp, "bisect", good[:10], "HEAD", *FAST, "--", SUM, JOIN)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("step 1/3: ") and ": bad (test_sum slower by 50.0% " in lines[0]
    missing = SUM if gone.endswith(".py") else f"test_bench.py::{gone}"  # the first it misses
    assert f"unsure (pytest found no {missing} here, 0 pairs, " in lines[1], lines
    stopped = f"stopped: {shas[1][:7]} is unsure: pytest found no {missing} here;"
    assert lines[2].startswith(stopped), lines
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


@pytest.mark.slow
@needs_git
def test_a_later_step_is_judged_in_bads_family(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BAD's step judges both tests (a family of 2); the next times test_sum alone and is
    told BAD's family through the environment of its pytest."""
    import tempfile

    from pytest_gpubench.versus import bisect as bisecting
    from pytest_gpubench.versus import revision

    told: list[str | None] = []
    run_group = revision.run_group

    def recording(args: list[str], where: Path, env: dict[str, str], *rest: object) -> object:
        told.append(env.get("PYTEST_GPUBENCH_FAMILY"))
        return run_group(args, where, env, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(revision, "run_group", recording)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    changes(repo, 2, slow_at=2)
    found = bisecting.bisect(
        "HEAD~2", "HEAD", repo.path, pytest_args=["--gpubench-pairing=lockstep"], pairs=2
    )
    assert found is not None and found.first_bad is not None
    assert found.first_bad.subject == "change 2"
    assert told == ["1", "2"]
    assert [s.run.family for s in found.steps] == [2, 2]


@pytest.mark.slow
@needs_git
def test_bad_not_slower_says_so_and_exits_1(repo: pytest.Pytester, temp: Path) -> None:
    changes(repo, 3)
    done = gpubench(repo, temp, "bisect", "HEAD~3", "HEAD", *FAST, *AFTER)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("step 1/1: ") and ": good (test_sum same, " in lines[0]
    assert (
        lines[1].startswith("nothing to bisect: BAD ") and "is not slower than HEAD~3" in lines[1]
    )
    assert left_in(temp) == []


def step_started(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, output: int
) -> tuple[subprocess.Popen[str], Path]:
    """``gpubench bisect`` over two commits, once its first step's first timing process
    started (one that takes its time); the file of the timing processes' pids."""
    changes(repo, 2, slow_at=2)
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "60")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest_gpubench", "bisect", "HEAD~2", "HEAD", *FAST, *AFTER],
        cwd=repo.path,
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=output,
        stderr=output,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (pids.exists() and pids.read_text().strip()):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait()
            pytest.fail("no step started")
        time.sleep(0.2)
    time.sleep(1.0)
    return proc, pids


@pytest.mark.slow
@needs_git
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_step_and_leaves_nothing_behind(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, sig: int
) -> None:
    proc, pids = step_started(repo, temp, monkeypatch, subprocess.PIPE)
    try:
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    assert err.splitlines()[-1] == (
        "gpubench bisect: interrupted: the step's processes were ended and its checkouts removed"
    )
    assert "Traceback" not in err
    assert left_in(temp) == [] and len(worktrees(repo)) == 1
    started = [int(p) for p in pids.read_text().split()]
    assert started and not any(running(p) for p in started)


@pytest.mark.slow
@needs_git
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a lifeline of Linux's")
def test_kill_9_ends_the_steps_processes_and_the_next_run_removes_what_is_left(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed outright, bisect can end nothing: the kernel tells the step's pytest (SIGTERM),
    which ends its timing processes and removes its checkout of GOOD. The step's checkout
    and the bisection's folder, bisect's own, are removed by the next bisect."""
    proc, pids = step_started(repo, temp, monkeypatch, subprocess.DEVNULL)
    try:
        step = _children_of(proc.pid)
        assert step, "the step's pytest is bisect's child"
    finally:
        proc.kill()
        proc.wait()
    started = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 60
    while any(running(p) for p in [*step, *started]):
        assert time.monotonic() < deadline, "a process of the step outlived bisect"
        time.sleep(0.2)
    left = left_in(temp)
    assert left and all(n.startswith(("gpubench-bisect-", "gpubench-ref-")) for n in left)
    assert len([n for n in left if n.startswith("gpubench-ref-")]) == 1  # GOOD's is gone

    done = gpubench(repo, temp, "bisect", "HEAD", "main")  # nothing to bisect, but it sweeps
    assert done.returncode == 1, done.stderr
    assert left_in(temp) == [] and len(worktrees(repo)) == 1


def _children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# --- commits that do not build ---------------------------------------------------------------


def unbuilt_at(positions: set[int], behaviour: Behaviour, count: int = 16) -> FakeSteps:
    """A runner over ``count`` commits whose commits at ``positions`` do not build."""

    class Unbuilt(FakeSteps):
        def __call__(self, commit_: Commit, pairs: int, focus: Focus) -> StepRun:
            if self.position[commit_] in positions:
                self.asked.append((self.position[commit_], pairs))
                return StepRun({}, 0, 1.0, unbuilt="--build 'make' failed: exit code 2: no")
            return super().__call__(commit_, pairs, focus)

    return Unbuilt(commits(count), behaviour)


def test_a_commit_that_does_not_build_is_skipped_for_the_nearest() -> None:
    """As git bisect skip: a commit that does not build is tested no further, the nearest
    to the midpoint that may is tested instead (the earlier of two as near), and the first
    bad commit is still found beside it."""
    steps = unbuilt_at({7, 8}, slow_from(10))
    found = search(GOOD, "v1", commits(16), steps, pairs=3, max_pairs=12)
    assert steps.asked == [(15, 3), (7, 3), (6, 3), (10, 3), (8, 3), (9, 3)]
    assert found.state is State.FOUND and found.first_bad == commits(16)[10]
    skipped = found.steps[1]
    assert skipped.verdict.outcome is Outcome.SKIPPED and skipped.again is None
    assert step_line(skipped, "v1") == (
        f'step 2/6: {commits(16)[7].short} "change 8": skipped '
        "(--build 'make' failed: exit code 2: no, 0 pairs, 1 s)"
    )
    assert report_lines(found)[0] == f"first bad commit: {commits(16)[10].sha} change 11"


def test_where_every_commit_left_does_not_build_the_search_names_them() -> None:
    """The commits left to test all fail to build: the search stops, its range the commits
    the first bad one is among, those that do not build marked; BAD that does not build is
    an error (nothing to bisect against)."""
    steps = unbuilt_at({9, 10}, slow_from(10))
    found = search(GOOD, "v1", commits(16), steps, pairs=3, max_pairs=12)
    assert [p for p, _ in steps.asked] == [15, 7, 11, 9, 8, 10]
    assert found.state is State.SKIPPED and found.first_bad is None
    assert found.remaining == tuple(commits(16)[9:12]) and found.steps[-1].total == 6
    report = report_lines(found)
    assert report[0] == (
        "stopped: the commits left to test do not build; the first bad commit is one of "
        f"these 3, after {commits(16)[8].short}:"
    )
    assert report[1:4] == [
        f"  {commits(16)[9].sha} change 10  (does not build)",
        f"  {commits(16)[10].sha} change 11  (does not build)",
        f"  {commits(16)[11].sha} change 12",
    ]
    assert report[-1].startswith("cost: 6 steps, 2 commits that did not build, 12 pairs ")
    document = report_json(found, [])
    assert document["state"] == "skipped" and len(document["remaining"]) == 3
    assert document["cost"]["skipped"] == 2
    assert [s["outcome"] for s in document["steps"]].count("skipped") == 2
    # A good or bad step that leaves only commits that do not build expects no more.
    found = search(GOOD, "v1", commits(16), unbuilt_at({9}, slow_from(10)), pairs=3, max_pairs=12)
    assert [s.position for s in found.steps] == [15, 7, 11, 9, 8, 10]
    assert found.state is State.SKIPPED and found.remaining == tuple(commits(16)[9:11])
    assert [(s.number, s.total) for s in found.steps[-2:]] == [(5, 6), (6, 6)]
    with pytest.raises(BisectError, match=r"^bisect at 000000f: --build 'make' failed.*BAD must"):
        search(GOOD, "v1", commits(16), unbuilt_at({15}, slow_from(3)), pairs=3, max_pairs=12)


@pytest.mark.slow
@needs_git
def test_bisect_skips_a_commit_that_does_not_build(repo: pytest.Pytester, temp: Path) -> None:
    """The second of five commits does not build (``--build`` fails there), the fourth makes
    test_sum slower: the search tests the first instead of the second, finds the fourth,
    and the second's build output stays, named in its step's line."""
    good = git(repo.path, "rev-parse", "HEAD")
    shas = []
    for i in range(1, 6):
        broken = repo.path / "broken"
        if i == 2:
            broken.write_text("a syntax error\n")
        elif broken.exists():
            broken.unlink()
        if i == 4:
            repo.makepyfile(kernels=KERNELS.format(factor=1.5))
        repo.path.joinpath(f"note{i}.txt").write_text(f"{i}\n")
        git(repo.path, "add", "-A")
        shas.append(commit(repo.path, f"change {i}"))
    build = ("--build", "if test -e broken; then echo broken; exit 1; fi")
    done = gpubench(
        repo, temp, "bisect", good[:10], "HEAD", *FAST, *build, "--json", "b.json", *AFTER
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"first bad commit: {shas[3]} change 4" in lines
    [skipped] = [line for line in lines if ": skipped (" in line]
    assert skipped.startswith(f'step 2/5: {shas[1][:7]} "change 2": skipped (--build ')
    assert ": exit code 1: broken; its output: " in skipped
    document = json.loads((repo.path / "b.json").read_text())
    outcomes = [(s["commit"], s["outcome"]) for s in document["steps"]]
    assert outcomes == [
        (shas[4], "bad"),
        (shas[1], "skipped"),
        (shas[0], "good"),
        (shas[2], "good"),
        (shas[3], "bad"),
    ]
    [log] = left_in(temp)
    assert log == f"gpubench-bisect-build-{log.split('-')[3]}-{shas[1][:7]}.log"
    assert (temp / log).read_text() == "broken\n" and len(worktrees(repo)) == 1


@pytest.mark.parametrize("count", [1, 2, 3, 6, 8])
def test_with_any_commits_that_do_not_build_the_answer_holds_the_first_bad(count: int) -> None:
    """Every first bad position and every set of commits that do not build (BAD builds):
    the search names the first bad commit or a range holding it, never tests a commit
    twice, stops only when no commit in question may build, and its step counts stay
    within the commits, the last step's the total."""
    history = commits(count)
    for first_bad in range(count):
        for mask in range(2 ** (count - 1)):
            broken = {p for p in range(count - 1) if mask >> p & 1}
            steps = unbuilt_at(broken, slow_from(first_bad), count)
            found = search(GOOD, "v1", history, steps, pairs=3, max_pairs=3)
            positions = [s.position for s in found.steps]
            assert len(positions) == len(set(positions)), (first_bad, broken)
            assert history[first_bad] in found.remaining or found.first_bad == history[first_bad]
            if found.state is State.SKIPPED:
                assert set(found.range.untested(set())) <= broken
            else:
                assert found.state is State.FOUND and found.first_bad == history[first_bad]
            assert all(s.number <= s.total <= count for s in found.steps)
            assert found.steps[-1].total == found.steps[-1].number, (first_bad, broken)
