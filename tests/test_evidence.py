"""Why it got slower, and more than time (issue 18), through the plugin on generated test
files: peak GPU memory gated (the fake timer reports what a call holds at its peak,
FAKE_PEAK_BYTES, as the device's allocator would; the decisions are unit-tested in
tests/test_gate.py), a failure's per-kernel table, and its profiler trace."""

from __future__ import annotations

import json

import pytest
from support import (
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
def test_against_a_revision_a_commit_that_holds_64_mib_more_fails_on_memory(
    fake: pytest.Pytester,
) -> None:
    """The least the working tree's processes held against the most the revision's did:
    unchanged code passes, an extra 64 MiB fails, in the same job."""
    kernels = "def work(n):\n    return sum(range(n))\n\n\nwork.fake_peak_bytes = {peak}\n"
    fake.makepyfile(kernels=kernels.format(peak=16 * MiB), test_bench=TESTS)
    fake.path.joinpath(".gitignore").write_text("__pycache__/\n.gpubench/\ntimer-calls.log\n")
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    fast = ("--gpubench-pairs=2", "--gpubench-confirm=0")
    fake.runpytest("--gpubench-against=HEAD", *fast).assert_outcomes(passed=2)
    fake.makepyfile(kernels=kernels.format(peak=80 * MiB))
    result = fake.runpytest("--gpubench-against=HEAD", *fast)
    result.assert_outcomes(passed=1, failed=1)
    assert "more memory: peak memory 80 MiB per call, was 16 MiB" in output(result)


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
