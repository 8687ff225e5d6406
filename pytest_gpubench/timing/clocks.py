"""SM clock and throttle reasons through NVML (``nvidia-ml-py``), when it is installed.

A measurement is flagged ``throttled`` when, before or after it, the GPU reported a thermal
or hardware slowdown, or its SM clock was under 75% of its maximum (nvbench's rule). The
software power cap (reason bit 0x4) alone is not flagged: on data-centre cards it is on
whenever the card is busy, and its effect is already in every sample, baseline included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar  # pynvml is untyped

T = TypeVar("T")

# nvmlClocksEventReason bits that mean the GPU slowed down for heat or a hardware signal.
SLOWDOWN_REASONS = {
    0x8: "hw-slowdown",
    0x20: "sw-thermal",
    0x40: "hw-thermal",
    0x80: "hw-power-brake",
}
MIN_CLOCK_SHARE = 0.75


@dataclass(frozen=True)
class ClockReading:
    sm_mhz: int
    max_sm_mhz: int
    reasons: int

    @property
    def slowdowns(self) -> list[str]:
        found = [name for bit, name in SLOWDOWN_REASONS.items() if self.reasons & bit]
        if self.max_sm_mhz and self.sm_mhz < MIN_CLOCK_SHARE * self.max_sm_mhz:
            found.append(f"sm-clock {self.sm_mhz}/{self.max_sm_mhz} MHz")
        return found


class ClockMonitor:
    """Reads one GPU's clocks; every method is a no-op without NVML."""

    def __init__(self, device_uuid: str | None, index: int) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            if device_uuid:
                self._handle = pynvml.nvmlDeviceGetHandleByUUID(device_uuid)
            else:
                self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml = pynvml
        except Exception:  # no NVML library, no driver, or an unknown device: no readings
            self._nvml = None

    def _ask(self, read: Callable[[Any], T]) -> T | None:
        """``read(pynvml)``; None without NVML, or where the call raises (an older driver, a
        device that does not report it)."""
        if self._nvml is None:
            return None
        try:
            return read(self._nvml)
        except Exception:
            return None

    def read(self) -> ClockReading | None:
        def reading(nvml: Any) -> ClockReading:
            reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            return ClockReading(
                sm_mhz=int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                max_sm_mhz=int(nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                reasons=int(reasons_fn(self._handle)),
            )

        return self._ask(reading)

    def energy_joules(self) -> float | None:
        """The GPU's total energy since the driver loaded (Volta and newer), in joules."""
        return self._ask(
            lambda nvml: float(nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1e3
        )

    def power_watts(self) -> tuple[float, str] | None:
        """The board's power draw and how it was read: "instant" where the driver gives it,
        else "average" (on Ampere and newer NVML's power usage is a mean over 1 s)."""

        def instant(nvml: Any) -> tuple[float, str] | None:
            field = nvml.NVML_FI_DEV_POWER_INSTANT
            (value,) = nvml.nvmlDeviceGetFieldValues(self._handle, [field])
            return (float(value.value.uiVal) / 1e3, "instant") if value.nvmlReturn == 0 else None

        return self._ask(instant) or self._ask(
            lambda nvml: (float(nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1e3, "average")
        )

    def static_info(self) -> dict[str, str | int]:
        """Driver version and peak clocks for the device fingerprint."""
        info: dict[str, str | int] = {}
        reads: tuple[tuple[str, Callable[[Any], object]], ...] = (
            ("driver", lambda nvml: nvml.nvmlSystemGetDriverVersion()),
            (
                "max_sm_clock_mhz",
                lambda nvml: nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_SM),
            ),
            (
                "max_mem_clock_mhz",
                lambda nvml: nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_MEM),
            ),
        )
        for key, read in reads:
            value = self._ask(read)
            if isinstance(value, bytes):
                value = value.decode()
            if isinstance(value, str | int):
                info[key] = value
        return info
