"""Stored runs and true output (issue 19): runs kept under the baseline directory and named
by ``gpubench compare``, ``group=`` groups the table, one line of skip reasons, and a run
without gpubench tests costs nothing.

Each test failed before the change. The fake timer and the helpers are in tests/support.py
and tests/conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import BENCH, NO_CONFIRM, USAGE_ERROR, output

from pytest_gpubench import cli
from pytest_gpubench.store.runs import stored

# --- a run without gpubench tests costs nothing ----------------------------------------------

LOADED_CONFTEST = """
import sys

import pytest


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    # After the plugin's summary: what the whole run imported.
    terminalreporter.write_line(
        "loaded: "
        + " ".join(
            f"{name}={name in sys.modules}" for name in ("torch", "triton", "scipy", "numpy")
        )
    )
"""


@pytest.mark.slow
def test_a_gpubench_run_without_gpubench_tests_imports_nothing_heavy(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(LOADED_CONFTEST)
    pytester.makepyfile("def test_plain():\n    pass\n\n\ndef test_other():\n    pass\n")
    result = pytester.runpytest_subprocess("--gpubench", "-p", "no:cacheprovider", "-p", "no:xdist")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "gpubench: no measurements (*)",
            "loaded: torch=False triton=False scipy=False numpy=False",
        ]
    )


# --- skip reasons in one line -----------------------------------------------------------------

SKIPPING = """
import pytest


def test_timed(gpubench):
    gpubench(sum, [1, 2, 3])


def test_gpu_only(gpubench):
    pytest.skip("needs a CUDA GPU")


def test_gpu_only_too(gpubench):
    pytest.skip("needs a CUDA GPU")


@pytest.mark.skipif(True, reason="no triton")
def test_triton(gpubench):
    pass


def test_plain():
    pytest.skip("not a benchmark")
"""


def test_skip_reasons_of_untimed_tests_are_one_line_without_rs(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=SKIPPING)
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(
        ["gpubench: 3 tests not timed (skipped): needs a CUDA GPU (2); no triton (1)"]
    )
    assert "not a benchmark" not in result.stdout.str()  # not ours: -rs tells it


def test_skip_reasons_are_not_summarized_without_timing(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=SKIPPING)
    result = fake.runpytest()
    result.assert_outcomes(passed=1, skipped=4)
    assert "not timed" not in result.stdout.str()


# --- group= groups the table --------------------------------------------------------------------

GROUPED = """
import pytest


@pytest.mark.gpubench(group="reduce")
def test_sum(gpubench):
    gpubench(sum, [1, 2, 3])


def test_join(gpubench):
    gpubench("".join, ["a", "b"])


@pytest.mark.gpubench(group="reduce")
def test_max(gpubench):
    gpubench(max, [1, 2, 3])


@pytest.mark.gpubench(group="copy")
def test_copy(gpubench):
    gpubench(list, [1, 2, 3])
"""


def table_rows(text: str) -> list[str]:
    """The lines of the table: from its header to the line before the footer."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("test "))
    end = next(i for i, line in enumerate(lines) if line.startswith(("gpubench: ", "no baseline")))
    return [line.split()[0] if line.startswith("test_") else line for line in lines[start:end]]


def test_group_heads_its_tests_in_the_table(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=GROUPED)
    markdown = fake.path / "summary.md"
    result = fake.runpytest("--gpubench", NO_CONFIRM, f"--gpubench-markdown={markdown}")
    result.assert_outcomes(passed=4)
    rows = table_rows(result.stdout.str())
    assert rows[2:] == [
        "group 'copy': 1 test",
        "test_copy",
        "group 'reduce': 2 tests",
        "test_max",
        "test_sum",
        "no group: 1 test",
        "test_join",
    ]
    text = markdown.read_text()
    assert text.index("**group 'copy': 1 test**") < text.index("| test_copy")
    assert text.index("| test_copy") < text.index("**group 'reduce': 2 tests**")
    assert text.index("**no group: 1 test**") < text.index("| test_join")


def test_without_groups_the_table_has_no_headings(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=GROUPED.replace('group="reduce"', "").replace('group="copy"', ""))
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=4)
    assert table_rows(result.stdout.str())[2:] == ["test_copy", "test_join", "test_max", "test_sum"]


# --- stored runs --------------------------------------------------------------------------------


def runs_of(pytester: pytest.Pytester, folder: str = ".gpubench") -> list[str]:
    """The stored runs' file names, oldest first (as the store orders them: two runs of one
    second by when each was written)."""
    return [p.name for p in stored(pytester.path / folder)]


def test_each_run_is_stored_under_the_baseline_directory_and_ignored_by_git(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json")
    result.assert_outcomes(passed=2)
    [name] = runs_of(fake)
    runs = fake.path / ".gpubench" / "runs"
    result.stdout.fnmatch_lines(
        [f"run stored: {runs / name} (gpubench runs lists the stored runs)"]
    )
    # The run's result file, as --gpubench-json writes it; the folder ignores itself.
    assert (runs / name).read_text() == (fake.path / "out.json").read_text()
    assert (runs / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not list((fake.path / ".gpubench").glob("*.json"))  # no baseline without a save


def test_stored_runs_are_pruned_to_the_newest_kept_and_0_keeps_none(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(test_bench=BENCH)
    for _ in range(3):
        fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-keep-runs=2").assert_outcomes(passed=2)
    kept = runs_of(fake)
    assert len(kept) == 2
    fake.makeini("[pytest]\ngpubench_keep_runs = 0\n")
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    assert runs_of(fake) == kept
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-keep-runs=1").assert_outcomes(passed=2)
    [newest] = runs_of(fake)
    assert newest not in kept  # the run just made


def test_a_run_goes_with_the_baseline_directory(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-dir=perf").assert_outcomes(passed=2)
    assert len(runs_of(fake, "perf")) == 1 and runs_of(fake) == []


@pytest.mark.slow
def test_an_interrupted_run_stores_nothing(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench=BENCH + "\n\ndef test_stop(gpubench):\n    raise KeyboardInterrupt\n"
    )
    # In a process of its own: pytester's in-process run passes Ctrl-C on to this one.
    result = fake.runpytest_subprocess("--gpubench", NO_CONFIRM, "-p", "no:xdist")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "run stored" not in result.stdout.str()
    assert runs_of(fake) == []


def test_a_run_without_gpubench_tests_stores_nothing(fake: pytest.Pytester) -> None:
    fake.makepyfile("def test_plain():\n    pass\n")
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    assert not (fake.path / ".gpubench").exists()


@pytest.mark.slow
def test_only_the_controller_stores_a_run_under_xdist(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest_subprocess("--gpubench", NO_CONFIRM, "-n", "2")
    result.assert_outcomes(passed=2)
    [name] = runs_of(fake)
    stored = json.loads((fake.path / ".gpubench" / "runs" / name).read_text())
    assert sorted(r["test"] for r in stored["results"]) == ["test_join", "test_sum"]


def test_an_invalid_number_of_runs_to_keep_is_one_line(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    result = fake.runpytest("--gpubench", "--gpubench-keep-runs=some")
    assert result.ret == USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: invalid --gpubench-keep-runs 'some': expected a whole number of runs such "
            "as 20 (0: keep none)"
        ]
    )
    assert "Traceback" not in output(result)


def test_compare_names_stored_runs_and_runs_lists_them(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.makepyfile(test_bench=BENCH)
    for _ in range(2):
        fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    older, newer = runs_of(fake)
    monkeypatch.chdir(fake.path)
    capsys.readouterr()
    assert cli.main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "id", "tests", "device"]
    assert [line.split()[:3] for line in lines[2:]] == [
        ["last", Path(newer).stem, "2"],
        ["last~1", Path(older).stem, "2"],
    ]
    runs = Path(".gpubench/runs")
    for names in (["last~1", "last"], [older[:20], "last"], [str(runs / older), "last"]):
        assert cli.main(["compare", *names]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        assert first.startswith(f"gpubench compare: {runs / older} -> {runs / newer} ")


@pytest.mark.parametrize(
    "name, error",
    [
        ("last~2", "no stored run last~2: .gpubench/runs keeps 2 runs (last to last~1); "),
        ("2", "stored run 2 is ambiguous: 2 runs start with it; give more of its id "),
        ("nope", "no result file or stored run nope: name a file of pytest --gpubench-json, "),
    ],
)
def test_a_bad_run_name_is_one_line(
    fake: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    error: str,
) -> None:
    fake.makepyfile(test_bench=BENCH)
    for _ in range(2):
        fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    monkeypatch.chdir(fake.path)
    capsys.readouterr()
    assert cli.main(["compare", name, "last"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"gpubench: error: {error}")


def test_without_stored_runs_compare_and_runs_say_how_to_get_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli.main(["compare", "last~1", "last"]) == 2
    assert capsys.readouterr().err == (
        "gpubench: error: no result file last~1 and no stored runs in .gpubench/runs: name a "
        "file of pytest --gpubench-json, or run pytest --gpubench first (it stores each run)\n"
    )
    assert cli.main(["runs"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("gpubench: error: no stored runs in .gpubench/runs: ")


# --- pytest --help ----------------------------------------------------------------------------


def test_help_says_what_the_numbers_mean(pytester: pytest.Pytester) -> None:
    text = " ".join(pytester.runpytest("--help").stdout.str().split())
    assert "Significance level of the whole run: the chance it may take of failing a test" in text
    assert "such as 64MiB, or 4096 for bytes (default 1MiB)" in text  # not "1MiB (default)"
    assert "for gpubench compare last~1 last (default 20; 0: keep none)" in text


def test_a_save_after_a_stored_run_still_ignores_its_temporaries(fake: pytest.Pytester) -> None:
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=2)
    fake.runpytest("--gpubench-save", NO_CONFIRM).assert_outcomes(passed=2)
    ignore = fake.path / ".gpubench" / ".gitignore"
    assert "*.lock" in ignore.read_text().splitlines()


def test_a_run_file_is_named_by_its_session_and_commit() -> None:
    from pytest_gpubench.store import runs

    session = "20261127T233000Z-1a2b3c"
    assert runs.file_name(session, "0123ABCDef" + "0" * 30) == f"{session}-0123abcd.json"
    assert runs.file_name(session, None) == f"{session}.json"
    with pytest.raises(ValueError):
        runs.file_name("../x", None)  # a name never leaves the folder


def test_stored_runs_ignore_other_files(tmp_path: Path) -> None:
    from pytest_gpubench.store import runs

    folder = runs.folder(tmp_path)
    folder.mkdir()
    for name in ("20261127T233000Z-1a2b3c.json", "notes.json", ".gitignore"):
        (folder / name).write_text("{}")
    assert [p.name for p in runs.stored(tmp_path)] == ["20261127T233000Z-1a2b3c.json"]
    assert runs.resolve(tmp_path, "last") == folder / "20261127T233000Z-1a2b3c.json"
