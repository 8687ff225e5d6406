"""Nothing a user types or stores crashes a run or loses a baseline (issue 7).

One section per item of the issue, numbered as there; each test failed before the fix. The
fake timer and the helpers are in tests/support.py and tests/conftest.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from support import (
    BENCH,
    CUDA,
    FAKE_NAME,
    KIND,
    NO_CONFIRM,
    ROOT,
    USAGE_ERROR,
    baseline_file,
    device_key,
    output,
    read_baseline,
    record_history,
    timer_calls,
)

from pytest_gpubench.store.baseline import GITIGNORE


def no_traceback(result: pytest.RunResult) -> None:
    text = output(result)
    for sign in ("Traceback", "INTERNALERROR", "KeyboardInterrupt", "Error:"):
        assert sign not in text.replace("ERROR: ", ""), sign


def baseline_path(pytester: pytest.Pytester) -> Path:
    path = pytester.path / ".gpubench" / f"{device_key()}.json"
    path.parent.mkdir(exist_ok=True)
    return path


# --- 1. pytest --help -----------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_1_help_lists_the_options(pytester: pytest.Pytester, flag: str) -> None:
    result = pytester.runpytest(flag)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        [
            "GPU kernel benchmarks (pytest-gpubench):",
            "  --gpubench *Time gpubench tests*",
            "  --gpubench-threshold=PERCENT",
            "*Smallest slowdown that fails a test, such as 5% (default",
            "*5%)",
            "  --gpubench-markdown=PATH",
        ]
    )
    # the ini keys' help as written, % not doubled
    result.stdout.fnmatch_lines(["  gpubench_threshold (string):", "*such as 5% (default"])


# --- 2. concurrent saves --------------------------------------------------------------------

TESTS_PER_FILE = 15


@pytest.mark.slow
def test_2_concurrent_saves_keep_each_others_entries(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\n")
    for name in ("a", "b"):
        body = "\n".join(
            f"def test_{name}{i}(gpubench):\n    gpubench(abs, -{i})\n"
            for i in range(TESTS_PER_FILE)
        )
        fake.makepyfile(**{f"test_{name}": body})
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gpubench-save"]
    for _ in range(2):
        path = fake.path / ".gpubench" / f"{device_key()}.json"
        path.unlink(missing_ok=True)
        runs = [
            subprocess.Popen(
                [*command, f"test_{name}.py"],
                cwd=fake.path,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for name in ("a", "b")
        ]
        outputs = [run.communicate(timeout=120)[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        assert len(json.loads(path.read_text())["benchmarks"]) == 2 * TESTS_PER_FILE, outputs


# --- 3. any string in a key, a name or extra_info -------------------------------------------


def test_3_odd_strings_in_names_and_extra_info_round_trip(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        def test_odd(gpubench):
            gpubench.extra_info["tag"] = "\\x000\\x00"
            gpubench.extra_info["\\x001\\x00"] = ['"', "\\\\", "\\ud800", "\\n"]
            gpubench(abs, -1, name="\\x001\\x00")
        """
    )
    for saved in record_history(fake):
        saved.assert_outcomes(passed=1)
    [(key, entry)] = read_baseline(fake)["benchmarks"].items()
    assert key == "test_bench.py::test_odd#\x001\x00"
    assert entry["extra_info"] == {"tag": "\x000\x00", "\x001\x00": ['"', "\\", "\ud800", "\n"]}
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpubench: 1 ok (*"])


def test_3_a_lone_surrogate_in_a_key_reaches_every_report_escaped(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test id or a measurement's name with a character no encoding writes (issue 46): the
    summary, the Markdown report, the job summary and JUnit say it escaped, and the run
    fails as a regression, not with a traceback."""
    fake.makeini(
        "[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true"
    )
    fake.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.parametrize("n", [100], ids=["a\\udc80b"])
        def test_sum(gpubench, n):
            gpubench(sum, range(n), name="c\\udc80d")
        """
    )
    no_cache = ("-p", "no:cacheprovider")  # pytest's own cache cannot write such an id
    for saved in record_history(fake, *no_cache):
        saved.assert_outcomes(passed=1)
    monkeypatch.setenv("FAKE_SCALE", "1.3")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fake.path / "step.md"))
    reports = ["--gpubench-markdown=out.md", "--gpubench-json=out.json", "--junitxml=junit.xml"]
    result = fake.runpytest("--gpubench", NO_CONFIRM, *no_cache, *reports)
    no_traceback(result)
    result.assert_outcomes(failed=1)
    escaped = "test_sum[a\\udc80b]#c\\udc80d"
    [header] = [line for line in result.outlines if line.startswith("test ")]
    [row] = [line for line in result.outlines if line.startswith(f"{escaped}  ")]
    assert row.index("cuda-graph") == header.index("timer")  # escaped, then aligned
    for name in ("out.md", "step.md"):
        assert escaped in (fake.path / name).read_text(encoding="utf-8")
    [key] = [r["key"] for r in json.loads((fake.path / "out.json").read_text())["results"]]
    assert key == "test_bench.py::test_sum[a\udc80b]#c\udc80d"
    [case] = ElementTree.parse(fake.path / "junit.xml").getroot().iter("testcase")
    assert "regressed" in (case.find("failure").get("message") or "")  # type: ignore[union-attr]


# --- 4. bad work and extra_info values ------------------------------------------------------


def test_4_a_function_that_changes_its_argument_changes_it_at_every_call(
    pytester: pytest.Pytester,
) -> None:
    """Without --gpubench the function runs once, with it many times (the real wall timer
    here): a check of an argument it changes in place passes without and fails with it, as
    the guide's section on the fixture says (issue 46)."""
    pytester.makepyfile(
        test_bench="""
        def bump(counts):
            counts[0] += 1

        def test_bump(gpubench):
            counts = [0]
            gpubench(bump, counts)
            assert counts[0] == 1, f"called {counts[0]} times"
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)
    timed = pytester.runpytest("--gpubench", NO_CONFIRM)
    timed.assert_outcomes(failed=1)
    [calls] = set(re.findall(r"AssertionError: called (\d+) times", output(timed)))
    assert int(calls) > 20  # the first call, a warm-up, 20 samples or more
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    fixture = guide.split("## The fixture", 1)[1].split("\n## ", 1)[0]
    assert "in place (`x += 1`) ends changed that many times over" in " ".join(fixture.split())


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "gpubench(abs, -1, bytes=float('inf'))",
            "invalid gpubench(..., bytes=...) in test_bad inf: expected a positive finite "
            "number of bytes",
        ),
        (
            "gpubench(abs, -1, flops=float('nan'))",
            "invalid gpubench(..., flops=...) in test_bad nan: *",
        ),
        (
            "gpubench.extra_info['x'] = float('nan'); gpubench(abs, -1)",
            "test_bad: gpubench.extra_info['x'] is nan, not a finite number",
        ),
        (
            "gpubench.extra_info['x'] = {'deep': [1, object()]}; gpubench(abs, -1)",
            "test_bad: gpubench.extra_info['x']['deep'][1] is of type object, not a string, "
            "finite number, bool, None, list or dict",
        ),
        (
            "gpubench.extra_info[(1, 2)] = 'shape'; gpubench(abs, -1)",
            "test_bad: gpubench.extra_info has the key (1, 2), not a string",
        ),
        (
            "gpubench.extra_info = [1]; gpubench(abs, -1)",
            "test_bad: gpubench.extra_info is a list, not a dict",
        ),
        (
            "gpubench(lambda n: (i for i in range(n)), 3)",
            "test_bad: the function given to gpubench returned a generator, so a call only "
            "creates it and does none of its work; time a function that runs it, e.g. "
            "gpubench(lambda [*]a: list(fn([*]a)), ...)",
        ),
        (
            "import asyncio; gpubench(asyncio.sleep, 0)",
            "test_bad: the function given to gpubench returned a coroutine, so a call only "
            "creates it and does none of its work; time a function that runs it, e.g. "
            "gpubench(lambda [*]a: asyncio.run(fn([*]a)), ...)",
        ),
        (
            "ns = {}; exec('async def ticks(n):\\n    yield n', ns); gpubench(ns['ticks'], 1)",
            "test_bad: the function given to gpubench returned an async generator, so a call *"
            "asyncio.run(collect(fn([*]a)))*",
        ),
    ],
    ids=[
        "bytes-inf",
        "flops-nan",
        "extra-nan",
        "extra-object",
        "extra-tuple-key",
        "extra-list",
        "generator",
        "coroutine",
        "async-generator",
    ],
)
def test_4_a_bad_value_fails_its_test_and_costs_no_other_test_its_baseline(
    fake: pytest.Pytester, body: str, message: str
) -> None:
    fake.makepyfile(
        test_bench=f"""
        def test_good(gpubench):
            gpubench.extra_info["shape"] = (4096, 4096)
            gpubench(abs, -1)

        def test_bad(gpubench):
            {body}
        """
    )
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*_ test_bad _*", message, "*short test summary*"])
    no_traceback(result)
    result.stdout.fnmatch_lines(["baseline written: *"])
    [(key, entry)] = read_baseline(fake)["benchmarks"].items()
    assert key == "test_bench.py::test_good"
    assert entry["extra_info"] == {"shape": [4096, 4096]}


def assert_marker_error(pytester: pytest.Pytester, result: pytest.RunResult, line: str) -> None:
    """A marker's bad value fails its test at setup with one line, costs the other test of
    the file nothing (it is measured and saved), and writes nothing of the bad one."""
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*_ ERROR at setup of test_a _*", line, "*short test summary*"])
    no_traceback(result)
    assert sorted(read_baseline(pytester)["benchmarks"]) == ["test_bench.py::test_b"]


@pytest.mark.parametrize("value", ["float('inf')", "float('nan')", "-1", "True"])
@pytest.mark.parametrize("key", ["bytes", "flops"])
def test_4_bad_work_in_the_marker_is_an_error_of_its_test(
    fake: pytest.Pytester, key: str, value: str
) -> None:
    fake.makepyfile(
        test_bench=f"""
        import pytest

        @pytest.mark.gpubench({key}={value})
        def test_a(gpubench):
            gpubench(abs, -1)

        def test_b(gpubench):
            gpubench(abs, -1)
        """
    )
    assert_marker_error(
        fake,
        fake.runpytest("--gpubench-save"),
        f"invalid test_bench.py::test_a: @pytest.mark.gpubench({key}=...) *: "
        f"expected a positive finite number of {key}",
    )


# --- 5. damaged values and files in the baseline --------------------------------------------


def entry(**fields: object) -> dict[str, object]:
    return {"timer": "fake", "samples_ms": [1.0, 1.0, 1.0], "median_ms": 1.0, **fields}


def document(**fields: object) -> str:
    benchmarks = {"test_bench.py::test_sum": entry(**fields)}
    return json.dumps({"schema": "pytest-gpubench/1", "device": {}, "benchmarks": benchmarks})


@pytest.mark.parametrize(
    "content, problem",
    [
        (document(median_ms="abc"), "that has a 'median_ms' of 'abc', not a time in ms"),
        (document(median_ms=[1]), "that has a 'median_ms' of [[]1], not a time in ms"),
        (document(median_ms=-1.0), "that has a 'median_ms' of -1.0, not a time in ms"),
        (document(median_ms=1e308), "that has a 'median_ms' of 1e+308, not a time in ms"),
        (
            document(median_ms=float("nan")),
            "is not valid JSON (NaN is not a JSON number)",
        ),
        (
            document(samples_ms=[1.0, 5e-324]),
            "that has a sample of 5e-324 ms, not a time between 1e-09 and 1e+06 ms",
        ),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be read as JSON"),
    ],
    ids=["median-str", "median-list", "median-negative", "median-huge", "nan", "tiny", "deep"],
)
def test_5_a_baseline_with_values_out_of_range_is_refused_naming_the_file(
    fake: pytest.Pytester, content: str, problem: str
) -> None:
    assert_refused(fake, content, problem)


def assert_refused(pytester: pytest.Pytester, content: str, problem: str) -> None:
    """A run against a baseline of ``content`` stops at the start with one line."""
    pytester.makepyfile(test_bench=BENCH)
    path = baseline_path(pytester)
    path.write_text(content)
    result = pytester.runpytest("--gpubench")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: baseline file {path} *{problem}; fix it, *"])
    no_traceback(result)
    assert timer_calls(pytester) == []


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "huge"])
def test_5_a_baseline_that_is_no_regular_file_is_refused_without_hanging(
    fake: pytest.Pytester, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake.makepyfile(test_bench=BENCH)
    path = baseline_path(fake)
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would wait for a writer forever
        problem = "is a named pipe (FIFO), not a regular file"
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")  # reading it would fill the memory
        problem = "is a character device, not a regular file"
    elif kind == "directory":
        path.mkdir()
        problem = "is a directory, not a regular file"
    else:
        monkeypatch.setattr("pytest_gpubench.store.baseline.MAX_BYTES", 10)
        path.write_text(document())
        problem = f"is {len(document())} bytes, over the limit of 10 bytes for a baseline file"
    result = fake.runpytest("--gpubench")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: baseline file {path} {problem}*"])
    no_traceback(result)


def test_5_a_timer_sample_that_is_no_time_fails_its_test_with_one_line(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SCALE", "5e-324")
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench-save")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            f"timer {FAKE_NAME} measured 5e-324 ms, not a time between 1e-09 and 1e+06 ms for "
            "one call; *"
        ]
    )
    no_traceback(result)


# --- 6. a group that is not a string --------------------------------------------------------


def test_6_a_group_that_is_no_string_is_an_error_of_its_test(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
        import pytest

        @pytest.mark.gpubench(group=123)
        def test_a(gpubench):
            gpubench(abs, -1)

        @pytest.mark.gpubench(group="x")
        def test_b(gpubench):
            gpubench(abs, -1)
        """
    )
    result = fake.runpytest("--gpubench-save")
    assert_marker_error(
        fake,
        result,
        "invalid test_bench.py::test_a: @pytest.mark.gpubench(group=...) 123: "
        "expected a string such as 'gemm'",
    )
    result.stdout.fnmatch_lines(["gpubench: 1 new (*)"])  # the summary sorted what it had


# --- 7. files that cannot be written --------------------------------------------------------


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Path:
    """A directory nobody may create files in (root ignores permission bits: sysfs)."""
    if os.geteuid() != 0:
        directory = tmp_path / "read-only"
        directory.mkdir(mode=0o555)
        return directory
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("running as root without /sys/kernel: no directory root cannot write")
    return Path("/sys/kernel")


def test_7_a_baseline_that_cannot_be_written_is_one_line_under_the_table(
    fake: pytest.Pytester, read_only_dir: Path
) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench-save", f"--gpubench-dir={read_only_dir}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"test_join *{FAKE_NAME} * new *",
            f"test_sum *{FAKE_NAME} * new *",
            f"ERROR: cannot write baseline file {read_only_dir}/*.json: cannot create its lock "
            f"file {read_only_dir}/*.json.lock: *",
            "gpubench: 2 new (*)",
            "*2 passed*",
        ]
    )
    no_traceback(result)


@pytest.mark.parametrize(
    "option, message",
    [
        ("--gpubench-json=.", "cannot write JSON report {path}: it is a directory; *"),
        (
            "--gpubench-json={path}/nonexistent/dir/x.json",
            "cannot write JSON report {path}/nonexistent/dir/x.json: directory "
            "{path}/nonexistent/dir does not exist; create it or choose another path",
        ),
        (
            "--gpubench-markdown=missing/x.md",
            "cannot write Markdown report {path}/missing/x.md: directory {path}/missing does not "
            "exist; *",
        ),
    ],
)
def test_7_a_report_path_that_cannot_be_written_is_a_usage_error_at_the_start(
    fake: pytest.Pytester, option: str, message: str
) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", option.format(path=fake.path))
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message.format(path=fake.path)}"])
    no_traceback(result)
    assert not (fake.path / "nonexistent").exists() and not (fake.path / "missing").exists()


def test_7_a_report_that_fails_to_write_is_one_line_and_the_rest_is_written(
    saved: pytest.Pytester,
) -> None:
    result = saved.runpytest(
        "--gpubench", "--gpubench-markdown=/proc/version", "--gpubench-json=out.json"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            f"test_join *{FAKE_NAME} * ok *",
            "ERROR: cannot write Markdown report /proc/version: *",
            "gpubench: 2 ok (*)",
        ]
    )
    no_traceback(result)
    assert len(json.loads((saved.path / "out.json").read_text())["results"]) == 2


# --- 8. leftovers of killed saves, Ctrl-C ---------------------------------------------------


def test_8_temporary_files_of_killed_saves_are_removed_by_the_next_save(
    saved: pytest.Pytester,
) -> None:
    path = baseline_file(saved)
    leftovers = [
        path.with_name(f"{path.name}.k1ll3d.tmp"),  # this version's pattern
        path.with_name(f".{path.name}.k1ll3d.tmp"),  # version 0.1.0's hidden one
    ]
    for leftover in leftovers:
        leftover.write_text('{"half": ')
    (path.parent / "notes.tmp").write_text("not ours")
    saved.runpytest("--gpubench-save", "-k", "test_sum").assert_outcomes(passed=1, deselected=1)
    assert not any(leftover.exists() for leftover in leftovers)
    assert (path.parent / "notes.tmp").exists()


def test_8_a_new_baseline_directory_ignores_temporary_and_lock_files(
    saved: pytest.Pytester,
) -> None:
    ignore = baseline_file(saved).parent / ".gitignore"
    assert ignore.read_text() == GITIGNORE
    assert "*.tmp" in GITIGNORE.splitlines() and "*.lock" in GITIGNORE.splitlines()


INTERRUPTING_CONFTEST = """
import pytest

import pytest_gpubench.store.files as storage


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    real = storage.write_atomic

    def interrupted(path, text, what):
        raise KeyboardInterrupt

    storage.write_atomic = interrupted  # Ctrl-C while the baseline is written
    try:
        return (yield)
    finally:
        storage.write_atomic = real
"""


def test_8_ctrl_c_while_saving_keeps_the_old_baseline_and_prints_one_line(
    saved: pytest.Pytester,
) -> None:
    path = baseline_file(saved)
    before = path.read_bytes()
    (saved.path / "sub").mkdir()
    (saved.path / "sub" / "conftest.py").write_text(INTERRUPTING_CONFTEST)
    (saved.path / "sub" / "test_more.py").write_text(BENCH)
    result = saved.runpytest("--gpubench-save", "sub")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["test_join *", "ERROR: interrupted: baseline not written"])
    no_traceback(result)
    assert path.read_bytes() == before


# --- 9. the budget --------------------------------------------------------------------------


def counted(pytester: pytest.Pytester) -> None:
    """BENCH counting the calls of test_sum's function, checked by a third test."""
    pytester.makepyfile(
        test_bench=BENCH.replace(
            "def work(n):\n", "CALLS = []\n\ndef work(n):\n    CALLS.append(n)\n"
        )
        + "\n\ndef test_calls():\n    assert len(CALLS) <= 1 + 5, CALLS\n"
    )


def test_9_the_budget_bounds_a_slow_function_and_its_verdict_is_unstable(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 50 ms a call, 0.08 s of budget: the first sample runs past warmup's share and is kept as
    # a sample, one more fits. A 50% slowdown cannot be judged from two samples: unstable, not
    # failed, and no fresh process is started for it.
    monkeypatch.setenv("FAKE_SLEEP_S", "0.05")
    monkeypatch.setenv("FAKE_SCALE", "1.5")
    (saved.path / "timer-calls.log").unlink()
    counted(saved)
    result = saved.runpytest("--gpubench", "--gpubench-budget-s=0.08", "--gpubench-json=out.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "test_sum: unstable: 2 samples in the budget: too few to judge, raise "
            "--gpubench-budget-s (judging needs 3)",
            "gpubench: 2 unstable (*)",
        ]
    )
    for measured in json.loads((saved.path / "out.json").read_text())["results"]:
        assert (measured["warmup"], len(measured["samples_ms"])) == (0, 2)
        assert measured["confirmations"] == []  # nothing to confirm
    assert timer_calls(saved) == [f"{FAKE_NAME} {KIND} False"] * 2


def test_9_a_slow_function_with_enough_samples_in_its_budget_is_judged(
    saved: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 50 ms a call, 0.2 s of budget: a few samples, within the budget plus one call; enough
    # to tell a 50% slowdown from their own spread.
    monkeypatch.setenv("FAKE_SLEEP_S", "0.05")
    monkeypatch.setenv("FAKE_SCALE", "1.5")
    counted(saved)
    result = saved.runpytest(
        "--gpubench", "--gpubench-budget-s=0.2", NO_CONFIRM, "--gpubench-json=out.json"
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["test_sum regressed: 1.00 ms -> 1.50 ms (+50.0%; *)"])
    for measured in json.loads((saved.path / "out.json").read_text())["results"]:
        samples = len(measured["samples_ms"])
        assert 3 <= samples and measured["warmup"] + samples <= 5


def test_9_a_result_of_one_sample_is_not_saved_and_says_so(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_SLEEP_S", "0.1")
    fake.makepyfile(test_bench="def test_slow(gpubench):\n    gpubench(abs, -1)\n")
    result = fake.runpytest("--gpubench-save", "--gpubench-budget-s=0.05")
    result.assert_outcomes(passed=1)
    too_few = "1 sample in the budget: too few to judge, raise --gpubench-budget-s"
    result.stdout.fnmatch_lines(
        [
            f"test_slow *{FAKE_NAME} * new *",
            f"test_slow: not saved: {too_few} (a baseline needs 2)",
            f"no baseline yet at {fake.path}/.gpubench/{device_key()}.json",
        ]
    )
    assert not list((fake.path / ".gpubench").glob("*.json"))  # the stored run only (issue 19)


# --- 11. a plain run stays light ------------------------------------------------------------


@pytest.mark.parametrize(
    "test",
    [
        "def test_plain():\n    pass\n",
        "def test_bench(gpubench):\n    assert gpubench(abs, -1) == 1\n",
        "def test_bench(gpubench):\n    gpubench.extra_info['x'] = 1\n"
        "    assert gpubench.pedantic(abs, (-1,), rounds=3) == 1\n",
    ],
    ids=["plain", "fixture", "pedantic"],
)
@pytest.mark.slow
def test_11_a_run_without_the_flag_imports_neither_torch_nor_scipy_nor_numpy(
    pytester: pytest.Pytester, test: str
) -> None:
    pytester.makeconftest(
        """
        import sys

        import pytest

        LOADED = pytest.StashKey()


        def pytest_sessionfinish(session):
            session.config.stash[LOADED] = " ".join(
                f"{name}={name in sys.modules}"
                for name in ("torch", "triton", "scipy", "numpy", "filelock")
            )


        def pytest_terminal_summary(terminalreporter, config):
            terminalreporter.write_line(f"loaded: {config.stash[LOADED]}")
        """
    )
    pytester.makepyfile(test)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["loaded: torch=False triton=False scipy=False numpy=False filelock=False"]
    )


# --- 12. ini keys ---------------------------------------------------------------------------


def test_12_an_invalid_ini_flag_names_its_key(fake: pytest.Pytester) -> None:
    fake.makeini("[pytest]\ngpubench_enabled = maybe\n")
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest()
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: invalid ini gpubench_enabled 'maybe': expected true or false"]
    )
    no_traceback(result)


def test_12_the_readme_names_every_ini_key() -> None:
    from pytest_gpubench.core.settings import OPTIONS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [s.ini for s in OPTIONS if f"`{s.ini}`" not in readme] == []


# --- 13. the README's set-up commands -------------------------------------------------------


def readme_setup_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", setup, re.S)


def test_13_each_readme_command_starts_and_ends_in_the_project_root() -> None:
    commands = readme_setup_commands()
    assert len(commands) == 2
    for command in commands:
        outside = re.sub(r"\([^()]*\)", "", command)  # a subshell's cd ends with it
        assert not re.search(r"(^|[;&|]\s*)cd\s", outside), command


def test_13_ci_runs_the_readme_commands_verbatim() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert [command for command in readme_setup_commands() if command not in ci] == []


# --- 14. messages that name the actual problem ----------------------------------------------


def test_14_a_baseline_directory_that_is_a_file_says_so(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    (fake.path / "perf").write_text("")
    for flag in ("--gpubench", "--gpubench-save"):
        result = fake.runpytest(flag, "--gpubench-dir=perf")
        assert result.ret == USAGE_ERROR
        result.stderr.fnmatch_lines(
            [
                f"ERROR: baseline directory {fake.path}/perf is a file, not a directory; "
                "point --gpubench-dir (or ini gpubench_dir) at a directory"
            ]
        )
        no_traceback(result)


@pytest.mark.parametrize(
    "content, problem",
    [
        (
            json.dumps({"schema": "pytest-gpubench/1", "device": None, "benchmarks": {}}),
            "has a 'device' that is not an object",
        ),
        (document(samples_ms="1,2,3"), "that has a 'samples_ms' that is not a list of numbers"),
    ],
    ids=["device-null", "samples-string"],
)
def test_14_a_damaged_baseline_names_the_actual_problem(
    fake: pytest.Pytester, content: str, problem: str
) -> None:
    assert_refused(fake, content, problem)


# --- 15. links and timers asked for where they cannot run -----------------------------------


def test_15_saving_through_a_linked_baseline_keeps_the_link(saved: pytest.Pytester) -> None:
    path = baseline_file(saved)
    shared = saved.path / "shared" / "baseline.json"
    shared.parent.mkdir()
    path.rename(shared)
    path.symlink_to(shared)
    saved.runpytest("--gpubench-save", "-k", "test_sum").assert_outcomes(passed=1, deselected=1)
    assert path.is_symlink() and path.resolve() == shared
    assert sorted(json.loads(shared.read_text())["benchmarks"]) == [
        "test_bench.py::test_join",
        "test_bench.py::test_sum",
    ]


@pytest.mark.skipif(CUDA, reason="a CUDA timer runs where CUDA is available")
@pytest.mark.parametrize("where", ["option", "marker"])
def test_15_a_cuda_timer_without_a_gpu_is_noted_on_each_result(
    pytester: pytest.Pytester, where: str
) -> None:
    marker = '@pytest.mark.gpubench(timer="cuda-graph")\n' if where == "marker" else ""
    pytester.makepyfile(
        f"import pytest\n\n\n{marker}def test_a(gpubench):\n    gpubench(abs, -1)\n"
    )
    args = ["--gpubench-timer=cuda-graph"] if where == "option" else []
    result = pytester.runpytest("--gpubench", "--gpubench-budget-s=0.1", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a *wall *new *",
            "test_a: timed by wall: cuda-graph asked for, but there is no CUDA GPU",
        ]
    )


@pytest.mark.skipif(CUDA, reason="the host timer's caveats are of CPU work")
def test_15_a_host_timing_that_cannot_be_gated_says_what_the_host_did(
    pytester: pytest.Pytester,
) -> None:
    """0.2 printed `gate 3675520.2%` for a loaded CPU machine; against one session the
    verdict gates only 50% (the gate the table shows), says why, and what the host showed
    while timing: here a process that did not run (the function sleeps, as a process waits
    on a loaded machine), seen by its CPU time."""
    pytester.makepyfile("import time\n\n\ndef test_a(gpubench):\n    gpubench(time.sleep, 0.001)\n")
    args = ("--gpubench-budget-s=0.1", "--gpubench-json=out.json")
    pytester.runpytest("--gpubench-save", *args).assert_outcomes(passed=1)
    result = pytester.runpytest("--gpubench", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_a *wall * 50.0% *ok (gate > 5%) *",
            "test_a: ok: * 1 session*; on this host *the process ran on a CPU *% of the "
            "time it timed (a loaded machine, or a function that waits)",
        ]
    )
    [measured] = json.loads((pytester.path / "out.json").read_text())["results"]
    assert "the process ran on a CPU " in measured["caveat"]
