"""Against a revision under pytest-xdist: the comparison in the controller, the tests in its
workers.

An xdist controller collects nothing: its workers collect and run the tests. Each worker
writes, as it collects, the measurement settings of its benchmarks (their markers') into a
folder of the controller's; once every worker has collected, and before the scheduler hands
out a test, the controller times both sides in fresh processes (run/ab.py, as without
xdist) and writes every verdict into that folder; each worker's tests then run untimed and
take their verdicts from there, so a regression fails its test in whichever worker runs it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import GpubenchError
from ..core.records import Result
from ..core.settings import MeasureSettings
from ..store import files as storage
from .measuring import MARKER, resolve_markers

if TYPE_CHECKING:
    from ..run.session import BenchSession
    from .controller import Controller

# The key of the folder's path in each worker's ``workerinput``.
FOLDER_INPUT = "gpubench_against_folder"
VERDICTS = "verdicts.json"


class DistributedComparison:
    """The controller's part: a folder for its workers, and the comparison once every
    worker has collected."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.folder = Path(tempfile.mkdtemp(prefix="gpubench-xdist-"))
        self.nodes: set[str] = set()
        self.collected: set[str] = set()
        self.done = False
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[FOLDER_INPUT] = str(self.folder)
        self.nodes.add(node.gateway.id)

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        self.nodes.discard(node.gateway.id)

    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        """Called before the scheduler hands out this collection's tests: once every worker
        has collected, the comparison runs here, the workers waiting."""
        self.collected.add(node.gateway.id)
        if self.done or not self.nodes <= self.collected:
            return
        self.done = True
        session = self.session
        if session is not None and session.testsfailed:
            if not session.config.option.continue_on_collection_errors:
                return  # pytest stops on the collection errors; nothing is timed
        found = self.controller.compare(read_measures(self.folder))
        storage.write_atomic(
            self.folder / VERDICTS,
            json.dumps({key: r.to_dict() for key, r in found.items()}, allow_nan=True),
            "verdicts",
        )

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def read_measures(folder: Path) -> dict[str, MeasureSettings]:
    """The benchmarks the workers collected, with their measurement settings."""
    measures: dict[str, MeasureSettings] = {}
    for path in sorted(folder.glob("measures-*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for nodeid, values in data.items():
            measures.setdefault(nodeid, MeasureSettings(**values))
    return measures


class WorkerVerdicts:
    """A worker's part: it says which benchmarks it collected and with which settings, and
    its tests take their verdicts from the controller's comparison."""

    def __init__(self, folder: Path, worker: str, session: BenchSession) -> None:
        self.folder = folder
        self.worker = worker
        self.session = session

    @pytest.hookimpl(tryfirst=True)  # before xdist's, which tells the controller
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        measures = {}
        for item in session.items:
            if MARKER not in getattr(item, "fixturenames", ()):
                continue
            try:
                measure = resolve_markers(item, self.session.settings).measure
            except GpubenchError:
                measure = self.session.settings.measure  # its test fails at its setup
            measures[item.nodeid] = vars(measure)
        try:
            storage.write_atomic(
                self.folder / f"measures-{self.worker}.json", json.dumps(measures), "settings"
            )
        except GpubenchError:
            pass  # the controller then judges these tests by the session's settings

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.session.comparison is None:
            self.session.comparison = read_verdicts(self.folder / VERDICTS)


def read_verdicts(path: Path) -> Mapping[str, Result]:
    """The comparison's verdicts by measurement key (none when it timed nothing)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {key: Result.from_dict(entry) for key, entry in data.items()}
