"""``gpubench bisect GOOD BAD``: the first commit at which the selected gpubench tests got
slower, by a binary search over the first-parent commits after GOOD up to BAD.

Each step is an A/B run against GOOD (versus/ab.py) in a checkout of the candidate
(versus/revision.py), judged by where its ratios lie against halfway between GOOD and BAD
(docs/guide.md, "Bisect"; checked by bench/bisect_resample.py). The search and the report
are pure; :class:`StepRunner` runs the processes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.codec import Coded, spec
from ..core.errors import GpubenchError
from ..core.jsondata import Json
from ..core.records import Judgement, Result, Status, node_id
from ..core.samples import plural
from ..run import processes
from ..run.children import FAMILY_VARIABLE, FOREIGN_VARIABLE, reason_in
from ..store import files as storage
from . import revision

# The node ids a later step leaves out travel as --deselect arguments; beyond this many
# characters in all (a command line holds about 2 MB on Linux, the environment included),
# it times the whole selection instead.
DESELECT_CHARS = 500_000
ARGUMENT_COST = 20  # "--deselect=", its NUL and its pointer in argv
# Who runs git, in the error of a missing or hung git.
WHO = "gpubench bisect"
DEFAULT_PAIRS = 3
DEFAULT_MAX_PAIRS = 12
# How long a step's pytest gets to end its processes and remove its checkout of GOOD after
# SIGTERM (at its end, or ours: Ctrl-C, or SIGTERM as processes.interrupts makes it), before
# it is killed; killed outright, we leave it SIGTERM from the kernel (its lifeline).
GRACE_S = 30.0
# A step's JSON report holds every sample of the selection; far larger is no report.
MAX_REPORT_BYTES = 256 << 20
FOLDER_PREFIX = "gpubench-bisect-"
SCHEMA = "gpubench-bisect/1"


class BisectError(GpubenchError):
    """A bisection that cannot start or go on: a revision, a build, a step's pytest."""


class Outcome(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    UNSURE = "unsure"
    SKIPPED = "skipped"  # its commit does not build: the search tests another


@dataclass(frozen=True)
class Commit(Coded):
    sha: str = field(metadata=spec(key="commit"))
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:7]


@dataclass(frozen=True)
class Reading(Coded):
    """One measurement's verdict against GOOD at a step: its status, head / base ratio and
    its interval (None without a paired judgement), threshold and reason; the bisect JSON's
    entry of a test, in this order."""

    key: str
    status: Status
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    threshold: float = 0.05
    pairs: int = 0
    reason: str = ""
    lockstep: bool = False  # its pairs timed both sides in one process (versus/lockstep.py)

    @classmethod
    def of(cls, result: Result) -> Reading:
        verdict = result.verdict
        judged = verdict.judgement or Judgement(verdict.status)  # none: no ratio to read
        return cls(
            key=result.key,
            status=result.status,
            ratio=judged.ratio,
            ratio_low=judged.ratio_low,
            ratio_high=judged.ratio_high,
            threshold=result.measurement.threshold,
            pairs=verdict.history_sessions,
            reason=verdict.reason,
            lockstep=verdict.paired is not None and verdict.paired.lockstep,
        )

    @property
    def name(self) -> str:
        """The test's name as a line shows it (its node id without the file)."""
        return self.key.rsplit("::", 1)[-1]

    @property
    def outcome(self) -> Outcome:
        if self.status is Status.REGRESSED:
            return Outcome.BAD
        if self.status in (Status.SAME, Status.IMPROVED):
            return Outcome.GOOD
        # Other launches than GOOD's: good only where a slowdown of the threshold is ruled
        # out (an A/B run calls a changed binary "changed" when merely unsure, too).
        if (
            self.status is Status.CHANGED
            and self.ratio_high is not None
            and self.ratio_high < 1 + self.threshold
        ):
            return Outcome.GOOD
        return Outcome.UNSURE

    def against(self, bad_ratio: float) -> Outcome:
        """A later step's reading of a test whose ratio was ``bad_ratio`` at BAD: bad when it
        regressed, or its interval lies above halfway to BAD (the geometric mean of 1 and
        ``bad_ratio``); good when it lies below; else unsure."""
        if self.status is Status.REGRESSED:
            return Outcome.BAD
        if self.ratio is None or self.ratio_low is None or self.ratio_high is None:
            return Outcome.UNSURE
        halfway = math.sqrt(bad_ratio)
        if self.ratio_low > halfway:
            return Outcome.BAD
        if self.ratio_high < halfway:
            return Outcome.GOOD
        return Outcome.UNSURE

    def change(self, good: str) -> str:
        """``slower by 5.2% than GOOD`` (or why there is no change to tell)."""
        if self.ratio is None:
            return f"{self.status.value}: {self.reason}" if self.reason else self.status.value
        verb = "slower" if self.ratio >= 1 else "faster"
        return f"{verb} by {abs(self.ratio - 1):.1%} than {good}"


@dataclass(frozen=True)
class StepVerdict:
    """What a step says: its outcome, the readings that decided it, whether more pairs may
    turn an unsure step, and why it is unsure when no reading tells."""

    outcome: Outcome
    decisive: tuple[Reading, ...] = ()
    more_pairs: bool = False
    why: str = ""


def classify(readings: Mapping[str, Reading], followed: Mapping[str, float] | None) -> StepVerdict:
    """The verdict of a step on its ``readings`` by key. ``followed``: the keys that
    regressed at BAD, with their ratios there (None at BAD's own step: every measurement on
    both sides counts, by its own verdict)."""
    if followed is None:
        considered = [r for r in readings.values() if r.status not in (Status.NEW, Status.REMOVED)]
        if not considered:
            why = "no gpubench test was measured on both sides"
            return StepVerdict(Outcome.UNSURE, why=why)
    else:
        missing = [key for key in followed if key not in readings]
        if missing:
            name = missing[0].rsplit("::", 1)[-1]
            return StepVerdict(Outcome.UNSURE, why=f"{name} was not measured at this commit")
        considered = [readings[key] for key in followed]
    outcome = {
        r.key: r.outcome if followed is None else r.against(followed[r.key]) for r in considered
    }
    bad = [r for r in considered if outcome[r.key] is Outcome.BAD]
    if bad:
        return StepVerdict(Outcome.BAD, tuple(sorted(bad, key=_slowest)))
    unsure = [r for r in considered if outcome[r.key] is Outcome.UNSURE]
    good = [r for r in considered if outcome[r.key] is Outcome.GOOD]
    # At a later step, good beside the unsure readings whose ratios lie below halfway to BAD's.
    below = followed is not None and all(
        r.ratio is not None and r.ratio < math.sqrt(followed[r.key]) for r in unsure
    )
    if unsure and not (good and below):
        # Unsure on its pairs' statistics, not for want of a measurement on both sides.
        more = any(r.ratio is not None for r in unsure)
        return StepVerdict(Outcome.UNSURE, tuple(sorted(unsure, key=_slowest)), more_pairs=more)
    return StepVerdict(Outcome.GOOD, tuple(sorted(good, key=_slowest)))


def _slowest(reading: Reading) -> float:
    return -(reading.ratio or 0.0)


def more_pairs(pairs: int, cap: int) -> int | None:
    """The pairs of an unsure step's next run (twice as many, at most ``cap``), or None."""
    return min(2 * pairs, cap) if pairs < cap else None


@dataclass(frozen=True)
class Range:
    """What the search knows, as positions in the commits after GOOD up to BAD: ``lo`` the
    latest known good (-1: GOOD itself), ``hi`` the earliest known bad."""

    lo: int
    hi: int

    @property
    def done(self) -> bool:
        return self.hi - self.lo <= 1

    @property
    def midpoint(self) -> int:
        return (self.lo + self.hi) // 2

    def next_to_test(self, skipped: Collection[int]) -> int | None:
        """The midpoint, or where its commit does not build (``skipped``), the nearest
        commit in question that may (the earlier of two as near: a block of N commits that
        do not build costs up to N builds); None where every commit left to test does not
        build."""
        left = self.untested(skipped)
        return min(left, key=lambda p: (abs(p - self.midpoint), p), default=None)

    def untested(self, skipped: Collection[int]) -> list[int]:
        """The positions in question whose commits may build."""
        return [p for p in range(self.lo + 1, self.hi) if p not in skipped]

    @property
    def steps_left(self) -> int:
        """Steps until ``done``, at most (each halves the commits in question)."""
        return 0 if self.done else math.ceil(math.log2(self.hi - self.lo))

    def narrowed(self, position: int, outcome: Outcome) -> Range:
        if outcome is Outcome.BAD:
            return Range(self.lo, min(self.hi, position))
        if outcome is Outcome.GOOD:
            return Range(max(self.lo, position), self.hi)
        return self


@dataclass(frozen=True)
class StepRun:
    """One A/B run at a commit: its readings by key, the pairs it took, its wall time, the
    family its verdicts were judged in (the multiple-comparison correction)."""

    readings: Mapping[str, Reading]
    pairs: int
    seconds: float
    family: int = 1
    why: str = ""  # what made it measure nothing, where that is no error: unsure
    unbuilt: str = ""  # why its commit did not build (--build): the search skips it


@dataclass(frozen=True)
class Focus:
    """What a step times: BAD's step (``later`` False), the whole selection; a later one,
    the tests BAD regressed alone (the node ids ``left_out`` deselected), judged in BAD's
    ``family``, as one of its selection: in the smaller family of the followed tests' own
    measurements, a test that BAD flagged by chance reads bad or good where in the selection
    it read unsure, and the search names a commit without a slowdown (docs/verdict.md,
    bench/bisect_resample.py --alone)."""

    left_out: tuple[str, ...] = ()
    family: int = 1
    later: bool = False


@dataclass(frozen=True)
class Step:
    """One run of the search: ``number`` counts commits tested (a re-run with more pairs
    keeps its number), ``total`` the steps the search expected then; ``position`` is the
    commit's among those after GOOD (the last: BAD)."""

    number: int
    total: int
    position: int
    commit: Commit
    asked_pairs: int
    run: StepRun
    verdict: StepVerdict
    again: int | None = None  # unsure: the pairs of the next run

    def to_json(self) -> dict[str, Json]:
        return {
            "step": self.number,
            "position": self.position,
            **self.commit.to_json(),
            "outcome": self.verdict.outcome.value,
            "why": self.verdict.why,
            "pairs_asked": self.asked_pairs,
            "pairs": self.run.pairs,
            "seconds": round(self.run.seconds, 3),
            "again_with_pairs": self.again,
            "decisive": [r.key for r in self.verdict.decisive],
            "tests": [r.to_json() for r in self.run.readings.values()],
        }


class State(str, enum.Enum):
    FOUND = "found"  # the first bad commit
    NOT_BAD = "not bad"  # BAD is not slower than GOOD
    UNSURE = "unsure"  # a step stayed unsure: the first bad commit is within ``range``
    SKIPPED = "skipped"  # the commits left to test do not build: it is within ``range``


@dataclass(frozen=True)
class Bisection:
    good: Commit
    bad: Commit
    good_ref: str
    commits: tuple[Commit, ...]  # after GOOD up to BAD, oldest first
    steps: tuple[Step, ...]
    state: State
    range: Range
    seconds: float

    @property
    def first_bad(self) -> Commit | None:
        return self.commits[self.range.hi] if self.state is State.FOUND else None

    @property
    def remaining(self) -> tuple[Commit, ...]:
        """The commits the first bad one is among."""
        return self.commits[self.range.lo + 1 : self.range.hi + 1]

    @property
    def pairs(self) -> int:
        return sum(s.run.pairs for s in self.steps)

    @property
    def timing_processes(self) -> int | None:
        """The timing processes the steps started: two a pair; None where a step timed any
        test in lockstep (one process for both sides, more for the unsure: its report's)."""
        readings = [r for step in self.steps for r in step.run.readings.values()]
        return None if any(r.lockstep for r in readings) else 2 * self.pairs

    @property
    def tested(self) -> int:
        return len({s.position for s in self.steps})

    @property
    def unbuilt(self) -> set[Commit]:
        """The commits that did not build (each tested once: the search moves on)."""
        return {s.commit for s in self.steps if s.verdict.outcome is Outcome.SKIPPED}


Runner = Callable[[Commit, int, Focus], StepRun]
Announce = Callable[[str], None]


def search(
    good: Commit,
    good_ref: str,
    commits: Sequence[Commit],
    run: Runner,
    *,
    pairs: int,
    max_pairs: int,
    announce: Announce = lambda line: None,
    clock: Callable[[], float] = time.monotonic,
) -> Bisection:
    """Bisect ``commits`` (after GOOD up to BAD, oldest first, at least one) with ``run``,
    which times a commit against GOOD with a number of pairs. Each step's line goes to
    ``announce`` as it ends. A commit after BAD's step that does not build is skipped: the
    nearest in question is tested instead (BisectError where BAD does not build)."""
    if not commits:
        raise ValueError("search needs at least one commit after GOOD")
    started = clock()
    steps: list[Step] = []
    known = Range(-1, len(commits) - 1)
    followed: dict[str, float] | None = None  # the keys that regressed at BAD: their ratios
    focus = Focus()
    state = State.FOUND
    position = len(commits) - 1
    skipped: set[int] = set()  # positions whose commits do not build
    while True:
        number = len({s.position for s in steps}) + 1
        asked: int | None = pairs
        while asked is not None:
            commit = commits[position]
            done = run(commit, asked, focus)
            if done.unbuilt and followed is None:  # nothing to bisect against
                raise BisectError(
                    f"bisect at {commit.short}: {done.unbuilt}; BAD must build: name a BAD "
                    "that does, or mend --build"
                )
            verdict = classify(done.readings, followed)
            if done.why or done.unbuilt:
                outcome = Outcome.SKIPPED if done.unbuilt else Outcome.UNSURE
                verdict = StepVerdict(outcome, why=done.unbuilt or done.why)
            again = more_pairs(asked, max_pairs) if verdict.more_pairs else None
            # The steps expected after this one. Run again: the search's steps left, less this
            # one (BAD's comes before them). Unsure, or a BAD that is not bad: none. Else no
            # more than the commits left that may build.
            if again is not None:
                after = known.steps_left - (0 if followed is None else 1)
            elif verdict.outcome is Outcome.UNSURE or (
                followed is None and verdict.outcome is not Outcome.BAD
            ):
                after = 0
            else:
                then = known.narrowed(position, verdict.outcome)
                after = min(then.steps_left, len(then.untested({*skipped, position})))
            step = Step(number, number + after, position, commit, asked, done, verdict, again)
            steps.append(step)
            announce(step_line(step, good_ref))
            asked = again
        if followed is None:  # BAD's own step
            if verdict.outcome is not Outcome.BAD:
                state = State.NOT_BAD
                break
            followed = {r.key: r.ratio or 1.0 for r in verdict.decisive}
            focus = Focus(unfollowed(done.readings, followed), done.family, later=True)
        elif verdict.outcome is Outcome.UNSURE:
            state = State.UNSURE
            break
        elif verdict.outcome is Outcome.SKIPPED:
            skipped.add(position)
        else:
            known = known.narrowed(position, verdict.outcome)
        if known.done:
            break
        untested = known.next_to_test(skipped)
        if untested is None:
            state = State.SKIPPED
            break
        position = untested
    return Bisection(
        good, commits[-1], good_ref, tuple(commits), tuple(steps), state, known, clock() - started
    )


def unfollowed(readings: Mapping[str, Reading], followed: Mapping[str, float]) -> tuple[str, ...]:
    """The node ids of the tests measured in ``readings`` that no followed key belongs to:
    later steps leave them out. pytest's ``--deselect`` takes prefixes, so a node id that
    begins a followed one's (``test_x`` of ``test_x_y``) is kept."""
    kept = {node_id(key) for key in followed}
    return tuple(
        sorted(
            n
            for n in {node_id(key) for key in readings} - kept
            if not any(k.startswith(n) for k in kept)
        )
    )


def fitted(focus: Focus) -> tuple[Focus, str]:
    """The focus a step's command line can hold (its --deselect arguments within
    DESELECT_CHARS, else none: the whole selection), and what the step's line adds."""
    others = plural(len(focus.left_out), "test")
    if sum(len(n) + ARGUMENT_COST for n in focus.left_out) > DESELECT_CHARS:
        whole = dataclasses.replace(focus, left_out=())
        return whole, f", the whole selection ({others} that BAD did not regress: too many to name)"
    return focus, f", {others} that BAD did not regress left out" if focus.left_out else ""


# --- the report -----------------------------------------------------------------------------


def step_line(step: Step, good: str) -> str:
    """``step 2/4: abc1234 "subject": bad (test_x slower by 5.2% than GOOD, 3 pairs, 41 s)``"""
    verdict = step.verdict
    evidence: list[str] = []
    if verdict.decisive:
        first = verdict.decisive[0]
        status = "" if first.ratio is None or first.outcome is Outcome.BAD else first.status.value
        evidence.append(f"{first.name} {status + ', ' if status else ''}{first.change(good)}")
        if len(verdict.decisive) > 1:
            evidence.append(f"{len(verdict.decisive) - 1} more")
    elif verdict.why:
        evidence.append(verdict.why)
    evidence.append(plural(step.run.pairs, "pair"))
    evidence.append(f"{step.run.seconds:.0f} s")
    line = (
        f"step {step.number}/{step.total}: {step.commit.short} {_quoted(step.commit.subject)}: "
        f"{verdict.outcome.value} ({', '.join(evidence)})"
    )
    if step.again is not None:
        line += f": again with {step.again} pairs"
    return line


def report_lines(bisection: Bisection) -> list[str]:
    """What follows the step lines: the answer, its evidence, the cost."""
    good = bisection.good_ref
    lines: list[str] = []
    if bisection.state is State.NOT_BAD:
        last = bisection.steps[-1]
        counts = Counter(r.status.value for r in last.run.readings.values())
        tally = ", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing measured"
        why = last.verdict.why or tally
        lines.append(
            f"nothing to bisect: BAD {bisection.bad.short} is not slower than {good} "
            f"{bisection.good.short} ({why})"
        )
    elif bisection.state in (State.UNSURE, State.SKIPPED):
        last = bisection.steps[-1]
        remaining = bisection.remaining
        after = bisection.commits[bisection.range.lo] if bisection.range.lo >= 0 else None
        why = last.verdict.why  # a followed test not measured there: more pairs cannot help
        state = f"is unsure: {why}" if why else f"stayed unsure at {last.asked_pairs} pairs"
        if bisection.state is State.SKIPPED:
            stopped = "the commits left to test do not build"
        else:
            stopped = f"{last.commit.short} {state}"
        lines.append(
            f"stopped: {stopped}; the first bad commit is one of these {len(remaining)}, "
            f"after {after.short if after else good + ' ' + bisection.good.short}:"
        )
        lines += [
            f"  {c.sha} {c.subject}" + ("  (does not build)" if c in bisection.unbuilt else "")
            for c in remaining
        ]
    else:
        first = bisection.first_bad
        assert first is not None
        lines.append(f"first bad commit: {first.sha} {first.subject}")
        there = [s for s in bisection.steps if s.commit == first and s.verdict.decisive]
        for reading in there[-1].verdict.decisive if there else ():
            ratio = "" if reading.ratio is None else f"x{reading.ratio:.3f} "
            lines.append(f"  {reading.key}: {ratio}({reading.change(good)}, {reading.pairs} pairs)")
    runs = len(bisection.steps)
    tested = bisection.tested
    reruns = f" ({runs} runs)" if runs != tested else ""
    count = bisection.timing_processes
    how = "in lockstep" if count is None else f"({count} timing processes)"
    skipped = len(bisection.unbuilt)
    skips = f", {plural(skipped, 'commit')} that did not build" if skipped else ""
    lines.append(
        f"cost: {plural(tested, 'step')}{reruns}{skips}, {bisection.pairs} pairs "
        f"{how}, {bisection.seconds:.0f} s"
    )
    return lines


def report_json(bisection: Bisection, pytest_args: Sequence[str]) -> dict[str, Json]:
    """The steps and the answer, for ``--json``."""
    first = bisection.first_bad
    return {
        "schema": SCHEMA,
        "good": {"ref": bisection.good_ref, **bisection.good.to_json()},
        "bad": bisection.bad.to_json(),
        "pytest_args": list(pytest_args),
        "commits": len(bisection.commits),
        "state": bisection.state.value,
        "first_bad": None if first is None else first.to_json(),
        "remaining": [c.to_json() for c in bisection.remaining]
        if bisection.state in (State.UNSURE, State.SKIPPED)
        else [],
        "steps": [s.to_json() for s in bisection.steps],
        "cost": {
            "steps": bisection.tested,
            "runs": len(bisection.steps),
            "skipped": len(bisection.unbuilt),
            "pairs": bisection.pairs,
            "processes": bisection.timing_processes,
            "seconds": round(bisection.seconds, 3),
        },
    }


def _quoted(subject: str) -> str:
    return '"' + (subject if len(subject) <= 60 else subject[:57] + "...") + '"'


# --- git ------------------------------------------------------------------------------------


def history(good: str, bad: str, cwd: Path) -> tuple[Commit, tuple[Commit, ...]]:
    """GOOD and the first-parent commits after it up to BAD (none when they are one commit),
    checked: one line (BisectError) when ``cwd`` is in no git repository, a revision is
    unknown or GOOD is no ancestor of BAD."""
    top = revision.git(cwd, ["rev-parse", "--show-toplevel"], who=WHO)
    if top.returncode != 0:
        raise BisectError(
            f"bisect: {cwd} is not in a git repository ({revision.last_line(top.stderr)}); "
            "run gpubench bisect inside the repository whose history to search"
        )
    repo = Path(top.stdout.strip()).resolve()
    good_sha, bad_sha = (_resolve(ref, what, repo) for ref, what in ((good, "GOOD"), (bad, "BAD")))
    if good_sha != bad_sha:
        ancestor = revision.git(repo, ["merge-base", "--is-ancestor", good_sha, bad_sha], who=WHO)
        if ancestor.returncode != 0:
            back = ["merge-base", "--is-ancestor", bad_sha, good_sha]
            reverse = revision.git(repo, back, who=WHO).returncode == 0
            hint = (
                "they are the wrong way round: name the older commit first"
                if reverse
                else "name as GOOD a commit in BAD's history, such as git merge-base GOOD BAD"
            )
            raise BisectError(
                f"bisect: GOOD {good!r} ({good_sha[:7]}) is not an ancestor of BAD {bad!r} "
                f"({bad_sha[:7]}); {hint}"
            )
    log = ["log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good_sha}..{bad_sha}"]
    listed = revision.git(repo, log, who=WHO)
    if listed.returncode != 0:
        raise BisectError(
            f"bisect: git log failed in {repo} ({revision.last_line(listed.stderr)}); "
            "fix what git names"
        )
    commits = tuple(
        Commit(*line.split("\0", 1)) for line in listed.stdout.splitlines() if "\0" in line
    )
    # The search walks BAD's first parents: GOOD must be one of them. A GOOD on a branch
    # merged into BAD's line (a release tag) leaves commits on the line that lack GOOD's
    # changes: one of them could read as the first bad commit.
    if commits:
        first = ["rev-parse", "--verify", "--quiet", f"{commits[0].sha}^1"]
        parent = revision.git(repo, first, who=WHO).stdout.strip()
        if parent != good_sha:
            raise BisectError(
                f"bisect: GOOD {good!r} ({good_sha[:7]}) is not on BAD's first-parent line (a "
                f"branch merged into it); name as GOOD a commit of that line, such as the merge "
                f"that brought it in, or {parent[:7]}, where the line left it"
            )
    subject = revision.git(repo, ["log", "-1", "--format=%s", good_sha], who=WHO).stdout.strip()
    return Commit(good_sha, subject), commits


def _resolve(ref: str, what: str, repo: Path) -> str:
    found = revision.commit_of(ref, repo, WHO)
    if not found:
        raise BisectError(
            f"bisect: {what} {ref!r} is not a revision of the repository at {repo}; name a "
            "branch, tag or commit"
        )
    return found


# --- the steps' processes -------------------------------------------------------------------


@dataclass(frozen=True)
class StepRunner:
    """Runs a step: checks ``commit`` out (built by ``build``), runs pytest there against
    GOOD with ``pytest_args`` and reads its JSON report. ``cwd``: where the user runs
    gpubench (the step runs at the same place in the checkout); ``folder``: the bisection's
    own, for the reports and logs; ``timeout_s``: a step's limit, its build's included."""

    good: Commit
    cwd: Path
    folder: Path
    pytest_args: tuple[str, ...] = ()
    threshold: float | None = None
    build: str | None = None
    timeout_s: float | None = None
    announce: Announce = lambda line: None

    def __call__(self, commit: Commit, pairs: int, focus: Focus) -> StepRun:
        started = time.monotonic()
        name = f"gpubench-bisect-build-{os.getpid()}-{commit.short}.log"
        log = Path(tempfile.gettempdir()) / name
        focus, what = fitted(focus)
        self.announce(f"testing {commit.short} {_quoted(commit.subject)}: {pairs} pairs{what}")
        try:
            with revision.checkout(
                commit.sha, self.cwd, build=self.build, log=log, timeout_s=self.timeout_s or 3600.0
            ) as rev:
                log.unlink(missing_ok=True)  # built: its output is not needed
                left = None if self.timeout_s is None else started + self.timeout_s
                done = self._measure(rev, commit, pairs, left, focus)
        except revision.RevisionError as exc:
            # A build that failed or ran over leaves its log, named in the error or the step's
            # line. The checkout's messages name the plugin's options; here they are ours.
            text = str(exc).replace("--gpubench-build", "--build")
            if not isinstance(exc, revision.BuildFailed):  # a timeout, a command that cannot run
                raise BisectError(f"bisect at {commit.short}: {text}") from None
            done = StepRun({}, 0, 0.0, unbuilt=text)  # the search skips it (BAD: an error)
        return dataclasses.replace(done, seconds=time.monotonic() - started)

    def _measure(
        self,
        rev: revision.Revision,
        commit: Commit,
        pairs: int,
        deadline: float | None,
        focus: Focus,
    ) -> StepRun:
        """The step's pytest run in the checkout ``rev``, within what the step's limit left
        after its checkout and build (``deadline``, a time.monotonic value; None: no limit),
        on ``focus`` (its seconds are the caller's to set)."""
        where = rev.counterpart(self.cwd)
        if not where.is_dir():
            raise BisectError(
                f"bisect at {commit.short}: {self.cwd} does not exist at that commit; run "
                "gpubench bisect from a folder that every commit in the range has"
            )
        report = self.folder / f"step-{commit.short}-{pairs}.json"
        report.unlink(missing_ok=True)
        args = [
            sys.executable,
            "-m",
            "pytest",
            *(_moved(a, rev) for a in self.pytest_args),
            "--gpubench",
            f"--gpubench-against={self.good.sha}",  # a sha: HEAD~3 would mean another commit there
            f"--gpubench-pairs={pairs}",
            # Exactly those pairs: more, for a step still unsure, are the search's to ask
            # (a bad step is decided by one test, whatever the others still need).
            "--gpubench-confirm=0",
            f"--gpubench-json={report}",
            "--gpubench-keep-runs=0",  # a step's run is the search's, read from its report
            "-p",
            "no:cacheprovider",
            *(f"--deselect={n}" for n in focus.left_out),
        ]
        if self.threshold is not None:
            args.append(f"--gpubench-threshold={self.threshold * 100:g}%")
        if self.build is not None:
            args.append(f"--gpubench-build={self.build}")
        output = self.folder / "step.log"
        limit = None if deadline is None else max(1.0, deadline - time.monotonic())
        # The checkout's code first on the path, as the revision's side of an A/B run has it
        # (revision.code_paths), the installed plugin, not a copy in the checkout; its
        # processes refuse to measure code imported from the user's tree (FOREIGN_VARIABLE).
        env = revision.environment()
        plugin = Path(__file__).resolve().parents[1]
        paths = revision.code_paths(rev, self.folder, plugin, revision.import_roots())
        env.update({"PYTHONPATH": os.pathsep.join(paths), FOREIGN_VARIABLE: str(rev.repo)})
        env[FAMILY_VARIABLE] = str(focus.family)  # one of the user's own is not the step's
        code = revision.run_group(args, where, env, output, limit, GRACE_S)
        text = output.read_text(encoding="utf-8", errors="replace") if output.exists() else ""
        if code is None:
            raise BisectError(
                f"bisect at {commit.short}: its pytest ran over {self.timeout_s:g} s and was "
                "stopped; raise --timeout"
            )
        if code == 5:  # no test collected there: a followed one is not measured
            return StepRun({}, 0, 0.0)
        # A test or file named after -- that is not there (at BAD, an error in the arguments).
        missing = re.search(r"ERROR: (?:file or directory )?not found: (.+)", text)
        if focus.later and code == 4 and missing:
            path, sep, rest = missing.group(1).strip().partition("::")
            return StepRun({}, 0, 0.0, why=f"pytest found no {Path(path).name}{sep}{rest} here")
        if code not in (0, 1):
            raise BisectError(f"bisect at {commit.short}: pytest {_failure(code, text)}")
        results = read_report(report, commit)
        readings = {r.key: Reading.of(r) for r in results}
        taken = max((r.pairs for r in readings.values()), default=0)
        return StepRun(readings, taken, 0.0, max((r.verdict.family for r in results), default=1))


def read_report(path: Path, commit: Commit) -> list[Result]:
    """The results of a step's JSON report."""
    what = f"the JSON report of the step at {commit.short}"
    text = storage.read_text(path, what, MAX_REPORT_BYTES)
    if text is None:
        raise BisectError(f"bisect at {commit.short}: pytest wrote no JSON report")
    data = storage.parse_json(text, what)
    entries = data.get("results") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise BisectError(f"bisect: {what} has no 'results' list")
    try:
        return [Result.from_dict(entry) for entry in entries]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BisectError(f"bisect: {what} has a result that cannot be read ({exc})") from None


def _moved(arg: str, rev: revision.Revision) -> str:
    """An absolute path into the user's repository (a test file, a node id, a path entry),
    moved to the same place in the checkout; anything else as it is."""
    path, sep, rest = arg.partition("::")
    there = None if arg.startswith("-") else rev.moved(Path(path))
    return arg if there is None else str(there) + sep + rest


def _failure(code: int, output: str) -> str:
    """Why a step's pytest measured nothing, in a line: its own error when it said one."""
    said = [
        line.split("gpubench: ", 1)[1].rstrip(" !")
        for line in output.splitlines()
        if "gpubench: " in line and ("Exit:" in line or line.startswith("gpubench: error"))
    ]
    if said:
        return f"stopped: {said[-1]}"
    what = {2: "was interrupted", 3: "had an internal error", 4: "refused its arguments"}
    how = what.get(code, processes.died(code))
    return f"{how}: {reason_in(output) or 'no output'}"


def bisect(
    good: str,
    bad: str,
    cwd: Path,
    *,
    pytest_args: Sequence[str] = (),
    pairs: int = DEFAULT_PAIRS,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    threshold: float | None = None,
    build: str | None = None,
    timeout_s: float | None = None,
    announce: Announce = lambda line: None,
    progress: Announce = lambda line: None,
) -> Bisection | None:
    """Bisect from ``cwd``'s repository: step lines to ``announce``, what is being done to
    ``progress``. None when GOOD and BAD are one commit."""
    base = Path(tempfile.gettempdir()).resolve()
    revision.sweep(base, FOLDER_PREFIX)  # what bisections killed outright left
    revision.sweep(base, revision.FOLDER_PREFIX, cwd)
    good_commit, commits = history(good, bad, cwd)
    if not commits:
        return None
    with tempfile.TemporaryDirectory(prefix=FOLDER_PREFIX) as name:
        folder = revision.own(Path(name))
        steps = StepRunner(
            good_commit, cwd, folder, tuple(pytest_args), threshold, build, timeout_s, progress
        )

        def run(commit: Commit, pairs: int, focus: Focus) -> StepRun:
            done = steps(commit, pairs, focus)
            # BAD's, the first step (one that did not build: search says so)
            if commit == commits[-1] and not done.readings and not done.unbuilt:
                selection = " ".join(pytest_args) or "the default selection"
                raise BisectError(
                    f"bisect: no gpubench test selected at BAD {commit.short} ({selection}); "
                    "name tests that use the gpubench fixture after --"
                )
            return done

        return search(
            good_commit,
            good,
            commits,
            run,
            pairs=pairs,
            max_pairs=max(pairs, max_pairs),
            announce=announce,
        )
