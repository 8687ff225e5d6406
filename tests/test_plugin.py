"""Behaviour seen by users, through pytester: generated test files, a deterministic fake timer
(tests/support.py, fixtures in tests/conftest.py).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from support import (
    BENCH,
    CUDA,
    KIND,
    MARKDOWN_HEADER,
    USAGE_ERROR,
    baseline_file,
    device_key,
    output,
    read_baseline,
    timer_calls,
)

# --- without --gpubench ---------------------------------------------------------------------


def test_without_the_flag_the_function_runs_once_untimed(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        f"""
        calls = []

        def work(x, y=0):
            calls.append((x, y))
            return x + y

        def test_a(gpubench):
            assert gpubench(work, 1, y=2) == 3
            assert calls == [(1, 2)]
            assert gpubench.device == {KIND!r}
            assert gpubench.results == []
        """
    )
    result = fake.runpytest()
    result.assert_outcomes(passed=1)
    assert timer_calls(fake) == []
    assert not (fake.path / ".gpubench").exists()
    result.stdout.no_fnmatch_line("*gpubench:*")


def test_without_the_flag_pedantic_runs_setup_and_function_once(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        calls = []

        def test_a(gpubench):
            out = gpubench.pedantic(
                lambda v: calls.append(v) or v,
                setup=lambda: calls.append("setup") or ((7,), {}),
                warmup=3,
                rounds=5,
            )
            assert out == 7
            assert calls == ["setup", 7]
        """
    )
    fake.runpytest().assert_outcomes(passed=1)
    assert timer_calls(fake) == []


# --- new, save, and the verdicts -----------------------------------------------------------


def test_without_a_baseline_tests_are_new_and_pass(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            f"*= gpubench: * ({device_key()}) =*",
            "test *timer *median *noise *baseline *change *p *verdict *GB/s *% peak",
            "test_join *fake * ms * - * - * - * new * - * -",
            "test_sum *fake * ms * - * - * - * new * - * -",
            f"no baseline yet at {fake.path}/.gpubench/{device_key()}.json: "
            "run with --gpubench-save",
            "gpubench: 2 new (*threshold 5%*)",
        ]
    )
    assert not (fake.path / ".gpubench").exists()
    assert timer_calls(fake) == [f"auto {KIND} False"] * 2


def test_save_writes_the_baseline_of_this_device(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=2)
    path = baseline_file(fake)
    assert path.name == f"{device_key()}.json"
    result.stdout.fnmatch_lines([f"baseline written: {path}"])
    data = read_baseline(fake)
    assert data["schema"] == "pytest-gpubench/1"
    assert data["device"]["name"]
    assert sorted(data["benchmarks"]) == ["test_bench.py::test_join", "test_bench.py::test_sum"]
    entry = data["benchmarks"]["test_bench.py::test_sum"]
    assert entry["timer"] == "fake"
    assert len(entry["samples_ms"]) >= 10
    assert entry["median_ms"] == pytest.approx(1.0, rel=0.01)
    assert entry["warmup"] >= 6 and entry["calls_per_sample"] == 1
    text = path.read_text(encoding="utf-8")
    assert '"samples_ms": [' in text and text.count("\n") < 60  # samples on one line
    # no temporary file left; the lock file and a .gitignore for both
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".gitignore",
        path.name,
        f"{path.name}.lock",
    ]


def test_save_keeps_the_entries_of_tests_that_did_not_run(saved: pytest.Pytester) -> None:
    before = read_baseline(saved)["benchmarks"]
    result = saved.runpytest("--gpubench-save", "-k", "test_sum")
    result.assert_outcomes(passed=1, deselected=1)
    after = read_baseline(saved)["benchmarks"]
    assert after["test_bench.py::test_join"] == before["test_bench.py::test_join"]
    assert after["test_bench.py::test_sum"] != before["test_bench.py::test_sum"]


def test_save_twice_with_nothing_to_measure_leaves_the_file_alone(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    result = saved.runpytest("--gpubench-save", "-k", "no_such_test")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines([f"baseline unchanged: {path}"])
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_a_a_run_passes(saved: pytest.Pytester) -> None:
    before = baseline_file(saved).read_bytes()
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_join *fake * ms * ms * ok *",
            "test_sum *fake * ms * ms * ok *",
            "gpubench: 2 ok (*threshold 5%*)",
        ]
    )
    assert baseline_file(saved).read_bytes() == before  # only --gpubench-save writes


def test_twenty_percent_slower_fails_as_regressed(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_sum regressed: 1.00* ms -> 1.2* ms (+20.0%, p=*, threshold 5%)",
            "*test_join regressed: 1.00* ms -> 1.2* ms (+20.0%, p=*, threshold 5%)",
            "gpubench: 2 regressed (*threshold 5%*)",
        ]
    )
    result.stdout.no_fnmatch_line("*Traceback*")
    result.stdout.no_fnmatch_line("*def test_sum*")  # a one-line failure, no source
    for entry in json.loads((saved.path / "out.json").read_text())["results"]:
        assert entry["verdict"]["status"] == "regressed"
        assert entry["verdict"]["alpha"] == pytest.approx(0.01 / 2)  # two benchmark tests
        assert entry["remeasured"] is True  # a doubtful verdict is measured twice
        assert entry["passed"] is False  # the test failed: such results are never saved


def test_twenty_percent_faster_passes_as_improved(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "0.8")
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_join *-20.0%* improved *", "gpubench: 2 improved (*)"])


def test_improved_fails_with_fail_on_improvement(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "0.8")
    result = saved.runpytest("--gpubench", "--gpubench-fail-on-improvement")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_sum improved: 1.00* ms -> 0.8* ms (-20.0%, p=*, threshold 5%); "
            "refresh the baseline with --gpubench-save"
        ]
    )


def test_very_noisy_timings_pass_as_unstable(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NOISE", "0.5")
    result = saved.runpytest("--gpubench", "--gpubench-max-samples=30")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "test_join *fake * unstable *",
            "test_join: unstable: the 95% interval of the ratio, *cannot rule out a change of 5%",
            "gpubench: 2 unstable (*threshold 5%*)",
        ]
    )


def test_save_mode_records_a_regression_without_failing(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    saved.runpytest("--gpubench-save").assert_outcomes(passed=2)
    entry = read_baseline(saved)["benchmarks"]["test_bench.py::test_sum"]
    assert entry["median_ms"] == pytest.approx(1.2, rel=0.01)
    saved.runpytest("--gpubench").assert_outcomes(passed=2)


def test_the_regression_fails_the_call_phase(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench", "--junitxml=junit.xml", "-k", "test_sum")
    result.assert_outcomes(failed=1, deselected=1)
    [case] = ET.parse(saved.path / "junit.xml").getroot().iter("testcase")
    assert case.get("name") == "test_sum"
    [failure] = case.findall("failure")
    assert "test_sum regressed: " in (failure.get("message") or "")
    assert case.findall("error") == []


def test_a_baseline_of_another_timer_is_not_compared(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    data = json.loads(path.read_text())
    data["benchmarks"]["test_bench.py::test_sum"]["timer"] = "wall"
    path.write_text(json.dumps(data))
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_sum: new: baseline timed by wall, now fake: not comparable"])


def test_a_baseline_from_other_software_is_reported(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    data = json.loads(path.read_text())
    version, data["device"]["torch"] = data["device"]["torch"], "1.0.0"
    path.write_text(json.dumps(data))
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [f"baseline was recorded with other software: torch 1.0.0 -> {version}"]
    )


def test_alpha_is_corrected_for_the_tests_that_run(saved: pytest.Pytester) -> None:
    result = saved.runpytest("--gpubench", "-k", "test_sum", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1, deselected=1)
    [entry] = json.loads((saved.path / "out.json").read_text())["results"]
    assert entry["verdict"]["alpha"] == 0.01


# --- settings from the marker and the ini file ----------------------------------------------


def test_marker_threshold_overrides_the_command_line(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved.makepyfile(
        test_bench=BENCH.replace(
            "def test_sum(", '@pytest.mark.gpubench(threshold="30%")\ndef test_sum('
        )
    )
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    result = saved.runpytest("--gpubench")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_join regressed: *(+20.0%, p=*, threshold 5%)"])
    result.stdout.fnmatch_lines(["test_sum *+20.0%* ok *"])


def test_ini_settings_apply_and_the_command_line_wins(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved.makeini("[pytest]\ngpubench_threshold = 30%\n")
    monkeypatch.setenv("FAKE_SCALE", "1.2")
    saved.runpytest("--gpubench").assert_outcomes(passed=2)
    result = saved.runpytest("--gpubench", "--gpubench-threshold=10%")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*test_sum regressed: *threshold 10%)"])


def test_ini_can_enable_gpubench(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_enabled = true\n")
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest().assert_outcomes(passed=2)
    assert len(timer_calls(fake)) == 2


def test_marker_timer_reaches_the_timer_hook(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(timer="cuda-event", group="g", bytes=1000)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    fake.runpytest("--gpubench", "--gpubench-timer=wall").assert_outcomes(passed=1)
    # the test's measurement, then the session's measurement of peak bandwidth (bytes given)
    assert timer_calls(fake)[0] == f"cuda-event {KIND} False"


def test_unknown_marker_keyword_is_a_usage_error(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.gpubench(treshold="10%")
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    for args in ((), ("--gpubench",)):
        result = fake.runpytest(*args)
        assert result.ret == USAGE_ERROR
        result.stderr.fnmatch_lines(
            [
                "ERROR: test_bench.py::test_a: unknown keyword 'treshold' in "
                "@pytest.mark.gpubench; expected one of threshold, alpha, *"
            ]
        )
        assert "Traceback" not in output(result)


def test_invalid_marker_value_is_a_usage_error(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(threshold="abc")
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest("--gpubench")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_invalid_marker_value_is_a_usage_error.py::test_a: invalid "
            "@pytest.mark.gpubench(threshold=...) 'abc': expected a percentage such as 5%"
        ]
    )


def test_positional_marker_arguments_are_a_usage_error(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench("5%")
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest()
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: test_*.py::test_a: @pytest.mark.gpubench takes keywords only, "
            "got positional ('5%',)"
        ]
    )


def test_marker_sample_bounds_are_checked_against_the_session_settings(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(min_samples=300)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    fake.runpytest("--gpubench", "--gpubench-max-samples=500").assert_outcomes(passed=1)


def test_marker_sample_bounds_beyond_the_session_ones_are_a_usage_error(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        """
        import pytest

        @pytest.mark.gpubench(min_samples=50)
        def test_a(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest("--gpubench", "--gpubench-max-samples=20")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: *test_a*min_samples 50 exceeds max_samples 20*"])
    assert "Traceback" not in output(result)


# --- bad command-line values ----------------------------------------------------------------


@pytest.mark.parametrize(
    "option, message",
    [
        (
            "--gpubench-threshold=abc",
            "ERROR: invalid --gpubench-threshold 'abc': expected a percentage such as 5%",
        ),
        (
            "--gpubench-alpha=2",
            "ERROR: invalid --gpubench-alpha '2': "
            "expected a significance level between 0 and 1 such as 0.01",
        ),
        (
            "--gpubench-timer=gpu",
            "ERROR: invalid --gpubench-timer 'gpu': expected one of auto, cuda-graph, *",
        ),
        (
            "--gpubench-min-samples=1",
            "ERROR: invalid --gpubench-min-samples '1': expected a whole number of at least 2",
        ),
    ],
)
def test_invalid_options_are_usage_errors_naming_the_option(
    fake: pytest.Pytester, option: str, message: str
) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", option)
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in output(result)


def test_invalid_ini_value_is_a_usage_error_naming_the_key(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_alpha = 5%\n")
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest()
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: invalid ini gpubench_alpha '5%': expected a significance level such as 0.01"]
    )


def test_unknown_option_values_only_matter_for_their_option(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", "--gpubench-min-samples=50", "--gpubench-max-samples=20")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: invalid sample bounds: min_samples 50 exceeds *"])


# --- damaged baselines ----------------------------------------------------------------------

DAMAGED = {
    "corrupt": ("{{{", "is not valid JSON (Expecting property name * at line 1)"),
    "truncated": ('{\n  "schema": "pytest-gpubench/1",\n  "benchm', "is not valid JSON (*)"),
    "empty": ("", "is not valid JSON (Expecting value at line 1)"),
    "foreign": (
        json.dumps({"machine_info": {}, "benchmarks": [], "version": "5.1.0"}),
        "has schema None, expected 'pytest-gpubench/1'",
    ),
    "bad-entry": (
        json.dumps(
            {
                "schema": "pytest-gpubench/1",
                "device": {},
                "benchmarks": {"test_bench.py::test_sum": {"timer": "fake", "samples_ms": [1]}},
            }
        ),
        "has an entry 'test_bench.py::test_sum' that has fewer than 2 samples",
    ),
}


@pytest.mark.parametrize("save", [False, True], ids=["run", "save"])
@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_baseline_is_a_usage_error_and_left_alone(
    fake: pytest.Pytester, damage: str, save: bool
) -> None:
    content, problem = DAMAGED[damage]
    fake.makepyfile(test_bench=BENCH)
    path = fake.path / ".gpubench" / f"{device_key()}.json"
    path.parent.mkdir()
    path.write_text(content, encoding="utf-8")
    before = path.read_bytes()
    result = fake.runpytest("--gpubench-save" if save else "--gpubench")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: baseline file {path} {problem}; "
            "fix it, restore it from version control, or delete it and re-run with "
            "--gpubench-save"
        ]
    )
    assert "Traceback" not in output(result)
    assert [line for line in result.stderr.lines if line.strip()] == [
        line for line in result.stderr.lines if line.startswith("ERROR: baseline file")
    ]
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert timer_calls(fake) == []  # nothing was measured


def test_a_damaged_baseline_does_not_matter_without_the_flag(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    path = fake.path / ".gpubench" / f"{device_key()}.json"
    path.parent.mkdir()
    path.write_text("{{{")
    fake.runpytest().assert_outcomes(passed=2)


# --- failing functions and misuse -----------------------------------------------------------


def test_a_function_that_raises_fails_its_test_and_is_not_saved(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def boom():
            raise ValueError("boom from the kernel")

        def test_raises(gpubench):
            gpubench(boom)

        def test_fails_after(gpubench):
            assert gpubench(abs, -1) == 2

        def test_good(gpubench):
            assert gpubench(abs, -1) == 1
        """
    )
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*ValueError: boom from the kernel"])
    assert sorted(read_baseline(fake)["benchmarks"]) == ["test_bench.py::test_good"]


def test_a_non_callable_is_a_type_error(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        """
        def test_a(gpubench):
            gpubench(42)
        """
    )
    for args in ((), ("--gpubench",)):
        result = fake.runpytest(*args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            ["*TypeError: gpubench expects a function to time as its first argument, got int 42"]
        )


def test_named_measurements_are_stored_separately(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def test_two(gpubench):
            assert gpubench(abs, -1, name="small") == 1
            assert gpubench(abs, -1000, name="large") == 1000
        """
    )
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_two#large *fake *", "test_two#small *fake *"])
    assert sorted(read_baseline(fake)["benchmarks"]) == [
        "test_bench.py::test_two#large",
        "test_bench.py::test_two#small",
    ]
    fake.runpytest("--gpubench").stdout.fnmatch_lines(["gpubench: 2 ok (*"])


@pytest.mark.parametrize(
    "calls, message",
    [
        (
            "gpubench(abs, -1)\n    gpubench(abs, -2)",
            "gpubench was called more than once in test_a; give each measurement its own name, "
            "e.g. gpubench(fn, x, name='fp16')",
        ),
        (
            "gpubench(abs, -1, name='x')\n    gpubench(abs, -2)",
            "gpubench was called more than once in test_a; *",
        ),
        (
            "gpubench(abs, -1, name='x')\n    gpubench(abs, -2, name='x')",
            "gpubench measurement name 'x' is used twice in test_a; names must be unique within "
            "a test",
        ),
        (
            "gpubench(abs, -1, name='')",
            "invalid gpubench name '': expected a non-empty string",
        ),
        (
            "gpubench.pedantic(abs, (-1,), rounds=1)",
            "invalid gpubench.pedantic rounds=1: expected a whole number of at least 2",
        ),
        (
            "gpubench.pedantic(abs, (-1,), warmup=-1)",
            "invalid gpubench.pedantic warmup=-1: expected a whole number of at least 0",
        ),
    ],
    ids=["twice", "named-then-unnamed", "same-name", "empty-name", "rounds", "warmup"],
)
def test_misuse_fails_with_one_line_and_no_traceback(
    fake: pytest.Pytester, calls: str, message: str
) -> None:
    fake.makepyfile(f"def test_a(gpubench):\n    {calls}\n")
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*_ test_a _*", message, "*short test summary*"])
    text = output(result)
    assert "Traceback" not in text
    assert "def test_a" not in text
    assert "GpubenchError" not in text


def test_the_device_is_cuda_or_cpu(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        f"""
        def test_a(gpubench):
            assert gpubench.device == {KIND!r}
            gpubench(abs, -1)
            assert gpubench.device == {KIND!r}
        """
    )
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    fake.runpytest().assert_outcomes(passed=1)


# --- pedantic -------------------------------------------------------------------------------


def test_pedantic_setup_runs_before_every_sample_with_fixed_rounds_and_warmup(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        test_bench="""
        import itertools

        counter = itertools.count()
        setups, calls = [], []

        def setup():
            i = next(counter)
            setups.append(i)
            return (i,), {"scale": 10}

        def fn(i, scale):
            calls.append(i * scale)
            return i * scale

        def test_pedantic(gpubench):
            out = gpubench.pedantic(fn, setup=setup, warmup=3, rounds=5)
            assert out == 0  # the untimed first call, on the first setup's arguments
            # untimed call + 3 warmup samples + 5 samples, each with fresh arguments
            assert setups == list(range(9))
            assert calls == [10 * i for i in range(9)]
        """
    )
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=1)
    assert timer_calls(fake) == [f"auto {KIND} True"]
    entry = read_baseline(fake)["benchmarks"]["test_bench.py::test_pedantic"]
    assert (entry["warmup"], len(entry["samples_ms"])) == (3, 5)


def test_pedantic_without_setup_uses_the_given_arguments(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        calls = []

        def test_pedantic(gpubench):
            out = gpubench.pedantic(lambda a, b: calls.append((a, b)) or a + b, (1,), {"b": 2},
                                    rounds=4, warmup=0)
            assert out == 3
            assert calls == [(1, 2)] * 5
        """
    )
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    assert timer_calls(fake) == [f"auto {KIND} False"]


# --- output files ---------------------------------------------------------------------------


def test_json_and_markdown_outputs(saved: pytest.Pytester) -> None:
    (saved.path / "sub").mkdir()
    result = saved.runpytest(
        "--gpubench", "--gpubench-json=sub/out.json", "--gpubench-markdown=sub/summary.md"
    )
    result.assert_outcomes(passed=2)
    document = json.loads((saved.path / "sub" / "out.json").read_text())
    assert document["device"]["name"]
    assert document["settings"]["threshold"] == 0.05
    assert document["settings"]["enabled"] is True
    assert [r["key"] for r in document["results"]] == [
        "test_bench.py::test_join",
        "test_bench.py::test_sum",
    ]
    first = document["results"][0]
    assert first["timer"] == "fake"
    assert first["verdict"]["status"] == "ok"
    assert first["summary"]["samples"] == len(first["samples_ms"]) >= 10
    assert first["baseline_median_ms"] == pytest.approx(1.0, rel=0.01)
    markdown = (saved.path / "sub" / "summary.md").read_text().splitlines()
    assert markdown[0].startswith("### gpubench: ")
    assert MARKDOWN_HEADER in markdown
    assert any(line.startswith("| test_sum | fake | ") for line in markdown)
    assert "2 ok" in markdown


def test_json_output_is_standard_json(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def test_few(gpubench):
            gpubench.pedantic(abs, (-1,), rounds=2, warmup=0)
        """
    )
    fake.runpytest("--gpubench-save").assert_outcomes(passed=1)
    fake.runpytest("--gpubench", "--gpubench-json=out.json").assert_outcomes(passed=1)

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    json.loads((fake.path / "out.json").read_text(), parse_constant=refuse)


def test_baseline_dir_on_the_command_line_is_relative_to_the_cwd(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench-save", "--gpubench-dir=perf/base").assert_outcomes(passed=2)
    assert baseline_file(fake, "perf/base").name == f"{device_key()}.json"
    assert not (fake.path / ".gpubench").exists()


# --- the real timer -------------------------------------------------------------------------


def test_the_wall_timer_works_without_a_hook(pytester: pytest.Pytester) -> None:
    # Real timings are not judged here: they depend on what else the machine is doing.
    pytester.makepyfile(
        test_bench="""
        def test_sum(gpubench):
            assert gpubench(sum, range(100)) == 4950
        """
    )
    result = pytester.runpytest(
        "--gpubench-save",
        "--gpubench-timer=wall",
        "--gpubench-budget-s=0.2",
        "--gpubench-json=out.json",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_sum *wall *s *new *"])
    [entry] = json.loads((pytester.path / "out.json").read_text())["results"]
    assert entry["timer"] == "wall"
    assert entry["calls_per_sample"] > 1  # a fast function is batched within one sample
    assert entry["summary"]["median_ms"] > 0
    assert read_baseline(pytester)["benchmarks"]["test_bench.py::test_sum"]["timer"] == "wall"


@pytest.mark.skipif(CUDA, reason="auto means a CUDA timer where CUDA is available")
def test_auto_is_the_wall_timer_without_cuda(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_a(gpubench):\n    gpubench(abs, -1)\n")
    result = pytester.runpytest("--gpubench", "--gpubench-budget-s=0.1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["test_a *wall *new *"])


# --- xdist ---------------------------------------------------------------------------------


def test_xdist_workers_measure_and_the_controller_alone_writes(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("xdist")
    fake.makepyfile(BENCH)
    saved = fake.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench-save")
    assert saved.ret == 0
    saved.stdout.fnmatch_lines(["*test_join *fake*new*", "*test_sum *fake*new*"])
    files = list((fake.path / ".gpubench").glob("*.json"))
    assert len(files) == 1
    prefix = "test_xdist_workers_measure_and_the_controller_alone_writes.py::"
    entries = json.loads(files[0].read_text())["benchmarks"]
    assert sorted(entries) == [prefix + "test_join", prefix + "test_sum"]

    monkeypatch.setenv("FAKE_SCALE", "1.2")
    slower = fake.runpytest_subprocess("-p", "xdist", "-n", "2", "--gpubench")
    assert slower.ret == pytest.ExitCode.TESTS_FAILED
    slower.stdout.fnmatch_lines(["*test_sum regressed: 1.000 ms -> 1.200 ms (+20.0%*"])
    slower.stdout.fnmatch_lines(["gpubench: 2 regressed*"])
