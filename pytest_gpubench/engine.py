"""The measurement loop: warm up until steady, then sample until precise or out of budget.

Timers only know how to take one sample; this module decides how many to take. It imports
neither torch nor pytest, so the stopping rules are tested with fake samplers.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .stats import median_halfwidth

# Warmup: compare the medians of two consecutive windows of this many samples...
WARMUP_WINDOW = 3
# ...and call the timer steady when they agree within this fraction.
WARMUP_TOLERANCE = 0.02
# Share of the budget warmup may use before sampling starts regardless.
WARMUP_SHARE = 0.25
# Check the stopping rule every this many samples (it sorts the samples).
CHECK_EVERY = 5


@dataclass(frozen=True)
class Workload:
    """What to time: ``fn(*args, **kwargs)``, or with fresh arguments from ``setup()``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    setup: Callable[[], Any] | None = None

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


@dataclass
class Sampler:
    """A prepared timer for one workload.

    ``sample()`` returns the time of one call in milliseconds (averaged over
    ``calls_per_sample`` back-to-back calls where the timer batches them).
    """

    timer: str
    sample: Callable[[], float]
    calls_per_sample: int = 1
    note: str = ""
    close: Callable[[], None] = lambda: None
    profile: Any = None  # what one call runs on the device and its CUPTI time, where known


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
    profile: Any = None


def collect(
    sampler: Sampler,
    plan: Plan,
    clock: Callable[[], float] = time.perf_counter,
    when_warm: Callable[[], object] = lambda: None,
) -> Sampling:
    """Warm up, then take samples until the median is precise enough or the budget is spent.

    ``when_warm`` runs once between warmup and sampling (the clock watch reads there: before
    warmup an idle GPU still shows its idle clock)."""
    started = clock()
    warm: list[float] = []
    while not _warm_enough(warm, plan, clock() - started):
        warm.append(sampler.sample())
    when_warm()
    samples: list[float] = []
    while not _enough(samples, plan, clock() - started):
        samples.append(sampler.sample())
    return Sampling(
        timer=sampler.timer,
        samples_ms=tuple(samples),
        warmup=len(warm),
        calls_per_sample=sampler.calls_per_sample,
        note=sampler.note,
        profile=sampler.profile,
    )


def _warm_enough(warm: list[float], plan: Plan, elapsed_s: float) -> bool:
    if plan.warmup is not None:
        return len(warm) >= plan.warmup
    if len(warm) < 2 * WARMUP_WINDOW:
        return False
    if elapsed_s > WARMUP_SHARE * plan.budget_s:
        return True
    previous = statistics.median(warm[-2 * WARMUP_WINDOW : -WARMUP_WINDOW])
    latest = statistics.median(warm[-WARMUP_WINDOW:])
    return abs(latest - previous) <= WARMUP_TOLERANCE * previous


def _enough(samples: list[float], plan: Plan, elapsed_s: float) -> bool:
    n = len(samples)
    if plan.rounds is not None:
        return n >= plan.rounds
    if n < plan.min_samples:
        return False
    if n >= plan.max_samples or elapsed_s >= plan.budget_s:
        return True
    return n % CHECK_EVERY == 0 and median_halfwidth(samples) <= plan.precision
