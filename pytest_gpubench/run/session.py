"""The benchmark session of one process: measure under the device lock, judge through the
gate, confirm in fresh processes, save.

Sequencing only: timing is in ``timing``, what a verdict does in ``judge.gate``, files in
``store``, the probe of the machine in environment.py, fresh processes in children.py. Plain
values in, records out; the pytest layer builds one of these per process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import statistics
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.baseline import Update
from ..core.device import Device, version_changes
from ..core.kernels import launch_count
from ..core.records import (
    RATIO_KEY,
    RATIO_SUFFIX,
    Context,
    Costs,
    Energy,
    Evidence,
    Floors,
    Measurement,
    NcuKernel,
    Result,
    SessionInfo,
    Status,
    Verdict,
    Versus,
)
from ..core.samples import sample_problem, time_text
from ..core.settings import MeasureSettings, Settings
from ..store import baseline as store
from ..store import files as storage
from ..timing.clocks import ClockReading
from ..timing.device import call_dtype, in_range, peak_bytes, synchronizer, trace
from ..timing.energy import measure_energy
from ..timing.engine import (
    SLOW_SHARE,
    Again,
    PairSampling,
    Plan,
    Sampler,
    Sampling,
    Timer,
    Workload,
    alike,
    collect,
    collect_pair,
    paired_samplers,
    remade,
)
from ..timing.gpus import DeviceLock
from ..timing.timers import requested
from . import ncu
from .call import Call, Untimed
from .children import ChildRun, Launcher
from .environment import Environment, TimerFactory
from .sides import BESIDE_ROUNDS, MORE_PAIR_SAMPLES, MORE_PAIR_WARMUP

if TYPE_CHECKING:
    from ..judge.gate import Gate

# A function timed beside a reference (measure_pair) gets this many single budgets: each side
# about the time it would have alone.
PAIR_BUDGET = 2


def _remade_pair(
    head: Again, base: Again, mine: Workload, theirs: Workload, base_first: bool
) -> tuple[Sampler, Sampler] | None:
    """Both sides' samplers made again as their first pair's were (Sampler.again), the
    revision's first where ``base_first`` (a graph's memory lands by the order of capture,
    as a copy's does: versus.lockstep.Lockstep._pair_again), or None where either cannot
    be (or their timers differ): each one made is closed then."""
    made: list[Sampler] = []
    sides = [(base, theirs), (head, mine)] if base_first else [(head, mine), (base, theirs)]
    for again, workload in sides:
        try:
            one = remade(again, workload)
        except BaseException:  # (remade passes on only what stops the run)
            for m in made:
                m.close()
            raise
        if one is None:
            break
        made.append(one)
    if len(made) == 2 and made[0].timer == made[1].timer:
        return (made[1], made[0]) if base_first else (made[0], made[1])
    for m in made:
        m.close()
    return None


@dataclass(frozen=True)
class Saved:
    """What a save did: whether the file was written, the measurements (keys) it wrote a
    session of, one line per session it accepted (Gate.accepted_line), which results it left
    out, why, and the recorded sessions it refused because they would spoil their history
    (Gate.spoils: they fail the run)."""

    written: bool
    keys: tuple[str, ...] = ()
    accepted: tuple[str, ...] = ()
    not_saved: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()


def _besides(a: Sampler, b: Sampler) -> tuple[float | None, float | None, str]:
    """Each side's kernel time per call (Sampler.beside), the median of BESIDE_ROUNDS samples
    each, taken in alternation; none where either side offers none or the two are not of one
    kind, and why where taking them failed (the verdict then judges the pair's time per call
    alone)."""
    if a.beside is None or b.beside is None or a.beside.timer != b.beside.timer:
        return None, None, ""
    try:
        mine, other = a.beside.alternate(b.beside, BESIDE_ROUNDS)
    except Exception as exc:  # (a user's function: its failures are its own to report)
        return None, None, f"kernel time not taken: {exc}"[:300]
    problems = [p for p in map(sample_problem, (*mine, *other)) if p]
    if not mine or not other or problems:
        return None, None, f"kernel time not taken: {problems[0] if problems else 'no sample'}"
    return statistics.median(mine), statistics.median(other), ""


@dataclass(frozen=True)
class _Sampled:
    """A workload sampled alone, or two alternately, and the first's judgement."""

    pair: PairSampling | None  # None: one workload sampled alone
    first: Result
    settings: MeasureSettings  # what they were taken with
    readings: tuple[ClockReading | None, ...]
    other_peak: int | None = None  # the second's peak memory per call, where measured here
    besides: tuple[float | None, float | None, str] = (None, None, "")  # (_besides)


class BenchSession:
    def __init__(
        self,
        settings: Settings,
        rootdir: Path,
        timer_factory: TimerFactory,
        use_cuda: Callable[[], bool],
        launcher: Launcher | None = None,
    ) -> None:
        self.settings = settings
        self.env = Environment(
            rootdir, settings.measure, timer_factory, use_cuda, settings.record_host
        )
        self.launcher = launcher
        self.family = 1  # measurements judged in this run: set once the tests are collected
        # Against a revision (versus/ab.py): each measurement key's result, found before the
        # tests run; the tests then run untimed, and take their verdicts from here.
        self.comparison: Mapping[str, Result] | None = None
        # The tests of the comparison that neither side measured, though one had trouble
        # with them, each with its line: they fail (versus.ab.unjudged).
        self.unjudged: Mapping[str, str] = {}
        # The tests of the comparison the working tree's processes died in: they fail before
        # their body runs here, which would end this process too (versus.ab.Comparison).
        self.crashed: frozenset[str] = frozenset()
        # Against a revision in this process (versus/lockstep.py): the tests not in ``apart``
        # run both sides here, timed in lockstep; those in it take their verdicts from
        # ``comparison``.
        self.lockstep = False
        self.apart: set[str] = set()
        # In a fresh process its parent asked for evidence: every measurement's trace goes
        # into this folder (versus/ab.py, a failure against a revision).
        self.trace_into: Path | None = None
        # What the plugin's own work inside a test's call (its evidence trace) runs under:
        # the test's pytest-timeout paused (plugin.measuring sets it for each test's call).
        self.outside_test: Callable[[], contextlib.AbstractContextManager[object]] = (
            contextlib.nullcontext
        )
        # In a fresh process under Nsight Compute: each measurement is one call in its NVTX
        # range, nothing timed (run/ncu.py).
        self.ncu_ranges = False
        # In a fresh process timing a side of a comparison: see measures_floors.
        self.floors = False
        self._timer_factory = timer_factory
        self._lock: DeviceLock | None = None
        # Each call's samplers' ``again`` (Sampler.again) by key, from its latest pair.
        self._again: dict[str, tuple[Again | None, Again | None]] = {}

    @property
    def device(self) -> Device:
        return self.env.device

    @property
    def measures_floors(self) -> bool:
        """Whether this process measures the rates (copy bandwidth, matmul TFLOP/s, each once
        per process: Environment) that declared bytes and flops are held to: in the user's
        run and a recorded session, and in a side of a comparison (``floors``: its parent
        holds the working tree's measurements to them, versus/ab.py); not in a confirmation,
        whose parent uses its samples only."""
        return self.floors or not self.settings.confirming

    @property
    def gate(self) -> Gate:
        # Imported here: the gate loads scipy, which a run without gpubench tests never needs.
        from ..judge.gate import Gate

        return Gate.of(self.settings, self.family)

    @functools.cached_property
    def baseline(self) -> store.Baseline:
        """This device's baseline file, read once; raises BaselineError if damaged."""
        return store.load(store.path_for(self.settings.dir, self.device.key))

    def version_changes(self) -> list[str]:
        base = self.baseline
        if not base.exists:
            return []
        return version_changes(dict(base.latest_versions()), self.env.fingerprint())

    @property
    def device_index(self) -> int | None:
        """The GPU a fresh process times on: this process's."""
        return self.device.index if self.device.kind == "cuda" else None

    def device_lock(self) -> DeviceLock:
        """One measurement at a time on this device, across processes."""
        if self._lock is None:
            self._lock = DeviceLock(self.env.machine)
        return self._lock

    def first_call(self, workload: Workload) -> tuple[object, float]:
        """Run the untimed first call; return its result and how long it took in seconds
        (device work included), which tells whether the function is slow for its budget
        (:meth:`call_durations`)."""
        call = workload.prepare()
        sync = synchronizer(self.device.kind)  # before the clock starts: it may import torch
        started = time.perf_counter()
        result = call()
        sync()
        return result, time.perf_counter() - started

    def call_durations(self, workload: Workload, first_call_s: float, budget_s: float) -> Untimed:
        """The untimed calls of ``workload``, whose first took ``first_call_s``. Where that is
        SLOW_SHARE of ``budget_s`` or more, one more call is timed for the duration: a first
        call pays for a compile or an autotuning, and read alone it flipped a sampler between
        sessions and sides (bench/results/h200-2026-12-05). Outside the device lock, as the
        first call; none more under Nsight Compute, where nothing is timed."""
        if first_call_s < SLOW_SHARE * budget_s or self.ncu_ranges:
            return Untimed(first_call_s)
        return Untimed(first_call_s, self.first_call(workload)[1])

    def measure(self, workload: Workload, call: Call) -> Result:
        """Time ``workload`` under the device lock, within its budget (from the timer's
        calibration to the last sample, give or take one sample); judged (:meth:`_judged`)."""
        return self._sample(workload, None, call, call.key, Untimed()).first

    def _judged(
        self,
        workload: Workload,
        measurement: Measurement,
        settings: MeasureSettings,
        reference: Workload | None = None,
    ) -> Result:
        """The look's one judgement of ``measurement``, with a profiler trace of one call
        where it flags or fails it (the workload is gone by the final verdict:
        :meth:`kept_evidence`) or every measurement's is asked for; in a fresh process, only
        where its parent asked (``trace_into``). A ratio's has its ``reference``'s beside it."""
        result = self.judge(measurement, settings)
        folder = self.settings.evidence
        if self.settings.child is not None:
            if self.trace_into is None:
                return result
            folder = self.trace_into
        elif not (
            self.settings.profile
            or self.gate.needs_confirmation(result)
            or self.gate.fails(result.verdict)
        ):
            return result
        return self.traced(result, workload, reference, folder)

    def traced(
        self,
        result: Result,
        workload: Workload,
        reference: Workload | None = None,
        folder: Path | None = None,
    ) -> Result:
        """``result`` with a profiler trace of one call of ``workload`` (and of
        ``reference``'s beside it: a ratio's reference, a revision's call) in ``folder``
        (the evidence directory); where none can be taken, its note says why."""
        folder = folder or self.settings.evidence
        measurement = result.measurement
        name = ncu.stem(measurement.key)
        path = folder / f"{name}.trace.json"
        other = None if reference is None else path.with_name(f"{name}.reference.trace.json")
        created = not folder.exists()
        try:
            with self.outside_test(), self.device_lock():
                trace(self.device.kind, workload.prepare(), path)
                if reference is not None and other is not None:
                    trace(self.device.kind, reference.prepare(), other)
            if created and folder == self.settings.evidence:
                # Ours: never committed by accident (a folder the user had is theirs).
                storage.gitignore(folder)
        except Exception as exc:  # evidence never fails a test by itself: say why there is none
            with contextlib.suppress(OSError):  # half the evidence is none
                path.unlink(missing_ok=True)
            note = f"no trace of one call: {type(exc).__name__}: {exc}"[:300]
            return Result(measurement.noted(note), result.verdict)
        found = Evidence(str(path), None if other is None else str(other))
        return Result(dataclasses.replace(measurement, evidence=found), result.verdict)

    def kept_evidence(self, results: Sequence[Result]) -> tuple[Result, ...]:
        """``results`` with the traces of those that do not fail removed (their files too),
        unless every measurement's is asked for (--gpubench-profile, or a parent's request
        for the evidence: its parent judges)."""
        if self.settings.profile or self.trace_into is not None:
            return tuple(results)
        kept = []
        for r in results:
            evidence = r.measurement.evidence
            paths = [p for p in (evidence.trace, evidence.reference_trace) if p]
            if paths and not self.gate.fails(r.verdict):
                for path in paths:
                    Path(path).unlink(missing_ok=True)
                measurement = dataclasses.replace(r.measurement, evidence=Evidence())  # (no ncu's)
                r = dataclasses.replace(r, measurement=measurement)
            kept.append(r)
        return tuple(kept)

    def profile_call(self, workload: Workload, key: str) -> None:
        """In a fresh process under Nsight Compute: one warm call of ``workload`` in the
        NVTX range of the measurement ``key``, under the device lock; nothing is timed."""
        with self.device_lock():
            in_range(self.device.kind, workload.prepare(), ncu.range_name(key))

    def with_ncu(self, results: Sequence[Result], nodeid: str) -> tuple[Result, ...]:
        """``results`` with Nsight Compute's metrics of one call of each failing one with
        evidence (--gpubench-ncu), from a fresh process of the test ``nodeid`` under ncu,
        its report beside the traces; where there are none, its note says why."""
        failing = {
            r.key for r in results if self.gate.fails(r.verdict) and r.measurement.evidence.trace
        }
        path = ncu.found()
        if not (self.settings.ncu and failing) or self.settings.child or self.comparison:
            return tuple(results)
        if path is None or self.launcher is None:
            kernels: dict[str, tuple[NcuKernel, ...]] = {}
            error = "no ncu on PATH" if path is None else "no fresh process can be started here"
            report = Path()
        else:
            report = self.settings.evidence / f"{ncu.stem(nodeid)}{ncu.SUFFIX}"
            kernels, error = ncu.profile(self.launcher, path, [nodeid], report, self.device_index)
        out = []
        for r in results:
            if r.key in failing:
                found = ncu.evidence(report, kernels, r.key)
                m = r.measurement
                why = f"no Nsight Compute metrics: {error or 'none of its kernels'}"
                evidence = dataclasses.replace(m.evidence, ncu=found)
                m = dataclasses.replace(m, evidence=evidence) if found else m.noted(why[:300])
                r = dataclasses.replace(r, measurement=m)
            out.append(r)
        return tuple(out)

    def _peak_bytes(self, sampler: Sampler, workload: Workload) -> int | None:
        """What one call of ``workload`` holds at its peak: the timer's own reading where it
        has one (a plugin's), else the device allocator's, after sampling (warm)."""
        if sampler.peak_bytes is not None:
            return sampler.peak_bytes()
        return peak_bytes(self.device.kind, workload)

    def _energy(
        self, sampler: Sampler, workload: Workload, samples_ms: Sequence[float]
    ) -> Energy | None:
        """Energy per call where asked for (--gpubench-energy): the timer's own reading (a
        plugin's), else NVML's counter over a window of calls, after sampling (warm). None in
        a fresh process (its parent's measurement has it), on a CPU, and for a workload with a
        per-sample setup, whose setup would run inside the window."""
        if not self.settings.energy or self.settings.child is not None or not samples_ms:
            return None
        per_call_s = statistics.median(samples_ms) / 1e3
        if sampler.energy is not None:
            return sampler.energy(per_call_s)
        monitor = self.env.clock_monitor()
        if monitor is None or workload.setup is not None:
            return None
        return measure_energy(
            workload.prepare(), synchronizer(self.device.kind), monitor, per_call_s
        )

    def measure_pair(
        self,
        workload: Workload,
        reference: Workload,
        call: Call,
        reference_untimed: Untimed,
    ) -> tuple[Result, Result | None]:
        """Time ``workload`` and ``reference`` alternately under the device lock
        (``timing.engine.collect_pair``, PAIR_BUDGET; ``warmup`` and ``rounds`` count pairs):
        ``workload``'s measurement, keyed as without a reference, and the ratio's (``key`` +
        RATIO_KEY), whose samples are the pairs' ratios, ``workload`` over ``reference``;
        None where no timer times both or a ratio is beyond a sample, as the first's note says."""
        two = self._sample(workload, reference, call, call.key + RATIO_KEY, reference_untimed)
        pair, first = two.pair, two.first
        assert pair is not None  # (a pair was sampled)
        reference_ms = statistics.median(pair.second.samples_ms)
        problem = ""
        if pair.first.timer != pair.second.timer:
            problem = (
                f"the reference was timed by {pair.second.timer} "
                f"({time_text(reference_ms)}), this function by {pair.first.timer}: a ratio "
                "of two timers' numbers is not measured"
            )
        elif any(sample_problem(r) for r in pair.ratios):
            problem = "a pair's ratio is beyond what a sample may hold"
        if problem:
            noted = first.measurement.noted(f"no ratio to its reference: {problem}")
            return Result(noted, first.verdict), None
        ratio = self._measurement(
            dataclasses.replace(
                pair.second,
                timer=pair.first.timer + RATIO_SUFFIX,
                samples_ms=pair.ratios,
                calls_per_sample=1,
                profile=None,
                note=f"reference: {pair.second.note}" if pair.second.note else "",
                caveat="; ".join(filter(None, [pair.first.caveat, pair.second.caveat])),
            ),
            call,
            two.settings,
            two.readings,
            Costs(first_call_s=reference_untimed.spent_s),
            suffix=RATIO_KEY,
        )
        launches = [s.profile.launches if s.profile else () for s in (pair.first, pair.second)]
        fn_ms = first.measurement.summary.median_ms
        versus = Versus(fn_ms, reference_ms, *map(launch_count, launches))
        # The ratio's binary is the pair's: either side running other kernels changes it.
        ratio = dataclasses.replace(ratio, kernels=launches[0] + launches[1], versus=versus)
        return first, self._judged(workload, ratio, two.settings, reference=reference)

    def measure_sides(
        self,
        head: Workload,
        base: Workload | Callable[[str], Sampler],
        call: Call,
        base_untimed: Untimed,
        *,
        again: bool = False,
        base_first: bool = False,
    ) -> tuple[Result, Measurement]:
        """Both revisions of one call timed alternately (versus/lockstep.py): the working tree's
        ``head`` and the revision's ``base`` (here, or its sampler by the timer named in a
        duo's other process: run/duo.py), each its own measurement of ``call.key``; only the
        working tree's holds declared work (versus.ab.held_to_floors). ``again``: a pair set up
        again after the call's first (run.sides.MORE_PAIR_SAMPLES), the revision's sampler
        made first where ``base_first``."""
        two = self._sample(
            head, base, call, call.key, base_untimed, again, beside=True, base_first=base_first
        )
        assert two.pair is not None  # (a pair was sampled)
        base_measurement = self._measurement(
            two.pair.second,
            call,
            two.settings,
            two.readings,
            Costs(first_call_s=base_untimed.spent_s),
            peak_bytes=two.other_peak,
            beside_ms=two.besides[1],
        )
        return two.first, base_measurement.noted(two.besides[2])

    def timer_ready(self, call: Call | None = None) -> None:
        """Make ``call``'s timer (or the settings') before a duo times it (run/duo.py): a
        process's first starts the profiler (seconds), which no pair's budget must pay."""
        self._timer_factory(
            call.spec.measure if call else self.settings.measure, self.device, False
        )

    def remote_sampler(
        self, workload: Workload, call: Call, timer: str, again: Again | None = None
    ) -> Sampler:
        """A sampler of the held call ``call`` by the timer named, for the other process of a
        duo (run/duo.py), which takes its samples while holding the device lock; made as
        its first was (``again``: that sampler's Sampler.again) where that works."""
        settings = dataclasses.replace(call.spec.measure, timer=timer)
        slow = call.untimed.call_s >= SLOW_SHARE * settings.budget_s
        workload = dataclasses.replace(workload, slow=slow)
        made = remade(again, workload)
        if made is not None and made.timer == timer:
            return made
        if made is not None:  # (its first was asked for this timer and got another)
            made.close()
        factory = self._timer_factory(settings, self.device, workload.setup is not None)
        return factory.sampler(workload)

    def _sample(
        self,
        workload: Workload,
        other: Workload | Callable[[str], Sampler] | None,
        call: Call,
        other_key: str,
        other_untimed: Untimed,
        again: bool = False,
        *,
        beside: bool = False,
        base_first: bool = False,
    ) -> _Sampled:
        """``workload`` sampled under the device lock (alternately with ``other``, where one
        is given: PAIR_BUDGET), and its judged measurement; ``beside``: each side's kernel time
        too (``_besides``), and the measurement not judged."""
        settings = self._settings(call.spec.measure, call.key, other_key)
        has_setup = workload.setup is not None
        slow_s = SLOW_SHARE * settings.budget_s  # of its own share of the budget

        def timer_named(name: str) -> Timer:
            return self._timer_factory(
                dataclasses.replace(settings, timer=name), self.device, has_setup
            )

        # Before the clock starts: what may import torch or scipy for the first time.
        timer = self._timer_factory(settings, self.device, has_setup)
        self.env.clock_monitor()
        budget_s = (1 if other is None else PAIR_BUDGET) * settings.budget_s
        plan = Plan(
            min_samples=settings.min_samples,
            max_samples=settings.max_samples,
            budget_s=budget_s,
            precision=settings.precision,
            warmup=call.warmup,
            rounds=call.rounds,
        )
        calls_s = (call.untimed.call_s, other_untimed.call_s)
        if again and plan.rounds is None:  # (the test's own rounds and warmup stand)
            n = min(MORE_PAIR_SAMPLES, plan.max_samples)
            # A slow call on either side warms up as the budget lets it.
            short = plan.warmup is None and max(calls_s) < slow_s
            warmup = MORE_PAIR_WARMUP if short else plan.warmup
            plan = dataclasses.replace(plan, min_samples=n, max_samples=n, warmup=warmup)
        readings: list[ClockReading | None] = []

        def when_warm() -> None:
            readings.append(self.env.read_clocks())

        waited = time.perf_counter()
        with self.device_lock():
            started = time.perf_counter()
            deadline = started + budget_s
            mine = dataclasses.replace(workload, slow=calls_s[0] >= slow_s)
            if isinstance(other, Workload):
                other = dataclasses.replace(other, slow=calls_s[1] >= slow_s)
            if other is None:
                a, b = timer.sampler(mine), None
            else:
                a, b = self._samplers(
                    call.key, mine, other, timer, timer_named, again, beside, base_first
                )
            prepared = time.perf_counter()
            try:
                left = dataclasses.replace(plan, budget_s=deadline - prepared)
                if b is None:
                    pair, sampling = None, collect(a, left, when_warm=when_warm)
                else:
                    pair = collect_pair(a, b, left, when_warm=when_warm)
                    sampling = pair.first
                readings.append(self.env.read_clocks())
                besides = _besides(a, b) if beside and b is not None else (None, None, "")
            finally:
                a.close()
                if b is not None:
                    b.close()
            peak = self._peak_bytes(a, workload)
            # The other side's too, where it runs here (a revision's call in lockstep, a
            # reference): each side's memory is judged against the other's.
            other_peak = None
            if b is not None and isinstance(other, Workload):
                other_peak = self._peak_bytes(b, other)
            energy = self._energy(a, workload, sampling.samples_ms)
            sampled = time.perf_counter()
            floors, unchecked = self._floors(call, workload)
        first = self._measurement(
            sampling,
            call,
            settings,
            readings,
            # Asked for the lock, got it, timer set up, last sample taken.
            Costs(
                first_call_s=call.untimed.spent_s,
                lock_wait_s=started - waited,
                timer_setup_s=prepared - started,
                sampling_s=sampled - prepared,
                other_first_call_s=other_untimed.spent_s,
            ),
            floors=floors,
            peak_bytes=peak,
            energy=energy,
            beside_ms=besides[0],
        )
        from ..judge.gate import MAX_CPU_WAIT

        # A floor a loaded host left out: said under the table (Environment.unchecked),
        # unless the test's own session is as loaded (then it is unmeasurable: one line).
        loaded = (sampling.cpu_wait or 0.0) > MAX_CPU_WAIT
        first = first.noted("" if loaded else unchecked).noted(besides[2])
        # A side of a pair in lockstep is not judged here (a history's verdict nobody would
        # read): its verdict and so its evidence are the revision's (:meth:`traced`, later).
        placeholder = Result(first, Verdict(Status.NEW, reason="a side of a pair"))
        judged = placeholder if beside else self._judged(workload, first, settings)
        return _Sampled(pair, judged, settings, tuple(readings), other_peak, besides)

    def _samplers(
        self,
        key: str,
        mine: Workload,
        other: Workload | Callable[[str], Sampler],
        timer: Timer,
        timer_named: Callable[[str], Timer],
        again: bool,
        sides: bool,
        base_first: bool = False,
    ) -> tuple[Sampler, Sampler]:
        """The samplers of a pair: ``other`` a workload here, or the other process's call
        (run/duo.py) by this side's timer. ``again``: a pair set up again makes this
        process's as the call's first pair's were (Sampler.again), where that works.
        ``sides``: two revisions' calls, batched alike (timing.engine.alike)."""
        known = self._again.get(key, (None, None)) if again else (None, None)
        if isinstance(other, Workload):
            pair = None
            if known[0] is not None and known[1] is not None:
                pair = _remade_pair(known[0], known[1], mine, other, base_first)
            if pair is None:
                pair = paired_samplers(timer, timer_named, mine, other)
                # Lockstep's sides batch alike; a reference's count stays its own (its ratio's
                # history was taken so).
                pair = alike(*pair, mine, other) if sides else pair
            a, b = pair
            self._again[key] = (a.again, b.again)
            return a, b
        a = remade(known[0], mine) or timer.sampler(mine)
        try:
            b = other(a.timer)
        except BaseException:
            a.close()
            raise
        self._again[key] = (a.again, None)
        return a, b

    def _settings(self, settings: MeasureSettings, *keys: str) -> MeasureSettings:
        """The measurement settings with the timer to ask for: ``auto`` keeps the graph timer
        the baseline of the first of ``keys`` it holds was taken by (a ratio's, its timer's)."""
        entries = self.baseline.entries
        entry = next((entries[key] for key in keys if key in entries), None)
        stored = None if entry is None else entry.timer.removesuffix(RATIO_SUFFIX)
        return dataclasses.replace(settings, timer=requested(settings.timer, stored))

    def _floors(self, call: Call, workload: Workload) -> tuple[Floors, str]:
        """The call's declared work and what it is held to where floors are measured
        (:attr:`measures_floors`): its bytes the copy rates, its flops the matmul rate of its
        dtype; and why a loaded host left a floor out ('': none left out)."""
        bytes, flops, measured = call.work_bytes, call.work_flops, self.measures_floors
        rates = (self.env.copy_rates() if bytes and measured else None) or Floors()
        args = [*workload.args, *workload.kwargs.values()]
        dtype = call_dtype(args) if flops and measured else None
        tflops = self.env.matmul_tflops(dtype) if dtype else None
        floors = dataclasses.replace(rates, bytes=bytes, flops=flops, matmul_tflops=tflops)
        if tflops:  # (the dtype of a rate measured)
            floors = dataclasses.replace(floors, matmul_dtype=dtype)
        return floors, self.env.unchecked(bool(bytes) and measured, dtype)

    def _measurement(
        self,
        sampling: Sampling,
        call: Call,
        settings: MeasureSettings,
        readings: Sequence[ClockReading | None],
        costs: Costs,
        *,
        suffix: str = "",
        floors: Floors | None = None,
        peak_bytes: int | None = None,
        energy: Energy | None = None,
        beside_ms: float | None = None,
    ) -> Measurement:
        clocks = [r for r in readings if r is not None]
        profile = sampling.profile
        return Measurement(
            key=call.key + suffix,
            test=call.test + suffix,
            timer=sampling.timer,
            samples_ms=sampling.samples_ms,
            warmup=sampling.warmup,
            calls_per_sample=sampling.calls_per_sample,
            threshold=settings.threshold,
            session=self.env.session_id,
            group=call.spec.group,
            note=sampling.note,
            context=Context(
                date=self.env.date,
                git_commit=self.env.git_commit(),
                gpu=self.env.gpu,
                throttled=tuple(sorted({reason for r in clocks for reason in r.slowdowns})),
                clocks_mhz=tuple(r.sm_mhz for r in clocks),
                caveat=sampling.caveat,
                cpu_wait=sampling.cpu_wait,
            ),
            floors=floors or Floors(),
            peak_bytes=peak_bytes,
            energy=energy,
            kernels=profile.launches if profile is not None else (),
            device_ms=profile.device_ms if profile is not None else None,
            graph_ms=profile.graph_ms if profile is not None else None,
            session_infos={self.env.session_id: self.env.session_info()},
            # Where a test's time went: what makes a run slow shows in the JSON report.
            costs=costs,
            beside_ms=beside_ms,
        )

    def untimed(self, nodeid: str) -> bool:
        """Whether the test ``nodeid`` runs untimed here: judged against a revision by
        fresh processes before it ran (versus/ab.py), not in lockstep in this process."""
        return self.comparison is not None and (not self.lockstep or nodeid in self.apart)

    def compared(self, nodeid: str) -> tuple[Result, ...]:
        """The results of the test ``nodeid`` against the revision (its measurements' keys)."""
        found = self.comparison or {}
        return tuple(r for k, r in found.items() if k == nodeid or k.startswith(nodeid + "#"))

    def judge(self, measurement: Measurement, settings: MeasureSettings) -> Result:
        """The verdict on all sessions of ``measurement`` against this device's baseline."""
        entry = self.baseline.entries.get(measurement.key)
        return self.gate.judge(measurement, entry, settings, self.baseline.sessions)

    def confirm(
        self,
        tests: Sequence[tuple[str, Sequence[Result], MeasureSettings]],
        *,
        progress: Callable[[int, int], None],
    ) -> list[tuple[Result, ...]]:
        """Time the tests again in fresh processes, batch after batch, while the gate wants
        more sessions of any of their results (up to its cap), judging each wanted result on
        all its sessions after every batch; the others stay as they are. ``tests``: each
        test's node id, its results and their settings. Each process of a batch times every
        test that still wants sessions (docs/guide.md, "Verdicts"). Why fresh processes
        measured nothing is said in the note of the results they were to confirm."""
        gate = self.gate
        if self.launcher is None:
            why = "no fresh process can be started here"
            return [tuple(gate.unconfirmed(r, why) for r in results) for _, results, _ in tests]
        now = [list(results) for _, results, _ in tests]

        def wanted(r: Result) -> bool:  # (not one its first batch left unconfirmed)
            return gate.needs_confirmation(r) and r.status is not Status.UNCONFIRMED

        def sessions() -> list[int]:
            return [len(r.measurement.sessions) for rs in now for r in rs]

        done = 0
        while asked := [i for i, rs in enumerate(now) if any(map(wanted, rs))]:
            batch = max(gate.next_batch(r) for i in asked for r in now[i] if wanted(r))
            started = time.perf_counter()
            runs = self.launcher.confirming(
                [tests[i][0] for i in asked], batch, self.device_index, progress, first=done
            )
            done += batch
            share = (time.perf_counter() - started) / sum(wanted(r) for rs in now for r in rs)
            before = sessions()
            for i in asked:
                now[i] = [
                    self._confirmed(r, runs, tests[i][2], share) if wanted(r) else r for r in now[i]
                ]
            if sessions() == before:
                # The batch confirmed nothing (each result says why, or keeps its last
                # look's verdict): another would not either.
                break
        return [tuple(rs) for rs in now]

    def _confirmed(
        self, result: Result, runs: Sequence[ChildRun], settings: MeasureSettings, share: float
    ) -> Result:
        children = [r.measurement for run in runs for r, _ in run.results]
        measurement = self.gate.confirmed(result.measurement, children)
        costs = measurement.costs
        if costs is not None:
            measurement = dataclasses.replace(
                measurement, costs=dataclasses.replace(costs, confirm_s=costs.confirm_s + share)
            )
        errors = sorted({run.error for run in runs if run.error})
        if len(measurement.sessions) == len(result.measurement.sessions):
            # Nothing confirmed it in this batch: the gate says what stands.
            added = measurement.note.removeprefix(result.measurement.note).lstrip("; ")
            why = (
                "; ".join(errors)
                or added
                or "no fresh process measured it (skipped or deselected there?)"
            )
            return self.gate.unconfirmed(dataclasses.replace(result, measurement=measurement), why)
        for error in errors:
            measurement = measurement.noted(error)
        return self.judge(measurement, settings)

    def record(self, session: int) -> ChildRun:
        """Session number ``session`` of the user's selection, timed in a fresh process."""
        if self.launcher is None:
            return ChildRun(error="no fresh process can be started from here")
        return self.launcher.recording(self.device_index, session)

    def save(self, outcomes: Iterable[tuple[Result, bool]]) -> Saved:
        """Add this run's session of the passing results to the baselines: what the gate
        saves (``Gate.unsaved``, ``Gate.saved``: the session that took the samples; a new
        epoch for an accepted change). A result the baseline could not hold is left out, and
        named: one test's bad value never costs the others their baselines."""
        return self._save(outcomes, recorded=False)

    def append(
        self,
        outcomes: Iterable[tuple[Result, bool]],
        keys: Collection[str],
        accepted: Collection[str] = (),
    ) -> Saved:
        """Add a session recorded in a fresh process to the measurements ``keys`` (those this
        run's first session was saved to), whatever it judged, never as a new epoch
        (``Gate.unrecorded``), unless it would spoil its history (``Gate.spoils``: refused)
        where this run's first session was not ``accepted`` (keys)."""
        chosen = ((r, p) for r, p in outcomes if r.key in keys)
        return self._save(chosen, recorded=True, accepted=accepted)

    def _save(
        self,
        outcomes: Iterable[tuple[Result, bool]],
        *,
        recorded: bool,
        accepted: Collection[str] = (),
    ) -> Saved:
        gate = self.gate
        updates: list[Update] = []
        infos: dict[str, SessionInfo] = {}
        lines: list[str] = []
        not_saved: list[str] = []
        refused: list[str] = []
        for result, passed in outcomes:
            if recorded:
                why = gate.unrecorded(result, passed, result.key in accepted)
                if why is None and result.key not in accepted:
                    why = self._spoiled(result)
                    if why:
                        refused.append(why)
                        continue
            else:
                why = gate.unsaved(result, passed)
            if why is not None:
                if why:
                    not_saved.append(why)
                continue
            update = gate.saved(result, recorded=recorded)
            updates.append(update)
            infos.update(result.measurement.session_infos)
            line = None if recorded else gate.accepted_line(result, update.new_epoch)
            if line:
                lines.append(line)
        written = store.save(self.baseline, self.env.fingerprint(), infos, updates)
        keys = tuple(u.key for u in updates) if written else ()
        return Saved(written, keys, tuple(lines), tuple(not_saved), tuple(refused))

    def _spoiled(self, result: Result) -> str | None:
        """The line of a recorded session that would spoil its history (``Gate.spoils``,
        judged at the session's settings, its test's threshold); None where it would not."""
        from ..judge.gate import HOW_TO_ACCEPT

        m = result.measurement
        settings = dataclasses.replace(self.settings.measure, threshold=m.threshold)
        entry = self.baseline.entries.get(m.key)
        spoils = self.gate.spoils(m, entry, settings, self.baseline.sessions)
        if not spoils:
            return None
        return (
            f"{m.test}: a recorded session not saved: appending it would {spoils}; record it "
            f"again on a quiet machine, or {HOW_TO_ACCEPT}"
        )
