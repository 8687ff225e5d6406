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
import time
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


def child_environment(out: Path, device_index: int | None) -> dict[str, str]:
    """The environment of a child: the parent's, as no xdist worker, on the parent's device."""
    env = {k: v for k, v in os.environ.items() if k not in WORKER_VARIABLES}
    env[CHILD_VARIABLE] = str(out)
    if device_index is not None:
        env[DEVICE_VARIABLE] = str(device_index)
    # A child loads what its parent compiled from Inductor's caches; a pool of compile
    # workers only delays its exit (by 4.5 s on an H200: bench/child_cost.py).
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def start_child(
    args: Sequence[str], cwd: Path, out: Path, device_index: int | None = None
) -> subprocess.Popen[bytes] | ChildRun:
    """Start ``python -m pytest *args`` in ``cwd``, its output to a file beside ``out`` (a
    pipe nobody reads while another child runs could fill up and stop it)."""
    try:
        with open(out.with_suffix(".log"), "wb") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "pytest", *args],
                cwd=cwd,
                env=child_environment(out, device_index),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
    except OSError as exc:
        return ChildRun(error=f"cannot start a fresh process: {exc.strerror or exc}")


def finish_child(
    proc: subprocess.Popen[bytes] | ChildRun,
    out: Path,
    timeout_s: float = CHILD_TIMEOUT_S,
    limit_s: float | None = None,
) -> ChildRun:
    """Wait for a started child (at most ``timeout_s``; ``limit_s``: the limit to name, when
    the wait is what is left of a longer one) and read what it measured from ``out``."""
    if isinstance(proc, ChildRun):
        return proc  # it did not start
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return ChildRun(error=f"a fresh process ran over {limit_s or timeout_s:g} s")
    try:
        document = json.loads(out.read_text(encoding="utf-8"))
        info = SessionInfo.from_json(document["session_info"])
        session = str(document["session"])
        results = [Result.from_dict(entry) for entry in document["results"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        try:
            output = out.with_suffix(".log").read_text(encoding="utf-8", errors="replace")
        except OSError:
            output = ""
        tail = " ".join(output.strip().splitlines()[-1:])
        return ChildRun(
            error=f"a fresh process (exit {proc.returncode}) measured nothing: {tail or exc}"
        )
    for result in results:
        result.session_infos = {**result.session_infos, session: info}
    return ChildRun(results)


def run_child(
    args: Sequence[str], cwd: Path, out: Path, device_index: int | None = None
) -> ChildRun:
    """Run ``python -m pytest *args`` in ``cwd`` and read what it measured from ``out``."""
    return finish_child(start_child(args, cwd, out, device_index), out)


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
    """``count`` fresh processes, each writing to a temporary file of its own.

    ``nodeids``: they confirm these tests, and start together: a confirming child holds the
    device lock from its first test to its exit (the plugin's ``pytest_runtestloop``), so
    their start-up (interpreter, imports, collection) overlaps and their GPU work does not.
    Otherwise (recording sessions, each of which may start confirmations of its own) one
    after the other."""
    with tempfile.TemporaryDirectory(prefix="gpubench-child-") as folder:
        outs = [Path(folder) / f"child-{i}.json" for i in range(count)]
        if nodeids is None:
            runs = []
            for i, out in enumerate(outs):
                progress(i + 1, count)
                runs.append(run_child(args, cwd, out, device_index))
            return runs
        started: list[subprocess.Popen[bytes] | ChildRun] = []
        try:
            for i, out in enumerate(outs):
                write_request(out, nodeids)
                progress(i + 1, count)
                started.append(start_child(args, cwd, out, device_index))
            # Each waits for those before it on the device: the last may take them all.
            limit = CHILD_TIMEOUT_S * count
            deadline = time.monotonic() + limit
            return [
                finish_child(proc, out, max(0.0, deadline - time.monotonic()), limit)
                for proc, out in zip(started, outs, strict=True)
            ]
        finally:  # interrupted: no child goes on timing behind the user's back
            for proc in started:
                if isinstance(proc, subprocess.Popen) and proc.poll() is None:
                    proc.kill()
                    proc.wait()
