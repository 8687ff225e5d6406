"""Unit tests of store/baseline.py: damaged files, atomic merging writes, stable output.

Schema 2's history (anchor, rolling history, epochs, the table of sessions) is tested in
tests/plugin/test_history.py; this file covers reading, validating and writing files.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_gpubench.core.baseline import (
    ANCHOR_SESSIONS,
    HISTORY_SESSIONS,
    MAX_BINARIES,
    BaselineEntry,
    Binary,
    Update,
)
from pytest_gpubench.core.errors import BaselineError, GpubenchError
from pytest_gpubench.core.kernels import Launch, fingerprint
from pytest_gpubench.core.records import (
    SessionInfo,
    SessionRecord,
    SessionSummary,
)
from pytest_gpubench.store import baseline as store
from pytest_gpubench.store.baseline import (
    REMEDY,
    SCHEMA,
    SCHEMA_V1,
    Baseline,
    dumps,
    load,
    path_for,
    save,
)

FINGERPRINT = {"name": "Fake GPU", "torch": "2.13.0", "python": "3.11.0"}
S1, S2 = "20260101T000000Z-000001", "20260102T000000Z-000002"
INFO = SessionInfo(
    "2026-01-01T00:00:00+00:00", "abc123", "host-x", {"torch": "2.13.0", "python": "3.11.0"}
)
INFO2 = SessionInfo("2026-01-02T00:00:00+00:00", "def456", "host-x", {"torch": "2.13.0"})


def record(median_ms: float = 1.0, session: str = S1) -> SessionRecord:
    return SessionRecord(session, median_ms, 20, 0.001, 1)


def stored(
    *medians: float, session: str = S1, samples: tuple[float, ...] = (1.0, 1.1, 0.9), **extra: Any
) -> BaselineEntry:
    """An entry of one epoch started by ``session``, one session record per median."""
    records = tuple(record(m, session) for m in medians or (1.0,))
    return BaselineEntry(
        timer=extra.pop("timer", "fake"),
        epoch=session,
        anchor=records[:5],
        history=records[-20:],
        samples_ms=samples,
        **extra,
    )


def raw(**fields: Any) -> dict[str, Any]:
    """A schema 2 entry as the file holds it, with ``fields`` replaced."""
    return stored().to_json() | fields


def document(sessions: dict[str, Any] | None = None, **entries: Any) -> dict[str, Any]:
    table = {S1: INFO.to_json()} if sessions is None else sessions
    return {"schema": SCHEMA, "device": FINGERPRINT, "sessions": table, "benchmarks": entries}


def update(
    key: str, median_ms: float = 1.0, session: str = S1, new_epoch: bool = False, **extra: Any
) -> Update:
    latest = BaselineEntry(
        timer=extra.pop("timer", "fake"),
        epoch=session,
        anchor=(),
        history=(),
        samples_ms=extra.pop("samples", (median_ms, median_ms)),
        **extra,
    )
    return Update(key, (record(median_ms, session),), new_epoch, latest)


def saving(base: Baseline, *updates: Update, device: dict[str, Any] = FINGERPRINT) -> bool:
    return save(base, device, {S1: INFO, S2: INFO2}, updates)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / ".gpubench" / "cpu-fake.json"


def write(path: Path, content: str | bytes) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    return data


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- file names -----------------------------------------------------------------------------


def test_path_for_is_inside_the_directory(tmp_path: Path) -> None:
    assert path_for(tmp_path, "sm90-nvidia-h100-80gb-hbm3") == (
        tmp_path / "sm90-nvidia-h100-80gb-hbm3.json"
    )


@pytest.mark.parametrize("key", ["", "../x", "a/b", "-a", "Upper", "a.b", "a b", "/etc/passwd"])
def test_path_for_refuses_keys_that_could_escape_or_surprise(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="unsafe device key"):
        path_for(tmp_path, key)


# --- loading --------------------------------------------------------------------------------


def test_a_missing_file_is_an_empty_baseline(path: Path) -> None:
    base = load(path)
    assert base == Baseline(path)
    assert (base.exists, base.entries, base.device, base.sessions) == (False, {}, {}, {})
    assert base.schema == SCHEMA
    assert not path.parent.exists()


def test_a_valid_file_loads(path: Path) -> None:
    kernels = [Launch("k", grid=(64, 1, 1), block=(128, 1, 1), share=1.0).to_dict()]
    b = raw(samples_ms=[2.0, 2.1], kernels=kernels, group="g", bytes=1e9, note="n")
    sessions = {S1: INFO.to_json(), S2: INFO2.to_json()}
    b["history"] = [record(1.0).to_json(), record(2.0, S2).to_json()]
    write(path, dumps(document(sessions, **{"t.py::test_a": raw(), "t.py::test_b#x": b})))
    base = load(path)
    assert base.exists and base.schema == SCHEMA
    assert base.device == FINGERPRINT
    assert base.sessions == {S1: INFO, S2: INFO2}
    assert sorted(base.entries) == ["t.py::test_a", "t.py::test_b#x"]
    assert base.entries["t.py::test_a"] == stored()
    entry = base.entries["t.py::test_b#x"]
    assert entry.samples_ms == (2.0, 2.1)
    assert entry.history == (record(1.0), record(2.0, S2))
    assert entry.anchor == (record(1.0),)
    assert entry.kernels == (Launch("k", grid=(64, 1, 1), block=(128, 1, 1), share=1.0),)
    assert (entry.group, entry.bytes, entry.note, entry.flops) == ("g", 1e9, "n", None)
    # the reference time is the geometric mean of the history's session medians
    assert entry.median_ms == pytest.approx(2**0.5)
    assert base.latest_versions() == INFO2.versions  # of the latest session by date


def test_a_session_dated_in_the_future_or_undated_is_never_the_latest() -> None:
    """Issue 19: a session dated years ahead (a clock gone wrong, a hand edit) would rule the
    versions every later session is compared with, forever."""
    now = datetime.datetime(2026, 11, 27, tzinfo=datetime.timezone.utc)
    future = SessionInfo("2031-01-01T00:00:00+00:00", versions={"torch": "9.9"})
    garbage = SessionInfo("not a date", versions={"torch": "0.1"})
    naive = SessionInfo("2026-01-03T00:00:00", versions={"torch": "2.14.0"})  # read as UTC
    base = Baseline(Path("x.json"), sessions={"f": future, "g": garbage, S1: INFO, S2: INFO2})
    assert base.latest_versions(now) == INFO2.versions
    base.sessions["n"] = naive
    assert base.latest_versions(now) == naive.versions
    # a few hours ahead is a clock's skew, not a date gone wrong
    skewed = SessionInfo("2026-11-27T05:00:00+00:00", versions={"torch": "2.15.0"})
    base.sessions["s"] = skewed
    assert base.latest_versions(now) == skewed.versions
    assert Baseline(Path("x.json"), sessions={"f": future}).latest_versions(now) == {}


def test_a_file_without_device_loads_with_an_empty_fingerprint(path: Path) -> None:
    write(path, json.dumps({"schema": SCHEMA, "sessions": {}, "benchmarks": {}}))
    base = load(path)
    assert (base.device, base.sessions, base.entries) == ({}, {}, {})
    assert base.latest_versions() == {}


def session_record(**fields: Any) -> dict[str, Any]:
    return record().to_json() | fields


VALID = dumps(document(**{"t.py::test_a": raw()}))
DAMAGED = [
    ("{", "is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
    ("", "is not valid JSON (Expecting value at line 1)"),
    (VALID[: len(VALID) // 2], "is not valid JSON"),
    ("not json at all\n", "is not valid JSON (Expecting value at line 1)"),
    (
        json.dumps({"machine_info": {}, "benchmarks": []}),
        f"has schema None, expected {SCHEMA!r}",
    ),
    (
        json.dumps({"schema": "pytest-gpubench/3", "sessions": {}, "benchmarks": {}}),
        f"has schema 'pytest-gpubench/3', expected {SCHEMA!r}",
    ),
    ("[1, 2]", "is an array, not a JSON object"),
    # a bare value read as a document crashed every reader (issue 19)
    ("5", "is the bare value 5, not a JSON object"),
    ("null", "is the bare value null, not a JSON object"),
    ("true", "is the bare value true, not a JSON object"),
    ('"text"', 'is the bare value "text", not a JSON object'),
    # one of two values would be dropped unsaid
    ('{"schema": "a", "schema": "b"}', "is not valid JSON (the key 'schema' appears twice"),
    (json.dumps({"schema": SCHEMA, "sessions": {}}), "lacks a 'benchmarks' object"),
    (
        json.dumps({"schema": SCHEMA, "sessions": {}, "benchmarks": []}),
        "has a 'benchmarks' that is not an object",
    ),
    (
        json.dumps({"schema": SCHEMA, "device": "x", "sessions": {}, "benchmarks": {}}),
        "has a 'device' that is not an object",
    ),
    (
        json.dumps({"schema": SCHEMA, "device": None, "sessions": {}, "benchmarks": {}}),
        "has a 'device' that is not an object",
    ),
    (json.dumps({"schema": SCHEMA, "benchmarks": {}}), "has no 'sessions' object"),
    (
        json.dumps({"schema": SCHEMA, "sessions": [], "benchmarks": {}}),
        "has no 'sessions' object",
    ),
    # the table of sessions
    (
        json.dumps(document({"s": "2026"})),
        "has a session 's' that is not an object with a 'date' string",
    ),
    (
        json.dumps(document({"s": {"date": 1}})),
        "has a session 's' that is not an object with a 'date' string",
    ),
    (
        json.dumps(document({"s": {"date": "d", "versions": {"torch": 2}}})),
        "has a session 's' that has 'versions' that are not an object of strings",
    ),
    (
        json.dumps(document({"s": {"date": "d", "commit": 5}})),
        "has a session 's' that has a 'commit' that is not a string",
    ),
    (
        json.dumps(document({"s": {"date": "d", "machine": ["m"]}})),
        "has a session 's' that has a 'machine' that is not a string",
    ),
    # entries
    (json.dumps(document(t=[1.0, 2.0])), "has an entry 't' that is not an object"),
    (json.dumps(document(t=raw() | {"timer": ""})), "has an entry 't' that has no timer name"),
    (json.dumps(document(t=raw() | {"timer": 3})), "has an entry 't' that has no timer name"),
    (json.dumps(document(t=raw(epoch=None))), "has an entry 't' that has no 'epoch' string"),
    (
        json.dumps(document(t=raw(history=[]))),
        "has an entry 't' that has no 'history' list of session records",
    ),
    (
        json.dumps(document(t=raw(anchor={}))),
        "has an entry 't' that has no 'anchor' list of session records",
    ),
    (
        json.dumps(document(t=raw(history=[1.0]))),
        "has an entry 't' that has a session record that is not an object with a 'session'",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(median_ms="abc")]))),
        "has an entry 't' that has a session median of 'abc', not a time in ms",
    ),
    (
        json.dumps(document(t=raw(anchor=[session_record(median_ms=-1)]))),
        "has an entry 't' that has a session median of -1, not a time in ms",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(median_ms=1e308)]))),
        "has an entry 't' that has a session median of 1e+308, not a time in ms",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(median_ms=[1])]))),
        "has an entry 't' that has a session median of [1], not a time in ms",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(n=0)]))),
        "has an entry 't' that has a session record whose 'n' or 'calls_per_sample' is no count",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(calls_per_sample=True)]))),
        "has an entry 't' that has a session record whose 'n' or 'calls_per_sample' is no count",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(se_log=-0.1)]))),
        "has an entry 't' that has a session 'se_log' of -0.1, not a number >= 0",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(session="elsewhere")]))),
        "has an entry 't' that refers to session 'elsewhere', not in 'sessions'",
    ),
    (
        json.dumps(document(t=raw(anchor=[session_record(session="elsewhere")]))),
        "has an entry 't' that refers to session 'elsewhere', not in 'sessions'",
    ),
    (
        json.dumps(document(t=raw(samples_ms="1,2,3"))),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, "2"]))),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, True]))),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, -1.0]))),
        "entry 't' that has a sample of -1.0 ms, not a time between 1e-09 and 1e+06 ms",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, 0]))),
        "entry 't' that has a sample of 0 ms, not a time between 1e-09 and 1e+06 ms",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, 5e-324]))),
        "entry 't' that has a sample of 5e-324 ms, not a time between",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, 1e308]))),
        "entry 't' that has a sample of 1e+308 ms, not a time between",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, float("nan")]))),
        "is not valid JSON (NaN is not a JSON number)",
    ),
    (
        json.dumps(document(t=raw(samples_ms=[1.0, float("inf")]))),
        "is not valid JSON (Infinity is not a JSON number)",
    ),
    (
        json.dumps(document(t=raw(history=[session_record(se_log=float("inf"))]))),
        "is not valid JSON (Infinity is not a JSON number)",
    ),
    (json.dumps(document(t=raw(kernels={}))), "has an entry 't' that has 'kernels' that are not"),
    (
        json.dumps(document(t=raw(kernels=[1]))),
        "has an entry 't' that has a kernel entry 0 that is malformed: it has no name",
    ),
    (
        json.dumps(document(t=raw(kernels=[{"name": "k", "grid": [1, 2]}]))),
        "has an entry 't' that has a kernel entry 0 that is malformed: expected three "
        "dimensions, got [1, 2]",
    ),
    (json.dumps(document(t=raw(median_ms="abc"))), "has a 'median_ms' of 'abc', not a time"),
    (json.dumps(document(t=raw(bytes=0))), "has a 'bytes' of 0, not a positive number"),
    (json.dumps(document(t=raw(flops=True))), "has a 'flops' of True, not a positive number"),
    (json.dumps(document(t=raw(group=5))), "has a 'group' of 5, not a string"),
    (json.dumps(document(t=raw(note=[]))), "has a 'note' of [], not a string"),
    (json.dumps(document(t=raw(extra_info=[1]))), "has a 'extra_info' of [1], not an object"),
    ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be read as JSON"),
    ("[" * 100 + "]" * 100, "is nested deeper than 64 levels"),
]


def assert_refused(path: Path, content: str | bytes, problem: str) -> None:
    before = write(path, content)
    with pytest.raises(BaselineError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"baseline file {path}")
    assert problem in message
    assert message.endswith(f"; {REMEDY}")
    assert "\n" not in message
    assert path.read_bytes() == before
    assert files_in(path.parent) == [path.name]


@pytest.mark.parametrize("content, problem", DAMAGED)
def test_a_damaged_file_raises_and_is_left_byte_identical(
    path: Path, content: str, problem: str
) -> None:
    assert_refused(path, content, problem)


@pytest.mark.parametrize("share", [[1], None, {}], ids=["list", "null", "object"])
def test_a_kernel_share_that_is_no_number_is_refused_with_one_line(
    path: Path, share: object
) -> None:
    content = json.dumps(document(t=raw(kernels=[{"name": "k", "share": share}])))
    assert_refused(path, content, "has an entry 't' that ")


def test_an_unreadable_file_raises_with_the_reason(path: Path) -> None:
    before = write(path, b"\xff\xfe\x00garbage")
    with pytest.raises(BaselineError) as info:
        load(path)
    assert str(info.value).startswith(f"baseline file {path} is not UTF-8 text (byte 0: ")
    assert str(info.value).endswith(REMEDY)
    assert path.read_bytes() == before


def test_a_directory_in_place_of_the_file_raises(path: Path) -> None:
    path.mkdir(parents=True)
    with pytest.raises(BaselineError, match="is a directory, not a regular file"):
        load(path)


def test_baseline_errors_are_gpubench_errors() -> None:
    assert issubclass(BaselineError, GpubenchError)


# --- schema 1 -------------------------------------------------------------------------------


def v1_entry(*samples: float, **fields: Any) -> dict[str, Any]:
    return {"timer": "fake", "samples_ms": list(samples or (1.0, 1.1, 0.9)), **fields}


def v1_document(**entries: Any) -> dict[str, Any]:
    return {"schema": SCHEMA_V1, "device": FINGERPRINT, "benchmarks": entries}


# Everything release 0.1 wrote into an entry.
V1_WRITTEN = v1_entry(
    median_ms=1.0,
    mean_ms=1.0,
    min_ms=0.9,
    iqr_ms=0.0,
    noise=0.0,
    warmup=0,
    calls_per_sample=3,
    date="2026-11-21T22:29:29+00:00",
    git_commit=None,
    group="g",
    bytes=1e9,
    flops=2,
    extra_info={"a": [1]},
    note="n",
)


def test_a_schema_1_file_loads_as_one_session_per_entry(path: Path) -> None:
    write(path, json.dumps(v1_document(**{"t.py::test_a": V1_WRITTEN, "t.py::test_b": v1_entry()})))
    base = load(path)
    assert base.exists and base.schema == SCHEMA_V1
    assert base.device == FINGERPRINT
    dated = "v1-2026-11-21T22:29:29+00:00"
    versions = {"driver": None, "cuda": None, "torch": "2.13.0", "triton": None, "python": "3.11.0"}
    assert base.sessions == {
        dated: SessionInfo("2026-11-21T22:29:29+00:00", None, None, versions),
        "v1-unknown": SessionInfo("unknown", None, None, versions),
    }
    a = base.entries["t.py::test_a"]
    summary = SessionSummary.from_samples([1.0, 1.1, 0.9])
    assert a.history == a.anchor == (SessionRecord(dated, summary.median_ms, 3, summary.se_log, 3),)
    assert (a.timer, a.epoch, a.samples_ms) == ("fake", dated, (1.0, 1.1, 0.9))
    assert (a.group, a.bytes, a.flops, a.extra_info, a.note) == ("g", 1e9, 2, {"a": [1]}, "n")
    assert a.median_ms == pytest.approx(1.0)
    b = base.entries["t.py::test_b"]
    assert b.epoch == "v1-unknown" and b.history[0].calls_per_sample == 1


def test_a_schema_1_entry_of_identical_samples_has_a_known_within_session_error(
    path: Path,
) -> None:
    write(path, json.dumps(v1_document(t=v1_entry(2.0, 2.0, 2.0))))
    [rec] = load(path).entries["t"].history
    assert (rec.median_ms, rec.n, rec.se_log) == (2.0, 3, 0.0)


V1_DAMAGED = [
    (v1_document(t=[1.0, 2.0]), "has an entry 't' that is not an object"),
    (v1_document(t={"samples_ms": [1.0, 2.0]}), "entry 't' that has no timer name"),
    (v1_document(t={"timer": 3, "samples_ms": [1, 2]}), "that has no timer name"),
    (v1_document(t={"timer": "wall"}), "entry 't' that has no 'samples_ms'"),
    (v1_document(t=v1_entry(1.0)), "has fewer than 2 samples"),
    (
        v1_document(t=v1_entry() | {"samples_ms": "1,2,3"}),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        v1_document(t=v1_entry(1.0, -1.0)),
        "entry 't' that has a sample of -1.0 ms, not a time between 1e-09 and 1e+06 ms",
    ),
    (v1_document(t=v1_entry(median_ms="abc")), "has a 'median_ms' of 'abc', not a time in ms"),
    (v1_document(t=v1_entry(median_ms=[1])), "has a 'median_ms' of [1], not a time in ms"),
    (v1_document(t=v1_entry(median_ms=-1)), "has a 'median_ms' of -1, not a time in ms"),
    (v1_document(t=v1_entry(median_ms=1e308)), "has a 'median_ms' of 1e+308, not a time"),
    (v1_document(t=v1_entry(bytes=0)), "has a 'bytes' of 0, not a positive number"),
    (v1_document(t=v1_entry(group=5)), "has a 'group' of 5, not a string"),
    (v1_document(t=v1_entry(warmup=-1)), "has a 'warmup' of -1, not a whole number"),
    (v1_document(t=v1_entry(date=5)), "has a 'date' of 5, not a string"),
    (
        v1_document(t=v1_entry(calls_per_sample=0)),
        "has a 'calls_per_sample' of 0, not a whole number of at least 1",
    ),
    ({"schema": SCHEMA_V1, "device": None, "benchmarks": {}}, "has a 'device' that is not an"),
]


@pytest.mark.parametrize("content, problem", V1_DAMAGED)
def test_a_damaged_schema_1_file_raises_and_is_left_byte_identical(
    path: Path, content: dict[str, Any], problem: str
) -> None:
    assert_refused(path, json.dumps(content), problem)


def test_v1_entry_problem_accepts_what_release_0_1_wrote() -> None:
    assert store.v1_entry_problem(V1_WRITTEN) == ""


def test_a_save_rewrites_a_schema_1_file_as_schema_2_with_every_entry(path: Path) -> None:
    write(path, json.dumps(v1_document(**{"t.py::test_a": V1_WRITTEN, "t.py::test_b": v1_entry()})))
    old = load(path)
    assert saving(load(path), update("t.py::test_a", 1.1, S2)) is True
    data = json.loads(path.read_text())
    assert data["schema"] == SCHEMA
    new = load(path)
    assert new.schema == SCHEMA
    # the entry that did not run is kept, as schema 2, with its one session (written to six
    # significant digits)
    [kept] = old.entries["t.py::test_b"].history
    assert new.entries["t.py::test_b"] == dataclasses.replace(
        old.entries["t.py::test_b"],
        anchor=(dataclasses.replace(kept, se_log=pytest.approx(kept.se_log, rel=1e-5)),),
        history=(dataclasses.replace(kept, se_log=pytest.approx(kept.se_log, rel=1e-5)),),
    )
    assert [r.session for r in new.entries["t.py::test_a"].history] == [
        "v1-2026-11-21T22:29:29+00:00",
        S2,
    ]
    assert new.entries["t.py::test_a"].history[1] == record(1.1, S2)
    assert set(new.sessions) == {"v1-unknown", "v1-2026-11-21T22:29:29+00:00", S2}


# --- saving ---------------------------------------------------------------------------------


def test_save_creates_the_file_and_its_directory(path: Path) -> None:
    base = load(path)
    assert saving(base, update("t.py::test_a")) is True
    expected = {"t.py::test_a": stored(samples=(1.0, 1.0))}
    assert load(path).entries == expected
    assert load(path).device == FINGERPRINT
    assert load(path).sessions == {S1: INFO}  # only the sessions entries refer to
    assert (base.exists, base.entries, base.device, base.sessions) == (
        True,
        expected,
        FINGERPRINT,
        {S1: INFO},
    )
    # no temporary file left behind; the lock file stays (a flock lives on its inode), and a
    # directory of its own gets a .gitignore for both
    assert files_in(path.parent) == [".gitignore", path.name, f"{path.name}.lock"]
    assert (path.parent / ".gitignore").read_text() == store.GITIGNORE


def test_save_merges_and_keeps_the_entries_of_tests_that_did_not_run(path: Path) -> None:
    write(path, dumps(document(**{"t.py::test_a": raw(), "t.py::test_b": raw(group="b")})))
    base = load(path)
    assert saving(base, update("t.py::test_a", 3.0, S2), update("t.py::test_c", 5.0, S2)) is True
    entries = load(path).entries
    assert sorted(entries) == ["t.py::test_a", "t.py::test_b", "t.py::test_c"]
    assert entries["t.py::test_b"] == stored(group="b")  # untouched
    assert entries["t.py::test_a"].history == (record(1.0), record(3.0, S2))
    assert entries["t.py::test_a"].samples_ms == (3.0, 3.0)  # the latest session's
    assert entries["t.py::test_c"].history == (record(5.0, S2),)
    assert load(path).sessions == {S1: INFO, S2: INFO2}


def test_save_of_nothing_creates_no_file(path: Path) -> None:
    assert saving(load(path)) is False
    assert not path.parent.exists()


def test_save_without_updates_never_rewrites_the_file(path: Path) -> None:
    before = write(path, dumps(document(**{"t.py::test_a": raw()})))
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    newer = FINGERPRINT | {"torch": "2.14.0"}
    assert saving(load(path), device=newer) is False
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_save_records_a_changed_fingerprint_with_new_entries(path: Path) -> None:
    write(path, dumps(document(**{"t.py::test_a": raw()})))
    newer = FINGERPRINT | {"torch": "2.14.0"}
    assert saving(load(path), update("t.py::test_a", 2.0, S2), device=newer) is True
    assert load(path).device == newer


def test_save_is_atomic_when_the_rename_fails(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = write(path, dumps(document(**{"t.py::test_a": raw()})))
    base = load(path)

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(GpubenchError, match=f"^cannot write baseline file {path}: disk on fire$"):
        saving(base, update("t.py::test_b"))
    assert path.read_bytes() == before
    assert files_in(path.parent) == [path.name, f"{path.name}.lock"]


def test_save_writes_through_a_temporary_file_then_renames(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((str(src), str(dst)))
        if dst == str(path):
            assert Path(src).read_text(encoding="utf-8").endswith("}\n")  # complete first
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    saving(load(path), update("t.py::test_a"))
    [(src, dst)] = [(src, dst) for src, dst in renames if dst == str(path)]
    # <name>.<random>.tmp: caught by the *.tmp of the .gitignore, visible to `ls`
    assert Path(src).parent == path.parent
    assert Path(src).name.startswith(f"{path.name}.") and src.endswith(".tmp")


def test_saved_files_get_the_usual_permissions(path: Path) -> None:
    old = os.umask(0o022)
    try:
        saving(load(path), update("t.py::test_a"))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --- output format --------------------------------------------------------------------------


def test_dumps_sorts_keys_indents_and_puts_samples_and_small_records_on_one_line() -> None:
    doc = {
        "schema": SCHEMA,
        "device": {"name": "Fake", "clocks": [1980, 2619]},
        "sessions": {"s1": {"date": "d", "commit": None, "versions": {"torch": "2.13.0"}}},
        "benchmarks": {
            "t.py::test_b": {
                "timer": "fake",
                "samples_ms": [1.5, 0.25, 1e-05, 12.0],
                "history": [{"session": "s1", "median_ms": 1.5, "n": 4, "se_log": None}],
                "kernels": [{"name": "k", "grid": [1, 1, 1]}],
            },
            "t.py::test_a": {"timer": "fake", "samples_ms": [2.0, 3.0], "extra_info": {}},
        },
    }
    text = dumps(doc)
    assert text == (
        "{\n"
        '  "benchmarks": {\n'
        '    "t.py::test_a": {\n'
        '      "extra_info": {},\n'
        '      "samples_ms": [2.0, 3.0],\n'
        '      "timer": "fake"\n'
        "    },\n"
        '    "t.py::test_b": {\n'
        '      "history": [\n'
        '        {"median_ms": 1.5, "n": 4, "se_log": null, "session": "s1"}\n'
        "      ],\n"
        '      "kernels": [\n'
        '        {"grid": [1, 1, 1], "name": "k"}\n'
        "      ],\n"
        '      "samples_ms": [1.5, 0.25, 1e-05, 12.0],\n'
        '      "timer": "fake"\n'
        "    }\n"
        "  },\n"
        '  "device": {"clocks": [1980, 2619], "name": "Fake"},\n'
        f'  "schema": "{SCHEMA}",\n'
        '  "sessions": {\n'
        '    "s1": {\n'
        '      "commit": null,\n'
        '      "date": "d",\n'
        '      "versions": {"torch": "2.13.0"}\n'
        "    }\n"
        "  }\n"
        "}\n"
    )
    assert json.loads(text) == doc


def test_dumps_puts_objects_of_more_than_ten_plain_values_on_lines_of_their_own() -> None:
    small = {f"k{i}": i for i in range(store.ONE_LINE_KEYS)}
    large = {f"k{i:02d}": i for i in range(store.ONE_LINE_KEYS + 1)}
    assert dumps({"a": small}).count("\n") == 3
    assert dumps({"a": large}).count("\n") == 3 + len(large) + 1
    assert json.loads(dumps({"a": large})) == {"a": large}


def test_dumps_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError):
        dumps({"samples_ms": [1.0, float("nan")]})


def test_dumps_round_trips_keys_that_look_like_arrays() -> None:
    doc = document(**{"t.py::test_x[4096,4096]": raw(), "t.py::test_y[ 1]": raw()})
    assert json.loads(dumps(doc)) == doc


def test_a_saved_file_is_byte_identical_when_written_again(path: Path) -> None:
    """Deterministic output: what a save writes, loaded and written again, is the same."""
    saving(load(path), update("t.py::test_b", 2.0), update("t.py::test_a", 1.0))
    text = path.read_text(encoding="utf-8")
    base = load(path)
    again = {
        "schema": SCHEMA,
        "device": base.device,
        "sessions": {k: v.to_json() for k, v in base.sessions.items()},
        "benchmarks": {k: e.to_json() for k, e in base.entries.items()},
    }
    assert dumps(again) == text


# --- any string, any size, any order of savers (issue 7) --------------------------------------

ODD_STRINGS = [
    "",
    "\x00",
    "\x000\x00",
    "\x001\x00",
    '"',
    '\\"',
    "\\",
    "\\u0000",
    "\n\r\t\x0b\x0c",
    "µs ∑ 日本 🚀",
    "\ud800",  # a lone surrogate, as surrogateescape makes of undecodable bytes
    "\udcff",
    '{"samples_ms": [1, 2]}',
    "[1, 2]",
    "x" * 100_000,
]


@pytest.mark.parametrize("text", ODD_STRINGS, ids=range(len(ODD_STRINGS)))
def test_any_string_in_a_key_a_name_or_extra_info_round_trips(path: Path, text: str) -> None:
    key = f"t.py::test_{text}#{text}"
    # (an empty note is no note: the plugin stores None)
    extra = {"group": text, "note": text or None, "extra_info": {text: [text, {text: text}]}}
    info = SessionInfo("2026-01-01", text, text, {"torch": text})  # a date is a date (below)
    kernels = (Launch(text, share=1.0),)
    assert (
        save(
            load(path),
            FINGERPRINT | {"name": text},
            {S1: info},
            [update(key, kernels=kernels, **extra)],
        )
        is True
    )
    base = load(path)
    assert base.entries == {key: stored(samples=(1.0, 1.0), kernels=kernels, **extra)}
    assert base.device["name"] == text
    assert base.sessions == {S1: info}


def test_dumps_output_parses_back_for_nested_lists_and_empty_containers() -> None:
    doc = {"a": [], "b": {}, "c": [[1, 2], {"d": [3]}], "e": [{"f": []}], "g": [1, "x", None]}
    text = dumps(doc)
    assert json.loads(text) == doc
    assert '"g": [1, "x", null]' in text  # plain lists stay on one line


def test_dumps_refuses_keys_that_are_not_strings() -> None:
    with pytest.raises(TypeError, match=r"JSON object keys must be strings, got \(1, 2\)"):
        dumps({(1, 2): 1})


@pytest.mark.slow
def test_forty_thousand_entries_save_and_load(path: Path) -> None:
    # Linear time: the former text substitution took minutes for this many entries.
    updates = [
        update(f"t.py::test_{i}[{i}]", 1.0 + i % 7, samples=(1.0, 2.0, 3.0)) for i in range(40_000)
    ]
    assert saving(load(path), *updates) is True
    entries = load(path).entries
    assert len(entries) == 40_000
    assert entries == {u.key: u.apply(None) for u in updates}


def test_save_merges_with_what_another_process_saved_since_this_one_read(path: Path) -> None:
    mine, theirs = load(path), load(path)  # two sessions read the same (missing) file
    assert saving(theirs, update("t.py::test_theirs", 2.0, S2)) is True
    assert saving(mine, update("t.py::test_mine")) is True
    assert sorted(load(path).entries) == ["t.py::test_mine", "t.py::test_theirs"]
    assert sorted(mine.entries) == ["t.py::test_mine", "t.py::test_theirs"]
    assert load(path).sessions == {S1: INFO, S2: INFO2}


def test_save_applies_its_update_to_the_history_another_process_extended(path: Path) -> None:
    """Two sessions of one test saved at once: both end in its history, none replaces it."""
    write(path, dumps(document(**{"t.py::test_a": raw()})))
    mine, theirs = load(path), load(path)
    assert saving(theirs, update("t.py::test_a", 1.01, S2)) is True
    assert save(mine, FINGERPRINT, {"s3": INFO}, [update("t.py::test_a", 1.02, "s3")]) is True
    assert load(path).entries["t.py::test_a"].history == (
        record(1.0),
        record(1.01, S2),
        record(1.02, "s3"),
    )


def test_save_refuses_to_overwrite_a_file_damaged_since_it_was_read(path: Path) -> None:
    base = load(path)
    before = write(path, "{")
    with pytest.raises(BaselineError, match="is not valid JSON"):
        saving(base, update("t.py::test_a"))
    assert path.read_bytes() == before


def test_the_baseline_directory_may_be_created_but_not_over_a_file(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "cpu-fake.json"
    assert saving(load(deep), update("t.py::test_a")) is True
    (tmp_path / "file").write_text("")
    in_file = tmp_path / "file" / "cpu-fake.json"
    for action in (lambda: load(in_file), lambda: saving(Baseline(in_file), update("k"))):
        with pytest.raises(BaselineError) as info:
            action()
        assert str(info.value) == (
            f"baseline directory {tmp_path / 'file'} is a file, not a directory; point "
            "--gpubench-dir (or ini gpubench_dir) at a directory"
        )


def test_an_entry_reads_back_what_it_writes() -> None:
    entry = stored(
        1.0,
        1.1,
        0.9,
        samples=(1.0, 1.1, 0.9),
        kernels=(Launch("k", grid=(1, 1, 1), share=1.0),),
        group="g",
        bytes=1e9,
        flops=2.0,
        extra_info={"a": [1]},
        note="n",
    )
    data = json.loads(json.dumps(entry.to_json()))
    assert BaselineEntry.from_json(data, {S1: INFO}) == entry
    bare = stored().to_json()
    assert not {"group", "bytes", "flops", "extra_info", "note"} & set(bare)
    assert set(bare) == {"timer", "epoch", "anchor", "history", "samples_ms", "kernels"}


# --- concurrent savers ----------------------------------------------------------------------

SAVER = """
import contextlib
import sys
import time
from pathlib import Path

from pytest_gpubench.core.baseline import BaselineEntry, Update
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.store import baseline, files

path, key, broken = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
write = files.write_atomic


def slow_write(target, text, what):
    time.sleep(0.5)  # a wide window between reading the file and replacing it
    write(target, text, what)


files.write_atomic = slow_write
if broken:  # the control: the same race without the lock
    files.lock = lambda *args, **kwargs: contextlib.nullcontext()
record = SessionRecord(key, 1.0, 20, 0.001)
latest = BaselineEntry("cuda-graph", key, (), (), (1.0, 1.0))
update = Update(key, (record,), False, latest)
baseline.save(baseline.load(path), {}, {key: SessionInfo("2026-01-01")}, [update])
"""


@pytest.mark.slow
@pytest.mark.parametrize("locked", [True, False], ids=["locked", "control-without-the-lock"])
def test_savers_that_start_together_keep_each_others_entries(tmp_path: Path, locked: bool) -> None:
    """Four processes save at once, each reading the file, then writing it half a second
    later: under the lock each re-reads what the others wrote; without it (the control, which
    shows this test can fail) the last writer wins and the others' entries are lost."""
    script, path = tmp_path / "saver.py", tmp_path / "base.json"
    script.write_text(SAVER)
    keys = [f"t.py::test_{i}" for i in range(4)]
    savers = [
        subprocess.Popen([sys.executable, str(script), str(path), key, "0" if locked else "1"])
        for key in keys
    ]
    assert [saver.wait(timeout=60) for saver in savers] == [0] * 4
    saved = sorted(store.load(path).entries)
    if locked:
        assert saved == keys
    else:
        assert len(saved) < len(keys)


# --- one history per binary (issue 16) ------------------------------------------------------

WIDE = Launch("k", grid=(32768, 1, 1), block=(256, 1, 1), registers=16, share=1.0)
NARROW = Launch("k", grid=(16384, 1, 1), block=(128, 1, 1), registers=26, share=1.0)


def ran(launches: tuple[Launch, ...], *medians: float, session: str = S2) -> Binary:
    records = tuple(record(m, session) for m in medians)
    return Binary(launches, session, records[:5], records)


def two_binaries() -> BaselineEntry:
    """WIDE saved last (three sessions of S1), NARROW before it (two of S2)."""
    return stored(1.0, 1.0, 1.0, kernels=(WIDE,), others=(ran((NARROW,), 1.12, 1.12),))


def test_an_entry_of_several_binaries_reads_back_what_it_writes() -> None:
    entry = two_binaries()
    data = json.loads(json.dumps(entry.to_json()))
    assert data["binary"] == fingerprint((WIDE,))  # for a reader: the hash of its launches
    [other] = data["others"]
    assert other["binary"] == fingerprint((NARROW,))
    assert set(other) == {"binary", "kernels", "epoch", "anchor", "history"}
    assert BaselineEntry.from_json(data, {S1: INFO, S2: INFO2}) == entry
    assert [b.fingerprint for b in entry.binaries] == [fingerprint((WIDE,)), fingerprint((NARROW,))]
    assert entry.median_ms == pytest.approx(1.0)  # the latest binary's
    assert "others" not in stored().to_json() and "binary" not in stored().to_json()


def test_an_entry_of_schema_2_is_one_binary_and_its_save_adds_only_the_hash(path: Path) -> None:
    """A file written before binaries were kept apart loads as it always did: each entry is
    one binary; the next save writes the same entries with their ``binary`` hash."""
    old = raw(kernels=[WIDE.to_dict()])
    write(path, dumps(document(**{"t.py::test_a": old, "t.py::test_b": raw()})))
    base = load(path)
    entry = base.entries["t.py::test_a"]
    assert entry.binaries == (Binary((WIDE,), S1, (record(),), (record(),)),)
    assert saving(base, update("t.py::test_b", 1.0, S2)) is True
    data = json.loads(path.read_text())["benchmarks"]
    assert data["t.py::test_a"] == old | {"binary": fingerprint((WIDE,))}
    assert load(path).entries["t.py::test_a"] == entry


def test_a_session_joins_the_history_of_the_binary_it_ran_which_becomes_the_latest() -> None:
    entry = two_binaries()
    applied = update("k", 1.13, "s3", kernels=(NARROW,)).apply(entry)
    assert [b.fingerprint for b in applied.binaries] == [
        fingerprint((NARROW,)),
        fingerprint((WIDE,)),
    ]
    assert [r.median_ms for r in applied.history] == [1.12, 1.12, 1.13]
    assert applied.epoch == S2  # its own epoch goes on
    assert applied.others == (entry.binary,)  # the other binary's history untouched
    back = update("k", 1.0, "s4", kernels=(WIDE,)).apply(applied)
    assert [r.median_ms for r in back.history] == [1.0, 1.0, 1.0, 1.0]
    assert back.others[0].history == applied.history


def test_launches_of_no_binary_add_one_with_its_own_epoch_and_at_most_four_are_kept() -> None:
    entry = two_binaries()
    third = (dataclasses.replace(WIDE, registers=40),)
    applied = update("k", 1.3, "s3", kernels=third).apply(entry)
    assert (applied.kernels, applied.epoch, applied.history) == (third, "s3", (record(1.3, "s3"),))
    assert applied.others == entry.binaries
    assert MAX_BINARIES == 4
    for i, registers in enumerate((41, 42)):  # two more: the least recently saved is dropped
        launches = (dataclasses.replace(WIDE, registers=registers),)
        applied = update("k", 1.0, f"s{4 + i}", kernels=launches).apply(applied)
    assert len(applied.binaries) == 4
    assert [b.kernels[0].registers for b in applied.binaries] == [42, 41, 40, 16]


def test_an_accepted_change_starts_its_binary_over_and_another_timer_the_entry() -> None:
    entry = two_binaries()
    accepted = update("k", 1.2, "s3", new_epoch=True, kernels=(NARROW,)).apply(entry)
    assert (accepted.epoch, accepted.history, accepted.others) == (
        "s3",
        (record(1.2, "s3"),),
        (entry.binary,),
    )
    other_timer = update("k", 1.2, "s3", timer="cupti", kernels=(NARROW,)).apply(entry)
    assert (other_timer.timer, other_timer.others, other_timer.epoch) == ("cupti", (), "s3")


def test_a_session_without_launch_records_joins_the_latest_binary_and_keeps_its_kernels() -> None:
    entry = two_binaries()
    applied = update("k", 1.0, "s3").apply(entry)  # a timer that could not tell what ran
    assert applied.kernels == (WIDE,) and len(applied.history) == 4
    assert applied.others == entry.others
    # a binary whose launches were never recorded matches any launches, and takes them
    unknown = stored(1.0)
    assert unknown.binary_for((NARROW,)) == unknown.binary
    adopted = update("k", 1.0, S2, kernels=(NARROW,)).apply(unknown)
    assert (adopted.kernels, len(adopted.history), adopted.others) == ((NARROW,), 2, ())


def test_a_save_keeps_the_sessions_other_binaries_refer_to(path: Path) -> None:
    assert saving(load(path), update("t.py::test_a", 1.12, S2, kernels=(NARROW,))) is True
    assert saving(load(path), update("t.py::test_a", 1.0, S1, kernels=(WIDE,))) is True
    base = load(path)
    assert base.sessions == {S1: INFO, S2: INFO2}
    entry = base.entries["t.py::test_a"]
    assert [b.kernels for b in entry.binaries] == [(WIDE,), (NARROW,)]
    text = path.read_text(encoding="utf-8")
    again = {
        "schema": SCHEMA,
        "device": base.device,
        "sessions": {k: v.to_json() for k, v in base.sessions.items()},
        "benchmarks": {k: e.to_json() for k, e in base.entries.items()},
    }
    assert dumps(again) == text  # deterministic with several binaries too


OTHERS_DAMAGED = [
    (raw(others={}), "has an entry 't' that has 'others' that are not a list of at most 3"),
    (raw(others=[ran((NARROW,), 1.0).to_json()] * 4), "'others' that are not a list of at most 3"),
    (raw(others=[1]), "has an entry 't' that has others[0] that is not an object"),
    (
        raw(others=[ran((NARROW,), 1.0).to_json() | {"history": []}]),
        "has an entry 't' that has others[0] that has no 'history' list of session records",
    ),
    (
        raw(others=[ran((NARROW,), 1.0, session="elsewhere").to_json()]),
        "has an entry 't' that has others[0] that refers to session 'elsewhere', not in",
    ),
    (
        raw(others=[ran((NARROW,), 1.0).to_json() | {"kernels": [{"name": "k", "grid": [1]}]}]),
        "has others[0] that has a kernel entry 0 that is malformed: expected three dimensions",
    ),
    (raw(binary=5), "has an entry 't' that has a 'binary' of 5, not a string"),
]


@pytest.mark.parametrize("entry, problem", OTHERS_DAMAGED)
def test_damaged_binaries_are_refused_with_one_line(path: Path, entry: Any, problem: str) -> None:
    sessions = {S1: INFO.to_json(), S2: INFO2.to_json()}
    assert_refused(path, json.dumps(document(sessions, t=entry)), problem)


# --- keys of a newer version (issue 19) -------------------------------------------------------


def test_a_save_keeps_the_keys_a_newer_version_wrote_at_every_level(path: Path) -> None:
    """A save by this version over a file with keys it does not know (top level, session,
    entry, session record, another binary) writes each back where it was: release 0.2
    dropped them unsaid."""
    other = Binary((Launch("k_old", (1, 1, 1), (32, 1, 1)),), S1, (record(2.0),), (record(2.0),))
    entry = stored(1.0, others=(other,)).to_json()
    entry |= {"future_entry": {"a": [1, 2]}}
    entry["history"][0] |= {"future_record": "r"}
    entry["anchor"][0] |= {"future_record": "a"}
    entry["others"][0] |= {"future_binary": 7}
    entry["others"][0]["history"][0] |= {"future_record": "o"}
    doc = document(
        {S1: INFO.to_json() | {"future_session": True}},
        **{"t.py::test_a": entry, "t.py::test_b": raw()},
    )
    doc |= {"future_top": {"x": None}}
    write(path, dumps(doc))

    assert saving(load(path), update("t.py::test_a", 1.0, S2), update("t.py::test_b", 1.0, S2))
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert saved["future_top"] == {"x": None}
    assert saved["sessions"][S1]["future_session"] is True
    assert "future_session" not in saved["sessions"][S2]
    a = saved["benchmarks"]["t.py::test_a"]
    assert a["future_entry"] == {"a": [1, 2]}
    assert a["history"][0]["future_record"] == "r"
    assert "future_record" not in a["history"][1]  # this run's session: none
    assert a["anchor"][0]["future_record"] == "a"
    assert a["others"][0]["future_binary"] == 7
    assert a["others"][0]["history"][0]["future_record"] == "o"
    assert "future_entry" not in saved["benchmarks"]["t.py::test_b"]


def test_keys_a_newer_version_wrote_are_read_apart_and_known_keys_win() -> None:
    data = record().to_json() | {"later": 1}
    parsed = SessionRecord.from_json(data)
    assert parsed == dataclasses.replace(record(), extra={"later": 1})
    assert parsed.to_json() == data
    assert SessionRecord.from_json(record().to_json()).extra == {}
    clash = dataclasses.replace(record(), extra={"median_ms": 9.0})
    assert clash.to_json()["median_ms"] == 1.0


def test_a_lockstep_sides_other_time_is_kept_and_checked() -> None:
    """A record's ``beside_ms`` (a lockstep side's kernel time) survives a round trip; one
    that is no time is refused, saying so."""
    kept = dataclasses.replace(record(), beside_ms=0.8)
    assert SessionRecord.from_json(kept.to_json()) == kept
    assert "beside_ms" not in record().to_json()
    raw = [record().to_json(), kept.to_json()]
    assert [SessionRecord.from_json(r) for r in raw] == [record(), kept]
    assert SessionRecord.from_json(record().to_json()).beside_ms is None
    for bad in ("fast", -1.0, 0.0, math.inf):
        with pytest.raises(ValueError, match="'beside_ms' of"):
            SessionRecord.from_json(kept.to_json() | {"beside_ms": bad})


# --- session records ----------------------------------------------------------------------


def usual_records(count: int, seed: int) -> list[dict[str, Any]]:
    """JSON of session records that ``SessionRecord.from_json`` reads fast: every optional key
    present or not, and the values at their bounds."""
    import random

    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(count):
        data: dict[str, Any] = {"session": f"s{i % 7}", "median_ms": 10 ** rng.uniform(-9, 6)}
        data["n"] = rng.choice([1, 2, 20, 10**6])
        if rng.random() < 0.7:
            data["se_log"] = rng.choice([None, 0.0, -0.0, 0.01, rng.random()])
        if rng.random() < 0.7:
            data["calls_per_sample"] = rng.choice([1, 3, 1000])
        if rng.random() < 0.5:
            data["peak_bytes"] = rng.choice([None, 0, 1, 2**40])
        out.append(dict(sorted(data.items())) if rng.random() < 0.5 else data)
    out[0]["median_ms"], out[-1]["median_ms"] = 1e-9, 1e6
    return out


@pytest.mark.parametrize(
    "change",
    [
        {"future": 1},
        {"median_ms": 1},
        {"median_ms": float("nan")},
        {"median_ms": 2e6},
        {"n": 0},
        {"n": True},
        {"n": 2.0},
        {"calls_per_sample": None},
        {"se_log": float("inf")},
        {"se_log": -0.5},
        {"peak_bytes": -1},
        {"peak_bytes": 1.0},
        {"session": None},
    ],
)
def test_an_unusual_record_is_read_or_refused_in_one_line(change: dict[str, Any]) -> None:
    """A record with a key of a newer version, or a field out of bounds or of another type:
    read (the number as a float), or refused with a ValueError saying what is wrong."""
    for raw in usual_records(50, 3):
        data = raw | change
        try:
            read = SessionRecord.from_json(data)
        except ValueError as exc:
            assert str(exc).startswith("has a session"), exc
        else:
            assert type(read.median_ms) is float and read.median_ms == data["median_ms"]


# --- entries read from a file --------------------------------------------------------------


def usual_entries() -> dict[str, Any]:
    """JSON of entries: each optional key present or not, launches recorded or not, whole
    and empty samples."""
    launch = Launch("k", grid=(2, 1, 1), block=(128, 1, 1), registers=32)
    entries: dict[str, Any] = {}
    for i in range(24):
        data = stored(1.0 + i / 10, 1.1, 0.9, samples=(1.0, 1.5)).to_json()
        if i % 2:
            data["group"] = f"g{i % 3}"
        if i % 3:
            data["bytes"] = 4096 if i % 3 == 1 else 1e6
        if i % 4 == 0:
            data["flops"] = 2.5e9
        if i % 5 == 0:
            data["note"] = "a note"
        if i % 6 == 0:
            data["kernels"], data["binary"] = [launch.to_dict()], fingerprint((launch,))
        if i % 7 == 0:
            data["samples_ms"] = [] if i % 2 else [2, 1.5]
        if i % 8 == 0:
            del data["kernels"], data["samples_ms"]
        entries[f"t.py::test_{i}"] = data
    return entries


def test_entries_read_from_a_file_are_those_read_one_by_one(path: Path) -> None:
    entries = usual_entries()
    one_by_one = {k: BaselineEntry.from_json(e, {S1: INFO}) for k, e in entries.items()}
    write(path, dumps(document(**entries)))
    loaded = load(path).entries
    assert loaded == one_by_one

    def types(read: dict[str, BaselineEntry]) -> dict[str, list[type]]:
        return {k: [type(v) for v in (*e.samples_ms, e.bytes, e.flops)] for k, e in read.items()}

    assert types(loaded) == types(one_by_one)  # 2 read as 2.0; 4096 kept whole


# A key written twice in a file: what, and where it goes twice.
TWICE = [
    ('"n": 20,', 1),  # in an anchor's record, with the same value
    ('"n": 20,', -1),  # in the last history's
    ('"epoch": "20260101T000000Z-000001",', 1),  # in an entry made whole
    ('"name": "k",', 1),  # in a launch (its entry not made whole)
    ('"commit": "abc123",', 1),  # in a session of the table
    ('"python": "3.11.0",', -1),  # in its versions
    ('"kernels": [],', 2),  # a list of nothing dropped
]


@pytest.mark.parametrize("twice, at", TWICE)
def test_a_key_twice_anywhere_in_a_file_is_refused_naming_it(
    path: Path, twice: str, at: int
) -> None:
    """A key that appears twice in any object, even with the same value or a value that
    holds nothing, is refused naming the key: the reader would keep one value unsaid."""
    entries = usual_entries()
    entries["t.py::test_5"] |= {"group": "a: b", "note": "{}"}
    text = dumps(document(**entries))
    write(path, text)
    assert load(path).entries == {
        k: BaselineEntry.from_json(e, {S1: INFO}) for k, e in entries.items()
    }
    parts = text.split(twice)  # the at-th place of ``twice``, from the end where negative
    at = at if at > 0 else len(parts) + at
    assert 0 < at < len(parts)
    write(path, twice.join(parts[:at]) + twice + " " + twice + twice.join(parts[at:]))
    key = twice.split('"')[1]
    with pytest.raises(BaselineError, match=f"the key '{key}' appears twice in one object"):
        load(path)


def test_a_file_with_a_backslash_has_each_object_checked(path: Path) -> None:
    entries = {"t.py::test_[a\\b]": raw(), "t.py::test_[é]": raw()}
    write(path, dumps(document(**entries)))
    assert list(load(path).entries) == list(entries)
    write(path, dumps(document(**entries)).replace('"epoch":', '"epoch": "x", "epoch":', 1))
    with pytest.raises(BaselineError, match="the key 'epoch' appears twice in one object"):
        load(path)


UNUSUAL = [
    {"future": 1},
    {"others": []},
    {"extra_info": {}},
    {"versus": None},
    {"timer": ""},
    {"timer": 5},
    {"epoch": None},
    {"binary": 5},
    {"samples_ms": [1.0, True]},
    {"samples_ms": [1.0, float("nan")]},
    {"samples_ms": [1.0, 2e6]},
    {"samples_ms": {}},
    {"kernels": {}},
    {"kernels": [1]},
    {"kernels": [{"name": "k", "grid": [1]}]},
    {"kernels": [{"name": "k", "grid": [1e999, 1, 1]}]},
    {"group": 5},
    {"bytes": 0},
    {"flops": True},
    {"note": None},
]


@pytest.mark.parametrize("change", UNUSUAL)
def test_an_unusual_entry_is_read_or_refused_naming_it(path: Path, change: dict[str, Any]) -> None:
    """An entry with a key of a newer version, an optional field, or a field that is not
    valid: read as ``BaselineEntry.from_json`` reads it, or refused in one line that says
    what is wrong."""
    entries = usual_entries()
    entries["t.py::test_5"] = entries["t.py::test_5"] | change
    sessions = {S1: INFO}
    try:
        text = json.dumps(document(**entries), allow_nan=False)
    except ValueError:
        return  # NaN: no file can hold it
    write(path, text)
    try:
        expected = {k: BaselineEntry.from_json(e, sessions) for k, e in entries.items()}
    except ValueError as exc:  # a grid of 1e999 too: one line, no OverflowError
        with pytest.raises(BaselineError) as refused:
            load(path)
        assert str(exc) in str(refused.value)
    else:
        assert load(path).entries == expected


# --- issue 46: a history longer than a save keeps, dates that are not dates ----------------


def long_file(path: Path, sessions: int) -> list[str]:
    """A file whose test 'tests/t.py::test_long' holds ``sessions`` sessions in its history
    and its anchor (a merge or a hand edit); returns the session names, oldest first."""
    names = [f"2026{i:08d}" for i in range(sessions)]
    table = {n: INFO.to_json() for n in names}
    records = [record(1.0 + i / 1000, n).to_json() for i, n in enumerate(names)]
    entry = raw(epoch=names[0], anchor=records, history=records)
    path.write_text(dumps(document(table, **{"tests/t.py::test_long": entry})))
    return names


def test_a_history_longer_than_a_save_keeps_is_read_trimmed_and_said_in_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fake.json"
    names = long_file(path, 300)
    base = load(path)
    entry = base.entries["tests/t.py::test_long"]
    assert [r.session for r in entry.history] == names[-HISTORY_SESSIONS:]
    assert [r.session for r in entry.anchor] == names[:ANCHOR_SESSIONS]
    [note] = base.notes
    assert note == (
        f"baseline file {path}: 'tests/t.py::test_long' kept more sessions than a save keeps "
        f"(300 in its history): read as the latest 20 (and the first 5 as its anchor); the "
        "next --gpubench-save writes them so"
    )
    assert load(path).notes == base.notes  # said by each read until a save


def test_a_save_writes_a_long_history_trimmed_though_it_measured_another_test(
    tmp_path: Path,
) -> None:
    path = tmp_path / "fake.json"
    names = long_file(path, 300)
    assert saving(Baseline(path), update("tests/t.py::test_other"))
    data = json.loads(path.read_text())
    entry = data["benchmarks"]["tests/t.py::test_long"]
    assert [r["session"] for r in entry["history"]] == names[-HISTORY_SESSIONS:]
    assert len(entry["anchor"]) == ANCHOR_SESSIONS
    # The sessions no record refers to any more are rolled out of the table.
    assert len(data["sessions"]) == HISTORY_SESSIONS + ANCHOR_SESSIONS + 1
    assert load(path).notes == ()


def test_a_session_dated_other_than_in_iso_8601_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    path.write_text(json.dumps(document({S1: INFO.to_json() | {"date": "not a date"}}, t=raw())))
    with pytest.raises(BaselineError) as caught:
        load(path)
    assert str(caught.value) == (
        f"baseline file {path} has a session '{S1}' that has a 'date' of 'not a date', not an "
        f"ISO 8601 date such as 2026-01-02T03:04:05+00:00; {REMEDY}"
    )


def test_a_save_refuses_a_session_it_would_refuse_to_read(tmp_path: Path) -> None:
    path = tmp_path / "fake.json"
    with pytest.raises(BaselineError, match=f"session '{S1}' has a 'date' of 'not a date', not"):
        save(Baseline(path), FINGERPRINT, {S1: SessionInfo("not a date")}, [update("t")])
    assert not path.exists()


def test_a_key_with_a_lone_surrogate_is_kept_by_a_save_and_read_back(tmp_path: Path) -> None:
    """JSON carries it as an escape (every reader escapes it to display: test_cli)."""
    path = tmp_path / "fake.json"
    key = "tests/t.py::test_\ud800"
    assert saving(Baseline(path), update(key))
    assert "test_\\ud800" in path.read_text(encoding="ascii")
    assert list(load(path).entries) == [key]


@pytest.mark.parametrize(
    "where", [("history", 0, "median_ms"), ("history", 0, "se_log"), ("samples_ms",)]
)
def test_a_number_too_large_for_a_float_is_refused_in_one_line(
    path: Path, where: tuple[object, ...]
) -> None:
    """JSON holds whole numbers of any size; a time or a spread of 10^400 is no float: one
    line naming the file, not an OverflowError."""
    entries = usual_entries()
    entry = entries["t.py::test_1"]
    if where == ("samples_ms",):
        entry["samples_ms"] = [10**400]
    else:
        entry["history"][0][where[2]] = 10**400  # type: ignore[index]
    text = json.dumps(document(**entries), allow_nan=False)
    write(path, text)
    with pytest.raises(BaselineError) as refused:
        load(path)
    assert str(refused.value).count("\n") == 0 and str(path) in str(refused.value)
