"""Both sides of a run against a revision (``--gpubench-against``) in the reports: the
terminal table, JSON, Markdown, the step summary and pytest-benchmark's JSON, and
``gpubench compare AB.json``.

The formatting is tested on records judged by the pair rule itself (``ab.paired_verdict``);
the run on a generated git repository whose working tree makes two functions slower, by the
fake timer's ``fake_factor`` (8% and 3%), so both medians and the change follow from what
was planted."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
from support import FAKE_NAME, NO_CONFIRM, commit, git, output

from pytest_gpubench import cli
from pytest_gpubench.core.records import (
    Costs,
    Floors,
    Measurement,
    Paired,
    Result,
    SessionRecord,
    Status,
    Verdict,
)
from pytest_gpubench.core.settings import MeasureSettings
from pytest_gpubench.judge.gate import Gate
from pytest_gpubench.judge.pairs import SAME_LEVEL
from pytest_gpubench.report import benchjson
from pytest_gpubench.report import summary as report
from pytest_gpubench.versus import ab

pytest_plugins = ["pytester"]

# The structure these tests were written for (lockstep has its own: test_lockstep.py).
pytestmark = pytest.mark.usefixtures("processes_pairing")

SHA = "0123456789abcdef0123456789abcdef01234567"
DEVICE = {"name": "NVIDIA H100 80GB HBM3"}
# The run's settings as a file records them: 3 pairs, no batch for the unsure.
SETTINGS = {"threshold": 0.05, "alpha": 0.01, "pairs": 3, "confirm": 0}
DESIGN = ab.design_of(3, more=False)
# Within-session noise of about 0.3% around a session's median.
SPREAD = [(-1) ** i * 0.002 * (i % 5) for i in range(30)]
PAIRED_HEADER = "| " + " | ".join(report.PAIRED_COLUMNS) + " |"
LEGEND = "base: main (01234567); head: the working tree; change: head / base "
CORRECTED = "[its interval, corrected for the tests and looks]"
WITH_SAME = (
    "[its interval, corrected for the tests and looks; for same: its 90% interval, within "
    "the threshold]"
)


def records(side: str, medians: list[float]) -> tuple[SessionRecord, ...]:
    return tuple(SessionRecord(f"{side}{i}", ms, 30, 0.001) for i, ms in enumerate(medians, 1))


def paired_result(
    test: str, base: list[float], head: list[float], *, family: int = 2, threshold: float = 0.05
) -> Result:
    """A result judged against revision ``main`` on pairs of these session medians, by the
    pair rule, as a run judges it."""
    first = Measurement(
        key=f"test_k.py::{test}",
        test=test,
        timer="cuda-graph",
        samples_ms=tuple(head[0] * math.exp(s) for s in SPREAD),
        warmup=3,
        calls_per_sample=1,
        threshold=threshold,
        session="h0",
    )
    measurement = dataclasses.replace(first, confirmations=records("h", head[1:]))
    paired = Paired("main", SHA, records("b", base), measurement.sessions, pairs=len(base))
    verdict = ab.paired_verdict(
        paired,
        timer=first.timer,
        launches=1,
        measure=MeasureSettings(threshold=threshold, alpha=0.01),
        gate=Gate(confirm=0, family=family),
        design=DESIGN,
    )
    return Result(measurement, verdict)


def slower() -> Result:
    return paired_result("test_slow", [1.0, 1.001, 0.999], [1.08, 1.081, 1.079])


def unchanged() -> Result:
    return paired_result("test_same", [1.0, 1.001, 0.999], [1.0, 0.999, 1.001])


def cells(line: str) -> list[str]:
    """A row of the terminal table: columns are two spaces apart or more."""
    return re.split(r"\s{2,}", line.strip())


def table_row(lines: list[str], test: str) -> list[str]:
    """The row of ``test`` in the table of ``lines`` (from its header to the first line
    that is no row: a failure message above it names the test too)."""
    start = next(i for i, line in enumerate(lines) if cells(line)[:2] == ["test", "timer"])
    rows = []
    for line in lines[start + 2 :]:
        if len(cells(line)) < len(report.PAIRED_COLUMNS):
            break
        rows.append(line)
    [line] = [line for line in rows if line.startswith(test + " ")]
    return cells(line)


def write_file(path: Path, *results: Result) -> str:
    document = report.json_document(list(results), DEVICE, SETTINGS, {"id": "s"})
    path.write_text(report.json_text(document), encoding="utf-8")
    return str(path)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- formatting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ratio, low, high, text",
    [
        (1.08, 1.05, 1.111, "+8.0% [+5.0%, +11.1%]"),
        (0.9, 0.85, 0.95, "-10.0% [-15.0%, -5.0%]"),
        (1.02, None, None, "+2.0%"),
        (1.02, 0.9, math.inf, "+2.0%"),  # unbounded: the change alone
        (None, None, None, "-"),
    ],
)
def test_format_interval(
    ratio: float | None, low: float | None, high: float | None, text: str
) -> None:
    assert report.format_interval(ratio, low, high) == text


def test_a_paired_table_shows_both_sides_and_names_the_revision() -> None:
    slow, same = slower(), unchanged()
    lines = report.table_lines([same, slow])
    assert cells(lines[0]) == list(report.PAIRED_COLUMNS)
    assert not {"spread", "baseline", "sessions", "gate"} & set(cells(lines[0]))
    row = table_row(lines, "test_slow")
    assert slow.verdict.paired is not None and slow.verdict.judgement is not None
    j = slow.verdict.judgement
    assert row[:7] == [
        "test_slow",
        "cuda-graph",
        report.format_time(slow.verdict.paired.base_median_ms),
        report.format_time(slow.measurement.median_ms),
        report.format_interval(j.ratio, j.ratio_low, j.ratio_high),
        "3",
        "regressed",
    ]
    assert row[2] == "1.00 ms" and row[3] == "1.08 ms"
    assert table_row(lines, "test_same")[6] == "same"
    assert lines[-1] == LEGEND + WITH_SAME
    assert report.table_lines([slow])[-1] == LEGEND + CORRECTED  # no same: no word of it


def test_a_same_row_shows_the_bounds_it_rests_on() -> None:
    """At 3 pairs of 96 tests the corrected interval of a same is tens of percent wide; its
    row shows the 90% interval that puts it within the threshold, other rows the corrected
    one, and the line under the table says which is which."""
    same = paired_result(
        "test_same", [0.2218, 0.2224, 0.2306], [0.2226, 0.2224, 0.2221], family=96
    )  # an H100 A/A run's test, one pair 3.8% apart
    slow = paired_result("test_slow", [1.0, 1.001, 0.999], [1.08, 1.081, 1.079], family=96)
    j, k = same.verdict.judgement, slow.verdict.judgement
    assert same.status is Status.SAME and j is not None and k is not None
    assert j.same_low is not None and j.same_high is not None
    assert j.ratio_low is not None and j.ratio_low < 0.7  # what the row showed before
    assert 1 / 1.05 < j.same_low < j.same_high < 1.05
    assert (k.same_low, k.same_high) == (None, None)
    same_text = report.format_interval(j.ratio, j.same_low, j.same_high)
    slow_text = report.format_interval(k.ratio, k.ratio_low, k.ratio_high)
    assert same_text == "-1.1% [-4.1%, +1.9%]"
    lines = report.table_lines([same, slow])
    assert table_row(lines, "test_same")[4:7] == [same_text, "3", "same"]
    assert table_row(lines, "test_slow")[4:7] == [slow_text, "3", "regressed"]
    assert lines[-1] == LEGEND + WITH_SAME
    assert f"{1 - 2 * SAME_LEVEL:.0%} interval" in WITH_SAME  # the rule's level, named
    text = report.markdown([same, slow], DEVICE)
    rows = {line.split(" | ")[0]: line.split(" | ") for line in text.splitlines()}
    assert rows["| test_same"][4:7] == [same_text, "3", "same"]
    assert rows["| test_slow"][4:7] == [slow_text, "3", "regressed"]
    assert LEGEND + WITH_SAME in text.splitlines()


def test_a_same_made_changed_by_other_launches_has_no_bounds() -> None:
    same = unchanged()
    assert same.verdict.paired is not None and same.verdict.judgement is not None
    assert same.verdict.judgement.same_low is not None
    changed = ab.paired_verdict(
        same.verdict.paired,
        timer="cuda-graph",
        launches=1,
        measure=MeasureSettings(threshold=0.05, alpha=0.01),
        gate=Gate(confirm=0, family=2),
        design=DESIGN,
        kernel_changes=("gemm: another kernel",),
    )
    assert changed.status is Status.CHANGED and changed.judgement is not None
    assert (changed.judgement.same_low, changed.judgement.same_high) == (None, None)
    row = table_row(report.table_lines([Result(same.measurement, changed)]), "test_same")
    j = changed.judgement
    assert row[4] == report.format_interval(j.ratio, j.ratio_low, j.ratio_high)


def test_a_failure_line_gives_the_change_and_interval_of_the_table() -> None:
    """The line of a failure against a revision reads as its row: it said "bar -" where the
    summary said another number (issue 45)."""
    r = slower()
    assert r.status is Status.REGRESSED
    [line] = report.failure_message(r).splitlines()[:1]
    assert line == (
        f"test_slow regressed: 1.00 ms -> 1.08 ms ({report.paired_change(r)}, 3 pairs of "
        "fresh processes, threshold 5%)"
    )
    assert "bar" not in line and report.paired_change(r) in report.paired_row(r)


def test_a_history_table_keeps_its_columns() -> None:
    plain = dataclasses.replace(slower(), verdict=Verdict(Status.NEW))
    lines = report.table_lines([plain])
    assert cells(lines[0]) == list(report.COLUMNS)
    assert not any(line.startswith("base: ") for line in lines)


def test_paired_rows_of_one_side_show_what_that_side_measured() -> None:
    slow = slower()
    assert slow.verdict.paired is not None
    only_base = Paired("main", SHA, slow.verdict.paired.base_sessions, ())
    removed = Result(slow.measurement, Verdict(Status.REMOVED, paired=only_base))
    row = table_row(report.table_lines([removed]), "test_slow")
    assert row[2:7] == ["1.00 ms", "-", "-", "-", "removed"]


def test_markdown_of_a_paired_run_has_the_paired_columns() -> None:
    text = report.markdown([slower(), unchanged()], DEVICE)
    lines = text.splitlines()
    assert PAIRED_HEADER in lines
    assert "| spread |" not in text
    [row] = [line for line in lines if line.startswith("| test_slow |")]
    assert row.split(" | ")[2:7] == ["1.00 ms", "1.08 ms", row.split(" | ")[4], "3", "regressed"]
    assert "base: main (01234567); head: the working tree" in text


def test_the_json_report_holds_both_sides() -> None:
    slow = slower()
    document = json.loads(report.json_text(report.json_document([slow], DEVICE, SETTINGS)))
    assert document["against"] == {"revision": "main", "commit": SHA}
    [entry] = document["results"]
    against = entry["against"]
    assert (against["revision"], against["commit"], against["pairs"]) == ("main", SHA, 3)
    assert [s["session"] for s in against["base_sessions"]] == ["b1", "b2", "b3"]
    assert [s["session"] for s in against["head_sessions"]] == ["h0", "h1", "h2"]
    base = statistics.median(s["median_ms"] for s in against["base_sessions"])
    head = statistics.median(s["median_ms"] for s in against["head_sessions"])
    assert against["base_median_ms"] == pytest.approx(base)
    assert against["head_median_ms"] == pytest.approx(head) == entry["median_ms"]
    assert against["ratio"] == pytest.approx(head / base, rel=2e-3)
    assert against["ratio_low"] < against["ratio"] < against["ratio_high"]
    assert (against["same_low"], against["same_high"]) == (None, None)  # not a same
    assert against["verdict"] == entry["status"] == "regressed"
    back = Result.from_dict(entry).verdict.paired  # as the file keeps it: 6 digits
    assert back is not None and slow.verdict.paired is not None
    assert back.to_json() == json.loads(json.dumps(slow.verdict.paired.to_json()))


def test_the_json_report_keeps_the_bounds_of_a_same_and_reads_files_without_them() -> None:
    same = unchanged()
    j = same.verdict.judgement
    assert j is not None and j.same_low is not None and j.same_high is not None
    document = json.loads(report.json_text(report.json_document([same], DEVICE, SETTINGS)))
    [entry] = document["results"]
    assert (entry["against"]["same_low"], entry["against"]["same_high"]) == (
        j.same_low,
        j.same_high,
    )
    back = Result.from_dict(entry)
    assert back.verdict.judgement == j
    assert report.table_lines([back]) == report.table_lines([same])
    # A file written before the bounds were kept: it reads, and its same shows the
    # corrected interval under the legend of that one.
    del entry["judgement"]["same_low"], entry["judgement"]["same_high"]
    old = Result.from_dict(entry)
    assert old.verdict.judgement is not None and old.verdict.judgement.same_low is None
    lines = report.table_lines([old])
    assert table_row(lines, "test_same")[4] == report.format_interval(
        j.ratio, j.ratio_low, j.ratio_high
    )
    assert lines[-1] == LEGEND + CORRECTED


def test_a_history_run_has_no_against() -> None:
    plain = dataclasses.replace(slower(), verdict=Verdict(Status.NEW))
    document = report.json_document([plain], DEVICE, SETTINGS)
    assert "against" not in document
    assert document["results"][0]["against"] is None


def test_the_benchmark_json_keeps_the_head_and_puts_the_base_in_extra_info() -> None:
    slow = slower()
    entry = benchjson.entry(slow)
    against = entry["extra_info"]["gpubench"]["against"]
    assert slow.verdict.paired is not None and slow.verdict.judgement is not None
    assert against["base_median_ms"] == slow.verdict.paired.base_median_ms
    assert against["ratio"] == slow.verdict.judgement.ratio
    assert against["ratio_low"] < against["ratio"] < against["ratio_high"]
    assert (against["pairs"], against["verdict"]) == (3, "regressed")
    assert "base_sessions" not in against
    assert entry["stats"]["median"] == pytest.approx(slow.measurement.median_ms / 1e3)


@pytest.mark.parametrize(
    "data, problem",
    [
        ({"revision": "main"}, "no 'commit'"),
        (
            {"revision": "main", "commit": SHA, "base_sessions": {}},
            "'base_sessions' of {}, not a list",
        ),
        ({"revision": "main", "commit": SHA, "pairs": 1}, "1 pairs, more than"),
        ({"revision": "main", "commit": SHA, "pairs": -1}, "not a count"),
        ({"revision": "main", "commit": SHA, "duos": [0]}, "'duos' of [0], not counts"),
        ({"revision": "main", "commit": SHA, "duos": [1]}, "has duos [1] for 0 pairs"),
    ],
)
def test_a_damaged_against_record_is_refused(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        Paired.from_json(data)


# --- gpubench compare of an A/B file --------------------------------------------------------


def test_compare_of_an_ab_file_judges_its_pairs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 3% slower: same at the run's 5%, regressed at 2% (its interval clears no change).
    small = paired_result("test_small", [1.0, 1.001, 0.999], [1.03, 1.031, 1.029])
    assert small.status is Status.SAME and small.verdict.judgement is not None
    assert small.verdict.judgement.ratio_low is not None and small.verdict.judgement.ratio_low > 1
    path = write_file(tmp_path / "ab.json", slower(), small)

    code, out, err = run_cli(capsys, "compare", path)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == f"gpubench compare: {path}: the working tree against main (01234567) " + (
        f"({DEVICE['name']})"
    )
    assert cells(lines[1]) == list(report.PAIRED_COLUMNS)
    assert table_row(lines, "test_slow")[6] == "regressed"
    assert table_row(lines, "test_small")[6] == "same"
    # Judged again as the run judged it: a same shows its bounds, as the run's table did.
    j = small.verdict.judgement
    assert table_row(lines, "test_small")[4] == (
        report.format_interval(j.ratio, j.same_low, j.same_high)
    )
    assert LEGEND + WITH_SAME in lines

    code, out, _ = run_cli(capsys, "compare", path, "--threshold", "2%")
    assert code == 1
    row = table_row(out.splitlines(), "test_small")
    assert row[6].startswith("regressed")
    assert row[4] == report.format_interval(j.ratio, j.ratio_low, j.ratio_high)
    assert LEGEND + CORRECTED in out.splitlines()

    code, out, _ = run_cli(capsys, "compare", path, "--threshold", "10%")
    assert code == 0 and "regressed" not in out

    code, out, _ = run_cli(capsys, "compare", path, "--markdown")
    assert code == 1 and PAIRED_HEADER in out.splitlines()


def test_compare_judges_a_lockstep_file_by_where_its_more_pairs_came_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lockstep result of 5 pairs left unsure: its more pairs from fresh processes
    (``fresh``: its inputs held in place) are all that design takes, so gpubench compare
    judges it at their cap, as the run did; from its own process, that design's cap is 10
    pairs, its next batch 4 more. The file records ``fresh`` only where it is so."""
    settings = {"threshold": 0.05, "alpha": 0.01, "confirm": 6}  # a lockstep run's own design
    noisy = paired_result("test_noisy", [1.0] * 5, [1.0, 1.1, 0.92, 1.08, 0.93])

    def reported(fresh: bool) -> tuple[dict[str, Any], str]:
        assert noisy.verdict.paired is not None
        paired = dataclasses.replace(noisy.verdict.paired, lockstep=True, fresh=fresh)
        verdict = ab.rejudged(
            paired,
            noisy.measurement,
            noisy.verdict,
            MeasureSettings(threshold=0.05, alpha=0.01),
            Gate(confirm=0, family=2),
            ab.design_of(None, True, lockstep=True, fresh=fresh),
        )
        result = dataclasses.replace(noisy, verdict=verdict)
        document = report.json_document([result], DEVICE, settings, {"id": "s"})
        path = tmp_path / f"ab-{fresh}.json"
        path.write_text(report.json_text(document), encoding="utf-8")
        [entry] = json.loads(path.read_text(encoding="utf-8"))["results"]
        code, out, err = run_cli(capsys, "compare", str(path))
        assert (code, err) == (0, ""), out
        assert table_row(out.splitlines(), "test_noisy")[6].startswith("unsure")
        return entry["against"], out

    against, out = reported(fresh=True)
    assert against["fresh"] is True and against["pairs"] == 5
    assert "over 5 pairs in lockstep; unsure at the cap of 5 pairs" in out, out
    against, out = reported(fresh=False)
    assert "fresh" not in against and against["pairs"] == 5
    assert "over 5 pairs in lockstep; unsure: 4 more pairs" in out, out


def test_a_working_trees_call_faster_than_its_declared_bytes_allow_is_impossible_again_in_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18: against a revision the working tree's measurement is held to its declared
    bytes as a run against a history holds it (ab.held_to_floors asks Gate.impossible), whatever
    its pairs say; gpubench compare of the run's file asks it again."""
    gate = Gate(confirm=0, family=2)

    def declared(result: Result, bytes: float) -> Result:
        floors = Floors(bytes, peak_gbs=3000.0, cached_gbs=9000.0)
        m = dataclasses.replace(result.measurement, floors=floors)
        return Result(m, ab.held_to_floors(result.verdict, m, gate))

    # 1e12 bytes in 1 ms: 1e6 GB/s, against copies of 9000 GB/s at most.
    cached = declared(paired_result("test_cached", [1.0, 1.001, 0.999], [1.0, 0.999, 1.001]), 1e12)
    honest = declared(unchanged(), 1e9)  # 1000 GB/s
    # The revision returned a cached output (1e10 bytes in 0.1 ms), the working tree does
    # the work (10 ms): 100x slower, and no regression of anything.
    fixed = paired_result("test_fixed", [0.1, 0.1001, 0.0999], [10.0, 9.99, 10.01])
    assert fixed.status is Status.REGRESSED
    fixed = declared(fixed, 1e10)
    assert cached.status is Status.IMPOSSIBLE
    assert "over 3x the fastest this device's copies allow" in cached.verdict.reason
    assert cached.verdict.paired is not None and cached.verdict.paired.pairs == 3
    assert honest.status is Status.SAME and honest.verdict == unchanged().verdict
    assert fixed.status is Status.NOT_GATED and fixed.verdict.paired.pairs == 3
    assert fixed.verdict.reason.startswith(
        "main (01234567)'s calls are impossible (100 µs per call for its "
        "declared 1e+10 bytes is 1e+05 GB/s, over 3x"
    )
    assert gate.fails(cached.verdict) and not gate.fails(honest.verdict)
    assert not gate.fails(fixed.verdict)
    # The revision's cached calls launched nothing, so another timer timed them: no pairs,
    # and still nothing to judge against.
    m = fixed.measurement
    sides = Paired("main", SHA, records("b", [0.0011]), m.sessions)
    split = declared(Result(m, Verdict(Status.UNSURE, reason="other timers", paired=sides)), 1e10)
    assert split.status is Status.NOT_GATED
    assert "calls are impossible (1.10 µs" in split.verdict.reason
    path = write_file(tmp_path / "ab.json", cached, honest, fixed)

    code, out, err = run_cli(capsys, "compare", path)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert table_row(lines, "test_cached")[6] == "impossible"
    assert table_row(lines, "test_same")[6] == "same"
    assert table_row(lines, "test_fixed")[6] == "not gated"
    assert "test_cached: impossible: 1.00 ms per call for its declared 1e+12 bytes" in out
    assert "confirmed in" not in out  # its pairs' sessions confirm nothing: they are it


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run_cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("gpubench: error: "), err
    return err


def test_compare_of_mixed_files_says_what_to_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ab_file = write_file(tmp_path / "ab.json", slower())
    other = write_file(tmp_path / "other.json", unchanged())
    plain = write_file(
        tmp_path / "plain.json", dataclasses.replace(slower(), verdict=Verdict(Status.NEW))
    )
    for args in ((ab_file, plain), (plain, ab_file)):
        err = one_line_error(capsys, "compare", *args)
        assert f"{ab_file} is the file of an A/B run" in err
        assert f"pass it alone (gpubench compare {ab_file})" in err
    err = one_line_error(capsys, "compare", ab_file, other)
    assert "are both files of A/B runs" in err and f"gpubench compare {other}" in err
    err = one_line_error(capsys, "compare", plain)
    assert "not of an A/B run: pass BASE.json HEAD.json" in err


def test_compare_refuses_a_damaged_ab_file_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ab.json"
    write_file(path, slower())
    document = json.loads(path.read_text(encoding="utf-8"))
    document["results"][0]["against"]["base_sessions"] = [{"session": "b1"}]
    path.write_text(json.dumps(document), encoding="utf-8")
    assert "has a results[0] that cannot be read" in one_line_error(capsys, "compare", str(path))
    for against in ("main", {"revision": "main", "commit": ""}, {"revision": "main"}):
        document["against"] = against
        path.write_text(json.dumps(document), encoding="utf-8")
        err = one_line_error(capsys, "compare", str(path))
        assert "has an 'against' that is not an object with 'revision' and 'commit'" in err


# --- as users run it ------------------------------------------------------------------------

# Two functions of the kernel module, each slowed by its own factor in the working tree.
KERNELS = """
def work(n):
    return sum(range(n))


def small(n):
    return sum(range(n))


work.fake_factor = {work}
small.fake_factor = {small}
"""

TESTS = """
from kernels import small, work


def test_sum(gpubench):
    assert gpubench(work, 100) == 4950


def test_small(gpubench):
    assert gpubench(small, 10) == 45


def test_join(gpubench):
    assert gpubench(",".join, ["a", "b"]) == "a,b"
"""
FAST = ("--gpubench-pairs=2", NO_CONFIRM)


@pytest.fixture
def repo(fake: pytest.Pytester) -> pytest.Pytester:
    """A git repository of the kernels and their tests, committed at factor 1; the working
    tree makes ``work`` 8% and ``small`` 3% slower (not committed)."""
    if shutil.which("git") is None:
        pytest.skip("git is not on PATH")
    fake.makepyfile(kernels=KERNELS.format(work=1.0, small=1.0), test_bench=TESTS)
    fake.path.joinpath(".gitignore").write_text("*\n!*.py\n!.gitignore\n")
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    fake.makepyfile(kernels=KERNELS.format(work=1.08, small=1.03))
    return fake


@pytest.mark.slow
def test_the_reports_of_a_run_against_a_revision_carry_both_sides(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    step_summary = repo.path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    sha = git(repo.path, "rev-parse", "HEAD")
    result = repo.runpytest(
        "--gpubench-against=main",
        *FAST,
        "--gpubench-json=ab.json",
        "--gpubench-markdown=ab.md",
        "--gpubench-benchmark-json=bench.json",
    )
    result.assert_outcomes(passed=2, failed=1)
    document = json.loads((repo.path / "ab.json").read_text(encoding="utf-8"))
    assert document["against"] == {"revision": "main", "commit": sha}
    entries = {e["test"]: e for e in document["results"]}
    assert sorted(entries) == ["test_join", "test_small", "test_sum"]

    # JSON: both sides' sessions, in pairs, and a ratio that the medians bear out.
    for test, planted in (("test_sum", 1.08), ("test_small", 1.03), ("test_join", 1.0)):
        against = entries[test]["against"]
        assert (against["revision"], against["commit"], against["pairs"]) == ("main", sha, 2)
        base, head = against["base_sessions"], against["head_sessions"]
        assert len(base) == len(head) == 2
        assert len({s["session"] for s in base + head}) == 4  # four processes
        assert head[0]["session"] == entries[test]["session"]  # the head's samples: pair 1's
        assert against["base_median_ms"] == pytest.approx(
            statistics.median(s["median_ms"] for s in base)
        )
        assert against["head_median_ms"] == pytest.approx(entries[test]["median_ms"])
        ratio = against["head_median_ms"] / against["base_median_ms"]
        assert against["ratio"] == pytest.approx(ratio, rel=1e-3)
        assert against["ratio"] == pytest.approx(planted, rel=2e-3)
        assert against["ratio_low"] < against["ratio"] < against["ratio_high"]
        assert against["verdict"] == entries[test]["status"]
    assert entries["test_sum"]["status"] == "regressed"

    # JSON: a same's bounds, within the threshold; none for the others.
    for test in ("test_small", "test_join"):
        a = entries[test]["against"]
        assert a["verdict"] == "same"
        assert 1 / 1.05 < a["same_low"] < a["ratio"] < a["same_high"] < 1.05
        assert a["ratio_low"] < a["same_low"] and a["same_high"] < a["ratio_high"]
        assert Result.from_dict(entries[test]).verdict.judgement.same_low == a["same_low"]
    a = entries["test_sum"]["against"]
    assert (a["same_low"], a["same_high"]) == (None, None)

    # The terminal table: both medians, the change with its interval (a same's bounds for
    # a same), the pairs; the line under it says which interval is which.
    lines = output(result).splitlines()
    [header] = [line for line in lines if line.startswith("test ")]
    assert cells(header) == list(report.PAIRED_COLUMNS)
    changes = {}
    for test, entry in entries.items():
        a = entry["against"]
        same = a["verdict"] == "same"
        low, high = (a["same_low"], a["same_high"]) if same else (a["ratio_low"], a["ratio_high"])
        changes[test] = report.format_interval(a["ratio"], low, high)
        assert table_row(lines, test)[1:7] == [
            FAKE_NAME,
            report.format_time(a["base_median_ms"]),
            report.format_time(a["head_median_ms"]),
            changes[test],
            "2",
            a["verdict"],
        ]
    assert changes["test_small"] != report.format_interval(
        entries["test_small"]["against"]["ratio"],
        entries["test_small"]["against"]["ratio_low"],
        entries["test_small"]["against"]["ratio_high"],
    )
    assert table_row(lines, "test_sum")[2:4] == ["1.00 ms", "1.08 ms"]
    legend = LEGEND.replace("01234567", sha[:8]) + WITH_SAME
    assert legend in lines

    # Markdown, and the same table in the job summary.
    for path in (repo.path / "ab.md", step_summary):
        text = path.read_text(encoding="utf-8")
        assert PAIRED_HEADER in text.splitlines(), path
        [row] = [line for line in text.splitlines() if line.startswith("| test_sum |")]
        assert row.split(" | ")[2:4] == ["1.00 ms", "1.08 ms"]
        assert row.split(" | ")[4:7] == [changes["test_sum"], "2", "regressed"]
        [row] = [line for line in text.splitlines() if line.startswith("| test_small |")]
        assert row.split(" | ")[4:7] == [changes["test_small"], "2", "same"]
        assert legend in text.splitlines(), path

    # pytest-benchmark's JSON: the head's stats, the base and the verdict in extra_info.
    bench = json.loads((repo.path / "bench.json").read_text(encoding="utf-8"))
    [raw] = [b for b in bench["benchmarks"] if b["name"] == "test_sum"]
    extra = raw["extra_info"]["gpubench"]["against"]
    a = entries["test_sum"]["against"]
    assert raw["stats"]["median"] == pytest.approx(a["head_median_ms"] / 1e3)
    assert extra == {
        key: a[key]
        for key in (
            "revision",
            "commit",
            "base_median_ms",
            "head_median_ms",
            "ratio",
            "ratio_low",
            "ratio_high",
            "same_low",
            "same_high",
            "pairs",
            "verdict",
        )
    }


@pytest.mark.slow
def test_compare_of_the_runs_file_reproduces_its_verdicts(
    repo: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    result = repo.runpytest("--gpubench-against=main", *FAST, "--gpubench-json=ab.json")
    result.assert_outcomes(passed=2, failed=1)
    path = str(repo.path / "ab.json")
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    verdicts = {e["test"]: e["status"] for e in document["results"]}
    assert verdicts == {"test_sum": "regressed", "test_small": "same", "test_join": "same"}

    code, out, err = run_cli(capsys, "compare", path)
    assert (code, err) == (1, "")
    assert {t: table_row(out.splitlines(), t)[6] for t in verdicts} == verdicts

    # At 3% the 3% slowdown fails: its pairs' interval clears no change.
    [small] = [e["against"] for e in document["results"] if e["test"] == "test_small"]
    assert small["ratio_low"] > 1
    code, out, _ = run_cli(capsys, "compare", path, "--threshold", "3%")
    assert code == 1
    assert table_row(out.splitlines(), "test_small")[6].startswith("regressed")

    # A file of a run without --gpubench-against beside it: one line, what to pass.
    repo.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=plain.json").assert_outcomes(passed=3)
    err = one_line_error(capsys, "compare", str(repo.path / "plain.json"), path)
    assert f"{path} is the file of an A/B run" in err and "pass it alone" in err


def test_a_reports_costs_read_back_and_a_later_releases_steps_are_left_out() -> None:
    same = unchanged()
    costs = Costs(first_call_s=0.5, sampling_s=1.25, other_first_call_s=0.75)
    same = dataclasses.replace(same, measurement=dataclasses.replace(same.measurement, costs=costs))
    document = json.loads(report.json_text(report.json_document([same], DEVICE, SETTINGS)))
    [entry] = document["results"]
    assert Result.from_dict(entry).measurement.costs == costs
    entry["costs"] |= {"compile_s": 2.0, "sampling_s": "slow"}  # a later release's; damaged
    back = Result.from_dict(entry).measurement.costs
    assert back == dataclasses.replace(costs, sampling_s=0.0)


def test_a_failure_its_kernel_time_decided_is_asked_of_a_second_process_kernel_time() -> None:
    """The time per call unsure and the kernel time 5% slower: the test regressed on its
    kernel time, and a second process bears that out by its own kernel time (not by its
    time per call, as unsure there as here), or leaves the test unsure."""
    from pytest_gpubench.versus import lockstep

    measure = MeasureSettings(threshold=0.02, alpha=0.01)
    noisy = [1.05, 0.96, 1.04, 0.97, 1.0]  # per call: unsure either way

    def verdict(kernel: float, times: list[float] = noisy) -> Verdict:
        base = tuple(
            SessionRecord(f"b{i}", 1.0, 30, 0.001, beside_ms=0.8 * (1 + 0.0005 * (-1) ** i))
            for i in range(5)
        )
        head = tuple(
            SessionRecord(f"h{i}", ms, 30, 0.001, beside_ms=kernel * (1 - 0.0005 * (-1) ** i))
            for i, ms in enumerate(times)
        )
        return ab.paired_verdict(
            Paired("main", SHA, base, head, pairs=5, lockstep=True),
            timer="cuda-graph",
            launches=1,
            measure=measure,
            gate=Gate(confirm=0, family=1),
            design=ab.design_of(5, more=False),
        )

    mine = verdict(0.84)
    assert mine.status is Status.REGRESSED and mine.beside is not None, mine.reason
    assert "the kernel time moved, the time per call was unsure" in mine.reason
    measurement = Measurement(
        key="test_k.py::test_k",
        test="test_k",
        timer="cuda-graph",
        samples_ms=tuple(1.0 * math.exp(s) for s in SPREAD),
        warmup=3,
        calls_per_sample=1,
        threshold=0.02,
        session="h0",
    )
    failed = Result(measurement, mine)

    def second(v: Verdict, timer: str = "cuda-graph") -> Result:
        return Result(dataclasses.replace(measurement, timer=timer), v)

    kept = lockstep._as_second_process_says(failed, second(verdict(0.84)), measure)
    assert kept.status is Status.REGRESSED, kept.verdict.reason
    assert "a second process's 5 pairs read +0.3% by cuda-graph, kernel time +5.0%" in (
        kept.verdict.reason
    )
    dropped = lockstep._as_second_process_says(failed, second(verdict(0.8)), measure)
    assert dropped.status is Status.UNSURE
    assert dropped.verdict.reason.startswith(
        "a second process's 5 pairs read +0.3% by cuda-graph, kernel time +0.0%, which does "
        "not bear out this process's pairs"
    )

    # A call near the short-call edge timed by cupti-graph there (its number the kernel
    # time, none beside it): its kernel time is asked, as the one that failed the test.
    def kernel_timed(kernel: float) -> Result:
        v = verdict(1.0, [kernel * (1 + 0.0005 * (-1) ** i) / 0.8 for i in range(5)])
        return second(dataclasses.replace(v, beside=None), "cupti-graph")

    for kernel, status, read in ((0.84, Status.REGRESSED, "+5.0%"), (0.8, Status.UNSURE, "+0.0%")):
        said = lockstep._as_second_process_says(failed, kernel_timed(kernel), measure)
        assert said.status is status, said.verdict.reason
        assert f"a second process's 5 pairs read {read} by cupti-graph" in said.verdict.reason
        assert f"{read} by cupti-graph, kernel time" not in said.verdict.reason
    # Its time per call did not fail it (unsure, and here faster): a second process whose
    # time per call is much faster bears out no slowdown.
    faster = [0.99, 0.96, 1.0, 0.97, 0.99]
    slowed = verdict(0.84, faster)
    assert slowed.by_kernel_time and slowed.judgement.ratio < 1  # type: ignore[union-attr]
    much_faster = verdict(0.8, [0.9, 0.901, 0.899, 0.9, 0.9005])
    assert much_faster.judgement.status is Status.IMPROVED  # type: ignore[union-attr]
    said = lockstep._as_second_process_says(
        Result(measurement, slowed), second(much_faster), measure
    )
    assert said.status is Status.UNSURE, said.verdict.reason
    # The failure line and the table say that the kernel time decided.
    message = report.failure_message(Result(measurement, slowed))
    assert message.startswith("test_k regressed: kernel time +5.0% [+"), message
    assert "; time per call 1.00 ms -> " in message and "unsure)" in message
    assert report.verdict_label(Result(measurement, slowed)).startswith("regressed (kernel time)")


def test_numbers_that_moved_apart_take_more_pairs() -> None:
    """One pair: the time per call the same, the kernel time 20% slower. Unsure, and the
    design's cap allows more pairs: the run takes them rather than end it unsure."""
    base = (SessionRecord("b", 1.0, 30, 0.001, beside_ms=0.8),)
    head = (SessionRecord("h", 1.0, 30, 0.001, beside_ms=0.96),)
    verdict = ab.paired_verdict(
        Paired("main", SHA, base, head, pairs=1, lockstep=True),
        timer="cuda-graph",
        launches=1,
        measure=MeasureSettings(threshold=0.05, alpha=0.01),
        gate=Gate(confirm=0, family=1),
        design=ab.design_of(None, more=True, lockstep=True),
    )
    assert verdict.status is Status.UNSURE and verdict.beside is not None, verdict.reason
    assert verdict.judgement is not None and verdict.judgement.needs_confirmation


def test_kernel_time_is_judged_on_the_pairs_that_took_it_on_both_sides() -> None:
    """A pair whose kernel time one side lacks (taking it failed there) is left out of the
    kernel time's judgement, not the whole judgement; with none left there is none."""

    def side(name: str, kernel_ms: list[float | None]) -> tuple[SessionRecord, ...]:
        return tuple(
            SessionRecord(f"{name}{i}", 1.0, 30, 0.001, beside_ms=k)
            for i, k in enumerate(kernel_ms, 1)
        )

    def judged(base: list[float | None], head: list[float | None]) -> Verdict:
        paired = Paired("main", SHA, side("b", base), side("h", head), pairs=5, lockstep=True)
        return ab.paired_verdict(
            paired,
            timer="cuda-graph",
            launches=1,
            measure=MeasureSettings(threshold=0.05, alpha=0.01),
            gate=Gate(confirm=0, family=1),
            design=ab.design_of(5, more=False),
        )

    verdict = judged([0.8, None, 0.8, 0.8, 0.8], [0.88, 0.88, None, 0.88, 0.88])
    # The time per call ruled a change out, the kernel time moved: unsure, said.
    assert verdict.status is Status.UNSURE and verdict.beside is not None
    assert verdict.beside.status is Status.REGRESSED and verdict.beside.current_sessions == 3
    assert verdict.beside.reason.startswith(
        "slower by 10.0% than main (01234567)'s kernel time over 3 pairs in lockstep"
    )
    assert (
        "; kernel time slower by 10.0% (regressed): the kernel time moved, the time per call "
        "did not" in verdict.reason
    )
    assert judged([None] * 5, [0.88] * 5).beside is None
