"""Baseline files: one JSON file per device under the baseline directory.

Reads tolerate nothing silently: a damaged file raises BaselineError with what to do, and is
never overwritten. Saves hold a lock file next to the baseline, re-read it and merge into
what is there now (so concurrent savers keep each other's entries), keep the entries of
tests that did not run, skip the write when nothing changed, and write atomically. Output is
stable (sorted keys, one line of samples per entry) so the files diff well under version
control.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import storage
from .errors import BaselineError, StorageError
from .stats import MAX_SAMPLE_MS, MIN_SAMPLE_MS, sample_problem

SCHEMA = "pytest-gpubench/1"
REMEDY = "fix it, restore it from version control, or delete it and re-run with --gpubench-save"
WHAT = "baseline file"
# 40 000 entries of 400 samples take about 200 MB; anything far larger is not a baseline.
MAX_BYTES = 256 << 20
# A save takes seconds even for tens of thousands of entries; a lock held this long is stuck.
LOCK_TIMEOUT_S = 120.0
# Written into a baseline directory of its own, so `git add .gpubench` never commits these.
GITIGNORE = "# pytest-gpubench: temporary and lock files of baseline saves\n*.tmp\n*.lock\n"


@dataclass
class Baseline:
    path: Path
    fingerprint: dict[str, Any] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    exists: bool = False


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
    except StorageError as exc:
        raise BaselineError(f"{exc}; {REMEDY}") from None
    problem = document_problem(data)
    if problem:
        raise BaselineError(f"{WHAT} {path} {problem}; {REMEDY}")
    return Baseline(path, data.get("device", {}), data["benchmarks"], exists=True)


def document_problem(data: Any) -> str:
    """What is wrong with a parsed baseline document, or '' if nothing."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        return f"has schema {found!r}, expected {SCHEMA!r}"
    if "benchmarks" not in data:
        return "lacks a 'benchmarks' object"
    if not isinstance(data["benchmarks"], dict):
        return "has a 'benchmarks' that is not an object"
    if not isinstance(data.get("device", {}), dict):
        return "has a 'device' that is not an object"
    for key, entry in data["benchmarks"].items():
        problem = entry_problem(entry)
        if problem:
            return f"has an entry {key!r:.200} that {problem}"
    return ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at_least(low: float) -> Callable[[Any], bool]:
    return lambda value: _is_number(value) and math.isfinite(value) and value >= low


def _whole(low: int) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and not isinstance(value, bool) and value >= low


# Optional fields of an entry: how to tell a valid value, and what one looks like.
FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{
        name: (lambda value: _is_number(value) and not sample_problem(value), "a time in ms")
        for name in ("median_ms", "mean_ms", "min_ms")
    },
    "iqr_ms": (_at_least(0), "a non-negative number"),
    "noise": (_at_least(0), "a non-negative number"),
    "bytes": (lambda value: _at_least(0)(value) and value > 0, "a positive number"),
    "flops": (lambda value: _at_least(0)(value) and value > 0, "a positive number"),
    "warmup": (_whole(0), "a whole number"),
    "calls_per_sample": (_whole(1), "a whole number of at least 1"),
    "group": (lambda value: isinstance(value, str), "a string"),
    "date": (lambda value: isinstance(value, str), "a string"),
    "note": (lambda value: isinstance(value, str), "a string"),
    "git_commit": (lambda value: value is None or isinstance(value, str), "a string or null"),
    "extra_info": (lambda value: isinstance(value, dict), "an object"),
}


def entry_problem(entry: Any) -> str:
    """What is wrong with one stored entry, or '' if nothing: the same rules for what is read
    and for what is about to be written, so a save never writes a file a load refuses."""
    if not isinstance(entry, dict):
        return "is not an object"
    if not isinstance(entry.get("timer"), str) or not entry["timer"]:
        return "has no timer name"
    samples = entry.get("samples_ms")
    if samples is None:
        return "has no 'samples_ms'"
    # Set, min, max and fsum run in C: a file of 40 000 entries of 400 samples loads in
    # seconds; only a bad list is walked in Python, to name the culprit.
    if not isinstance(samples, list) or not set(map(type, samples)) <= {int, float}:
        return "has a 'samples_ms' that is not a list of numbers"
    if len(samples) < 2:
        return "has fewer than 2 samples"
    if not (
        MIN_SAMPLE_MS <= min(samples) <= max(samples) <= MAX_SAMPLE_MS
        and math.isfinite(math.fsum(samples))
    ):
        problem = next(filter(None, map(sample_problem, samples)), "")
        return f"has a sample of {problem}"
    for name, (valid, expected) in FIELDS.items():
        if name in entry and not valid(entry[name]):
            return f"has a {name!r} of {entry[name]!r:.60}, not {expected}"
    return ""


def save(
    baseline: Baseline,
    fingerprint: dict[str, Any],
    updates: dict[str, dict],
    lock_timeout_s: float = LOCK_TIMEOUT_S,
) -> bool:
    """Merge ``updates`` into the file as it is on disk now; return whether it was written.

    Under the lock, so that two processes saving at once keep each other's entries. Nothing
    measured means nothing written: not even a new fingerprint, which would label the old
    entries with software they were not recorded with.
    """
    if not updates:
        return False
    path = baseline.path
    _make_directory(path.parent)
    with storage.lock(path, WHAT, lock_timeout_s):
        current = load(path)  # other processes may have saved since this session read it
        entries = {**current.entries, **updates}
        changed = not current.exists or entries != current.entries
        if changed:
            text = dumps({"schema": SCHEMA, "device": fingerprint, "benchmarks": entries})
            storage.remove_stale_temporaries(path)
            storage.write_atomic(path, text, WHAT)
            _ignore_temporaries(path.parent)
    baseline.entries, baseline.exists = entries, True
    baseline.fingerprint = fingerprint if changed else current.fingerprint
    return changed


_ENCODER = json.JSONEncoder(allow_nan=False)  # one encoder: json.dumps builds one per call


def dumps(document: Any) -> str:
    """Indented, key-sorted JSON with each list of plain values on one line.

    Composed of ``json.dumps`` fragments, structure by structure, so every string (NUL,
    quotes, lone surrogates) round-trips, and the time is linear in the size."""
    return _dump(document, "") + "\n"


def _dump(value: Any, indent: str) -> str:
    inner = indent + "  "
    if isinstance(value, dict) and value:
        for key in value:
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys must be strings, got {key!r:.60}")
        items = [f"{inner}{json.dumps(k)}: {_dump(v, inner)}" for k, v in sorted(value.items())]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and not storage.CONTAINERS.isdisjoint(map(type, value)):  # C speed
        return (
            "[\n" + ",\n".join(inner + _dump(item, inner) for item in value) + "\n" + indent + "]"
        )
    return _ENCODER.encode(value)


def _check_directory(directory: Path) -> None:
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise BaselineError(
            f"baseline directory {directory} is a file, not a directory; point --gpubench-dir "
            "(or ini gpubench_dir) at a directory"
        )


def _make_directory(directory: Path) -> None:
    _check_directory(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BaselineError(
            f"cannot create baseline directory {directory}: {exc.strerror or exc}; choose "
            "another --gpubench-dir (or ini gpubench_dir)"
        ) from None


def _ignore_temporaries(directory: Path) -> None:
    """Give a directory of baselines only (no other files) a .gitignore for our temporary
    and lock files, unless it has one. A convenience: failing to write it fails nothing."""
    ignore = directory / ".gitignore"
    with contextlib.suppress(OSError, StorageError):
        names = os.listdir(directory)
        if not os.path.lexists(ignore) and all(n.endswith((".json", ".lock")) for n in names):
            storage.write_atomic(ignore, GITIGNORE, "ignore file")
