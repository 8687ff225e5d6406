"""The gate: the one place that decides what a measurement's verdict does.

"Judge, flag, confirm, re-judge, fail or accept" is one policy, asked by everyone else: the
process timing a test (confirm it in fresh processes? does it fail?), a save (what does it
write, does a verdict start a new epoch?) and ``gpubench compare``. Pure: built from the
settings, it takes records and returns records or answers. What a save writes and accepts:
docs/guide.md, "Saving and accepting"; what makes a comparison meaningless and how another
binary is judged: docs/guide.md, "Verdicts".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from scipy import special

from ..core.baseline import BaselineEntry, Update
from ..core.kernels import binary_changes, diff, launch_count, same_work
from ..core.records import (
    Judgement,
    Measurement,
    Result,
    SessionInfo,
    SessionRecord,
    Status,
    Verdict,
)
from ..core.samples import bytes_text, plural, time_text
from ..core.settings import MeasureSettings, Settings
from .machines import machine_spread, own_sessions
from .offsets import widened
from .picks import pick_spread
from .rule import NOT_GATED_BEYOND, SCREEN_P, Z_POWER, Design, corrected_alpha, judge

# Fewer samples than this in the first session: its median's own error cannot be told.
MIN_JUDGED_SAMPLES = 3
# Fewer samples than this: no session summary worth keeping, in a baseline or as a
# confirmation (one sample tells no median's error).
MIN_SAVED_SAMPLES = 2
# Verdicts that time other work than the history judged against: another timer, another
# binary (a changed binary saved is added beside the others, its own epoch started:
# core.baseline.Update.apply).
OTHER_WORK = frozenset({Status.INCOMPARABLE, Status.CHANGED})
# Verdicts that say the code changed: a save takes them into the history only when accepted.
CHANGES = frozenset({Status.REGRESSED, Status.IMPROVED, Status.MORE_MEMORY}) | OTHER_WORK
# A call is impossible when it took less than 1/FLOOR_MARGIN of the least time its declared
# bytes allow at the copy rates measured on its device (Measurement.floor_ms), or its
# declared flops at the rate a matmul of its dtype reached there (flops_floor_ms). The margin
# covers kernels that beat a plain copy (reads only, better access patterns) or the library's
# matmul (lower precision inside, sparsity); the exploits it is for (skipped work, a result
# computed before, a broken timer) beat it by orders.
FLOOR_MARGIN = 3.0
# A process ready to run that had no CPU for more than this share of the time it timed timed
# the host's load, not the code (timing.wall's run delay): its session is unmeasurable.
MAX_CPU_WAIT = 0.2
# Verdicts whose session a save appends unless it spoils its history (Gate.spoils); told to
# accept, a save takes these and the changes (CHANGES), and unstable sessions.
APPENDED = frozenset({Status.OK, Status.NEW, Status.NOT_GATED})
ACCEPTED = CHANGES | APPENDED | {Status.UNSTABLE}
# How to accept a change: in a save's failure, and in its lines of what it left out.
HOW_TO_ACCEPT = (
    "accept it with --gpubench-save --gpubench-accept (or @pytest.mark.gpubench(accept=True) "
    "on the test)"
)


# The chance a gate leaves a slowdown of it uncaught (the target power's complement): the
# offsets' share of it widens a gate (judge/offsets.widened).
MISSED = float(special.ndtr(-Z_POWER))
# The least threshold a verdict moved by an offset's allowance is held to (the rule needs one).
MIN_THRESHOLD = 1e-6
# A measurement judged with no table of sessions: no session's GPU is known.
NO_SESSIONS: Mapping[str, SessionInfo] = {}


def _machine_of(measurement: Measurement) -> str | None:
    """The GPU (or host) of the measurement's first session, where its table says."""
    info = measurement.session_infos.get(measurement.record.session)
    return None if info is None else info.machine


WHY_IMPOSSIBLE = (
    ": the call skipped work, returned a result computed before, or its timing is broken; or "
)


def _impossible(measurement: Measurement, median: float) -> str:
    """Why a call of ``median`` is below what the measurement's declared bytes or flops
    allow ('' where it is not)."""
    floors = measurement.floors
    floor = floors.floor_ms
    if floor is not None and floors.bytes is not None and median * FLOOR_MARGIN < floor:
        fastest = max(floors.peak_gbs or 0.0, floors.cached_gbs or 0.0)
        rates = f"{fastest:.0f} GB/s measured"
        if floors.cache_bytes and floors.bytes > floors.cache_bytes:
            rates += (
                f", what exceeds its {floors.cache_bytes / 2**20:.0f} MiB cache at "
                f"{floors.peak_gbs or 0:.0f} GB/s"
            )
        return (
            f"{time_text(median)} per call for its declared {floors.bytes:.4g} bytes is "
            f"{floors.bytes / (median * 1e6):.4g} GB/s, over {FLOOR_MARGIN:g}x the fastest this "
            f"device's copies allow (they take {time_text(floor)}: {rates}){WHY_IMPOSSIBLE}"
            "bytes= says more than it moves"
        )
    floor = floors.flops_floor_ms
    if floor is None or floors.flops is None or not median * FLOOR_MARGIN < floor:
        return ""
    return (
        f"{time_text(median)} per call for its declared {floors.flops:.4g} flops is "
        f"{floors.flops / (median * 1e9):.4g} TFLOP/s, over {FLOOR_MARGIN:g}x what a "
        f"{floors.matmul_dtype} matmul reached on this device ({time_text(floor)}: "
        f"{floors.matmul_tflops or 0:.4g} TFLOP/s measured){WHY_IMPOSSIBLE}flops= says "
        "more than it computes"
    )


@dataclass(frozen=True)
class Gate:
    """What verdicts do in one process.

    ``confirm``: fresh processes that confirm a flagged verdict (0: the first is final);
    ``accepting``: this process saves its session, and takes a final verdict of a change into
    the history (a new epoch) when the measurement's settings say ``accept``; ``enforcing``:
    verdicts fail tests (in the user's run and save, not in a fresh process, whose parent
    judges or appends what it measured); ``family``: the measurements judged in the
    run (the multiplicity correction); ``work_fails``: a changed binary that runs other
    kernels (or as many times other) fails its test, ``changed_fails``: any changed binary,
    another configuration of the same kernels too (``--gpubench-changed``: ``work``, the
    default; ``fail``; ``warn`` and ``--gpubench-allow-incomparable`` fail neither).
    """

    confirm: int = 6
    accepting: bool = False
    enforcing: bool = True
    fail_on_improvement: bool = False
    allow_incomparable: bool = False
    family: int = 1
    changed_fails: bool = False
    work_fails: bool = True

    @classmethod
    def of(cls, settings: Settings, family: int = 1) -> Gate:
        """The gate of this process's role. The user's run and save confirm and fail; a
        fresh process, confirming a verdict or recording a session of a save, confirms,
        fails and accepts nothing: its parent judges what it measured, or appends it."""
        child = settings.child is not None
        return cls(
            confirm=0 if child else settings.confirm,
            accepting=settings.save and not child,
            enforcing=not child,
            fail_on_improvement=settings.fail_on_improvement,
            allow_incomparable=settings.allow_incomparable,
            family=max(1, settings.least_family, family),
            changed_fails=settings.changed == "fail" and not settings.allow_incomparable,
            work_fails=settings.changed != "warn" and not settings.allow_incomparable,
        )

    def judge(
        self,
        measurement: Measurement,
        entry: BaselineEntry | None,
        settings: MeasureSettings,
        sessions: Mapping[str, SessionInfo] = NO_SESSIONS,
    ) -> Result:
        """The verdict on all sessions of ``measurement`` against its baseline ``entry``
        (``sessions``: the file's table of sessions, which says each one's GPU); in a save, a
        final verdict says what appending its session would spoil (:meth:`spoils`), and
        whether this save accepts it (:meth:`accepts`)."""
        result = Result(measurement, self.verdict(measurement, entry, settings, sessions))
        if not self.accepting or self.needs_confirmation(result):
            return result
        verdict = result.verdict
        appended = verdict.status in APPENDED
        spoils = self.spoils(measurement, entry, settings, sessions) if appended else ""
        accepted = self.accepts(result, settings)
        if not (spoils or accepted):
            return result
        return replace(result, verdict=replace(verdict, accepted=accepted, spoils=spoils))

    def accepts(self, result: Result, settings: MeasureSettings) -> bool:
        """Whether this process's save takes the result's session into the history whatever
        it judged: a final verdict (confirmed, or needing no confirmation) of a change, or
        one a save appends or leaves out (``ACCEPTED``), in a save whose measurement settings
        say ``accept``. Never what is no time of the work: ``impossible``,
        ``unmeasurable``, ``unconfirmed``."""
        return (
            self.accepting
            and settings.accept
            and result.status in ACCEPTED
            and not self.needs_confirmation(result)
        )

    def spoils(
        self,
        measurement: Measurement,
        entry: BaselineEntry | None,
        settings: MeasureSettings,
        sessions: Mapping[str, SessionInfo] = NO_SESSIONS,
    ) -> str:
        """Why appending the measurement's session to the history it was judged against would
        widen a gate within the threshold beyond it, or leave a gated history not gated; ''
        where it would not. Only a session an unchanged test would place that far from the
        floor less often than ``SCREEN_P`` is refused, so a gate's sampling noise never fails
        a save; the other exemptions: docs/guide.md, "Saving and accepting", and for a GPU with
        too few sessions in the history (``sessions`` names each session's GPU)
        docs/verdict.md, "Another GPU"."""
        if entry is None or entry.timer != measurement.timer:
            return ""
        binary = entry.binary_for(measurement.kernels)
        record = measurement.record
        if binary is None or not binary.history or record.n < MIN_JUDGED_SAMPLES:
            return ""
        here = _machine_of(measurement)
        history = own_sessions(binary.history, sessions, here)  # as a run here judges
        if measurement.versus is None and machine_spread(
            history, sessions, here, measurement.timer
        ):
            return ""
        medians = [r.median_ms for r in history]
        if min(medians) <= record.median_ms <= max(medians):
            return ""
        launches = launch_count(binary.kernels or measurement.kernels)
        before = self._judge(history, [record], measurement, settings, launches)
        p = before.p_value
        if not before.gated or before.gateable is None or p is None or p >= SCREEN_P:
            return ""
        own = replace(measurement, confirmations=())
        after = Update.of(own, new_epoch=False).apply(entry).binary_for(measurement.kernels)
        if after is None:
            return ""
        known = {**sessions, **measurement.session_infos}
        later = own_sessions(after.history, known, here)
        now = self._judge(later, [record], measurement, settings, launches)
        gate, threshold = before.gateable, settings.threshold
        if not now.gated or now.gateable is None:
            return f"leave its history not gated, where it gates {gate:.1%}"
        if gate <= threshold < now.gateable:
            return (
                f"widen its gate from {gate:.1%} to {now.gateable:.1%}, beyond its threshold "
                f"{threshold * 100:g}%"
            )
        return ""

    def impossible(
        self, measurement: Measurement, median_ms: float | None = None
    ) -> Verdict | None:
        """The verdict on a call faster than its declared bytes or flops allow (None:
        possible, or not known): whatever its history or revision says, its number is not a
        time of that work. ``median_ms``: another time of the same work held to the
        measurement's floors (a revision's, against the working tree's rates)."""
        reason = _impossible(measurement, measurement.median_ms if median_ms is None else median_ms)
        return Verdict(Status.IMPOSSIBLE, reason=reason, family=self.family) if reason else None

    def verdict(
        self,
        measurement: Measurement,
        entry: BaselineEntry | None,
        settings: MeasureSettings,
        sessions: Mapping[str, SessionInfo] = NO_SESSIONS,
    ) -> Verdict:
        impossible = self.impossible(measurement)
        if impossible is not None:
            return impossible
        verdict = self._time_verdict(measurement, entry, settings, sessions)
        if entry is None or verdict.status is Status.INCOMPARABLE:
            return verdict
        binary = entry.binary_for(measurement.kernels) or entry.binary
        return with_memory(verdict, measurement.peak_bytes, binary.peak_bytes, settings)

    def _time_verdict(
        self,
        measurement: Measurement,
        entry: BaselineEntry | None,
        settings: MeasureSettings,
        sessions: Mapping[str, SessionInfo],
    ) -> Verdict:
        base = Verdict(Status.NEW, reason="no baseline", family=self.family)
        if entry is None:
            return _loaded(measurement, base) or base
        launches = measurement.kernels
        if entry.timer != measurement.timer:
            changes = tuple(diff(entry.kernels, launches)) if entry.kernels and launches else ()
            return replace(
                base,
                status=Status.INCOMPARABLE,
                reason=f"baseline timed by {entry.timer}, now by {measurement.timer}: times of "
                "different timers are never compared; accept the new timer with --gpubench-save "
                "--gpubench-accept",
                kernel_changes=changes,
                reference_ms=entry.median_ms,
                history_sessions=len(entry.history),
            )
        binary = entry.binary_for(launches)
        spread = None
        if binary is None:
            spread = pick_spread(entry.binaries, launches)
            if self.changed_fails or (spread is None and self.work_fails):
                return another_binary(measurement, entry, base)
            # Another binary judged on time (issue 45): a pick of the same work against the
            # test's binary of that work with the longest history, less what a pick alone
            # explains; other kernels (only where they do not fail by themselves) against
            # the latest binary, as the code they replace.
            binary = entry.binary if spread is None else spread.reference
            changes = tuple(binary_changes(binary.kernels, launches))
            base = replace(base, kernel_changes=changes, same_kernels=spread is not None)
        here = _machine_of(measurement)
        history = own_sessions(binary.history, sessions, here)
        base = replace(
            base,
            reference_ms=binary.median_ms,
            history_sessions=len(history),
            baseline_binary=binary.fingerprint,
            reference_kernels=binary.kernels,
        )
        loaded = _loaded(measurement, base)  # (after what load does not touch: timer, binary)
        if loaded is not None:
            return loaded
        first = measurement.record
        if first.n < MIN_JUDGED_SAMPLES:
            return replace(
                base,
                status=Status.UNSTABLE,
                reason=f"{too_few(first.n)} (judging needs {MIN_JUDGED_SAMPLES})",
            )

        calls = launch_count(binary.kernels or launches)
        judged = partial(self._judge, history, measurement.sessions, measurement, settings, calls)

        judgement = judged()
        gpu = None
        if measurement.versus is None:  # a ratio to a function timed beside it has no GPU's own
            gpu = machine_spread(history, sessions, here, measurement.timer)
        offsets = [o for o in (spread, gpu) if o is not None]
        if offsets:
            # The offsets share half of each look's level, the sessions' noise the other half.
            level = corrected_alpha(settings.alpha, 2 * self.family, self.fail_on_improvement)
            share = level / self.design.looks / len(offsets)
            parts = [o.allowance(share) for o in offsets]
            allowance = sum(parts)
            # An allowance beyond what any gate holds (an offset this history cannot tell) is
            # not applied: no median made thousands of times faster is a time.
            within = allowance < math.log1p(NOT_GATED_BEYOND)
            family = 2 * self.family
            whys = []
            if spread is not None:
                whys.append(spread.says(parts[0], base.kernel_changes))
            if gpu is not None:
                whys.append(gpu.says(parts[-1]))
            judgement = widened(
                judgement,
                judged(-allowance, family, 1) if within else None,
                judged(allowance, family, -1) if within else None,
                allowance,
                sum(o.allowance(MISSED) for o in offsets),
                whys,
                [o.remedy for o in offsets],
                threshold=settings.threshold,
            )
        reason = judgement.reason
        if base.kernel_changes and spread is None:
            reason += "; other kernels than the baseline's: " + "; ".join(base.kernel_changes)
        if measurement.context.caveat and (judgement.noisy or not judgement.gated):
            # What the history cannot gate, the host may be the cause of: say what it saw.
            reason = f"{reason}; on this host {measurement.context.caveat}"
        return replace(base, status=judgement.status, judgement=judgement, reason=reason)

    def _judge(
        self,
        history: Sequence[SessionRecord],
        current: Sequence[SessionRecord],
        measurement: Measurement,
        settings: MeasureSettings,
        launches: int,
        shift: float = 0.0,
        family: int | None = None,
        side: int = 0,
    ) -> Judgement:
        """The rule on ``current`` sessions of ``measurement`` (their medians moved by
        ``shift``, log scale) against ``history``. Moved, they are held to the threshold less
        the shift: what must reach the threshold is the change the sessions read, not that
        change less an offset's allowance (which only the significance bears); and judged
        for the one direction (``side``, rule.decide's) they were moved against."""
        scale = math.exp(shift)
        threshold = max(MIN_THRESHOLD, math.expm1(math.log1p(settings.threshold) - abs(shift)))
        return judge(
            [r.summary for r in history],
            [replace(r.summary, median_ms=r.median_ms * scale) for r in current],
            threshold=threshold,
            alpha=settings.alpha,
            family=family or self.family,
            timer=measurement.timer,
            launches=launches,
            fail_on_improvement=self.fail_on_improvement,
            design=self.design,
            versus=measurement.versus,
            side=side,
        )

    @property
    def design(self) -> Design:
        """The sequential design: up to ``confirm`` fresh-process sessions, in batches."""
        return Design(cap=self.confirm)

    def needs_confirmation(self, result: Result) -> bool:
        """Whether a verdict wants more sessions in fresh processes: a flagged first session,
        or a borderline one after a batch, in either direction (improvements are confirmed
        like regressions), while the cap allows."""
        judgement = result.verdict.judgement
        if self.confirm == 0 or judgement is None or not judgement.needs_confirmation:
            return False
        if result.status is Status.MORE_MEMORY:  # fails as it is: more sessions change nothing
            return False
        return self.next_batch(result) > 0

    def next_batch(self, result: Result) -> int:
        """How many fresh processes the next batch of ``result``'s confirmation takes."""
        return self.design.next_batch(len(result.measurement.sessions))

    def unconfirmed(self, result: Result, why: str) -> Result:
        """``result`` when it needs no confirmation or a batch of fresh sessions already
        judged it (a later batch that could not run leaves the last look's verdict, valid at
        its level); else its first verdict, unconfirmed (it fails nothing): its
        confirmation did not run, for the reason ``why``."""
        if not self.needs_confirmation(result) or result.measurement.confirmations:
            return result
        verdict = result.verdict
        reason = f"not confirmed: {why}; its first session: {verdict.reason}"
        return replace(result, verdict=replace(verdict, status=Status.UNCONFIRMED, reason=reason))

    @staticmethod
    def confirmed(measurement: Measurement, children: Iterable[Measurement]) -> Measurement:
        """``measurement`` with the sessions of fresh processes that timed the same thing: the
        same key, by the same timer, with enough samples to summarize, on a host that let
        them run (a loaded one's are left out, its note saying so)."""
        timed = [
            child
            for child in children
            if child.key == measurement.key
            and child.timer == measurement.timer
            and len(child.samples_ms) >= MIN_SAVED_SAMPLES
        ]
        kept = [child for child in timed if not _waited(child)]
        confirmed = measurement.with_confirmations(kept)
        if len(kept) == len(timed):
            return confirmed
        left = len(timed) - len(kept)
        return confirmed.noted(
            f"{plural(left, 'confirming session')} left out: its process had no "
            f"CPU for more than {MAX_CPU_WAIT:.0%} of the time it timed (a loaded host)"
        )

    def fails(self, verdict: Verdict) -> bool:
        """Whether a final verdict fails its test: in a save as in any run, unless the save
        accepts it; and in a save, a session that would spoil its history (:meth:`spoils`)."""
        return (
            self.enforcing
            and not verdict.accepted
            and (
                bool(verdict.spoils)
                or verdict.status
                in (Status.REGRESSED, Status.IMPOSSIBLE, Status.MORE_MEMORY, Status.CRASHED)
                or (verdict.status is Status.IMPROVED and self.fail_on_improvement)
                or (verdict.status is Status.INCOMPARABLE and not self.allow_incomparable)
                or (
                    verdict.status is Status.CHANGED
                    and (
                        self.changed_fails
                        or (self.work_fails and not verdict.same_kernels and not _paired(verdict))
                    )
                )
            )
        )

    def refusal(self, verdict: Verdict) -> str:
        """The line under a change this save does not accept, or a session that would spoil
        its history: the history stays as it was, and how to accept it; '' for every other
        verdict, and outside a save."""
        if not self.accepting or verdict.accepted:
            return ""
        if verdict.spoils:
            return (
                f"not saved: appending this session would {verdict.spoils}; the baseline keeps "
                f"its history; save it again on a quiet machine, or {HOW_TO_ACCEPT}"
            )
        if verdict.status not in CHANGES:
            return ""
        return f"not saved: the baseline keeps its history; {HOW_TO_ACCEPT}"

    def starts_epoch(self, verdict: Verdict) -> bool:
        """Whether saving this verdict starts the history over: an accepted change of time
        or binary (an accepted peak memory leaves the times' history as it is)."""
        if not verdict.accepted:
            return False
        if verdict.status is Status.MORE_MEMORY:  # its time may be a change too
            judgement = verdict.judgement
            return judgement is not None and judgement.status in CHANGES
        return verdict.status in CHANGES

    def unsaved(self, result: Result, passed: bool = True) -> str | None:
        """Why a save leaves the run's session of a result out: None when it is saved; ''
        when its test did not pass (the test's own failure says why, a change this save
        does not accept included); else one line for under the table. A change that does
        not fail (an improvement, an allowed incomparable baseline) is left out unless
        accepted; an unconfirmed verdict is left out: its first session may be a change; an
        unstable one, and one that would spoil its history, unless accepted."""
        if not passed:
            return ""
        test, verdict = result.test, result.verdict
        if verdict.status is Status.IMPOSSIBLE:
            return f"{test}: not saved: impossible (its number is not a time of its work)"
        if verdict.status is Status.UNMEASURABLE:
            return f"{test}: not saved: unmeasurable (a loaded host; save it on a quiet one)"
        if verdict.status in CHANGES and not verdict.accepted:
            return f"{test}: not saved: {verdict.status.value}; {HOW_TO_ACCEPT}"
        if verdict.status is Status.UNCONFIRMED:
            return f"{test}: not saved: unconfirmed (its first session may be a change); save again"
        if verdict.spoils and not verdict.accepted:
            return f"{test}: not saved: appending this session would {verdict.spoils}"
        if verdict.status is Status.UNSTABLE and not verdict.accepted:
            return f"{test}: not saved: unstable: {verdict.reason}; or {HOW_TO_ACCEPT}"
        return _too_few_to_save(result.measurement)

    def accepted_line(self, result: Result, new_epoch: bool) -> str | None:
        """What an accepting save says of a session it saved (None: nothing was accepted,
        the session would have been saved without it): a change, a new epoch; an unstable
        session, or one that spoils its history, appended."""
        verdict, test = result.verdict, result.test
        status = verdict.status.value
        if new_epoch:
            return f"{test}: {status}, accepted: its history starts over from this run"
        if not verdict.accepted:
            return None
        if verdict.spoils:
            return (
                f"{test}: {status}, accepted: appended to its history, which it may "
                f"{verdict.spoils}"
            )
        if verdict.status is Status.UNSTABLE:
            n = result.measurement.record.n
            return f"{test}: unstable, accepted: appended to its history ({too_few(n)})"
        if verdict.status in CHANGES:  # its binary's own history (changed), its peak memory
            return f"{test}: {status}, accepted: appended to its history"
        return None

    def unrecorded(self, result: Result, passed: bool, accepted: bool = False) -> str | None:
        """Why a session recorded in a fresh process (``--gpubench-sessions``) is not appended
        (None: appended, unless it would spoil its history: :meth:`spoils`). A session is a
        sample of the spread, never a change to accept: it is appended whatever else it
        judged against the history its run's first session extended. Left out: a test that
        did not pass there, a timing of other work than the history's (``OTHER_WORK``), too
        few samples, and, unless its first session was ``accepted``, an unstable one."""
        test = result.test
        if not passed:
            return (
                f"{test}: a recorded session not saved: its test did not pass in the fresh process"
            )
        if result.status in OTHER_WORK or result.status in (Status.IMPOSSIBLE, Status.UNMEASURABLE):
            return f"{test}: a recorded session not saved: {result.verdict.reason}"
        if result.status is Status.UNSTABLE and not accepted:
            return f"{test}: a recorded session not saved: unstable: {result.verdict.reason}"
        return _too_few_to_save(result.measurement)

    def saved(self, result: Result, *, recorded: bool = False) -> Update:
        """What saving ``result`` adds to its baseline: the session that took its samples, as
        a new epoch when its change is accepted (never for a ``recorded`` session). The
        sessions of fresh processes that confirmed its verdict decided it and are not
        written, so a save of N sessions writes N; the first session is written whatever its
        confirmation found, so the history's spread keeps its flagged sessions."""
        own = replace(result.measurement, confirmations=())
        return Update.of(own, not recorded and self.starts_epoch(result.verdict))


def _waited(measurement: Measurement) -> bool:
    """Whether the measurement's process was ready to run and had no CPU for more than
    MAX_CPU_WAIT of the time it timed (timing.wall's run delay)."""
    return measurement.context.cpu_wait is not None and measurement.context.cpu_wait > MAX_CPU_WAIT


def _loaded(measurement: Measurement, base: Verdict) -> Verdict | None:
    """``base`` made ``unmeasurable`` where the measurement's process waited (_waited);
    None otherwise."""
    if not _waited(measurement):
        return None
    wait = measurement.context.cpu_wait or 0.0
    return replace(
        base,
        status=Status.UNMEASURABLE,
        reason=f"its process was ready to run but had no CPU {wait:.0%} of the time it timed "
        "(other processes had them, or its CPU quota ran out): the times are the load's, "
        "not the code's; not judged, not saved; run it on a quiet machine (fewer "
        "pytest-xdist workers, nothing else running)",
    )


def _paired(verdict: Verdict) -> bool:
    """Judged against a revision measured in the same job: its other launches are the
    change under review, and their time was judged (a slower one is ``regressed``)."""
    return verdict.judgement is not None and verdict.judgement.against == "revision"


def _too_few_to_save(measurement: Measurement) -> str | None:
    n = len(measurement.samples_ms)
    if n < MIN_SAVED_SAMPLES:
        return f"{measurement.test}: not saved: {too_few(n)} (a baseline needs {MIN_SAVED_SAMPLES})"
    return None


def another_binary(measurement: Measurement, entry: BaselineEntry, base: Verdict) -> Verdict:
    """``changed``: ``measurement`` ran no binary of ``entry``. What differs from the latest
    binary is said, and the time against that binary's history for information only: another
    binary's time is never judged as a regression."""
    previous = entry.binary
    changes = tuple(binary_changes(previous.kernels, measurement.kernels))
    ratio = measurement.median_ms / previous.median_ms
    known = len(entry.binaries)
    which = f"{known}, the latest " if known > 1 else ""
    return replace(
        base,
        status=Status.CHANGED,
        reason=f"another binary than the baseline's ({which}{previous.fingerprint} -> "
        f"{measurement.binary}): "
        + "; ".join(changes)
        + f"; {(ratio - 1) * 100:+.1f}% against that binary's history, for information only: "
        "another binary is not judged on time; accept it with --gpubench-save --gpubench-accept",
        kernel_changes=changes,
        reference_ms=previous.median_ms,
        history_sessions=len(previous.history),
        baseline_binary=previous.fingerprint,
        previous_ratio=ratio,
        same_kernels=same_work(previous.kernels, measurement.kernels),
        reference_kernels=previous.kernels,
    )


def with_memory(
    verdict: Verdict, current: int | None, reference: int | None, settings: MeasureSettings
) -> Verdict:
    """``verdict`` judged on peak memory too (:func:`memory_growth`): ``more memory`` where
    the call grew past its bounds, whatever its time says, which it keeps in its reason
    (exact, where time is a sample); a regressed verdict stays one and says both."""
    growth = memory_growth(current, reference, settings)
    if not growth:
        return verdict
    judgement = verdict.judgement
    if verdict.status is Status.REGRESSED and not (judgement and judgement.needs_confirmation):
        # A final regression says both; a flagged one is not yet final, the memory is.
        return replace(verdict, reason=f"{verdict.reason}; and {growth}")
    return replace(
        verdict,
        status=Status.MORE_MEMORY,
        reason=f"{growth}; its time: {verdict.status.value}, {verdict.reason}",
    )


def memory_growth(current: int | None, reference: int | None, settings: MeasureSettings) -> str:
    """What fails in a call's peak memory against its reference (both in bytes): '' when
    either is unknown or it grew by no more than the larger of ``memory_threshold`` of the
    reference and ``memory_slack``."""
    if current is None or reference is None or math.isinf(settings.memory_threshold):
        return ""
    grown = current - reference
    if grown <= max(settings.memory_slack, settings.memory_threshold * reference):
        return ""
    share = f" ({grown / reference:+.1%})" if reference else ""
    return (
        f"peak memory {bytes_text(current)} per call, was {bytes_text(reference)}: "
        f"+{bytes_text(grown)}{share}, over both its memory threshold "
        f"({settings.memory_threshold * 100:g}%) and its memory slack "
        f"({bytes_text(settings.memory_slack)}); accept it with --gpubench-save "
        "--gpubench-accept"
    )


def too_few(n: int) -> str:
    return f"{plural(n, 'sample')} in the budget: too few to judge, raise --gpubench-budget-s"
