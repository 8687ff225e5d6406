"""Where a session runs: its device, clocks, commit, peak bandwidth and identity.

Probed once per session (one per process) with the session's settings, never with one
test's: a marker's budget or timer must not change what every other test is measured
against. Everything is lazy, so a run that times nothing pays for nothing.
"""

from __future__ import annotations

import datetime
import secrets
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..core.device import VERSION_FIELDS, Device, Fingerprint
from ..core.records import CopyRates, SessionInfo
from ..core.settings import MeasureSettings
from ..timing.clocks import ClockMonitor, ClockReading
from ..timing.device import (
    cached_copy_bytes,
    copy_workload,
    detect,
    matmul_workload,
    tensor_cores,
)
from ..timing.engine import Plan, Timer, Workload, collect
from ..timing.gpus import host_identity

# The timer of one measurement: from its settings, the device, and whether it has a setup.
TimerFactory = Callable[[MeasureSettings, Device, bool], Timer]


class Environment:
    """The session's probe; built by the session, shared by all its measurements."""

    def __init__(
        self,
        rootdir: Path,
        measure: MeasureSettings,
        timer_factory: TimerFactory,
        use_cuda: Callable[[], bool],
        record_host: bool = False,
    ) -> None:
        self.rootdir = rootdir
        self.record_host = record_host  # the host's name in the files (--gpubench-record-host)
        self.measure = measure  # the session's defaults: what session-wide probes use
        self._timer_factory = timer_factory
        self._use_cuda = use_cuda
        self._device: Device | None = None
        self._clocks: ClockMonitor | None = None
        self._peak_gbs: float | None = None
        self._cached_gbs: float | None = None
        self._matmul_tflops: dict[str, float | None] = {}
        self._git_commit: str | None = None
        self._git_known = False
        self._session_info: SessionInfo | None = None
        now = datetime.datetime.now(datetime.timezone.utc)
        self.date = now.isoformat(timespec="seconds")
        # Sortable and unique: the date, then random bits (sessions of one second differ).
        self.session_id = now.strftime("%Y%m%dT%H%M%SZ-") + secrets.token_hex(3)

    @property
    def probed(self) -> bool:
        """Whether the device was detected: a run with no gpubench test never detects it."""
        return self._device is not None

    @property
    def device(self) -> Device:
        if self._device is None:
            self._device = detect(self._use_cuda())
        return self._device

    @property
    def machine(self) -> str:
        """The physical device: its UUID, or this host for the CPU timer."""
        return self.device.uuid or host_identity()

    @property
    def node(self) -> str:
        """This host in pytest-benchmark's ``machine_info.node``: its name only where asked
        (--gpubench-record-host), else the digest the CPU timer's baselines use."""
        return socket.gethostname() if self.record_host else host_identity()

    @property
    def gpu(self) -> str | None:
        """Which GPU a result came from: ``cuda:<index> <uuid>``."""
        if self.device.kind != "cuda":
            return None
        return f"cuda:{self.device.index} {self.device.uuid or ''}".strip()

    def fingerprint(self) -> Fingerprint:
        info = dict(self.device.fingerprint)
        monitor = self.clock_monitor()
        if monitor is not None:
            info.update(monitor.static_info())
        if self._peak_gbs is not None:
            info["peak_copy_gbs"] = round(self._peak_gbs, 1)
        return info

    def session_info(self) -> SessionInfo:
        """What this session's measurements share, for the baseline's table of sessions."""
        if self._session_info is None:
            fingerprint = self.fingerprint()
            versions = {
                key: None if fingerprint.get(key) is None else str(fingerprint[key])
                for key in VERSION_FIELDS
            }
            host = socket.gethostname() if self.record_host else None
            self._session_info = SessionInfo(
                self.date, self.git_commit(), self.machine, versions, host
            )
        return self._session_info

    def git_commit(self) -> str | None:
        if not self._git_known:
            self._git_known = True
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
        return self._git_commit

    def clock_monitor(self) -> ClockMonitor | None:
        if self._clocks is None and self.device.kind == "cuda":
            self._clocks = ClockMonitor(self.device.uuid, self.device.index)
        return self._clocks

    def read_clocks(self) -> ClockReading | None:
        monitor = self.clock_monitor()
        return monitor.read() if monitor is not None else None

    def peak_gbs(self) -> float:
        """Measured copy bandwidth of this device (bytes read + written), once per session,
        with the session's default settings."""
        if self._peak_gbs is None:
            self._peak_gbs = self._copy_gbs(*copy_workload(self.device.kind))
        return self._peak_gbs

    def copy_rates(self) -> CopyRates:
        """The copy bandwidths a call's declared bytes are held to: from memory (the yardstick
        of % of peak) and from the cache (a copy that fits the GPU's L2: the fastest data
        that stays there between calls can move), each measured once per session."""
        cache_bytes = self.device.fingerprint.get("l2_cache_bytes")
        cache = int(cache_bytes) if isinstance(cache_bytes, int | float) and cache_bytes else None
        if self._cached_gbs is None:
            self._cached_gbs = self._copy_gbs(
                *copy_workload(self.device.kind, cached_copy_bytes(cache))
            )
        return CopyRates(self.peak_gbs(), self._cached_gbs, cache)

    def matmul_tflops(self, dtype: str) -> float | None:
        """The rate (TFLOP/s) a square matmul of ``dtype`` reaches on this device, once per
        session and dtype; None for a dtype whose matmul is not measured."""
        if dtype not in self._matmul_tflops:
            made = matmul_workload(self.device.kind, dtype)
            rate = None
            if made is not None:
                with tensor_cores(self.device.kind):
                    rate = self._rate(made[0], made[1] / 1e12)
            self._matmul_tflops[dtype] = rate
        return self._matmul_tflops[dtype]

    def _copy_gbs(self, workload: Workload, moved: int) -> float:
        return self._rate(workload, moved / 1e9)

    def _rate(self, workload: Workload, work: float) -> float:
        """``work`` per second of ``workload``'s median time, by the session's timer."""
        timer = self._timer_factory(self.measure, self.device, False)
        sampler = timer.sampler(workload)
        try:
            sampling = collect(sampler, Plan(min_samples=5, max_samples=30, budget_s=0.5))
        finally:
            sampler.close()
        median_ms = sorted(sampling.samples_ms)[len(sampling.samples_ms) // 2]
        return work / (median_ms * 1e-3)
