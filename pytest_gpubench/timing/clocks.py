"""SM clock and throttle reasons through NVML (``nvidia-ml-py``), when it is installed.

A measurement is flagged ``throttled`` when, before or after it, the GPU reported a thermal
or hardware slowdown, or its SM clock was under 75% of its maximum (nvbench's rule). The
software power cap (reason bit 0x4) alone is not flagged: on data-centre cards it is on
whenever the card is busy, and its effect is already in every sample, baseline included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any  # pynvml is untyped

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

    def read(self) -> ClockReading | None:
        if self._nvml is None:
            return None
        nvml = self._nvml
        try:
            reasons_fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
                nvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            return ClockReading(
                sm_mhz=int(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                max_sm_mhz=int(nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_SM)),
                reasons=int(reasons_fn(self._handle)),
            )
        except Exception:
            return None

    def energy_joules(self) -> float | None:
        """The GPU's total energy since the driver loaded (Volta and newer), in joules."""
        if self._nvml is None:
            return None
        try:
            return float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle)) / 1e3
        except Exception:
            return None

    def power_watts(self) -> tuple[float, str] | None:
        """The board's power draw and how it was read: "instant" where the driver gives it,
        else "average" (on Ampere and newer NVML's power usage is a mean over 1 s)."""
        if self._nvml is None:
            return None
        nvml = self._nvml
        field = getattr(nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is not None:
            try:
                (value,) = nvml.nvmlDeviceGetFieldValues(self._handle, [field])
                if getattr(value, "nvmlReturn", 1) == 0:
                    return float(value.value.uiVal) / 1e3, "instant"
            except Exception:
                pass
        try:
            return float(nvml.nvmlDeviceGetPowerUsage(self._handle)) / 1e3, "average"
        except Exception:
            return None

    def static_info(self) -> dict[str, str | int]:
        """Driver version and peak clocks for the device fingerprint."""
        if self._nvml is None:
            return {}
        nvml = self._nvml
        info: dict[str, str | int] = {}
        reads: tuple[tuple[str, Callable[[], object]], ...] = (
            ("driver", lambda: nvml.nvmlSystemGetDriverVersion()),
            (
                "max_sm_clock_mhz",
                lambda: nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_SM),
            ),
            (
                "max_mem_clock_mhz",
                lambda: nvml.nvmlDeviceGetMaxClockInfo(self._handle, nvml.NVML_CLOCK_MEM),
            ),
        )
        for key, read in reads:
            try:
                value = read()
            except Exception:
                continue
            if isinstance(value, bytes):
                value = value.decode()
            if isinstance(value, str | int):
                info[key] = value
        return info
