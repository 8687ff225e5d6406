"""The GPU A/B checks' scripts on CPU: the calibration that sizes a planted slowdown in time
(bench/calibrate_slowdown.py), the step that plants it (bench/ab_checks.sh) and the tally of
its runs (bench/ab_summary.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support import ROOT, bench_module


def test_the_calibration_picks_the_smallest_fraction_reaching_the_target() -> None:
    calibrate = bench_module("calibrate_slowdown")
    ratios = {0.01: 1.004, 0.02: 1.031, 0.03: 1.029, 0.04: 1.05}
    assert calibrate.pick(ratios, 0.03) == (0.02, True)
    assert calibrate.pick(ratios, 0.05) == (0.04, True)
    # None reaches it: the largest, and said so.
    assert calibrate.pick(ratios, 0.08) == (0.04, False)


def test_the_calibration_reads_the_ratios_of_its_report() -> None:
    calibrate = bench_module("calibrate_slowdown")
    report = {
        "results": [
            {"key": "calibrate_copy.py::test_grown_copy[4194304-0.0225]", "median_ms": 0.0071},
            {
                "key": "calibrate_copy.py::test_grown_copy[4194304-0.0225]#vs-reference",
                "test": "test_grown_copy[4194304-0.0225]#vs-reference",
                "median_ms": 1.04,
            },
            {
                "key": "calibrate_copy.py::test_grown_copy[16777216-0.03]#vs-reference",
                "test": "test_grown_copy[16777216-0.03]#vs-reference",
                "median_ms": 1.028,
            },
        ]
    }
    assert calibrate.ratios_of(report) == {4194304: {0.0225: 1.04}, 16777216: {0.03: 1.028}}


@pytest.mark.parametrize(
    "suite, held, reads",
    [
        ("user_suite/test_user.py", "int, float", "PLANTED.get(n, "),
        ("fla_suite/test_fla.py", "str, int", "PLANTED.get(test)"),
    ],
)
def test_the_slowtime_step_plants_into_the_line_the_suite_reads(
    suite: str, held: str, reads: str
) -> None:
    """ab_checks.sh's sed pattern matches each suite's PLANTED line: a renamed line would
    plant nothing and the run would read as a miss."""
    script = (ROOT / "bench" / "ab_checks.sh").read_text()
    assert f"held='{held}'" in script
    pattern = re.search(r'sed -i "s/(\^PLANTED[^/]*)/', script)
    assert pattern is not None
    regex = pattern.group(1).replace("\\\\", "\\").replace("$held", re.escape(held))
    source = (ROOT / "bench" / suite).read_text()
    line = next(x for x in source.splitlines() if x.startswith("PLANTED"))
    assert re.match(regex, line), (regex, line)
    assert reads in source


def test_the_fla_plant_reads_its_cases_and_sizes_the_spin_by_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    plant = bench_module("fla_plant")
    spins = {"test_rms_norm[4096]": [1.0, 8.0], "test_l2norm": [1.0, 8.0]}

    def case(i: int, cycles: int, ratio: float | None, call_ms: float) -> dict:
        versus = {"fn_ms": call_ms * (ratio or 1), "reference_ms": call_ms}
        name = f"test_spin[k{i}]#{cycles}cycles#vs-reference"
        return {"test": name, "median_ms": ratio, "versus": versus}

    report = {
        "results": [
            {"test": "test_spin[k0]#2000cycles", "median_ms": 0.05},
            case(0, 2000, 1.03, 0.100),
            case(1, 16000, 1.17, 0.102),
            case(3, 15990, 1.01, 0.5),
            case(2, 1990, None, 0.5) | {"versus": None},
        ]
    }
    got = plant.ratios_of(report, spins)
    assert got == {"test_rms_norm[4096]": {2000: 1.03, 16000: 1.17}, "test_l2norm": {15990: 1.01}}
    calls, clock = plant.times_of(report, spins)
    assert calls == {"test_rms_norm[4096]": pytest.approx(101.0), "test_l2norm": 500.0}
    assert clock == 2000  # cycles per µs: the median of 2000, 2000 and 1998.75
    # +1% of a 500 µs call: 5 µs of spin, 10,000 cycles at 2 GHz; none is at least a cycle.
    assert plant.sized(500.0, 2000.0, 0.01) == 10_000
    assert plant.sized(8.0, 2000.0, 0.00001) == 1
    # Less the spin's fixed part, read on the shortest call: 1.03 x 101 µs is 3.03 µs for
    # 2000 cycles (1 µs), 2.03 µs fixed; a 500 µs call's +1% is then 2.97 µs of cycles.
    assert plant.fixed_us(got, calls, clock) == pytest.approx(2.03)
    assert plant.sized(500.0, 2000.0, 0.01, 2.03) == 5940
    assert plant.sized(100.0, 2000.0, 0.01, 2.03) == 1
    # The tally compares a run's reads with the check, the process that timed the spin.
    summary = bench_module("ab_summary")
    sized = {"picked": {"t": 9}, "checked": {"t": 1.011}, "line": {"t": 1.01}}
    assert summary.sized_ratio(sized, "t") == 1.011
    assert summary.sized_ratio({"picked": {"t": 9}, "second": {"t": {"9": 1.02}}}, "t") == 1.02


def _result(key: str, status: str, ratio: float, ms: float) -> dict:
    return {
        "key": f"test_user.py::{key}",
        "test": key,
        "status": status,
        "median_ms": ms,
        "judgement": {"ratio": ratio},
        "against": {
            "base_sessions": [{"median_ms": ms}, {"median_ms": ms}],
            "head_sessions": [{"median_ms": ms * ratio}, {"median_ms": ms * 1.05}],
        },
    }


def _one_run(tmp_path: Path, row: str, results: list[dict], calibration: dict) -> Any:
    """A plan's folder of one run (``row``: its runs.tsv fields up to the threshold), its
    report and its calibration, read back as ab_summary reads a plan."""
    name = row.split("\t")[0]
    (tmp_path / "runs.tsv").write_text(f"{row}\t100\t1\n")
    (tmp_path / f"{name}.json").write_text(json.dumps({"results": results}))
    (tmp_path / f"{name}.calibration.json").write_text(json.dumps(calibration))
    (run,), _ = bench_module("ab_summary").read_archive(tmp_path)
    return run


def test_the_tally_counts_slowdowns_sized_in_time_on_the_issues_rows(tmp_path: Path) -> None:
    summary = bench_module("ab_summary")
    results = [
        _result("test_copy_blocks[16777216]", "regressed", 1.033, 0.047),
        _result("test_copy_blocks[67108864]", "changed", 1.028, 0.181),
        _result("test_sdpa", "improved", 0.95, 0.059),  # untouched: a false verdict
    ]
    calibration = {
        "target": 0.03,
        "picked": {"16777216": 0.0375, "67108864": 0.03},
        "ratios": {"16777216": {"0.0375": 1.036}, "67108864": {"0.03": 1.03}},
    }
    run = _one_run(
        tmp_path, "01-slowtime-user-0.03-3pct\tslowtime\tuser\t0.03\t3%", results, calibration
    )
    assert (
        summary.planted_text(run)
        == "16777216: +3.75% blocks (+3.6%), 67108864: +3.00% blocks (+3.0%)"
    )
    text = summary.tally([tmp_path])
    assert "| the untouched tests of slowdown runs | 0 false | 1 | 1 with a false verdict |" in text
    assert (
        "| +3% time at a 3% threshold, 20-100 us copy | caught in >= 9 of 10 | 1 | caught 1 |"
        in text
    )
    row = next(x for x in text.splitlines() if x.startswith("| +3% time at a 3% threshold, >=100"))
    assert (
        "caught in >= 9 of 10 | 1 | caught 0, 1 changed; the pairs read +2.8% (median +3.9%)" in row
    )


def test_a_slow_run_plants_the_loop_kernels_too_a_slowtime_run_only_the_copies(
    tmp_path: Path,
) -> None:
    """Issue 44's "+2% more work": a slow run grows the loop kernels' iterations as it grows
    the copies' blocks, so both are planted there; a slowtime run sizes only the copies, so
    its loop kernels are untouched tests whose verdict regressed would be false."""
    summary = bench_module("ab_summary")
    (tmp_path / "runs.tsv").write_text(
        "01-slow-user-0.02-2pct\tslow\tuser\t0.02\t2%\t40\t1\n"
        "02-slowtime-user-0.02-2pct\tslowtime\tuser\t0.02\t2%\t60\t1\n"
    )
    slow = [
        _result("test_spin_work[512]", "regressed", 1.02, 0.04),
        _result("test_spin_work[2560]", "unsure", 1.017, 0.2),
        _result("test_copy_blocks[67108864]", "regressed", 1.021, 0.13),
    ]
    slowtime = [_result("test_spin_work[512]", "regressed", 1.02, 0.04)]
    for name, results in (
        ("01-slow-user-0.02-2pct", slow),
        ("02-slowtime-user-0.02-2pct", slowtime),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps({"results": results}))
    text = summary.tally([tmp_path])
    assert (
        "| +2% work at a 2% threshold, 20-100 us loop | caught in >= 9 of 10 | 1 | caught 1 |"
        in text
    )
    assert (
        "| +2% work at a 2% threshold, >=100 us loop | caught in >= 9 of 10 | 1 "
        "| caught 0, 1 unsure; the pairs read +1.7%" in text
    )
    assert (
        "| +2% work at a 2% threshold, >=100 us copy | caught in >= 9 of 10 | 1 | caught 1 |"
        in text
    )
    # The slow run planted every test it ran: only the slowtime run left one untouched.
    assert "| the untouched tests of slowdown runs | 0 false | 1 | 1 with a false verdict |" in text


def _paired(key: str, starts: list[tuple[str, str, str]], status: str = "same") -> dict:
    """An A/B result whose pairs' processes are ``starts``: (side, second it started, GPU),
    base and head alternating in pair order. A process's session id is its start: the tests
    one process timed share it."""
    infos = {s: {"date": f"2026-11-27T10:00:{s}+00:00", "machine": gpu} for _, s, gpu in starts}
    return {
        "key": key,
        "status": status,
        "against": {
            "pairs": len(starts) // 2,
            "base_sessions": [{"session": s} for side, s, _ in starts if side == "B"],
            "head_sessions": [{"session": s} for side, s, _ in starts if side == "H"],
        },
        "session_infos": infos,
    }


def test_the_two_gpu_summary_reads_each_gpus_sides_in_the_order_they_started() -> None:
    bench_module("xdist_compare")
    two = bench_module("two_gpus")
    assert two.expected_order(4) == "BHHBBHHB"
    gpu0 = [("B", "01", "GPU-0"), ("H", "05", "GPU-0"), ("H", "09", "GPU-0"), ("B", "13", "GPU-0")]
    gpu1 = [("B", "02", "GPU-1"), ("H", "06", "GPU-1"), ("H", "10", "GPU-1"), ("B", "14", "GPU-1")]
    document = {
        "results": [
            _paired("t.py::a", gpu0),
            _paired("t.py::b", gpu0),  # the same processes as a's
            _paired("t.py::c", gpu1),
            # base on one GPU, head on the other: the design forbids it, the summary names it
            _paired("t.py::d", [("B", "03", "GPU-0"), ("H", "07", "GPU-1")]),
        ]
    }
    order, split = two.sides_by_gpu(document)
    assert split == ["t.py::d"]
    assert order == {"GPU-0": "BBHHB", "GPU-1": "BHHHB"}  # d's processes break the pattern
    document["results"].pop()
    assert two.sides_by_gpu(document) == ({"GPU-0": "BHHB", "GPU-1": "BHHB"}, [])
    assert two.differing({"a": "same", "b": "same"}, {"a": "same", "b": "regressed"}) == ["b"]


def test_xdist_workers_seeing_their_own_gpu_as_cuda_0_are_told_apart_by_uuid() -> None:
    """Issue 20: a timing run's workers each see their GPU as cuda:0 (timing.gpus rotates
    CUDA_VISIBLE_DEVICES), so a result's GPU is its UUID."""
    compare = bench_module("xdist_compare")
    assert compare.gpu_of({"gpu": "cuda:0 GPU-4984127b-5958-aaff"}) == "GPU-4984127b"
    assert compare.gpu_of({"gpu": "cuda:1"}) == "cuda:1"
    assert compare.gpu_of({}) == ""


def test_every_fla_test_is_planted_and_its_spin_told(tmp_path: Path) -> None:
    """bench/fla_plant.py plants a spin after every fla test's call: each is a planted test
    of its duration class, and the run's line says the cycles and the ratio they measured."""
    summary = bench_module("ab_summary")
    results = [
        _result("test_l2norm", "regressed", 1.021, 0.045),
        _result("test_chunk_simple_gla", "same", 1.012, 0.31),
    ]
    calibration = {
        "target": 0.02,
        "picked": {"test_l2norm": 1800},
        "second": {"test_l2norm": {"1620": 1.018, "1800": 1.0204}},
    }
    run = _one_run(
        tmp_path,
        "01-slowtime-fla-0.02-2pct-lockstep\tslowtime\tfla\t0.02\t2%",
        results,
        calibration,
    )
    assert summary.planted_text(run) == "test_l2norm: 1800 cycles (+2.0%)"
    text = summary.tally([tmp_path])
    assert (
        "| +2% time at a 2% threshold, 20-100 us fla call | caught in >= 9 of 10 | 1 | caught 1 |"
        in text
    )
    assert "| +2% time at a 2% threshold, >=100 us fla call | caught in >= 9 of 10 | 1 " in text
    # Every test planted: no run with an untouched test to count.
    assert "| the untouched tests of slowdown runs | 0 false | 0 | 0 with a false verdict |" in text
