"""A test's two sides in this process, as the fixture holds them: the revision's calls
waiting for their pair, the measurements of its side, and what its inputs were.

The seam between the fixture (run.fixture) and the lockstep structure of
``--gpubench-against`` (versus/lockstep.py), which sets the sides up and judges the pairs.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..core.errors import GpubenchError
from ..core.records import Measurement
from ..timing.engine import Sampler, Workload
from .call import Call, Untimed

# A pair set up again in its process takes few samples: between set-ups a small kernel's pair
# moves 0.3-1.9%, within one its ratio is known to 0.02-0.15% (bench/results/h200-2026-11-29d).
MORE_PAIR_WARMUP = 2
MORE_PAIR_SAMPLES = 4  # (even: each side first in as many, timing.engine.collect_pair)
# A lockstep pair's kernel time per call (timing.engine.Beside: a graph's, beside its time
# per call): this many samples of each side, alternately, after the pair's own, in
# one profiler session (a session's trace costs more than its replays); the median of each
# side's is that side's, judged over the pairs as the pair's own number is.
BESIDE_ROUNDS = 4  # (even, as MORE_PAIR_SAMPLES: GraphBeside.alternate's A B B A)


class DuoError(GpubenchError):
    """The other process of a duo (run/duo.py) ended, went silent or failed to time a call."""


class RemoteCallError(DuoError):
    """The other process of a duo could not time its call, and goes on."""


def error_line(exc: BaseException) -> str:
    """An error as a side reports it: its type and its message's first line, at most 200
    characters."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}"[:200] if text else type(exc).__name__


class Sides(Protocol):
    """The two sides' modules in one process (versus.lockstep.TwoSides)."""

    def on_side(self, base: bool, workload: Workload) -> Workload:
        """``workload`` whose every call finds its side's modules (the revision's where
        ``base``)."""
        ...

    def current(self, base: bool) -> None:
        """Make one side's modules current (the working tree's after a pair)."""
        ...

    def revision_error(self, exc: BaseException) -> str | None:
        """``exc``'s line where a revision's timed call raised it (the revision's failure,
        not the working tree's test's); None where it did not."""
        ...


@dataclass(frozen=True)
class Held:
    """A call of the revision's test body: made once (untimed), waiting for its pair."""

    workload: Workload
    call: Call


@dataclass(frozen=True)
class Pair:
    """A call timed in lockstep, kept for more pairs in this process: each side's workload
    (finding its side's modules), the working tree's call and the revision's untimed calls'
    durations (which set how its side is sampled)."""

    head: Workload
    base: Workload
    call: Call
    base_untimed: Untimed


@dataclass
class Lockstep:
    """One test's two sides in this process: the revision's held calls (until the working
    tree's call of the same key takes them) and its measurements, by key."""

    two: Sides
    head: bool = False  # the working tree's body is running
    # Why the revision's test did not pass: its calls are then not timed (as a fresh
    # process's failed test is not judged, versus/ab.py).
    failed: str = ""
    held: dict[str, Held] = field(default_factory=dict)
    base: dict[str, Measurement] = field(default_factory=dict)
    # What the revision's call was given that the working tree's was not, by key: its time is
    # of other work, so it is reported, not judged (:func:`inputs_changed`).
    inputs: dict[str, str] = field(default_factory=dict)
    # More pairs come from this process (versus.lockstep.Pairing.in_process): the calls
    # timed in lockstep, by key, kept (their inputs alive) until the test's verdict.
    keep: bool = False
    paired: dict[str, Pair] = field(default_factory=dict)
    # The revision's calls held by another process (run/duo.py): their untimed calls'
    # durations and what they were given by key, and the sampler of a key's call by a
    # timer's name.
    remote_untimed: dict[str, Untimed] = field(default_factory=dict)
    remote_inputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    remote: Callable[[str, str], Sampler] | None = None
    # A duo's leader: how many pairs of each call it takes, those after the first (set up
    # again, both sides' inputs placed anew) by key (its own side's measurement, the
    # other's), and why they stopped early ('' when they did not).
    pairs: int = 1
    more: dict[str, list[tuple[Measurement, Measurement]]] = field(default_factory=dict)
    stopped: str = ""
    # The pads' sizes of inputs placed anew (timing.device.placed_anew), drawn afresh in
    # each process (versus.lockstep.Pairing says why).
    draw: random.Random = field(default_factory=random.Random)


def inputs_changed(base: Sequence[str], head: Sequence[str]) -> str:
    """How the working tree's call's inputs differ from the revision's (their descriptions,
    timing.device.inputs_of), '' where they do not: ``argument 1: (4096,) float32 ->
    (8192,) float32``."""
    if len(base) != len(head):
        return f"{len(base)} arguments -> {len(head)}"
    return "; ".join(
        f"argument {i + 1}: {b} -> {h}"
        for i, (b, h) in enumerate(zip(base, head, strict=True))
        if b != h
    )[:300]
