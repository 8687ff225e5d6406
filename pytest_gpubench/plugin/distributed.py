"""Against a revision under pytest-xdist: the comparison in the controller, the tests in its
workers.

An xdist controller collects nothing: its workers collect and run the tests. Each worker
writes, as it collects, the measurement settings of its benchmarks (their markers') into a
folder of the controller's; once every worker has collected, and before the scheduler hands
out a test, the controller times both sides in fresh processes (versus/ab.py, as without
xdist; with several GPUs, one relay of processes on each of as many as there are workers)
and writes every verdict into that folder; each worker's tests then run untimed and take
their verdicts from there, so a regression fails its test in whichever worker runs it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..core.codec import decode, encode
from ..core.errors import GpubenchError
from ..core.records import Result
from ..core.samples import plural
from ..core.settings import MeasureSettings
from ..store import files as storage
from ..versus import revision
from .measuring import resolve_markers, uses_fixture

if TYPE_CHECKING:
    from ..run.session import BenchSession
    from .controller import Controller

# The key of the folder's path in each worker's ``workerinput``.
FOLDER_INPUT = "gpubench_against_folder"
# The controller's folder in the temporary directory: <prefix><random>, with an owner file.
FOLDER_PREFIX = "gpubench-xdist-"
VERDICTS = "verdicts.json"


@dataclass(frozen=True)
class Verdicts:
    """What the controller's comparison hands its workers (the file VERDICTS): the verdicts
    by measurement key, the lines of the tests it measured on neither side by node id
    (versus.ab.unjudged), and the tests the working tree's processes died in
    (versus.ab.Comparison.crashed)."""

    results: Mapping[str, Result]
    unjudged: Mapping[str, str]
    crashed: tuple[str, ...]


class DistributedComparison:
    """The controller's part: a folder for its workers, and the comparison once every
    worker has collected."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        # Those of controllers killed outright (SIGKILL: no unconfigure) go first.
        base = Path(tempfile.gettempdir())
        revision.sweep(base, FOLDER_PREFIX)
        try:
            self.folder = revision.own(Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX)))
        except OSError as exc:
            raise pytest.UsageError(
                f"--gpubench-against under xdist: cannot create a folder in {base} "
                f"({exc.strerror or exc}); set TMPDIR to a writable folder"
            ) from None
        self.nodes: set[str] = set()
        # The node ids each worker collected, by worker.
        self.collected: dict[str, list[str]] = {}
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
        self.collected[node.gateway.id] = list(ids)
        if self.done or not self.nodes <= self.collected.keys():
            return
        self.done = True
        session = self.session
        assert session is not None  # (registered at configure time: its sessionstart ran)
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            # As pytest stops without xdist; xdist would run the rest, none compared.
            errors = plural(session.testsfailed, "error")
            raise session.Interrupted(f"{errors} during collection")
        apart = differing(self.collected)
        if apart is not None and session.config.option.dist != "each":
            # xdist then runs nothing (but under --dist each), in an error of its own.
            self.controller.announce(
                f"workers {apart[0]} and {apart[1]} collected different tests: nothing is timed"
            )
            return
        silent = sorted(n for n in self.nodes if not (self.folder / measures_file(n)).exists())
        if silent:
            pytest.exit(
                f"gpubench: worker {silent[0]} did not say which benchmarks it collected "
                f"(its folder {self.folder} unreachable?): nothing is timed",
                returncode=pytest.ExitCode.INTERNAL_ERROR,
            )
        # As many GPUs as workers, where there are: one relay of processes on each.
        from ..timing import gpus

        lanes = min(len(self.nodes), gpus.visible_devices())
        devices = list(range(lanes)) if lanes > 1 else []
        found = self.controller.compare(read_measures(self.folder), devices)
        bench = self.controller.session
        assert bench is not None  # (compare asserts it too)
        verdicts = Verdicts(found, dict(bench.unjudged), tuple(sorted(bench.crashed)))
        try:
            text = json.dumps(encode(verdicts), allow_nan=True)
            storage.write_atomic(self.folder / VERDICTS, text, "verdicts")
        except GpubenchError as exc:
            pytest.exit(f"gpubench: {exc}", returncode=pytest.ExitCode.INTERNAL_ERROR)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def differing(collected: Mapping[str, Sequence[str]]) -> tuple[str, str] | None:
    """Two workers that collected different tests (xdist's own check: the same node ids in
    the same order), or None where all collected the same."""
    ordered = sorted(collected.items())
    for worker, ids in ordered[1:]:
        if ids != ordered[0][1]:
            return ordered[0][0], worker
    return None


def measures_file(worker: str) -> str:
    return f"measures-{worker}.json"


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
        # Node ids xdist's --dist loadgroup renamed (``id@group``), by the id they are timed by.
        self.renamed: dict[str, str] = {}

    @pytest.hookimpl(tryfirst=True)  # before xdist's, which tells the controller
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        measures = {}
        for item in session.items:
            if not uses_fixture(item):
                continue
            try:
                measure = resolve_markers(item, self.session.settings).measure
            except GpubenchError:
                measure = self.session.settings.measure  # its test fails at its setup
            measures[self._timed_as(item)] = vars(measure)
        # Else the controller stops the run, naming this worker.
        with contextlib.suppress(GpubenchError):
            storage.write_atomic(
                self.folder / measures_file(self.worker), json.dumps(measures), "settings"
            )

    def _timed_as(self, item: pytest.Item) -> str:
        """The node id a fresh process knows the test by: without the ``@group`` that
        --dist loadgroup adds in the workers."""
        group = item.get_closest_marker("xdist_group")
        nodeid = item.nodeid
        if group is not None and "@" in nodeid:
            plain = nodeid.rsplit("@", 1)[0]
            self.renamed[plain] = nodeid
            return plain
        return nodeid

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.session.comparison is not None:
            return
        path = self.folder / VERDICTS
        try:
            read: Verdicts | None = decode(Verdicts, json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            read = None  # (failed outside the handler: no chained traceback in its report)
        if read is None:
            if uses_fixture(item):
                pytest.fail(
                    "gpubench: the comparison against the revision did not reach this "
                    f"worker ({path} missing): not judged",
                    pytrace=False,
                )
            return
        self.session.comparison = {self._renamed(k): r for k, r in read.results.items()}
        self.session.unjudged = {self._renamed(n): line for n, line in read.unjudged.items()}
        self.session.crashed = frozenset(self._renamed(n) for n in read.crashed)

    def _renamed(self, key: str) -> str:
        """A verdict's key as this worker knows its test (``id@group`` under loadgroup)."""
        nodeid, sep, name = key.partition("#")
        return self.renamed.get(nodeid, nodeid) + sep + name
