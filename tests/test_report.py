"""Unit tests of pytest_gpubench.report and results: messages, the table, Markdown and JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_gpubench import report
from pytest_gpubench.results import Result, plain_data_problem
from pytest_gpubench.settings import Settings
from pytest_gpubench.stats import IMPROVED, NEW, OK, REGRESSED, UNSTABLE, Verdict

HEADER = "| test | timer | median | noise | baseline | change | p | verdict | GB/s | % peak |"


def result(
    test: str = "test_x",
    samples: tuple[float, ...] = (0.5, 0.6, 0.561, 0.55, 0.58),
    verdict: Verdict | None = None,
    baseline_ms: float | None = None,
    **extra: Any,
) -> Result:
    values: dict[str, Any] = dict(
        key=f"tests/test_k.py::{test}",
        test=test,
        timer="cuda-graph",
        samples_ms=list(samples),
        warmup=6,
        calls_per_sample=100,
        threshold=0.05,
        verdict=verdict or Verdict(NEW, reason="no baseline"),
        baseline_median_ms=baseline_ms,
    )
    values.update(extra)
    return Result(**values)


def regressed(ratio: float = 1.0957, p: float = 2e-6) -> Verdict:
    return Verdict(REGRESSED, ratio, ratio - 0.01, ratio + 0.01, p, 1 - p, 0.01)


def improved(ratio: float = 0.8) -> Verdict:
    return Verdict(IMPROVED, ratio, ratio - 0.01, ratio + 0.01, 0.99, 1e-9, 0.01)


# --- formatting numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ms, text",
    [(None, "-"), (0.512, "0.512 ms"), (12.0, "12.000 ms"), (0.1, "0.100 ms"), (0.0512, "51.2 µs")],
)
def test_format_time(ms: float | None, text: str) -> None:
    assert report.format_time(ms) == text


@pytest.mark.parametrize(
    "p, text", [(None, "-"), (2e-6, "2e-06"), (0.0004, "0.0004"), (0.0123, "0.012"), (0.5, "0.500")]
)
def test_format_p(p: float | None, text: str) -> None:
    assert report.format_p(p) == text


@pytest.mark.parametrize(
    "ratio, text",
    [(None, "-"), (1.0957, "+9.6%"), (1.2, "+20.0%"), (0.9, "-10.0%"), (1.0, "+0.0%")],
)
def test_format_change(ratio: float | None, text: str) -> None:
    assert report.format_change(ratio) == text


# --- failure messages -----------------------------------------------------------------------


def test_failure_message_of_a_regression() -> None:
    r = result(verdict=regressed(), baseline_ms=0.512)
    assert r.summary.median_ms == pytest.approx(0.561)
    assert report.failure_message(r) == (
        "test_x regressed: 0.512 ms -> 0.561 ms (+9.6%, p=2e-06, threshold 5%)"
    )


def test_failure_message_of_an_improvement_says_how_to_refresh() -> None:
    r = result(samples=(0.4, 0.41, 0.39), verdict=improved(), baseline_ms=0.5, threshold=0.075)
    assert report.failure_message(r) == (
        "test_x improved: 0.500 ms -> 0.400 ms (-20.0%, p=1e-09, threshold 7.5%); "
        "refresh the baseline with --gpubench-save"
    )


def test_failure_message_in_microseconds() -> None:
    r = result(samples=(0.05, 0.06, 0.055), verdict=regressed(1.1, 0.0004), baseline_ms=0.05)
    assert report.failure_message(r) == (
        "test_x regressed: 50 µs -> 55 µs (+10.0%, p=0.0004, threshold 5%)"
    )


@pytest.mark.parametrize(
    "status, fail_on_improvement, fails",
    [
        (REGRESSED, False, True),
        (REGRESSED, True, True),
        (IMPROVED, False, False),
        (IMPROVED, True, True),
        (UNSTABLE, True, False),
        (NEW, True, False),
        (OK, True, False),
    ],
)
def test_is_failure(status: str, fail_on_improvement: bool, fails: bool) -> None:
    assert report.is_failure(result(verdict=Verdict(status)), fail_on_improvement) is fails


# --- the summary table ----------------------------------------------------------------------


def mixed_results() -> list[Result]:
    return [
        result("test_ok", verdict=Verdict(OK, 1.0, 0.99, 1.01, 0.4, 0.6, 0.01), baseline_ms=0.56),
        result("test_new"),
        result("test_slow", verdict=regressed(), baseline_ms=0.512),
        result("test_fast", verdict=improved(), baseline_ms=0.7),
        result(
            "test_noisy",
            verdict=Verdict(UNSTABLE, 1.0, 0.8, 1.2, 0.3, 0.7, 0.01, reason="too noisy"),
            baseline_ms=0.56,
        ),
    ]


def test_sort_results_puts_what_needs_attention_first() -> None:
    names = [r.test for r in report.sort_results(mixed_results())]
    assert names == ["test_slow", "test_fast", "test_noisy", "test_new", "test_ok"]


def test_sort_results_groups_within_a_verdict() -> None:
    results = [result("b", group="z"), result("c", group="a"), result("a")]
    assert [r.test for r in report.sort_results(results)] == ["a", "c", "b"]


def test_table_lines() -> None:
    lines = report.table_lines(mixed_results())
    assert lines[0].split() == [
        "test",
        "timer",
        "median",
        "noise",
        "baseline",
        "change",
        "p",
        "verdict",
        "GB/s",
        "%",
        "peak",
    ]
    assert set(lines[1]) == {"-", " "}
    assert len(lines) == 2 + 5
    slow = lines[2]
    assert slow.startswith("test_slow   cuda-graph")
    assert slow.split()[2:] == ["0.561", "ms", "5.3%", "0.512", "ms", "+9.6%"] + [
        "2e-06",
        "regressed",
        "-",
        "-",
    ]
    assert [line.split()[0] for line in lines[2:]] == [
        "test_slow",
        "test_fast",
        "test_noisy",
        "test_new",
        "test_ok",
    ]
    assert all(line == line.rstrip() for line in lines)
    # numbers are right-aligned: every row ends in the same column as the header's last cell
    assert len({len(line) for line in lines[2:]}) == 1


def test_table_marks_throttled_results() -> None:
    lines = report.table_lines([result(throttled=["hw-thermal"])])
    assert "new (throttled)" in lines[2]


def test_notes_explain_what_a_reader_must_know() -> None:
    results = mixed_results() + [result("test_hot", throttled=["hw-thermal", "sw-thermal"])]
    results.append(result("test_event", note="graph capture failed (RuntimeError: sync)"))
    results.append(result("test_other", verdict=Verdict(NEW, reason="baseline timed by wall")))
    assert report.notes(results) == [
        "test_noisy: unstable: too noisy",
        "test_event: graph capture failed (RuntimeError: sync)",
        "test_hot: measured while throttled (hw-thermal, sw-thermal)",
        "test_other: new: baseline timed by wall",
    ]


def test_counts() -> None:
    assert report.counts(mixed_results()) == "1 regressed, 1 improved, 1 unstable, 1 new, 1 ok"
    assert report.counts([result(), result()]) == "2 new"
    assert report.counts([]) == ""


# --- bandwidth ------------------------------------------------------------------------------


def test_bandwidth_and_share_of_peak() -> None:
    r = result(samples=(1.0, 1.0, 1.0), bytes=2e9, flops=4e12, peak_gbs=4000.0)
    assert r.gbs == pytest.approx(2000.0)
    assert r.tflops == pytest.approx(4000.0)
    assert r.peak_share == pytest.approx(0.5)
    assert report.row(r)[-2:] == ["2000.0", "50%"]
    bare = result()
    assert (bare.gbs, bare.tflops, bare.peak_share) == (None, None, None)
    assert report.row(bare)[-2:] == ["-", "-"]


# --- Markdown and JSON ----------------------------------------------------------------------


def test_markdown() -> None:
    text = report.markdown(mixed_results(), {"name": "NVIDIA H100 80GB HBM3"})
    lines = text.splitlines()
    assert lines[0] == "### gpubench: NVIDIA H100 80GB HBM3"
    assert lines[1] == ""
    assert lines[2] == HEADER
    assert lines[3] == "|---|---|---|---|---|---|---|---|---|---|"
    assert lines[4] == (
        "| test_slow | cuda-graph | 0.561 ms | 5.3% | 0.512 ms | +9.6% | 2e-06 | regressed "
        "| - | - |"
    )
    assert "1 regressed, 1 improved, 1 unstable, 1 new, 1 ok" in lines
    assert lines[-1] == "- test_noisy: unstable: too noisy"
    assert text.endswith("\n")


def test_markdown_escapes_pipes_and_names_an_unknown_device() -> None:
    text = report.markdown([result("test_x[a|b]")], {})
    assert text.startswith("### gpubench: unknown device\n")
    assert "| test_x[a\\|b] |" in text


def test_json_document() -> None:
    results = mixed_results()
    document = report.json_document(results, {"name": "Fake"}, {"threshold": 0.05})
    assert document["device"] == {"name": "Fake"}
    assert document["settings"] == {"threshold": 0.05}
    first = document["results"][0]
    assert first["test"] == "test_slow"
    assert first["verdict"]["status"] == REGRESSED
    assert first["summary"]["samples"] == 5
    assert first["summary"]["median_ms"] == pytest.approx(0.561)
    assert {"gbs", "tflops", "peak_share", "samples_ms", "key", "timer"} <= set(first)
    assert json.loads(json.dumps(document)) == document


# --- results --------------------------------------------------------------------------------


def test_result_round_trips_through_a_dict() -> None:
    original = result(verdict=regressed(), baseline_ms=0.512, throttled=["hw-thermal"])
    data = json.loads(json.dumps(original.to_dict()))
    assert Result.from_dict(data) == original


def test_result_rounds_samples_to_six_significant_digits() -> None:
    data = result(samples=(0.123456789, 1234.56789)).to_dict()
    assert data["samples_ms"] == [0.123457, 1234.57]


def test_baseline_entry_omits_empty_optional_fields() -> None:
    entry = result(date="2025-01-01T00:00:00+00:00").baseline_entry()
    assert entry["timer"] == "cuda-graph"
    assert entry["samples_ms"] == [0.5, 0.6, 0.561, 0.55, 0.58]
    assert entry["median_ms"] == 0.561
    assert entry["warmup"] == 6 and entry["calls_per_sample"] == 100
    assert not {"group", "bytes", "flops", "extra_info", "note"} & set(entry)
    full = result(group="g", bytes=1.0, flops=2.0, extra_info={"k": 1}, note="n").baseline_entry()
    assert (full["group"], full["bytes"], full["flops"]) == ("g", 1.0, 2.0)
    assert (full["extra_info"], full["note"]) == ({"k": 1}, "n")


# --- the footer -----------------------------------------------------------------------------


def test_footer_without_measurements() -> None:
    assert report.footer([], Settings()) == "gpubench: no measurements (threshold 5%)"


def test_footer_counts_verdicts_and_gives_the_corrected_level() -> None:
    results = [
        result("a", verdict=Verdict(OK, 1.0, 0.99, 1.01, 0.5, 0.5, 0.005)),
        result("b", verdict=regressed()),
        result("c"),
    ]
    assert report.footer(results, Settings(threshold=0.1)) == (
        "gpubench: 1 regressed, 1 new, 1 ok (threshold 10%, alpha 0.01 corrected to 0.005)"
    )


# --- what extra_info may hold ---------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        "\x00",
        True,
        10**400,
        -0.0,
        [1, "a", None, [2.5, {"k": False}]],
        (4096, 4096),
        {"nested": {"deeper": [{}]}},
    ],
)
def test_plain_data_passes(value: object) -> None:
    assert plain_data_problem(value, "x") == ""


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


@pytest.mark.parametrize(
    "value, problem",
    [
        (float("nan"), "x is nan, not a finite number"),
        ([1, -float("inf")], "x[1] is -inf, not a finite number"),
        ({"a": {"b": object()}}, "x['a']['b'] is of type object, not a string, finite number, "),
        ({1: "one"}, "x has the key 1, not a string"),
        ({Unprintable(): 1}, "x has the key <Unprintable>, not a string"),
        ({"s": {1, 2}}, "x['s'] is of type set, not"),
        (b"bytes", "x is of type bytes, not"),
        (Unprintable(), "x is of type Unprintable, not"),
    ],
)
def test_plain_data_problem_names_the_place(value: object, problem: str) -> None:
    assert plain_data_problem(value, "x").startswith(problem)


def test_plain_data_problem_stops_at_deep_or_circular_nesting() -> None:
    circular: list[object] = []
    circular.append(circular)
    assert plain_data_problem(circular, "x").endswith("is nested deeper than 32 levels")
