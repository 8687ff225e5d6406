"""The benchmark session: device, baselines, timers and the measure-then-judge flow.

Everything here takes plain values; the pytest layer (plugin.py) builds one of these per
process and hands it to the fixture.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import baseline as store
from .device import Device, detect, version_changes
from .engine import SLOW_SHARE, Plan, Sampling, Timer, Workload, collect
from .results import Result
from .settings import Settings
from .stats import IMPROVED, NEW, REGRESSED, UNSTABLE, Verdict, judge, samples_to_reach

# Verdicts that get a second measurement before they are final.
REMEASURE = (REGRESSED, UNSTABLE, IMPROVED)
PEAK_COPY_BYTES = 1 << 28

TimerFactory = Callable[[Settings, Device, bool], Timer]


class BenchSession:
    def __init__(
        self,
        settings: Settings,
        rootdir: Path,
        timer_factory: TimerFactory,
        use_cuda: Callable[[], bool],
    ) -> None:
        self.settings = settings
        self.rootdir = rootdir
        self.bench_tests = 1  # number of benchmark tests, for the multiple-test correction
        self._timer_factory = timer_factory
        self._use_cuda = use_cuda
        self._device: Device | None = None
        self._baseline: store.Baseline | None = None
        self._clocks: Any = None
        self._peak_gbs: float | None = None
        self._git_commit: str | None | bool = False
        self.not_saved: list[str] = []  # why results were left out of the last save

    @property
    def device(self) -> Device:
        if self._device is None:
            self._device = detect(self._use_cuda())
        return self._device

    @property
    def baseline(self) -> store.Baseline:
        """This device's baseline file, read once; raises BaselineError if damaged."""
        if self._baseline is None:
            path = store.path_for(self.settings.dir, self.device.key)
            self._baseline = store.load(path)
        return self._baseline

    def fingerprint(self) -> dict[str, Any]:
        info = dict(self.device.fingerprint)
        monitor = self._clock_monitor()
        if monitor is not None:
            info.update(monitor.static_info())
        if self._peak_gbs is not None:
            info["peak_copy_gbs"] = round(self._peak_gbs, 1)
        return info

    def version_changes(self) -> list[str]:
        base = self.baseline
        return version_changes(base.fingerprint, self.fingerprint()) if base.exists else []

    def corrected_alpha(self, settings: Settings) -> float:
        """Bonferroni: each test is held to alpha over the number of benchmark tests."""
        return settings.alpha / max(1, self.bench_tests)

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
        settings: Settings,
        group: str | None = None,
        bytes: float | None = None,
        flops: float | None = None,
        warmup: int | None = None,
        rounds: int | None = None,
        first_call_s: float = 0.0,
    ) -> Result:
        """Time ``workload``, judge it against the baseline, re-measure doubtful verdicts.

        The budget bounds it all, from the timer's calibration to the last sample of the
        re-measure, give or take one sample; ``first_call_s`` (the untimed first call's
        duration) tells timers when calibration calls would not fit in it."""
        # Before the clock starts: what may import torch or scipy for the first time.
        timer = self._timer_factory(settings, self.device, workload.setup is not None)
        needed = samples_to_reach(self.corrected_alpha(settings))
        entry = self.baseline.entries.get(key)
        self._clock_monitor()
        deadline = time.perf_counter() + settings.budget_s
        plan = Plan(
            min_samples=min(max(settings.min_samples, needed), settings.max_samples),
            max_samples=settings.max_samples,
            budget_s=settings.budget_s,
            precision=settings.precision,
            warmup=warmup,
            rounds=rounds,
        )
        slow = first_call_s >= SLOW_SHARE * settings.budget_s
        sampler = timer.sampler(dataclasses.replace(workload, slow=slow))
        try:
            readings: list[Any] = []

            def watch() -> None:
                readings.append(self._read_clocks())

            def left() -> Plan:
                return dataclasses.replace(plan, budget_s=deadline - time.perf_counter())

            sampling = collect(sampler, left(), when_warm=watch)
            watch()
            verdict = self._judge(sampling, entry, settings, needed)
            remeasured = False
            if verdict.status in REMEASURE and (rounds is not None or left().budget_s > 0):
                again = collect(sampler, left())
                sampling = Sampling(
                    sampling.timer,
                    sampling.samples_ms + again.samples_ms,
                    sampling.warmup + again.warmup,
                    sampling.calls_per_sample,
                    sampling.note,
                    sampling.profile,
                    cut_short=sampling.cut_short or again.cut_short,
                )
                watch()
                verdict = self._judge(sampling, entry, settings, needed)
                remeasured = True
        finally:
            sampler.close()
        readings = [r for r in readings if r is not None]
        note = sampling.note
        if sampling.cut_short and len(sampling.samples_ms) < needed and verdict.status == NEW:
            note = "; ".join(filter(None, [note, _too_few(len(sampling.samples_ms))]))
        return Result(
            key=key,
            test=test,
            timer=sampling.timer,
            samples_ms=list(sampling.samples_ms),
            warmup=sampling.warmup,
            calls_per_sample=sampling.calls_per_sample,
            threshold=settings.threshold,
            group=group,
            note=note,
            throttled=sorted({reason for r in readings for reason in r.slowdowns}),
            clocks_mhz=[r.sm_mhz for r in readings],
            bytes=bytes,
            flops=flops,
            peak_gbs=self.peak_gbs(settings) if bytes else None,
            verdict=verdict,
            baseline_median_ms=entry.get("median_ms") if entry else None,
            remeasured=remeasured,
            date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            git_commit=self.git_commit(),
            kernels=[x.to_dict() for x in sampling.profile.launches] if sampling.profile else [],
            device_ms=sampling.profile.device_ms if sampling.profile else None,
        )

    def _judge(
        self, sampling: Sampling, entry: dict | None, settings: Settings, needed: int
    ) -> Verdict:
        if entry is None:
            return Verdict(NEW, reason="no baseline")
        if entry["timer"] != sampling.timer:
            return Verdict(
                NEW,
                reason=f"baseline timed by {entry['timer']}, now {sampling.timer}: not comparable",
            )
        n = len(sampling.samples_ms)
        if sampling.cut_short and n < needed:
            # Significance at the corrected alpha is out of reach: say so, never fail at random.
            return Verdict(UNSTABLE, alpha=self.corrected_alpha(settings), reason=_too_few(n))
        return judge(
            sampling.samples_ms,
            entry["samples_ms"],
            threshold=settings.threshold,
            alpha=self.corrected_alpha(settings),
        )

    def peak_gbs(self, settings: Settings) -> float:
        """Measured copy bandwidth of this device (bytes read + written), once per session."""
        if self._peak_gbs is None:
            nbytes = PEAK_COPY_BYTES
            if self.device.kind == "cuda":
                import torch

                src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
                dst = torch.empty_like(src)
                workload = Workload(dst.copy_, (src,))
            else:
                import numpy as np

                nbytes //= 4  # a CPU copy of 256 MiB would cost seconds
                src = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
                dst = np.empty_like(src)
                workload = Workload(np.copyto, (dst, src))
            timer = self._timer_factory(settings, self.device, False)
            sampler = timer.sampler(workload)
            try:
                sampling = collect(sampler, Plan(min_samples=5, max_samples=30, budget_s=0.5))
            finally:
                sampler.close()
            median_ms = sorted(sampling.samples_ms)[len(sampling.samples_ms) // 2]
            self._peak_gbs = 2 * nbytes / (median_ms * 1e6)
        return self._peak_gbs

    def git_commit(self) -> str | None:
        if self._git_commit is False:
            try:
                self._git_commit = (
                    subprocess.run(
                        ["git", "rev-parse", "HEAD"],
                        cwd=self.rootdir,
                        capture_output=True,
                        text=True,
                        timeout=10,
                        check=True,
                    ).stdout.strip()
                    or None
                )
            except (OSError, subprocess.SubprocessError):
                self._git_commit = None
        return self._git_commit  # type: ignore[return-value]

    def _clock_monitor(self) -> Any:
        if self._clocks is None and self.device.kind == "cuda":
            from .clocks import ClockMonitor

            self._clocks = ClockMonitor(self.device.uuid, self.device.index)
        return self._clocks

    def _read_clocks(self) -> Any:
        monitor = self._clock_monitor()
        return monitor.read() if monitor is not None else None

    def save(self, results: list[Result]) -> bool:
        """Write the baselines of the passing results; return whether the file changed.

        An entry the baseline could not hold is left out, named in ``not_saved``: one test's
        bad value never costs the others their baselines."""
        updates: dict[str, dict[str, Any]] = {}
        self.not_saved = []
        for result in results:
            if not result.passed:
                continue
            entry = result.baseline_entry()
            problem = store.entry_problem(entry)
            if len(result.samples_ms) < 2:
                problem = f"{_too_few(len(result.samples_ms))} (a baseline needs 2)"
            elif problem:
                problem = f"its entry {problem}"
            if problem:
                self.not_saved.append(f"{result.test}: not saved: {problem}")
            else:
                updates[result.key] = entry
        return store.save(self.baseline, self.fingerprint(), updates)


def _too_few(n: int) -> str:
    return (
        f"{n} sample{'s' if n != 1 else ''} in the budget: too few to judge, "
        "raise --gpubench-budget-s"
    )
