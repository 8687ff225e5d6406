"""Merging two saves of one baseline file, for git (``gpubench merge-baselines``).

Two runs that saved sessions to one baseline file on two branches conflict in git: the
main-branch job of docs/ci/gpubench.yml rebases its commit onto a main that another save
moved. A save only appends the sessions of its run (``Update.apply``), so each side is the
common ancestor plus that side's updates: the merge finds one side's updates (its new
sessions, per entry), checks that applying them to the ancestor gives that side's file
exactly, and applies them to the other side's file as a save would. Anything a save does
not do (an entry removed or edited by hand, a file not read by this version) is refused
with the reason, and git leaves the conflict to a person: a merge never guesses.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..core.baseline import BaselineEntry, Update, applied
from ..core.errors import BaselineError
from ..core.records import SessionInfo, SessionRecord
from . import files as storage
from .baseline import WHAT, Baseline, document, dumps, load


def updates_between(
    ancestor: Baseline, saved: Baseline
) -> tuple[list[Update], dict[str, SessionInfo]]:
    """The updates that turned ``ancestor`` into ``saved``, and the sessions they add.

    Raises BaselineError when ``saved`` is not ``ancestor`` plus saves of new sessions."""
    new = {k: v for k, v in saved.sessions.items() if k not in ancestor.sessions}
    updates = []
    for key, entry in saved.entries.items():
        before = ancestor.entries.get(key)
        if before is not None and before.to_json() == entry.to_json():
            continue
        records = _new_records(entry, new)
        if not records:
            raise BaselineError(
                f"{WHAT} {saved.path}: entry {key!r:.200} differs from the ancestor's without "
                "a new session; merge it by hand"
            )
        updates.append(Update(key, records, entry.epoch in new, entry))
    replayed = applied(ancestor.entries, updates)
    if _as_json(replayed) != _as_json(saved.entries):
        raise BaselineError(
            f"{WHAT} {saved.path} is not its ancestor plus saved sessions (an entry removed "
            "or edited by hand?); merge it by hand"
        )
    return updates, new


def merge(ancestor: Baseline, current: Baseline, other: Baseline) -> str:
    """The text of ``current`` with the sessions ``other`` saved since ``ancestor``, as a
    save of them would have written it (its device fingerprint is ``other``'s: the latest
    save). Raises BaselineError when ``other`` is not ``ancestor`` plus saves."""
    updates, new = updates_between(ancestor, other)
    sessions = {**current.sessions, **new}
    entries = applied(current.entries, updates)
    device = other.device if updates else current.device
    extra = {**other.extra, **current.extra}  # a newer version's top-level keys: kept
    return dumps(document(device, sessions, entries, extra))


def merge_files(ancestor: Path, current: Path, other: Path) -> None:
    """git's merge driver (``%O %A %B``): the merge of the three files written to
    ``current``. An empty ancestor (both sides added the file) is a file of no entries."""
    text = merge(_load(ancestor), load(current), load(other))
    storage.write_atomic(current, text, WHAT)


def _load(path: Path) -> Baseline:
    if path.is_file() and path.stat().st_size == 0:
        return Baseline(path)
    return load(path)


def _new_records(entry: BaselineEntry, new: Mapping[str, SessionInfo]) -> tuple[SessionRecord, ...]:
    """The records of the latest binary (the one a save extends) whose sessions are new, in
    the order saved: the anchor's, then the history's (which may have rolled some out)."""
    seen: dict[str, SessionRecord] = {}
    for record in entry.anchor + entry.history:
        if record.session in new:
            seen.setdefault(record.session, record)
    return tuple(seen.values())


def _as_json(entries: Mapping[str, BaselineEntry]) -> dict[str, object]:
    return {k: e.to_json() for k, e in entries.items()}
