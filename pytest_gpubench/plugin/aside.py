"""An xdist worker's role beside measuring: a flagged test is confirmed while the worker goes
on with its next tests.

Fresh processes confirm a flagged verdict in 15-30 s on an H200 (docs/performance.md). A
worker that waited for them took no test meanwhile, and xdist handed the other workers the
rest: one GPU timed most of the run. Here the worker starts the confirmation in a thread and
goes on; the flagged test is reported once its fresh processes have ended, with its final
verdict, which fails it like any failure (under xdist, ``-x`` already stops late). While
they run, the worker holds the device lock over each whole test, so its GPU work (set-up,
correctness checks, first calls) never overlaps their timing, and lets go between two tests
for them to take turns. At most MAX_ASIDE confirmations run aside: a test flagged while
they run waits for the first of them (so a suite that regressed as a whole starts no more
processes than that).

Holding a flagged test's reports means owning the runtest protocol of the gpubench tests, as
pytest-rerunfailures does (through pytest's ``runtestprotocol``), except where a rerun plugin
may repeat the test or an ``xfail`` marker would turn its failure into an outcome of its
own: those confirm as they do without xdist. A held report is sent under the test's own
index in xdist's worker (its WorkerInteractor's ``item_index``: xdist checks each report
against it); a worker without one confirms as without xdist.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING

import pytest

from ..core.records import Result
from .collect import REPORT_ATTRIBUTE

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr

    from ..run.session import BenchSession

# How long a worker lets go of the device between two tests while a confirmation runs: a
# few tries of a fresh process that waits for it (timing.gpus.HOLD_POLL_S).
TURN_S = 0.02
# Confirmations running aside at once, each in its own fresh processes: two flagged tests
# near the end of a worker's share overlap theirs (measured on two H200s: in turns, the
# second added its whole 16 s to the run).
MAX_ASIDE = 2
# The tests whose protocol this role runs: their reports wait for a confirmation.
OWNED_KEY: pytest.StashKey[bool] = pytest.StashKey()

# Run in the thread, given the event that stops it: the confirmed results.
Confirm = Callable[[threading.Event], Sequence[Result]]
# Run in the worker's thread once the confirmation ended: the final results and the lines of
# the verdicts that fail the test.
Settle = Callable[[Sequence[Result]], tuple[Sequence[Result], list[str]]]


@dataclasses.dataclass
class Pending:
    """A flagged test whose confirmation runs aside: filled in as it goes (the thread sets
    ``confirmed`` or ``error``; the protocol, the test's reports)."""

    item: pytest.Item
    index: int  # the test's index in xdist's worker
    first: Sequence[Result]  # its first look
    settle: Settle
    thread: threading.Thread | None = None
    confirmed: Sequence[Result] | None = None
    error: BaseException | None = None
    reports: list[pytest.TestReport] | None = None


class ConfirmingAside:
    """Confirmations beside the tests of an xdist worker (``worker``: xdist's interactor),
    on the device of ``session``; ``benchmark`` tells the tests that may be flagged. What a
    test waits for the device before it starts is charged to its first measurement."""

    def __init__(
        self,
        worker: object,
        session: BenchSession,
        benchmark: Callable[[pytest.Item], bool],
    ) -> None:
        self.worker = worker
        self.session = session
        self.benchmark = benchmark
        self.pending: list[Pending] = []  # in the order flagged
        self.stop = threading.Event()
        self.holding = False

    def takes(self, item: pytest.Item) -> bool:
        """Whether a flagged verdict of ``item`` can be confirmed aside: this role runs its
        protocol, and xdist's worker knows it by its index."""
        return bool(item.stash.get(OWNED_KEY, False)) and self._index(item) is not None

    def start(
        self, item: pytest.Item, first: Sequence[Result], confirm: Confirm, settle: Settle
    ) -> None:
        """Confirm ``item``'s flagged ``first`` look in a thread (``confirm``); its reports
        are sent with what ``settle`` makes of the confirmed results once it ends."""
        index = self._index(item)
        assert index is not None  # takes(item)
        while len(self.pending) >= MAX_ASIDE:
            self._make_room()
        pending = Pending(item, index, first, settle)

        def run() -> None:
            try:
                pending.confirmed = confirm(self.stop)
            except BaseException as exc:  # said in the test's failure, in the worker's thread
                pending.error = exc

        pending.thread = threading.Thread(target=run, name="gpubench-confirm-aside", daemon=True)
        self.pending.append(pending)
        pending.thread.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        """A gpubench test's protocol, its reports held where its verdict is confirmed aside
        (pytest runs the others: None)."""
        if not self._owns(item):
            return None
        from _pytest.runner import runtestprotocol  # as pytest-rerunfailures does

        item.stash[OWNED_KEY] = True
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        pending = next((p for p in self.pending if p.item is item), None)
        if pending is not None:
            pending.reports = reports  # sent once its confirmation ends
        else:
            self._log(item, reports)
        return True

    @pytest.hookimpl(wrapper=True, specname="pytest_runtest_protocol")
    def pytest_runtest_protocol_around(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Before each test, the flagged tests whose confirmations ended are reported; while
        one runs, the test holds the device, and lets go of it afterwards for a moment."""
        self._report_ended()
        if not self.pending:
            return (yield)
        asked = time.perf_counter()
        self.session.device_lock().acquire(wait_s=-1)
        self.session.waited_s += time.perf_counter() - asked
        self.holding = True
        try:
            return (yield)
        finally:
            self.holding = False
            self.session.waited_s = 0.0  # a test that measured nothing waited for no timing
            self.session.device_lock().release()
            if self.pending:
                time.sleep(TURN_S)  # a fresh process waiting for the device takes it now

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """After the worker's last test, its flagged tests wait for their confirmations and
        are reported; an interrupted worker stops the confirmations (their verdicts stay
        unconfirmed) and reports them all the same."""
        try:
            return (yield)
        except BaseException:
            self.stop.set()
            raise
        finally:
            with contextlib.suppress(Exception):
                while self.pending:
                    self._finish()

    def _owns(self, item: pytest.Item) -> bool:
        return (
            self.benchmark(item)
            and item.get_closest_marker("xfail") is None
            and not may_rerun(item)
            and self._index(item) is not None
        )

    def _index(self, item: pytest.Item) -> int | None:
        index = getattr(self.worker, "item_index", None)
        items = item.session.items
        if isinstance(index, int) and 0 <= index < len(items) and items[index] is item:
            return index
        return None

    def _report_ended(self) -> None:
        """Report the flagged tests whose confirmations ended, in the order flagged."""
        while self.pending and self.pending[0].reports is not None:
            thread = self.pending[0].thread
            if thread is None or thread.is_alive():
                return
            self._finish()

    def _make_room(self) -> None:
        """Wait for the first confirmation that runs aside, and report its test. The device
        is let go of meanwhile (fresh processes need it)."""
        holding = self.holding
        if holding:
            self.session.device_lock().release()
        try:
            self._finish()
        finally:
            if holding:
                self.session.device_lock().acquire(wait_s=-1)

    def _finish(self) -> None:
        """Wait for the first confirmation aside to end; report its test."""
        pending = self.pending.pop(0)
        assert pending.thread is not None
        pending.thread.join()
        if pending.reports is None:
            return  # its protocol did not end (interrupted): pytest says so
        if pending.error is not None:
            results, failures = pending.settle(pending.first)
            failures.append(
                f"gpubench: its confirmation failed: {type(pending.error).__name__}: "
                f"{pending.error}"
            )
        else:
            assert pending.confirmed is not None
            results, failures = pending.settle(pending.confirmed)
        for report in pending.reports:
            if report.when != "call":
                continue
            setattr(report, REPORT_ATTRIBUTE, tuple(results))
            if failures and report.passed:
                report.outcome = "failed"
                report.longrepr = failure_repr(pending.item, "\n".join(failures))
        current = getattr(self.worker, "item_index", None)
        setattr(self.worker, "item_index", pending.index)  # noqa: B010 (xdist's own)
        try:
            self._log(pending.item, pending.reports)
        finally:
            setattr(self.worker, "item_index", current)  # noqa: B010

    @staticmethod
    def _log(item: pytest.Item, reports: Sequence[pytest.TestReport]) -> None:
        for report in reports:
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def may_rerun(item: pytest.Item) -> bool:
    """Whether a rerun plugin may repeat ``item``: it runs the test's protocol then. Asked
    of pytest-rerunfailures itself; any other (flaky) is assumed to."""
    manager = item.config.pluginmanager
    if manager.hasplugin("flaky"):
        return True
    plugin = manager.get_plugin("rerunfailures")
    if plugin is None:
        return False
    count = getattr(plugin, "get_reruns_count", None)
    try:
        return count is None or bool(count(item))
    except Exception:  # its API moved: it may
        return True


def failure_repr(item: pytest.Item, message: str) -> str | TerminalRepr:
    """What pytest makes of ``pytest.fail(message, pytrace=False)`` in ``item``'s call."""
    try:
        pytest.fail(message, pytrace=False)
    except pytest.fail.Exception:
        excinfo = pytest.ExceptionInfo.from_current()
    return item.repr_failure(excinfo)


def xdist_worker(config: pytest.Config) -> object | None:
    """xdist's interactor in this worker process (registered without a name), if any."""
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor" and hasattr(plugin, "sendevent"):
            found: object = plugin
            return found
    return None
