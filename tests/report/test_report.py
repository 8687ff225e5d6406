"""Unit tests of the report (report/summary.py) and the records it reads (core/records.py):
messages, the table, Markdown and JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import pytest
from support import measurement

from pytest_gpubench.core.kernels import Launch
from pytest_gpubench.core.records import (
    Judgement,
    Result,
    SessionInfo,
    SessionRecord,
    Status,
    Verdict,
    summarize,
)
from pytest_gpubench.core.samples import TIME_UNITS, time_text, time_unit
from pytest_gpubench.core.settings import MeasureSettings
from pytest_gpubench.report import summary as report
from pytest_gpubench.store.files import plain_data_problem

HEADER = (
    "| test | timer | median | noise | spread | baseline | sessions | change | gate | verdict "
    "| GB/s | % peak |"
)
SESSION = "20260101T000000Z-abcdef"


def judged(
    status: Status,
    ratio: float,
    *,
    bar: float = 0.041,
    gateable: float = 0.032,
    tau: float = 0.004,
    history: int = 5,
    against: str = "history",
    current: int = 1,
    noisy: bool = False,
    reason: str = "",
) -> Judgement:
    return Judgement(
        status,
        ratio=ratio,
        ratio_low=ratio - 0.01,
        ratio_high=ratio + 0.01,
        bar=bar,
        gateable=gateable,
        noisy=noisy,
        tau=tau,
        prior_share=0.3,
        against=against,
        history_sessions=history,
        current_sessions=current,
        reason=reason,
    )


def result(
    test: str = "test_x",
    samples: tuple[float, ...] = (0.5, 0.6, 0.561, 0.55, 0.58),
    judgement: Judgement | None = None,
    reference_ms: float | None = None,
    **extra: Any,
) -> Result:
    """A result; ``extra`` sets fields of its measurement or of its verdict (by name), and
    ``confirmations`` the records of its sessions in fresh processes."""
    verdict_fields = {f.name for f in dataclasses.fields(Verdict)}
    verdict: dict[str, Any] = dict(
        status=Status.NEW if judgement is None else judgement.status,
        judgement=judgement,
        reason="no baseline" if judgement is None else judgement.reason,
        reference_ms=reference_ms,
        history_sessions=0 if judgement is None else judgement.history_sessions,
    )
    verdict.update({k: v for k, v in extra.items() if k in verdict_fields})
    measured: dict[str, Any] = dict(
        key=f"tests/test_k.py::{test}",
        test=test,
        timer="cuda-graph",
        samples_ms=tuple(samples),
        warmup=6,
        calls_per_sample=100,
        threshold=0.05,
        session=SESSION,
    )
    measured.update({k: v for k, v in extra.items() if k not in verdict_fields})
    confirmations = measured.pop("confirmations", ())
    for name in ("throttled", "clocks_mhz"):
        if name in measured:
            measured[name] = tuple(measured[name])
    m = measurement(**measured)
    return Result(dataclasses.replace(m, confirmations=tuple(confirmations)), Verdict(**verdict))


def regressed(ratio: float = 1.0957, **kw: Any) -> Judgement:
    reason = f"slower by {ratio - 1:.1%} vs history of 5 session(s); gate 5.0%"
    return judged(Status.REGRESSED, ratio, reason=reason, **kw)


def improved(ratio: float = 0.8, **kw: Any) -> Judgement:
    return judged(Status.IMPROVED, ratio, reason="faster by 20.0% vs history of 5", **kw)


def record(median_ms: float, session: str = "child-session") -> SessionRecord:
    return SessionRecord(session, median_ms, 20, 0.001, 100)


# --- formatting numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ms, text",
    [(None, "-"), (0.512, "512 µs"), (12.0, "12.0 ms"), (0.1, "100 µs"), (0.0512, "51.2 µs")],
)
def test_format_time(ms: float | None, text: str) -> None:
    assert report.format_time(ms) == text


@pytest.mark.parametrize(
    "ms, text",
    [
        (19.919, "19.9 ms"),  # issue 19: 19.919 ms, 0.106 ms and 17 µs in one table
        (0.106, "106 µs"),
        (0.017, "17.0 µs"),
        (0.032, "32.0 µs"),
        (1.0, "1.00 ms"),
        (0.99992, "1.00 ms"),  # rounded up into the next unit: not "1.00e+03 µs"
        (0.9994, "999 µs"),
        (5e-4, "500 ns"),
        (1e-6, "1.00 ns"),
        (1234.5, "1.23 s"),
        (1e6, "1000 s"),  # past the largest unit: no exponent
    ],
)
def test_one_time_format_for_tables_and_messages(ms: float, text: str) -> None:
    """Three significant figures in the unit of the time's size, wherever a time is shown:
    the tables (format_time) and the messages (time_text) print the same."""
    assert time_text(ms) == text
    assert report.format_time(ms) == text


def test_the_unit_of_a_time_is_the_largest_in_which_it_reads_1_or_more() -> None:
    """``time_unit`` stops at the first unit the time is under 1 in (each next is larger):
    the unit that trying every unit gives, at and about each unit's edges."""

    def every_unit(ms: float) -> tuple[str, float]:
        found = TIME_UNITS[0]
        for name, size in TIME_UNITS:
            value = abs(ms / size)
            if value >= 1 or (value >= 0.999 and abs(float(f"{ms / size:.3g}")) >= 1):
                found = (name, size)
        return found

    edges = [size * f for _, size in TIME_UNITS for f in (0.9985, 0.999, 0.99949, 0.9995, 1)]
    times = [*edges, *(10.0**e for e in range(-12, 9)), 1e-300, 1e300, 0.0]
    for ms in times + [-t for t in times]:
        assert time_unit(ms) == every_unit(ms)


@pytest.mark.parametrize(
    "value, text",
    [(None, "-"), (0.041, "4.1%"), (0.0004, "0.0%"), (0.25, "25.0%"), (math.inf, "-")],
)
def test_format_share(value: float | None, text: str) -> None:
    assert report.format_share(value) == text


@pytest.mark.parametrize(
    "ratio, text",
    [(None, "-"), (1.0957, "+9.6%"), (1.2, "+20.0%"), (0.9, "-10.0%"), (1.0, "+0.0%")],
)
def test_format_change(ratio: float | None, text: str) -> None:
    assert report.format_change(ratio) == text


# --- failure messages -----------------------------------------------------------------------


def test_failure_message_of_a_regression() -> None:
    r = result(judgement=regressed(), reference_ms=0.512)
    assert r.measurement.summary.median_ms == pytest.approx(0.561)
    assert report.failure_message(r) == (
        "test_x regressed: 512 µs -> 561 µs (+9.6%; gate 5.0%, 1 session against the "
        "history of 5, threshold 5%)"
    )


def test_failure_message_of_a_confirmed_regression_gives_the_median_of_its_sessions() -> None:
    r = result(
        judgement=regressed(1.06, current=3),
        reference_ms=0.5,
        confirmations=(record(0.53), record(0.531, "other")),
    )
    assert r.measurement.median_ms == pytest.approx(0.531)  # of 0.561, 0.53 and 0.531
    assert report.failure_message(r) == (
        "test_x regressed: 500 µs -> 531 µs (+6.0%; gate 5.0%, 3 sessions against the "
        "history of 5, threshold 5%)"
    )


def test_failure_message_of_an_improvement_says_how_to_refresh() -> None:
    r = result(samples=(0.4, 0.41, 0.39), judgement=improved(), reference_ms=0.5, threshold=0.075)
    assert report.failure_message(r) == (
        # the gate never under the threshold (it read "bar 3.9%" under 7.5%: issue 45)
        "test_x improved: 500 µs -> 400 µs (-20.0%; gate 7.5%, 1 session against the "
        "history of 5, threshold 7.5%); refresh the baseline with --gpubench-save "
        "--gpubench-accept"
    )


def test_failure_message_in_microseconds() -> None:
    r = result(samples=(0.05, 0.06, 0.055), judgement=regressed(1.1), reference_ms=0.05)
    assert report.failure_message(r) == (
        "test_x regressed: 50.0 µs -> 55.0 µs (+10.0%; gate 5.0%, 1 session against the history "
        "of 5, threshold 5%)"
    )


def test_failure_message_of_a_noisy_test_says_what_it_can_gate() -> None:
    """One number, the gate, where it printed a bar and a gate that disagreed ("bar 25.6%;
    noisy: can gate >= 10%", issue 45)."""
    j = regressed(1.3, bar=0.256, gateable=0.186, noisy=True)
    r = result(samples=(0.65, 0.65, 0.65), judgement=j, reference_ms=0.5)
    assert report.failure_message(r) == (
        "test_x regressed: 500 µs -> 650 µs (+30.0%; gate 18.6%, 1 session against the "
        "history of 5, threshold 5%)"
    )
    # The table's gate column says the same number (it said 19% beside 18.6%).
    assert "18.6%" in report.row(r)


def test_failure_message_against_the_anchor_names_the_epoch() -> None:
    r = result(judgement=regressed(against="anchor"), reference_ms=0.512)
    assert report.failure_message(r) == (
        "test_x regressed: 512 µs -> 561 µs (+9.6%; gate 5.0%, 1 session against the "
        "anchor of its epoch, threshold 5%)"
    )


def test_failure_message_lists_kernel_changes_and_the_timer_that_judged() -> None:
    r = result(
        judgement=regressed(),
        reference_ms=0.512,
        timer="cuda-event",
        note="graph capture failed (RuntimeError: sync)",
        kernel_changes=("k grid (64,1,1) -> (32,1,1)", "1 kernel added: k2"),
    )
    assert report.failure_message(r).splitlines() == [
        "test_x regressed: 512 µs -> 561 µs (+9.6%; gate 5.0%, 1 session against the "
        "history of 5, threshold 5%)",
        "  kernels: k grid (64,1,1) -> (32,1,1); 1 kernel added: k2",
        "  timed by cuda-event: graph capture failed (RuntimeError: sync)",
    ]
    assert report.failure_message(result(judgement=regressed(), timer="wall")).endswith(
        "\n  timed by wall"
    )


def test_failure_message_of_an_incomparable_baseline_is_its_reason() -> None:
    reason = (
        "baseline timed by wall, now by cuda-graph: times of different timers are never "
        "compared; accept the new timer with --gpubench-save"
    )
    r = result(status=Status.INCOMPARABLE, reason=reason, kernel_changes=("1 kernel added: k2",))
    # the kernel changes of an incomparable result are part of its reason, not repeated
    assert report.failure_message(r) == f"test_x incomparable: {reason}"


# --- the summary table ----------------------------------------------------------------------


def mixed_results() -> list[Result]:
    return [
        result("test_ok", judgement=judged(Status.OK, 1.0), reference_ms=0.56),
        result("test_new"),
        result("test_slow", judgement=regressed(), reference_ms=0.512),
        result("test_fast", judgement=improved(), reference_ms=0.7),
        result(
            "test_noisy",
            judgement=judged(
                Status.OK,
                1.02,
                bar=0.12,
                gateable=0.186,
                tau=0.03,
                noisy=True,
                reason="slower by 2.0% vs history of 5 session(s); gate 18.6% (over the 5% "
                "threshold)",
            ),
            reference_ms=0.55,
        ),
        result(
            "test_few",
            status=Status.UNSTABLE,
            reason="2 samples in the budget: too few to judge, raise --gpubench-budget-s "
            "(judging needs 3)",
        ),
        result(
            "test_other",
            status=Status.INCOMPARABLE,
            reason="baseline timed by wall, now by cuda-graph",
        ),
    ]


def test_sort_results_puts_what_needs_attention_first() -> None:
    names = [r.test for r in report.sort_results(mixed_results())]
    assert names == [
        "test_slow",
        "test_fast",
        "test_other",
        "test_few",
        "test_new",
        "test_noisy",
        "test_ok",
    ]


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
        "spread",
        "baseline",
        "sessions",
        "change",
        "gate",
        "verdict",
        "GB/s",
        "%",
        "peak",
    ]
    assert set(lines[1]) == {"-", " "}
    assert len(lines) == 2 + 7
    slow = lines[2]
    assert slow.startswith("test_slow   cuda-graph")
    # median, noise (IQR / median), spread (tau), baseline, sessions, change, gate
    assert slow.split()[2:] == [
        "561",
        "µs",
        "5.3%",
        "0.4%",
        "512",
        "µs",
        "5",
        "+9.6%",
        "5.0%",
        "regressed",
        "-",
        "-",
    ]
    noisy = next(line for line in lines if line.startswith("test_noisy"))
    assert noisy.split()[5:] == [
        "3.0%",
        "550",
        "µs",
        "5",
        "+2.0%",
        "18.6%",
        "ok",
        "(gate",
        ">",
        "5%)",
    ] + [
        "-",
        "-",
    ]
    new = next(line for line in lines if line.startswith("test_new"))
    assert new.split()[5:] == ["-", "-", "-", "-", "-", "new", "-", "-"]
    assert [line.split()[0] for line in lines[2:]] == [
        r.test for r in report.sort_results(mixed_results())
    ]
    assert all(line == line.rstrip() for line in lines)
    # numbers are right-aligned: every row ends in the same column as the header's last cell
    assert len({len(line) for line in lines[2:]}) == 1


def test_table_marks_throttled_and_noisy_results() -> None:
    lines = report.table_lines([result(throttled=["hw-thermal"])])
    assert "new (throttled)" in lines[2]
    noisy = judged(Status.OK, 1.0, gateable=0.09, noisy=True)
    assert report.verdict_label(result(judgement=noisy, throttled=["hw-thermal"])) == (
        "ok (gate > 5%) (throttled)"
    )
    assert report.verdict_label(result(judgement=judged(Status.OK, 1.0))) == "ok"


def test_notes_explain_what_a_reader_must_know() -> None:
    results = mixed_results() + [result("test_hot", throttled=["hw-thermal", "sw-thermal"])]
    results.append(result("test_event", note="graph capture failed (RuntimeError: sync)"))
    results.append(
        result(
            "test_confirmed",
            judgement=judged(Status.OK, 1.0, current=3),
            reference_ms=0.56,
            confirmations=(record(0.56), record(0.5612)),
            kernel_changes=("k grid (64,1,1) -> (32,1,1)",),
        )
    )
    assert report.notes(results) == [
        "test_slow: regressed: slower by 9.6% vs history of 5 session(s); gate 5.0%",
        "test_fast: improved: faster by 20.0% vs history of 5",
        "test_other: incomparable: baseline timed by wall, now by cuda-graph",
        "test_few: unstable: 2 samples in the budget: too few to judge, raise "
        "--gpubench-budget-s (judging needs 3)",
        "test_event: timed by cuda-graph: graph capture failed (RuntimeError: sync)",
        "test_hot: measured while throttled (hw-thermal, sw-thermal)",
        "test_confirmed: kernels: k grid (64,1,1) -> (32,1,1)",
        "test_confirmed: confirmed in 2 fresh processes (medians 560 µs, 561 µs)",
        "test_noisy: ok: slower by 2.0% vs history of 5 session(s); gate 18.6% (over the 5% "
        "threshold)",
    ]


def test_notes_name_the_launch_gaps_of_a_graph_mostly_idle() -> None:
    kernels = (Launch("k", share=0.75), Launch("void ns::copy<float>(float*)", share=0.25))
    busy = result(samples=(1.0, 1.0, 1.0), device_ms=0.9, kernels=kernels)
    idle = result(samples=(1.0, 1.0, 1.0), device_ms=0.5, kernels=kernels)
    assert busy.measurement.launch_gap_share == pytest.approx(0.1)
    assert report.notes([busy]) == []
    assert report.notes([idle]) == [
        "test_x: launch gaps are 50% of the graph time (kernels 500 µs of 1.00 ms per call: "
        "2 launches (k 75%, copy 25%))"
    ]
    # only a graph replay has launch gaps in its time
    assert result(timer="cupti", device_ms=0.5).measurement.launch_gap_share is None


def test_the_kernel_time_of_a_graph_replay_is_reported_with_the_graph_time_beside_it() -> None:
    """cupti-graph gates a replay's kernel time; its graph time per call is not dropped."""
    kernels = (Launch("k", share=1.0),)
    gated = result(samples=(0.001, 0.001, 0.001), timer="cupti-graph", graph_ms=0.0015)
    gated = dataclasses.replace(
        gated, measurement=dataclasses.replace(gated.measurement, kernels=kernels)
    )
    assert gated.measurement.launch_gap_share == pytest.approx(1 / 3)
    assert report.notes([gated]) == [
        "test_x: launch gaps are 33% of the graph time per call (1.50 µs): its kernel time is "
        "the number (1 launch (k 100%))"
    ]
    data = gated.to_dict()
    assert data["graph_ms"] == 0.0015
    assert Result.from_dict(data).measurement.graph_ms == 0.0015


def test_counts() -> None:
    assert report.counts(mixed_results()) == (
        "1 regressed, 1 improved, 1 incomparable, 1 unstable, 1 new, 2 ok"
    )
    assert report.counts([result(), result()]) == "2 new"
    assert report.counts([]) == ""


# --- bandwidth ------------------------------------------------------------------------------


def test_bandwidth_and_share_of_peak() -> None:
    r = result(samples=(1.0, 1.0, 1.0), bytes=2e9, flops=4e12, peak_gbs=4000.0)
    assert r.measurement.gbs == pytest.approx(2000.0)
    assert r.measurement.tflops == pytest.approx(4000.0)
    assert r.measurement.peak_share == pytest.approx(0.5)
    assert report.row(r)[-2:] == ["2000.0", "50%"]
    bare = result()
    assert (bare.measurement.gbs, bare.measurement.tflops, bare.measurement.peak_share) == (
        None,
        None,
        None,
    )
    assert report.row(bare)[-2:] == ["-", "-"]


def test_declared_flops_show_as_tflops_in_the_table_markdown_and_json() -> None:
    """A TFLOP/s column where any test declares its flops (issue 18), "-" for the others;
    none where no test does."""
    flops = result(samples=(0.5, 0.5, 0.5), flops=1e9)  # 1 GFLOP in 0.5 ms: 2 TFLOP/s
    plain = result(samples=(1.0, 1.0, 1.0))
    header, rule, *rows = report.table_lines([flops, plain])
    assert header.split()[-1] == "TFLOP/s" and len(rule.split()) == len(report.COLUMNS) + 1
    assert sorted(r.split()[-1] for r in rows) == ["-", "2"]
    text = report.markdown([flops, plain], {"name": "GPU"})
    assert "| % peak | TFLOP/s |" in text and " | 2 |" in text
    document = report.json_document([flops], {"name": "GPU"}, {})
    assert document["results"][0]["tflops"] == pytest.approx(2.0)
    assert "TFLOP/s" not in report.table_lines([plain])[0]
    assert "TFLOP/s" not in report.markdown([plain], {"name": "GPU"})


def test_bandwidth_above_the_measured_peak_is_no_share_of_it() -> None:
    """1 M floats added on an H200 read 5074 GB/s against a 4229 GB/s copy peak: the data
    stayed in L2. The table says so instead of printing 120% of peak."""
    r = result(samples=(1.0, 1.0, 1.0), bytes=5.074e9, peak_gbs=4229.0)
    assert r.measurement.above_peak and r.measurement.peak_share is None
    assert report.row(r)[-2:] == ["5074.0", "L2"]
    [line] = [n for n in report.notes([r]) if "GB/s" in n]
    assert line.endswith(
        "5074 GB/s is above the measured copy bandwidth (4229 GB/s): its data stays in L2 "
        "between calls, so no % of peak"
    )
    at_peak = result(samples=(1.0, 1.0, 1.0), bytes=4.229e9, peak_gbs=4229.0)
    assert not at_peak.measurement.above_peak and at_peak.measurement.peak_share == pytest.approx(
        1.0
    )


def test_a_bandwidth_above_the_peak_never_prints_as_the_peak() -> None:
    """Issue 19: "5 GB/s is above the measured copy bandwidth (5 GB/s)"."""
    r = result(samples=(1.0, 1.0, 1.0), bytes=5.4e6, peak_gbs=5.1)
    [line] = [n for n in report.notes([r]) if "GB/s" in n]
    assert "5.4 GB/s is above the measured copy bandwidth (5.1 GB/s)" in line
    close = result(samples=(1.0, 1.0, 1.0), bytes=5.0004e6, peak_gbs=5.0001)
    [line] = [n for n in report.notes([close]) if "GB/s" in n]
    assert "5.0004 GB/s is above the measured copy bandwidth (5.0001 GB/s)" in line
    assert report.distinct_rates(5074.2, 4229.0) == ("5074", "4229")  # no decimals needed


def test_bandwidth_of_a_confirmed_result_uses_the_median_of_its_sessions() -> None:
    r = result(samples=(1.0, 1.0, 1.0), bytes=2e9, confirmations=(record(2.0), record(2.0)))
    assert r.measurement.median_ms == 2.0
    assert r.measurement.gbs == pytest.approx(1000.0)


# --- Markdown and JSON ----------------------------------------------------------------------


def test_markdown() -> None:
    text = report.markdown(mixed_results(), {"name": "NVIDIA H100 80GB HBM3"})
    lines = text.splitlines()
    assert lines[0] == "### gpubench: NVIDIA H100 80GB HBM3"
    assert lines[1] == ""
    assert lines[2] == HEADER
    assert lines[3] == "|---|---|---|---|---|---|---|---|---|---|---|---|"
    assert lines[4] == (
        "| test_slow | cuda-graph | 561 µs | 5.3% | 0.4% | 512 µs | 5 | +9.6% | 5.0% "
        "| regressed | - | - |"
    )
    assert "1 regressed, 1 improved, 1 incomparable, 1 unstable, 1 new, 2 ok" in lines
    assert lines[-1] == (
        "- test_noisy: ok: slower by 2.0% vs history of 5 session(s); gate 18.6% (over the 5% "
        "threshold)"
    )
    assert text.endswith("\n")
    assert report.markdown(mixed_results(), {"name": "x"}, limit=10**6) == report.markdown(
        mixed_results(), {"name": "x"}
    )


def test_markdown_escapes_pipes_and_names_an_unknown_device() -> None:
    text = report.markdown([result("test_x[a|b]")], {})
    assert text.startswith("### gpubench: unknown device\n")
    assert "| test_x[a\\|b] |" in text


def test_markdown_cut_to_a_limit_keeps_regressions_first_and_says_what_was_cut() -> None:
    results = [result(f"test_{i:04d}") for i in range(2000)]
    results.insert(1234, result("test_slow", judgement=regressed(), reference_ms=0.512))
    full = report.markdown(results, {"name": "Fake"})
    limit = 20_000
    assert len(full.encode()) > limit
    cut = report.markdown(results, {"name": "Fake"}, limit=limit)
    assert len(cut.encode()) <= limit
    lines = cut.splitlines()
    assert lines[2] == HEADER
    assert lines[4].startswith("| test_slow | cuda-graph | ")
    kept = [line for line in lines if line.startswith("| test_")]
    assert 1 < len(kept) < len(results)
    assert (
        f"_{len(results) - len(kept)} more rows and the notes were cut to stay under GitHub's "
        "summary limit; the JSON report has them all._"
    ) in lines
    assert lines[-1] == "1 regressed, 2000 new"  # the counts are of all results


def test_json_document() -> None:
    results = mixed_results()
    session = {"id": SESSION, "date": "2026-01-01T00:00:00+00:00"}
    document = report.json_document(results, {"name": "Fake"}, {"threshold": 0.05}, session)
    assert document["device"] == {"name": "Fake"}
    assert document["settings"] == {"threshold": 0.05}
    assert document["session"] == session
    first = document["results"][0]
    assert first["test"] == "test_slow"
    assert first["status"] == "regressed"
    assert first["judgement"]["status"] == "regressed"
    assert first["judgement"]["bar"] == 0.041
    assert first["summary"]["samples"] == 5
    assert first["summary"]["median_ms"] == pytest.approx(0.561)
    assert first["median_ms"] == pytest.approx(0.561)
    assert first["reference_ms"] == 0.512
    assert first["session"] == SESSION
    assert {"gbs", "tflops", "peak_share", "samples_ms", "key", "timer", "kernels"} <= set(first)
    assert json.loads(json.dumps(document)) == document
    assert "session" not in report.json_document(results, {}, {})


def test_json_text_writes_standard_json_with_non_finite_numbers_as_null() -> None:
    text = report.json_text({"a": [1.0, math.inf, {"b": -math.inf, "c": math.nan}], "d": (1,)})
    assert json.loads(text) == {"a": [1.0, None, {"b": None, "c": None}], "d": [1]}
    assert text.endswith("\n")


# --- results --------------------------------------------------------------------------------


def test_result_round_trips_through_a_dict() -> None:
    original = result(
        judgement=regressed(current=3),
        reference_ms=0.512,
        throttled=["hw-thermal"],
        kernels=(Launch("k", grid=(64, 1, 1), block=(128, 1, 1), share=1.0),),
        kernel_changes=("k grid (32,1,1) -> (64,1,1)",),
        confirmations=(record(0.56), record(0.57, "other")),
        session_infos={"other": SessionInfo("2026-01-01T00:00:00+00:00", "abc", "host-x")},
        history_sessions=5,
        family=3,
        gpu="cuda:0 GPU-1234",
        device_ms=0.5,
        extra_info={"shape": [4096, 4096]},
    )
    data = json.loads(json.dumps(original.to_dict(passed=False)))
    assert (data["status"], data["passed"]) == ("regressed", False)
    back = Result.from_dict(data)
    assert back == original
    assert back.status is Status.REGRESSED and back.verdict.judgement is not None
    assert back.verdict.judgement.status is Status.REGRESSED


def test_the_result_files_fields_are_release_0_2s() -> None:
    """The JSON report's entry of a result keeps the field names of release 0.2 (and
    gpubench compare reads such files), whatever records hold them now."""
    fields = {
        "key", "test", "timer", "samples_ms", "warmup", "calls_per_sample", "threshold",
        "session", "group", "note", "throttled", "clocks_mhz", "bytes", "flops", "peak_gbs",
        "extra_info", "date", "git_commit", "gpu", "kernels", "device_ms", "status",
        "judgement", "reason", "kernel_changes", "reference_ms", "history_sessions", "family",
        "confirmations", "session_infos", "passed", "costs", "accepted",
    }  # fmt: skip
    fields |= {"baseline_binary", "previous_ratio", "same_kernels"}  # issue 16: binaries
    fields |= {"graph_ms", "caveat"}  # issue 16: graph time beside kernel time; host caveats
    fields |= {"against"}  # issue 17: both sides of a run against a revision
    fields |= {"versus"}  # issue 17: what a ratio to a reference function compares
    fields |= {"cached_gbs", "cache_bytes"}  # issue 18: the copy rates of the physical floor
    fields |= {"peak_bytes", "trace", "reference_kernels"}  # issue 18: memory and evidence
    fields |= {"energy", "reference_trace"}  # issue 18: energy; a ratio's reference trace
    fields |= {"matmul_tflops", "matmul_dtype"}  # issue 18: the flops floor
    fields |= {"ncu", "reference_ncu"}  # issue 18: Nsight Compute in the evidence
    fields |= {"beside_ms", "beside"}  # issue 44: kernel time beside time per call, judged
    fields |= {"cpu_wait"}  # issue 45: a loaded host's share of time waiting for a CPU
    fields |= {"spoils"}  # issue 45: what a save refused to append, and why
    assert set(result(judgement=regressed()).to_dict()) == fields


def test_a_result_is_frozen_and_a_confirmation_makes_a_new_measurement() -> None:
    r = result(samples=(1.0, 1.0, 1.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.measurement.note = "changed"  # type: ignore[misc]
    child = dataclasses.replace(
        r.measurement,
        samples_ms=(2.0, 2.1, 1.9),
        session="child",
        session_infos={"child": SessionInfo("2026-01-01T00:00:00+00:00")},
    )
    confirmed = r.measurement.with_confirmations([child])
    assert confirmed.sessions == (r.measurement.record, child.record)
    assert confirmed.record.median_ms == 1.0 and child.record.median_ms == 2.0
    assert confirmed.samples_ms == (1.0, 1.0, 1.0) and "child" in confirmed.session_infos
    assert r.measurement.sessions == (r.measurement.record,)  # the original is unchanged


def test_result_rounds_samples_to_six_significant_digits() -> None:
    data = result(samples=(0.123456789, 1234.56789)).to_dict()
    assert data["samples_ms"] == [0.123457, 1234.57]


def test_result_record_is_this_sessions_summary() -> None:
    r = result(samples=(1.0, 2.0, 3.0, 4.0, 100.0), calls_per_sample=7)
    rec = r.measurement.sessions[0]
    assert (rec.session, rec.median_ms, rec.n, rec.calls_per_sample) == (SESSION, 3.0, 5, 7)
    assert rec.se_log is not None and rec.se_log > 0
    assert (
        result(samples=(1.0,)).measurement.sessions[0].se_log is None
    )  # one sample: its error is unknown
    confirmed = result(confirmations=(record(0.5),))
    assert confirmed.measurement.sessions == (confirmed.measurement.sessions[0], record(0.5))


def test_summarize_reports_order_statistics_and_mean() -> None:
    s = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (s.n, s.median_ms, s.mean_ms, s.min_ms) == (5, 3.0, 3.0, 1.0)
    assert (s.q1_ms, s.q3_ms, s.iqr_ms) == (2.0, 4.0, 2.0)
    assert s.noise == pytest.approx(2.0 / 3.0)


def test_summary_noise_is_infinite_for_a_zero_median() -> None:
    assert summarize([0.0, 0.0, 0.0]).noise == math.inf


# --- the footer -----------------------------------------------------------------------------


def test_footer_without_measurements() -> None:
    assert report.footer([], MeasureSettings(), 1) == (
        "gpubench: no measurements (threshold 5%, alpha 0.01)"
    )


def test_footer_counts_verdicts_and_gives_the_levels_and_the_family() -> None:
    results = [
        result("a", judgement=judged(Status.OK, 1.0)),
        result("b", judgement=regressed()),
        result("c"),
    ]
    measure = MeasureSettings(threshold=0.1, alpha=0.05)
    assert report.footer(results, measure, 3) == (
        "gpubench: 1 regressed, 1 new, 1 ok (threshold 10%, alpha 0.05 over 3 measurements)"
    )


def test_footer_takes_the_family_from_the_results() -> None:
    # An xdist controller collects no tests: the family travels with each result.
    results = [result("a", family=54), result("b", family=54)]
    assert report.footer(results, MeasureSettings(), 1).endswith(
        "over 54 measurements known at collection)"
    )


def test_footer_says_what_its_family_counts_where_it_is_not_the_results() -> None:
    """Issue 19: "alpha 0.01 over 18 measurements" where 10 were measured (the family counts
    the collected tests, some of which skipped before measuring)."""
    results = [result(f"t{i}", family=18) for i in range(10)]
    assert report.footer(results, MeasureSettings(), 18) == (
        "gpubench: 10 new (threshold 5%, alpha 0.01 over 18 measurements known at collection)"
    )
    assert report.footer(results, MeasureSettings(), 10, "in both files").endswith(
        "over 18 measurements in both files)"
    )
    same = [result(f"t{i}", family=10) for i in range(10)]
    assert report.footer(same, MeasureSettings(), 10).endswith("over 10 measurements)")


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


def test_time_unit_formats_only_what_rounding_may_move() -> None:
    """The unit is the largest whose value, rounded to three figures, is at least 1: the
    values around each unit's edge (999.4 to 999.6 of the unit below, and their nearest
    floats) as formatting every one tells."""
    import random

    def formatted(ms: float) -> tuple[str, float]:
        unit, scale = TIME_UNITS[0]
        for name, size in TIME_UNITS:
            if abs(float(f"{ms / size:.3g}")) >= 1:
                unit, scale = name, size
        return unit, scale

    rng = random.Random(0)
    values = [10 ** rng.uniform(-8, 8) for _ in range(2000)]
    for _, size in TIME_UNITS:
        for edge in (0.999, 0.9994, 0.9995, 0.9996, 1.0):
            x = edge * size
            values += [x, math.nextafter(x, 0), math.nextafter(x, math.inf)]
    values += [0.0, -0.0, math.inf, -math.inf, math.nan, -999.6e-3, -1.0]
    for ms in values:
        assert time_unit(ms) == formatted(ms), ms


def test_aligned_pads_column_by_column_as_cell_by_cell() -> None:
    def cell_by_cell(rows: list[list[str]], left: int, last_left: bool) -> list[str]:
        widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
        last = len(widths) - 1 if last_left else len(widths)
        pads = [str.ljust if j < left or j == last else str.rjust for j in range(len(widths))]
        lines = [
            "  ".join([pad(c, w) for pad, c, w in zip(pads, cells, widths, strict=True)]).rstrip()
            for cells in rows
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        return lines

    table = [["test", "a", "median", "flags"], ["t.py::x", "bb", "1.00 ms", ""]]
    table += [["t", "", "17 µs", "noisy"]]
    for rows in (table, [], [[]], [[], []], table[:1]):
        for left in (0, 1, 2):
            for last_left in (False, True):
                assert report.aligned(rows, left, last_left) == cell_by_cell(rows, left, last_left)
