"""One measurement's record: what the terminal, the JSON/Markdown files and baselines show."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from .stats import Summary, Verdict, summarize

# Significant digits kept per sample in files: far below any noise level, keeps files small.
SAMPLE_DIGITS = 6
# extra_info nested deeper than this is no annotation of a measurement.
MAX_EXTRA_DEPTH = 32


def plain_data_problem(value: Any, where: str, depth: int = 0) -> str:
    """'' if ``value`` is plain JSON data (a string, a finite number, a bool, None, and lists,
    tuples and string-keyed dicts of those), else one line naming where it is not."""
    if value is None or isinstance(value, str | bool | int):
        return ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else f"{where} is {value!r}, not a finite number"
    if depth >= MAX_EXTRA_DEPTH:
        return f"{where} is nested deeper than {MAX_EXTRA_DEPTH} levels"
    if isinstance(value, list | tuple):
        items = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"{where} has the key {_repr(key)}, not a string"
        items = [(f"{where}[{key!r:.60}]", item) for key, item in value.items()]
    else:
        return (
            f"{where} is of type {type(value).__name__}, not a string, finite number, bool, "
            "None, list or dict"
        )
    for place, item in items:
        problem = plain_data_problem(item, place, depth + 1)
        if problem:
            return problem
    return ""


def _repr(value: Any) -> str:
    """A short repr that cannot raise (a user's object may have a broken __repr__)."""
    try:
        return f"{value!r:.60}"
    except Exception:
        return f"<{type(value).__name__}>"


@dataclass
class Result:
    key: str  # baseline key: the node id, plus "#name" for named measurements
    test: str  # display name: the test name, plus "#name"
    timer: str
    samples_ms: list[float]
    warmup: int
    calls_per_sample: int
    threshold: float
    group: str | None = None
    note: str = ""
    throttled: list[str] = field(default_factory=list)
    clocks_mhz: list[int] = field(default_factory=list)  # SM clock before and after
    bytes: float | None = None
    flops: float | None = None
    peak_gbs: float | None = None
    extra_info: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = field(default_factory=lambda: Verdict("new"))
    baseline_median_ms: float | None = None
    remeasured: bool = False
    date: str = ""
    git_commit: str | None = None
    passed: bool = True  # whether the test itself passed; only passing tests are saved
    kernels: list[dict[str, Any]] = field(default_factory=list)  # what one call launches
    device_ms: float | None = None  # CUPTI device time of one eager call

    @property
    def summary(self) -> Summary:
        return summarize(self.samples_ms)

    @property
    def gbs(self) -> float | None:
        return None if self.bytes is None else self.bytes / (self.summary.median_ms * 1e6)

    @property
    def tflops(self) -> float | None:
        return None if self.flops is None else self.flops / (self.summary.median_ms * 1e9)

    @property
    def peak_share(self) -> float | None:
        gbs = self.gbs
        return None if gbs is None or not self.peak_gbs else gbs / self.peak_gbs

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, used to carry results from xdist workers and into files."""
        data = dataclasses.asdict(self)
        data["verdict"] = dataclasses.asdict(self.verdict)
        data["samples_ms"] = [float(f"{s:.{SAMPLE_DIGITS}g}") for s in self.samples_ms]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        values = dict(data)
        values["verdict"] = Verdict(**values["verdict"])
        return cls(**values)

    def baseline_entry(self) -> dict[str, Any]:
        s = self.summary
        entry: dict[str, Any] = {
            "timer": self.timer,
            "samples_ms": self.to_dict()["samples_ms"],
            "median_ms": _round(s.median_ms),
            "mean_ms": _round(s.mean_ms),
            "min_ms": _round(s.min_ms),
            "iqr_ms": _round(s.iqr_ms),
            "noise": _round(s.noise),
            "warmup": self.warmup,
            "calls_per_sample": self.calls_per_sample,
            "date": self.date,
            "git_commit": self.git_commit,
        }
        optional = {
            "group": self.group,
            "bytes": self.bytes,
            "flops": self.flops,
            "extra_info": self.extra_info or None,
            "note": self.note or None,
        }
        entry.update({k: v for k, v in optional.items() if v is not None})
        return entry


def _round(value: float) -> float:
    return float(f"{value:.{SAMPLE_DIGITS}g}")
