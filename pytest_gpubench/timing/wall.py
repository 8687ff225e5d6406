"""The host-clock timer: no torch here (a CUDA process hands it its synchronize)."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable

from .engine import Sampler, Workload

# A host-clock sample covers at least this long, batching calls to fast functions, so the
# clock's resolution and the loop's own cost stay negligible.
WALL_SAMPLE_MIN_MS = 0.1
MAX_CALLS_PER_SAMPLE = 1000
# A process that ran on a CPU for less than this share of the time it timed was waiting: for
# a CPU, another process had it (a loaded machine), or the function slept.
MIN_BUSY_SHARE = 0.8


def host_caveat(threads: int | None, busy: float | None) -> str:
    """What makes host timings of CPU work unreliable: torch's intra-op threads (each call
    waits for the slowest of them, which other processes delay) and a process that did not
    run for much of the time it timed. '' when neither."""
    parts = []
    if threads is not None and threads > 1:
        parts.append(
            f"torch runs {threads} threads per operation (torch.set_num_threads(1) or "
            "OMP_NUM_THREADS=1 steadies host timings)"
        )
    if busy is not None and busy < MIN_BUSY_SHARE:
        parts.append(
            f"the process ran on a CPU {busy:.0%} of the time it timed (a loaded machine, or "
            "a function that waits)"
        )
    return "; ".join(parts)


def run_delay_ns() -> int | None:
    """Nanoseconds this thread has been ready to run without a CPU (other threads had them,
    or its cgroup's quota ran out): Linux's schedstat ``run_delay``; None elsewhere, and
    where the kernel keeps no such statistics (all zeros). Unlike a low share of CPU time,
    it does not count a function's own waits (sleeps, I/O, a device)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as stats:
            ran, waited = (int(v) for v in stats.read().split()[:2])
    except (OSError, ValueError):
        return None
    return waited if ran else None  # (a thread that reads the file has run)


def torch_threads() -> int | None:
    """torch's intra-op threads, if the user's code imported torch (never imported here)."""
    torch = sys.modules.get("torch")
    get = getattr(torch, "get_num_threads", None)
    return int(get()) if callable(get) else None


class WallTimer:
    """Host clock (``time.perf_counter_ns``) around the call.

    Includes everything the host does: Python overhead, launches, and, when ``synchronize`` is
    given (CUDA available), the device work up to a full synchronization. Cache state: hot.
    """

    name = "wall"

    def __init__(self, synchronize: Callable[[], None] | None = None, note: str = "") -> None:
        self._sync = synchronize or (lambda: None)
        self._cpu_only = synchronize is None
        self._note = note

    def sampler(self, workload: Workload) -> Sampler:
        calls: int = 1
        taken: tuple[float, ...] = ()
        spent = [0, 0, 0]  # CPU time, wall time and time waiting for a CPU, in ns
        waits = run_delay_ns() is not None
        if workload.setup is None:
            one_ms = self._one_call_ms(workload)
            calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(WALL_SAMPLE_MIN_MS / one_ms)))
            # A call long enough to be a sample on its own is one: a slow function does not
            # pay for its calibration call twice.
            taken = (one_ms,) if calls == 1 else ()

        def sample() -> float:
            call = workload.prepare()
            self._sync()
            cpu = time.process_time_ns()
            delay = run_delay_ns() if waits else None
            start = time.perf_counter_ns()
            for _ in range(calls):
                call()
            self._sync()
            wall = time.perf_counter_ns() - start
            spent[0] += time.process_time_ns() - cpu
            spent[1] += wall
            if delay is not None:
                spent[2] += (run_delay_ns() or delay) - delay
            return wall / 1e6 / calls

        def caveat() -> str:
            # Work on a device waits for it by design: only CPU work says the host was busy.
            busy = spent[0] / spent[1] if self._cpu_only and spent[1] else None
            return host_caveat(torch_threads() if self._cpu_only else None, busy)

        return Sampler(
            timer=self.name,
            sample=sample,
            calls_per_sample=calls,
            note=self._note,
            taken=taken,
            caveat=caveat,
            cpu_wait=lambda: spent[2] / spent[1] if waits and spent[1] else None,
        )

    def _one_call_ms(self, workload: Workload) -> float:
        """One call, timed as a sample of one call is."""
        call = workload.prepare()
        self._sync()
        start = time.perf_counter_ns()
        call()
        self._sync()
        return max((time.perf_counter_ns() - start) / 1e6, 1e-6)
