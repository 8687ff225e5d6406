"""A measurement's baseline as plain values: its binaries, each an epoch's sessions (an
anchor and a rolling history), and what one run adds to it.

Values, not files: the gate judges against them and says what a run adds; store.baseline
reads and writes them (the file's schema, locks, atomic writes). Each record turns into its
JSON and back (``to_json``, ``from_json``), the reads strict: a ValueError says what is wrong
and the file's reader names the file and the entry.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .codec import absent, empty, encode, spec
from .jsondata import Json
from .kernels import Launch, fingerprint, same_binary
from .records import (
    Measurement,
    SessionInfo,
    SessionRecord,
    Versus,
    at_least,
    is_number,
    no_extra,
    rounded,
    unknown_keys,
    whole,
)
from .samples import MAX_SAMPLE_MS, MIN_SAMPLE_MS, sample_problem

# The epoch's first sessions kept as an anchor, never rolled out (docs/verdict.md, table
# "creep": the anchor catches a slow creep the rolling history absorbs), and the rolling
# history's length (issue 9: enough sessions to tell a test's spread between processes).
ANCHOR_SESSIONS = 5
HISTORY_SESSIONS = 20
# Binaries an entry keeps (issue 16): a binary per machine of a pool that compiles
# differently, and the ones a change under review just replaced.
MAX_BINARIES = 4
# The latest sessions whose largest peak memory is a binary's reference (Binary.peak_bytes).
MEMORY_SESSIONS = 5


def reference_ms(history: Sequence[SessionRecord]) -> float:
    """The reference time of a history: the geometric mean of its session medians."""
    logs = list(map(math.log, map(operator.attrgetter("median_ms"), history)))
    return math.exp(math.fsum(logs) / len(logs))


@dataclass(frozen=True)
class Binary:
    """One binary of a measurement: what a call launches, and its epoch's sessions."""

    kernels: tuple[Launch, ...]  # of its latest saved session; () when not recorded
    epoch: str  # the session that started the epoch
    anchor: tuple[SessionRecord, ...]  # the epoch's first sessions
    history: tuple[SessionRecord, ...]  # the latest sessions of the epoch, oldest first
    # Keys of a newer version, of a binary in ``others`` (the latest binary's are its entry's).
    extra: Mapping[str, Json] = field(default_factory=no_extra)

    KNOWN = frozenset(("epoch", "anchor", "history", "kernels", "binary"))

    @property
    def fingerprint(self) -> str:
        """The short hash of its launches ('' when not recorded)."""
        return fingerprint(self.kernels)

    @property
    def median_ms(self) -> float:
        """The reference time: geometric mean of the history's session medians."""
        return reference_ms(self.history)

    @property
    def peak_bytes(self) -> int | None:
        """The reference peak memory of a call: the most its latest sessions that know it held
        (MEMORY_SESSIONS: a process that held more, an autotuner's other workspace, never
        flags the next; a lower peak is the reference once those sessions roll out); None
        when no session knows it."""
        peaks = [r.peak_bytes for r in self.history if r.peak_bytes is not None]
        return max(peaks[-MEMORY_SESSIONS:]) if peaks else None

    def trimmed(self) -> Binary:
        """This binary with no more sessions than a save keeps: its latest HISTORY_SESSIONS,
        its first ANCHOR_SESSIONS as the anchor."""
        return dataclasses.replace(
            self, anchor=self.anchor[:ANCHOR_SESSIONS], history=self.history[-HISTORY_SESSIONS:]
        )

    def runs(self, launches: Sequence[Launch]) -> bool:
        """Whether a call that launched ``launches`` ran this binary: the same launches, or
        either side not recorded."""
        return not launches or not self.kernels or same_binary(self.kernels, launches)

    def extended(self, records: Sequence[SessionRecord]) -> Binary:
        """This epoch with ``records`` appended: the anchor fills up to its size, the history
        keeps its latest sessions."""
        anchor = (self.anchor + tuple(records))[:ANCHOR_SESSIONS]
        history = (self.history + tuple(records))[-HISTORY_SESSIONS:]
        return dataclasses.replace(self, anchor=anchor, history=history)

    @classmethod
    def started(cls, kernels: tuple[Launch, ...], records: Sequence[SessionRecord]) -> Binary:
        """A new epoch of ``records``."""
        return cls(kernels, records[0].session, tuple(records), tuple(records)).trimmed()

    def to_json(self) -> dict[str, Json]:
        return _with_fingerprint(encode(self), self.kernels)

    @classmethod
    def from_json(cls, data: Mapping[str, Json], sessions: Mapping[str, SessionInfo]) -> Binary:
        """Raises ValueError saying what is wrong."""
        epoch, anchor, history, kernels = _binary_parts(data, sessions)
        return cls(kernels, epoch, anchor, history, unknown_keys(data, cls.KNOWN))


def _with_fingerprint(data: dict[str, Json], kernels: Sequence[Launch]) -> dict[str, Json]:
    """A binary's JSON with its fingerprint, for a reader: derived, not read back."""
    return {**data, "binary": fingerprint(kernels)} if kernels else data


def _binary_parts(
    data: Mapping[str, Json], sessions: Mapping[str, SessionInfo]
) -> tuple[str, tuple[SessionRecord, ...], tuple[SessionRecord, ...], tuple[Launch, ...]]:
    """A binary's epoch, anchor, history and kernels; ValueError saying what is wrong."""
    epoch = data.get("epoch")
    if not isinstance(epoch, str):
        raise ValueError("has no 'epoch' string")
    raw: dict[str, list[Json]] = {}
    for part in ("anchor", "history"):
        listed = data.get(part)
        if not isinstance(listed, list) or (part == "history" and not listed):
            raise ValueError(f"has no {part!r} list of session records")
        raw[part] = listed
    history = _records(raw["history"], sessions)
    anchor = _records(raw["anchor"], sessions)
    raw_kernels = data.get("kernels", [])
    if not isinstance(raw_kernels, list):
        raise ValueError("has 'kernels' that are not a list")
    kernels = []
    for i, kernel in enumerate(raw_kernels):
        try:
            kernels.append(Launch.from_dict(kernel))
        except ValueError as exc:
            raise ValueError(f"has a kernel entry {i} that is malformed: {exc}") from None
    if not isinstance(data.get("binary", ""), str):
        raise ValueError(f"has a 'binary' of {data['binary']!r:.60}, not a string")
    return epoch, anchor, history, tuple(kernels)


def _records(raw: list[Json], sessions: Mapping[str, SessionInfo]) -> tuple[SessionRecord, ...]:
    """The session records of a list of their JSON, each of a session of the table."""
    records = tuple(map(SessionRecord.from_json, raw))
    names = list(map(operator.attrgetter("session"), records))
    if not all(map(sessions.__contains__, names)):  # C speed: millions in 10^5 tests
        unknown = next(name for name in names if name not in sessions)
        raise ValueError(f"refers to session {unknown!r:.60}, not in 'sessions'")
    return records


@dataclass(frozen=True)
class BaselineEntry:
    """One measurement's baseline: the binary of its latest saved session (its ``kernels``,
    ``epoch``, ``anchor`` and ``history``), its other binaries, and what its latest session
    saw."""

    timer: str
    epoch: str  # the session that started the latest binary's epoch
    anchor: tuple[SessionRecord, ...]  # the epoch's first sessions
    history: tuple[SessionRecord, ...]  # the latest sessions of the epoch, oldest first
    # The latest session's samples, for display.
    samples_ms: tuple[float, ...] = field(
        default=(), metadata=spec(form=lambda xs: list(map(rounded, xs)))
    )
    kernels: tuple[Launch, ...] = ()  # what one call of the latest session launched
    group: str | None = field(default=None, metadata=spec(omit=absent))
    bytes: float | None = field(default=None, metadata=spec(omit=absent))
    flops: float | None = field(default=None, metadata=spec(omit=absent))
    extra_info: dict[str, Json] | None = field(default=None, metadata=spec(omit=empty))
    note: str | None = field(default=None, metadata=spec(omit=empty))
    # Its other binaries, the most recently saved first.
    others: tuple[Binary, ...] = field(default=(), metadata=spec(omit=empty))
    # A ratio to a reference: what its latest session compared.
    versus: Versus | None = field(default=None, metadata=spec(omit=absent))
    # Keys of a newer version (beside its own, those of its latest binary): written back.
    extra: Mapping[str, Json] = field(default_factory=no_extra)

    KNOWN = Binary.KNOWN | frozenset(
        ("timer", "samples_ms", "others", "group", "bytes", "flops", "extra_info", "note", "versus")
    )

    @functools.cached_property
    def median_ms(self) -> float:
        """The reference time of the latest binary (``Binary.median_ms``), made once: show
        asks each entry for it twice, plot more."""
        return reference_ms(self.history)  # without making its Binary

    @property
    def binary(self) -> Binary:
        """The binary of the latest saved session."""
        return Binary(self.kernels, self.epoch, self.anchor, self.history)

    @property
    def binaries(self) -> tuple[Binary, ...]:
        """Every binary kept, the most recently saved first."""
        return (self.binary, *self.others)

    def binary_for(self, launches: Sequence[Launch]) -> Binary | None:
        """The binary a call that launched ``launches`` ran (the latest one that matches: the
        latest when launches were not recorded), or None: another binary."""
        return _ran(self.binaries, launches)

    def with_binaries(self, binaries: Sequence[Binary]) -> BaselineEntry:
        """This entry with ``binaries`` (the latest first; those past MAX_BINARIES dropped).
        The unknown keys of a binary that becomes the latest join the entry's."""
        latest, *others = binaries[:MAX_BINARIES]
        return dataclasses.replace(
            self,
            kernels=latest.kernels,
            epoch=latest.epoch,
            anchor=latest.anchor,
            history=latest.history,
            others=tuple(others),
            extra={**self.extra, **latest.extra} if latest.extra else self.extra,
        )

    def extended(self, records: Sequence[SessionRecord]) -> BaselineEntry:
        """The latest binary's epoch with ``records`` appended (``Binary.extended``)."""
        return self.with_binaries((self.binary.extended(records), *self.others))

    def to_json(self) -> dict[str, Json]:
        return _with_fingerprint(encode(self), self.kernels)

    @classmethod
    def from_json(cls, data: Json, sessions: Mapping[str, SessionInfo]) -> BaselineEntry:
        """Raises ValueError saying what is wrong (the caller names the file and entry)."""
        if not isinstance(data, dict):
            raise ValueError("is not an object")
        if not isinstance(data.get("timer"), str) or not data["timer"]:
            raise ValueError("has no timer name")
        epoch, anchor, history, kernels = _binary_parts(data, sessions)
        samples = data.get("samples_ms", [])
        problem = samples_problem(samples, minimum=0) or fields_problem(data)
        if problem:
            raise ValueError(problem)
        raw_others = data.get("others", [])
        if not isinstance(raw_others, list) or len(raw_others) >= MAX_BINARIES:
            raise ValueError(f"has 'others' that are not a list of at most {MAX_BINARIES - 1}")
        others = []
        for i, other in enumerate(raw_others):
            if not isinstance(other, dict):
                raise ValueError(f"has others[{i}] that is not an object")
            try:
                others.append(Binary.from_json(other, sessions))
            except ValueError as exc:
                raise ValueError(f"has others[{i}] that {exc}") from None
        return cls(
            timer=data["timer"],
            epoch=epoch,
            anchor=anchor,
            history=history,
            samples_ms=tuple(map(float, samples)),
            kernels=kernels,
            group=data.get("group"),
            bytes=data.get("bytes"),
            flops=data.get("flops"),
            extra_info=data.get("extra_info"),
            note=data.get("note"),
            others=tuple(others),
            versus=None if data.get("versus") is None else Versus.from_json(data["versus"]),
            extra=unknown_keys(data, cls.KNOWN),
        )


def _ran(binaries: Sequence[Binary], launches: Sequence[Launch]) -> Binary | None:
    return next((b for b in binaries if b.runs(launches)), None)


@dataclass(frozen=True)
class Update:
    """What one run adds to one measurement's baseline."""

    key: str
    records: tuple[SessionRecord, ...]  # this run's sessions: the first, then confirmations
    new_epoch: bool  # an accepted change of its binary: that binary's history starts over
    latest: BaselineEntry  # timer, samples, kernels and annotations of this run

    @classmethod
    def of(cls, measurement: Measurement, new_epoch: bool) -> Update:
        """What saving ``measurement`` adds: its sessions, and what its latest session saw."""
        m = measurement
        latest = BaselineEntry(
            timer=m.timer,
            epoch=m.session,
            anchor=(),
            history=(),
            samples_ms=m.samples_ms,
            kernels=m.kernels,
            group=m.group,
            bytes=m.floors.bytes,
            flops=m.floors.flops,
            extra_info=dict(m.extra_info) or None,
            note=m.note or None,
            versus=m.versus,
        )
        return cls(m.key, m.sessions, new_epoch, latest)

    def apply(self, current: BaselineEntry | None) -> BaselineEntry:
        """``current`` with this run's sessions in the history of the binary they ran, that
        binary first. Launches that match no binary add one, its epoch started here
        (which saves may add one is the gate's to say: ``Gate.starts_epoch``); a new epoch
        starts that binary over; another timer starts the entry over."""
        launches = self.latest.kernels
        started = Binary.started(launches, self.records)
        latest = self.latest
        if current is not None and current.extra:  # a newer version's keys: kept
            latest = dataclasses.replace(latest, extra={**current.extra, **latest.extra})
        if current is None or current.timer != latest.timer:
            return latest.with_binaries([started])
        binaries = current.binaries
        ran = _ran(binaries, launches)
        others = [b for b in binaries if b is not ran]
        if ran is None:  # another binary: added
            saved = started
        elif self.new_epoch:  # an accepted change of this binary
            saved = Binary.started(launches or ran.kernels, self.records)
        else:  # its latest launches, unless this timer could not record them
            saved = dataclasses.replace(ran.extended(self.records), kernels=launches or ran.kernels)
        return latest.with_binaries([saved, *others])


def applied(
    entries: Mapping[str, BaselineEntry], updates: Iterable[Update]
) -> dict[str, BaselineEntry]:
    """``entries`` with ``updates`` applied in turn, as a save writes them."""
    result = dict(entries)
    for update in updates:
        result[update.key] = update.apply(result.get(update.key))
    return result


# Optional fields of an entry: how to tell a valid value, and what one looks like.
FIELDS: dict[str, tuple[Callable[[Json], bool], str]] = {
    **{
        name: (lambda value: is_number(value) and not sample_problem(value), "a time in ms")
        for name in ("median_ms", "mean_ms", "min_ms")
    },
    "iqr_ms": (at_least(0), "a non-negative number"),
    "noise": (at_least(0), "a non-negative number"),
    "bytes": (lambda value: at_least(0)(value) and value > 0, "a positive number"),
    "flops": (lambda value: at_least(0)(value) and value > 0, "a positive number"),
    "warmup": (whole(0), "a whole number"),
    "calls_per_sample": (whole(1), "a whole number of at least 1"),
    "group": (lambda value: isinstance(value, str), "a string"),
    "date": (lambda value: isinstance(value, str), "a string"),
    "note": (lambda value: isinstance(value, str), "a string"),
    "git_commit": (lambda value: value is None or isinstance(value, str), "a string or null"),
    "extra_info": (lambda value: isinstance(value, dict), "an object"),
}


def fields_problem(entry: Mapping[str, Json]) -> str:
    """What is wrong with the optional fields (FIELDS) of an entry, or '' if nothing."""
    for name, (valid, expected) in FIELDS.items():
        if name in entry and not valid(entry[name]):
            return f"has a {name!r} of {entry[name]!r:.60}, not {expected}"
    return ""


def samples_problem(samples: Json, minimum: int = 2) -> str:
    """'' if ``samples`` is a list of at least ``minimum`` valid times, else what is wrong."""
    # Set, min, max and sum run in C: a file of 40 000 entries of 400 samples loads in
    # seconds; only a bad list is walked in Python, to name the culprit. A NaN compares
    # false, so min and max may pass it by: the sum is NaN then (and no sum of samples in
    # bounds overflows).
    if not isinstance(samples, list) or not set(map(type, samples)) <= {int, float}:
        return "has a 'samples_ms' that is not a list of numbers"
    if len(samples) < minimum:
        return f"has fewer than {minimum} samples"
    if samples and not (
        MIN_SAMPLE_MS <= min(samples) <= max(samples) <= MAX_SAMPLE_MS
        and math.isfinite(sum(samples))
    ):
        problem = next(filter(None, map(sample_problem, samples)), "")
        return f"has a sample of {problem}"
    return ""
