"""The measurement loop: warm up until steady, then sample until precise or out of budget.

Timers only know how to take one sample; this module decides how many to take. It imports
neither torch nor pytest, so the stopping rules are tested with fake samplers; the interval
of the median that stops sampling is the statistics package's (judge.stats).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.errors import GpubenchError
from ..core.kernels import Launch
from ..core.samples import sample_problem
from ..judge.stats import median_halfwidth

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


@dataclass(frozen=True)
class Workload:
    """What to time: ``fn(*args, **kwargs)``, or with fresh arguments from ``setup()``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    setup: Callable[[], Any] | None = None
    # One call takes a large share of the budget (the untimed first call showed it): timers
    # take one call per sample and spend no calls on calibration.
    slow: bool = False

    def prepare(self) -> Callable[[], Any]:
        """Run ``setup`` (untimed) and return the call to time."""
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
    cut_short: bool = False  # the budget ran out before min_samples were taken
    caveat: str = ""  # what made the samples unreliable (the host timer on a busy host)


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
    pending = list(sampler.taken)
    # Seconds one sample costs: the largest seen, by the clock or by the sample's own value.
    cost = max((value * sampler.calls_per_sample / 1e3 for value in pending), default=0.0)

    def take() -> float:
        nonlocal cost
        before = clock()
        value = pending.pop(0) if pending else sampler.sample()
        problem = sample_problem(value)
        if problem:
            raise GpubenchError(
                f"timer {sampler.timer} measured {problem} for one call; a timer must "
                "return milliseconds per call"
            )
        value = float(value)
        cost = max(cost, clock() - before, value * sampler.calls_per_sample / 1e3)
        return value

    warm: list[float] = []
    while not _warm_enough(warm, plan, clock() - started + cost):
        warm.append(take())
    samples: list[float] = []
    if plan.warmup is None and len(warm) == 1 and clock() - started > WARMUP_SHARE * plan.budget_s:
        # The first sample, taken before its cost was known, ran past warmup's share: the
        # function is too slow to warm up in this budget, and that sample is the first one.
        samples.append(warm.pop())
    when_warm()
    while not _enough(samples, plan, clock() - started):
        samples.append(take())
    return Sampling(
        timer=sampler.timer,
        samples_ms=tuple(samples),
        warmup=len(warm),
        calls_per_sample=sampler.calls_per_sample,
        note=sampler.note,
        profile=sampler.profile,
        cut_short=plan.rounds is None and len(samples) < plan.min_samples,
        caveat=_caveat(sampler),
    )


def _caveat(sampler: Sampler) -> str:
    """The sampler's caveat; a timer whose caveat fails costs its samples nothing."""
    try:
        return str(sampler.caveat())
    except Exception as exc:
        return f"(its caveat could not be read: {type(exc).__name__})"


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


def _enough(samples: list[float], plan: Plan, elapsed_s: float) -> bool:
    n = len(samples)
    if plan.rounds is not None:
        return n >= plan.rounds
    if n >= plan.max_samples or (n >= 1 and elapsed_s >= plan.budget_s):
        return True  # the budget beats min_samples: a slow function gets fewer samples
    if n < plan.min_samples:
        return False
    return n % CHECK_EVERY == 0 and median_halfwidth(samples) <= plan.precision
