"""The role of every process: time gpubench tests, and make each final verdict its test's
outcome, failing the call phase as an assertion would (docs/guide.md, "Verdicts"). The tests
flagged in the user's run are confirmed together after the last test, their reports held
until then (``pytest_runtest_protocol``); pytest-timeout's timer of the test is paused while
they are (``timeout_paused``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING

import pytest

from ..core.errors import GpubenchError
from ..core.records import Result
from ..core.settings import MarkerSpec, Settings, check_marker_keywords
from .collect import REPORT_ATTRIBUTE, SKIPPED_ATTRIBUTE

if TYPE_CHECKING:
    from ..core.records import Measurement
    from ..core.settings import MeasureSettings
    from ..run.fixture import GpuBench
    from ..run.session import BenchSession
    from ..run.sides import Lockstep
    from ..versus.lockstep import Pairing, Pending

MARKER = "gpubench"
# How a test's body ends other than by returning: an error, or pytest's own outcomes (which
# are no Exception). Its measurements are reported, unconfirmed; KeyboardInterrupt passes.
OUTCOMES = (Exception, pytest.fail.Exception, pytest.skip.Exception, pytest.xfail.Exception)
BENCH_KEY: pytest.StashKey[GpuBench] = pytest.StashKey()
# Against a revision in this process: the test's two sides, and why its revision's body did
# not pass ('' when it did); None otherwise.
LOCK_KEY: pytest.StashKey[tuple[Lockstep, str] | None] = pytest.StashKey()

# A test's markers, resolved once at collection: its settings, or why they are invalid.
SPEC_KEY: pytest.StashKey[MarkerSpec | str] = pytest.StashKey()
# Set when the run stopped at a damaged baseline (a usage error, said in one line): the
# controller then saves, writes and summarizes nothing.
REFUSED_KEY: pytest.StashKey[bool] = pytest.StashKey()
# The results of a test's call phase, for its report.
RESULTS_KEY: pytest.StashKey[tuple[Result, ...]] = pytest.StashKey()
# Set while a test runs under this plugin's protocol: its flagged verdicts wait for the
# run's end, to be confirmed with the others in the same fresh processes.
DEFER_KEY: pytest.StashKey[bool] = pytest.StashKey()
# Why a test has no verdict (Ctrl-C while it was confirmed); '' when it has one. Its call
# then reports skipped with this reason, not passed.
NO_VERDICT_KEY: pytest.StashKey[str] = pytest.StashKey()


@dataclasses.dataclass
class Waiting:
    """A test whose flagged verdicts wait for the run's confirmation, and its reports (its
    outcome is known only then); ``pending``: a test timed in lockstep, whose failures wait
    for a second process (versus.lockstep.Pairing.second_processes)."""

    item: pytest.Item
    results: tuple[Result, ...]
    settings: MeasureSettings
    reports: list[pytest.TestReport] = dataclasses.field(default_factory=list)
    pending: Pending | None = None

    def ended(self) -> tuple[Result, ...]:
        """Its results as they stand, with no confirmation."""
        if self.pending is None:
            return self.results
        from ..versus.lockstep import ended

        return ended(self.pending)


@functools.lru_cache(maxsize=4)
def accept_expression(text: str) -> Callable[[pytest.Item], bool]:
    """Whether a test is one that ``--gpubench-accept-only`` names: pytest's own -k matching
    (its parser and matcher, private to pytest but what -k means), so that the tests it
    accepts are those ``-k`` with the same expression would run. A usage error names an
    expression that pytest cannot parse."""
    from _pytest.mark import KeywordMatcher
    from _pytest.mark.expression import Expression

    try:
        expression = Expression.compile(text)
    except Exception as exc:  # SyntaxError since pytest 8.1, ParseError before
        raise pytest.UsageError(
            f"invalid --gpubench-accept-only {text!r}: {exc}; expected a -k style expression "
            "such as 'softmax and not fp16'"
        ) from None
    return lambda item: expression.evaluate(KeywordMatcher.from_item(item))


def resolve_markers(item: pytest.Item, settings: Settings) -> MarkerSpec:
    """The test's ``gpubench`` markers merged, closest first per keyword (a function's marker
    over its class's over its module's ``pytestmark``), over the session's settings; with
    ``--gpubench-accept-only``, a save accepts in the tests it matches (a marker's
    ``accept=`` still decides for its own test)."""
    if settings.accept_only is not None:
        accept = accept_expression(settings.accept_only)(item)
        measure = dataclasses.replace(settings.measure, accept=accept)
        settings = dataclasses.replace(settings, measure=measure)
    keywords: dict[str, object] = {}
    for marker in item.iter_markers(MARKER):
        if marker.args:
            raise GpubenchError(
                f"{item.nodeid}: @pytest.mark.gpubench takes keywords only, got positional "
                f"{marker.args!r:.60}"
            )
        for key, value in marker.kwargs.items():
            keywords.setdefault(key, value)
    spec = check_marker_keywords(keywords, item.nodeid, settings)
    if settings.benchmark_fixture:  # pytest-benchmark's marker names the group too
        from .benchmark import marker_group

        group = marker_group(item)
        if spec.group is None and group is not None:
            spec = dataclasses.replace(spec, group=group)
    return spec


class Measuring:
    """Times the gpubench tests of this process: the user's own run, an xdist worker, or a
    fresh process the plugin started. ``session`` is None without ``--gpubench``;
    ``announce`` writes a line for the user (a no-op where no one reads it); ``pin``: this
    process times on the GPU it was given (an xdist worker's, a fresh process's parent's)."""

    def __init__(
        self,
        settings: Settings,
        session: BenchSession | None,
        announce: Callable[[str], None],
        *,
        pin: bool,
    ) -> None:
        self.settings = settings
        self.session = session
        self.announce = announce
        self.pin = pin
        # Against a revision in this process: its two sides (set by the controller, or
        # from the parent's checkout in a fresh process).
        self.pairing: Pairing | None = None
        # Tests whose flagged verdicts wait for the run's end (DEFER_KEY), by node id.
        self.waiting: dict[str, Waiting] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.session is None:
            return
        from ..timing.gpus import cuda_available, pin_worker

        if self.pin and cuda_available():
            pin_worker()  # before the device is detected: it is the pinned one
        config = session.config
        if self.pin or config.getoption("dist", "no") != "no":
            # Under xdist the controller collects no test: the baseline is read now.
            self._check_baseline(config)
        # Otherwise once the tests are collected, and only when one of them is a gpubench
        # test: a run without any detects no device and imports neither torch nor scipy.

    def _check_baseline(self, config: pytest.Config) -> None:
        """Read (and check) the baseline before any test: a damaged one is a usage error."""
        assert self.session is not None
        try:
            self.session.baseline  # noqa: B018
        except GpubenchError as exc:
            config.stash[REFUSED_KEY] = True
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After -k/-m deselection: the multiple-comparison family counts what runs.
        for item in session.items:
            try:
                item.stash[SPEC_KEY] = resolve_markers(item, self.settings)
            except GpubenchError as exc:
                item.stash[SPEC_KEY] = str(exc)  # fails the test at setup: xdist carries it
        benchmarks = [i for i in session.items if uses_fixture(i)]
        if self.session is not None and benchmarks:
            self._check_baseline(session.config)
            keys = self.session.baseline.entries.keys()
            family = 0
            for item in benchmarks:
                # Its key and those of its named measurements and ratios to references.
                own = sum(k == item.nodeid or k.startswith(item.nodeid + "#") for k in keys)
                family += max(1, own)
            self.session.family = family  # at least 1: one test or more

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """After the last test (or a stop), the tests whose flagged verdicts waited are
        confirmed together, and their reports, held until then, say their outcome."""
        stopped = "the run stopped before its confirmation"
        try:
            result = yield
            stopped = str(session.shouldstop or session.shouldfail or "")
        finally:
            self._confirm_waiting(stopped)
        if not stopped and session.shouldstop:  # Ctrl-C while they were confirmed
            raise session.Interrupted(session.shouldstop)
        return result

    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        """pytest's own protocol, its reports held back (as pytest-rerunfailures holds them)
        where the test's flagged verdicts wait for the run's confirmation (issue 45: every
        flagged test confirmed in the same fresh processes). Not where a confirmed failure
        must stop the run at once (``-x``, ``--maxfail``), nor for a test that
        pytest-rerunfailures runs again, nor in an xdist worker (which reports a test only
        while it runs), nor outside the user's own run."""
        config = item.config
        if not (
            _is_benchmark(item)  # first: a run without gpubench tests imports no gate
            and self.session is not None
            and self.session.gate.confirm > 0
            and self.session.gate.enforcing
            and (self.pairing is None or self.pairing.in_process)
            and not config.getoption("maxfail", 0)
            and not hasattr(config, "workerinput")
            and not getattr(config.option, "reruns", None)
            and item.get_closest_marker("flaky") is None
        ):
            return None
        from _pytest.runner import runtestprotocol

        item.stash[DEFER_KEY] = True
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        waiting = self.waiting.get(item.nodeid)
        if waiting is not None:
            waiting.reports = reports
        else:
            _log(item, reports)
        return True

    def _confirm_waiting(self, stopped: str) -> None:
        """Confirm the waiting tests in one set of fresh processes (``stopped``: why the run
        ended before it could: each stays unconfirmed), then log their held reports, a
        confirmed failure failing its call phase as an assertion would."""
        waiting, self.waiting = list(self.waiting.values()), {}
        if not waiting or self.session is None:
            return
        gate = self.session.gate
        if stopped:
            # Ran before the run stopped, as any test that passed before it: unconfirmed.
            confirmed = [tuple(gate.unconfirmed(r, stopped) for r in w.ended()) for w in waiting]
        else:
            name = waiting[0].item.name if len(waiting) == 1 else f"{len(waiting)} flagged tests"
            confirmed = self._confirm(waiting, name)
        for w, results in zip(waiting, confirmed, strict=True):
            paired = w.pending is not None  # confirmed as pairs, not against a history
            failures = self._settled(w.item, results, compared=paired, problem="")
            for report in w.reports:
                if report.when != "call":
                    continue
                setattr(report, REPORT_ATTRIBUTE, w.item.stash[RESULTS_KEY])
                if failures and report.passed:
                    try:
                        pytest.fail("\n".join(failures), pytrace=False)
                    except pytest.fail.Exception:
                        report.longrepr = w.item.repr_failure(pytest.ExceptionInfo.from_current())
                    report.outcome = "failed"
                _no_verdict(w.item, report)
            _log(w.item, w.reports)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        problem = item.stash.get(SPEC_KEY, None)
        if isinstance(problem, str):
            pytest.fail(problem, pytrace=False)
        session = self.session
        if session is not None and item.nodeid in session.crashed and session.untimed(item.nodeid):
            # The working tree's process died in it: its body, or a fixture, would end this
            # process too. It fails before its fixtures are set up (an error at its setup);
            # its results are in the run's from the comparison (Controller.compare).
            results = session.compared(item.nodeid)
            why = "" if results else session.unjudged.get(item.nodeid, "")
            failures = self._settled(item, results, compared=True, problem=why)
            if failures:
                pytest.fail("\n".join(failures), pytrace=False)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        item.stash[RESULTS_KEY] = ()  # a rerun's call starts afresh
        item.stash[LOCK_KEY] = None
        item.stash[NO_VERDICT_KEY] = ""
        if self.session is not None:  # its evidence trace: not the test's time
            self.session.outside_test = functools.partial(timeout_paused, item)
        try:
            self._base_side(item)
            try:
                outcome = yield
            except GpubenchError as exc:
                self._settle(item, confirm=False)
                raise pytest.fail.Exception(str(exc), pytrace=False) from None
            except OUTCOMES:
                self._settle(item, confirm=False)  # the test failed or skipped: its numbers show
                raise
            failures = self._settle(item, confirm=True)
            if failures:
                pytest.fail("\n".join(failures), pytrace=False)
            return outcome
        finally:
            if self.session is not None:
                self.session.outside_test = contextlib.nullcontext

    def _base_side(self, item: pytest.Item) -> None:
        """Against a revision in this process: run the revision's body of the test first,
        its calls held for the working tree's (versus/lockstep.py); where one process cannot
        hold both sides, the test and the later ones sharing the culprit are timed in pairs
        of fresh processes now (Controller.apart) and run untimed."""
        session = self.session
        bench = item.stash.get(BENCH_KEY, None)
        if session is None or self.pairing is None or bench is None or session.untimed(item.nodeid):
            return
        from ..run.sides import Lockstep
        from .lockstep import base_side

        pairing = self.pairing
        found = base_side(item, pairing, bench)
        if found.apart and pairing.apart is not None:
            pairing.apart(item.nodeid, found.apart, found.fixture)
            return
        # The revision lacks the test (new), or a fresh process cannot pair it (unsure).
        lock = found.lock or Lockstep(pairing.two, head=True)
        bench.lockstep = lock
        item.stash[LOCK_KEY] = (lock, found.failed or found.apart)

    def _settle(self, item: pytest.Item, *, confirm: bool) -> list[str]:
        """Confirm the test's flagged results (judged as measured) when ``confirm``, keep them
        for the call's report; return what fails the test: the line of an ``extra_info``
        that cannot be stored, or those of the verdicts that fail."""
        bench = item.stash.get(BENCH_KEY, None)
        if bench is None:
            return []
        problem, results = bench.finish()
        compared = self.session is not None and self.session.untimed(item.nodeid)
        paired = item.stash.get(LOCK_KEY, None)
        if self.session is None or not (results or compared or paired):
            return [problem] if problem else []
        settings = bench.context.spec.measure
        if compared:  # judged against a revision before the tests ran: its verdicts
            results = self.session.compared(item.nodeid)
            if not results:  # measured on neither side: fails where a side had trouble
                problem = problem or self.session.unjudged.get(item.nodeid, "")
        elif paired is not None and self.pairing is not None:
            measured = tuple(r.measurement for r in results)
            results = self._paired(item, paired, measured, settings, confirm, problem)
            if item.nodeid in self.waiting:  # its second process waits for the run's end
                item.stash[RESULTS_KEY] = results
                return []
            compared = True  # confirmed as pairs, not against a history
        elif bench.lockstep is not None and bench.lockstep.remote and bench.lockstep.base:
            from ..versus.lockstep import child_results

            lock = bench.lockstep  # a duo's leader: both sides, for its parent to pair
            results = child_results(results, lock.base, lock.more, lock.stopped, lock.inputs)
            compared = True
        if (
            confirm
            and not compared
            and not problem
            and any(self.session.gate.needs_confirmation(r) for r in results)
        ):
            if item.stash.get(DEFER_KEY, False):  # confirmed with the run's others, at its end
                item.stash[RESULTS_KEY] = results
                self.waiting[item.nodeid] = Waiting(item, results, settings)
                return []
            with timeout_paused(item):
                [results] = self._confirm([Waiting(item, results, settings)], item.name)
        return self._settled(item, results, compared=compared, problem=problem)

    def _confirm(self, waiting: list[Waiting], name: str) -> list[tuple[Result, ...]]:
        """The waiting tests' flagged results confirmed in the same fresh processes (those
        timed in lockstep, in one second process); Ctrl-C while they run stops the run, their
        flagged verdicts unconfirmed (they fail nothing), and their tests without a verdict
        (:func:`_no_verdict`)."""
        assert self.session is not None
        gate = self.session.gate
        plain = [w for w in waiting if w.pending is None]
        paired = [w for w in waiting if w.pending is not None]
        try:
            done = self.session.confirm(
                [(w.item.nodeid, w.results, w.settings) for w in plain],
                progress=self._progress(name),
            )
            if paired:
                assert self.pairing is not None
                done += self.pairing.second_processes(
                    [w.pending for w in paired if w.pending is not None],
                    self._progress(name, "more pairs of {} from"),
                )
        except KeyboardInterrupt:
            _interrupted([w.item for w in waiting], name)
            return [tuple(gate.unconfirmed(r, "interrupted") for r in w.ended()) for w in waiting]
        confirmed = dict(zip(map(id, plain + paired), done, strict=True))
        return [confirmed[id(w)] for w in waiting]

    def _settled(
        self, item: pytest.Item, results: tuple[Result, ...], *, compared: bool, problem: str
    ) -> list[str]:
        """Keep the final results for the call's report, with their evidence; return what
        fails the test."""
        assert self.session is not None
        gate = self.session.gate
        results = self.session.kept_evidence(results)
        if (
            not compared
            and self.session.settings.ncu
            and any(gate.fails(r.verdict) and r.measurement.evidence.trace for r in results)
        ):
            self.announce(f"evidence: Nsight Compute's metrics of {item.name} in a fresh process")
            with timeout_paused(item):
                results = self.session.with_ncu(results, item.nodeid)
        item.stash[RESULTS_KEY] = results
        if problem:
            return [problem]
        from ..report.summary import failure_message

        return [
            "\n  ".join(filter(None, [failure_message(r), gate.refusal(r.verdict)]))
            for r in results
            if gate.fails(r.verdict)
        ]

    def _paired(
        self,
        item: pytest.Item,
        paired: tuple[Lockstep, str],
        measurements: tuple[Measurement, ...],
        settings: MeasureSettings,
        passed: bool,
        problem: str,
    ) -> tuple[Result, ...]:
        """The verdicts of a test timed in lockstep: on this process's pairs, and more while
        unsure (from this process, or fresh ones); a fresh process's own results are both
        sides', for its parent to pair (versus.lockstep.child_results)."""
        assert self.session is not None and self.pairing is not None
        from ..versus.lockstep import child_results

        pairing = self.pairing
        lock, failed = paired
        failed = failed or lock.failed  # its call may have failed on the revision's side
        try:
            if passed:  # the revision's calls yours never made: timed alone, reported removed
                pairing.finish_base(lock)
            else:  # your test failed: what it did not reach is not the revision's alone
                lock.held.clear()
            child = self.settings.child is not None
            verdicts = functools.partial(
                pairing.verdicts,
                item.nodeid,
                measurements,
                lock.base,
                settings,
                failed=failed,
                inputs=lock.inputs,
                paired=lock.paired,
            )
            # A failure's second process waits for the run's end, with the other tests'.
            later: list[Pending] | None = [] if item.stash.get(DEFER_KEY, False) else None
            with timeout_paused(item):
                try:
                    results = verdicts(
                        # A fresh process in lockstep takes its pairs in its own process
                        # (--gpubench-pairs), its parent's second process for a failure.
                        replicate=passed and not problem and (not child or pairing.in_process),
                        progress=self._progress(item.name, "more pairs of {} from"),
                        # A pair timed here runs the test's code: bounded as the test is.
                        each_pair=functools.partial(timeout_paused, item, armed=True),
                        later=later,
                    )
                except KeyboardInterrupt:
                    # Ctrl-C while more pairs are timed: the run stops after this test, its
                    # unsure verdicts unconfirmed (they fail nothing).
                    _interrupted([item], item.name)
                    gate = self.session.gate
                    results = tuple(
                        gate.unconfirmed(r, "interrupted") for r in verdicts(replicate=False)
                    )
                else:
                    if not child:  # a fresh process's parent judges, and keeps the evidence
                        results = pairing.with_evidence(results, lock.paired, settings)
                    if later:  # its second process ends these results, traces and all
                        later[0] = later[0]._replace(results=results)
            if later:
                self.waiting[item.nodeid] = Waiting(item, results, settings, pending=later[0])
            return child_results(results, lock.base) if child else results
        finally:
            lock.paired.clear()  # their inputs: the next test's memory

    def _progress(self, name: str, what: str = "confirming {} in") -> Callable[[int, int], None]:
        def progress(i: int, n: int) -> None:
            if i == 1:  # they start together
                many = f"{n} fresh processes ({n} at once)" if n > 1 else "a fresh process"
                self.announce(f"{what.format(name)} {many}")

        return progress

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        results = item.stash.get(RESULTS_KEY, ())
        if call.when == "call" and results:
            setattr(report, REPORT_ATTRIBUTE, results)
        if report.skipped and not hasattr(report, "wasxfail") and _is_benchmark(item):
            # Why it skipped, as -rs says it, without pytest's "Skipped: " prefix.
            longrepr = report.longrepr
            reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
            reason = reason.removeprefix("Skipped: ").strip() or "no reason given"
            setattr(report, SKIPPED_ATTRIBUTE, reason)
        _no_verdict(item, report)  # after: timed, not one of the skipped the summary counts
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(
        self, config: pytest.Config, report: pytest.TestReport
    ) -> Generator[None, object, object]:
        """A report leaving this process (an xdist worker's): its results as plain data."""
        data = yield
        results = getattr(report, REPORT_ATTRIBUTE, None)
        if isinstance(data, dict) and results:
            data[REPORT_ATTRIBUTE] = [r.to_dict() for r in results]
        skipped = getattr(report, SKIPPED_ATTRIBUTE, None)
        if isinstance(data, dict) and isinstance(skipped, str):
            data[SKIPPED_ATTRIBUTE] = skipped
        return data


def _log(item: pytest.Item, reports: list[pytest.TestReport]) -> None:
    """What pytest's own protocol logs of a test that ran with its reports held."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        ihook.pytest_runtest_logreport(report=report)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _interrupted(items: list[pytest.Item], name: str) -> None:
    """Ctrl-C while the tests ``items`` (``name``) were confirmed: the run stops after
    them, and they have no verdict (:func:`_no_verdict`)."""
    why = f"interrupted while confirming {items[0].nodeid if len(items) == 1 else name}"
    items[0].session.shouldstop = why
    for item in items:
        item.stash[NO_VERDICT_KEY] = f"no verdict: {why}"


def _no_verdict(item: pytest.Item, report: pytest.TestReport) -> None:
    """A passing call whose verdict was never given (:data:`NO_VERDICT_KEY`: Ctrl-C while it
    was confirmed) reports skipped with why, as pytest's own skip at the test's line: pytest
    reports no test it interrupts as passed, and JUnit must not either."""
    why = item.stash.get(NO_VERDICT_KEY, "")
    if report.when == "call" and report.passed and why:
        path, line = item.reportinfo()[:2]
        report.outcome = "skipped"
        report.longrepr = (os.fspath(path), (line or 0) + 1, f"Skipped: {why}")


def _is_benchmark(item: pytest.Item) -> bool:
    """A test that uses the fixture or carries the marker: what a gpubench run times."""
    return uses_fixture(item) or item.get_closest_marker(MARKER) is not None


def uses_fixture(item: pytest.Item) -> bool:
    """A test that uses the ``gpubench`` fixture: one that can measure."""
    return MARKER in getattr(item, "fixturenames", ())


@contextlib.contextmanager
def timeout_paused(item: pytest.Item, armed: bool = False) -> Iterator[None]:
    """pytest-timeout's timer of the test stopped while its verdict is confirmed: that time
    is the plugin's, not the test's (fresh processes bound their own tests with the same
    timeout). Re-armed afterwards, for the teardown, with the test's own settings; a timer
    of the call alone (``timeout_func_only``) has already stopped here. ``armed``: the
    other way round, armed anew for what runs inside (a pair timed in this process, inside
    a pause), stopped after."""
    manager = item.config.pluginmanager
    # Its hooks are public; what the test's settings are, it only tells through this.
    settings_of = getattr(manager.get_plugin("timeout"), "_get_item_settings", None)
    settings = settings_of(item) if settings_of is not None else None
    if not (settings is not None and settings.timeout and not settings.func_only):
        yield  # no timer bounds the test's whole run
        return
    stop = functools.partial(manager.hook.pytest_timeout_cancel_timer, item=item)
    arm = functools.partial(manager.hook.pytest_timeout_set_timer, item=item, settings=settings)
    (arm if armed else stop)()
    try:
        yield
    finally:
        (stop if armed else arm)()
