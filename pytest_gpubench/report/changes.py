"""What the change points of each test's history say (judge/changes.py decides): the lines of
``gpubench show``, of a save run and of a gated run, and the JSON report's ``changes``.

A test's history is that of the binary it ran (core.baseline.Binary); each test is judged
against its own threshold (a flag needs half of it, ``judge.changes.min_change_for``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..core.records import Result, SessionRecord
from ..judge.changes import ALPHA, MIN_SESSIONS, Changes, detect, min_change_for, p_values
from ..store.baseline import Baseline

SHOW_HEADING = "creep or step toward slower in the history (docs/verdict.md):"
SAVED_HEADING = "gpubench: the saved history shows a creep or a step toward slower (a warning):"


def of_sessions(records: Sequence[SessionRecord], threshold: float) -> Changes:
    """The change points of ``records`` (oldest first) of a test gated at ``threshold``."""
    logs = [math.log(r.median_ms) for r in records]
    return detect(logs, min_change=min_change_for(threshold))


def _history(result: Result, baseline: Baseline) -> tuple[SessionRecord, ...]:
    """The history of the binary ``result`` ran, () when the baseline has none of it."""
    m = result.measurement
    entry = baseline.entries.get(m.key)
    if entry is None or entry.timer != m.timer:
        return ()
    binary = entry.binary_for(m.kernels)
    return () if binary is None else binary.history


def of_run(
    results: Sequence[Result], baseline: Baseline, saved: bool = False
) -> dict[str, Changes]:
    """Per result with a history, that history and the result's first session: what the
    JSON report and the notes of a run say, read before a save adds the run's sessions;
    ``saved``: the history alone, as the save left it."""
    found = {}
    for r in results:
        history = _history(r, baseline)
        if history:
            records = history if saved else [*history, r.measurement.record]
            found[r.key] = of_sessions(records, r.measurement.threshold)
    return found


def flagged_lines(changes: Mapping[str, Changes], names: Mapping[str, str]) -> list[str]:
    """``name: creep: ...``, one line per flagged key, sorted by key (``names``: the name to
    show per key; the key where it has none)."""
    return [f"{names.get(k, k)}: {c.reason}" for k, c in sorted(changes.items()) if c.flag]


def note_lines(results: Sequence[Result], changes: Mapping[str, Changes]) -> list[str]:
    """The notes of a run under its table: a flag of the history with this run's session
    fails nothing (a creep past the threshold is the verdict's)."""
    names = {r.key: r.test for r in results}
    return [f"{line}; a note, not a failure" for line in flagged_lines(changes, names)]


def saved_lines(results: Sequence[Result], baseline: Baseline) -> list[str]:
    """After a save: the tests of this run whose saved history is flagged, under a heading;
    none when none is."""
    lines = flagged_lines(of_run(results, baseline, saved=True), {r.key: r.test for r in results})
    return headed(lines, SAVED_HEADING)


def flagged_of(baseline: Baseline, threshold: float) -> list[str]:
    """``gpubench show``: a line for each entry whose latest binary's history is flagged,
    sorted by key (:func:`headed` puts them under their heading). The permutation p-values of
    every history of one length are found at once, and only those under ``ALPHA`` (steps or
    rise) go on to ``detect``, which flags nothing else: one at a time, 10^5 tests took minutes."""
    by_length: dict[int, list[str]] = {}
    for key, entry in baseline.entries.items():
        if len(entry.history) >= MIN_SESSIONS:
            by_length.setdefault(len(entry.history), []).append(key)
    changes = {}
    for keys in by_length.values():
        logs = [math.log(r.median_ms) for k in keys for r in baseline.entries[k].history]
        p_step, p_rise = p_values(np.reshape(logs, (len(keys), -1)))
        for k, a, b in zip(keys, p_step, p_rise, strict=True):
            if min(a, b) <= ALPHA:
                changes[k] = of_sessions(baseline.entries[k].history, threshold)
    return flagged_lines(changes, {})


def headed(lines: Sequence[str], heading: str = SHOW_HEADING) -> list[str]:
    """Flagged lines under their heading (``show``'s by default); none when none is flagged."""
    return [heading, *(f"  {line}" for line in lines)] if lines else []
