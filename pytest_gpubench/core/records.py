"""The records of a run, frozen: what was measured (``Measurement``), what it means
(``Verdict``), the two together (``Result``), and the session summaries a verdict compares.
How they are made and when they become plain data: docs/architecture.md, "The records".
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypeGuard

from .codec import Coded, absent, empty, spec
from .jsondata import Json
from .kernels import Launch, fingerprint
from .samples import sample_problem, session_summary

# Significant digits kept per sample and per summary in files: far below any noise level.
SAMPLE_DIGITS = 6


def rounded(value: float) -> float:
    """``value`` to SAMPLE_DIGITS significant digits."""
    return float(f"{value:.{SAMPLE_DIGITS}g}")


# Keys of a stored object that this version does not know (a newer version wrote them): read
# into a record's ``extra`` and written back by a save, so an older version loses nothing.
NO_EXTRA: Mapping[str, Json] = MappingProxyType({})


def no_extra() -> Mapping[str, Json]:
    """The default ``extra`` of a record: one shared empty mapping, not a dict per record."""
    return NO_EXTRA


def unknown_keys(data: Mapping[str, Json], known: frozenset[str]) -> Mapping[str, Json]:
    """The items of ``data`` whose keys are not ``known`` (read-only), NO_EXTRA if none."""
    if data.keys() <= known:  # C speed: a file of 10^5 entries has millions of records
        return NO_EXTRA
    return MappingProxyType({k: v for k, v in data.items() if k not in known})


def is_number(value: object) -> TypeGuard[int | float]:
    """An int or float of JSON (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def at_least(low: float) -> Callable[[object], bool]:
    """A check: a finite number of at least ``low``."""
    return lambda value: is_number(value) and math.isfinite(value) and value >= low


def whole(low: int) -> Callable[[object], bool]:
    """A check: a whole number (not a bool) of at least ``low``."""
    return lambda value: _is_count(value, low)


def _is_count(value: object, low: int) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


# Checks of fields read (codec.spec): what a value must pass, and what it should be.
TIME = (lambda value: not sample_problem(value), "a time in ms")
COUNT = (whole(1), "a count")
AT_LEAST_0 = (at_least(0.0), "a number >= 0")


class Status(str, enum.Enum):
    """Verdict of one measurement, what needs attention first (``rank``). The statistical rule
    never returns the gate's: ``CHANGED``, ``INCOMPARABLE``, ``UNCONFIRMED``, ``UNSTABLE``."""

    # Faster than the device can move the declared bytes: skipped work, a cached result, or
    # broken timing. Fails its test in every run; never saved.
    IMPOSSIBLE = "impossible"
    # Against a revision: the working tree's process died in the test (an abort, a
    # segfault, SIGKILL): its code's fault, not the revision's. Fails its test. (A death on
    # the revision's side is UNMEASURABLE.)
    CRASHED = "crashed"
    REGRESSED = "regressed"
    # A call's peak GPU memory grew past its thresholds (judge.gate): exact, so never confirmed.
    MORE_MEMORY = "more memory"
    IMPROVED = "improved"
    CHANGED = "changed"  # another binary (launches) than the baseline's: not judged on time
    INCOMPARABLE = "incomparable"
    UNCONFIRMED = "unconfirmed"  # flagged, but its confirmation did not run: never fails
    UNSTABLE = "unstable"  # too few samples in the budget to judge: never fails
    # Its process waited for a CPU much of the time it timed (a loaded host); against a
    # revision, a side could not measure it (see CRASHED): never fails, never saved.
    UNMEASURABLE = "unmeasurable"
    NOT_GATED = "not gated"  # the history cannot gate it (too short, too noisy): never fails
    # Against a revision (judge/pairs.py): neither a change nor the same at the cap of pairs.
    UNSURE = "unsure"  # never fails
    NEW = "new"
    REMOVED = "removed"  # against a revision: measured on its side only
    SAME = "same"  # against a revision: a change of the threshold ruled out both ways
    OK = "ok"

    @property
    def rank(self) -> int:
        """Order of the summary: what needs attention first."""
        return list(Status).index(self)


# --- sessions -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionSummary:
    """What one session (one process) contributes to a test's history.

    ``se_log`` is the standard error of ``log(median_ms)`` from the session's own samples
    (within-session error only), ``nan`` when it cannot be told (a single sample).
    """

    median_ms: float
    n: int
    se_log: float

    @classmethod
    def from_samples(cls, samples_ms: Iterable[float]) -> SessionSummary:
        """The summary a session stores, from its samples (milliseconds, all positive)."""
        return cls(*session_summary(list(samples_ms)))


@dataclass(frozen=True)
class SessionInfo(Coded):
    """What one session (one process) shares across the measurements it recorded."""

    date: str
    commit: str | None = None
    machine: str | None = None  # GPU UUID, or a digest of the host for the CPU timer
    versions: Mapping[str, str | None] = field(default_factory=dict)
    # The host's name: only where asked (--gpubench-record-host).
    host: str | None = field(default=None, metadata=spec(omit=absent))
    extra: Mapping[str, Json] = field(default_factory=no_extra)  # keys of a newer version

    KNOWN = frozenset(("date", "commit", "machine", "versions", "host"))

    @classmethod
    def from_json(cls, data: Json) -> SessionInfo:
        if not isinstance(data, dict) or not isinstance(data.get("date"), str):
            raise ValueError("is not an object with a 'date' string")
        versions = data.get("versions", {})
        if not isinstance(versions, dict) or not all(
            v is None or isinstance(v, str) for v in versions.values()
        ):
            raise ValueError("has 'versions' that are not an object of strings")
        for key in ("commit", "machine", "host"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise ValueError(f"has a {key!r} that is not a string")
        return cls(
            data["date"],
            data.get("commit"),
            data.get("machine"),
            versions,
            data.get("host"),
            unknown_keys(data, cls.KNOWN),
        )


@dataclass(frozen=True, slots=True)  # millions in a file of 10^5 tests: no dict each
class SessionRecord(Coded):
    """One session's summary of one measurement: what the verdict needs of it."""

    session: str  # key into the file's table of sessions
    median_ms: float = field(metadata=spec(form=rounded))
    n: int
    # Within-session standard error of log(median); None: unknown.
    se_log: float | None = field(metadata=spec(form=rounded))
    calls_per_sample: int = 1
    # What one call held at its peak (None: not known; left out, so files of CPU runs stay
    # as they were).
    peak_bytes: int | None = field(default=None, metadata=spec(omit=absent))
    extra: Mapping[str, Json] = field(default_factory=no_extra)  # keys of a newer version
    # A lockstep pair's side: the call's kernel time (Beside), the median of its samples.
    beside_ms: float | None = field(default=None, metadata=spec(form=rounded, omit=absent))

    KNOWN = frozenset(
        ("session", "median_ms", "n", "se_log", "calls_per_sample", "peak_bytes", "beside_ms")
    )

    @classmethod
    def of(
        cls,
        session: str,
        samples_ms: Iterable[float],
        calls_per_sample: int,
        peak_bytes: int | None = None,
        beside_ms: float | None = None,
    ) -> SessionRecord:
        """The record of a session's samples."""
        s = SessionSummary.from_samples(samples_ms)
        se = s.se_log if math.isfinite(s.se_log) else None
        return cls(session, s.median_ms, s.n, se, calls_per_sample, peak_bytes, NO_EXTRA, beside_ms)

    @property
    def se_log_or_nan(self) -> float:
        """``se_log`` as a summary has it: NaN where it cannot be told."""
        return math.nan if self.se_log is None else self.se_log

    @property
    def summary(self) -> SessionSummary:
        return SessionSummary(self.median_ms, self.n, self.se_log_or_nan)

    @classmethod
    def from_json(cls, data: Json) -> SessionRecord:
        """A record, every field checked; ValueError naming what is wrong."""
        if not isinstance(data, dict) or not isinstance(data.get("session"), str):
            raise ValueError("has a session record that is not an object with a 'session'")
        median = data.get("median_ms")
        if not is_number(median) or sample_problem(median):
            raise ValueError(f"has a session median of {median!r:.40}, not a time in ms")
        n, calls = data.get("n"), data.get("calls_per_sample", 1)
        if not (_is_count(n, 1) and _is_count(calls, 1)):
            raise ValueError("has a session record whose 'n' or 'calls_per_sample' is no count")
        se = data.get("se_log")
        if se is not None and not (is_number(se) and 0 <= se < math.inf):
            raise ValueError(f"has a session 'se_log' of {se!r:.40}, not a number >= 0")
        peak = data.get("peak_bytes")
        if peak is not None and not _is_count(peak, 0):
            raise ValueError(f"has a session 'peak_bytes' of {peak!r:.40}, not a count >= 0")
        beside = data.get("beside_ms")
        if beside is not None and (not is_number(beside) or sample_problem(beside)):
            raise ValueError(f"has a session 'beside_ms' of {beside!r:.40}, not a time in ms")
        se_log = None if se is None else float(se)
        extra = unknown_keys(data, cls.KNOWN)
        beside_ms = None if beside is None else float(beside)
        return cls(data["session"], float(median), n, se_log, calls, peak, extra, beside_ms)


# --- the statistics of one verdict ----------------------------------------------------------


@dataclass(frozen=True)
class Judgement(Coded):
    """What the statistical rule found for one measurement, with what it was judged by.

    Ratios are current / reference (geometric means of session medians; the current sessions'
    median from three on; against a revision, head / base: the exponential of the pairs'
    mean log difference). ``bar`` is the change the median must pass at the look that
    decides, as a fraction (0.041: slower by 4.1%), in the JSON but never printed
    (docs/verdict.md says why). ``gateable`` is the gate: the smallest slowdown caught with
    the target power once confirmed (:func:`gate_text`); ``noisy`` when it exceeds the threshold.
    """

    status: Status
    ratio: float | None = None
    ratio_low: float | None = None  # interval at the corrected level: excludes 1 iff the
    ratio_high: float | None = None  # statistical bound is cleared
    # Against a revision, what a ``same`` rests on: the ratios at the pairs' 90% bounds
    # (judge.pairs.SAME_LEVEL each way), within the threshold both ways; None for any other
    # status. The reports show them for a same; bisect reads ratio_low/ratio_high only.
    same_low: float | None = None
    same_high: float | None = None
    bar: float | None = None
    gateable: float | None = None
    noisy: bool = False
    tau: float | None = None  # between-session sd used (log scale, ~relative)
    prior_share: float | None = None  # share of the prior in tau^2
    needs_confirmation: bool = False  # one session, flagged by the screen: confirm it
    against: str = ""  # "history" or "anchor": the comparison reported
    history_sessions: int = 0
    current_sessions: int = 0
    reason: str = ""
    gated: bool = True  # False: the history cannot gate the test (status NOT_GATED)
    p_value: float | None = None  # chance of sessions this far out with nothing changed
    excursions: float | None = None  # share of sessions in a slow excursion (fitted)
    sessions_to_gate: int | None = None  # history sessions that would gate the threshold

    @property
    def change(self) -> float | None:
        return None if self.ratio is None else self.ratio - 1

    WHAT = "a 'judgement'"


def gate_text(gateable: float, threshold: float) -> str:
    """The gate as every report prints it (the table's gate column, a reason, a failure
    line): the smallest slowdown the test catches, never under the threshold (a change under
    it is not what the user asked to catch), and over it said so: ``gate 12.2% (over the 5%
    threshold)``. One decimal, as the column."""
    text = f"gate {max(gateable, threshold):.1%}"
    if gateable > threshold:
        text += f" (over the {threshold * 100:g}% threshold)"
    return text


# --- a ratio to a reference function (gpubench(fn, x, reference=ref)) ------------------------

# A ratio measurement's key is its function's key and this (its node id stays the part before
# the first "#"); its timer is the timer's name and RATIO_SUFFIX, so a ratio is never
# compared with a time.
RATIO_KEY = "#vs-reference"
RATIO_SUFFIX = ":ratio"


def node_id(key: str) -> str:
    """The node id of a measurement key (``node id`` or ``node id#name``)."""
    return key.split("#")[0]


def is_ratio(timer: str) -> bool:
    """Whether a measurement of ``timer`` holds ratios to a reference, not times."""
    return timer.endswith(RATIO_SUFFIX)


@dataclass(frozen=True)
class Versus(Coded):
    """What a ratio measurement compares: the medians (ms) of the function and of its
    reference over the pairs of its first session, and what one call of each launches
    (their times per launch pick the ratio's prior: judge.rule.ratio_prior)."""

    fn_ms: float = field(metadata=spec(form=rounded, check=TIME))
    reference_ms: float = field(metadata=spec(form=rounded, check=TIME))
    fn_launches: int = field(default=1, metadata=spec(check=COUNT))
    reference_launches: int = field(default=1, metadata=spec(check=COUNT))

    WHAT = "a 'versus'"


@dataclass(frozen=True)
class Energy(Coded):
    """What one call costs in energy, informational (never judged): NVML's total-energy
    counter read around a window of back-to-back calls (``timing.energy``), and the mean of
    the power readings taken during it, which cross-checks the counter (power x time)."""

    joules_per_call: float = field(metadata=spec(form=rounded, check=AT_LEAST_0))
    # the counter's energy over the window's time
    watts: float = field(metadata=spec(form=rounded, check=AT_LEAST_0))
    calls: int = field(metadata=spec(check=COUNT))
    window_s: float = field(metadata=spec(form=rounded, check=AT_LEAST_0))
    # The mean power read during the window, and how it was read ("instant", or NVML's
    # "average" over its own 1 s); None where the GPU gave no reading.
    sampled_watts: float | None = field(default=None, metadata=spec(form=rounded, check=AT_LEAST_0))
    power_source: str = field(default="", metadata=spec(lenient=True))

    WHAT = "an 'energy'"

    @property
    def agreement(self) -> float | None:
        """The counter's mean power over the sampled one: 1.0 where both agree."""
        if not self.sampled_watts:
            return None
        return self.watts / self.sampled_watts


# The Nsight Compute metrics of a failure's evidence (--gpubench-ncu), by ncu name, each
# with its column title: the kernel's time under the profiler, its DRAM and SM throughput as
# shares of their sustained peaks, and achieved occupancy (active warps over the SM's most).
NCU_METRICS = (
    ("gpu__time_duration.sum", "time"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy"),
)


@dataclass(frozen=True)
class NcuKernel(Coded):
    """One kernel of one call as Nsight Compute profiled it (``run.ncu``): its name and
    launch configuration, and its metrics by their ncu names, each a number and its unit."""

    name: str
    block: str = field(default="", metadata=spec(lenient=True))
    grid: str = field(default="", metadata=spec(lenient=True))
    # Each [name, value, unit].
    metrics: tuple[tuple[str, float, str], ...] = field(
        default=(), metadata=spec(form=lambda ms: [[n, rounded(v), u] for n, v, u in ms])
    )

    WHAT = "an 'ncu' kernel"

    def metric(self, name: str) -> float | None:
        return next((value for n, value, _ in self.metrics if n == name), None)


@dataclass(frozen=True)
class NcuEvidence(Coded):
    """Nsight Compute's metrics of one call (--gpubench-ncu): the report file (open it in
    Nsight Compute) and the kernels it profiled, in launch order."""

    report: str
    kernels: tuple[NcuKernel, ...] = ()

    WHAT = "an 'ncu'"


# --- one measurement ------------------------------------------------------------------------


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


def summarize(samples_ms: Iterable[float]) -> Summary:
    import numpy as np  # only a timing run loads numpy

    data = np.asarray(list(samples_ms), dtype=float)
    q1, median, q3 = np.percentile(data, [25, 50, 75])
    return Summary(
        len(data), float(median), float(data.mean()), float(data.min()), float(q1), float(q3)
    )


# A step of Costs in a file: to 0.1 ms; a value that is no number read as 0 (informational).
STEP = spec(form=lambda seconds: round(float(seconds), 4), lenient=True)


@dataclass(frozen=True)
class Costs(Coded):
    """Seconds a measurement took, by step: the untimed calls (the first, and one more where
    the first was slow for the budget: run.call.Untimed), waiting for the device
    lock (other processes timing on the GPU), the timer's set-up (capture, validation, the
    CUPTI profile of eager calls), the sampling itself, and its share of the fresh processes
    that confirmed its verdict (their wall time over the measurements they confirmed). A
    function timed alternately with another (``reference=``, the revision's side in
    lockstep) adds the other's untimed first call: its compile and autotuning."""

    first_call_s: float = field(default=0.0, metadata=STEP)
    lock_wait_s: float = field(default=0.0, metadata=STEP)
    timer_setup_s: float = field(default=0.0, metadata=STEP)
    sampling_s: float = field(default=0.0, metadata=STEP)
    confirm_s: float = field(default=0.0, metadata=STEP)
    other_first_call_s: float = field(default=0.0, metadata=STEP)


@dataclass(frozen=True)
class Floors(Coded):
    """The work one call declares (bytes moved, flops done) and the yardsticks measured on
    its device in its session that bound its time: its copy bandwidths (GB/s of bytes read and
    written) from memory and of a copy that stays in a cache of ``cache_bytes`` (the fastest
    declared bytes go), and the rate (TFLOP/s) a matmul of the call's dtype reached."""

    bytes: float | None = None
    flops: float | None = None
    peak_gbs: float | None = None
    cached_gbs: float | None = None
    cache_bytes: int | None = None
    matmul_tflops: float | None = None
    matmul_dtype: str | None = None

    @property
    def floor_ms(self) -> float | None:
        """The least time a call can move its declared bytes in at the copy rates measured on
        its device: all of them at the faster of the memory's and the cache's, and what the
        cache cannot hold at the memory's. None where the bytes or either rate is unknown
        (a file written before the cache's rate was measured: data that stayed in the cache
        would read as impossible against the memory's rate alone)."""
        if self.bytes is None or not self.peak_gbs or not self.cached_gbs:
            return None
        fastest = max(self.peak_gbs, self.cached_gbs or 0.0)
        floor = self.bytes / (fastest * 1e6)
        if self.cache_bytes:
            floor = max(floor, (self.bytes - self.cache_bytes) / (self.peak_gbs * 1e6))
        return floor

    @property
    def flops_floor_ms(self) -> float | None:
        """The least time a call can do its declared flops in at the rate a matmul of its
        dtype reached on its device; None where either is unknown."""
        if self.flops is None or not self.matmul_tflops:
            return None
        return self.flops / (self.matmul_tflops * 1e9)


@dataclass(frozen=True)
class Context(Coded):
    """What the session that took a measurement's samples ran under: when, at which commit,
    on which device, its clocks, and what made its samples unreliable."""

    date: str = ""
    git_commit: str | None = None
    gpu: str | None = None  # which device: "cuda:0 GPU-<uuid>"
    throttled: tuple[str, ...] = ()
    clocks_mhz: tuple[int, ...] = ()  # SM clock after warmup and at the end
    # What made the samples unreliable ('' when nothing did): torch's threads, a busy host.
    caveat: str = ""
    # The share of the time it timed that its process was ready to run and had no CPU
    # (timing.wall: Linux's run delay; None: not known). Over MAX_CPU_WAIT (judge.gate): a
    # loaded host, and no verdict.
    cpu_wait: float | None = field(default=None, metadata=spec(lenient=True))


@dataclass(frozen=True)
class Evidence(Coded):
    """Why a measurement failed, where kept: a profiler trace of one call (Chrome/Perfetto JSON;
    every measurement's with --gpubench-profile) and Nsight Compute's metrics (--gpubench-ncu);
    ``reference_``: of the call beside it (a ratio's reference function, a revision's call)."""

    trace: str | None = field(default=None, metadata=spec(lenient=True))
    reference_trace: str | None = field(default=None, metadata=spec(lenient=True))
    ncu: NcuEvidence | None = None
    reference_ncu: NcuEvidence | None = None


@dataclass(frozen=True)
class Measurement(Coded):
    """One measurement of one run: what was timed, how, and in which sessions: the one that
    took ``samples_ms`` (its record derived), then those of the fresh processes that confirmed
    it, added by a new record (:meth:`with_confirmations`; docs/architecture.md, "The records").
    """

    key: str  # baseline key: the node id, plus "#name" for named measurements
    test: str  # display name: the test name, plus "#name"
    timer: str
    samples_ms: tuple[float, ...] = field(metadata=spec(form=lambda xs: list(map(rounded, xs))))
    warmup: int = field(metadata=spec(missing=0))
    calls_per_sample: int = field(metadata=spec(missing=1))
    threshold: float
    session: str = field(metadata=spec(missing=""))  # the id of the session that took the samples
    confirmations: tuple[SessionRecord, ...] = ()  # sessions of fresh processes
    group: str | None = None
    note: str = ""
    context: Context = field(default=Context(), metadata=spec(flat=True))
    floors: Floors = field(default=Floors(), metadata=spec(flat=True))
    # Bytes one call held at its peak above what was held before it: the device allocator's
    # exact count (timing.device.peak_bytes); None where not known (a CPU).
    peak_bytes: int | None = None
    extra_info: Mapping[str, Json] = field(default_factory=dict)
    kernels: tuple[Launch, ...] = ()  # what one call launches
    device_ms: float | None = None  # CUPTI device time of one eager call
    # A graph replay's time per call, where the timer's number is its kernel time (cupti-graph).
    graph_ms: float | None = None
    # What each session of the measurement shares, by session id.
    session_infos: Mapping[str, SessionInfo] = field(default_factory=dict)
    costs: Costs | None = None  # where the measurement's time went (JSON report only)
    evidence: Evidence = field(default=Evidence(), metadata=spec(flat=True))
    # A ratio to a reference function (timer ending in RATIO_SUFFIX): what it compares.
    versus: Versus | None = None
    # Energy per call (--gpubench-energy, where the GPU reports it): informational.
    energy: Energy | None = None
    # A lockstep pair's side: a graph-timed call's kernel time per call (timing.engine.Beside),
    # the median of the samples taken beside the timer's (None: not taken), of this
    # measurement's own session; each judged pair keeps its own (Paired's sessions).
    beside_ms: float | None = None

    @functools.cached_property
    def summary(self) -> Summary:
        return summarize(self.samples_ms)

    @functools.cached_property
    def record(self) -> SessionRecord:
        """The summary of the session that took ``samples_ms``, as a baseline stores it."""
        return SessionRecord.of(
            self.session, self.samples_ms, self.calls_per_sample, self.peak_bytes, self.beside_ms
        )

    @property
    def sessions(self) -> tuple[SessionRecord, ...]:
        """This run's sessions: its own, then the confirmations."""
        return (self.record, *self.confirmations)

    @property
    def median_ms(self) -> float:
        """This run's time: the median of its sessions' medians (this session's alone
        without confirmations)."""
        if not self.confirmations:
            return self.summary.median_ms
        return statistics.median(r.median_ms for r in self.sessions)

    @property
    def binary(self) -> str:
        """The binary that ran: the fingerprint of its launches ('' when not recorded)."""
        return fingerprint(self.kernels)

    @property
    def gbs(self) -> float | None:
        return None if self.floors.bytes is None else self.floors.bytes / (self.median_ms * 1e6)

    @property
    def tflops(self) -> float | None:
        return None if self.floors.flops is None else self.floors.flops / (self.median_ms * 1e9)

    @property
    def above_peak(self) -> bool:
        """Faster than the device's measured DRAM copy bandwidth allows: served from L2."""
        gbs, peak = self.gbs, self.floors.peak_gbs
        return gbs is not None and bool(peak) and gbs > (peak or 0)

    @property
    def tflops_share(self) -> float | None:
        """TFLOP/s as a share of the measured matmul rate of the call's dtype; absent above
        it (a rate beyond the yardstick is no share of it)."""
        tflops, matmul = self.tflops, self.floors.matmul_tflops
        if tflops is None or not matmul or tflops > matmul:
            return None
        return tflops / matmul

    @property
    def peak_share(self) -> float | None:
        """GB/s as a share of the device's measured copy bandwidth; absent above it (data that
        stays in L2 between calls is not bound by DRAM: no share of that peak)."""
        gbs, peak = self.gbs, self.floors.peak_gbs
        if gbs is None or not peak or self.above_peak:
            return None
        return gbs / peak

    @property
    def launch_gap_share(self) -> float | None:
        """Share of a graph replay's time that is not kernel time (its launch gaps): against
        an eager call's CUPTI time for ``cuda-graph``, of the graph's time per call for
        ``cupti-graph`` (whose number is the kernel time)."""
        median = self.summary.median_ms
        if self.timer == "cuda-graph" and self.device_ms is not None and median:
            return max(0.0, 1 - self.device_ms / median)
        if self.timer == "cupti-graph" and self.graph_ms:
            return max(0.0, 1 - median / self.graph_ms)
        return None

    def noted(self, note: str) -> Measurement:
        """This measurement with one more line of its note."""
        return dataclasses.replace(self, note="; ".join(filter(None, [self.note, note])))

    def with_confirmations(self, others: Iterable[Measurement]) -> Measurement:
        """This measurement with the sessions of ``others`` (the same measurement, timed in
        fresh processes: which ones count is the gate's to say) appended. Its own samples stay
        the first session's."""
        others = list(others)
        infos = dict(self.session_infos)
        for other in others:
            infos.update(other.session_infos)
        return dataclasses.replace(
            self,
            confirmations=self.confirmations + tuple(o.record for o in others),
            session_infos=infos,
        )


# --- what a measurement means ---------------------------------------------------------------


@dataclass(frozen=True)
class Paired(Coded):
    """Both sides of a measurement judged against a revision measured in the same job
    (``--gpubench-against``): the revision as typed, its full commit, and each side's
    sessions. The first ``pairs`` of each are the judged pairs, aligned (pair i's base and
    head at index i); a measurement with no pair (one side only, another timer) lists what
    each side measured, ``pairs`` 0. ``lockstep``: each pair's sides timed alternately
    (versus/lockstep.py), not a fresh process each (versus/ab.py); ``fresh``: in lockstep,
    its more pairs from fresh processes (judge.pairs.LOCKSTEP_FRESH_DESIGN); ``duos``: per judged
    pair, the duo that timed it (numbered from 1: a fresh process per side at once,
    run/duo.py), empty where one process timed both sides."""

    revision: str = field(metadata=spec(check=(bool, "a non-empty string")))
    commit: str = field(metadata=spec(check=(bool, "a non-empty string")))
    base_sessions: tuple[SessionRecord, ...] = ()
    head_sessions: tuple[SessionRecord, ...] = ()
    pairs: int = field(default=0, metadata=spec(check=(whole(0), "a count")))
    lockstep: bool = field(default=False, metadata=spec(omit=empty))
    fresh: bool = field(default=False, metadata=spec(omit=empty))
    duos: tuple[int, ...] = field(
        default=(), metadata=spec(omit=empty, check=(lambda ds: all(map(whole(1), ds)), "counts"))
    )

    WHAT = "an 'against'"  # what its reads' errors call it (a result file's key)

    def __post_init__(self) -> None:
        if not 0 <= self.pairs <= min(len(self.base_sessions), len(self.head_sessions)):
            raise ValueError(f"has {self.pairs!r} pairs, more than a side's sessions")
        if self.duos and (len(self.duos) != self.pairs or min(self.duos) < 1):
            raise ValueError(f"has duos {list(self.duos)!r:.60} for {self.pairs} pairs")

    @property
    def label(self) -> str:
        """The revision as the reasons name it: ``main (0123abcd)``."""
        return f"{self.revision} ({self.commit[:8]})"

    @property
    def base_median_ms(self) -> float | None:
        """The revision's time: the median of its sessions' medians (None: not measured)."""
        return _median_of(self.base_sessions)

    @property
    def head_median_ms(self) -> float | None:
        """The working tree's time, as :attr:`base_median_ms`."""
        return _median_of(self.head_sessions)


def _median_of(records: Iterable[SessionRecord]) -> float | None:
    medians = [r.median_ms for r in records]
    return statistics.median(medians) if medians else None


@dataclass(frozen=True)
class Verdict(Coded):
    """The verdict on one measurement, and what it was judged against."""

    status: Status = field(metadata=spec(missing=Status.NEW))
    judgement: Judgement | None = None  # the rule's statistics; None where it did not run
    reason: str = ""  # why the status, in a line (kernel changes, timer changes, too few)
    kernel_changes: tuple[str, ...] = ()  # changed: what differs from the previous binary
    reference_ms: float | None = None  # the baseline's reference time
    history_sessions: int = 0
    family: int = 1  # measurements judged in its run (the multiplicity correction)
    # The baseline's binary (kernels.fingerprint of its launches) whose history it was judged
    # against; changed: the previous binary, compared for information only ('' unknown).
    baseline_binary: str = ""
    previous_ratio: float | None = None  # changed: time / the previous binary's reference
    # changed: the same kernels, run as often, in another configuration (an autotuner's or
    # compiler's choice) rather than other work.
    same_kernels: bool = field(default=False, metadata=spec(lenient=True))
    # A save was told to take this session into the history whatever it judged (a change:
    # as a new epoch; judge.gate.Gate.accepts).
    accepted: bool = field(default=False, metadata=spec(lenient=True))
    # against a revision: both sides' sessions
    paired: Paired | None = field(default=None, metadata=spec(key="against"))
    # What the reference's call launched (the binary judged against, the previous one of a
    # changed binary, the revision's): the per-kernel table of a failure compares them.
    reference_kernels: tuple[Launch, ...] = ()
    # Against a revision in lockstep: a graph-timed call's kernel time judged on its own
    # pairs beside its time per call; it decides where that is unsure (versus.ab).
    beside: Judgement | None = None
    # In a save: what appending this session would do to its history's gate, where it
    # leaves the history less able to gate its threshold ('' where it does not: Gate.spoils).
    spoils: str = ""

    @property
    def noisy(self) -> bool:
        return self.judgement is not None and self.judgement.noisy

    @property
    def by_kernel_time(self) -> bool:
        """Whether the kernel time decided the status (the time per call was unsure)."""
        return (
            self.beside is not None
            and self.judgement is not None
            and self.beside.status is self.status
            and self.judgement.status is not self.status
        )


@dataclass(frozen=True)
class Result:
    """A measurement with its verdict: what the terminal, the reports and a save use."""

    measurement: Measurement
    verdict: Verdict

    @property
    def key(self) -> str:
        return self.measurement.key

    @property
    def test(self) -> str:
        return self.measurement.test

    @property
    def status(self) -> Status:
        return self.verdict.status

    def to_dict(self, passed: bool = True) -> dict[str, Json]:
        """The result file's entry: the measurement's and the verdict's fields, flat, and
        whether the test itself passed."""
        return {**self.measurement.to_json(), **self.verdict.to_json(), "passed": passed}

    @classmethod
    def from_dict(cls, data: Json) -> Result:
        return cls(Measurement.from_json(data), Verdict.from_json(data))
