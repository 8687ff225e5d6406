"""Fresh processes: to confirm a verdict, and to record a session into the baselines.

A process's own shift (where its buffers land in L2, its clocks, its launch path) is shared
by everything measured in it, so a re-measure in the same process confirms its false alarms.
A child here is a new ``python -m pytest`` with the user's options, run from where the user
ran pytest, that times the same tests (taking the same device lock) and writes what it
measured to a file the parent reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .baseline import SessionInfo
from .gpus import DEVICE_VARIABLE
from .results import Result
from .settings import CHILD_VARIABLE

# A child runs one test, or the whole selection when recording a session: imports, compiles
# and measurements included. Longer than this, it is stuck.
CHILD_TIMEOUT_S = 1800.0
# Variables of the parent's xdist worker that would make the child think it is one.
WORKER_VARIABLES = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_CURRENT_TEST",
)
# The options of ours a child must not inherit: it gets its own values of these.
OWN_FLAGS = ("--gpubench-save",)
OWN_OPTIONS = ("--gpubench-confirm", "--gpubench-sessions")

# pytest's own options that would make a child skip the tests it is asked to run (the cache
# of the last failures, stepwise, stopping early) or overwrite the parent's report files.
SKIPPED_FLAGS = (
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--nf",
    "--new-first",
    "--sw",
    "--stepwise",
    "--sw-skip",
    "--stepwise-skip",
    "-x",
    "--exitfirst",
)
SKIPPED_OPTIONS = ("--maxfail", "--junitxml", "--junit-xml", "--report-log")


@dataclass(frozen=True)
class ChildRun:
    """What one fresh process measured, or why it did not."""

    results: list[Result] = field(default_factory=list)
    error: str = ""


def child_args(invocation: Sequence[str], *, save: bool, confirm: int, single: bool) -> list[str]:
    """The pytest arguments of a child: the user's (ini, plugins, selection, -k, timer,
    threshold...) without those that would skip tests or overwrite the user's report files,
    and our own options with the child's values. ``single``: the child times a few tests
    named in its request file (a confirmation), so without xdist workers."""
    drop_flags = set(OWN_FLAGS + SKIPPED_FLAGS)
    drop_options = OWN_OPTIONS + SKIPPED_OPTIONS
    args: list[str] = []
    skip = False
    for arg in invocation:
        if skip:
            skip = False
            continue
        if arg in drop_flags:
            continue
        if arg in drop_options:
            skip = True  # its value follows
            continue
        if arg.startswith(tuple(f"{option}=" for option in drop_options)):
            continue
        args.append(arg)
    if single:
        args += ["-n", "0"]  # xdist is loaded (the caller checked): no workers
    args += ["--gpubench-confirm", str(confirm), "--gpubench-sessions", "1"]
    if save:
        args.append("--gpubench-save")
    return args


def write_request(out: Path, nodeids: Sequence[str]) -> None:
    """Ask a child to run only these tests of its collection (it reads them from its output
    file before overwriting it with its results)."""
    out.write_text(json.dumps({"nodeids": list(nodeids)}), encoding="utf-8")


def read_request(out: Path) -> list[str] | None:
    """The tests a parent asked this child to run, or None for all of its selection."""
    try:
        request = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    nodeids = request.get("nodeids") if isinstance(request, dict) else None
    return [str(n) for n in nodeids] if isinstance(nodeids, list) else None


def run_child(
    args: Sequence[str], cwd: Path, out: Path, device_index: int | None = None
) -> ChildRun:
    """Run ``python -m pytest *args`` in ``cwd`` and read what it measured from ``out``."""
    env = {k: v for k, v in os.environ.items() if k not in WORKER_VARIABLES}
    env[CHILD_VARIABLE] = str(out)
    if device_index is not None:
        env[DEVICE_VARIABLE] = str(device_index)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return ChildRun(error=f"a fresh process ran over {CHILD_TIMEOUT_S:g} s")
    except OSError as exc:
        return ChildRun(error=f"cannot start a fresh process: {exc.strerror or exc}")
    try:
        document = json.loads(out.read_text(encoding="utf-8"))
        info = SessionInfo.from_json(document["session_info"])
        session = str(document["session"])
        results = [Result.from_dict(entry) for entry in document["results"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        tail = " ".join((proc.stdout + proc.stderr).strip().splitlines()[-1:])
        return ChildRun(
            error=f"a fresh process (exit {proc.returncode}) measured nothing: {tail or exc}"
        )
    for result in results:
        result.session_infos = {**result.session_infos, session: info}
    return ChildRun(results)


def child_document(session: str, info: SessionInfo, results: Sequence[Result]) -> dict[str, Any]:
    """What a child writes for its parent."""
    return {
        "session": session,
        "session_info": info.to_json(),
        "results": [r.to_dict() for r in results],
    }


def run_children(
    count: int,
    args: Sequence[str],
    cwd: Path,
    progress: Callable[[int, int], None] = lambda i, n: None,
    device_index: int | None = None,
    nodeids: Sequence[str] | None = None,
) -> list[ChildRun]:
    """``count`` fresh processes one after the other (they time on one device: never at
    once), each writing to a temporary file of its own; ``nodeids``: only these tests."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpubench-child-") as folder:
        for i in range(count):
            progress(i + 1, count)
            out = Path(folder) / f"child-{i}.json"
            if nodeids is not None:
                write_request(out, nodeids)
            runs.append(run_child(args, cwd, out, device_index))
    return runs
