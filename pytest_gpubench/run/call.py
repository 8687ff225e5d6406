"""What the fixture asks the session of one measurement (run/fixture.py to run/session.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.settings import MarkerSpec


@dataclass(frozen=True)
class Call:
    """What the fixture asks of one measurement: its key and test name, the test's marker,
    the warmup and rounds it asked (None: the timer's), its untimed first call's duration,
    and the work it declared (None: the marker's)."""

    key: str
    test: str
    spec: MarkerSpec
    warmup: int | None = None
    rounds: int | None = None
    first_call_s: float = 0.0
    bytes: float | None = None
    flops: float | None = None

    @property
    def work_bytes(self) -> float | None:
        return self.bytes if self.bytes is not None else self.spec.bytes

    @property
    def work_flops(self) -> float | None:
        return self.flops if self.flops is not None else self.spec.flops
