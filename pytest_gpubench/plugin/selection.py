"""``--gpubench-only`` and ``--gpubench-skip``: which tests run, by whether they benchmark.

Registered in every process that collects (the user's, an xdist worker, a fresh process the
plugin started) when one of the two is given. A test benchmarks when it uses the ``gpubench``
fixture, directly or through another fixture (the ``benchmark`` fixture of
``--gpubench-benchmark-fixture`` is one). The others are skipped, not deselected: the run
says how many, with one reason, and ``--lf``, ``-x`` and xdist see ordinary skips."""

from __future__ import annotations

import pytest

from .measuring import uses_fixture

SKIPPED_OTHERS = "not a benchmark (--gpubench-only)"
SKIPPED_BENCHMARKS = "a benchmark (--gpubench-skip)"


class Selection:
    def __init__(self, *, only: bool) -> None:
        self.only = only

    @pytest.hookimpl(trylast=True)  # after -k, -m and --lf have chosen the items
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        reason = SKIPPED_OTHERS if self.only else SKIPPED_BENCHMARKS
        for item in items:
            if uses_fixture(item) != self.only:
                item.add_marker(pytest.mark.skip(reason=reason))
