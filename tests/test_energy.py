"""Energy per call (issue 18, informational): the window over NVML's counter with a fake
meter, the record's round trip, NVML's readings through a fake ``pynvml``, and the plugin's
column and JSON through the fake timer (FAKE_ENERGY)."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest
from support import NO_CONFIRM, output

from pytest_gpubench.core.records import Energy, Measurement
from pytest_gpubench.core.samples import energy_text
from pytest_gpubench.timing import energy
from pytest_gpubench.timing.clocks import ClockMonitor


class Meter:
    """A GPU whose counter grows by ``joules_per_call`` per call, read after a sync."""

    def __init__(self, joules_per_call: float, watts: float | None = 300.0) -> None:
        self.joules_per_call, self.watts = joules_per_call, watts
        self.calls = 0
        self.start = 1000.0

    def energy_joules(self) -> float | None:
        return self.start + self.calls * self.joules_per_call

    def power_watts(self) -> tuple[float, str] | None:
        return None if self.watts is None else (self.watts, "instant")


def clock_of(step_s: float) -> Any:
    ticks = iter(range(1000))
    return lambda: next(ticks) * step_s


def test_the_window_fills_a_tenth_of_a_second_and_gives_the_energy_of_one_call() -> None:
    meter = Meter(joules_per_call=0.25)

    def call() -> None:
        meter.calls += 1

    found = energy.measure_energy(call, lambda: None, meter, per_call_s=1e-3, clock=clock_of(0.1))
    assert found is not None
    assert meter.calls == found.calls == 100  # 0.1 s of 1 ms calls
    assert found.joules_per_call == pytest.approx(0.25)
    assert found.watts == pytest.approx(250.0)  # 25 J over the clock's 0.1 s
    assert found.sampled_watts == pytest.approx(300.0) and found.power_source == "instant"
    assert found.agreement == pytest.approx(250 / 300)


@pytest.mark.parametrize(
    ("per_call_s", "calls"),
    [(1.0, 1), (0.03, 4), (1e-9, energy.MAX_CALLS), (0.0, 1), (float("nan"), 1)],
)
def test_window_calls(per_call_s: float, calls: int) -> None:
    assert energy.window_calls(per_call_s) == calls


def test_no_number_where_the_counter_is_not_read_or_does_not_move() -> None:
    still = Meter(joules_per_call=0.0)
    assert energy.measure_energy(lambda: None, lambda: None, still, 1e-3) is None

    class Unread(Meter):
        def energy_joules(self) -> float | None:
            return None

    assert energy.measure_energy(lambda: None, lambda: None, Unread(1.0), 1e-3) is None
    no_power = Meter(joules_per_call=0.5, watts=None)

    def call() -> None:
        no_power.calls += 1

    found = energy.measure_energy(call, lambda: None, no_power, 0.05, clock=clock_of(0.1))
    assert found is not None and found.sampled_watts is None and found.agreement is None


def test_the_record_round_trips_and_refuses_what_is_no_energy() -> None:
    record = Energy(1.5e-3, 312.0, 200, 0.1, 305.0, "instant")
    assert Energy.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert Energy.from_json({**record.to_json(), "sampled_watts": None}).sampled_watts is None
    for bad in ([], {**record.to_json(), "watts": -1}, {**record.to_json(), "calls": 0}):
        with pytest.raises(ValueError, match="energy"):
            Energy.from_json(bad)
    measurement = Measurement("k", "t", "fake", (1.0,), 0, 1, 0.05, "s", energy=record)
    assert Measurement.from_dict(measurement.to_dict()).energy == record
    assert Measurement.from_dict({**measurement.to_dict(), "energy": None}).energy is None


@pytest.mark.parametrize(
    ("joules", "text"),
    [(2.0, "2.00 J"), (1.5e-3, "1.50 mJ"), (3.2e-5, "32.0 µJ"), (4e-9, "4.00 nJ")],
)
def test_energy_text(joules: float, text: str) -> None:
    assert energy_text(joules) == text


def fake_nvml(instant: bool) -> types.ModuleType:
    nvml = types.ModuleType("pynvml")
    nvml.NVML_CLOCK_SM = 0  # type: ignore[attr-defined]
    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda index: "gpu"  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetTotalEnergyConsumption = lambda h: 123_456  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetPowerUsage = lambda h: 250_000  # type: ignore[attr-defined]
    if instant:
        nvml.NVML_FI_DEV_POWER_INSTANT = 186  # type: ignore[attr-defined]
        value = types.SimpleNamespace(nvmlReturn=0, value=types.SimpleNamespace(uiVal=310_000))
        nvml.nvmlDeviceGetFieldValues = lambda h, fields: [value]  # type: ignore[attr-defined]
    return nvml


@pytest.mark.parametrize(
    ("instant", "power"), [(True, (310.0, "instant")), (False, (250.0, "average"))]
)
def test_nvml_readings_in_joules_and_watts(
    monkeypatch: pytest.MonkeyPatch, instant: bool, power: tuple[float, str]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(instant))
    monitor = ClockMonitor(None, 0)
    assert monitor.energy_joules() == pytest.approx(123.456)
    assert monitor.power_watts() == power
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: no readings
    assert ClockMonitor(None, 0).energy_joules() is None
    assert ClockMonitor(None, 0).power_watts() is None


SUITE = """
def test_sum(gpubench):
    gpubench(sum, range(100))

def test_join(gpubench):
    gpubench("".join, ["a"] * 100)
"""


def test_energy_is_shown_and_written_only_where_asked_for_and_known(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=SUITE)
    monkeypatch.setenv("FAKE_ENERGY", json.dumps({"test_sum": 300.0}))
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=r.json")
    result.assert_outcomes(passed=2)
    assert "energy/call" not in output(result)  # not asked for: not measured
    document = json.loads((fake.path / "r.json").read_text())
    assert all(r["energy"] is None for r in document["results"])

    result = fake.runpytest(
        "--gpubench",
        NO_CONFIRM,
        "--gpubench-energy",
        "--gpubench-json=r.json",
        "--gpubench-markdown=r.md",
    )
    result.assert_outcomes(passed=2)
    text = output(result)
    [header] = [line for line in text.splitlines() if line.startswith("test ")]
    assert header.split()[-1] == "energy/call"
    [row] = [line for line in text.splitlines() if line.startswith("test_sum ")]
    assert row.endswith("300 mJ, 300 W")  # 1 ms a call at 300 W
    [other] = [line for line in text.splitlines() if line.startswith("test_join ")]
    assert other.endswith(" -")  # the CPU's NVML: none
    by_test = {
        r["test"]: r["energy"] for r in json.loads((fake.path / "r.json").read_text())["results"]
    }
    assert by_test["test_join"] is None
    assert by_test["test_sum"]["joules_per_call"] == pytest.approx(0.3, rel=0.01)
    assert by_test["test_sum"]["calls"] >= 1
    assert "energy/call" in (fake.path / "r.md").read_text()
    assert "Traceback" not in text
