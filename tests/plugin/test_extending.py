"""The extension points work as documented: docs/extending.md's timer, run as it stands."""

from __future__ import annotations

import re

import pytest
from support import CUDA, ROOT, baseline_file, read_baseline

DOC = ROOT / "docs" / "extending.md"


def documented_conftest() -> str:
    """The page's complete conftest: its Python block that defines a timer."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    [conftest] = [block for block in blocks if "class " in block and "Sampler(" in block]
    return conftest


@pytest.mark.skipif(CUDA, reason="the documented timer stands in for the CPU's")
def test_a_timer_written_from_the_docs_times_and_records_its_launches(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(documented_conftest())
    pytester.makepyfile(
        test_work="""
        def work():
            return sum(range(1000))

        def test_work(gpubench):
            assert gpubench(work) == 499500
        """
    )
    saved = pytester.runpytest("--gpubench-save", "--gpubench-confirm=0")
    saved.assert_outcomes(passed=1)
    saved.stdout.fnmatch_lines(["test_work *host-clock * new *"])
    entry = read_baseline(pytester)["benchmarks"]["test_work.py::test_work"]
    assert entry["timer"] == "host-clock"
    assert entry["kernels"] == [{"name": "work", "kind": "kernel", "count": 1, "share": 1.0}]
    # Judged against it (its verdict is this machine's noise, not what is tested here): the
    # same timer, the same launches, a history of one session.
    again = pytester.runpytest("--gpubench", "--gpubench-confirm=0")
    [row] = [line for line in again.outlines if re.match(r"test_work +host-clock ", line)]
    assert re.search(r"^test_work +host-clock .* (µs|ms) +1 +[-+]", row), row  # 1 session
    assert "incomparable" not in row and " new" not in row
    assert baseline_file(pytester).exists()


def test_the_documented_names_are_the_public_api() -> None:
    import pytest_gpubench

    text = DOC.read_text(encoding="utf-8")
    for name in pytest_gpubench.__all__:
        if name != "__version__":
            assert f"`{name}`" in text, name
