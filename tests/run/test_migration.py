"""Coming from pytest-benchmark (issue 19): the opt-in ``benchmark`` fixture, the
``--gpubench-only``, ``--gpubench-skip`` and ``--gpubench-disable`` flags, ``pedantic``'s
``warmup_rounds=`` and ``iterations=``, keywords that reach the timed function, and a suite
written for pytest-benchmark run under gpubench as docs/guide.md says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support import NO_CONFIRM, TESTS_DIR, USAGE_ERROR, output, read_baseline, timer_calls

SUITE = TESTS_DIR / "data" / "pytest_benchmark_suite"
# Stands for pytest-benchmark uninstalled (it is installed here, for tests of its JSON).
WITHOUT_PYTEST_BENCHMARK = ("-p", "no:benchmark")
FIXTURE = "--gpubench-benchmark-fixture"
SUITE_BENCHMARKS = {
    "test_elementwise.py::test_relu": None,
    "test_elementwise.py::test_gelu_tanh": None,
    "test_elementwise.py::test_softmax[0]": None,
    "test_elementwise.py::test_softmax[1]": None,
    "test_elementwise.py::test_add": "elementwise",
    "test_elementwise.py::test_tanh_iterations": None,
    "test_elementwise.py::test_scaled_with_extra_info": None,
    "test_reductions.py::test_sum": "reductions",
    "test_reductions.py::test_sort_fresh_input": "reductions",
    "test_reductions.py::test_matmul": "linalg",
    "test_reductions.py::TestNorms::test_norm": "reductions",
    "test_reductions.py::TestNorms::test_cumsum_named_group": "scans",
}


def no_traceback(result: pytest.RunResult) -> None:
    text = output(result)
    for sign in ("Traceback", "INTERNALERROR", "Error:"):
        assert sign not in text.replace("ERROR: ", ""), sign


def results(path: Path) -> dict[str, dict[str, Any]]:
    report = json.loads(path.read_text(encoding="utf-8"))
    return {r["key"]: r for r in report["results"]}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*WITHOUT_PYTEST_BENCHMARK, FIXTURE, "--strict-markers", *args)


# --- the suite written for pytest-benchmark --------------------------------------------------


@pytest.mark.slow
def test_a_pytest_benchmark_suite_runs_under_gpubench_with_the_flag(fake: pytest.Pytester) -> None:
    """The guide's steps: the suite unchanged, pytest-benchmark out, the opt-in flag; its
    twelve benchmarks are timed, saved, and judged; the plain test runs as before."""
    for source in SUITE.glob("test_*.py"):
        shutil.copy(source, fake.path / source.name)
    saved = run(fake, "--gpubench-save", NO_CONFIRM, "--gpubench-json=saved.json")
    saved.assert_outcomes(passed=13)
    assert set(read_baseline(fake)["benchmarks"]) == set(SUITE_BENCHMARKS)
    measured = results(fake.path / "saved.json")
    assert {key: r["group"] for key, r in measured.items()} == SUITE_BENCHMARKS
    extra = measured["test_elementwise.py::test_scaled_with_extra_info"]["extra_info"]
    assert extra == {"elements": 4096, "dtype": "torch.float32"}
    add = measured["test_elementwise.py::test_add"]
    assert (add["warmup"], len(add["samples_ms"])) == (2, 10)  # rounds=10, warmup_rounds=2

    judged = run(fake, "--gpubench", NO_CONFIRM, "--gpubench-json=judged.json")
    judged.assert_outcomes(passed=13)
    assert set(results(fake.path / "judged.json")) == set(SUITE_BENCHMARKS)
    judged.stdout.fnmatch_lines(["gpubench: 12 *"])

    calls = len(timer_calls(fake))
    untimed = run(fake)  # without --gpubench: each function once, untimed
    untimed.assert_outcomes(passed=13)
    assert len(timer_calls(fake)) == calls
    untimed.stdout.no_fnmatch_line("*gpubench:*")


# --- the benchmark fixture -------------------------------------------------------------------


def test_without_the_flag_there_is_no_benchmark_fixture(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_a="def test_a(benchmark):\n    benchmark(len, 'ab')\n")
    result = fake.runpytest(*WITHOUT_PYTEST_BENCHMARK, "--gpubench")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'benchmark' not found*"])


def test_beside_pytest_benchmark_the_flag_is_a_usage_error(fake: pytest.Pytester) -> None:
    pytest.importorskip("pytest_benchmark")
    fake.makepyfile(test_a="def test_a(benchmark):\n    benchmark(len, 'ab')\n")
    result = fake.runpytest(FIXTURE)
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --gpubench-benchmark-fixture provides the benchmark fixture and "
            "pytest-benchmark is active with its own: add -p no:benchmark *"
        ]
    )
    no_traceback(result)
    # Without the flag pytest-benchmark's fixture is the one tests get.
    fake.runpytest("--benchmark-disable").assert_outcomes(passed=1)


def test_the_ini_key_turns_the_fixture_on(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_benchmark_fixture = true\n")
    fake.makepyfile(test_a="def test_a(benchmark):\n    assert benchmark(len, 'ab') == 2\n")
    fake.runpytest(*WITHOUT_PYTEST_BENCHMARK, "--gpubench").assert_outcomes(passed=1)
    assert len(timer_calls(fake)) == 1


def test_without_gpubench_the_function_and_setup_run_once(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a="""
        calls = []

        def work(x, y=0):
            calls.append((x, y))
            return x + y

        def test_call(benchmark):
            assert benchmark(work, 1, y=2) == 3
            assert calls == [(1, 2)]
            assert benchmark.disabled and not benchmark.enabled
            assert (benchmark.name, benchmark.fullname) == ("test_call", "test_a.py::test_call")

        def test_pedantic(benchmark):
            calls.clear()
            out = benchmark.pedantic(
                work, setup=lambda: calls.append("setup") or ((4,), {}), rounds=5, warmup_rounds=3
            )
            assert out == 4
            assert calls == ["setup", (4, 0)]
        """
    )
    run(fake).assert_outcomes(passed=2)
    assert timer_calls(fake) == []


def test_pedantic_maps_rounds_and_warmup_rounds(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a="""
        def test_fixed(benchmark):
            assert benchmark.pedantic(len, args=("abc",), rounds=5, warmup_rounds=2) == 3

        def test_defaults_are_adaptive(benchmark):
            assert benchmark.pedantic(len, args=("abc",)) == 3
        """
    )
    run(fake, "--gpubench", "--gpubench-json=r.json").assert_outcomes(passed=2)
    measured = results(fake.path / "r.json")
    fixed = measured["test_a.py::test_fixed"]
    assert (fixed["warmup"], len(fixed["samples_ms"])) == (2, 5)
    # rounds=1, warmup_rounds=0 (pytest-benchmark's defaults): gpubench's own rules
    assert len(measured["test_a.py::test_defaults_are_adaptive"]["samples_ms"]) >= 20


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "benchmark(len, 'a'); benchmark(len, 'b')",
            "benchmark was used twice in test_a (first by benchmark(...)): it times one "
            "function per test, as in pytest-benchmark; for several, use the gpubench fixture "
            "with name=*",
        ),
        (
            "benchmark.pedantic(len, args=('a',), teardown=print)",
            "benchmark.pedantic in test_a: teardown= is not supported by gpubench*",
        ),
        (
            "benchmark.pedantic(len, args=('a',), rounds=0)",
            "invalid benchmark.pedantic in test_a rounds=0: expected a whole number of at least 1",
        ),
        (
            "benchmark.pedantic(len, setup=lambda: (('a',), {}), iterations=3)",
            "gpubench.pedantic iterations=3 with setup: *",
        ),
        (
            "benchmark.pedantic(len, args=('a',), setup=lambda: (('b',), {}))",
            "benchmark.pedantic in test_a: setup returned arguments and args= or kwargs= were "
            "given too; give the arguments one way",
        ),
    ],
)
def test_misuse_fails_the_test_in_one_line(fake: pytest.Pytester, body: str, message: str) -> None:
    fake.makepyfile(test_a=f"def test_a(benchmark):\n    {body}\n")
    for timed in ((), ("--gpubench",)):
        result = run(fake, *timed)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines([message])
        no_traceback(result)


def test_the_benchmark_marker_names_the_group_and_checks_its_keywords(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        test_a="""
        import pytest

        pytestmark = pytest.mark.benchmark(group="module", max_time=0.5)

        def test_module(benchmark):
            benchmark(len, "a")

        @pytest.mark.benchmark(group="closest", min_rounds=3, warmup=True)
        def test_closest(benchmark):
            benchmark(len, "a")

        @pytest.mark.gpubench(group="ours")
        def test_ours_first(benchmark):
            benchmark(len, "a")

        @pytest.mark.benchmark(rounds=3)
        def test_unknown(benchmark):
            benchmark(len, "a")
        """
    )
    result = run(fake, "--gpubench", "--gpubench-json=r.json")
    result.assert_outcomes(passed=3, errors=1)  # at setup, as an invalid gpubench marker
    result.stdout.fnmatch_lines(
        ["*test_a.py::test_unknown: @pytest.mark.benchmark: unknown keyword 'rounds'; *"]
    )
    groups = {key: r["group"] for key, r in results(fake.path / "r.json").items()}
    assert groups == {
        "test_a.py::test_module": "module",
        "test_a.py::test_closest": "closest",
        "test_a.py::test_ours_first": "ours",
    }


# --- keywords the fixture would take for itself ------------------------------------------------

KERNEL = """
import pytest

seen = []

def kernel(x, name=None, bytes=None, flops=None, reference=None):
    seen.append((name, bytes, flops, reference))
    return x

EXPECTED = ("n", 7, 3.5, "ref")
"""


def test_pedantic_kwargs_reach_a_function_that_takes_bytes(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a=KERNEL
        + """
def test_gpubench(gpubench):
    kw = dict(name="n", bytes=7, flops=3.5, reference="ref")
    assert gpubench.pedantic(kernel, args=(1,), kwargs=kw) == 1
    assert set(seen) == {EXPECTED}
"""
    )
    fake.runpytest("--gpubench", "--gpubench-json=r.json").assert_outcomes(passed=1)
    [result] = results(fake.path / "r.json").values()
    assert result["bytes"] is None and result["key"] == "test_a.py::test_gpubench"


def test_every_keyword_of_a_benchmark_call_reaches_the_function(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a=KERNEL
        + """
def test_benchmark(benchmark):
    assert benchmark(kernel, 1, name="n", bytes=7, flops=3.5, reference="ref") == 1
    assert set(seen) == {EXPECTED}
"""
    )
    run(fake, "--gpubench", "--gpubench-json=r.json").assert_outcomes(passed=1)
    [result] = results(fake.path / "r.json").values()
    assert result["bytes"] is None and result["key"] == "test_a.py::test_benchmark"


# --- gpubench.pedantic: warmup_rounds= and iterations= ----------------------------------------


def test_gpubench_pedantic_takes_warmup_rounds_and_iterations(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a="""
        def test_a(gpubench):
            out = gpubench.pedantic(len, args=("ab",), warmup_rounds=3, rounds=4, iterations=5)
            assert out == 2
        """
    )
    fake.runpytest("--gpubench", "--gpubench-json=r.json").assert_outcomes(passed=1)
    [result] = results(fake.path / "r.json").values()
    assert (result["warmup"], len(result["samples_ms"])) == (3, 4)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            "warmup=1, warmup_rounds=2",
            "gpubench.pedantic got warmup=1 and warmup_rounds=2, two names of one count: "
            "give one of the two",
        ),
        ("warmup_rounds=-1", "invalid gpubench.pedantic warmup_rounds=-1: *at least 0"),
        ("iterations=0", "invalid gpubench.pedantic iterations=0: *at least 1"),
        ("iterations=2, setup=lambda: None", "gpubench.pedantic iterations=2 with setup: *"),
    ],
)
def test_gpubench_pedantic_refuses_bad_counts(
    fake: pytest.Pytester, call: str, message: str
) -> None:
    fake.makepyfile(test_a=f"def test_a(gpubench):\n    gpubench.pedantic(len, ('a',), {call})\n")
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([message])
    no_traceback(result)


# --- --gpubench-only, --gpubench-skip, --gpubench-disable ------------------------------------

MIXED = """
calls = []

def work(x):
    calls.append(x)
    return x

def test_gpubench(gpubench):
    assert gpubench(work, 1) == 1
    assert calls == [1] or gpubench.enabled  # once, untimed, unless timed

def test_benchmark(benchmark):
    assert benchmark(work, 2) == 2

def test_plain():
    pass
"""


def test_only_runs_the_benchmarks_and_skips_the_rest(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_a=MIXED)
    result = run(fake, "--gpubench", "--gpubench-only", "-rs")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["SKIPPED [1] test_a.py: not a benchmark (--gpubench-only)"])
    assert len(timer_calls(fake)) == 2


def test_skip_skips_the_benchmarks(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_a=MIXED)
    result = run(fake, "--gpubench", "--gpubench-skip", "-rs")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["SKIPPED [2] test_a.py: a benchmark (--gpubench-skip)"])
    assert timer_calls(fake) == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--gpubench-only", "--gpubench-skip"),
            "ERROR: --gpubench-only runs only the tests that benchmark and --gpubench-skip "
            "skips them: give one of the two",
        ),
        (
            ("--gpubench-save", "--gpubench-disable"),
            "ERROR: --gpubench-disable runs each function once, untimed, and --gpubench-save "
            "measures: leave out one of the two",
        ),
    ],
)
def test_flags_that_contradict_each_other_are_a_usage_error(
    fake: pytest.Pytester, flags: tuple[str, ...], message: str
) -> None:
    fake.makepyfile(test_a=MIXED)
    result = run(fake, *flags)
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    no_traceback(result)


def test_disable_runs_each_function_once_even_with_gpubench(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_a=MIXED)
    result = run(fake, "--gpubench", "--gpubench-disable")
    result.assert_outcomes(passed=3)
    assert timer_calls(fake) == []
    result.stdout.no_fnmatch_line("*gpubench:*")
    fake.makeini("[pytest]\ngpubench_disable = true\n")
    run(fake, "--gpubench").assert_outcomes(passed=3)
    assert timer_calls(fake) == []


def test_only_and_skip_keep_the_meaning_of_x_and_lf(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_a="""
        def test_plain_fails():
            assert False

        def test_bench_fails(gpubench):
            gpubench(len, "a")
            assert False

        def test_bench_passes(gpubench):
            gpubench(len, "a")
        """
    )
    # -x: the skipped plain failure does not stop the run, the benchmark's does.
    result = fake.runpytest("--gpubench-only", "-x")
    result.assert_outcomes(failed=1, skipped=1)
    fake.runpytest("-p", "cacheprovider").assert_outcomes(failed=2, passed=1)
    # --lf: the last failures, of which --gpubench-only skips the plain one. A skip takes a
    # test out of pytest's last failures, as any skip does: the benchmark is the one left.
    result = fake.runpytest("-p", "cacheprovider", "--lf", "--gpubench-only")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["FAILED test_a.py::test_bench_fails*"])
    result = fake.runpytest("-p", "cacheprovider", "--lf", "--gpubench-skip", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["run-last-failure: rerun previous 1 failure"])


@pytest.mark.slow
def test_only_under_xdist(fake: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    fake.makepyfile(test_a=MIXED)
    result = run(fake, "-p", "xdist", "-n", "2", "--gpubench", "--gpubench-only", NO_CONFIRM)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(["gpubench: 2 new *"])
    assert not list((fake.path / ".gpubench").glob("*.json"))  # no baseline: only a run stored


@pytest.mark.slow
def test_a_regression_of_a_benchmark_test_is_confirmed_in_fresh_processes(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fresh processes rerun the test with the user's options: the fixture is theirs too."""
    fake.makepyfile(
        test_a="""
        def test_sum(benchmark):
            assert benchmark(sum, range(10)) == 45

        def test_join(benchmark):
            benchmark.pedantic(",".join, args=(["a", "b"],), rounds=20)
        """
    )
    for seed in ("1", "3", "4"):
        monkeypatch.setenv("FAKE_SEED", seed)
        run(fake, "--gpubench-save", NO_CONFIRM).assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SEED", "2")
    monkeypatch.setenv("FAKE_SCALES", json.dumps({"test_sum": 1.3}))
    result = run(fake, "--gpubench", "--gpubench-confirm=2")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["test_sum: confirmed in 2 fresh processes *"])
    assert sum(" child" in line for line in timer_calls(fake)) == 2
