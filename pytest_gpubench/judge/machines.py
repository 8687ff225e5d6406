"""How far another GPU of the same model may move a test's time (issue 45).

Two GPUs of one model run most tests within half a percent, a few far apart, and a history of
one GPU cannot tell which: a history with ``OWN_SESSIONS`` of the run's GPU judges it against
those alone, others judge it against all their sessions less what another GPU alone explains
(a Student t fitted by ``bench/machine_spread.py``). Model and numbers: docs/verdict.md,
"Another GPU". Only GPU timers: ``wall`` histories of other hosts were never measured, and a
``#vs-...`` ratio moves with no machine of its own.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..core.records import SessionInfo, SessionRecord
from ..core.samples import plural
from .offsets import Spread, reach

# (nu0, s0): bench/machine_spread.py's fit to H100s and H200s together (the two models'
# fits overlap within their few tests); tests/judge/test_machines.py checks them against it.
MACHINE = (2.64, 0.00452)
# Tests whose GPUs fall in two groups: the chance a test does, the rarer group's share of its
# GPUs, the widest gap between two groups' means (a compiled softmax: 1 H100 in 16 and 4
# H200s in 27 read it 10.1% and 9.2% slower, nothing in their sessions saying why). Fitted by
# bench/machine_spread.py; tests/judge/test_machines.py checks them against it.
GROUPS = (0.039, 0.078, 0.101)
GROUP_GAP = math.log1p(GROUPS[2])
# Sessions of the run's GPU a history needs to judge it on its own.
OWN_SESSIONS = 3
# Sessions of a GPU whose mean counts as that GPU's offset (fewer: weighed, not measured).
MEASURED_GPU = 2
# Timers whose histories move between hosts for reasons never measured.
UNFITTED_TIMERS = frozenset({"wall"})


def short(machine: str) -> str:
    """A GPU's UUID as people read it: ``GPU-618df060``."""
    return machine[:12]


@dataclass(frozen=True)
class MachineSpread(Spread):
    """What a test's history says of the offset of a GPU it has not seen."""

    here: str  # the run's GPU
    own: int  # its sessions in the history (fewer than OWN_SESSIONS)
    gpus: int  # the history's GPUs (those its table does not name counted as one)
    sessions: int  # the history's sessions
    unknown: int  # of them, those whose GPU its table does not name

    def allowance(self, level: float) -> float:
        """The t's, or where this GPU has no session in the history and the chance that it is
        of a group the history's GPUs have not shown exceeds ``level``, at least the widest
        gap seen between two groups: the sessions of one group say nothing of the other's
        offset (a history of 3 GPUs drawn from one group failed the other's runs:
        docs/verdict.md, "Another GPU"). A session of this GPU in the history shows its
        group."""
        t = super().allowance(level)
        if self.own == 0 and unseen_group(self.gpus) > level:
            return max(t, GROUP_GAP)
        return t

    def says(self, allowance: float) -> str:
        """The verdict's words on this GPU, given the ``allowance`` applied (log)."""
        seen = f"{plural(self.sessions, 'session')} on {plural(self.gpus, 'GPU')}"
        if self.unknown:
            seen += f", {self.unknown} of them on a GPU not recorded"
        where = (
            f"has {self.own} of its history's {seen}"
            if self.own
            else f"is not in its history ({seen})"
        )
        moved = f"another GPU of this model alone may move it by {reach(allowance)}"
        if allowance == GROUP_GAP:  # the widest gap, not the t, set it (only where own == 0)
            moved += (
                f" (some tests' GPUs fall in two groups up to {GROUPS[2]:.1%} apart, which "
                f"{plural(self.gpus, 'GPU')} of one group cannot rule out)"
            )
        return f"{short(self.here)} {where}: {moved}"

    remedy = (
        f"save {OWN_SESSIONS} sessions on this GPU (--gpubench-save "
        f"--gpubench-sessions={OWN_SESSIONS}) to judge it against them, or compare revisions "
        "on it (--gpubench-against)"
    )


def unseen_group(gpus: int) -> float:
    """The chance that another GPU is of a group of a test's GPUs that ``gpus`` GPUs, all of
    one group, have not shown (GROUPS: a test that splits, the rarer group's share)."""
    pi, f, _ = GROUPS
    none_shown = 1 - pi + pi * ((1 - f) ** gpus + f**gpus)
    return pi * ((1 - f) ** gpus * f + f**gpus * (1 - f)) / none_shown


def own_sessions(
    history: Sequence[SessionRecord], infos: Mapping[str, SessionInfo], here: str | None
) -> tuple[SessionRecord, ...]:
    """The sessions of ``history`` on the GPU ``here``, where they are enough to judge a run
    of it alone and others are not of it; else ``history``."""
    if here is None:
        return tuple(history)
    mine = tuple(r for r in history if _machine(r, infos) == here)
    return mine if OWN_SESSIONS <= len(mine) < len(history) else tuple(history)


def machine_spread(
    history: Sequence[SessionRecord],
    infos: Mapping[str, SessionInfo],
    here: str | None,
    timer: str,
) -> MachineSpread | None:
    """The spread of the offset of the GPU ``here`` from ``history`` (the sessions judged, in
    the file's table of sessions ``infos``); None where ``here`` has as many sessions in it as
    it has, where the run's GPU is not known, or for a timer never measured across hosts.
    Sessions whose GPU the table does not say (a file of schema 1, a table missing some)
    tell nothing: a history whose other sessions are all of ``here``, or that names no GPU,
    is judged as it always was; beside sessions of other GPUs, they count as of one more,
    its offset unmeasured."""
    if here is None or timer in UNFITTED_TIMERS or not history:
        return None
    machines = [_machine(r, infos) for r in history]
    if all(m in (here, None) for m in machines):
        return None
    counts = Counter(machines)
    logs: dict[str | None, list[float]] = defaultdict(list)
    for record, machine in zip(history, machines, strict=True):
        logs[machine].append(math.log(record.median_ms))
    means = [
        statistics.fmean(v) for m, v in logs.items() if m is not None and len(v) >= MEASURED_GPU
    ]
    ss = sum((x - statistics.fmean(means)) ** 2 for x in means) if len(means) > 1 else 0.0
    nu0, s0 = MACHINE
    df = nu0 + max(0, len(means) - 1)
    weights = sum((n / len(history)) ** 2 for n in counts.values())
    scale = math.sqrt((nu0 * s0**2 + ss) / df * (1 + weights))
    return MachineSpread(df, scale, here, counts[here], len(counts), len(history), counts[None])


def _machine(record: SessionRecord, infos: Mapping[str, SessionInfo]) -> str | None:
    info = infos.get(record.session)
    return None if info is None else info.machine
