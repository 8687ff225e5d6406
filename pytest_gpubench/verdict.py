"""The verdict on one measurement: a pure function of its baseline, its sessions and settings.

Before the statistics (rule.py), what makes a comparison meaningless: a baseline timed by
another timer, or whose calls ran other kernels, is ``incomparable``; a session with too few
samples to tell its own median is ``unstable``. Kernel configuration changes (grid, block,
registers) leave the work comparable and are reported with the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .baseline import BaselineEntry
from .kernels import Launch, diff, launch_count, same_work
from .results import Result
from .rule import Judgement, SessionSummary, Status, judge
from .settings import MeasureSettings

# Fewer samples than this in the first session: its median's own error cannot be told.
MIN_JUDGED_SAMPLES = 3


@dataclass(frozen=True)
class Assessment:
    status: Status
    judgement: Judgement | None = None
    reason: str = ""
    kernel_changes: tuple[str, ...] = ()

    @property
    def needs_confirmation(self) -> bool:
        return self.judgement is not None and self.judgement.needs_confirmation


def assess(
    entry: BaselineEntry | None,
    *,
    timer: str,
    launches: Sequence[Launch],
    sessions: Sequence[SessionSummary],
    settings: MeasureSettings,
    family: int,
    fail_on_improvement: bool,
) -> Assessment:
    """Judge this run's ``sessions`` (its first, then any confirmations) of a measurement
    taken by ``timer`` whose calls ran ``launches``, against its baseline ``entry``.

    ``family`` is the number of measurements judged in the run (the multiplicity
    correction)."""
    if entry is None:
        return Assessment(Status.NEW, reason="no baseline")
    changes = tuple(diff(entry.kernels, launches)) if entry.kernels and launches else ()
    if entry.timer != timer:
        return Assessment(
            Status.INCOMPARABLE,
            reason=f"baseline timed by {entry.timer}, now by {timer}: times of different "
            "timers are never compared; accept the new timer with --gpubench-save",
            kernel_changes=changes,
        )
    if entry.kernels and launches and not same_work(entry.kernels, launches):
        return Assessment(
            Status.INCOMPARABLE,
            reason="calls run other kernels than the baseline's: "
            + "; ".join(changes)
            + "; accept the new kernels with --gpubench-save",
            kernel_changes=changes,
        )
    first = sessions[0]
    if first.n < MIN_JUDGED_SAMPLES:
        return Assessment(
            Status.UNSTABLE,
            reason=f"{too_few(first.n)} (judging needs {MIN_JUDGED_SAMPLES})",
            kernel_changes=changes,
        )
    judgement = judge(
        [r.summary for r in entry.history],
        [r.summary for r in entry.anchor],
        list(sessions),
        threshold=settings.threshold,
        alpha=settings.alpha,
        family=family,
        timer=timer,
        launches=launch_count(entry.kernels or launches),
        fail_on_improvement=fail_on_improvement,
    )
    return Assessment(judgement.status, judgement, judgement.reason, changes)


def judge_result(
    result: Result,
    entry: BaselineEntry | None,
    settings: MeasureSettings,
    *,
    family: int,
    fail_on_improvement: bool,
) -> None:
    """Set ``result``'s verdict, and what it was judged against, from all its sessions."""
    assessment = assess(
        entry,
        timer=result.timer,
        launches=result.kernels,
        sessions=[r.summary for r in result.sessions],
        settings=settings,
        family=family,
        fail_on_improvement=fail_on_improvement,
    )
    result.status, result.judgement = assessment.status, assessment.judgement
    result.reason, result.kernel_changes = assessment.reason, assessment.kernel_changes
    result.reference_ms = entry.median_ms if entry is not None else None
    result.history_sessions = len(entry.history) if entry is not None else 0
    result.family = family


def too_few(n: int) -> str:
    return (
        f"{n} sample{'s' if n != 1 else ''} in the budget: too few to judge, "
        "raise --gpubench-budget-s"
    )


def fails(status: Status, *, fail_on_improvement: bool, allow_incomparable: bool) -> bool:
    """Whether a final verdict fails its test (outside a save, which accepts changes)."""
    return (
        status is Status.REGRESSED
        or (status is Status.IMPROVED and fail_on_improvement)
        or (status is Status.INCOMPARABLE and not allow_incomparable)
    )
