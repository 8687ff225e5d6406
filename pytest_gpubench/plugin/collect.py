"""The results of a run, from its call reports, in every process but an xdist worker."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ..core.records import Result

# Results ride on the call report (through xdist too: see the serialization hooks).
REPORT_ATTRIBUTE = "gpubench"
# Set on the report of a gpubench test that skipped (so was not timed), with its reason.
SKIPPED_ATTRIBUTE = "gpubench_skipped"


class Collected:
    """Each measured test's results with whether the test passed. The last attempt of a test
    wins: pytest-rerunfailures logs an attempt it repeats with the outcome ``rerun``, and its
    sessions must not add up with the final attempt's."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[Result, bool]] = {}
        self.skipped: dict[str, str] = {}  # why each gpubench test skipped, by node id
        # The tests that failed with no result (an error while timed), with their error.
        self.failed: dict[str, str] = {}

    @property
    def outcomes(self) -> list[tuple[Result, bool]]:
        return list(self._by_key.values())

    @property
    def results(self) -> list[Result]:
        return [result for result, _ in self._by_key.values()]

    def add(self, result: Result, passed: bool = True) -> None:
        """A result no test of this run reports (measured on a revision's side only)."""
        self._by_key[result.key] = (result, passed)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reason = getattr(report, SKIPPED_ATTRIBUTE, None)
        if report.skipped and isinstance(reason, str):
            self.skipped[report.nodeid] = reason
        results = getattr(report, REPORT_ATTRIBUTE, None)
        # pytest-rerunfailures sets an outcome pytest's types do not know
        if report.when != "call" or str(report.outcome) == "rerun":
            return
        if report.failed and not results:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = str(getattr(crash, "message", "") or "").strip()
            self.failed[report.nodeid] = message.splitlines()[0][:200] if message else ""
        if not results:
            return
        for result in results:
            self._by_key[result.key] = (result, report.passed)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(self) -> Generator[None, object, object]:
        """A report from an xdist worker: its results back to records."""
        report = yield
        entries = getattr(report, REPORT_ATTRIBUTE, None)
        if isinstance(entries, list):
            setattr(report, REPORT_ATTRIBUTE, tuple(Result.from_dict(e) for e in entries))
        return report
