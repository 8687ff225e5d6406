"""The benchmark session: measure under the device lock, judge, take confirmations, save.

Sequencing only: timing is in engine.py and the timers, the verdict in verdict.py and
rule.py, files in baseline.py, the probe of the machine in environment.py. Plain values in
and out; the pytest layer (plugin.py) builds one of these per process.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import baseline as store
from .device import Device, version_changes
from .engine import SLOW_SHARE, Plan, Workload, collect
from .environment import Environment, TimerFactory
from .gpus import DeviceLock
from .results import Costs, Result
from .rule import Status
from .settings import MarkerSpec, MeasureSettings, Settings
from .verdict import judge_result, too_few


class BenchSession:
    def __init__(
        self,
        settings: Settings,
        rootdir: Path,
        timer_factory: TimerFactory,
        use_cuda: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.env = Environment(rootdir, settings.measure, timer_factory, use_cuda)
        self.family = 1  # measurements judged in this run: the multiplicity correction
        self._timer_factory = timer_factory
        self._baseline: store.Baseline | None = None
        self._lock: DeviceLock | None = None
        self.not_saved: list[str] = []  # why results were left out of the last save

    @property
    def device(self) -> Device:
        return self.env.device

    @property
    def baseline(self) -> store.Baseline:
        """This device's baseline file, read once; raises BaselineError if damaged."""
        if self._baseline is None:
            path = store.path_for(self.settings.dir, self.device.key)
            self._baseline = store.load(path)
        return self._baseline

    def reload_baseline(self) -> None:
        """Read the file again: fresh processes saved into it."""
        self._baseline = None

    def version_changes(self) -> list[str]:
        base = self.baseline
        if not base.exists:
            return []
        return version_changes(dict(base.latest_versions()), self.env.fingerprint())

    def first_call(self, workload: Workload) -> tuple[Any, float]:
        """Run the untimed first call; return its result and how long it took in seconds
        (device work included), which tells whether the function is slow for its budget."""
        call = workload.prepare()
        kind = self.device.kind  # detected before the clock starts: it may import torch
        started = time.perf_counter()
        result = call()
        if kind == "cuda":
            import torch

            torch.cuda.synchronize()
        return result, time.perf_counter() - started

    def measure(
        self,
        workload: Workload,
        *,
        key: str,
        test: str,
        spec: MarkerSpec,
        warmup: int | None = None,
        rounds: int | None = None,
        first_call_s: float = 0.0,
        bytes: float | None = None,
        flops: float | None = None,
    ) -> Result:
        """Time ``workload`` under the device lock and judge this first session.

        The budget bounds the measurement, from the timer's calibration to the last sample,
        give or take one sample; ``first_call_s`` (the untimed first call's duration) tells
        timers when calibration calls would not fit in it."""
        settings = spec.measure
        # Before the clock starts: what may import torch or scipy for the first time.
        timer = self._timer_factory(settings, self.device, workload.setup is not None)
        self.env.clock_monitor()
        plan = Plan(
            min_samples=settings.min_samples,
            max_samples=settings.max_samples,
            budget_s=settings.budget_s,
            precision=settings.precision,
            warmup=warmup,
            rounds=rounds,
        )
        slow = first_call_s >= SLOW_SHARE * settings.budget_s
        readings: list[Any] = []
        bytes = bytes if bytes is not None else spec.bytes
        waited = time.perf_counter()
        with self.device_lock():
            started = time.perf_counter()
            deadline = started + settings.budget_s
            sampler = timer.sampler(dataclasses.replace(workload, slow=slow))
            prepared = time.perf_counter()
            try:
                left = dataclasses.replace(plan, budget_s=deadline - prepared)
                sampling = collect(
                    sampler, left, when_warm=lambda: readings.append(self.env.read_clocks())
                )
                readings.append(self.env.read_clocks())
            finally:
                sampler.close()
            sampled = time.perf_counter()
            # A confirmation's samples are all its parent uses: no copy-bandwidth probe there.
            peak = self.env.peak_gbs() if bytes and not self.settings.confirming else None
        # Where a test's time went: what makes a run slow shows in the JSON report.
        costs = Costs(
            first_call_s=first_call_s,
            lock_wait_s=started - waited,
            timer_setup_s=prepared - started,
            sampling_s=sampled - prepared,
        )
        readings = [r for r in readings if r is not None]
        profile = sampling.profile
        result = Result(
            key=key,
            test=test,
            timer=sampling.timer,
            samples_ms=list(sampling.samples_ms),
            warmup=sampling.warmup,
            calls_per_sample=sampling.calls_per_sample,
            threshold=settings.threshold,
            session=self.env.session_id,
            group=spec.group,
            note=sampling.note,
            throttled=sorted({reason for r in readings for reason in r.slowdowns}),
            clocks_mhz=[r.sm_mhz for r in readings],
            bytes=bytes,
            flops=flops if flops is not None else spec.flops,
            peak_gbs=peak,
            date=self.env.date,
            git_commit=self.env.git_commit(),
            gpu=self.env.gpu,
            kernels=profile.launches if profile is not None else (),
            device_ms=profile.device_ms if profile is not None else None,
            session_infos={self.env.session_id: self.env.session_info()},
            costs=costs,
        )
        self.judge(result, settings)
        return result

    def device_lock(self) -> DeviceLock:
        """One measurement at a time on this device, across processes."""
        if self._lock is None:
            self._lock = DeviceLock(self.env.machine)
        return self._lock

    def judge(self, result: Result, settings: MeasureSettings) -> None:
        """Set the result's verdict from all its sessions so far."""
        judge_result(
            result,
            self.baseline.entries.get(result.key),
            settings,
            family=self.family,
            fail_on_improvement=self.settings.fail_on_improvement,
        )

    def wants_confirmation(self, result: Result) -> bool:
        """Whether a first session's verdict must be confirmed in fresh processes: the screen
        flagged it, and the direction matters here (slower always; faster when improvements
        fail or a save would start a new epoch on it)."""
        judgement = result.judgement
        if self.settings.confirm == 0 or judgement is None or result.confirmations:
            return False
        if not (
            judgement.needs_confirmation or result.status in (Status.REGRESSED, Status.IMPROVED)
        ):
            return False
        slower = (judgement.ratio or 1.0) > 1.0
        return slower or self.settings.fail_on_improvement or self.settings.save

    def confirmed(
        self, result: Result, children: Iterable[Result], settings: MeasureSettings
    ) -> None:
        """Add the same measurement from fresh processes and judge all sessions together."""
        for child in children:
            if child.key != result.key or child.timer != result.timer or len(child.samples_ms) < 2:
                continue
            record = child.record
            result.confirmations = (*result.confirmations, record)
            result.session_infos = {**result.session_infos, **child.session_infos}
        self.judge(result, settings)

    def save(self, results: list[Result]) -> bool:
        """Add this run's sessions to the baselines of the passing results; return whether
        the file was written.

        A confirmed change (regressed, improved, incomparable) is accepted: its epoch starts
        over with this run's sessions. An entry the baseline could not hold is left out,
        named in ``not_saved``: one test's bad value never costs the others their baselines.
        """
        updates: list[store.Update] = []
        sessions: dict[str, store.SessionInfo] = {}
        self.not_saved = []
        for result in results:
            if not result.passed:
                continue
            if len(result.samples_ms) < 2:
                self.not_saved.append(
                    f"{result.test}: not saved: {too_few(len(result.samples_ms))} "
                    "(a baseline needs 2)"
                )
                continue
            latest = store.BaselineEntry(
                timer=result.timer,
                epoch=result.session,
                anchor=(),
                history=(),
                samples_ms=tuple(result.samples_ms),
                kernels=result.kernels,
                group=result.group,
                bytes=result.bytes,
                flops=result.flops,
                extra_info=result.extra_info or None,
                note=result.note or None,
            )
            accepted = result.status in (Status.REGRESSED, Status.IMPROVED, Status.INCOMPARABLE)
            updates.append(store.Update(result.key, result.sessions, accepted, latest))
            sessions.update(result.session_infos)
        return store.save(self.baseline, self.env.fingerprint(), sessions, updates)
