"""The measurement loop: warm up until steady, then sample until precise or out of budget.

Timers only know how to take one sample; this module decides how many to take. It imports
neither torch nor pytest, so the stopping rules are tested with fake samplers; the interval
of the median that stops sampling is core.samples' (the verdict's statistics use it too).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.errors import GpubenchError
from ..core.kernels import Launch
from ..core.records import Energy
from ..core.samples import median_halfwidth, sample_problem

# Warmup: compare the medians of two consecutive windows of this many samples...
WARMUP_WINDOW = 3
# ...and call the timer steady when they agree within this fraction.
WARMUP_TOLERANCE = 0.02
# Share of the budget warmup may use: it never starts a sample that would run past it.
WARMUP_SHARE = 0.25
# A function whose untimed first call took this share of the budget or more is slow: timers
# spend no calls on calibration (Workload.slow).
SLOW_SHARE = 0.1
# Check the stopping rule every this many samples (it sorts the samples).
CHECK_EVERY = 5
# The longest replay ``alike`` makes, by the eager call's device time: ten times a graph's
# target (timing.fallback.GRAPH_REPLAY_TARGET_MS). On the recorded lockstep pairs of unchanged
# tests, the side batching 3 or more times fewer calls read slower by 0.42% (median;
# cupti-graph, 685 pairs; why is not shown) and their spread was 0.95% against 0.69% with
# counts alike (python bench/lockstep_runs.py over the committed archives).
ALIKE_REPLAY_MS = 10.0


@dataclass(frozen=True)
class Workload:
    """What to time: ``fn(*args, **kwargs)``, or with fresh arguments from ``setup()``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    setup: Callable[[], Any] | None = None
    # One call takes a large share of the budget (the untimed first call showed it, and a
    # second where the first was slow): timers take one call per sample and spend no calls
    # on calibration.
    slow: bool = False
    # Called first by each preparation, before a timer's clock starts: the side of a test
    # whose two revisions share this process made current (versus.lockstep.TwoSides).
    enter: Callable[[], None] | None = None

    def prepare(self) -> Callable[[], Any]:
        """Run ``enter`` and ``setup`` (untimed) and return the call to time."""
        if self.enter is not None:
            self.enter()
        args, kwargs = self.args, self.kwargs
        if self.setup is not None:
            fresh = self.setup()
            if fresh is not None:
                try:
                    args, kwargs = fresh
                    args, kwargs = tuple(args), dict(kwargs)
                except (TypeError, ValueError):
                    raise TypeError(
                        f"gpubench setup must return None or (args, kwargs), got {fresh!r}"
                    ) from None
        fn = self.fn
        return lambda: fn(*args, **kwargs)


@dataclass(frozen=True)
class Profile:
    """What one call of a workload runs on the device: its launches (kernels, copies and
    memsets, with their configuration and share of the time) and their summed device time in
    milliseconds (``None`` where the timer cannot tell); ``graph_ms``, a CUDA graph replay's
    time per call, where the timer's number is another (``cupti-graph``)."""

    launches: tuple[Launch, ...] = ()
    device_ms: float | None = None
    graph_ms: float | None = None


@dataclass
class Sampler:
    """A prepared timer for one workload.

    ``sample()`` returns the time of one call in milliseconds (averaged over
    ``calls_per_sample`` back-to-back calls where the timer batches them). ``taken`` holds
    samples the timer already took while it prepared (a calibration call that was also a
    valid sample): ``collect`` uses them before taking new ones, so a slow function pays
    for no call twice.
    """

    timer: str
    sample: Callable[[], float]
    calls_per_sample: int = 1
    note: str = ""
    close: Callable[[], None] = lambda: None
    profile: Profile | None = None  # what one call runs on the device, where known
    taken: tuple[float, ...] = ()
    # What made these samples unreliable, read once they are taken ('' when nothing did).
    caveat: Callable[[], str] = lambda: ""
    # The share of the time it timed that the process was ready to run and had no CPU (None:
    # not known), read once the samples are taken: a host timer's loaded machine.
    cpu_wait: Callable[[], float | None] = lambda: None
    # The bytes one call holds at its peak above what was held before it (None: not known),
    # read once after sampling; None here: the device's allocator is read (timing.device).
    peak_bytes: Callable[[], int | None] | None = None
    # Energy per call, given the time per call in seconds (None: not known), read once after
    # sampling where asked for; None here: NVML's counter is read (timing.energy).
    energy: Callable[[float], Energy | None] | None = None
    # A sampler of the same function on other inputs of the same shapes (a lockstep pair
    # set up again, its inputs placed anew), made as this one was without probing the
    # function again; None: make it as the first (``remade``).
    again: Again | None = None
    # The call's kernel time, taken beside this timer's time per call where both sides of a
    # lockstep pair have one (a graph replay's: timing.cuda.GraphBeside).
    beside: Beside | None = None


class Again(Protocol):
    """A sampler of the same function on ``workload`` (other inputs of the same shapes),
    batching ``count`` calls per sample (None: as many as the sampler it remakes)."""

    def __call__(self, workload: Workload, count: int | None = None) -> Sampler: ...


class Beside(Protocol):
    """A call's kernel time (its kernels' summed time), taken beside a sampler's time per
    call: ``timer`` names the timer whose number it is (``cupti-graph``, whose prior judges
    it)."""

    timer: str

    def alternate(self, other: Beside, rounds: int) -> tuple[list[float], list[float]]:
        """``rounds`` samples of this and of ``other`` (ms per call), taken in alternation
        (A B B A ...) as ``collect_pair`` takes its pairs: this one's, the other's."""
        ...


def remade(again: Again | None, workload: Workload) -> Sampler | None:
    """``again(workload)`` (Sampler.again), or None where there is none or it failed: the
    caller then makes the sampler as the first was, whose probe says why."""
    if again is None:
        return None
    try:
        return again(workload)
    except Exception:
        return None


class Timer(Protocol):
    """A way of timing workloads. ``name`` is stored with results; names never mix."""

    name: str

    def sampler(self, workload: Workload) -> Sampler: ...


@dataclass(frozen=True)
class Plan:
    """How long and how precisely to measure."""

    min_samples: int = 10
    max_samples: int = 200
    budget_s: float = 1.0
    precision: float = 0.005
    warmup: int | None = None  # fixed number of warmup samples instead of "until steady"
    rounds: int | None = None  # fixed number of samples instead of the stopping rule


@dataclass(frozen=True)
class Sampling:
    timer: str
    samples_ms: tuple[float, ...]
    warmup: int
    calls_per_sample: int
    note: str = ""
    profile: Profile | None = None
    caveat: str = ""  # what made the samples unreliable (the host timer on a busy host)
    cpu_wait: float | None = None  # Sampler.cpu_wait


def collect(
    sampler: Sampler,
    plan: Plan,
    clock: Callable[[], float] = time.perf_counter,
    when_warm: Callable[[], object] = lambda: None,
) -> Sampling:
    """Warm up, then take samples until the median is precise enough or the budget is spent.

    Lasts at most ``plan.budget_s`` plus one sample: a sample starts only while the budget
    lasts (the first one always does), and warmup never starts a sample that would run past
    its share of the budget, so a function that is slow for its budget is not warmed up.
    ``plan.warmup`` and ``plan.rounds``, when given, are taken whatever the budget.
    ``when_warm`` runs once between warmup and sampling (the clock watch reads there: before
    warmup an idle GPU still shows its idle clock)."""
    started = clock()
    source = _Source(sampler, clock)
    warm: list[float] = []
    while not _warm_enough(warm, plan, clock() - started + source.cost):
        warm.append(source.take())
    samples: list[float] = []
    if plan.warmup is None and len(warm) == 1 and clock() - started > WARMUP_SHARE * plan.budget_s:
        # The first sample, taken before its cost was known, ran past warmup's share: the
        # function is too slow to warm up in this budget, and that sample is the first one.
        samples.append(warm.pop())
    when_warm()
    while not _enough(samples, plan, clock() - started):
        samples.append(source.take())
    return _sampling(sampler, samples, len(warm))


def _sampling(sampler: Sampler, samples: list[float], warmup: int) -> Sampling:
    """What ``sampler`` took: ``samples`` after ``warmup`` (samples or pairs)."""
    return Sampling(
        timer=sampler.timer,
        samples_ms=tuple(samples),
        warmup=warmup,
        calls_per_sample=sampler.calls_per_sample,
        note=sampler.note,
        profile=sampler.profile,
        caveat=_caveat(sampler),
        cpu_wait=_cpu_wait(sampler),
    )


class _Source:
    """Takes a sampler's samples, those it took while it prepared first, and checks each;
    ``cost``: the seconds one sample costs, the largest seen, by the clock or by the sample's
    own value."""

    def __init__(self, sampler: Sampler, clock: Callable[[], float]) -> None:
        self.sampler = sampler
        self.clock = clock
        self.pending = list(sampler.taken)
        calls = sampler.calls_per_sample
        self.cost = max((value * calls / 1e3 for value in self.pending), default=0.0)

    def take(self) -> float:
        sampler = self.sampler
        before = self.clock()
        value = self.pending.pop(0) if self.pending else sampler.sample()
        problem = sample_problem(value)
        if problem:
            raise GpubenchError(
                f"timer {sampler.timer} measured {problem} for one call; a timer must "
                "return milliseconds per call"
            )
        value = float(value)
        self.cost = max(self.cost, self.clock() - before, value * sampler.calls_per_sample / 1e3)
        return value


@dataclass(frozen=True)
class PairSampling:
    """Two samplers sampled in alternation: each one's ``Sampling`` (samples in the order
    taken, ``warmup`` counting pairs) and per pair the first's sample over the second's."""

    first: Sampling
    second: Sampling
    ratios: tuple[float, ...]


def collect_pair(
    first: Sampler,
    second: Sampler,
    plan: Plan,
    clock: Callable[[], float] = time.perf_counter,
    when_warm: Callable[[], object] = lambda: None,
) -> PairSampling:
    """Warm up, then take pairs of samples until the median ratio (first / second) of each
    two consecutive pairs (_blocks) is precise enough or the budget is spent: ``collect``'s
    rules, with pairs for samples and that ratio for the time (so at least 15 pairs where
    precision stops them: 6 blocks give a median's interval, checked every 5 pairs).

    A pair is one sample of each, the first's then the second's in even pairs and the other
    way round in odd ones (A B B A A B ...): a drift of the machine falls on both alike, and
    what one call leaves behind (clocks, caches) precedes each side as often. Warmup takes
    pairs until both sides are steady (or its share of the budget is spent), so neither is
    timed cold. ``plan`` counts pairs (``min_samples``, ``max_samples``, ``warmup``,
    ``rounds``) and its budget is the pair's: the caller gives it twice a single measurement's.
    Each side goes first in as many pairs (``_unbalanced``): pairs that end on an odd count
    take one more where the budget and ``max_samples`` let it start, else leave the last out.
    """
    started = clock()
    one, other = _Source(first, clock), _Source(second, clock)
    taken = 0

    def take() -> tuple[float, float]:
        nonlocal taken
        taken += 1
        if taken % 2:
            a = one.take()
            return a, other.take()
        b = other.take()
        return one.take(), b

    def steady(warm: list[tuple[float, float]]) -> bool:
        elapsed = clock() - started + one.cost + other.cost
        return all(_warm_enough([w[i] for w in warm], plan, elapsed) for i in (0, 1))

    warm: list[tuple[float, float]] = []
    while not steady(warm):
        warm.append(take())
    pairs: list[tuple[float, float]] = []
    if plan.warmup is None and len(warm) == 1 and clock() - started > WARMUP_SHARE * plan.budget_s:
        pairs.append(warm.pop())  # as in collect: too slow to warm up in this budget
    ratios = [a / b for a, b in pairs]
    when_warm()
    while not _enough(ratios, plan, clock() - started, _blocks):
        a, b = take()
        pairs.append((a, b))
        ratios.append(a / b)
    if _unbalanced(ratios, plan):
        # One more while the budget and max_samples let it start (a precision rule that
        # stopped on an odd count); else the last one is left out.
        if len(ratios) < plan.max_samples and clock() - started < plan.budget_s:
            pairs.append(take())
            ratios.append(pairs[-1][0] / pairs[-1][1])
        else:
            del pairs[-1], ratios[-1]
    first_side, second_side = ([p[i] for p in pairs] for i in (0, 1))
    return PairSampling(
        _sampling(first, first_side, len(warm)),
        _sampling(second, second_side, len(warm)),
        tuple(ratios),
    )


def _blocks(ratios: list[float]) -> list[float]:
    """Each two consecutive pairs' ratio (their geometric mean): one of them had each side
    first, so what going first does to a side cancels in it. The precision rule asks it of
    these: where that order moves a side, the pairs' own ratios fall in two groups and their
    median is never precise (on an H100, a 33 µs layer norm's samples in pairs read 0.8-1.2%
    apart by order against 0.03-0.17% within one, and the pairs ran to their budget: 78-132
    where a plain run stops at 20; h100-2026-12-07f)."""
    return [math.sqrt(ratios[i] * ratios[i + 1]) for i in range(0, len(ratios) - 1, 2)]


def _unbalanced(ratios: list[float], plan: Plan) -> bool:
    """Whether one side went first in more of the pairs than the other: an odd count (a
    count the test's ``rounds`` fixed stands; so does a slow call's lone pair, which another
    would double). A side taken after its own sample (the first of each pair after the first:
    A B B A ...) read faster than after the other's (the first pairs of A/A runs: a 33 µs
    layer norm by kernel time 0.96%; cupti-graph calls of 5-100 µs by a median 0.44%, up to
    1.35%, over 330 measurements; python bench/lockstep_runs.py), so of 5 pairs the side
    first in 3 read faster."""
    return plan.rounds is None and len(ratios) > 1 and len(ratios) % 2 == 1


def alike(a: Sampler, b: Sampler, first: Workload, second: Workload) -> tuple[Sampler, Sampler]:
    """``a`` (of ``first``) and ``b`` (of ``second``) batching as many calls per sample: the
    one of fewer made again with the other's count, where both are one timer's, can be made
    again, the fewer is more than one call (a one-call graph was validated for no more) and
    its remade replay would last at most ALIKE_REPLAY_MS by its eager call's device time;
    else, or where remaking fails, as they were. A lockstep pair's sides are one function's,
    and a side batched fewer calls read slower where nothing changed (ALIKE_REPLAY_MS)."""
    few, many = sorted((a, b), key=lambda s: s.calls_per_sample)
    call_ms = few.profile.device_ms if few.profile is not None else None
    if (
        a.timer != b.timer
        or few.again is None
        or many.again is None
        or not 1 < few.calls_per_sample < many.calls_per_sample
        or not call_ms
        or many.calls_per_sample * call_ms > ALIKE_REPLAY_MS
    ):
        return a, b
    try:
        made = few.again(first if few is a else second, many.calls_per_sample)
    except Exception:
        return a, b
    except BaseException:  # (a timeout, an interrupt: neither graph outlives it)
        a.close()
        b.close()
        raise
    few.close()
    return (made, b) if few is a else (a, made)


def paired_samplers(
    timer: Timer, timer_named: Callable[[str], Timer], first: Workload, second: Workload
) -> tuple[Sampler, Sampler]:
    """Samplers of two workloads by one timer where one can time both: a ratio of two
    timers' numbers is no measurement. Each by ``timer``; where they end up on different
    timers (``auto`` captured a graph of one and not of the other), the second by the
    first's timer (``timer_named``: the timer a name asks for). The first is never timed
    otherwise than it would be alone: adding a reference must not move a function's own
    time to another timer (its history would read incomparable). Their timers still differ
    where the second cannot take the first's (it fails, or falls to another timer): the
    caller records no ratio. A sampler given up is closed; so are both when building one
    fails."""
    a = timer.sampler(first)
    try:
        b = timer.sampler(second)
    except BaseException:
        a.close()
        raise
    if b.timer == a.timer:
        return a, b
    try:
        other = timer_named(a.timer).sampler(second)
    except Exception:
        return a, b
    if other.timer != a.timer:
        other.close()
        return a, b
    b.close()
    return a, other


def _caveat(sampler: Sampler) -> str:
    """The sampler's caveat; a timer whose caveat fails costs its samples nothing."""
    try:
        return str(sampler.caveat())
    except Exception as exc:
        return f"(its caveat could not be read: {type(exc).__name__})"


def _cpu_wait(sampler: Sampler) -> float | None:
    """The sampler's share of time spent waiting for a CPU; None where it cannot tell, or
    reading it failed (a user's timer: its samples stand)."""
    try:
        wait = sampler.cpu_wait()
    except Exception:
        return None
    if not isinstance(wait, int | float) or isinstance(wait, bool):
        return None
    # (read around each sample, its window a little wider than the timed one's: at most 1)
    return min(1.0, float(wait)) if wait >= 0 else None


def _warm_enough(warm: list[float], plan: Plan, elapsed_after_next_s: float) -> bool:
    if plan.warmup is not None:
        return len(warm) >= plan.warmup
    if elapsed_after_next_s > WARMUP_SHARE * plan.budget_s:
        return True  # the next warmup sample would run past warmup's share
    if len(warm) < 2 * WARMUP_WINDOW:
        return False
    previous = statistics.median(warm[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    latest = statistics.median(warm[-WARMUP_WINDOW:])
    return abs(latest - previous) <= WARMUP_TOLERANCE * previous


def _enough(
    samples: list[float],
    plan: Plan,
    elapsed_s: float,
    precise: Callable[[list[float]], list[float]] | None = None,
) -> bool:
    """Whether to stop: the counts and budget by ``samples``, the precision by
    ``precise(samples)`` (pairs' blocks: _blocks), else by ``samples``."""
    n = len(samples)
    if plan.rounds is not None:
        return n >= plan.rounds
    if n >= plan.max_samples or (n >= 1 and elapsed_s >= plan.budget_s):
        return True  # the budget beats min_samples: a slow function gets fewer samples
    if n < plan.min_samples:
        return False
    if n % CHECK_EVERY:
        return False
    return median_halfwidth(samples if precise is None else precise(samples)) <= plan.precision
