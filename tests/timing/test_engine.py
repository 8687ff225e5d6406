"""Unit tests of timing/engine.py: the stopping rules, with fake samplers and clocks."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import random
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from pytest_gpubench.core.errors import GpubenchError
from pytest_gpubench.core.samples import median_halfwidth
from pytest_gpubench.timing import engine, timers, wall
from pytest_gpubench.timing.engine import Plan, Sampler, Sampling, Workload, collect


class FakeClock:
    """A clock that only moves when a fake sample costs time."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeSampler:
    """Hands out ``values`` in order; each sample advances ``clock`` by ``cost_s``."""

    def __init__(self, values: Iterable[float], clock: FakeClock, cost_s: float = 0.0) -> None:
        self.values: Iterator[float] = iter(values)
        self.clock = clock
        self.cost_s = cost_s
        self.taken: list[float] = []

    def sample(self) -> float:
        self.clock.now += self.cost_s
        value = next(self.values)
        self.taken.append(value)
        return value

    def make(self, **extra: object) -> Sampler:
        return Sampler(timer="fake", sample=self.sample, **extra)  # type: ignore[arg-type]


def steady(value: float = 1.0) -> Iterator[float]:
    return itertools.repeat(value)


def noisy(seed: int = 0, sigma: float = 0.3) -> Iterator[float]:
    rng = random.Random(seed)
    while True:
        yield rng.lognormvariate(0.0, sigma)


def alternating() -> Iterator[float]:
    """Never steady: medians of consecutive windows of three alternate between 1 and 2."""
    return itertools.cycle([1.0, 2.0])


def run(
    values: Iterable[float], plan: Plan, cost_s: float = 0.0, **extra: object
) -> tuple[Sampling, FakeSampler]:
    clock = FakeClock()
    fake = FakeSampler(values, clock, cost_s)
    return collect(fake.make(**extra), plan, clock=clock), fake


# --- sampling -------------------------------------------------------------------------------


def test_precise_samples_stop_at_min_samples() -> None:
    sampling, fake = run(steady(), Plan(min_samples=10, max_samples=200))
    assert sampling.warmup == 2 * engine.WARMUP_WINDOW
    assert len(sampling.samples_ms) == 10
    assert len(fake.taken) == sampling.warmup + 10


def test_min_samples_that_are_not_a_multiple_of_the_check_interval() -> None:
    # The precision rule is checked every CHECK_EVERY samples: 12 -> checked at 15.
    sampling, _ = run(steady(), Plan(min_samples=12, max_samples=200))
    assert len(sampling.samples_ms) == 15


def test_noisy_samples_stop_at_max_samples() -> None:
    sampling, _ = run(noisy(), Plan(min_samples=10, max_samples=37, budget_s=1e9))
    assert len(sampling.samples_ms) == 37


def test_sampling_stops_once_the_median_is_precise_enough() -> None:
    loose, _ = run(noisy(sigma=0.01), Plan(max_samples=1000, budget_s=1e9, precision=0.01))
    tight, _ = run(noisy(sigma=0.01), Plan(max_samples=1000, budget_s=1e9, precision=0.002))
    assert 10 <= len(loose.samples_ms) < len(tight.samples_ms) < 1000
    assert len(loose.samples_ms) % engine.CHECK_EVERY == 0


def test_sampling_stops_when_the_budget_is_spent() -> None:
    # Warmup never starts a sample that would run past its quarter of the 2 s budget: 4
    # samples of 1/8 s; then samples start while the budget lasts: 12 more, 2 s in all.
    plan = Plan(min_samples=2, max_samples=200, budget_s=2.0)
    sampling, _ = run(noisy(), plan, cost_s=0.125)
    assert sampling.warmup == 4
    assert len(sampling.samples_ms) == 12


def test_the_budget_beats_min_samples() -> None:
    sampling, fake = run(noisy(), Plan(min_samples=10, budget_s=0.001), cost_s=1.0)
    # The first sample ran past warmup's share: it is no warmup, it is the only sample.
    assert sampling.warmup == 0
    assert len(sampling.samples_ms) == 1 == len(fake.taken)


@pytest.mark.parametrize("cost_s", [0.001, 0.01, 0.07, 0.2, 0.26, 0.4, 0.6, 0.99, 1.0, 1.5, 5.0])
@pytest.mark.parametrize("values", [noisy, alternating], ids=["noisy", "never-steady"])
def test_a_measurement_lasts_at_most_the_budget_plus_one_sample(
    cost_s: float, values: Callable[[], Iterator[float]]
) -> None:
    clock = FakeClock()
    fake = FakeSampler(values(), clock, cost_s)
    plan = Plan(min_samples=50, max_samples=10**6, budget_s=1.0)
    sampling = collect(fake.make(), plan, clock=clock)
    assert clock.now <= plan.budget_s + cost_s + 1e-9
    assert len(sampling.samples_ms) >= 1
    # As many samples as fit: none of the budget is left unused for want of one.
    assert clock.now >= min(plan.budget_s, cost_s) - 1e-9


def test_samples_the_timer_took_while_preparing_are_used_first() -> None:
    # A wall timer's calibration call of a 5 s function is its first sample: of a 1 s budget,
    # -4 s are left when sampling starts; there is no warmup and no other call.
    clock = FakeClock()
    fake = FakeSampler(steady(5000.0), clock, cost_s=5.0)
    sampling = collect(fake.make(taken=(5000.0,)), Plan(budget_s=1.0 - 5.0), clock=clock)
    assert (sampling.warmup, sampling.samples_ms, fake.taken) == (0, (5000.0,), [])
    assert clock.now == 0.0


def test_taken_samples_with_time_to_spare_are_warmup() -> None:
    sampling, fake = run(steady(1.0), Plan(min_samples=10, budget_s=1.0), taken=(1.0, 1.0))
    assert sampling.warmup == 2 * engine.WARMUP_WINDOW
    assert len(fake.taken) == 2 * engine.WARMUP_WINDOW - 2 + 10


@pytest.mark.parametrize("value", [5e-324, 0.0, -1.0, float("nan"), float("inf"), 1e7, "1"])
def test_a_sample_that_is_no_time_fails_with_one_line(value: object) -> None:
    sampler = Sampler(timer="odd", sample=lambda: value)  # type: ignore[arg-type, return-value]
    with pytest.raises(GpubenchError) as info:
        collect(sampler, Plan(rounds=2, warmup=0))
    assert str(info.value) == (
        f"timer odd measured {value!r} ms, not a time between 1e-09 and 1e+06 ms for one "
        "call; a timer must return milliseconds per call"
    )


def test_fixed_rounds_and_warmup_override_the_rules() -> None:
    plan = Plan(min_samples=10, max_samples=20, budget_s=0.001, warmup=3, rounds=7)
    sampling, fake = run(noisy(), plan, cost_s=1.0)
    assert sampling.warmup == 3
    assert sampling.samples_ms == tuple(fake.taken[3:])
    assert len(sampling.samples_ms) == 7


def test_fixed_rounds_may_exceed_max_samples() -> None:
    sampling, _ = run(steady(), Plan(min_samples=2, max_samples=5, rounds=9))
    assert len(sampling.samples_ms) == 9


def test_zero_warmup_samples_from_the_start() -> None:
    sampling, fake = run([5.0, 4.0, 3.0, 2.0, 1.0], Plan(warmup=0, rounds=5))
    assert sampling.warmup == 0
    assert sampling.samples_ms == (5.0, 4.0, 3.0, 2.0, 1.0)


# --- warmup ---------------------------------------------------------------------------------


def test_warmup_lasts_until_consecutive_windows_agree() -> None:
    ramp = [5.0, 4.0, 3.0, 2.0, 1.5, 1.2]
    sampling, _ = run(itertools.chain(ramp, steady(1.0)), Plan(rounds=4))
    # Medians of the last two windows of three first agree after 11 samples: [1.2,1,1], [1,1,1].
    assert sampling.warmup == 11
    assert sampling.samples_ms == (1.0, 1.0, 1.0, 1.0)


def test_warmup_accepts_windows_within_the_tolerance() -> None:
    values = [1.0, 1.0, 1.0] + [1.0 + engine.WARMUP_TOLERANCE / 2] * 3
    sampling, _ = run(itertools.chain(values, steady()), Plan(rounds=2))
    assert sampling.warmup == 6


def test_warmup_gives_up_before_it_runs_past_its_share_of_the_budget() -> None:
    # Never steady; each sample costs 1/64 s of a 1 s budget: warmup stops when the next
    # sample would end past WARMUP_SHARE (1/4 s), i.e. after 16 samples.
    assert engine.WARMUP_SHARE == 0.25
    sampling, _ = run(alternating(), Plan(budget_s=1.0, rounds=2), cost_s=1 / 64)
    assert sampling.warmup == 16


def test_a_function_slow_for_its_budget_is_not_warmed_up() -> None:
    sampling, fake = run(alternating(), Plan(budget_s=0.001, rounds=2), cost_s=1.0)
    assert sampling.warmup == 0
    assert sampling.samples_ms == tuple(fake.taken) == (1.0, 2.0)


# --- what a sampling carries ----------------------------------------------------------------


def test_sampling_carries_the_timer_name_calls_and_note() -> None:
    sampling, _ = run(steady(0.25), Plan(rounds=2, warmup=0), calls_per_sample=8, note="n")
    assert sampling == Sampling(
        timer="fake", samples_ms=(0.25, 0.25), warmup=0, calls_per_sample=8, note="n"
    )


def test_collect_with_the_real_clock_terminates_within_the_budget() -> None:
    rng = random.Random(0)
    sampler = Sampler(timer="fake", sample=lambda: rng.lognormvariate(0.0, 0.5))
    sampling = collect(sampler, Plan(min_samples=2, max_samples=10**9, budget_s=0.05))
    assert len(sampling.samples_ms) >= 2


# --- workloads ------------------------------------------------------------------------------


def test_workload_prepare_binds_args_and_kwargs() -> None:
    call = Workload(lambda a, b=0: (a, b), (1,), {"b": 2}).prepare()
    assert call() == (1, 2)


def test_workload_setup_returning_none_keeps_the_arguments() -> None:
    calls: list[str] = []
    workload = Workload(lambda a: a * 2, (21,), setup=lambda: calls.append("setup"))
    call = workload.prepare()
    assert calls == ["setup"]
    assert call() == 42


def test_workload_setup_gives_fresh_arguments_on_every_prepare() -> None:
    counter = itertools.count()

    def setup() -> tuple[list[int], dict[str, int]]:
        i = next(counter)
        return [i], {"k": 10 * i}

    workload = Workload(lambda a, k: (a, k), setup=setup)
    assert [workload.prepare()() for _ in range(3)] == [(0, 0), (1, 10), (2, 20)]


@pytest.mark.parametrize("fresh", [42, (1, 2, 3), ((1,), 5)])
def test_workload_setup_with_a_bad_return_value_names_it(fresh: object) -> None:
    workload = Workload(lambda *a, **k: None, setup=lambda: fresh)
    with pytest.raises(TypeError) as info:
        workload.prepare()
    assert str(info.value) == f"gpubench setup must return None or (args, kwargs), got {fresh!r}"


# --- the host-clock timer -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["auto", "wall", "cuda-graph", "cuda-event", "cuda-event-cold"])
def test_without_cuda_every_timer_name_means_the_wall_timer(name: str) -> None:
    timer = timers.make_timer(name, "cpu")
    assert isinstance(timer, wall.WallTimer)
    assert timer.name == "wall"
    note = timer.sampler(Workload(abs, (-1,))).note
    if name in ("auto", "wall"):
        assert note == ""
    else:  # an ini file shared with GPU machines: said on every result, not silent
        assert note == f"{name} asked for, but there is no CUDA GPU"


def test_wall_timer_keeps_the_calibration_call_of_a_slow_function_as_a_sample() -> None:
    calls: list[int] = []

    def slow() -> None:
        calls.append(1)
        time.sleep(wall.WALL_SAMPLE_MIN_MS / 1e3)

    sampler = wall.WallTimer().sampler(Workload(slow))
    assert sampler.calls_per_sample == 1
    [first] = sampler.taken
    assert first >= wall.WALL_SAMPLE_MIN_MS
    assert len(calls) == 1  # the calibration call, which is that first sample


def test_wall_timer_of_a_fast_function_takes_nothing_in_advance() -> None:
    assert wall.WallTimer().sampler(Workload(abs, (-1,))).taken == ()


def test_wall_timer_batches_fast_calls() -> None:
    calls: list[int] = []
    sampler = wall.WallTimer().sampler(Workload(calls.append, (1,)))
    assert sampler.timer == "wall"
    assert 1 < sampler.calls_per_sample <= wall.MAX_CALLS_PER_SAMPLE
    calls.clear()
    assert sampler.sample() > 0
    assert len(calls) == sampler.calls_per_sample


def test_wall_timer_with_setup_times_one_call_per_sample() -> None:
    setups: list[str] = []
    workload = Workload(lambda: None, setup=lambda: setups.append("setup"))
    sampler = wall.WallTimer().sampler(workload)
    assert sampler.calls_per_sample == 1
    assert setups == []
    sampler.sample()
    sampler.sample()
    assert setups == ["setup", "setup"]


def test_wall_timer_synchronizes_around_each_sample() -> None:
    events: list[str] = []
    timer = wall.WallTimer(synchronize=lambda: events.append("sync"))
    sampler = timer.sampler(Workload(lambda: events.append("call"), setup=lambda: None))
    events.clear()
    sampler.sample()
    assert events == ["sync", "call", "sync"]


def test_when_warm_runs_once_between_warmup_and_sampling() -> None:
    events: list[str] = []

    def sample() -> float:
        events.append("sample")
        return 1.0

    sampling = collect(
        Sampler(timer="fake", sample=sample),
        Plan(warmup=3, rounds=4),
        when_warm=lambda: events.append("warm"),
    )
    assert events == ["sample"] * 3 + ["warm"] + ["sample"] * 4
    assert sampling.warmup == 3 and len(sampling.samples_ms) == 4


def test_host_caveats_name_torch_threads_and_a_process_that_did_not_run() -> None:
    assert wall.host_caveat(None, None) == ""
    assert wall.host_caveat(1, 0.99) == ""
    assert wall.host_caveat(8, None) == (
        "torch runs 8 threads per operation (torch.set_num_threads(1) or OMP_NUM_THREADS=1 "
        "steadies host timings)"
    )
    assert wall.host_caveat(None, 0.05) == (
        "the process ran on a CPU 5% of the time it timed (a loaded machine, or a function "
        "that waits)"
    )
    assert wall.host_caveat(4, 0.5).count("; ") == 1
    # Where the run delay is known, it speaks, not the share of CPU time: a function that
    # sleeps or waits on a device on a quiet host is not loaded.
    assert wall.host_caveat(None, 0.05, 0.01) == ""
    assert wall.host_caveat(None, 0.05, 0.12) == (
        "the process waited for a CPU 12% of the time it timed (other processes had them)"
    )


def test_the_wall_timer_counts_the_time_its_process_waited_for_a_cpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The largest run delay (ready to run, no CPU) of one of its threads, as a share of the
    time from its first sample to the reading: a thread that handles a call's work (a
    BLAS's, torch's) counts, and one started meanwhile from its start; at most 1; None where
    the system cannot tell (no schedstat). On Linux a sleep is no wait for a CPU."""
    now = [0]

    def tick() -> int:
        now[0] += 10_000_000
        return now[0]

    monkeypatch.setattr(
        wall, "time", types.SimpleNamespace(perf_counter_ns=tick, process_time_ns=tick)
    )

    def delays(share: float, late: float) -> Callable[[], dict[str, int]]:
        # The calling thread waits a tenth of the time; a worker ``share`` of it; a thread
        # that starts after the first sample, ``late`` of the time since.
        def read() -> dict[str, int]:
            found = {"1": now[0] // 10, "2": int(now[0] * share)}
            return found | ({"3": int((now[0] - 100_000_000) * late)} if now[0] > 1e8 else {})

        return read

    for share, late, expected in ((0.3, 0.0, 0.3), (0.0, 0.5, 0.5), (0.01, 0.0, 0.1)):
        monkeypatch.setattr(wall, "run_delays_ns", delays(share, late))
        sampler = wall.WallTimer().sampler(Workload(lambda: None, ()))
        for _ in range(20):
            sampler.sample()
        assert engine._cpu_wait(sampler) == pytest.approx(expected, rel=0.2)
    assert wall.waited_share({"1": 0}, {"1": 10**9}, 10**6) == 1.0  # at most all of it
    monkeypatch.setattr(wall, "run_delays_ns", lambda: None)
    blind = wall.WallTimer().sampler(Workload(lambda: None, ()))
    blind.sample()
    assert blind.cpu_wait() is None
    monkeypatch.undo()
    if wall.run_delays_ns() is not None:
        calm = wall.WallTimer().sampler(Workload(time.sleep, (0.01,)))
        calm.sample()
        wait = calm.cpu_wait()
        assert wait is not None and wait < 0.9  # 10 ms asleep: were it counted, about 1


def test_the_wall_timer_says_when_its_process_did_not_run_and_reads_torch_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process that waits while it is timed (another process has the CPU, or the function
    sleeps) is seen by its CPU time; torch's threads are read only if the user imported it."""
    sampler = wall.WallTimer().sampler(Workload(time.sleep, (0.002,)))
    for _ in range(3):
        sampler.sample()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(get_num_threads=lambda: 6))
    caveat = sampler.caveat()
    assert caveat.startswith("torch runs 6 threads per operation")
    assert "the process ran on a CPU " in caveat
    monkeypatch.delitem(sys.modules, "torch")
    assert sampler.caveat().startswith("the process ran on a CPU ")
    # work on a device waits for it by design: nothing said of the host
    synced = wall.WallTimer(synchronize=lambda: None).sampler(Workload(time.sleep, (0.002,)))
    synced.sample()
    assert synced.caveat() == ""


def test_a_caveat_that_cannot_be_read_costs_the_samples_nothing() -> None:
    def broken() -> str:
        raise RuntimeError("no")

    sampler = Sampler(timer="t", sample=lambda: 1.0, caveat=broken)
    sampling = collect(sampler, Plan(min_samples=3, max_samples=3, budget_s=10.0))
    assert len(sampling.samples_ms) == 3
    assert sampling.caveat == "(its caveat could not be read: RuntimeError)"


# --- a function and its reference, in pairs (collect_pair) ---------------------------------


class Logged(FakeSampler):
    """A FakeSampler that writes its name into a shared log at each sample."""

    def __init__(
        self,
        name: str,
        log: list[str],
        values: Iterable[float],
        clock: FakeClock,
        cost_s: float = 0.0,
    ) -> None:
        super().__init__(values, clock, cost_s)
        self.name, self.log = name, log

    def sample(self) -> float:
        self.log.append(self.name)
        return super().sample()


def pair(
    a: Iterable[float], b: Iterable[float], plan: Plan, cost_s: float = 0.0
) -> tuple[engine.PairSampling, list[str], FakeClock]:
    clock, log = FakeClock(), []  # type: ignore[var-annotated]
    first, second = Logged("A", log, a, clock, cost_s), Logged("B", log, b, clock, cost_s)
    sampling = engine.collect_pair(first.make(), second.make(), plan, clock=clock)
    return sampling, log, clock


def test_pairs_alternate_which_side_goes_first() -> None:
    sampling, log, _ = pair(steady(2.0), steady(1.0), Plan(warmup=1, rounds=4))
    assert "".join(log) == "AB" + "BAABBAAB"  # the warmup pair, then A B B A A B B A
    assert sampling.first.samples_ms == (2.0,) * 4 and sampling.second.samples_ms == (1.0,) * 4
    assert sampling.ratios == (2.0,) * 4
    assert sampling.first.warmup == sampling.second.warmup == 1


def test_a_ratio_is_of_the_samples_of_one_pair() -> None:
    a, b = [3.0, 4.0, 6.0], [1.0, 2.0, 2.0]
    sampling, log, _ = pair(a, b, Plan(warmup=0, rounds=3))
    assert "".join(log) == "ABBAAB"
    assert sampling.ratios == (3.0, 2.0, 3.0)


def test_pairs_stop_once_the_ratio_is_precise_though_each_side_is_not() -> None:
    # Both sides move together by 30% per sample (a machine that drifts): each side's own
    # median never gets precise, their ratio is exact from the first pair. Precision is
    # judged on blocks of two pairs, and a median's interval needs 6 of them: the first
    # check with 6 is at 15 pairs, then one more to end on an even count.
    shared = list(itertools.islice(noisy(seed=3), 10_000))
    plan = Plan(min_samples=10, max_samples=500, budget_s=1e9, precision=0.005, warmup=0)
    sampling, _, _ = pair((2 * v for v in shared), shared, plan)
    assert len(sampling.ratios) == 16
    assert set(sampling.ratios) == {2.0}
    alone, _ = run(shared, dataclasses.replace(plan, warmup=0))
    assert len(alone.samples_ms) > 10  # one side alone is not precise at 10 samples


def test_pairs_with_a_noisy_ratio_run_to_max_samples() -> None:
    plan = Plan(min_samples=10, max_samples=44, budget_s=1e9, warmup=0)
    sampling, _, _ = pair(noisy(seed=1), noisy(seed=2), plan)
    assert len(sampling.ratios) == 44 == len(sampling.first.samples_ms)


def test_each_side_goes_first_in_as_many_pairs() -> None:
    # Each side reads 1% faster taken after its own sample than after the other's: of 5
    # pairs (A B, B A, A B, B A, A B) A would be first, and faster, in 3; at its max_samples
    # the fifth is left out.
    clock, log = FakeClock(), []  # type: ignore[var-annotated]

    class Cached(Logged):
        def sample(self) -> float:
            after_own = bool(log) and log[-1] == self.name
            super().sample()
            return 0.99 if after_own else 1.0

    a, b = Cached("A", log, steady(), clock), Cached("B", log, steady(), clock)
    plan = Plan(min_samples=5, max_samples=5, warmup=2)
    sampling = engine.collect_pair(a.make(), b.make(), plan, clock=clock)
    assert "".join(log) == "ABBA" + "ABBAABBAAB"
    first, second = (statistics.median(s.samples_ms) for s in (sampling.first, sampling.second))
    assert first == second and len(sampling.ratios) == 4
    # max_samples or the budget ending pairs on an odd count: the last left out (neither is
    # overrun); a precision rule's odd count: one more; fixed rounds stand.
    sampling, _, _ = pair(noisy(seed=1), noisy(seed=2), Plan(min_samples=10, max_samples=45))
    assert len(sampling.ratios) == 44
    sampling, _, clock = pair(noisy(seed=1), noisy(seed=2), Plan(budget_s=3.0), cost_s=0.25)
    assert clock.now <= 3.0 + 0.5 and len(sampling.ratios) % 2 == 0
    shared = list(itertools.islice(noisy(seed=3), 10_000))
    precise = Plan(min_samples=15, max_samples=500, budget_s=1e9, warmup=0)
    sampling, _, _ = pair((2 * v for v in shared), shared, precise)
    assert len(sampling.ratios) == 16  # (exact from the first: stopped at its minimum, 15)
    sampling, _, _ = pair(noisy(seed=1), noisy(seed=2), Plan(rounds=5, warmup=0))
    assert len(sampling.ratios) == 5


def test_pairs_are_precise_once_going_first_is_taken_out() -> None:
    """A side read 1% faster where the other side's sample came just before it (so by which
    side went first in a pair; on an H100 a layer norm's samples read 0.8-1.2% apart so,
    h100-2026-12-07f): the pairs' ratios fall in two groups, 2% apart, and their median is
    never precise; two consecutive pairs, one with each side first, cancel it, so the pairs
    stop at their minimum, not at the budget."""

    class Placed(FakeSampler):
        """Each sample 1% faster where the other side's sample came just before it."""

        def __init__(self, name: str, log: list[str], clock: FakeClock) -> None:
            super().__init__(steady(1.0), clock, 0.001)
            self.name, self.log = name, log

        def sample(self) -> float:
            after_other = bool(self.log) and self.log[-1] != self.name
            self.log.append(self.name)
            return super().sample() * (0.99 if after_other else 1.0)

    clock, log = FakeClock(), []  # type: ignore[var-annotated]
    plan = Plan(min_samples=20, max_samples=200, budget_s=1e9, warmup=0)
    a, b = Placed("A", log, clock), Placed("B", log, clock)
    sampling = engine.collect_pair(a.make(), b.make(), plan, clock=clock)
    assert {round(r, 4) for r in sampling.ratios} == {round(1 / 0.99, 4), round(0.99, 4)}
    assert len(sampling.ratios) == 20
    assert engine._blocks(list(sampling.ratios)) == [pytest.approx(1.0)] * 10
    assert median_halfwidth(list(sampling.ratios)) > 0.005  # the pairs' own: never precise


def test_pairs_stop_when_the_pairs_budget_is_spent() -> None:
    # Each sample costs 1/16 s, a pair 1/8 s, of a 2 s budget (the session gives a pair two
    # single budgets): warmup stops before the next pair would run past its quarter (4
    # pairs), then pairs start while the budget lasts: 12 more.
    plan = Plan(min_samples=2, max_samples=200, budget_s=2.0)
    sampling, log, clock = pair(noisy(seed=1), noisy(seed=2), plan, cost_s=1 / 16)
    assert sampling.first.warmup == 4
    assert len(sampling.ratios) == 12
    assert clock.now == 2.0 and len(log) == 2 * (4 + 12)


def test_pairs_warm_up_until_both_sides_are_steady() -> None:
    ramp = [5.0, 4.0, 3.0, 2.0, 1.5, 1.2]
    sampling, _, _ = pair(steady(1.0), itertools.chain(ramp, steady(1.0)), Plan(rounds=2))
    assert sampling.first.warmup == 11  # the reference's ramp, as one sampler's alone


def test_a_pair_too_slow_to_warm_up_is_the_first_pair() -> None:
    sampling, log, _ = pair(steady(2.0), steady(1.0), Plan(budget_s=0.001), cost_s=1.0)
    assert sampling.first.warmup == 0 and sampling.ratios == (2.0,) and log == ["A", "B"]


class Named:
    """A timer whose sampler's timer name is the one it is asked for, unless the workload's
    function cannot be timed by it (its ``only`` attribute names the one timer it gets)."""

    def __init__(self, name: str, made: list[str]) -> None:
        self.name, self.made = name, made

    def sampler(self, workload: Workload) -> Sampler:
        timer = getattr(workload.fn, "only", None) or self.name
        self.made.append(f"{workload.fn.__name__}:{timer}")
        return Sampler(timer=timer, sample=lambda: 1.0, close=lambda: self.made.append("close"))


def _fn(name: str, only: str | None = None) -> Callable[[], None]:
    def fn() -> None:
        return None

    fn.__name__ = name
    fn.only = only  # type: ignore[attr-defined]
    return fn


@pytest.mark.parametrize(
    ("first_only", "second_only", "expected", "made"),
    [
        (None, None, ("cuda-graph", "cuda-graph"), ["f:cuda-graph", "r:cuda-graph"]),
        # The reference cannot be captured: the function keeps its own timer (its history's),
        # and the two differ: no ratio.
        (None, "cupti", ("cuda-graph", "cupti"), ["f:cuda-graph", "r:cupti", "r:cupti", "close"]),
        # The function cannot be captured: the reference is timed by the function's timer.
        ("cupti", None, ("cupti", "cupti"), ["f:cupti", "r:cuda-graph", "r:cupti", "close"]),
        # Neither can be timed by the other's timer: both kept, each closed once (no ratio).
        (
            "wall",
            "cupti",
            ("wall", "cupti"),
            ["f:wall", "r:cupti", "r:cupti", "close"],
        ),
    ],
)
def test_paired_samplers_find_the_timer_both_can_use(
    first_only: str | None, second_only: str | None, expected: tuple[str, str], made: list[str]
) -> None:
    log: list[str] = []
    a, b = engine.paired_samplers(
        Named("cuda-graph", log),
        lambda name: Named(name, log),
        Workload(_fn("f", first_only)),
        Workload(_fn("r", second_only)),
    )
    assert (a.timer, b.timer) == expected
    assert log == made


def test_paired_samplers_close_the_first_when_the_second_fails() -> None:
    log: list[str] = []

    class Failing(Named):
        def sampler(self, workload: Workload) -> Sampler:
            if workload.fn.__name__ == "r":
                raise GpubenchError("the reference ran no GPU work")
            return super().sampler(workload)

    with pytest.raises(GpubenchError, match="no GPU work"):
        engine.paired_samplers(
            Failing("cuda-graph", log),
            lambda n: Named(n, log),
            Workload(_fn("f")),
            Workload(_fn("r")),
        )
    assert log == ["f:cuda-graph", "close"]


def test_a_graphs_kernel_time_is_told_apart_by_replay_in_one_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """timing.cuda.GraphBeside on a synthetic trace: each replay's kernels found by its graph
    launch's correlation id (ABBA order: attributed to the right side), a spin kernel of the
    function's own counted as its work, other work and host events left out, and a trace
    whose graph launches do not match the replays refused."""
    from pytest_gpubench.timing import cuda

    replays: list[str] = []

    def graph(name: str) -> Any:
        return types.SimpleNamespace(
            graph=types.SimpleNamespace(replay=lambda: replays.append(name))
        )

    def event(name: str, ts: float, dur: float, corr: int, cat: str = "kernel") -> dict[str, Any]:
        return {"cat": cat, "name": name, "ts": ts, "dur": dur, "args": {"correlation": corr}}

    def trace(launches: int, same_ts: bool = False) -> list[dict[str, Any]]:
        events = [  # work queued before the replays: not theirs
            event("warm", 0.0, 50.0, 1),
            event("cudaLaunchKernel", 0.5, 2.0, 1, "cuda_runtime"),
        ]
        for i, side in enumerate(replays):
            t, corr = 100.0 * (1 if same_ts else i + 1), 10 + i
            events.append(event("cudaGraphLaunch_v10000", t, 9.0, corr, "cuda_runtime"))
            work = [(4.0, "gpu_memset"), (6.0, "kernel")] if side == "a" else [(19.0, "kernel")]
            work.append((1.0, "kernel"))  # void spin_kernel(long): the function's own
            events += [event(side, t + 60 + j, d, corr, c) for j, (d, c) in enumerate(work)]
        if launches > len(replays):  # a graph launch of the function's own among the replays'
            events.append(event("cudaGraphLaunch", 950.0, 1.0, 99, "cuda_runtime"))
        return events[::-1]  # the trace's order is not the queue's

    def refused(edit: Callable[[list[dict[str, Any]]], Any], match: str) -> None:
        def edited(
            run: Callable[[], None], trace: bool = True, build: Callable[..., Any] = trace
        ) -> list[dict[str, Any]]:
            run()
            events = build(4)
            edit(events)
            return events

        replays.clear()
        monkeypatch.setattr(cuda, "_profile_events", edited)
        with pytest.raises(GpubenchError, match=match):
            a.alternate(b, 2)

    a, b = cuda.GraphBeside(graph("a"), 2), cuda.GraphBeside(graph("b"), 2)
    for same_ts in (False, True):  # launches of one time in the trace: by their ids
        replays.clear()
        traced = functools.partial(trace, 4, same_ts)
        monkeypatch.setattr(
            cuda, "_profile_events", lambda run, trace=True, t=traced: (run(), t())[1]
        )
        mine, other = a.alternate(b, 2)
        assert replays == ["a", "b", "b", "a"]
        assert mine == [pytest.approx(0.0055)] * 2 and other == [pytest.approx(0.010)] * 2
    replays.clear()
    monkeypatch.setattr(cuda, "_profile_events", lambda run, trace=True, t=trace: (run(), t(5))[1])
    with pytest.raises(GpubenchError, match="5 graph launches in the trace of 4 replays"):
        a.alternate(b, 2)

    def first(events: list[dict[str, Any]], name: str = "a") -> dict[str, Any]:
        return next(e for e in events if e["args"]["correlation"] == 10 and e["name"] == name)

    def anonymous(events: list[dict[str, Any]]) -> None:
        first(events, "cudaGraphLaunch_v10000")["args"] = {}

    def moved(events: list[dict[str, Any]]) -> None:  # to the second replay, of the other graph
        first(events)["args"]["correlation"] = 11

    refused(anonymous, "a graph launch in the trace has no correlation id")
    refused(moved, "replays of one graph own other kernels")
    refused(lambda events: first(events)["args"].clear(), "replays of one graph own other")
    refused(
        lambda events: events.__setitem__(
            slice(None),
            [e for e in events if e["cat"] == "cuda_runtime" or e["args"]["correlation"] != 13],
        ),
        "a replay owns no device work",
    )


class Own:
    """One of the profiler's own events (torch's ``_KinetoEvent``), as timing.cuda reads it."""

    def __init__(self, cat: str, name: str, ts: float, dur: float, corr: int) -> None:
        self.fields = cat, name, ts, dur, corr

    def device_type(self) -> types.SimpleNamespace:
        # (torch 2.11's events name their device, not their trace category)
        on_gpu = self.fields[0] in ("kernel", "gpu_memcpy", "gpu_memset")
        return types.SimpleNamespace(name="CUDA" if on_gpu else "CPU")

    def name(self) -> str:
        return self.fields[1]

    def start_ns(self) -> int:
        return round(self.fields[2] * 1e3)

    def duration_ns(self) -> int:
        return round(self.fields[3] * 1e3)

    def correlation_id(self) -> int:
        return self.fields[4]


class Profiled:
    """A finished torch profile: its exported trace and its own events; counts exports."""

    def __init__(self, trace: list[dict[str, Any]], own: list[Own] | None) -> None:
        self.trace, self.exports = trace, 0
        events = (lambda: own) if own is not None else None  # (None: a torch without them)
        self.profiler = types.SimpleNamespace(kineto_results=types.SimpleNamespace(events=events))

    def export_chrome_trace(self, path: str) -> None:
        self.exports += 1
        with open(path, "w", encoding="utf-8") as handle:
            json.dump({"traceEvents": self.trace}, handle)


def test_a_kernel_time_reads_the_profilers_own_events_once_they_read_as_its_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """timing.cuda._read: the first session with device work reads the exported trace and
    compares the profiler's own events with it; where they agree, later sessions read them
    and write no file; where they do not, or a torch has none, the trace stays the source."""
    from pytest_gpubench.timing import cuda

    def session(corr: int = 7, own_corr: int = 7, work: bool = True) -> Profiled:
        rows = [("cuda_runtime", "cudaGraphLaunch", 1.0, 3.5, corr)]
        if work:
            rows += [("kernel", "k", 5.0, 1.344, corr), ("gpu_memset", "m", 7.0, 0.5, corr)]
        trace = [
            {"cat": c, "name": n, "ts": t, "dur": d, "args": {"correlation": i}}
            for c, n, t, d, i in rows
        ]
        trace.append({"cat": "ac2g", "name": "ac2g", "ts": 1.0})  # (the trace's flow events)
        own = [Own(c, n, t, d, own_corr if c != "cuda_runtime" else i) for c, n, t, d, i in rows]
        return Profiled(trace, own)

    monkeypatch.setattr(cuda.OwnEvents, "agree", None)
    empty = session(work=False)
    assert cuda._read(empty, trace=False) and empty.exports == 1
    assert cuda.OwnEvents.agree is None  # (nothing to compare: asked again)
    first, second = session(), session()
    assert cuda._device_ms(cuda._read(first, trace=False)) == pytest.approx(0.001844)
    assert first.exports == 1 and cuda.OwnEvents.agree is True
    assert cuda._device_ms(cuda._read(second, trace=False)) == pytest.approx(0.001844)
    assert second.exports == 0
    always = session()
    assert cuda._read(always, trace=True) and always.exports == 1  # (grid, block: the trace's)
    # Own events gone after they agreed (a profiler that dropped them): the trace, not 0 ms.
    dropped = Profiled(session().trace, [])
    assert cuda._device_ms(cuda._read(dropped, trace=False)) == pytest.approx(0.001844)
    assert dropped.exports == 1 and cuda.OwnEvents.agree is True
    # Another correlation id (a torch whose own events tell replays apart otherwise), or
    # none at all: the trace, in this session and every later one.
    for odd in (session(own_corr=8), Profiled(session().trace, None)):
        monkeypatch.setattr(cuda.OwnEvents, "agree", None)
        assert cuda._device_ms(cuda._read(odd, trace=False)) == pytest.approx(0.001844)
        assert cuda.OwnEvents.agree is False
        later = session()
        cuda._read(later, trace=False)
        assert later.exports == 1


def test_a_replays_launches_leave_out_only_the_timers_own_blocking_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """timing.cuda.TorchGraph.profiled_replay on a synthetic trace: the blocking kernel the
    timer queued before the replay (the first spin on the stream) is left out; the
    function's own ``torch.cuda._sleep`` in the replay is its work, counted (all spins were
    left out, so a function that spins read as a graph missing a launch and fell to cupti:
    bench/results/h200-2026-12-05b)."""
    from pytest_gpubench.timing import cuda

    monkeypatch.setattr(cuda, "_sleep_cycles_per_ms", lambda: 1.0)
    monkeypatch.setattr(cuda, "_replay_ms", lambda graph: 1.0)

    def kernel(name: str, ts: float) -> dict[str, Any]:
        return {"cat": "kernel", "name": name, "ts": ts, "dur": 1.0}

    spin = "void spin_kernel(long)"
    queued = [kernel(spin, 0.0), kernel("work", 60.0), kernel(spin, 70.0)]
    queued += [kernel("work", 80.0), kernel(spin, 90.0)]
    trace = queued[::-1]  # the trace's order is not the queue's
    monkeypatch.setattr(cuda, "_profile_events", lambda run: (run(), trace)[1])
    launches, replay_ms = cuda.TorchGraph(None).profiled_replay()  # type: ignore[arg-type]
    assert replay_ms == 1.0
    assert {launch.name: launch.count for launch in launches} == {spin: 2, "work": 2}


def _graphs(calls: tuple[int, int], closed: list[str], fail: BaseException | None = None):
    """Two graph-like samplers of 1 µs calls batching ``calls``, made again by their count;
    closing one logs its name; ``fail``: making one again raises it."""

    def made(name: str, count: int) -> engine.Sampler:
        def again(workload: engine.Workload, n: int | None = None) -> engine.Sampler:
            if fail is not None:
                raise fail
            return made(name + "'", n or count)

        profile = engine.Profile(device_ms=0.001)
        close = lambda: closed.append(name)  # noqa: E731
        return engine.Sampler("g", lambda: 1.0, count, profile=profile, close=close, again=again)

    return made("a", calls[0]), made("b", calls[1])


@pytest.mark.parametrize("calls", [(10, 40), (40, 10)])
def test_alike_makes_the_side_of_fewer_calls_again_with_the_others_count(calls) -> None:
    closed: list[str] = []
    work = engine.Workload(fn=sum, args=([1],))
    a, b = engine.alike(*_graphs(calls, closed), work, work)
    assert (a.calls_per_sample, b.calls_per_sample) == (40, 40)
    assert closed == (["a"] if calls[0] == 10 else ["b"])  # the replaced one, closed


def test_alike_leaves_the_sides_where_making_one_again_fails() -> None:
    closed: list[str] = []
    work = engine.Workload(fn=sum, args=([1],))
    a, b = engine.alike(*_graphs((10, 40), closed, RuntimeError("capture")), work, work)
    assert (a.calls_per_sample, b.calls_per_sample, closed) == (10, 40, [])
    # A timeout or an interrupt meanwhile: neither side's graph is left open.
    with pytest.raises(KeyboardInterrupt):
        engine.alike(*_graphs((10, 40), closed, KeyboardInterrupt()), work, work)
    assert sorted(closed) == ["a", "b"]
