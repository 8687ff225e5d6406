"""What the fixture asks the session of one measurement (run/fixture.py to run/session.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..core.settings import MarkerSpec


class Untimed(NamedTuple):
    """A function's untimed calls before it is sampled (BenchSession.call_durations): the
    first's duration (s), and the one that tells its timer whether a call is slow: the
    first's, or where that was slow for its budget, one more call's."""

    first_s: float = 0.0
    call_s: float = 0.0
    more: bool = False  # call_s is the one more call's

    @property
    def spent_s(self) -> float:
        """The seconds the untimed calls took (the measurement's costs)."""
        return self.first_s + self.call_s if self.more else self.first_s


@dataclass(frozen=True)
class Call:
    """What the fixture asks of one measurement: its key and test name, the test's marker,
    the warmup and rounds it asked (None: the timer's), its untimed calls' durations, and
    the work it declared (None: the marker's)."""

    key: str
    test: str
    spec: MarkerSpec
    warmup: int | None = None
    rounds: int | None = None
    untimed: Untimed = Untimed()
    bytes: float | None = None
    flops: float | None = None

    @property
    def work_bytes(self) -> float | None:
        return self.bytes if self.bytes is not None else self.spec.bytes

    @property
    def work_flops(self) -> float | None:
        return self.flops if self.flops is not None else self.spec.flops
