"""Stored runs: the result file of each ``--gpubench`` run, kept under the baseline
directory (``<dir>/runs``) so that ``gpubench compare`` can name runs instead of paths.

A file per run, named by its session id (sortable: the UTC time first) and commit:
``20261127T233000Z-1a2b3c-0123abcd.json``. Written atomically by the process that owns the
session; the oldest beyond the number kept are removed. The folder ignores itself in git
(a ``.gitignore`` of ``*``, as pytest's ``.pytest_cache``): runs are one machine's, never
committed by accident.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from ..core.errors import GpubenchError
from ..core.samples import plural
from . import files as storage

RUNS = "runs"
NAME = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}(-[0-9a-f]{1,12})?\.json")
# The newest run, and the one N before it.
LAST = re.compile(r"last(?:~(\d{1,4}))?")


def folder(directory: Path) -> Path:
    """Where the runs of the baseline directory ``directory`` are kept."""
    return directory / RUNS


def file_name(session_id: str, commit: str | None) -> str:
    """A run's file name: its session id, then its commit's first 8 hex digits if known."""
    short = re.sub(r"[^0-9a-f]", "", (commit or "").lower())[:8]
    name = f"{session_id}-{short}.json" if short else f"{session_id}.json"
    if not NAME.fullmatch(name):
        raise ValueError(f"not a session id: {session_id!r}")
    return name


def save(directory: Path, name: str, text: str, keep: int) -> Path:
    """Write a run's result file ``name`` into the runs of ``directory`` and keep the
    newest ``keep``; return its path. StorageError (one line) when it cannot be written."""
    runs = folder(directory)
    storage.make_directory(
        runs, "folder of stored runs", "choose another --gpubench-dir, or --gpubench-keep-runs 0"
    )
    storage.gitignore(runs)
    path = runs / name
    storage.write_atomic(path, text, "stored run")
    for old in stored(directory)[:-keep]:
        with contextlib.suppress(OSError):
            old.unlink()
    return path


def stored(directory: Path) -> list[Path]:
    """The stored runs of ``directory``, oldest first (none when there is no such folder)."""
    runs = folder(directory)
    try:
        names = os.listdir(runs)
    except OSError:
        return []
    found = [runs / n for n in names if NAME.fullmatch(n)]

    def written(path: Path) -> tuple[str, int, str]:
        # The second in the name, then when it was written: two runs of one second.
        with contextlib.suppress(OSError):
            return path.name[:16], path.stat().st_mtime_ns, path.name
        return path.name[:16], 0, path.name

    return sorted(found, key=written)


def resolve(directory: Path, name: str) -> Path:
    """The stored run ``name`` means: ``last``, ``last~N`` (N runs before the last), or the
    start of a run's id; GpubenchError (one line) naming what there is."""
    runs = stored(directory)
    hint = "gpubench runs lists them"
    if not runs:
        raise GpubenchError(
            f"no result file {name} and no stored runs in {folder(directory)}: name a file of "
            "pytest --gpubench-json, or run pytest --gpubench first (it stores each run)"
        )
    last = LAST.fullmatch(name)
    if last:
        back = int(last.group(1) or 0)
        if back >= len(runs):
            raise GpubenchError(
                f"no stored run {name}: {folder(directory)} keeps {plural(len(runs), 'run')} "
                f"(last to last~{len(runs) - 1}); {hint}"
            )
        return runs[-1 - back]
    found = [p for p in runs if p.name.startswith(name)] if name else []
    if len(found) == 1:
        return found[0]
    if found:
        raise GpubenchError(
            f"stored run {name} is ambiguous: {len(found)} runs start with it; give more of "
            f"its id ({hint})"
        )
    raise GpubenchError(
        f"no result file or stored run {name}: name a file of pytest --gpubench-json, last, "
        f"last~N or the start of a run's id ({hint})"
    )
