"""What the fixture asks the session of one measurement (run/fixture.py to run/session.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..core.settings import MarkerSpec


class Untimed(NamedTuple):
    """A function's untimed calls before it is sampled (BenchSession.call_durations), in
    seconds: the first's, and one more call's where the first was slow for its budget."""

    first_s: float = 0.0
    more_s: float | None = None

    @property
    def call_s(self) -> float:
        """The duration that tells its timer whether a call is slow."""
        return self.first_s if self.more_s is None else self.more_s

    @property
    def spent_s(self) -> float:
        """The seconds the untimed calls took (the measurement's costs)."""
        return self.first_s + (self.more_s or 0.0)


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
