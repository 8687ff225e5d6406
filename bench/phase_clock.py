"""A pytest plugin for bench/: wall time of the test phase, as the controller sees it.

From the first test's start to the last test's end (collection and start-up left out; xdist
workers' tests included as their reports arrive). Written as JSON to $GPUBENCH_PHASE_CLOCK.
Load it with ``PYTHONPATH=bench python -m pytest -p phase_clock ...``.

In a fresh process the plugin started (a confirmation), it writes where that process's time
went instead, to ``$GPUBENCH_PHASE_CLOCK.child-<pid>``: seconds from the process's start to
pytest loading its plugins, to the end of configuration, of collection, to the first test,
from there to the last test's end, to the session's end, to pytest's unconfigure and to the
interpreter's exit handlers (what follows them, the interpreter's own teardown, is the rest
of the process's wall time). Written at pytest's unconfigure too: such a process ends there
(plugin/child.py), its exit handlers unrun. With $GPUBENCH_CHILD_PROFILE set, it also writes a
cProfile of itself (``.prof``, from loading this plugin to the exit handlers) and the stacks
of its threads every half second from then on (``.exit``: what its exit waits for).
"""

from __future__ import annotations

import atexit
import cProfile
import faulthandler
import json
import os
import time
from pathlib import Path

import pytest

_span: list[float] = []
# Read now: the gpubench plugin takes the variable out of the environment when it configures.
_CHILD = os.environ.get("PYTEST_GPUBENCH_CHILD")
_stamps: dict[str, float] = {"plugins_loaded": time.time()}
_child_file: Path | None = None  # where a fresh process writes its steps, once it knows
_profile = cProfile.Profile() if _CHILD and os.environ.get("GPUBENCH_CHILD_PROFILE") else None
if _profile is not None:
    _profile.enable()


def _process_start() -> float | None:
    """When this process started (Linux: /proc), in seconds since the epoch."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def pytest_configure(config: object) -> None:
    _stamps["configured"] = time.time()


def pytest_collection_finish(session: object) -> None:
    _stamps["collected"] = time.time()


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if not _span:
        _span.append(time.time())


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    del _span[1:]
    _span.append(time.time())


@pytest.hookimpl(tryfirst=True)  # before the child's role ends the process
def pytest_unconfigure(config: object) -> None:
    _stamps["unconfigured"] = time.time()
    if _child_file is not None:
        _write_child(_child_file, at_exit=False)


def pytest_sessionfinish(session: object) -> None:
    path = os.environ.get("GPUBENCH_PHASE_CLOCK")
    config = getattr(session, "config", None)
    if not path or hasattr(config, "workerinput"):
        return
    if _CHILD:
        global _child_file
        _stamps["session_done"] = time.time()
        _child_file = Path(f"{path}.child-{os.getpid()}")
        atexit.register(_write_child, _child_file)
    elif len(_span) == 2:
        Path(path).write_text(json.dumps({"test_phase_s": round(_span[1] - _span[0], 2)}))


def _write_child(path: Path, at_exit: bool = True) -> None:
    if _profile is not None:
        _profile.disable()
        _profile.dump_stats(f"{path}.prof")
        if not at_exit:
            _profile.enable()  # on to the exit handlers, if they run
        else:
            trace = open(f"{path}.exit", "w")  # noqa: SIM115 - open until the process ends
            faulthandler.dump_traceback_later(0.5, repeat=True, file=trace)
    start = _process_start()
    marks = [("start", start), *_stamps.items()]
    if len(_span) == 2:
        marks += [("first_test", _span[0]), ("tests_done", _span[1])]
    if at_exit:
        marks.append(("atexit", time.time()))
    marks.sort(key=lambda mark: mark[1] or 0.0)
    known = [(name, t) for name, t in marks if t is not None]
    pairs = zip(known, known[1:], strict=False)
    steps = {f"{a}->{b}": round(tb - ta, 3) for (a, ta), (b, tb) in pairs}
    path.write_text(json.dumps({"steps_s": steps}))
