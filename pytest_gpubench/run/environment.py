"""Where a session runs: its device, clocks, commit, peak bandwidth and identity.

Probed once per session (one per process) with the session's settings, never with one
test's: a marker's budget or timer must not change what every other test is measured
against. Everything is lazy, so a run that times nothing pays for nothing.
"""

from __future__ import annotations

import contextlib
import datetime
import secrets
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from ..core.device import VERSION_FIELDS, Device, Fingerprint
from ..core.records import Floors, SessionInfo
from ..core.settings import MeasureSettings
from ..timing.clocks import ClockMonitor, ClockReading
from ..timing.device import (
    PEAK_COPY_BYTES,
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
# A yardstick (a copy, a matmul) whose process waited for a CPU while it was timed ran at the
# load's pace (a CPU's matmul of all its threads beside one busy process: 4-8 GFLOP/s where
# it does 250-300 calm, and one thread of the call it judges 175): no floor from it, and it
# is timed again when the next call needs it, at most this many times a session.
YARDSTICK_TRIES = 3


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
        # By yardstick ("copy", "cached copy", "<dtype> matmul"): its rate once known (None:
        # none, or given up: YARDSTICK_TRIES); its latest loaded timing's wait for a CPU, and
        # how many of its timings were loaded.
        self._rates: dict[str, float | None] = {}
        self._spoiled: dict[str, float] = {}
        self._tries: dict[str, int] = {}
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
        peak = self._rates.get("copy")
        if peak is not None:
            info["peak_copy_gbs"] = round(peak, 1)
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
        """The commit checked out in the rootdir (asked once), None outside a repository."""
        if not self._git_known:
            self._git_known = True
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                head = subprocess.run(
                    ["git", "rev-parse", "HEAD"],
                    cwd=self.rootdir,
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=True,
                )
                self._git_commit = head.stdout.strip() or None
        return self._git_commit

    def clock_monitor(self) -> ClockMonitor | None:
        if self._clocks is None and self.device.kind == "cuda":
            self._clocks = ClockMonitor(self.device.uuid, self.device.index)
        return self._clocks

    def read_clocks(self) -> ClockReading | None:
        monitor = self.clock_monitor()
        return monitor.read() if monitor is not None else None

    def copy_rates(self) -> Floors | None:
        """The copy bandwidths (bytes read + written) a call's declared bytes are held to
        (Floors of no work): from memory (the yardstick of % of peak) and from the cache (a
        copy that fits the GPU's L2: the fastest data that stays there between calls can
        move); None while the copy from memory has no rate (:meth:`_yardstick`)."""
        cache_bytes = self.device.fingerprint.get("l2_cache_bytes")
        cache = int(cache_bytes) if isinstance(cache_bytes, int | float) and cache_bytes else None
        peak = self._yardstick("copy", self._copy_gbs)
        if peak is None:
            return None
        cached = self._yardstick("cached copy", lambda: self._copy_gbs(cached_copy_bytes(cache)))
        return Floors(peak_gbs=peak, cached_gbs=cached, cache_bytes=cache)

    def matmul_tflops(self, dtype: str) -> float | None:
        """The rate (TFLOP/s) a square matmul of ``dtype`` reaches here; None for a dtype
        whose matmul is not measured, and while its timings are loaded (:meth:`_yardstick`)."""

        def measured() -> tuple[float, float | None] | None:
            made = matmul_workload(self.device.kind, dtype)
            if made is None:
                return None
            with tensor_cores(self.device.kind):
                return self._rate(made[0], made[1] / 1e12)

        return self._yardstick(f"{dtype} matmul", measured)

    def unchecked(self, copy: bool, dtype: str | None) -> str:
        """Why a call's declared bytes (``copy``) or flops (of ``dtype``) have no floor now,
        where a loaded host is the cause: one line; '' otherwise."""
        names = ["copy", "cached copy"] if copy else []
        names += [f"{dtype} matmul"] if dtype else []
        spoiled = [
            f"the {name} ({self._spoiled[name]:.0%})"
            for name in names
            if name in self._spoiled and self._rates.get(name) is None
        ]
        if not spoiled:
            return ""
        return (
            f"no floor: its yardstick ({', '.join(spoiled)}) was timed while its process "
            "waited for a CPU that share of the time (a loaded host), so the call was not "
            "checked for impossible; run it on a quiet machine to check it"
        )

    def _yardstick(
        self, name: str, measure: Callable[[], tuple[float, float | None] | None]
    ) -> float | None:
        """The rate of the yardstick ``name`` (``measure``: its rate and the share of its
        timing its process waited for a CPU; None: no such yardstick), measured once per
        session with its default settings. A timing that waited more than judge.gate's
        MAX_CPU_WAIT gives no rate: a floor from a yardstick slower than the calls it judges
        would make honest calls ``impossible`` (it is timed again: YARDSTICK_TRIES)."""
        from ..judge.gate import MAX_CPU_WAIT  # (the gate loads scipy: not at start-up)

        if name in self._rates:
            return self._rates[name]
        rate, wait = measure() or (None, None)
        if wait is not None and wait > MAX_CPU_WAIT:
            self._spoiled[name] = wait
            self._tries[name] = self._tries.get(name, 0) + 1
            if self._tries[name] < YARDSTICK_TRIES:
                return None
            rate = None
        self._rates[name] = rate
        return rate

    def _copy_gbs(self, nbytes: int = PEAK_COPY_BYTES) -> tuple[float, float | None]:
        workload, moved = copy_workload(self.device.kind, nbytes)
        return self._rate(workload, moved / 1e9)

    def _rate(self, workload: Workload, work: float) -> tuple[float, float | None]:
        """``work`` per second of ``workload``'s median time, by the session's timer, and the
        share of that timing its process waited for a CPU (Sampling.cpu_wait)."""
        timer = self._timer_factory(self.measure, self.device, False)
        sampler = timer.sampler(workload)
        try:
            sampling = collect(sampler, Plan(min_samples=5, max_samples=30, budget_s=0.5))
        finally:
            sampler.close()
        median_ms = sorted(sampling.samples_ms)[len(sampling.samples_ms) // 2]
        return work / (median_ms * 1e-3), sampling.cpu_wait
