"""The role of a fresh process the plugin started (run.children): to confirm a verdict, or to
record a session.

It runs the tests its parent asked for, tells its parent how it stands and what it measured
in its status file, in the parent's folder (run.children.tell), and writes nothing else of
the user's: its parent judges, saves and reports. It dies with its parent
(``run.processes.watch_parent``), and writes nothing when interrupted.
Once pytest is done it ends at once (``pytest_unconfigure``): its parent waits for it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..core.errors import GpubenchError
from ..run.children import DUO_VARIABLE, beat, child_document, foreign_imports, read_request, tell
from ..run.processes import BEAT_POLL_S, WRAPPED_VARIABLE, watch_parent
from .collect import Collected
from .measuring import BENCH_KEY, OUTCOMES, uses_fixture

if TYPE_CHECKING:
    from ..run.duo import Follower, Leader
    from ..run.session import BenchSession


class Child:
    """``out``: its status file, holding its parent's request; ``parent``: the pid it dies
    with; ``hold_device``: it confirms a verdict, beside siblings that started with it, or
    times a side of a comparison; ``turn``: in a relay of processes, it says once it holds
    the device (run.children.TURN_VARIABLE); ``gate``: in duos started together, it says
    once set up, and waits for this file before taking the device
    (run.children.GATE_VARIABLE)."""

    def __init__(
        self,
        out: Path,
        session: BenchSession | None,
        collected: Collected,
        *,
        parent: int | None,
        hold_device: bool,
        turn: str = "",
        gate: str = "",
    ) -> None:
        self.out = out
        self.request = read_request(out)
        self.gate = gate
        self.session = session
        self.collected = collected
        self.hold_device = hold_device
        self.turn = turn
        self.held = False
        # A process we started, not a test's pytest run in this one: it may end itself.
        self.started = parent is not None
        self.reported = False  # its session ended uncancelled, its results written (or tried)
        # Its session, once every plugin's sessionfinish ran without raising.
        self.finished: pytest.Session | None = None
        # Its end of a duo (run/duo.py), the other side's process holding the other; once
        # that process is gone, why (every later test then fails: no verdict).
        self.duo: Leader | Follower | None = None
        self.duo_ended = ""
        if parent is not None:
            watch_parent(parent, out.parent)

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """A process started to confirm, or to time a side of a comparison, runs only the
        tests its parent asked for."""
        request = self.request
        if request is None:
            return
        if self.session is not None:
            self.session.trace_into = None if request.evidence is None else Path(request.evidence)
            self.session.ncu_ranges = request.ncu
            self.session.floors = request.floors

        def kept(item: pytest.Item) -> bool:
            return request.keeps(item.nodeid, getattr(item, "fixturenames", ()))

        deselected = [item for item in items if not kept(item)]
        if deselected:
            items[:] = [item for item in items if kept(item)]
            config.hook.pytest_deselected(items=deselected)

    @pytest.hookimpl(trylast=True)  # after the measuring role's: the baseline read
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        tell(self.out, plan=[item.nodeid for item in session.items])
        spec = os.environ.get(DUO_VARIABLE)
        if spec and self.session is not None:
            from ..run.duo import joined

            benchmarks = [item.nodeid for item in session.items if uses_fixture(item)]
            self.duo = joined(spec, benchmarks)
            if benchmarks:
                # Both start the profiler now, at once, by the same settings (4.4 s on an
                # H200), not the leader once the follower's first offer came.
                with contextlib.suppress(Exception, pytest.skip.Exception, pytest.fail.Exception):
                    self.session.timer_ready()  # (what fails is said when a test times)

    # Signs of progress for its parent (run.children.CHILD_TIMEOUT_S bounds a quiet child),
    # naming the test running: a process that dies in it (an abort, a segfault) is replaced.
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        beat(self.out)

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        beat(self.out, nodeid)

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        beat(self.out, "")

    @pytest.hookimpl(tryfirst=True)  # before the measuring role's: it pins the device
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """A process of a relay (run.children.relay) takes the device before it touches it:
        started while the one before it times, it may only run what needs no GPU (its
        start-up and conftest files) until then; collection may create tensors."""
        if self.turn:
            self._hold()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """A process confirming a verdict, or timing a side of a comparison, holds the
        device from its first test to its last (a relay's, from its session's start). Such
        processes start together (run.children.run_children) or each while the one before
        it times (run.children.relay, which also keeps their order): their start-up
        overlaps, their GPU work (first calls, compiles, samples) does not. Then a duo's
        leader tells its follower to run its tests; the follower waits for that before any
        test's fixtures run."""
        if self.gate:
            # In duos started together (run.children.run_duos): set up (collected, its
            # profiler started), and, leading, wait until its parent says every process is,
            # so that no set-up runs beside a duo's measurements (its parent bounds the wait).
            tell(self.out, ready=True)
            while self.hold_device and not Path(self.gate).exists():
                time.sleep(BEAT_POLL_S)
        if not self.held:
            self._hold()
        if self.duo is not None:
            with self._unless_duo_ended():
                self.duo.begin()
        try:
            return (yield)
        finally:
            if self.held:
                assert self.session is not None
                self.session.device_lock().release()
                self.held = False

    @pytest.hookimpl(wrapper=True)  # inside the measuring role's: it judges what this pairs
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """In a duo: the follower holds the test's calls, then offers them and samples them
        as the leader asks; the leader pairs its calls with them, then says it is done. Once
        the other process is gone, the test fails, saying why."""
        bench = item.stash.get(BENCH_KEY, None)
        if self.duo is not None and bench is not None and not self.duo_ended:
            with self._unless_duo_ended():
                bench.lockstep = self.duo.lockstep(item.nodeid) or bench.lockstep
        if self.duo_ended:
            pytest.fail(f"the duo ended: {self.duo_ended}", pytrace=False)
        if self.duo is None or bench is None:
            return (yield)
        failed = None  # stays None on Ctrl-C: the duo goes no further
        try:
            outcome = yield
            failed = ""
            return outcome
        except OUTCOMES as exc:
            why = f"its test did not pass there ({type(exc).__name__})"
            failed = str(exc) if isinstance(exc, GpubenchError) else why
            raise
        finally:
            if failed is not None and bench.lockstep is not None and self.session is not None:
                with self._unless_duo_ended():
                    self.duo.after(item.nodeid, bench.lockstep, failed, self.session)

    @contextlib.contextmanager
    def _unless_duo_ended(self) -> Iterator[None]:
        """A step of the duo; once the other process is gone, why: ``duo_ended``."""
        from ..run.sides import DuoError

        try:
            yield
        except DuoError as exc:
            self.duo_ended = str(exc)

    def _hold(self) -> None:
        """Take the device lock, waiting as long as it takes (its parent bounds the wait);
        in a relay, then say so (the next process starts and queues behind this one)."""
        if self.session is None or not self.hold_device:
            return
        try:
            self.session.device_lock().acquire(wait_s=-1)
            self.held = True
        except GpubenchError:
            return  # each measurement still waits for the device itself
        if self.turn:
            tell(self.out, held=True)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # Cancelled, its parent gets nothing, and says so; else it reports a process that
        # measured nothing, with its output.
        if exitstatus not in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR):
            tell(
                self.out,
                **child_document(self.collected.outcomes, foreign_imports(), self.collected.failed),
            )
            self.reported = True
        if self.duo is not None:  # a follower's last word: no more tests on its side
            self.duo.end()

    @pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_around(
        self, session: pytest.Session
    ) -> Generator[None, object, object]:
        """Around every plugin's sessionfinish (the terminal summary's too): once none
        raised, the session whose exit status the process ends with. One that raised
        (``pytest.exit`` included) leaves it to pytest: its traceback and exit status."""
        result = yield
        self.finished = session
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """Its results written and every plugin unconfigured, the process ends with pytest's
        exit status, skipping the interpreter's teardown (exit handlers such as Inductor's
        worker pool's, every module freed, the CUDA context released), which its parent,
        waiting for it on the user's time, would wait for too. Its parent ends what it left
        running (its process group). Not under a wrapper: Nsight Compute reads its
        target's end."""
        if not (self.started and self.reported and self.finished is not None):
            return
        if WRAPPED_VARIABLE in os.environ:
            return
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()  # type: ignore[union-attr]
        # The session's, not sessionfinish's argument: a later plugin may have set it.
        os._exit(int(self.finished.exitstatus))
