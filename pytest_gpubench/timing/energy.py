"""Energy per call from NVML's total-energy counter, informational (``--gpubench-energy``).

The counter is read around a window of back-to-back calls long enough for its resolution
(``WINDOW_S`` at least), synchronized at both ends; meanwhile a thread reads the board's
power, whose mean times the window's time cross-checks the counter. A window that is too
short for the counter to move, or a counter that goes backwards, gives no reading: never a
number that was not measured.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ..core.records import Energy

# At least this long a window: the counter's updates are milliseconds apart.
WINDOW_S = 0.1
# Power read this often during the window (the thread sleeps between reads).
POWER_PERIOD_S = 0.005
# Calls in one window at most, however short a call: its launches must stay cheap.
MAX_CALLS = 100_000


class PowerMeter(Protocol):
    """A GPU's NVML readings (``timing.clocks.ClockMonitor``)."""

    def energy_joules(self) -> float | None: ...

    def power_watts(self) -> tuple[float, str] | None: ...


def window_calls(per_call_s: float, window_s: float = WINDOW_S) -> int:
    """How many back-to-back calls of ``per_call_s`` fill ``window_s``."""
    if not per_call_s > 0 or not math.isfinite(per_call_s):
        return 1
    return max(1, min(MAX_CALLS, math.ceil(window_s / per_call_s)))


def measure_energy(
    call: Callable[[], object],
    sync: Callable[[], None],
    meter: PowerMeter,
    per_call_s: float,
    window_s: float = WINDOW_S,
    clock: Callable[[], float] = time.perf_counter,
) -> Energy | None:
    """Energy of one call of ``call`` over a window of back-to-back calls, or None where the
    meter reads nothing, or its counter does not move over the window."""
    calls = window_calls(per_call_s, window_s)
    sync()
    before = meter.energy_joules()
    if before is None:
        return None
    powers: list[tuple[float, str]] = []
    done = threading.Event()

    def read_power() -> None:
        while not done.is_set():
            reading = meter.power_watts()
            if reading is not None:
                powers.append(reading)
            done.wait(POWER_PERIOD_S)

    reader = threading.Thread(target=read_power, name="gpubench-power", daemon=True)
    started = clock()
    reader.start()
    try:
        for _ in range(calls):
            call()
        sync()
    finally:
        elapsed = clock() - started
        done.set()
        reader.join()
    after = meter.energy_joules()
    if after is None or not after > before or not elapsed > 0:
        return None
    joules = after - before
    sampled = sum(w for w, _ in powers) / len(powers) if powers else None
    return Energy(
        joules_per_call=joules / calls,
        watts=joules / elapsed,
        calls=calls,
        window_s=elapsed,
        sampled_watts=sampled,
        power_source=powers[-1][1] if powers else "",
    )
