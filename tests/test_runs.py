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
    result = pytester.runpytest_subprocess(
        "--gpubench", "-p", "no:cacheprovider", "-p", "no:xdist"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["gpubench: no measurements (*)", "loaded: torch=False triton=False scipy=False numpy=False"]
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
