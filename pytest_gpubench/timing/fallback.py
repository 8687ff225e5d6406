"""How a CUDA function is timed, decided from plain facts: no torch here.

``choose`` asks a probe, in order, whether the call takes fresh arguments, runs device work,
synchronizes, captures, and replays its eager work as a graph (work on the legacy default
stream runs during capture and never again), and stops at the first answer: ``cupti``,
``wall``, or the validated graph (``cuda-graph`` or ``cupti-graph``). Why each:
docs/method.md, "Timing one function". The probe is torch in ``timing.cuda`` and a fake in
the tests, which check this tree on a machine without a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from ..core.kernels import Launch, replay_problem
from ..core.samples import time_text
from .engine import Profile

# A graph replay lasts about this long: long enough that the replay's fixed cost is small,
# short enough that a measurement still takes many samples within its budget.
GRAPH_REPLAY_TARGET_MS = 1.0
MAX_GRAPH_CALLS = 1000
# A graph replay faster than this per call ran no kernel (one launch takes ~1 µs on Hopper).
MIN_REPLAY_MS_PER_CALL = 0.0003
# The summed kernel time in the replay is the gated number of a graph whose call takes under
# SHORT_CALL_MS, or whose launch gaps are MIN_GAP_SHARE of its time or more. On an H100 the
# graph time of 1-14 µs functions read 1.10-1.50x their kernel time and moved 2.3-6.7%
# between sessions, their kernel time 0.2-1.6% (bench/results/h100-2026-11-24); in a
# 20-session history a 3.5 µs softmax whose gaps read under 5% kept its graph time and spread
# 4.9% between sessions, the short calls on kernel time 0.1-1.2% but one, 2.5%
# (bench/results/h100-2026-11-24b). From 68 µs the two agree within 0.6%.
SHORT_CALL_MS = 0.01
MIN_GAP_SHARE = 0.05
# Kernels that overlap (side streams) sum to more than the time: beyond this factor the
# time, which sees their overlap, stays the number.
OVERLAP = 1.05
# Unprofiled replays whose fastest tells a graph's time per call for that decision.
GAP_REPLAYS = 3


class CaptureError(Exception):
    """Why a function's graph cannot stand for its eager calls."""


class Graph(Protocol):
    """A captured graph of back-to-back calls."""

    def replay_ms(self) -> float:
        """One replay's time in milliseconds."""

    def profiled_replay(self) -> tuple[tuple[Launch, ...], float]:
        """What one replay launched (CUPTI), and its time in milliseconds."""

    def kernel_ms(self) -> float:
        """The summed device time of one replay's kernels, copies and memsets (CUPTI), in
        milliseconds."""

    def reset(self) -> None:
        """Free the graph and its memory pool."""


class Probe(Protocol):
    """What the tree asks of a function on the device."""

    def eager(self) -> Profile:
        """What eager calls launch, per call, and their device time."""

    def synchronizes(self) -> str | None:
        """Why the call cannot be captured, found without a capture attempt; None if not."""

    def capture(self, calls: int, warm_calls: int) -> Graph:
        """``calls`` back-to-back calls captured in one graph, after ``warm_calls`` eager
        ones; raises what the capture raised, the process repaired."""


@dataclass(frozen=True)
class GraphPlan:
    """A validated graph, the calls one replay makes, and samples its validation took."""

    graph: Graph
    calls: int
    taken: tuple[float, ...] = ()


@dataclass(frozen=True)
class Choice:
    """The timer a function gets, why (``note``, shown under the table), what its eager calls
    launched (None when not profiled), the graph when it is ``cuda-graph`` or
    ``cupti-graph``, and, for ``cupti-graph``, the graph's time per call (``graph_ms``: the
    number not gated, reported beside the one that is)."""

    timer: str  # "cuda-graph", "cupti-graph", "cupti" or "wall"
    note: str = ""
    eager: Profile | None = None
    plan: GraphPlan | None = None
    graph_ms: float | None = None


def gated_kernels(kernel_ms: float, graph_ms: float) -> bool:
    """Whether a graph's number is its summed kernel time per call rather than its time per
    call: the call is short (launch gaps move its time between sessions) or its launch gaps
    are a large share of its time, and its kernels do not overlap (side streams: their sum
    exceeds the time, which sees the overlap)."""
    if not (graph_ms > 0 and kernel_ms > 0) or kernel_ms > OVERLAP * graph_ms:
        return False  # (no kernel time: CUPTI lost the records, nothing to gate on)
    return graph_ms < SHORT_CALL_MS or 1 - kernel_ms / graph_ms >= MIN_GAP_SHARE


def choose(*, has_setup: bool, slow: bool, probe: Probe, kernels: bool | None = None) -> Choice:
    """The timer of a function (see the module's docstring for the order of the questions).

    ``slow``: one call takes a large share of the budget; it is not run again to look for
    synchronization, and its graph is not warmed up.
    ``kernels``: a captured graph's number is its kernel time (True), its time (False), or
    whichever ``gated_kernels`` says (None)."""
    if has_setup:
        return Choice("cupti", "setup given: graph replay cannot refresh arguments")
    eager = probe.eager()
    if not eager.launches:
        return Choice("wall", "the function ran no GPU work: timed by the host clock", eager)
    reason = None if slow else probe.synchronizes()
    if reason is not None:
        return Choice("cupti", f"not captured: {reason}", eager)
    try:
        plan = validated_graph(probe, eager, slow)
    except CaptureError as exc:
        return Choice("cupti", f"not captured: {exc}", eager)
    except Exception as exc:  # any capture failure means: time it without a graph
        return Choice("cupti", f"graph capture failed ({root_cause(exc)})", eager)
    if kernels is False or (kernels is None and plan.calls == 1):
        # One call fills a replay (a millisecond or more): gaps of microseconds are no share
        # of it, and a slow function's calls are not spent to show it.
        return Choice("cuda-graph", "", eager, plan)
    kernel_ms = plan.graph.kernel_ms() / plan.calls
    graph_ms = min(plan.graph.replay_ms() for _ in range(GAP_REPLAYS)) / plan.calls
    if kernels is None and not gated_kernels(kernel_ms, graph_ms):
        return Choice("cuda-graph", "", eager, plan)
    # The validation's samples were replay times: not this timer's number.
    # The report says the launch gaps (Measurement.launch_gap_share): no note needed.
    return Choice("cupti-graph", "", eager, replace(plan, taken=()), graph_ms)


def validated_graph(probe: Probe, eager: Profile, slow: bool) -> GraphPlan:
    """A graph of back-to-back calls that provably replays the eager call's work.

    A one-call graph's replay must run every launch of the eager call (kernels.replay_problem);
    its time sets the number of calls of the graph that is timed, whose replay must run each
    launch that many times. A slow function whose one call fills a replay keeps the one-call
    graph, and its profiled replay is a sample. Raises CaptureError saying why not."""
    one = probe.capture(1, 0 if slow else 2)
    once, first_ms = one.profiled_replay()
    problem = replay_problem(eager.launches, once)
    if problem:
        one.reset()
        raise CaptureError(problem)
    if slow and first_ms >= GRAPH_REPLAY_TARGET_MS:
        return GraphPlan(one, 1, (first_ms,))
    estimate_ms = min([first_ms] + [one.replay_ms() for _ in range(2)])
    if estimate_ms < MIN_REPLAY_MS_PER_CALL:
        one.reset()
        raise CaptureError(f"a replay took {time_text(estimate_ms)}: too fast to be work")
    calls = graph_calls(estimate_ms)
    if calls == 1:
        return GraphPlan(one, 1)
    one.reset()  # free its memory pool before the larger capture
    graph = probe.capture(calls, 0)
    many, _ = graph.profiled_replay()
    problem = replay_problem(eager.launches, once, many, calls)
    if problem:
        graph.reset()
        raise CaptureError(problem)
    return GraphPlan(graph, calls)


def graph_calls(call_ms: float) -> int:
    """Calls of a graph whose replay lasts about GRAPH_REPLAY_TARGET_MS."""
    return max(1, min(MAX_GRAPH_CALLS, math.ceil(GRAPH_REPLAY_TARGET_MS / call_ms)))


def guarded_capture(
    begin: Callable[[], None],
    run: Callable[[], None],
    end: Callable[[], None],
    repair: Callable[[], None],
) -> None:
    """``begin()``, ``run()``, ``end()``: the capture is ended even when ``run`` fails (a
    capture left open breaks every later launch), and after any failure ``repair()`` undoes
    what a failed capture leaves behind, before the error propagates."""
    try:
        begin()
        try:
            run()
        finally:
            end()
    except BaseException:
        repair()
        raise


def root_cause(exc: BaseException) -> str:
    """The first error of a chain: leaving a broken capture raises a second, vaguer one."""
    while exc.__context__ is not None and exc.__context__ is not exc:
        exc = exc.__context__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:120]}"
