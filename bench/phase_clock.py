"""A pytest plugin for bench/: wall time of the test phase, as the controller sees it.

From the first test's start to the last test's end (collection and start-up left out; xdist
workers' tests included as their reports arrive). Written as JSON to $GPUBENCH_PHASE_CLOCK.
Load it with ``PYTHONPATH=bench python -m pytest -p phase_clock ...``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

_span: list[float] = []


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if not _span:
        _span.append(time.time())


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    del _span[1:]
    _span.append(time.time())


def pytest_sessionfinish(session: object) -> None:
    path = os.environ.get("GPUBENCH_PHASE_CLOCK")
    config = getattr(session, "config", None)
    child = os.environ.get("PYTEST_GPUBENCH_CHILD")  # a confirmation run: not the phase
    if path and not child and len(_span) == 2 and not hasattr(config, "workerinput"):
        Path(path).write_text(json.dumps({"test_phase_s": round(_span[1] - _span[0], 2)}))
