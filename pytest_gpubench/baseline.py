"""Baseline files: one JSON file per device under the baseline directory.

Reads tolerate nothing silently: a damaged file raises BaselineError with what to do, and is
never overwritten. Writes are atomic (temporary file, then rename), keep the entries of tests
that did not run, and skip the write when nothing changed. Output is stable (sorted keys, one
line of samples per entry) so the files diff well under version control.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BaselineError

SCHEMA = "pytest-gpubench/1"
REMEDY = "fix it, restore it from version control, or delete it and re-run with --gpubench-save"


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Baseline(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(f"cannot read baseline file {path}: {exc}; {REMEDY}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"baseline file {path} is not valid JSON ({exc.msg} at line {exc.lineno}); {REMEDY}"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise BaselineError(
            f"baseline file {path} has schema {found!r}, expected {SCHEMA!r}; {REMEDY}"
        )
    entries = data.get("benchmarks")
    fingerprint = data.get("device", {})
    if not isinstance(entries, dict) or not isinstance(fingerprint, dict):
        raise BaselineError(f"baseline file {path} lacks a 'benchmarks' object; {REMEDY}")
    for key, entry in entries.items():
        problem = _entry_problem(entry)
        if problem:
            raise BaselineError(f"baseline file {path}: entry {key!r} {problem}; {REMEDY}")
    return Baseline(path, fingerprint, entries, exists=True)


def _entry_problem(entry: Any) -> str:
    if not isinstance(entry, dict):
        return "is not an object"
    if not isinstance(entry.get("timer"), str):
        return "has no timer name"
    samples = entry.get("samples_ms")
    if not isinstance(samples, list) or len(samples) < 2:
        return "has fewer than 2 samples"
    for value in samples:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return "has a sample that is not a number"
        if not math.isfinite(value) or value <= 0:
            return "has a sample that is not a positive finite time"
    return ""


def save(baseline: Baseline, fingerprint: dict[str, Any], updates: dict[str, dict]) -> bool:
    """Merge ``updates`` into the file; return whether it was written.

    Nothing measured means nothing written: not even a new fingerprint, which would label the
    old entries with software they were not recorded with.
    """
    entries = {**baseline.entries, **updates}
    if not updates or (baseline.exists and entries == baseline.entries):
        return False
    document = {"schema": SCHEMA, "device": fingerprint, "benchmarks": entries}
    write_atomic(baseline.path, dumps(document))
    baseline.entries, baseline.fingerprint, baseline.exists = entries, fingerprint, True
    return True


def dumps(document: Any) -> str:
    """Indented, key-sorted JSON with each list of numbers on one line."""
    lines: dict[str, str] = {}

    def one_line(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: one_line(item) for key, item in value.items()}
        if (
            isinstance(value, list)
            and value
            and all(isinstance(item, int | float) and not isinstance(item, bool) for item in value)
        ):
            token = f"\0{len(lines)}\0"  # NUL never appears unescaped in JSON text
            lines[json.dumps(token)] = json.dumps(value, allow_nan=False)
            return token
        return value

    text = json.dumps(one_line(document), indent=2, sort_keys=True, allow_nan=False)
    for token, line in lines.items():
        text = text.replace(token, line, 1)
    return text + "\n"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp's 0600 would hide the file from others
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
