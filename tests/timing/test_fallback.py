"""The CUDA fallback tree (timing/fallback.py) on plain facts, without a GPU: which timer a
function gets and why, which questions are asked (each costs device time), and how a failed
capture is cleaned up. The torch side of the same questions: tests/test_gpu.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_gpubench.core.kernels import Launch
from pytest_gpubench.timing.engine import Profile
from pytest_gpubench.timing.fallback import (
    MAX_GRAPH_CALLS,
    CaptureError,
    choose,
    gated_kernels,
    graph_calls,
    guarded_capture,
    root_cause,
    validated_graph,
)
from pytest_gpubench.timing.timers import requested

K = Launch("axpb_kernel", grid=(1024, 1, 1), block=(128, 1, 1), share=1.0)
RNG = Launch("philox_offset_bookkeeping", share=0.0)


class FakeGraph:
    """A graph whose replays launch ``per_call`` per captured call (plus ``extra`` once per
    replay) and take ``ms_per_call`` per call, of which ``kernel_ms_per_call`` is kernel time
    (all of it when None)."""

    def __init__(
        self,
        calls: int,
        per_call: tuple[Launch, ...],
        ms_per_call: float,
        extra: tuple[Launch, ...] = (),
        kernel_ms_per_call: float | None = None,
    ) -> None:
        self.calls, self.per_call, self.ms_per_call, self.extra = (
            calls,
            per_call,
            ms_per_call,
            extra,
        )
        self.kernel_ms_per_call = ms_per_call if kernel_ms_per_call is None else kernel_ms_per_call
        self.reset_count = 0
        self.kernel_profiles = 0

    def kernel_ms(self) -> float:
        self.kernel_profiles += 1
        return self.kernel_ms_per_call * self.calls

    def replay_ms(self) -> float:
        return self.ms_per_call * self.calls

    def profiled_replay(self) -> tuple[tuple[Launch, ...], float]:
        launches = tuple(
            Launch(k.name, k.kind, k.digest, k.count * self.calls, k.grid, k.block)
            for k in self.per_call
        )
        return launches + self.extra, self.replay_ms()

    def reset(self) -> None:
        self.reset_count += 1


class FakeProbe:
    """The facts of one function, and the questions the tree asked, in order."""

    def __init__(
        self,
        eager: tuple[Launch, ...] = (K,),
        synchronizes: str | None = None,
        capture_error: BaseException | None = None,
        replayed: Callable[[int], tuple[Launch, ...]] = lambda calls: (K,),
        ms_per_call: float = 0.01,
        extra: tuple[Launch, ...] = (),
        kernel_ms_per_call: float | None = None,
    ) -> None:
        self._eager, self._synchronizes = eager, synchronizes
        self.capture_error, self.replayed = capture_error, replayed
        self.ms_per_call, self.extra = ms_per_call, extra
        self.kernel_ms_per_call = kernel_ms_per_call
        self.asked: list[str] = []
        self.graphs: list[FakeGraph] = []

    def eager(self) -> Profile:
        self.asked.append("eager")
        return Profile(self._eager, 0.005 if self._eager else 0.0)

    def synchronizes(self) -> str | None:
        self.asked.append("synchronizes")
        return self._synchronizes

    def capture(self, calls: int, warm_calls: int) -> FakeGraph:
        self.asked.append(f"capture {calls} after {warm_calls}")
        if self.capture_error is not None:
            raise self.capture_error
        graph = FakeGraph(
            calls, self.replayed(calls), self.ms_per_call, self.extra, self.kernel_ms_per_call
        )
        self.graphs.append(graph)
        return graph


def test_a_workload_with_setup_is_timed_by_cupti_without_a_question() -> None:
    probe = FakeProbe()
    choice = choose(has_setup=True, slow=False, probe=probe)
    assert (choice.timer, choice.note, probe.asked) == (
        "cupti",
        "setup given: graph replay cannot refresh arguments",
        [],
    )


def test_a_function_that_runs_no_device_work_is_timed_by_the_host_clock() -> None:
    probe = FakeProbe(eager=())
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert (choice.timer, choice.note) == (
        "wall",
        "the function ran no GPU work: timed by the host clock",
    )
    assert probe.asked == ["eager"]


def test_a_function_that_synchronizes_is_never_captured() -> None:
    probe = FakeProbe(synchronizes="the function synchronizes with the host")
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert (choice.timer, choice.note) == (
        "cupti",
        "not captured: the function synchronizes with the host",
    )
    assert probe.asked == ["eager", "synchronizes"]  # no capture attempt: it would corrupt
    assert choice.eager == Profile((K,), 0.005)  # the eager profile is the cupti timer's


def test_a_slow_function_is_not_run_again_to_look_for_synchronization() -> None:
    probe = FakeProbe(synchronizes="never asked", ms_per_call=2.0)
    choice = choose(has_setup=False, slow=True, probe=probe)
    assert probe.asked == ["eager", "capture 1 after 0"]  # nor warmed before its capture
    # one call fills a replay: the one-call graph is timed, its profiled replay a sample
    assert choice.timer == "cuda-graph" and choice.plan is not None
    assert (choice.plan.calls, choice.plan.taken) == (1, (2.0,))


def test_a_capture_that_fails_falls_back_to_cupti_with_the_root_cause() -> None:
    """Leaving a broken capture raises a second, vaguer error: the note names the first."""
    error = RuntimeError("CUDA error: operation failed due to a previous error during capture")
    error.__context__ = RuntimeError("operation not permitted when stream is capturing\nmore")
    probe = FakeProbe(capture_error=error)
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert (choice.timer, choice.note) == (
        "cupti",
        "graph capture failed (RuntimeError: operation not permitted when stream is capturing)",
    )
    assert probe.asked == ["eager", "synchronizes", "capture 1 after 2"]


def test_work_outside_the_capturing_stream_is_caught_and_never_timed_as_a_graph() -> None:
    """``kernel<<<grid, block>>>`` on the legacy default stream runs during the capture and
    never again: the replay launches nothing, which would read as a near-zero time."""
    probe = FakeProbe(replayed=lambda calls: ())
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert choice.timer == "cupti"
    assert choice.note.startswith("not captured: a graph replay runs no device work, an eager ")
    assert "legacy default stream" in choice.note
    assert [g.reset_count for g in probe.graphs] == [1]  # its memory is freed


def test_a_function_that_does_not_repeat_its_work_is_not_timed_as_a_graph() -> None:
    """A replay of n calls must run n times each kernel of one call."""
    probe = FakeProbe(replayed=lambda calls: (K,) if calls == 1 else ())
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert choice.timer == "cupti"
    assert "does not repeat its work" in choice.note
    assert probe.asked[-1] == "capture 100 after 0"
    assert [g.reset_count for g in probe.graphs] == [1, 1]


def test_a_replay_too_fast_to_be_work_is_refused() -> None:
    choice = choose(has_setup=False, slow=False, probe=FakeProbe(ms_per_call=1e-6))
    assert (choice.timer, choice.note) == (
        "cupti",
        "not captured: a replay took 1.00 ns: too fast to be work",
    )


def test_a_validated_graph_batches_calls_into_a_replay_of_about_a_millisecond() -> None:
    probe = FakeProbe(ms_per_call=0.01, extra=(RNG,))  # dropout's once-per-replay launch
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert (choice.timer, choice.note) == ("cuda-graph", "")
    assert probe.asked == ["eager", "synchronizes", "capture 1 after 2", "capture 100 after 0"]
    assert choice.plan is not None and (choice.plan.calls, choice.plan.taken) == (100, ())
    one, many = probe.graphs
    assert (one.reset_count, many.reset_count) == (1, 0)  # the small one freed, the timed kept
    assert choice.plan.graph is many


def test_a_graph_mostly_of_launch_gaps_is_gated_on_its_kernel_time() -> None:
    """1.5 µs per call of which 1.0 µs is kernel time: a third is launch gaps, which move
    between sessions where the kernels do not (H100: 2.3-6.7% against 0.2-0.5%)."""
    probe = FakeProbe(ms_per_call=0.0015, kernel_ms_per_call=0.001)
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert (choice.timer, choice.note) == ("cupti-graph", "")
    assert choice.plan is not None and choice.plan.calls == 667
    assert choice.plan.taken == ()  # replay times are not kernel times
    assert choice.graph_ms == pytest.approx(0.0015)  # reported beside the kernel time
    assert choice.plan.graph.kernel_profiles == 1


@pytest.mark.parametrize(
    "graph_ms, kernel_ms, timer",
    [
        (0.01, 0.0096, "cuda-graph"),  # 10 µs, 4% gaps: the graph's time stays the number
        (0.01, 0.0095, "cupti-graph"),  # 5% gaps
        (0.01, 0.012, "cuda-graph"),  # kernels overlap (side streams): the time sees it
        (0.005, 0.00499, "cupti-graph"),  # a short call: its gaps move between sessions
        (0.005, 0.0052, "cupti-graph"),  # CUPTI's durations a little over the time
        (0.005, 0.006, "cuda-graph"),  # but overlapping kernels keep the time
        (0.005, 0.0, "cuda-graph"),  # no kernel time (CUPTI lost its records)
    ],
)
def test_when_kernel_time_is_the_number(graph_ms: float, kernel_ms: float, timer: str) -> None:
    probe = FakeProbe(ms_per_call=graph_ms, kernel_ms_per_call=kernel_ms)
    choice = choose(has_setup=False, slow=False, probe=probe)
    assert choice.timer == timer
    assert gated_kernels(kernel_ms, graph_ms) is (timer == "cupti-graph")


def test_a_call_that_fills_a_replay_keeps_its_graph_time_without_a_profile() -> None:
    probe = FakeProbe(ms_per_call=2.0, kernel_ms_per_call=0.5)
    choice = choose(has_setup=False, slow=True, probe=probe)
    assert choice.timer == "cuda-graph" and choice.plan is not None
    assert choice.plan.graph.kernel_profiles == 0


@pytest.mark.parametrize("kernels, timer", [(True, "cupti-graph"), (False, "cuda-graph")])
def test_the_graph_timers_asked_by_name_are_kept_whatever_the_gaps(
    kernels: bool, timer: str
) -> None:
    """What a baseline was timed by is asked for by name (timers.requested): one function is
    judged by one timer in every session, even where its gaps sit at the boundary."""
    gappy = FakeProbe(ms_per_call=0.0015, kernel_ms_per_call=0.001)
    quiet = FakeProbe(ms_per_call=0.01)
    for probe in (gappy, quiet):
        choice = choose(has_setup=False, slow=False, probe=probe, kernels=kernels)
        assert choice.timer == timer
        assert choice.plan is not None
        assert choice.plan.graph.kernel_profiles == (1 if kernels else 0)


def test_auto_keeps_the_graph_timer_of_the_baseline() -> None:
    assert requested("auto", "cupti-graph") == "cupti-graph"
    assert requested("auto", "cuda-graph") == "cuda-graph"
    assert requested("auto", "cupti") == "auto"  # a fallback is decided again every time
    assert requested("auto", None) == "auto"
    assert requested("cuda-event", "cupti-graph") == "cuda-event"  # a user's choice stands


def test_graph_calls_fill_a_replay_within_bounds() -> None:
    assert graph_calls(0.01) == 100
    assert graph_calls(5.0) == 1
    assert graph_calls(1e-9) == MAX_GRAPH_CALLS


def test_validated_graph_says_why_not() -> None:
    with pytest.raises(CaptureError, match="too fast to be work"):
        validated_graph(FakeProbe(ms_per_call=0.0), Profile((K,), 0.005), slow=False)


def events_of(
    fail: str | None,
) -> tuple[list[str], Callable[[], None], Callable[[], None], Callable[[], None]]:
    events: list[str] = []

    def step(name: str) -> Callable[[], None]:
        def run() -> None:
            events.append(name)
            if name == fail:
                raise RuntimeError(f"{name} failed")

        return run

    return events, step("begin"), step("run"), step("end")


@pytest.mark.parametrize(
    "fail, expected",
    [
        (None, ["begin", "run", "end"]),
        ("run", ["begin", "run", "end", "repair"]),  # the capture is ended, then repaired
        ("end", ["begin", "run", "end", "repair"]),
        ("begin", ["begin", "repair"]),  # no capture to end
    ],
)
def test_a_failed_capture_is_ended_and_the_process_repaired(
    fail: str | None, expected: list[str]
) -> None:
    events, begin, run, end = events_of(fail)
    if fail is None:
        guarded_capture(begin, run, end, lambda: events.append("repair"))
    else:
        with pytest.raises(RuntimeError, match=f"{fail} failed"):
            guarded_capture(begin, run, end, lambda: events.append("repair"))
    assert events == expected


def test_an_interrupted_capture_is_repaired_too() -> None:
    events: list[str] = []

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        guarded_capture(lambda: None, interrupted, lambda: None, lambda: events.append("repair"))
    assert events == ["repair"]


def test_the_root_cause_is_the_first_error_of_the_chain_in_one_line() -> None:
    first = ValueError("the first\nsecond line")
    second = RuntimeError("vaguer")
    second.__context__ = first
    assert root_cause(second) == "ValueError: the first"
    assert root_cause(RuntimeError()) == "RuntimeError: "
