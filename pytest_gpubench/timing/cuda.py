"""CUDA timers: the only module that times with torch. Imported when a GPU measurement starts.

Two ideas keep launch overhead out of the numbers:
- a blocking kernel (``torch.cuda._sleep``) is queued before the start event, so the host
  enqueues the event, the work and the stop event while the GPU is still busy, and the events
  bracket GPU work only, never the host's launch latency;
- ``cuda-graph`` captures many back-to-back calls in one CUDA graph and times a replay, so
  per-launch CPU cost disappears and the event pair's own cost is spread over many calls.

A graph timing only counts once a replay is shown to run the same kernels as an eager call
(CUPTI, through ``torch.profiler``): work launched outside the capturing stream (the legacy
default stream of ``kernel<<<grid, block>>>``) runs during capture and never again, and a
replay of nothing would read as a near-zero time. Functions that cannot be captured are timed
by ``cupti``: the device time of their kernels, summed from CUPTI, host gaps left out. Which
timer a function gets is decided by ``fallback.choose`` from what ``TorchProbe`` finds: this
module only makes the torch calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ..core.errors import GpubenchError
from ..core.kernels import Launch, from_trace, short
from ..core.samples import time_text
from .engine import Beside, Profile, Sampler, Timer, Workload
from .fallback import GraphPlan, choose, guarded_capture
from .wall import WallTimer

# The blocking kernel must outlast the host's enqueueing of one sample; with margin.
SLEEP_MIN_MS = 0.05
# Its name in a profile (aten's ``torch.cuda._sleep``).
SLEEP_KERNEL = "spin_kernel"
SLEEP_MAX_MS = 20.0
# A cupti sample profiles calls until their device time reaches this, or MAX_PROFILED_CALLS.
CUPTI_SAMPLE_TARGET_MS = 0.5
MAX_PROFILED_CALLS = 100
# Eager calls profiled to record what one call launches and its CUPTI device time.
PROFILED_EAGER_CALLS = 5
# What a trace's device time sums (CUPTI's activity kinds as torch's trace names them).
DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
# The runtime call that queues a graph's replay (cudaGraphLaunch, or a versioned name).
GRAPH_LAUNCH = "cudaGraphLaunch"


@functools.cache
def _sleep_cycles_per_ms() -> float:
    """Measure how many ``torch.cuda._sleep`` cycles take one millisecond on this GPU."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 2_000_000
    torch.cuda._sleep(cycles)  # first launch loads the kernel
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(3):
        best = min(best, _event_ms(start, end, lambda: torch.cuda._sleep(cycles)))
    return cycles / best


def _sleep(ms: float) -> None:
    torch.cuda._sleep(int(ms * _sleep_cycles_per_ms()))


def _event_ms(start: torch.cuda.Event, end: torch.cuda.Event, run: Callable[[], object]) -> float:
    """The device time between ``start`` and ``end`` recorded around ``run``'s launches."""
    start.record()
    run()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def _repeat(call: Callable[[], object], calls: int) -> Callable[[], None]:
    """``calls`` back-to-back calls of ``call``, as one."""

    def run() -> None:
        for _ in range(calls):
            call()

    return run


@functools.cache
def _flush_buffer() -> torch.Tensor:
    """A buffer twice the L2 size, allocated once; zeroing it evicts the workload's data."""
    l2_bytes = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
    return torch.empty(max(2 * l2_bytes, 1 << 20), dtype=torch.uint8, device="cuda")


# The cold timer's check of its flush: reads of a buffer of a quarter of L2, right after a
# flush against warm (read just before); a flush that evicts makes the first read come from
# memory, this much slower at least.
FLUSH_CHECK_READS = 5
FLUSH_SHOWN = 1.2


def flush_check(flush: torch.Tensor) -> str:
    """One line saying whether zeroing ``flush`` (twice L2) evicts a buffer that fits in L2:
    the median time of reading it right after a flush against warm."""
    probe = torch.ones(max(flush.numel() // 8 // 4, 1 << 16), dtype=torch.float32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def read(cold: bool) -> float:
        if cold:
            flush.zero_()
        else:
            probe.sum()  # in L2 now
        _sleep(1.0)  # 1 ms: the read is queued before its start is recorded
        return _event_ms(start, end, probe.sum)

    warm = sorted(read(False) for _ in range(FLUSH_CHECK_READS))[FLUSH_CHECK_READS // 2]
    cold = sorted(read(True) for _ in range(FLUSH_CHECK_READS))[FLUSH_CHECK_READS // 2]
    size = f"{probe.numel() * 4 / (1 << 20):.3g} MiB"
    times = f"a read of {size} took {time_text(cold)} after it, {time_text(warm)} warm"
    if warm > 0 and cold / warm >= FLUSH_SHOWN:
        return f"L2 flushed before each sample ({times}: {cold / warm:.2f}x)"
    return f"the L2 flush was not shown to evict ({times}): its samples may be partly warm"


def _host_ms(call: Callable[[], object], synced: bool = False) -> float:
    """Median host time of one call over three: to enqueue it (how long the blocking kernel
    must last), or with ``synced`` up to the end of its device work."""
    times = []
    for _ in range(3):
        if synced:
            torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if synced:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    torch.cuda.synchronize()
    return sorted(times)[1]


# --- CUPTI through torch.profiler ----------------------------------------------------------


def _profile_events(run: Callable[[], object], trace: bool = True) -> list[dict[str, Any]]:
    """The chrome-trace events of the device work ``run`` does (CUPTI activity records),
    read by ``_read``."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # The profiler's own notices must not fail a suite run with -W error.
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    return _read(prof, trace)


def _read(prof: Any, trace: bool) -> list[dict[str, Any]]:
    """A profile's events: its exported trace's; where ``trace`` is false and the first such
    read of this process with device work found them the same (``OwnEvents.agree``), the
    profiler's own, with the fields a kernel time reads (category, name, start, duration,
    correlation id), no trace written to a file and read back (on an H200, that took 1.1-1.7
    ms of a 3.6-5.1 ms sample of 61 kernels, and grows with the kernels:
    h200x2-2026-11-28f)."""
    if trace or OwnEvents.agree is False:
        return _trace_events(prof)
    own = _own_events(prof)
    if OwnEvents.agree is None:
        exported = _trace_events(prof)
        if any(e.get("cat") in DEVICE_WORK for e in exported):
            OwnEvents.agree = _work(own) == _work(exported)
        return exported
    # (no work read where the trace agreed before: the trace says whether there was any)
    return own if any(e["cat"] in DEVICE_WORK for e in own) else _trace_events(prof)


class OwnEvents:
    """Whether the profiler's own events read as its exported trace in this process (None:
    not compared yet); where not, the trace is read."""

    agree: bool | None = None


def _trace_events(prof: Any) -> list[dict[str, Any]]:
    # The trace file is the one stable place torch exposes grid, block and registers.
    fd, path = tempfile.mkstemp(prefix="gpubench-trace-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as handle:
            return list(json.load(handle).get("traceEvents", []))
    finally:
        os.unlink(path)


def _own_events(prof: Any) -> list[dict[str, Any]]:
    """The profiler's own events (torch's ``_KinetoEvent``) as trace events of the fields a
    kernel time reads: work on the device as ``kernel`` (torch 2.11 gives no category, only
    the device), the rest as ``cuda_runtime``; none where this torch has no such events."""
    try:
        return [
            {
                "cat": "kernel" if e.device_type().name == "CUDA" else "cuda_runtime",
                "name": e.name(),
                "ts": e.start_ns() / 1e3,
                "dur": e.duration_ns() / 1e3,
                "args": {"correlation": e.correlation_id()},
            }
            for e in prof.profiler.kineto_results.events()
        ]
    except (AttributeError, TypeError):
        return []


def _work(events: list[dict[str, Any]]) -> list[tuple[bool, str, int, int | None]]:
    """The device work and graph launches of a trace, comparable between two readers: each
    one's role (device work or not), name, duration in ns and correlation id, sorted."""
    return sorted(
        (
            e.get("cat") in DEVICE_WORK,
            str(e.get("name")),
            round(float(e.get("dur") or 0.0) * 1e3),
            _correlation(e),
        )
        for e in events
        if e.get("cat") in DEVICE_WORK
        or (e.get("cat") == "cuda_runtime" and GRAPH_LAUNCH in str(e.get("name")))
    )


def profile_call(call: Callable[[], object], slow: bool = False) -> Profile:
    """What one eager call runs on the device, and for how long (CUPTI), averaged over
    PROFILED_EAGER_CALLS calls (one where ``slow``)."""
    calls = 1 if slow else PROFILED_EAGER_CALLS
    events = _profile_events(_repeat(call, calls))
    return Profile(from_trace(events, calls), _device_ms(events) / calls)


@functools.cache
def prime_profiler() -> None:
    """Start CUPTI once, before anything is timed.

    Its first start costs seconds, and once started it stays attached (tearing it down made
    later small kernels 17% slower on an H200): so every timing of a session, the first test's
    included, runs in the same profiler-attached state, whatever order the tests run in."""
    scratch = torch.zeros(1, device="cuda")
    _profile_events(lambda: scratch.add_(1))


# --- graph capture that leaves the process as it found it -----------------------------------


def synchronizes(call: Callable[[], object]) -> str | None:
    """Why ``call`` cannot be captured, found without a capture attempt (None if not found).

    PyTorch's sync debug mode raises on operations that wait for the device (``.item()``,
    ``.cpu()``, ``nonzero``), which a capture would reject after corrupting process state."""
    previous = torch.cuda.get_sync_debug_mode()
    try:
        with warnings.catch_warnings():
            # Setting the mode warns that it is a prototype: under -W error, after setting it.
            warnings.simplefilter("ignore")
            torch.cuda.set_sync_debug_mode("error")
        call()
    except RuntimeError as exc:
        if "synchroniz" in str(exc):
            return "the function synchronizes with the host"
        raise
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.cuda.set_sync_debug_mode(previous)
        torch.cuda.synchronize()
    return None


def _capture(call: Callable[[], object], calls: int, warm_calls: int) -> torch.cuda.CUDAGraph:
    """``calls`` back-to-back calls captured in one graph, on a side stream (the capture's
    stream context restores the current stream whatever happens); on failure the process is
    repaired before the error propagates (``fallback.guarded_capture``)."""
    stream = torch.cuda.Stream()
    outer = torch.cuda.current_stream()
    stream.wait_stream(outer)
    graph = torch.cuda.CUDAGraph()
    with warnings.catch_warnings(), torch.cuda.stream(stream):
        # torch's notices about the capture (an empty graph) are ours to judge, not the suite's.
        warnings.simplefilter("ignore")
        # Libraries set up workspaces on first use: outside the capture, on its stream.
        for _ in range(warm_calls):
            call()
        stream.synchronize()
        run = _repeat(call, calls)
        guarded_capture(graph.capture_begin, run, graph.capture_end, _repair_after_failed_capture)
    outer.wait_stream(stream)
    torch.cuda.synchronize()
    return graph


def _repair_after_failed_capture() -> None:
    """Undo what a failed capture leaves behind.

    A capture that fails in ``capture_end`` never runs the RNG generators' capture epilogue,
    and every later ``torch.randn`` or dropout on the device raises "Offset increment outside
    graph capture". An empty capture that succeeds runs that epilogue (measured on an H200).
    """
    # The failed capture's error surfaces here once; it is not sticky.
    with contextlib.suppress(Exception):
        torch.cuda.synchronize()
    empty = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with warnings.catch_warnings(), torch.cuda.stream(stream):
        warnings.simplefilter("ignore")  # "The CUDA Graph is empty": that is the point
        empty.capture_begin()
        empty.capture_end()
    torch.cuda.synchronize()


def _replay_ms(graph: torch.cuda.CUDAGraph) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    _sleep(SLEEP_MIN_MS)
    return _event_ms(start, end, graph.replay)


class TorchGraph:
    """A captured ``torch.cuda.CUDAGraph`` (``fallback.Graph``)."""

    def __init__(self, graph: torch.cuda.CUDAGraph) -> None:
        self.graph = graph

    def replay_ms(self) -> float:
        return _replay_ms(self.graph)

    def profiled_replay(self) -> tuple[tuple[Launch, ...], float]:
        _sleep_cycles_per_ms()  # calibrated before the profile: its kernels are no replay's
        times: list[float] = []
        events = _profile_events(lambda: times.append(_replay_ms(self.graph)))
        # The blocking kernel queued before the start event is ours, the first on the stream;
        # later ones are the function's own torch.cuda._sleep, which the replay must run too.
        spins = [e for e in events if short(str(e.get("name", ""))) == SLEEP_KERNEL]
        ours = min(spins, key=lambda e: float(e.get("ts") or 0.0), default=None)
        replayed = [e for e in events if e is not ours]
        return from_trace(replayed), times[0]

    def kernel_ms(self) -> float:
        # No events and no blocking kernel: CUPTI's timestamps are the kernels' own.
        return _device_ms(_profile_events(self.graph.replay, trace=False))

    def reset(self) -> None:
        self.graph.reset()


class TorchProbe:
    """What ``fallback.choose`` asks of a workload, found with torch (``fallback.Probe``)."""

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self.call = workload.prepare()

    def eager(self) -> Profile:
        return profile_call(self.call, self.workload.slow)

    def synchronizes(self) -> str | None:
        return synchronizes(self.call)

    def capture(self, calls: int, warm_calls: int) -> TorchGraph:
        return TorchGraph(_capture(self.call, calls, warm_calls))


# --- timers ---------------------------------------------------------------------------------


class CudaEventTimer:
    """One CUDA event pair around each call, queued behind a blocking kernel.

    Includes the GPU time of every kernel of the call on the current stream and the gaps
    between them (host wake-ups of a synchronizing function included); excludes the host's
    launch latency of the first kernel. ``cold=True`` zeroes a buffer of twice the L2 size
    before every sample (L2 cold); otherwise L2 holds whatever the previous call left (hot).
    Supports ``setup`` (fresh arguments per sample).
    """

    def __init__(self, cold: bool = False) -> None:
        self.cold = cold
        self.name = "cuda-event-cold" if cold else "cuda-event"

    def sampler(self, workload: Workload) -> Sampler:
        profile = profile_call(workload.prepare(), workload.slow)
        if workload.slow:  # measuring the enqueue time would cost three slow calls
            sleep_ms = SLEEP_MAX_MS
        else:
            sleep_ms = min(SLEEP_MAX_MS, max(SLEEP_MIN_MS, 2 * _host_ms(workload.prepare())))
        if self.cold:
            sleep_ms += 0.01  # room to enqueue the flush's own launch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush = _flush_buffer() if self.cold else None
        note = flush_check(flush) if flush is not None else ""

        def sample() -> float:
            call = workload.prepare()
            if flush is not None:
                flush.zero_()
            _sleep(sleep_ms)
            return _event_ms(start, end, call)

        # A slow function's first sample tells the engine what one costs before it warms up.
        taken = (sample(),) if workload.slow else ()
        return Sampler(timer=self.name, sample=sample, profile=profile, taken=taken, note=note)


class CuptiTimer:
    """The device time of a call's kernels, copies and memsets, summed from CUPTI.

    Excludes launch gaps and host time, so functions that synchronize, launch on the legacy
    stream or cannot be captured get a number as stable as their kernels; the host's share of
    a call's wall time is reported beside it. L2 hot (calls run back to back). Supports
    ``setup``: then each sample profiles one call with fresh arguments.
    """

    name = "cupti"

    def sampler(
        self, workload: Workload, note: str = "", profile: Profile | None = None
    ) -> Sampler:
        call = workload.prepare()
        if profile is None:
            profile = profile_call(call, workload.slow)
        if not profile.launches or not profile.device_ms:
            raise GpubenchError(
                "the function ran no GPU work: the cupti timer has nothing to time; time it "
                "with --gpubench-timer=wall (or the marker's timer='wall')"
            )
        slow = workload.slow or workload.setup is not None
        calls = 1 if slow else math.ceil(CUPTI_SAMPLE_TARGET_MS / profile.device_ms)
        calls = max(1, min(MAX_PROFILED_CALLS, calls))

        def sample() -> float:
            return _device_ms(_profile_events(_repeat(workload.prepare(), calls))) / calls

        gaps = "kernel time only: host work and launch gaps are not in the number"
        if not slow:  # three more calls tell the host's share; a slow function can't afford it
            wall_ms = _host_ms(call, synced=True)
            gaps = (
                "kernel time only: host work and launch gaps, "
                f"{max(0.0, 1 - profile.device_ms / wall_ms):.0%} of a call's "
                f"{time_text(wall_ms)} wall time, are not in the number"
            )
        return Sampler(
            timer=self.name,
            sample=sample,
            calls_per_sample=calls,
            note="; ".join(part for part in (note, gaps) if part),
            profile=profile,
            # A slow function's profiled call was a valid sample: the engine counts it.
            taken=(profile.device_ms,) if workload.slow and workload.setup is None else (),
        )


class CudaGraphTimer:
    """Back-to-back calls captured in one CUDA graph, replayed; L2 hot.

    ``cuda-graph``: a sample is one replay's time / calls (the kernels with a graph's launch
    gaps). ``cupti-graph``: the summed device time of one replay's kernels / calls (CUPTI),
    for functions whose graph time is mostly launch gaps, which vary between sessions where
    kernel time does not (``fallback.gated_kernels``); the graph's time per call is reported
    beside it. ``kernels``: True kernel time, False graph time, None (``auto``) the
    function's choice. The graph must replay an eager call's kernels (checked once with
    CUPTI, outside the timed loop); a function that cannot be captured is timed by ``cupti``,
    the result recording that timer and why (``fallback.choose``).
    """

    def __init__(self, kernels: bool | None = None) -> None:
        self.kernels = kernels
        self.name = "cupti-graph" if kernels else "cuda-graph"

    def sampler(self, workload: Workload) -> Sampler:
        choice = choose(
            has_setup=workload.setup is not None,
            slow=workload.slow,
            probe=TorchProbe(workload),
            kernels=self.kernels,
        )
        if choice.timer == "wall":
            return WallTimer(torch.cuda.synchronize, note=choice.note).sampler(workload)
        if choice.plan is None:
            return CuptiTimer().sampler(workload, choice.note, choice.eager)
        profile = choice.eager
        if profile is not None and choice.graph_ms is not None:
            profile = dataclasses.replace(profile, graph_ms=choice.graph_ms)
        return _replayed(choice.timer, choice.plan, profile)


class GraphBeside:
    """A validated graph's kernel time per call beside its replay's time (engine.Beside):
    its kernels' summed time in a replay, read by CUPTI (``cupti-graph``'s number)."""

    timer = "cupti-graph"

    def __init__(self, graph: TorchGraph, calls: int) -> None:
        self.graph, self.calls = graph, calls

    def alternate(self, other: Beside, rounds: int) -> tuple[list[float], list[float]]:
        if not isinstance(other, GraphBeside):
            raise TypeError("the other side's time is not a graph's kernel time")
        order = [s for i in range(rounds) for s in ((self, other) if i % 2 == 0 else (other, self))]
        times = [ms / s.calls for s, ms in zip(order, _kernel_ms_each(order), strict=True)]
        mine = [t for s, t in zip(order, times, strict=True) if s is self]
        return mine, [t for s, t in zip(order, times, strict=True) if s is not self]


def _kernel_ms_each(order: list[GraphBeside]) -> list[float]:
    """Each replay's summed kernel time, the replays of ``order`` queued in one profiler
    session (one session, not one each: a session's trace costs more than the replays). CUPTI
    gives a replay's kernels the correlation id of the graph launch that queued them, so they
    are told apart by it, whatever they are named: a function's own spin kernel split the
    trace when blocking kernels marked where each replay began (bench/fla_suite's planted
    spins: no kernel time taken, bench/results/h100-2026-12-06b)."""

    def run() -> None:
        for side in order:
            side.graph.graph.replay()

    events = _profile_events(run, trace=False)
    launches = sorted(
        (
            e
            for e in events
            if e.get("cat") == "cuda_runtime" and GRAPH_LAUNCH in str(e.get("name"))
        ),
        key=lambda e: (float(e.get("ts") or 0.0), _correlation(e) or 0),
    )
    ids = [_correlation(e) for e in launches]
    if None in ids:
        raise GpubenchError("a graph launch in the trace has no correlation id")
    if len(set(ids)) != len(order):
        raise GpubenchError(f"{len(ids)} graph launches in the trace of {len(order)} replays")
    each = {i: 0.0 for i in ids}
    names: dict[int | None, list[str]] = {i: [] for i in ids}
    for e in events:  # work no replay queued (begun before the profile) is not theirs
        if e.get("cat") in DEVICE_WORK and _correlation(e) in each:
            each[_correlation(e)] += float(e.get("dur") or 0.0) / 1e3
            names[_correlation(e)].append(str(e.get("name")))
    # CUPTI has given a graph's kernels wrong ids in sessions after the first (CUDA 13.1
    # Update 1 release notes): each replay of a graph must own the same kernels, a kernel
    # given another replay's id or none leaving its own replay short.
    work = {i: tuple(sorted(found)) for i, found in names.items()}
    if not all(work.values()):
        raise GpubenchError("a replay owns no device work in the trace")
    owned = {(id(side), work[i]) for side, i in zip(order, ids, strict=True)}
    if len(owned) != len({id(side) for side in order}):
        raise GpubenchError("replays of one graph own other kernels in the trace")
    return [each[i] for i in ids]


def _correlation(event: dict[str, Any]) -> int | None:
    found = (event.get("args") or {}).get("correlation")
    return None if found is None else int(found)


def _replayed(timer: str, plan: GraphPlan, profile: Profile | None) -> Sampler:
    """The sampler of a validated graph: ``cupti-graph`` a replay's kernel time, the graph's
    time kept beside it (``profile.graph_ms``), ``cuda-graph`` the replay's time."""
    measure = plan.graph.kernel_ms if timer == "cupti-graph" else plan.graph.replay_ms
    calls = plan.calls

    def again(workload: Workload, count: int | None = None) -> Sampler:
        # Other inputs of the same shapes: a graph of as many calls (or ``count``), not
        # validated again (the first was, on this function).
        n = count or calls
        graph = TorchGraph(_capture(workload.prepare(), n, 0 if workload.slow else 2))
        # (a graph of other calls than the first's: the first's graph time is not its own)
        kept = (
            profile
            if n == calls or profile is None
            else dataclasses.replace(profile, graph_ms=None)
        )
        return _replayed(timer, GraphPlan(graph, n), kept)

    return Sampler(
        timer=timer,
        sample=lambda: measure() / calls,
        calls_per_sample=calls,
        close=plan.graph.reset,
        profile=profile,
        taken=plan.taken,
        again=again,
        # The one place that decides which calls take kernel time beside their time per
        # call: cuda-graph's. cupti-graph's number is its kernel time already; its replay's
        # time per call read 13% off in an A/A run (bench/results/h200-2026-12-02d).
        beside=(
            GraphBeside(plan.graph, calls)
            if timer == "cuda-graph" and isinstance(plan.graph, TorchGraph)
            else None
        ),
    )


def _device_ms(events: list[dict[str, Any]]) -> float:
    """Summed duration of the device work in trace events, in milliseconds."""
    return sum(float(e.get("dur") or 0.0) for e in events if e.get("cat") in DEVICE_WORK) / 1e3


def make(name: str) -> Timer:
    if name == "cuda-event":
        return CudaEventTimer()
    if name == "cuda-event-cold":
        return CudaEventTimer(cold=True)
    prime_profiler()
    if name == "cupti":
        return CuptiTimer()
    return CudaGraphTimer({"cuda-graph": False, "cupti-graph": True}.get(name))
