"""Energy per call (issue 18, informational): the window over NVML's counter with a fake
meter, the record's round trip, NVML's readings through a fake ``pynvml``, and the plugin's
column and JSON through the fake timer (FAKE_ENERGY)."""

from __future__ import annotations

import json
import math
import sys
import time
import types

import pytest
from support import NO_CONFIRM, output

from pytest_gpubench.core.records import Energy, Measurement
from pytest_gpubench.core.samples import energy_text
from pytest_gpubench.timing import energy
from pytest_gpubench.timing.clocks import ClockMonitor


def polls(ticks: int, joules_per_tick: float, tick_s: float = 0.1, per_tick: int = 50):
    """Polls of a counter that moves every ``tick_s`` by ``joules_per_tick``, polled
    ``per_tick`` times a tick, with a power reading of 700 W."""
    step = tick_s / per_tick
    return [
        energy.Poll(i * step, 5000.0 + (i // per_tick) * joules_per_tick, 700.0, "instant")
        for i in range(ticks * per_tick + 1)
    ]


def test_the_power_is_the_counters_energy_between_its_updates_inside_the_window() -> None:
    # 71.2 J every 100 ms: 712 W, over 10 ticks; 500 calls in the second from 0.05 s.
    found = energy.energy_of(polls(12, 71.2), 0.05, 1.05, 500)
    assert found is not None
    assert found.watts == pytest.approx(712.0)
    assert found.joules_per_call == pytest.approx(712.0 * 1.0 / 500)
    assert (found.calls, found.window_s) == (500, pytest.approx(1.0))
    assert found.sampled_watts == pytest.approx(700.0) and found.power_source == "instant"
    assert found.agreement == pytest.approx(712 / 700)


def test_no_number_from_a_counter_that_moves_too_seldom_or_not_at_all() -> None:
    assert energy.energy_of(polls(12, 71.2), 0.05, 0.25, 100) is None  # 2 updates inside
    assert energy.energy_of(polls(12, 0.0), 0.05, 1.05, 500) is None  # never moves
    unread = [p._replace(joules=None) for p in polls(12, 71.2)]
    assert energy.energy_of(unread, 0.05, 1.05, 500) is None
    no_power = [p._replace(watts=None, source="") for p in polls(12, 71.2)]
    found = energy.energy_of(no_power, 0.05, 1.05, 500)
    assert found is not None and found.sampled_watts is None and found.agreement is None


class Meter:
    """A GPU drawing 300 W whose counter moves every 10 ms (the host's clock)."""

    def __init__(self, readable: bool = True) -> None:
        self.readable = readable
        self.started = time.perf_counter()

    def energy_joules(self) -> float | None:
        if not self.readable:
            return None
        return 300.0 * math.floor((time.perf_counter() - self.started) / 0.01) * 0.01

    def power_watts(self) -> tuple[float, str] | None:
        return 300.0, "average"


def test_a_window_of_calls_reads_the_meter_meanwhile() -> None:
    calls = []
    found = energy.measure_energy(
        lambda: calls.append(time.sleep(0.001)), lambda: None, Meter(), 0.001, window_s=0.2
    )
    assert found is not None and found.calls == len(calls) and 1 <= found.calls <= 200
    assert found.watts == pytest.approx(300.0, rel=0.25)  # the polls' lag, on a busy host
    assert found.sampled_watts == 300.0 and found.power_source == "average"
    assert energy.measure_energy(lambda: None, lambda: None, Meter(False), 0.001) is None


@pytest.mark.parametrize(
    ("per_call_s", "calls"),
    [(1.0, 1), (0.3, 4), (1e-9, energy.MAX_CALLS), (0.0, 1), (float("nan"), 1)],
)
def test_window_calls(per_call_s: float, calls: int) -> None:
    assert energy.window_calls(per_call_s) == calls


def test_the_record_round_trips_and_refuses_what_is_no_energy() -> None:
    record = Energy(1.5e-3, 312.0, 200, 0.1, 305.0, "instant")
    assert Energy.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert Energy.from_json({**record.to_json(), "sampled_watts": None}).sampled_watts is None
    for bad in ([], {**record.to_json(), "watts": -1}, {**record.to_json(), "calls": 0}):
        with pytest.raises(ValueError, match="energy"):
            Energy.from_json(bad)
    measurement = Measurement("k", "t", "fake", (1.0,), 0, 1, 0.05, "s", energy=record)
    assert Measurement.from_json(measurement.to_json()).energy == record
    assert Measurement.from_json({**measurement.to_json(), "energy": None}).energy is None


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
