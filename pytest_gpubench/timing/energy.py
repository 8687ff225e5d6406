"""Energy per call from NVML's total-energy counter, informational (``--gpubench-energy``;
the method: docs/guide.md, "The fixture").

On an H100 the counter, and the power readings, move once every 100 ms (bench/energy_probe.py):
a window of 100 ms reads 560-980 W for a steady 712 W. Hence a window of back-to-back calls
of about ``WINDOW_S``, read between the counter's first and last update inside it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

from ..core.records import Energy

# Back-to-back calls fill this long a window: ten of the counter's updates on an H100.
WINDOW_S = 1.0
# The counter must move at least this often inside the window for a reading.
MIN_UPDATES = 3
# The thread polls this often: an update's time is known to within it.
POLL_S = 0.002
# Calls in one window at most, however short a call.
MAX_CALLS = 1_000_000


class PowerMeter(Protocol):
    """A GPU's NVML readings (``timing.clocks.ClockMonitor``)."""

    def energy_joules(self) -> float | None: ...

    def power_watts(self) -> tuple[float, str] | None: ...


class Poll(NamedTuple):
    """One poll of the meter: when, the counter (J), the power (W) and how it was read."""

    at: float
    joules: float | None
    watts: float | None
    source: str


def window_calls(per_call_s: float, window_s: float = WINDOW_S) -> int:
    """How many back-to-back calls of ``per_call_s`` fill ``window_s``."""
    if not per_call_s > 0 or not math.isfinite(per_call_s):
        return 1
    return max(1, min(MAX_CALLS, math.ceil(window_s / per_call_s)))


def energy_of(polls: Sequence[Poll], start: float, end: float, calls: int) -> Energy | None:
    """The energy of one of ``calls`` back-to-back calls run from ``start`` to ``end``, from
    the polls of the meter meanwhile: the counter's first and last update inside the window
    bound the span its energy is read over. None with fewer than MIN_UPDATES updates."""
    inside = [p for p in polls if start <= p.at <= end and p.joules is not None]
    updates = [b for a, b in zip(inside, inside[1:], strict=False) if b.joules != a.joules]
    if len(updates) < MIN_UPDATES:
        return None
    first, last = updates[0], updates[-1]
    assert first.joules is not None and last.joules is not None  # inside: read
    span = last.at - first.at
    if not last.joules > first.joules or not span > 0:
        return None
    watts = (last.joules - first.joules) / span
    powers = [p for p in polls if first.at <= p.at <= last.at and p.watts is not None]
    sampled = sum(p.watts for p in powers if p.watts is not None) / len(powers) if powers else None
    return Energy(
        joules_per_call=watts * (end - start) / calls,
        watts=watts,
        calls=calls,
        window_s=end - start,
        sampled_watts=sampled,
        power_source=powers[-1].source if powers else "",
    )


def measure_energy(
    call: Callable[[], object],
    sync: Callable[[], None],
    meter: PowerMeter,
    per_call_s: float,
    window_s: float = WINDOW_S,
    clock: Callable[[], float] = time.perf_counter,
) -> Energy | None:
    """Energy of one call of ``call`` over a window of back-to-back calls (``energy_of``),
    or None where the meter's counter does not move often enough in it."""
    if meter.energy_joules() is None:
        return None
    target = window_calls(per_call_s, window_s)
    polls: list[Poll] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            joules = meter.energy_joules()
            power = meter.power_watts()
            watts, source = power if power is not None else (None, "")
            polls.append(Poll(clock(), joules, watts, source))
            done.wait(POLL_S)

    poller = threading.Thread(target=poll, name="gpubench-energy", daemon=True)
    sync()
    poller.start()
    calls = 0
    start = clock()
    try:
        # Until the calls fill the window, or the host has launched for as long (a call
        # bound by its launches never fills it by count).
        while calls < target and clock() - start < window_s:
            call()
            calls += 1
        sync()
    finally:
        end = clock()
        done.set()
        poller.join()
    return energy_of(polls, start, end, calls)
