"""The benchmark session: device, baselines, timers and the measure-then-judge flow.

Everything here takes plain values; the pytest layer (plugin.py) builds one of these per
process and hands it to the fixture.
"""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import baseline as store
from .device import Device, detect, version_changes
from .engine import Plan, Sampling, Timer, Workload, collect
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
    ) -> Result:
        """Time ``workload``, judge it against the baseline, re-measure doubtful verdicts."""
        timer = self._timer_factory(settings, self.device, workload.setup is not None)
        min_samples = max(settings.min_samples, samples_to_reach(self.corrected_alpha(settings)))
        plan = Plan(
            min_samples=min(min_samples, settings.max_samples),
            max_samples=settings.max_samples,
            budget_s=settings.budget_s,
            precision=settings.precision,
            warmup=warmup,
            rounds=rounds,
        )
        sampler = timer.sampler(workload)
        try:
            readings: list[Any] = []

            def watch() -> None:
                readings.append(self._read_clocks())

            sampling = collect(sampler, plan, when_warm=watch)
            watch()
            entry = self.baseline.entries.get(key)
            verdict = self._judge(sampling.samples_ms, entry, sampling.timer, settings)
            remeasured = False
            if verdict.status in REMEASURE:
                again = collect(sampler, plan)
                sampling = Sampling(
                    sampling.timer,
                    sampling.samples_ms + again.samples_ms,
                    sampling.warmup + again.warmup,
                    sampling.calls_per_sample,
                    sampling.note,
                    sampling.profile,
                )
                watch()
                verdict = self._judge(sampling.samples_ms, entry, sampling.timer, settings)
                remeasured = True
        finally:
            sampler.close()
        readings = [r for r in readings if r is not None]
        return Result(
            key=key,
            test=test,
            timer=sampling.timer,
            samples_ms=list(sampling.samples_ms),
            warmup=sampling.warmup,
            calls_per_sample=sampling.calls_per_sample,
            threshold=settings.threshold,
            group=group,
            note=sampling.note,
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
        self, samples: tuple[float, ...], entry: dict | None, timer: str, settings: Settings
    ) -> Verdict:
        if entry is None:
            return Verdict(NEW, reason="no baseline")
        if entry["timer"] != timer:
            return Verdict(
                NEW, reason=f"baseline timed by {entry['timer']}, now {timer}: not comparable"
            )
        return judge(
            samples,
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
        """Write the baselines of the passing results; return whether the file changed."""
        updates = {r.key: r.baseline_entry() for r in results if r.passed}
        return store.save(self.baseline, self.fingerprint(), updates)
