"""One measurement's record: what the terminal, the report files and the baselines show."""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from .baseline import SessionInfo, SessionRecord
from .kernels import Launch
from .rule import Judgement, SessionSummary, Status

# Significant digits kept per sample in files: far below any noise level, keeps files small.
SAMPLE_DIGITS = 6


@dataclass(frozen=True)
class Summary:
    """Descriptive statistics of one session's samples (milliseconds)."""

    n: int
    median_ms: float
    mean_ms: float
    min_ms: float
    q1_ms: float
    q3_ms: float

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    @property
    def noise(self) -> float:
        """Relative noise within the session: interquartile range over median."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else math.inf


def summarize(samples_ms: list[float]) -> Summary:
    import numpy as np  # only a timing run loads numpy

    data = np.asarray(samples_ms, dtype=float)
    q1, median, q3 = np.percentile(data, [25, 50, 75])
    return Summary(
        len(data), float(median), float(data.mean()), float(data.min()), float(q1), float(q3)
    )


@dataclass(frozen=True)
class Costs:
    """Seconds a measurement took, by step: the untimed first call, waiting for the device
    lock (other processes timing on the GPU), the timer's set-up (capture, validation, the
    CUPTI profile of eager calls), the sampling itself, and its share of the fresh processes
    that confirmed its verdict (their wall time over the measurements they confirmed)."""

    first_call_s: float = 0.0
    lock_wait_s: float = 0.0
    timer_setup_s: float = 0.0
    sampling_s: float = 0.0
    confirm_s: float = 0.0

    def to_json(self) -> dict[str, float]:
        return {k: round(v, 4) for k, v in dataclasses.asdict(self).items()}


@dataclass
class Result:
    """One measurement of one run: its samples, what it ran, and its verdict."""

    key: str  # baseline key: the node id, plus "#name" for named measurements
    test: str  # display name: the test name, plus "#name"
    timer: str
    samples_ms: list[float]
    warmup: int
    calls_per_sample: int
    threshold: float
    session: str  # the id of this process's session
    group: str | None = None
    note: str = ""
    throttled: list[str] = field(default_factory=list)
    clocks_mhz: list[int] = field(default_factory=list)  # SM clock after warmup and at the end
    bytes: float | None = None
    flops: float | None = None
    peak_gbs: float | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    date: str = ""
    git_commit: str | None = None
    gpu: str | None = None  # which device: "cuda:0 GPU-<uuid>"
    kernels: tuple[Launch, ...] = ()  # what one call launches
    device_ms: float | None = None  # CUPTI device time of one eager call
    status: Status = Status.NEW
    judgement: Judgement | None = None
    reason: str = ""  # why the status, in a line (kernel changes, timer changes, too few)
    kernel_changes: tuple[str, ...] = ()  # since the baseline's latest session
    reference_ms: float | None = None  # the baseline's reference time
    history_sessions: int = 0
    family: int = 1  # measurements judged in its run (the multiplicity correction)
    # Sessions of this run in fresh processes (confirmations); what each session of the
    # result shares (its own, set where it was measured: an xdist worker is a session too).
    confirmations: tuple[SessionRecord, ...] = ()
    session_infos: dict[str, SessionInfo] = field(default_factory=dict)
    passed: bool = True  # whether the test itself passed; only passing tests are saved
    costs: Costs | None = None  # where the measurement's time went (JSON report only)

    @functools.cached_property
    def summary(self) -> Summary:
        return summarize(self.samples_ms)

    @functools.cached_property
    def record(self) -> SessionRecord:
        """This session's summary, as the baseline stores it."""
        s = SessionSummary.from_samples(self.samples_ms)
        se = s.se_log if math.isfinite(s.se_log) else None
        return SessionRecord(self.session, s.median_ms, s.n, se, self.calls_per_sample)

    @property
    def sessions(self) -> tuple[SessionRecord, ...]:
        """All sessions of this run: this process's, then the confirmations."""
        return (self.record, *self.confirmations)

    @property
    def median_ms(self) -> float:
        """This run's time: the median of its sessions' medians (this session's alone
        without confirmations)."""
        if not self.confirmations:
            return self.summary.median_ms
        return statistics.median(r.median_ms for r in self.sessions)

    @property
    def gbs(self) -> float | None:
        return None if self.bytes is None else self.bytes / (self.median_ms * 1e6)

    @property
    def tflops(self) -> float | None:
        return None if self.flops is None else self.flops / (self.median_ms * 1e9)

    @property
    def peak_share(self) -> float | None:
        """GB/s as a share of the device's measured copy bandwidth; absent above it (data that
        stays in L2 between calls is not bound by DRAM: no share of that peak)."""
        gbs = self.gbs
        if gbs is None or not self.peak_gbs or self.above_peak:
            return None
        return gbs / self.peak_gbs

    @property
    def above_peak(self) -> bool:
        """Faster than the device's measured DRAM copy bandwidth allows: served from L2."""
        gbs = self.gbs
        return gbs is not None and bool(self.peak_gbs) and gbs > self.peak_gbs

    @property
    def launch_gap_share(self) -> float | None:
        """Share of the time that is not kernel time (launch gaps of a graph replay)."""
        if self.device_ms is None or self.timer != "cuda-graph" or not self.summary.median_ms:
            return None
        return max(0.0, 1 - self.device_ms / self.summary.median_ms)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, used to carry results from xdist workers and into files."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["samples_ms"] = [float(f"{s:.{SAMPLE_DIGITS}g}") for s in self.samples_ms]
        data["status"] = self.status.value
        data["judgement"] = None if self.judgement is None else _judgement_dict(self.judgement)
        data["kernels"] = [k.to_dict() for k in self.kernels]
        data["kernel_changes"] = list(self.kernel_changes)
        data["confirmations"] = [r.to_json() for r in self.confirmations]
        data["session_infos"] = {k: v.to_json() for k, v in self.session_infos.items()}
        data["costs"] = None if self.costs is None else self.costs.to_json()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        values = {f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data}
        values["status"] = Status(data["status"])
        if data.get("judgement") is not None:
            judgement = dict(data["judgement"])
            judgement["status"] = Status(judgement["status"])
            values["judgement"] = Judgement(**judgement)
        values["kernels"] = tuple(Launch.from_dict(k) for k in data.get("kernels", ()))
        values["kernel_changes"] = tuple(data.get("kernel_changes", ()))
        values["confirmations"] = tuple(
            SessionRecord.from_json(r) for r in data.get("confirmations", ())
        )
        values["session_infos"] = {
            k: SessionInfo.from_json(v) for k, v in data.get("session_infos", {}).items()
        }
        costs = data.get("costs")
        values["costs"] = Costs(**costs) if isinstance(costs, dict) else None
        return cls(**values)


def _judgement_dict(judgement: Judgement) -> dict[str, Any]:
    data = dataclasses.asdict(judgement)
    data["status"] = judgement.status.value
    return data
