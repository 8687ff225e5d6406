"""Stored runs and true output (issue 19): runs kept under the baseline directory and named
by ``gpubench compare``, ``group=`` groups the table, one line of skip reasons, and a run
without gpubench tests costs nothing.

Each test failed before the change. The fake timer and the helpers are in tests/support.py
and tests/conftest.py.
"""

from __future__ import annotations

import pytest
from support import NO_CONFIRM

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
