"""How far another pick of the same work may move a test's time (issue 45, item 1).

Compiled and autotuned code may launch the same kernels with another grid, block, register
count or shared memory; such a pick is judged against the test's history of another binary,
less what a pick alone explains: a Student t quantile fitted by ``bench/binary_spread.py``
and narrowed by the test's own binaries. The picks measured: docs/guide.md, "Verdicts"; why
the gate gives it half of a look's level: docs/verdict.md, "Another GPU".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.baseline import Binary
from ..core.kernels import Launch, same_work
from .offsets import Spread, reach

# (nu0, s0) of a pick by who picks: bench/binary_spread.py's Student t fitted to the picks,
# the machine's offset taken out (its table "sigma_b for the rule", H200; the H100's the same
# within its fewer picks). tests/judge/test_picks.py checks them against the script.
AUTOTUNER = (1.1, 0.0076)
INDUCTOR = (1.1, 0.0758)
# The kernels Inductor generates and names (triton_poi_fused_..., triton_per_..., ...).
INDUCTOR_KERNEL = re.compile(r"triton_(poi|per|red|tem|for)_")


@dataclass(frozen=True)
class PickSpread(Spread):
    """What a test's history says of a new pick's offset from its reference binary."""

    reference: Binary  # the binary of the same work with the most sessions
    binaries: int  # of the same work in the history
    picker: str  # "autotuner" or "inductor"

    def says(self, allowance: float, changes: Sequence[str]) -> str:
        """The verdict's words on this pick (``changes``), given the ``allowance`` (log)."""
        seen = f"{self.binaries} binar{'y' if self.binaries == 1 else 'ies'} of this work seen"
        return (
            f"another pick of the same work: {'; '.join(changes)} (a pick by the {self.picker} "
            f"alone may move it by {reach(allowance)} here: {seen})"
        )

    remedy = (
        "saved, this pick joins the history, and a run that picks it again is judged against "
        "its own sessions"
    )


def picker(launches: Sequence[Launch]) -> str:
    """Who picks the configuration of ``launches``: Inductor when it generated any of them."""
    return "inductor" if any(INDUCTOR_KERNEL.match(k.name) for k in launches) else "autotuner"


def pick_spread(binaries: Sequence[Binary], launches: Sequence[Launch]) -> PickSpread | None:
    """The spread of a new pick of ``launches`` among ``binaries`` (a test's, the latest
    first); None when none of them runs the same work with a history."""
    same = [b for b in binaries if b.history and same_work(b.kernels, launches)]
    if not same:
        return None
    reference = max(same, key=lambda b: len(b.history))  # the latest of the longest
    offsets = [math.log(b.median_ms / reference.median_ms) for b in same if b is not reference]
    who = picker(launches)
    return PickSpread(*spread(offsets, who), reference, len(same), who)


def spread(offsets: Sequence[float], who: str) -> tuple[float, float]:
    """(degrees of freedom, scale) of a new pick's log offset from a reference binary, given
    the log ``offsets`` of the test's other binaries from it, picked by ``who``."""
    nu0, s0 = INDUCTOR if who == "inductor" else AUTOTUNER
    df = nu0 + len(offsets)
    return df, math.sqrt((nu0 * s0**2 + sum(o * o for o in offsets)) / df)
