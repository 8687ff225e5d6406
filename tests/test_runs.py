"""Stored runs and true output (issue 19): runs kept under the baseline directory and named
by ``gpubench compare``, ``group=`` groups the table, one line of skip reasons, and a run
without gpubench tests costs nothing.

Each test failed before the change. The fake timer and the helpers are in tests/support.py
and tests/conftest.py.
"""

from __future__ import annotations

import pytest

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
