"""The pure parts of bench/short_kernels.py: calls and spans from kernel lists, the
between-session statistics and the table, and the CUPTI bookkeeping on synthetic traces."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from support import bench_module


@pytest.fixture(scope="module")
def sk() -> Any:
    return bench_module("short_kernels")


def test_spans_and_sums_per_call(sk: Any) -> None:
    tagged = [(0.0, 1.0, 0), (1.5, 2.0, 0), (3.0, 4.0, 1), (10.0, 10.5, 2), (11.0, 12.0, 2)]
    assert sk.call_spans(tagged) == [2.0, 1.0, 2.0]
    assert sk.call_sums(tagged) == [1.5, 1.0, 1.5]
    # Order of the list does not matter; calls come back in call order.
    assert sk.call_spans(list(reversed(tagged))) == [2.0, 1.0, 2.0]


def test_kernels_of_a_trace_in_start_order(sk: Any) -> None:
    trace = [
        {"cat": "kernel", "name": "b", "ts": 5.0, "dur": 1.0},
        {"cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 0.0, "dur": 9.0},
        {"cat": "gpu_memset", "name": "Memset", "ts": 1.0, "dur": 1.0},
        {"cat": "kernel", "name": "a", "ts": 2.0, "dur": 0.5},
    ]
    assert sk.kernel_events(trace) == [(2.0, 2.5, "a"), (5.0, 6.0, "b")]


def test_calls_told_apart_by_the_eager_sequence(sk: Any) -> None:
    kernels = [
        (0.0, 1.0, "prologue"),
        (1.0, 2.0, "a"),
        (2.0, 3.0, "b"),
        (3.0, 4.0, "a"),
        (4.0, 5.0, "b"),
        (5.0, 6.0, "b"),
        (6.0, 7.0, "a"),
    ]
    tagged, excluded, misordered = sk.assign_calls(kernels, ["a", "b"])
    assert [call for _, _, call in tagged] == [0, 0, 1, 1, 2, 2]
    assert excluded == {"prologue": 1}
    assert misordered == 1  # the third call ran b before a


def test_spreads_of_sessions(sk: Any) -> None:
    steady = [math.exp(x) for x in (-0.02, -0.01, 0.0, 0.01, 0.02)]
    assert sk.log_sd(steady) == pytest.approx(0.0158114, rel=1e-5)
    assert sk.lower_half_spread(steady) == pytest.approx(0.015 / 0.6745)
    # A slow excursion widens the CV but not the lower half's spread.
    excursion = [*steady, math.exp(0.2)]
    assert sk.log_sd(excursion) > 4 * sk.log_sd(steady)
    assert sk.lower_half_spread(excursion) == pytest.approx(0.015 / 0.6745)
    assert sk.lower_half_spread([2.0, 2.0, 2.0]) == 0.0
    assert sk.log_sd([1.0]) is None and sk.lower_half_spread([1.0, 2.0]) is None


def _session(device: str, prime: bool, shift: float, error: str = "") -> dict[str, Any]:
    add: dict[str, Any] = {
        "kernels_per_call": 1,
        "graph_us": 1.3 * shift,
        "cupti_span_us": 1.0 * math.sqrt(shift),
        "cupti_sum_us": 1.0 * math.sqrt(shift),
        "eager_cupti_us": 1.05 * shift,
    }
    if error:
        add = {"graph_us": 99.0, "error": error}
    return {"device": device, "prime_profiler": prime, "functions": {"add": add}}


def test_summary_per_group_and_function(sk: Any) -> None:
    shifts = (1.0, 1.02, 0.98, 1.01, 0.99)
    sessions = [_session("H100", False, s) for s in shifts]
    sessions.append(_session("H100", False, 1.0, error="CUPTI recorded 0 kernels"))
    sessions.append(_session("H100", True, 1.0))
    summary = sk.summarize(sessions)
    assert list(summary) == ["H100, profiler after timing", "H100, profiler primed first"]
    [row] = summary["H100, profiler after timing"]
    assert row["sessions"] == 5  # the failed session is left out of every number
    assert row["errors"] == ["CUPTI recorded 0 kernels"]
    assert row["graph_us"] == pytest.approx(1.3)
    assert row["graph_over_sum"] == pytest.approx(1.3)
    assert row["cupti_span_us_cv"] == pytest.approx(row["graph_us_cv"] / 2, rel=0.01)
    assert row["steadiest_cv"] in ("span", "sum") and row["steadiest_low"] in ("span", "sum")
    [primed] = summary["H100, profiler primed first"]
    assert (
        primed["sessions"] == 1
        and primed["steadiest_low"] is None
        and primed["graph_us_cv"] is None
    )


def test_markdown_table(sk: Any) -> None:
    sessions = [_session("H100", False, s) for s in (1.0, 1.02, 0.98)]
    sessions.append(_session("H100", False, 1.0, error="CUPTI failed: boom"))
    text = sk.markdown(sk.summarize(sessions), "torch 2.11, triton 3.6")
    lines = text.splitlines()
    assert lines[0] == "### H100, profiler after timing"
    assert "torch 2.11, triton 3.6" in lines
    header = next(line for line in lines if line.startswith("| function"))
    row = next(line for line in lines if line.startswith("| add"))
    assert header.count("|") == row.count("|") == 14
    assert "| 1.3 |" in row and "| 1.300 |" in row
    assert "- add: CUPTI failed: boom" in lines


def test_summarize_command(sk: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for i, shift in enumerate((1.0, 1.02, 0.98)):
        paths.append(tmp_path / f"session-{i}.json")
        paths[-1].write_text(json.dumps(_session("H100", False, shift)))
    (tmp_path / "broken.json").write_text("{")
    assert (
        sk.main(["summarize", *map(str, paths), str(tmp_path / "broken.json"), "--markdown"]) == 0
    )
    out, err = capsys.readouterr()
    assert out.startswith("### H100, profiler after timing") and "| add | 1 | 3 |" in out
    assert "skipped" in err and "broken.json" in err
    assert sk.main(["summarize", *map(str, paths)]) == 0
    assert json.loads(capsys.readouterr().out)["H100, profiler after timing"][0]["sessions"] == 3


class FakeGraph:
    def replay(self) -> None:
        pass


def _fake_traces(sk: Any, monkeypatch: pytest.MonkeyPatch, traces: list[list[dict]]) -> None:
    def trace(run: Any) -> list[dict]:
        run()
        return traces.pop(0)

    monkeypatch.setattr(sk, "_trace", trace)


def _kernels(names: list[str], start: float = 0.0, gap: float = 0.5) -> list[dict]:
    out, t = [], start
    for name in names:
        out.append({"cat": "kernel", "name": name, "ts": t, "dur": 1.0})
        t += 1.0 + gap
    return out


def test_cupti_of_replays(sk: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    eager = _kernels(["a", "b"] * sk.EAGER_CALLS)
    calls = 4
    replays = [{"cat": "kernel", "name": "prologue", "ts": -5.0, "dur": 1.0}]
    replays += _kernels(["a", "b"] * calls * sk.PROFILED_REPLAYS)
    _fake_traces(sk, monkeypatch, [eager, replays])
    result = sk.profile_function(lambda: None, FakeGraph(), calls)
    assert "error" not in result
    assert result["kernels"] == ["a", "b"] and result["kernels_per_call"] == 2
    assert result["eager_cupti_us"] == pytest.approx(2.0)
    assert result["cupti_sum_us"] == pytest.approx(2.0)
    assert result["cupti_span_us"] == pytest.approx(2.5)  # the gap inside a call counts
    assert result["excluded_kernels"] == {"prologue": 1} and result["misordered_calls"] == 0


def test_cupti_errors_are_clear(sk: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_traces(sk, monkeypatch, [[]])
    with pytest.raises(RuntimeError, match="no kernels in 10 eager calls"):
        sk.profile_function(lambda: None, FakeGraph(), 4)
    _fake_traces(sk, monkeypatch, [_kernels(["a"] * 10), [{"cat": "kernel", "name": "x", "ts": 0}]])
    result = sk.profile_function(lambda: None, FakeGraph(), 4)
    assert result["error"].startswith("CUPTI recorded 0 of the function's kernels in 3 replays")
    assert "--prime-profiler" in result["error"] and "cupti_span_us" not in result
    _fake_traces(sk, monkeypatch, [_kernels(["a"] * 10), _kernels(["a"] * 5)])
    result = sk.profile_function(lambda: None, FakeGraph(), 4)
    assert "5 of the function's kernels" in result["error"] and "12 expected" in result["error"]
