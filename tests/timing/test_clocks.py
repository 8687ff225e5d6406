"""Clock and throttle readings (timing/clocks.py) against a fake NVML: what flags a
measurement ``throttled``, and that a machine without NVML, or an NVML that fails, costs
nothing but the readings."""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from pytest_gpubench.timing.clocks import ClockMonitor, ClockReading

SM, MEM = 0, 2


class FakeNvml(ModuleType):
    """pynvml's calls the monitor makes, with the readings of one GPU."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = SM, MEM

    def __init__(self, sm_mhz: int = 1980, reasons: int = 0, fail: str = "") -> None:
        super().__init__("pynvml")
        self.sm_mhz, self.reasons, self.fail = sm_mhz, reasons, fail
        self.handles: list[object] = []

    def _maybe_fail(self, name: str) -> None:
        if self.fail == name:
            raise RuntimeError(f"NVML error in {name}")

    def nvmlInit(self) -> None:
        self._maybe_fail("init")

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:
        self.handles.append(("uuid", uuid))
        return SimpleNamespace(uuid=uuid)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        self.handles.append(("index", index))
        return SimpleNamespace(index=index)

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        self._maybe_fail("clock")
        return self.sm_mhz

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock: int) -> int:
        return 1980 if clock == SM else 2619

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        return self.reasons

    def nvmlSystemGetDriverVersion(self) -> bytes:
        self._maybe_fail("driver")
        return b"580.159.04"


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def test_a_monitor_finds_its_gpu_by_uuid_else_by_index(nvml: FakeNvml) -> None:
    ClockMonitor("GPU-1234", 3)
    ClockMonitor(None, 3)
    assert nvml.handles == [("uuid", "GPU-1234"), ("index", 3)]


def test_readings_and_static_information(nvml: FakeNvml) -> None:
    monitor = ClockMonitor("GPU-1234", 0)
    assert monitor.read() == ClockReading(sm_mhz=1980, max_sm_mhz=1980, reasons=0)
    assert monitor.static_info() == {
        "driver": "580.159.04",
        "max_sm_clock_mhz": 1980,
        "max_mem_clock_mhz": 2619,
    }


@pytest.mark.parametrize(
    "sm_mhz, reasons, slowdowns",
    [
        (1980, 0x4, []),  # the power cap alone: on whenever a data-centre card is busy
        (1980, 0x20 | 0x4, ["sw-thermal"]),
        (1980, 0x8 | 0x40 | 0x80, ["hw-slowdown", "hw-thermal", "hw-power-brake"]),
        (1400, 0, ["sm-clock 1400/1980 MHz"]),  # under 75% of its maximum (nvbench's rule)
        (1485, 0, []),  # exactly 75%
    ],
)
def test_what_flags_a_measurement_throttled(
    nvml: FakeNvml, sm_mhz: int, reasons: int, slowdowns: list[str]
) -> None:
    nvml.sm_mhz, nvml.reasons = sm_mhz, reasons
    reading = ClockMonitor("GPU-1234", 0).read()
    assert reading is not None and reading.slowdowns == slowdowns


def test_without_nvml_there_are_no_readings_and_no_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises
    monitor = ClockMonitor("GPU-1234", 0)
    assert (monitor.read(), monitor.static_info()) == (None, {})


@pytest.mark.parametrize("where", ["init", "clock", "driver"])
def test_an_nvml_that_fails_costs_only_its_readings(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(fail=where))
    monitor = ClockMonitor("GPU-1234", 0)
    if where == "init":
        assert (monitor.read(), monitor.static_info()) == (None, {})
    elif where == "clock":
        assert monitor.read() is None
        assert "driver" in monitor.static_info()
    else:
        assert monitor.read() is not None
        assert "driver" not in monitor.static_info()
        assert monitor.static_info()["max_sm_clock_mhz"] == 1980


def test_an_older_nvml_names_the_throttle_reasons_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = FakeNvml(reasons=0x40)
    old.nvmlDeviceGetCurrentClocksThrottleReasons = old.nvmlDeviceGetCurrentClocksEventReasons  # type: ignore[attr-defined]
    monkeypatch.setattr(FakeNvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    monkeypatch.setitem(sys.modules, "pynvml", old)
    reading = ClockMonitor("GPU-1234", 0).read()
    assert reading is not None and reading.slowdowns == ["hw-thermal"]
