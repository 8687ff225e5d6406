"""Not a test of the suite (pytest collects only test_*.py): bench/fla_plant.py runs it to
size a planted slowdown of test_fla.py's tests in time. Each case runs a test's body twice,
keeping each body's timed call with its own inputs (each side of an A/B run has its own),
and times the second followed by a spin of SLEEP_US against the first (``reference=``,
alternately in one process, by the timer the test gets): the ratio is what that spin does
to the test's time. FLA_SLEEP_US: {test name: [microseconds, ...]}, as JSON."""

from __future__ import annotations

import json
import os

import pytest
import test_fla
import torch

SLEEP_US: dict[str, list[float]] = json.loads(os.environ.get("FLA_SLEEP_US", "{}"))
# Case k<i> is the i-th (test, microseconds) of SLEEP_US in its order (bench/fla_plant.py's).
CASES = [(test, us) for test, spins in SLEEP_US.items() for us in spins]


def cases() -> dict[str, tuple[object, dict[str, object]]]:
    """test_fla.py's tests by name as pytest names them: the function and its parameters."""
    found: dict[str, tuple[object, dict[str, object]]] = {}
    for name, test in vars(test_fla).items():
        if not name.startswith("test_"):
            continue
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            found[name] = (test, {})
        for mark in marks:  # one parameter each, as the suite's are
            argname, values = mark.args
            for value in values:
                found[f"{name}[{value}]"] = (test, {argname: value})
    return found


@pytest.fixture(scope="module")
def cycles_per_us() -> float:
    """The spin kernel's clock cycles per microsecond on this GPU, now."""
    torch.cuda._sleep(1000)
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    cycles = 50_000_000
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / (start.elapsed_time(end) * 1000)


@pytest.mark.parametrize("test, sleep_us", CASES, ids=[f"k{i}" for i in range(len(CASES))])
def test_spin(gpubench, cycles_per_us, test, sleep_us):
    body, params = cases()[test]
    calls = []

    def keep(fn, *args, **kwargs):
        calls.append((fn, args, kwargs))
        return fn(*args, **kwargs)

    body(keep, **params)
    body(keep, **params)
    (plain, args, kwargs), (grown, grown_args, grown_kwargs) = calls
    cycles = max(1, round(sleep_us * cycles_per_us))

    def slower():
        out = grown(*grown_args, **grown_kwargs)
        torch.cuda._sleep(cycles)
        return out

    # The name carries the cycles spun, as this process's clock made them.
    gpubench(slower, reference=lambda: plain(*args, **kwargs), name=f"{cycles}cycles")
