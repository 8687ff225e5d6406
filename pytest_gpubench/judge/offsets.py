"""A verdict widened by what the history cannot see: another pick of the same work
(judge/picks.py), another GPU of the model (judge/machines.py), or both.

Each offset gets an equal share of half of a look's level, the sessions' noise the other half
(a union bound): the sessions are judged as they are (``plain``), made faster by the summed
``allowance`` (``up``: regressed only beyond what the offsets and the noise together explain)
and slower by it (``down``: improved likewise); the gate is the history's widened by it, and
by what the offsets may take from a slowdown with the chance the target power leaves.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special

from ..core.records import Judgement, Status, gate_text
from ..core.samples import plural
from .rule import NOT_GATED_BEYOND


@dataclass(frozen=True)
class Spread:
    """What a test's history says of an offset it has not seen: a Student t of its log."""

    df: float
    scale: float  # log scale

    def allowance(self, level: float) -> float:
        """The log offset exceeded with chance ``level``."""
        return self.scale * float(special.stdtrit(self.df, 1 - level))


def reach(allowance: float) -> str:
    """How far an offset's ``allowance`` (log) may move a time, in a verdict's words."""
    if allowance < math.log1p(NOT_GATED_BEYOND):
        return f"up to {math.expm1(allowance):.1%}"
    return f"more than {NOT_GATED_BEYOND:.0%}"


def widened(
    plain: Judgement,
    up: Judgement | None,
    down: Judgement | None,
    allowance: float,
    unlucky: float,
    whys: Sequence[str],
    remedies: Sequence[str],
    *,
    threshold: float,
) -> Judgement:
    """The verdict on sessions another pick or GPU may have moved by up to ``allowance`` (log),
    from ``plain``, ``up`` and ``down`` as the module's docstring says. ``unlucky``: the offset
    the sessions may have moved the other way with the chance the target power leaves (a
    slowdown on a GPU where the test runs faster reads less: caught at the gate all the same).
    Without ``up`` and ``down`` (an allowance no gate holds) it is not gated: ``whys`` say what
    moved, ``remedies`` what would gate it."""
    why = "; ".join(whys)
    if not plain.gated:  # the history gates nothing, an offset or not
        return dataclasses.replace(plain, reason=f"{plain.reason}; {why}")
    gateable = math.inf
    if up is not None and down is not None and up.gateable is not None:
        gateable = math.expm1(math.log1p(up.gateable) + allowance + unlucky)
    ratio = plain.ratio or 1.0
    side = (up if ratio >= 1 else down) or plain
    bar = None if side.bar is None else math.expm1(math.log1p(side.bar) + allowance)
    gated = gateable <= NOT_GATED_BEYOND
    status = Status.OK if gated else Status.NOT_GATED
    if gated and up is not None and up.status is Status.REGRESSED:
        status = Status.REGRESSED
    elif gated and down is not None and down.status is Status.IMPROVED:
        status = Status.IMPROVED
    k = plain.history_sessions
    verb = "slower" if ratio >= 1 else "faster"
    head = f"{verb} by {abs(ratio - 1):.1%} vs history of {plural(k, 'session')}"
    if not gated:
        reason = (
            f"{head}; {why}: it could not catch a slowdown under {NOT_GATED_BEYOND:.0%}; "
            + "; ".join(remedies)
        )
    else:
        reason = f"{head}; {gate_text(gateable, threshold)}; {why}"
    return dataclasses.replace(
        plain,
        status=status,
        ratio_low=up.ratio_low if up is not None else None,
        ratio_high=down.ratio_high if down is not None else None,
        bar=bar if gated else None,
        gateable=gateable if gated else None,
        noisy=gated and gateable > threshold,
        needs_confirmation=gated and side.needs_confirmation,
        reason=reason,
        gated=gated,
        p_value=side.p_value,
    )
