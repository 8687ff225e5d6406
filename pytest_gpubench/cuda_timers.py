"""CUDA timers: the only module that times with torch. Imported when a GPU measurement starts.

Two ideas keep launch overhead out of the numbers:
- a blocking kernel (``torch.cuda._sleep``) is queued before the start event, so the host
  enqueues the event, the work and the stop event while the GPU is still busy, and the events
  bracket GPU work only, never the host's launch latency;
- ``cuda-graph`` captures many back-to-back calls in one CUDA graph and times a replay, so
  per-launch CPU cost disappears and the event pair's own cost is spread over many calls.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any

import torch

from .engine import Sampler, Timer, Workload

# A graph replay lasts about this long: long enough that the replay's fixed cost is small,
# short enough that a measurement still takes many samples within its budget.
GRAPH_REPLAY_TARGET_MS = 1.0
MAX_GRAPH_CALLS = 1000
# The blocking kernel must outlast the host's enqueueing of one sample; with margin.
SLEEP_MIN_MS = 0.05
SLEEP_MAX_MS = 20.0


@functools.cache
def _sleep_cycles_per_ms() -> float:
    """Measure how many ``torch.cuda._sleep`` cycles take one millisecond on this GPU."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 2_000_000
    torch.cuda._sleep(cycles)  # first launch loads the kernel
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(3):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return cycles / best


def _sleep(ms: float) -> None:
    torch.cuda._sleep(int(ms * _sleep_cycles_per_ms()))


@functools.cache
def _flush_buffer() -> torch.Tensor:
    """A buffer twice the L2 size, allocated once; zeroing it evicts the workload's data."""
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device="cuda")


def _host_ms(call: Callable[[], Any]) -> float:
    """Host time to enqueue one call (no sync): how long the blocking kernel must last."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return sorted(times)[1]


class CudaEventTimer:
    """One CUDA event pair around each call, queued behind a blocking kernel.

    Includes the GPU time of every kernel of the call on the current stream and the gaps
    between them; excludes the host's launch latency of the first kernel. ``cold=True``
    zeroes a buffer of twice the L2 size before every sample (L2 cold); otherwise L2 holds
    whatever the previous call left (hot). Supports ``setup`` (fresh arguments per sample).
    """

    def __init__(self, cold: bool = False) -> None:
        self.cold = cold
        self.name = "cuda-event-cold" if cold else "cuda-event"

    def sampler(self, workload: Workload, note: str = "") -> Sampler:
        if workload.slow:  # measuring the enqueue time would cost three slow calls
            sleep_ms = SLEEP_MAX_MS
        else:
            sleep_ms = min(SLEEP_MAX_MS, max(SLEEP_MIN_MS, 2 * _host_ms(workload.prepare())))
        if self.cold:
            sleep_ms += 0.01  # room to enqueue the flush's own launch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush = _flush_buffer() if self.cold else None

        def sample() -> float:
            call = workload.prepare()
            if flush is not None:
                flush.zero_()
            _sleep(sleep_ms)
            start.record()
            call()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)

        sampler = Sampler(timer=self.name, sample=sample, calls_per_sample=1, note=note)
        if workload.slow:  # tells the engine what a sample costs before it warms up
            sampler.taken = (sample(),)
        return sampler


class CudaGraphTimer:
    """Back-to-back calls captured in one CUDA graph; a sample is one replay's time / calls.

    Measures the GPU time of the call's kernels with the launch gaps of a graph, L2 hot.
    Functions that cannot be captured (they synchronize, use the legacy default stream, or
    take fresh arguments from ``setup``) are timed by ``cuda-event`` instead, and the result
    records that timer's name with the reason.
    """

    name = "cuda-graph"

    def sampler(self, workload: Workload) -> Sampler:
        fallback = CudaEventTimer()
        if workload.setup is not None:
            return fallback.sampler(
                workload, note="setup given: graph replay cannot refresh arguments"
            )
        call = workload.prepare()
        try:
            # A slow function's first call already set up its libraries: no warm calls.
            one = self._capture(call, 1, warm_calls=0 if workload.slow else 2)
            first_ms = self._replay_ms(one)
            if workload.slow and first_ms >= GRAPH_REPLAY_TARGET_MS:
                # One call fills a replay: no batching, and that replay was the first sample.
                return Sampler(
                    timer=self.name,
                    sample=lambda: self._replay_ms(one),
                    close=one.reset,
                    taken=(first_ms,),
                )
            estimate_ms = min([first_ms] + [self._replay_ms(one) for _ in range(2)])
            calls = max(1, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_TARGET_MS / estimate_ms)))
            graph = self._capture(call, calls) if calls > 1 else one
        except Exception as exc:  # any capture failure means: time it without a graph
            torch.cuda.synchronize()
            return fallback.sampler(workload, note=f"graph capture failed ({_root_cause(exc)})")
        return Sampler(
            timer=self.name,
            sample=lambda: self._replay_ms(graph) / calls,
            calls_per_sample=calls,
            close=graph.reset,
        )

    @staticmethod
    def _capture(call: Callable[[], Any], calls: int, warm_calls: int = 2) -> torch.cuda.CUDAGraph:
        # Libraries set up workspaces on first use; do that outside the capture, on a side
        # stream as the CUDA-graph docs ask.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warm_calls):
                call()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                call()
        torch.cuda.synchronize()
        return graph

    @staticmethod
    def _replay_ms(graph: torch.cuda.CUDAGraph) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _sleep(SLEEP_MIN_MS)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


def _root_cause(exc: BaseException) -> str:
    """The first error of a chain: leaving a broken capture raises a second, vaguer one."""
    while exc.__context__ is not None and exc.__context__ is not exc:
        exc = exc.__context__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:120]}"


def make(name: str) -> Timer:
    if name == "cuda-event":
        return CudaEventTimer()
    if name == "cuda-event-cold":
        return CudaEventTimer(cold=True)
    return CudaGraphTimer()  # "auto" and "cuda-graph"
