"""Baseline files: per GPU model, each measurement's history of sessions (schema 2).

A file holds a table of the sessions that measured anything (date, commit, machine, software
versions) and, per measurement (a test's node id, ``#name`` for named ones), its timer, the
latest session's samples (for display) and one history per binary. A binary is what one
call launches (kernels and their counts, grid, block, registers, shared memory; its
``binary`` field is the short hash of that, ``core.kernels.fingerprint``): compiled and
autotuned code may choose another one per machine, and each binary keeps its own sessions,
so two machines' compile choices never mix into one spread. A binary's sessions are the
rolling ``history`` (at most 20) and the ``anchor`` (the first sessions of its epoch, at
most 5, never rolled out, so a slow creep is still seen). The binary of the latest saved
session is the entry's own ``kernels``, ``epoch``, ``anchor`` and ``history``, as in files
of one binary per entry; the others are in ``others``, the most recently saved first. An
entry keeps at most 4 binaries (MAX_BINARIES): the least recently saved is dropped. A
measurement without launch records (the CPU ``wall`` timer) has one binary, and a binary
whose launches were not recorded matches any launches.

A saved session joins the history of the binary it ran; launches that match no binary add
one (its epoch starts there). An epoch also starts when a measurement is first saved and
whenever a confirmed change is accepted (a save over a regression or an improvement of its
binary); another timer starts the entry over. Release 0.2 reads such a file as its
latest binary and drops the others when it saves.

Reads tolerate nothing silently: a damaged file raises BaselineError naming the problem and
is never overwritten; a session dated other than in ISO 8601 is damage. A history or anchor
longer than a save keeps (a merged, hand-edited or old file) is read trimmed to what a save
keeps, said in one line (``Baseline.notes``), and the next save writes it so: every reader
and judge sees at most HISTORY_SESSIONS sessions of a binary. Schema 1 files are read as
one session per entry and rewritten as schema 2 by the next save. Saves hold a lock file
next to the baseline, re-read it and apply this run's updates to what is there now
(concurrent savers keep each other's work), skip the write when nothing changed, and write
atomically. Output is deterministic and diff-friendly:
sorted keys, one session record or launch per line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import json
import math
import operator
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.device import VERSION_FIELDS
from ..core.errors import BaselineError, StorageError
from ..core.jsondata import Json
from ..core.kernels import Launch, fingerprint, same_binary
from ..core.records import (
    NO_EXTRA,
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
    with_extra,
)
from ..core.samples import MAX_SAMPLE_MS, MIN_SAMPLE_MS, sample_problem
from . import files as storage
from .runs import RUNS

SCHEMA = "pytest-gpubench/2"
SCHEMA_V1 = "pytest-gpubench/1"
REMEDY = "fix it, restore it from version control, or delete it and re-run with --gpubench-save"
WHAT = "baseline file"
# 10^5 tests of twenty sessions take about 300 MB and 2.1 GB of memory to show
# (bench/show_cost.py): far larger is no baseline of ours, and would take gigabytes to read.
MAX_BYTES = 512 << 20
# A save takes seconds even for tens of thousands of entries; a lock held this long is stuck.
LOCK_TIMEOUT_S = 120.0
# Written into a baseline directory of its own, so `git add .gpubench` never commits these.
GITIGNORE = "# pytest-gpubench: temporary and lock files of baseline saves\n*.tmp\n*.lock\n"
# A dict of plain values with at most this many keys is written on one line.
ONE_LINE_KEYS = 10
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
    medians = map(operator.attrgetter("median_ms"), history)
    return reference_of_logs(list(map(math.log, medians)))


def reference_of_logs(logs: Sequence[float]) -> float:
    """:func:`reference_ms` of a history whose medians' logs were taken already."""
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
        return cls(
            kernels,
            epoch=records[0].session,
            anchor=tuple(records[:ANCHOR_SESSIONS]),
            history=tuple(records[-HISTORY_SESSIONS:]),
        )

    def to_json(self) -> dict[str, Json]:
        data: dict[str, Json] = {
            "epoch": self.epoch,
            "anchor": [r.to_json() for r in self.anchor],
            "history": [r.to_json() for r in self.history],
            "kernels": [k.to_dict() for k in self.kernels],
        }
        if self.kernels:
            data["binary"] = self.fingerprint  # for a reader: derived, not read back
        return with_extra(data, self.extra)

    @classmethod
    def from_json(cls, data: Mapping[str, Json], sessions: Mapping[str, SessionInfo]) -> Binary:
        """Raises ValueError saying what is wrong."""
        epoch, anchor, history, kernels = _binary_parts(data, sessions)
        return cls(kernels, epoch, anchor, history, unknown_keys(data, cls.KNOWN))


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
    samples_ms: tuple[float, ...] = ()  # the latest session's samples, for display
    kernels: tuple[Launch, ...] = ()  # what one call of the latest session launched
    group: str | None = None
    bytes: float | None = None
    flops: float | None = None
    extra_info: dict[str, Json] | None = None
    note: str | None = None
    others: tuple[Binary, ...] = ()  # its other binaries, the most recently saved first
    versus: Versus | None = None  # a ratio to a reference: what its latest session compared
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
        data: dict[str, Json] = {
            "timer": self.timer,
            **self.binary.to_json(),
            "samples_ms": [rounded(s) for s in self.samples_ms],
        }
        if self.others:
            data["others"] = [b.to_json() for b in self.others]
        optional = {
            "group": self.group,
            "bytes": self.bytes,
            "flops": self.flops,
            "extra_info": self.extra_info or None,
            "note": self.note or None,
            "versus": None if self.versus is None else self.versus.to_json(),
        }
        data.update({k: v for k, v in optional.items() if v is not None})
        return with_extra(data, self.extra)

    @classmethod
    def from_json(cls, data: Json, sessions: Mapping[str, SessionInfo]) -> BaselineEntry:
        """Raises ValueError saying what is wrong (the caller names the file and entry)."""
        if not isinstance(data, dict):
            raise ValueError("is not an object")
        if not isinstance(data.get("timer"), str) or not data["timer"]:
            raise ValueError("has no timer name")
        epoch, anchor, history, kernels = _binary_parts(data, sessions)
        samples = data.get("samples_ms", [])
        problem = samples_problem(samples, minimum=0)
        if problem:
            raise ValueError(problem)
        for name, (valid, expected) in FIELDS.items():
            if name in data and not valid(data[name]):
                raise ValueError(f"has a {name!r} of {data[name]!r:.60}, not {expected}")
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
            bytes=m.bytes,
            flops=m.flops,
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


@dataclass
class Baseline:
    path: Path
    device: dict[str, Json] = field(default_factory=dict)  # fingerprint of the latest save
    sessions: dict[str, SessionInfo] = field(default_factory=dict)
    entries: dict[str, BaselineEntry] = field(default_factory=dict)
    exists: bool = False
    schema: str = SCHEMA
    # Top-level keys of a newer version: written back by a save.
    extra: Mapping[str, Json] = field(default_factory=no_extra)
    # What the read left out, a line each (longer histories than a save keeps): for the user.
    notes: tuple[str, ...] = ()

    def latest_versions(self, now: datetime.datetime | None = None) -> Mapping[str, str | None]:
        """Software versions of the most recent session in the file. A session dated after
        ``now`` (and a day of clock skew) or not dated in ISO 8601 is not a candidate: it
        would be the most recent forever."""
        limit = (now or datetime.datetime.now(datetime.timezone.utc)) + CLOCK_SKEW
        dated = []
        for info in self.sessions.values():
            when = _instant(info.date)
            if when is not None and when <= limit:
                dated.append((when, info))
        if not dated:
            return {}
        return max(dated, key=lambda pair: pair[0])[1].versions


# The date of a session whose date is not known (a schema 1 entry's, converted).
UNKNOWN_DATE = "unknown"
# How far in the future a session's date may be and still count as a date (clocks differ).
CLOCK_SKEW = datetime.timedelta(days=1)


def _instant(date: str) -> datetime.datetime | None:
    """An ISO 8601 date as an aware instant (a date without an offset is UTC); None if it
    is not one."""
    try:
        when = datetime.datetime.fromisoformat(date)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=datetime.timezone.utc)


def date_problem(date: str) -> str:
    """'' where ``date`` is a session's date (ISO 8601, or "unknown": a schema 1 entry's
    without one), else what is wrong."""
    if date == UNKNOWN_DATE or _instant(date) is not None:
        return ""
    return f"has a 'date' of {date!r:.60}, not an ISO 8601 date such as 2026-01-02T03:04:05+00:00"


def path_for(directory: Path, device_key: str) -> Path:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", device_key):
        raise ValueError(f"unsafe device key {device_key!r}")
    return directory / f"{device_key}.json"


def load(path: Path) -> Baseline:
    """The baseline at ``path``; an empty one if the file does not exist."""
    _check_directory(path.parent)
    try:
        text = storage.read_text(path, WHAT, MAX_BYTES)
        if text is None:
            return Baseline(path)
        data = storage.parse_json(text, f"{WHAT} {path}")
        del text  # not held while the records are made: a file may be hundreds of MB
    except StorageError as exc:
        raise BaselineError(f"{exc}; {REMEDY}") from None
    try:
        return _from_document(path, data)
    except OverflowError:  # a whole number no float holds, where a time or a size should be
        raise BaselineError(f"{WHAT} {path} has a number too large for a float; {REMEDY}") from None
    except ValueError as exc:
        raise BaselineError(f"{WHAT} {path} {exc}; {REMEDY}") from None


def _from_document(path: Path, data: Json) -> Baseline:
    if not isinstance(data, dict):
        what = "an array" if isinstance(data, list) else f"the bare value {json.dumps(data)[:40]}"
        raise ValueError(f"is {what}, not a JSON object")
    if data.get("schema") not in (SCHEMA, SCHEMA_V1):
        raise ValueError(f"has schema {data.get('schema')!r}, expected {SCHEMA!r}")
    if "benchmarks" not in data:
        raise ValueError("lacks a 'benchmarks' object")
    if not isinstance(data["benchmarks"], dict):
        raise ValueError("has a 'benchmarks' that is not an object")
    device = data.get("device", {})
    if not isinstance(device, dict):
        raise ValueError("has a 'device' that is not an object")
    if data["schema"] == SCHEMA_V1:
        return _from_schema_1(path, device, data["benchmarks"])
    raw_sessions = data.get("sessions")
    if not isinstance(raw_sessions, dict):
        raise ValueError("has no 'sessions' object")
    sessions = {}
    for key, info in raw_sessions.items():
        try:
            sessions[key] = SessionInfo.from_json(info)
            problem = date_problem(sessions[key].date)
            if problem:
                raise ValueError(problem)
        except ValueError as exc:
            raise ValueError(f"has a session {key!r:.60} that {exc}") from None
    entries = {}
    for key, entry in data["benchmarks"].items():
        try:
            entries[key] = BaselineEntry.from_json(entry, sessions)
        except ValueError as exc:
            raise ValueError(f"has an entry {key!r:.200} that {exc}") from None
    extra = unknown_keys(data, TOP_LEVEL)
    entries, notes = _trimmed(path, entries)
    return Baseline(path, device, sessions, entries, exists=True, extra=extra, notes=notes)


def _trimmed(
    path: Path, entries: dict[str, BaselineEntry]
) -> tuple[dict[str, BaselineEntry], tuple[str, ...]]:
    """``entries`` with each binary's history and anchor cut to what a save keeps (the
    latest HISTORY_SESSIONS, the first ANCHOR_SESSIONS), and a line saying so where any was
    longer: the judges' time grows with a history's length (issue 46)."""
    long = {
        key: max(len(b.history) for b in entry.binaries)
        for key, entry in entries.items()
        if any(
            len(b.history) > HISTORY_SESSIONS or len(b.anchor) > ANCHOR_SESSIONS
            for b in entry.binaries
        )
    }
    if not long:
        return entries, ()
    trimmed = dict(entries)
    for key in long:
        entry = entries[key]
        trimmed[key] = entry.with_binaries([b.trimmed() for b in entry.binaries])
    first = min(long)
    others = f" and {len(long) - 1} more" if len(long) > 1 else ""
    return trimmed, (
        f"{WHAT} {path}: {first!r:.200}{others} kept more sessions than a save keeps "
        f"({long[first]} in its history): read as the latest {HISTORY_SESSIONS} (and the first "
        f"{ANCHOR_SESSIONS} as its anchor); the next --gpubench-save writes them so",
    )


# The top-level keys of a schema 2 file; others are a newer version's, kept by a save.
TOP_LEVEL = frozenset(("schema", "device", "sessions", "benchmarks"))


def _from_schema_1(path: Path, device: dict[str, Json], raw: dict[str, Json]) -> Baseline:
    """A schema 1 file as schema 2: each entry's samples become one session of its history."""
    versions = {key: _text(device.get(key)) for key in VERSION_FIELDS}
    sessions: dict[str, SessionInfo] = {}
    entries: dict[str, BaselineEntry] = {}
    for key, entry in raw.items():
        problem = v1_entry_problem(entry)
        if problem:
            raise ValueError(f"has an entry {key!r:.200} that {problem}")
        date = entry.get("date") or UNKNOWN_DATE
        if _instant(date) is None:  # a schema 1 file held any string
            date = UNKNOWN_DATE
        session = f"v1-{date}"
        sessions.setdefault(session, SessionInfo(date, entry.get("git_commit"), None, versions))
        record = SessionRecord.of(session, entry["samples_ms"], entry.get("calls_per_sample", 1))
        entries[key] = BaselineEntry(
            timer=entry["timer"],
            epoch=session,
            anchor=(record,),
            history=(record,),
            samples_ms=tuple(entry["samples_ms"]),
            group=entry.get("group"),
            bytes=entry.get("bytes"),
            flops=entry.get("flops"),
            extra_info=entry.get("extra_info"),
            note=entry.get("note"),
        )
    return Baseline(path, device, sessions, entries, exists=True, schema=SCHEMA_V1)


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


def v1_entry_problem(entry: Json) -> str:
    """What is wrong with one schema 1 entry, or '' if nothing."""
    if not isinstance(entry, dict):
        return "is not an object"
    if not isinstance(entry.get("timer"), str) or not entry["timer"]:
        return "has no timer name"
    if entry.get("samples_ms") is None:
        return "has no 'samples_ms'"
    problem = samples_problem(entry["samples_ms"])
    if problem:
        return problem
    for name, (valid, expected) in FIELDS.items():
        if name in entry and not valid(entry[name]):
            return f"has a {name!r} of {entry[name]!r:.60}, not {expected}"
    return ""


def save(
    baseline: Baseline,
    device: Mapping[str, Json],
    sessions: Mapping[str, SessionInfo],
    updates: Iterable[Update],
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> bool:
    """Apply ``updates`` to the file as it is on disk now; return whether it was written.

    Under the lock, so that two processes saving at once keep each other's work. Nothing
    measured means nothing written: not even a new fingerprint, which would label the old
    entries with software they were not recorded with.
    """
    updates = list(updates)
    if not updates:
        return False
    path = baseline.path
    _make_directory(path.parent)
    with storage.lock(path, WHAT, lock_timeout_s):
        current = load(path)  # other processes may have saved since this session read it
        entries = dict(current.entries)
        for update in updates:
            entries[update.key] = update.apply(entries.get(update.key))
        # A session the file has already is the file's (with any keys of a newer version).
        table = used_sessions({**sessions, **current.sessions}, entries)
        for key, info in table.items():  # what a read refuses is never written
            if date_problem(info.date):
                raise BaselineError(f"session {key!r:.60} {date_problem(info.date)}: not saved")
        storage.remove_stale_temporaries(path)
        text = dumps(document(device, table, entries, current.extra))
        storage.write_atomic(path, text, WHAT)
        _ignore_temporaries(path.parent)
    baseline.device, baseline.sessions, baseline.entries = dict(device), table, entries
    baseline.extra = current.extra
    baseline.exists, baseline.schema = True, SCHEMA
    return True


def used_sessions(
    sessions: Mapping[str, SessionInfo], entries: Mapping[str, BaselineEntry]
) -> dict[str, SessionInfo]:
    """The sessions of the table that ``entries`` refer to (others rolled out)."""
    used = {r.session for e in entries.values() for b in e.binaries for r in b.anchor + b.history}
    return {k: v for k, v in sessions.items() if k in used}


def document(
    device: Mapping[str, Json],
    sessions: Mapping[str, SessionInfo],
    entries: Mapping[str, BaselineEntry],
    extra: Mapping[str, Json] = NO_EXTRA,
) -> dict[str, Json]:
    """The JSON document of a baseline file (its sessions: those ``entries`` refer to;
    ``extra``: the top-level keys of a newer version, kept)."""
    data: dict[str, Json] = {
        "schema": SCHEMA,
        "device": dict(device),
        "sessions": {k: v.to_json() for k, v in used_sessions(sessions, entries).items()},
        "benchmarks": {k: e.to_json() for k, e in entries.items()},
    }
    return with_extra(data, extra)


_ENCODER = json.JSONEncoder(allow_nan=False)  # one encoder: json.dumps builds one per call


def dumps(document: Json) -> str:
    """Indented, key-sorted JSON; a list of plain values, and a small object of plain values
    (a session record, a launch), on one line.

    Composed of ``json.dumps`` fragments, structure by structure, so every string (NUL,
    quotes, lone surrogates) round-trips, and the time is linear in the size."""
    return _dump(document, "") + "\n"


def _dump(value: Json, indent: str) -> str:
    inner = indent + "  "
    if isinstance(value, dict) and value:
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {key!r:.60}")
        if len(value) <= ONE_LINE_KEYS and not any(
            isinstance(v, dict) or (isinstance(v, list) and _has_containers(v))
            for v in value.values()
        ):
            return _ENCODER.encode(dict(sorted(value.items())))
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and _has_containers(value):
        return (
            "[\n" + ",\n".join(inner + _dump(item, inner) for item in value) + "\n" + indent + "]"
        )
    return _ENCODER.encode(value)


def _has_containers(items: list[Json]) -> bool:
    return not storage.CONTAINERS.isdisjoint(map(type, items))  # C speed


def _text(value: Json) -> str | None:
    return None if value is None else str(value)


def _check_directory(directory: Path) -> None:
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise BaselineError(
            f"baseline directory {directory} is a file, not a directory; point --gpubench-dir "
            "(or ini gpubench_dir) at a directory"
        )


def _make_directory(directory: Path) -> None:
    _check_directory(directory)
    storage.make_directory(
        directory, "baseline directory", "choose another --gpubench-dir (or ini gpubench_dir)"
    )


def _ignore_temporaries(directory: Path) -> None:
    """Give a directory of baselines only (no other files) a .gitignore for our temporary
    and lock files, unless it has one. A convenience: failing to write it fails nothing."""
    ignore = directory / ".gitignore"
    with contextlib.suppress(OSError, StorageError):
        names = os.listdir(directory)
        ours = (".json", ".lock")
        if not os.path.lexists(ignore) and all(n.endswith(ours) or n == RUNS for n in names):
            storage.write_atomic(ignore, GITIGNORE, "ignore file")
