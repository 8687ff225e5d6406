"""Why it got slower, and more than time (issue 18), through the plugin on generated test
files: peak GPU memory gated (the fake timer reports what a call holds at its peak,
FAKE_PEAK_BYTES, as the device's allocator would; the decisions are unit-tested in
tests/judge/test_gate.py), a failure's per-kernel table, and its profiler trace."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from support import (
    KERNELS,
    NO_CONFIRM,
    TESTS,
    bench_module,
    commit,
    git,
    kernels,
    output,
    read_baseline,
    record_history,
)

from pytest_gpubench import cli
from pytest_gpubench.core.records import Measurement, Result
from pytest_gpubench.judge.gate import Gate
from pytest_gpubench.run import ncu

MiB = 1 << 20

SUITE = """
def test_sum(gpubench):
    gpubench(sum, range(100))

def test_join(gpubench):
    gpubench("".join, ["a"] * 100)
"""


def peaks(monkeypatch: pytest.MonkeyPatch, **by_test: int) -> None:
    monkeypatch.setenv("FAKE_PEAK_BYTES", json.dumps(by_test))


def test_a_call_holding_64_mib_more_fails_on_memory_and_a_save_keeps_the_history(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=SUITE)
    peaks(monkeypatch, test_sum=16 * MiB, test_join=4 * MiB)
    record_history(fake)
    stored = read_baseline(fake)["benchmarks"]["test_bench.py::test_sum"]["history"]
    assert [r["peak_bytes"] for r in stored] == [16 * MiB] * 3

    # Unchanged: A/A runs pass on memory, every time (the allocator's count is exact).
    for _ in range(3):
        result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=r.json")
        result.assert_outcomes(passed=2)
    [header] = [line for line in output(result).splitlines() if line.startswith("test ")]
    assert header.split()[-2:] == ["peak", "mem"]
    document = json.loads((fake.path / "r.json").read_text())
    assert {r["test"]: r["peak_bytes"] for r in document["results"]} == {
        "test_sum": 16 * MiB,
        "test_join": 4 * MiB,
    }

    # An extra 64 MiB temporary: its test fails on memory, its time unchanged.
    peaks(monkeypatch, test_sum=80 * MiB, test_join=4 * MiB)
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "test_sum more memory: peak memory 80 MiB per call, was 16 MiB: +64 MiB" in text
    assert "Traceback" not in text

    # A save does not take it without accept (the history stays); with accept it does.
    before = read_baseline(fake)
    result = fake.runpytest("--gpubench-save", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    after = read_baseline(fake)
    assert (
        after["benchmarks"]["test_bench.py::test_sum"]
        == before["benchmarks"]["test_bench.py::test_sum"]
    )
    result = fake.runpytest("--gpubench-save", "--gpubench-accept", NO_CONFIRM)
    result.assert_outcomes(passed=2)
    history = read_baseline(fake)["benchmarks"]["test_bench.py::test_sum"]["history"]
    assert [r["peak_bytes"] for r in history] == [16 * MiB] * 3 + [80 * MiB]  # same epoch
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)


def test_memory_thresholds_come_from_options_and_markers_and_bad_ones_are_one_line(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(
        test_bench="""
        import pytest

        def test_sum(gpubench):
            gpubench(sum, range(100))

        @pytest.mark.gpubench(memory_threshold="off")
        def test_join(gpubench):
            gpubench("".join, ["a"] * 100)
        """
    )
    peaks(monkeypatch, test_sum=16 * MiB, test_join=16 * MiB)
    record_history(fake)
    peaks(monkeypatch, test_sum=24 * MiB, test_join=1024 * MiB)
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=1, failed=1)
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-memory-threshold=60%").assert_outcomes(
        passed=2
    )
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-memory-slack=10MiB").assert_outcomes(
        passed=2
    )
    for bad in ("--gpubench-memory-slack=lots", "--gpubench-memory-threshold=-5%"):
        result = fake.runpytest("--gpubench", bad)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        assert "Traceback" not in output(result) and "INTERNALERROR" not in output(result)


def test_a_cpu_run_knows_no_peak_memory_and_shows_no_column(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=r.json")
    result.assert_outcomes(passed=2)
    assert "peak mem" not in output(result)
    history = read_baseline(fake)["benchmarks"]["test_bench.py::test_sum"]["history"]
    assert all("peak_bytes" not in r for r in history)  # CPU files stay as they were


@pytest.mark.slow
@pytest.mark.parametrize("pairing", ["lockstep", "processes"])
def test_against_a_revision_a_commit_that_holds_64_mib_more_fails_on_memory(
    fake: pytest.Pytester, pairing: str
) -> None:
    """The least the working tree's processes held against the most the revision's did (in
    lockstep, each side's call in the one process): unchanged code passes, an extra 64 MiB
    fails, in the same job."""
    kernels = "def work(n):\n    return sum(range(n))\n\n\nwork.fake_peak_bytes = {peak}\n"
    fake.makepyfile(kernels=kernels.format(peak=16 * MiB), test_bench=TESTS)
    fake.path.joinpath(".gitignore").write_text("__pycache__/\n.gpubench/\ntimer-calls.log\n")
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    fast = ("--gpubench-pairs=2", "--gpubench-confirm=0", f"--gpubench-pairing={pairing}")
    fake.runpytest("--gpubench-against=HEAD", *fast).assert_outcomes(passed=2)
    fake.makepyfile(kernels=kernels.format(peak=80 * MiB))
    result = fake.runpytest("--gpubench-against=HEAD", *fast)
    result.assert_outcomes(passed=1, failed=1)
    assert "more memory: peak memory 80 MiB per call, was 16 MiB" in output(result)


# The generated repository's kernel module (support.KERNELS) under tests that declare 1e9
# bytes per call. The fake timer times the copy probes at 1 ms too: the fastest copy moves
# 2 x 64 MiB per ms (134 GB/s, timing.device's CPU copy), so 1e9 bytes take at least 7.5 ms
# and a call under 2.5 ms (gate.FLOOR_MARGIN) is impossible. ``fake_factor`` 10 (10 ms) is
# plausible; 1 (1 ms, a cached output) is not.
FLOORED_TESTS = """
from kernels import work


def test_sum(gpubench):
    assert gpubench(work, 100, bytes=1e9) == 4950


def test_join(gpubench):
    assert gpubench(",".join, ["a", "b"], bytes=1000) == "a,b"
"""


@pytest.mark.slow
@pytest.mark.parametrize("pairing", ["lockstep", "processes"])
def test_against_a_revision_a_call_faster_than_its_declared_bytes_allow_fails_as_impossible(
    fake: pytest.Pytester, capsys: pytest.CaptureFixture[str], pairing: str
) -> None:
    """Issue 18: the physical floor holds against a revision as against a stored history.
    The processes of each side measure the copy rates; unchanged code at a plausible time
    passes; a working tree whose call became faster than its declared bytes allow (a cached
    output: 10x faster than the revision's) fails as impossible, not as an improvement, with
    both sides' traces; gpubench compare of the run's file judges it again the same. Once
    the revision is the cached one, its fix is not gated, not a regression."""
    fake.makepyfile(kernels=KERNELS.format(factor=10.0), test_bench=FLOORED_TESTS)
    fake.path.joinpath(".gitignore").write_text("__pycache__/\n.gpubench/\ntimer-calls.log\n")
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    fast = (
        "--gpubench-pairs=2",
        "--gpubench-confirm=0",
        "--gpubench-json=r.json",
        f"--gpubench-pairing={pairing}",
    )
    fake.runpytest("--gpubench-against=HEAD", *fast).assert_outcomes(passed=2)
    results = json.loads((fake.path / "r.json").read_text())["results"]
    honest = {r["test"]: r for r in results}["test_sum"]
    assert honest["status"] == "same" and honest["peak_gbs"] > 0 and honest["cached_gbs"] > 0

    fake.makepyfile(kernels=KERNELS.format(factor=1.0))
    result = fake.runpytest("--gpubench-against=HEAD", *fast)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "FAILED test_bench.py::test_sum" in text and "Traceback" not in text
    assert "over 3x the fastest this device's copies allow" in text
    results = json.loads((fake.path / "r.json").read_text())["results"]
    by_test = {r["test"]: r for r in results}
    assert by_test["test_sum"]["status"] == "impossible"
    assert by_test["test_join"]["status"] == "same"
    # The pairs it was measured in stay beside the verdict, for the reports.
    # (in lockstep an impossible call is settled on its first pair: no more are taken)
    assert by_test["test_sum"]["against"]["pairs"] == (2 if pairing == "processes" else 1)
    evidence = fake.path / "gpubench-evidence"
    # Each side's trace from its processes; in lockstep the working tree's, from this one.
    for side in ("base", "head") if pairing == "processes" else ("",):
        assert list((evidence / side).glob("test_bench.py_test_sum*.trace.json")), side

    capsys.readouterr()
    assert cli.main(["compare", str(fake.path / "r.json")]) == 1
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if line.startswith("test_sum ")]
    assert "impossible" in row

    # The cached output committed, then fixed: the revision's calls are the impossible ones,
    # and the working tree's, 10x slower, are no regression.
    commit(fake.path, "a cached output")
    fake.makepyfile(kernels=KERNELS.format(factor=10.0))
    result = fake.runpytest("--gpubench-against=HEAD", *fast)
    result.assert_outcomes(passed=2)
    assert "test_sum: not gated: HEAD (" in output(result)
    assert "'s calls are impossible (1.00 ms per call" in output(result)
    results = json.loads((fake.path / "r.json").read_text())["results"]
    assert {r["test"]: r["status"] for r in results} == {
        "test_sum": "not gated",
        "test_join": "same",
    }


def test_a_regression_names_the_kernel_that_got_slower_in_its_failure_and_summary(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: the failure, the JUnit text and the Markdown summary carry a per-kernel
    table of the reference's call against this one."""
    fake.makepyfile(test_bench=SUITE)
    monkeypatch.setenv(
        "FAKE_KERNELS",
        kernels(
            {"name": "gemm_kernel", "grid": [64, 1, 1], "block": [128, 1, 1], "share": 0.75},
            {"name": "bias_kernel", "grid": [8, 1, 1], "block": [64, 1, 1], "share": 0.25},
        ),
    )
    record_history(fake)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    result = fake.runpytest(
        "--gpubench", NO_CONFIRM, "--junitxml=j.xml", "--gpubench-markdown=r.md"
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_sum regressed: 1.00 ms -> 1.20 ms*",
            "*per kernel (time per call: its share of the device time times the call's time):",
            "*kernel * launches * before * after * change * configuration",
            "*gemm_kernel * 1 * 750 µs * 900 µs * +150 µs * grid (64,1,1) block (128,1,1)",
            "*bias_kernel * 1 * 250 µs * 300 µs * +50.0 µs * grid (8,1,1) block (64,1,1)",
        ]
    )
    assert "gemm_kernel" in (fake.path / "j.xml").read_text()
    markdown = (fake.path / "r.md").read_text()
    assert "<details><summary>test_sum: per kernel" in markdown and "gemm_kernel" in markdown
    # Nothing of the kind for a test that passed.
    assert "test_join: per kernel" not in markdown


def test_a_failure_leaves_a_trace_of_one_call_in_the_evidence_directory_and_a_pass_none(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=r.json")
    result.assert_outcomes(passed=1, failed=1)
    evidence = fake.path / "gpubench-evidence"
    [trace] = [p for p in evidence.iterdir() if p.name != ".gitignore"]
    # Issue 19: a folder the run created ignores itself, as pytest's .pytest_cache does.
    assert (evidence / ".gitignore").read_text().splitlines()[-1] == "*"
    assert trace.name.startswith("test_bench.py_test_sum-")
    assert trace.name.endswith(".trace.json")
    assert json.loads(trace.read_text())["traceEvents"]  # Chrome/Perfetto JSON, with events
    assert f"evidence: a profiler trace of one call, {trace}" in output(result)
    stored = {
        r["test"]: r["trace"] for r in json.loads((fake.path / "r.json").read_text())["results"]
    }
    assert stored == {"test_sum": str(trace), "test_join": None}

    # A run where nothing fails leaves nothing (a flagged test that passes keeps no trace)...
    trace.unlink()
    monkeypatch.delenv("FAKE_SCALES")
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    assert [p.name for p in evidence.iterdir()] == [".gitignore"]
    # ...unless every trace is asked for, into the directory named.
    result = fake.runpytest(
        "--gpubench", NO_CONFIRM, "--gpubench-profile", "--gpubench-evidence=ev"
    )
    result.assert_outcomes(passed=2)
    names = sorted(p.name.split("-")[0] for p in (fake.path / "ev").glob("*.json"))
    assert names == ["test_bench.py_test_join", "test_bench.py_test_sum"]


def test_each_measurement_is_judged_once_for_its_evidence_and_its_verdict(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 47: the judgement that keeps a failure's trace (while its workload exists) is
    the verdict the test gets, not a second judgement of the same look; a ratio to a
    reference too."""
    fake.makepyfile(
        test_bench=SUITE + "\ndef test_max(gpubench):\n    gpubench(max, range(9), reference=min)\n"
    )
    record_history(fake)
    judged: list[str] = []
    judge = Gate.judge

    def counted(self: Gate, measurement: Measurement, *args: Any) -> Result:
        judged.append(measurement.key)
        return judge(self, measurement, *args)

    monkeypatch.setattr(Gate, "judge", counted)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=2, failed=1)
    assert "test_sum regressed" in output(result)
    assert sorted(judged) == [
        "test_bench.py::test_join",
        "test_bench.py::test_max",
        "test_bench.py::test_max#vs-reference",
        "test_bench.py::test_sum",
    ]
    evidence = fake.path / "gpubench-evidence"
    assert [p.name.split("-")[0] for p in evidence.glob("*.json")] == ["test_bench.py_test_sum"]


def test_a_trace_that_cannot_be_written_fails_nothing_and_says_why(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    (fake.path / "taken").write_text("a file where the evidence directory would go")
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-evidence=taken")
    result.assert_outcomes(passed=1, failed=1)  # the regression's own failure, no error
    text = output(result)
    assert "test_sum regressed" in text and "no trace of one call: FileExistsError" in text
    assert "Traceback" not in text


def test_a_trace_the_profiler_could_not_write_is_named_nowhere(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 46: torch's profiler logs a trace it cannot write and returns, and the failure
    line, the JSON report and JUnit named a file that did not exist. Now the run says why
    in one line and no report names it (its path taken by a folder the profiler cannot
    replace, as an unwritable folder would leave it)."""
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    taken = fake.path / "ev" / f"{ncu.stem('test_bench.py::test_sum')}.trace.json"
    (taken / "inside").mkdir(parents=True)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    args = ("--gpubench", NO_CONFIRM, "--gpubench-evidence=ev", "--gpubench-json=r.json")
    result = fake.runpytest(*args, "--junitxml=j.xml")
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert f"no trace of one call: OSError: the profiler could not write {taken}" in text
    assert "evidence: a profiler trace" not in text and "Traceback" not in text
    [summed] = [
        r
        for r in json.loads((fake.path / "r.json").read_text())["results"]
        if r["test"] == "test_sum"
    ]
    assert summed["trace"] is None
    assert "evidence: a profiler trace" not in (fake.path / "j.xml").read_text()
    assert sorted(p.name for p in taken.parent.iterdir()) == [taken.name]  # no half-written one


def test_the_gpu_checks_table_reads_each_runs_report(tmp_path) -> None:
    """bench/evidence_checks.py's table (its GPU runs are issue 18's record): what each
    check looks for, from the reports of its runs."""
    checks = bench_module("evidence_checks")
    energy = {"joules_per_call": 1.4e-3, "watts": 690.0, "window_s": 0.1, "calls": 60}
    reports = {
        "01-aa": [{"test": "test_matmul_energy", "status": "ok", "passed": True,
                   "energy": {**energy, "sampled_watts": 700.0, "power_source": "instant"}}],
        "02-temp": [{"test": "test_temporary", "status": "more memory", "passed": False,
                     "peak_bytes": 3 * 64 * MiB, "reason": "peak memory 192 MiB"}],
        "03-cached": [{"test": "test_cached", "status": "impossible", "passed": False,
                       "reason": "faster than the device can move its bytes"}],
    }  # fmt: skip
    for name, results in reports.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"results": results}))
    rows = checks.summary(tmp_path)
    assert "1.4 mJ/call, 690 W counter vs 700 W instant (0.986)" in rows[2]
    assert "| 1 |" in rows[3] and "peak 201326592 B; peak memory 192 MiB" in rows[3]
    assert "test_cached impossible" in rows[4]


# A stand-in for Nsight Compute's ncu, as the plugin uses it: profiling (its options, then
# the command it runs) writes a "report" holding the CSV that `ncu --import R --csv --page
# details` prints back, one kernel per measurement of the tests the fresh process was asked
# to run, in the range that measurement's call is made in; each call's arguments go to
# ncu-calls.log. FAKE_NCU_FAIL: it profiles nothing and exits 1, as without the counters'
# permission; FAKE_NCU_FAIL=run: it runs the process to its end and writes no report, its
# error in its log file, as the real one does then.
FAKE_NCU = r"""#!/usr/bin/env python3
import csv, json, os, subprocess, sys
from pathlib import Path
from pytest_gpubench.run.ncu import range_name
args = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
if "--import" in args:
    print("==PROF== the report's CSV follows")
    sys.stdout.write(Path(args[args.index("--import") + 1]).read_text())
    sys.exit(0)
said = "==ERROR== ERR_NVGPUCTRPERM - no permission to the GPU's performance counters"
if os.environ.get("FAKE_NCU_FAIL") == "1":
    print(said)
    sys.exit(1)
flags, i = {"--nvtx", "--force-overwrite"}, 0
while args[i].startswith("--"):
    i += 1 if args[i] in flags else 2
request = json.loads(Path(os.environ["PYTEST_GPUBENCH_CHILD"]).read_text())["request"]  # before
code = subprocess.call(args[i:])
if os.environ.get("FAKE_NCU_FAIL") == "run":
    Path(args[args.index("--log-file") + 1]).write_text("==PROF== profiling\n" + said + "\n")
    sys.exit(code)
assert request["ncu"] is True, request
rows = []
for nodeid in request["nodeids"] or ():
    where = f'"1 ""<default domain>:{range_name(nodeid)}:none:none"" "'
    for metric, unit, value in (("gpu__time_duration.sum", "us", "1,250.5"),
                                ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "70.8"),
                                ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "58.2"),
                                ("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "81.1")):
        rows.append(["0", "1", "python", "host", where, "", "fake_kernel", "1", "7",
                     "(128, 1, 1)", "(16384, 1, 1)", "0", "9.0",
                     "Command line profiler metrics", metric, unit, value])
export = args[args.index("--export") + 1] + ".ncu-rep"
with open(export, "w", newline="") as out:
    writer = csv.writer(out, quoting=csv.QUOTE_ALL)
    writer.writerow(["ID", "Process ID", "Process Name", "Host Name",
                     "thread Domain:Push/Pop_Range:PL_Type", "Id:Domain:Start/Stop_Range",
                     "Kernel Name", "Context", "Stream", "Block Size", "Grid Size", "Device",
                     "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    writer.writerows(rows)
sys.exit(code)
"""


def fake_ncu(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """FAKE_NCU as ``ncu`` on PATH; its calls' log."""
    folder = pytester.path / "ncu-bin"
    folder.mkdir()
    script = folder / "ncu"
    script.write_text(FAKE_NCU)
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    log = pytester.path / "ncu-calls.log"
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    return log


@pytest.mark.slow
def test_with_ncu_a_failure_shows_nsight_computes_metrics_of_one_call_and_keeps_its_report(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: --gpubench-ncu profiles one call of the failing test under ncu, in a fresh
    process that times nothing, and shows its kernels' metrics in the failure and the JSON."""
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    calls = fake_ncu(fake, monkeypatch)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    result = fake.runpytest("--gpubench", "--gpubench-ncu", NO_CONFIRM, "--gpubench-json=r.json")
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    [report] = (fake.path / "gpubench-evidence").glob("*.ncu-rep")
    assert report.name.startswith("test_bench.py_test_sum-")
    result.stdout.fnmatch_lines(
        [
            f"*evidence: Nsight Compute, one call of this, {report}:",
            "*kernel * time * DRAM * SM * occupancy * grid x block",
            "*fake_kernel * 1.25 ms * 70.8% * 58.2% * 81.1% * (16384, 1, 1) x (128, 1, 1)",
        ]
    )
    assert "Traceback" not in text
    [profiled, read] = [json.loads(line) for line in calls.read_text().splitlines()]
    assert profiled[:4] == ["--nvtx", "--nvtx-include", "regex:gpubench-ncu.*/", "--metrics"]
    assert profiled[5:7] == ["--launch-count", "64"]  # per test of the process
    assert profiled[profiled.index("--log-file") + 1] == str(report.with_suffix(".ncu.log"))
    assert read[:2] == ["--import", str(report)]
    by_test = {
        r["test"]: r["ncu"] for r in json.loads((fake.path / "r.json").read_text())["results"]
    }
    assert by_test["test_join"] is None  # it passed: no profile
    [kernel] = by_test["test_sum"]["kernels"]
    assert by_test["test_sum"]["report"] == str(report)
    assert kernel["name"] == "fake_kernel" and kernel["grid"] == "(16384, 1, 1)"
    assert ["dram__throughput.avg.pct_of_peak_sustained_elapsed", 70.8, "%"] in kernel["metrics"]


@pytest.mark.slow
def test_without_ncu_on_path_the_option_is_one_line_and_a_failing_ncu_fails_nothing(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=SUITE)
    record_history(fake)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # python, no ncu
    result = fake.runpytest("--gpubench", "--gpubench-ncu")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no ncu is on PATH" in output(result) and "Traceback" not in output(result)

    # Where the plugin does not time, the ini's option needs no ncu (a shared ini file).
    fake.makeini("[pytest]\ngpubench_ncu = true\n")
    fake.runpytest().assert_outcomes(passed=2)
    fake.runpytest("--gpubench-disable").assert_outcomes(passed=2)

    monkeypatch.setenv("PATH", path)
    fake_ncu(fake, monkeypatch)
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.2}))
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=1, failed=1)  # a report
    assert list((fake.path / "gpubench-evidence").glob("*.ncu-rep"))
    monkeypatch.setenv("FAKE_NCU_FAIL", "1")
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)  # the regression's own failure, no error
    text = output(result)
    assert "test_sum regressed" in text and "no Nsight Compute metrics: " in text
    assert "ERR_NVGPUCTRPERM" in text and "Traceback" not in text
    # The earlier run's report is not shown as this one's, and is gone.
    assert "evidence: Nsight Compute, one call" not in text
    assert not list((fake.path / "gpubench-evidence").glob("*.ncu-rep"))
    # ncu ran the process to its end and profiled nothing: its own error is the note.
    monkeypatch.setenv("FAKE_NCU_FAIL", "run")
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1, failed=1)
    text = output(result)
    assert "no Nsight Compute metrics: ERR_NVGPUCTRPERM - no permission" in text, text
    assert "Traceback" not in text


@pytest.mark.usefixtures("processes_pairing")  # the structure it was written for
@pytest.mark.slow
def test_against_a_revision_ncu_profiles_one_call_of_each_side(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(kernels=KERNELS.format(factor=1.0), test_bench=TESTS)
    fake.path.joinpath(".gitignore").write_text(
        "__pycache__/\n.gpubench/\ntimer-calls.log\nncu-bin/\nncu-calls.log\n"
    )
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    fake.makepyfile(kernels=KERNELS.format(factor=1.08))
    fake_ncu(fake, monkeypatch)
    fast = ("--gpubench-pairs=2", "--gpubench-confirm=0")
    result = fake.runpytest("--gpubench-against=HEAD", "--gpubench-ncu", *fast)
    result.assert_outcomes(passed=1, failed=1)
    evidence = fake.path / "gpubench-evidence"
    base, head = evidence / "base" / "ncu.ncu-rep", evidence / "head" / "ncu.ncu-rep"
    result.stdout.fnmatch_lines(
        [
            f"*evidence: Nsight Compute, one call of the revision's, {base}:",
            "*fake_kernel * 1.25 ms * 70.8%*",
            f"*evidence: Nsight Compute, one call of the working tree's, {head}:",
            "*fake_kernel * 1.25 ms * 70.8%*",
        ]
    )
    assert "Nsight Compute's metrics of 1 failing test" in output(result)


def test_ncus_csv_is_read_by_range_in_launch_order_and_bad_stored_values_are_one_line() -> None:
    """The details page as ncu 2025 prints it (the device's, 2026-11-28): its own lines
    first, a row per metric, thousands separators; rows of other ranges are not ours."""
    from pytest_gpubench.core.records import NcuEvidence
    from pytest_gpubench.run import ncu

    ours = ncu.range_name("t.py::test_a")
    header = (
        '"ID","Process ID","Process Name","Host Name","thread Domain:Push/Pop_Range:PL_Type:'
        'PL_Value:CLR_Type:Color:Msg_Type:Msg","Id:Domain:Start/Stop_Range:PL_Type:PL_Value:'
        'CLR_Type:Color:Msg_Type:Msg","Kernel Name","Context","Stream","Block Size",'
        '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
    )

    def row(i: int, where: str, kernel: str, metric: str, unit: str, value: str) -> str:
        stack = f'"737  ""<default domain>:{where}:none:none:none:none:none:none"" "'
        return (
            f'"{i}","737","python3.12","127.0.0.1",{stack},"","{kernel}","1","7",'
            f'"(128, 1, 1)","(16384, 1, 1)","0","9.0","Command line profiler metrics",'
            f'"{metric}","{unit}","{value}"'
        )

    text = "\n".join(
        [
            "==PROF== Connected to process 737 (/usr/bin/python3.12)",
            header,
            row(0, ours, "void gelu<4>(int, T2)", "gpu__time_duration.sum", "ns", "32,448"),
            row(0, ours, "void gelu<4>(int, T2)", "sm__throughput.avg.pct", "%", "58.18"),
            row(1, ours, "add_kernel", "gpu__time_duration.sum", "ns", "46,208"),
            row(1, ours, "add_kernel", "sm__throughput.avg.pct", "%", "n/a"),
            row(2, "another range", "mul_kernel", "gpu__time_duration.sum", "ns", "9"),
            "==WARNING== a line of ncu's own after the table",
        ]
    )
    kernels = ncu.parse(text)
    [(digest, launched)] = kernels.items()
    assert digest == ncu.digest("t.py::test_a")
    assert [k.name for k in launched] == ["void gelu<4>(int, T2)", "add_kernel"]
    assert launched[0].metric("gpu__time_duration.sum") == 32448.0
    assert launched[1].metrics == (("gpu__time_duration.sum", 46208.0, "ns"),)
    found = ncu.evidence(Path("r.ncu-rep"), kernels, "t.py::test_a")
    assert found is not None and NcuEvidence.from_json(found.to_json()) == found
    assert ncu.evidence(Path("r.ncu-rep"), kernels, "t.py::test_b") is None
    assert ncu.parse("==ERROR== no report\n") == {}
    # ncu and the profiler's trace spell a kernel differently: its base name is the same.
    from pytest_gpubench.core.kernels import base_name

    traced = "void at::native::vectorized_elementwise_kernel<4, at::native::F>(int, T2)"
    assert base_name(traced) == base_name("void vectorized_elementwise_kernel<4, F>(int, T2)")
    assert base_name("_scale_kernel") == "_scale_kernel"
    for bad in (5, {"report": 1}, {"report": "r", "kernels": [{"name": "k", "metrics": [[1]]}]}):
        with pytest.raises(ValueError, match="'ncu'"):
            NcuEvidence.from_json(bad)
