"""The host-clock timer: no torch here (a CUDA process hands it its synchronize)."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable

from .engine import Sampler, Workload

# A host-clock sample covers at least this long, batching calls to fast functions, so the
# clock's resolution and the loop's own cost stay negligible.
WALL_SAMPLE_MIN_MS = 0.1
MAX_CALLS_PER_SAMPLE = 1000
# Where the run delay is not known: a process that ran on a CPU for less than this share of
# the time it timed was waiting (another process had the CPU, or the function slept).
MIN_BUSY_SHARE = 0.8
# A thread of the process that was ready to run and had no CPU for at least this share of the
# time it timed is said (host_caveat); over judge.gate's MAX_CPU_WAIT, nothing is judged.
NOTED_CPU_WAIT = 0.05


def host_caveat(threads: int | None, busy: float | None, wait: float | None = None) -> str:
    """What makes host timings unreliable, '' when nothing: torch's intra-op threads (each call
    waits for the slowest, which other processes delay) and a process kept waiting for a CPU
    (``wait``: the run delay's share, see run_delays_ns; where it is not known, a ``busy``
    share of CPU time under MIN_BUSY_SHARE)."""
    parts = []
    if threads is not None and threads > 1:
        parts.append(
            f"torch runs {threads} threads per operation (torch.set_num_threads(1) or "
            "OMP_NUM_THREADS=1 steadies host timings)"
        )
    if wait is not None:
        if wait >= NOTED_CPU_WAIT:
            parts.append(
                f"the process waited for a CPU {wait:.0%} of the time it timed (other "
                "processes had them)"
            )
    elif busy is not None and busy < MIN_BUSY_SHARE:
        parts.append(
            f"the process ran on a CPU {busy:.0%} of the time it timed (a loaded machine, or "
            "a function that waits)"
        )
    return "; ".join(parts)


def run_delays_ns() -> dict[str, int] | None:
    """Nanoseconds each thread of this process has been ready to run without a CPU (other
    threads had them, or its cgroup's quota ran out), by thread id: Linux's schedstat
    ``run_delay``; None elsewhere, and where the kernel keeps no such statistics (all
    zeros). Unlike a low share of CPU time, it does not count a function's own waits
    (sleeps, I/O, a device), and it sees the threads a call hands its work to (torch's,
    a BLAS library's), whose delays the calling thread only waits for."""
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return None
    delays, ran = {}, 0
    for thread in threads:
        try:
            with open(f"/proc/self/task/{thread}/schedstat", encoding="ascii") as stats:
                fields = stats.read().split()
            ran += int(fields[0])
            delays[thread] = int(fields[1])
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return delays if ran else None  # (a thread that reads the files has run)


def waited_share(before: dict[str, int], after: dict[str, int], span_ns: int) -> float:
    """The largest share of ``span_ns`` that one thread spent ready to run without a CPU,
    between two readings of run_delays_ns (a thread started in between: since it started).
    One thread, not their sum: a call of two threads, each delayed half the time, took about
    half its time waiting, not all of it."""
    waited = max((delay - before.get(thread, 0) for thread, delay in after.items()), default=0)
    return min(1.0, max(0.0, waited / span_ns)) if span_ns > 0 else 0.0


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
        spent = [0, 0]  # CPU time and wall time, in ns
        # The threads' run delays and the clock at the first sample: the time waited for a
        # CPU is read over the whole sampling, from there to when it is asked for.
        first: list[tuple[dict[str, int], int]] = []
        waits = run_delays_ns() is not None
        if workload.setup is None:
            one_ms = self._one_call_ms(workload)
            calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(WALL_SAMPLE_MIN_MS / one_ms)))
            # A call long enough to be a sample on its own is one: a slow function does not
            # pay for its calibration call twice.
            taken = (one_ms,) if calls == 1 else ()

        def sample() -> float:
            call = workload.prepare()
            self._sync()
            if waits and not first:
                delays = run_delays_ns()
                if delays is not None:
                    first.append((delays, time.perf_counter_ns()))
            cpu = time.process_time_ns()
            start = time.perf_counter_ns()
            for _ in range(calls):
                call()
            self._sync()
            wall = time.perf_counter_ns() - start
            spent[0] += time.process_time_ns() - cpu
            spent[1] += wall
            return wall / 1e6 / calls

        def cpu_wait() -> float | None:
            now = run_delays_ns() if first else None
            if now is None:
                return None
            before, started = first[0]
            return waited_share(before, now, time.perf_counter_ns() - started)

        def caveat() -> str:
            # Work on a device waits for it by design: only CPU work's share of CPU time says
            # the host was busy, where the run delay is not known.
            busy = spent[0] / spent[1] if self._cpu_only and spent[1] else None
            threads = torch_threads() if self._cpu_only else None
            return host_caveat(threads, busy, cpu_wait())

        return Sampler(
            timer=self.name,
            sample=sample,
            calls_per_sample=calls,
            note=self._note,
            taken=taken,
            caveat=caveat,
            cpu_wait=cpu_wait,
        )

    def _one_call_ms(self, workload: Workload) -> float:
        """One call, timed as a sample of one call is."""
        call = workload.prepare()
        self._sync()
        start = time.perf_counter_ns()
        call()
        self._sync()
        return max((time.perf_counter_ns() - start) / 1e6, 1e-6)
