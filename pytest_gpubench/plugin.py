"""pytest layer: options, marker, fixture, verdict-as-failure, fresh processes, reporting.

Thin on purpose: decisions live in the core (settings, session, verdict, report). Nothing
heavy is imported at start-up: torch, scipy and the timing core load when a gpubench test
first runs with --gpubench.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import hookspecs, storage
from .errors import GpubenchError
from .settings import (
    CHILD_VARIABLE,
    OPTIONS,
    MarkerSpec,
    MeasureSettings,
    Settings,
    check_marker_keywords,
)

if TYPE_CHECKING:
    from .device import Device
    from .engine import Timer
    from .fixture import GpuBench
    from .results import Result
    from .session import BenchSession

MARKER = "gpubench"
REPORT_ATTRIBUTE = "gpubench"  # results ride on the call report (through xdist too)
BENCH_KEY = pytest.StashKey["GpuBench"]()
# A test's markers, resolved once at collection: its settings, or why they are invalid.
SPEC_KEY = pytest.StashKey["MarkerSpec | str"]()
# A test whose verdict waits for confirmation in fresh processes.
PENDING_KEY = pytest.StashKey[bool]()
STEP_SUMMARY = "GITHUB_STEP_SUMMARY"


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpubench", "GPU kernel benchmarks (pytest-gpubench)")
    for spec in OPTIONS:
        cli_help = spec.help.replace("%", "%%")  # argparse formats help text with %
        if spec.is_flag:
            group.addoption(
                spec.flag, action="store_true", default=None, dest=spec.dest, help=cli_help
            )
        else:
            group.addoption(
                spec.flag, default=None, dest=spec.dest, metavar=spec.metavar, help=cli_help
            )
        # Every ini value is a string parsed by Settings, so an invalid one names its key.
        parser.addini(spec.ini, spec.help, default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(threshold=, alpha=, timer=, budget_s=, min_samples=, max_samples=, "
        "precision=, group=, bytes=, flops=): per-test benchmark settings and work",
    )
    invocation = config.invocation_params.dir
    cli: dict[str, Any] = {}
    for spec in OPTIONS:
        value = config.getoption(spec.dest)
        if isinstance(value, str) and spec.metavar in ("DIR", "PATH"):
            value = str(invocation / value)  # command-line paths are relative to the cwd
        cli[spec.field] = value
    ini = {spec.field: config.getini(spec.ini) for spec in OPTIONS}
    # Taken out of the environment: processes the tests start are no children of ours.
    child = os.environ.pop(CHILD_VARIABLE, None)
    try:
        settings = Settings.resolve(cli, ini, config.rootpath, Path(child) if child else None)
        if settings.enabled:
            for path, what in settings.reports:
                storage.check_target(path, what)  # refuse now rather than after the run
    except GpubenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(GpubenchPlugin(config, settings), "gpubench-session")


def resolve_markers(item: pytest.Item, settings: Settings) -> MarkerSpec:
    """The test's ``gpubench`` markers merged, closest first per keyword (a function's marker
    over its class's over its module's ``pytestmark``), over the session's settings."""
    keywords: dict[str, object] = {}
    for marker in item.iter_markers(MARKER):
        if marker.args:
            raise GpubenchError(
                f"{item.nodeid}: @pytest.mark.gpubench takes keywords only, got positional "
                f"{marker.args!r:.60}"
            )
        for key, value in marker.kwargs.items():
            keywords.setdefault(key, value)
    return check_marker_keywords(keywords, item.nodeid, settings)


class GpubenchPlugin:
    """Session state of one pytest process (controller, xdist worker, or fresh child)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.session: BenchSession | None = None
        self.results: list[Result] = []
        self.saved: bool | None = None
        self.errors: list[str] = []  # files that could not be written, one line each
        self.lines: list[str] = []  # what fresh processes did, for the summary
        # Tests whose reports wait for the confirmation of their verdict, with those reports.
        self.held: list[tuple[pytest.Item, list[pytest.TestReport]]] = []
        self.is_worker = hasattr(config, "workerinput")

    def make_timer(self, settings: MeasureSettings, device: Device, with_setup: bool) -> Timer:
        timer = self.config.hook.pytest_gpubench_make_timer(
            settings=settings, device=device, with_setup=with_setup
        )
        if timer is None:
            from .timers import make_timer

            timer = make_timer(settings.timer, device.kind)
        return timer

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self.settings.enabled:
            return
        from .gpus import DEVICE_VARIABLE, pin_worker
        from .session import BenchSession
        from .timers import cuda_available

        if (self.is_worker or DEVICE_VARIABLE in os.environ) and cuda_available():
            pin_worker()  # before the device is detected: it is the pinned one
        self.session = BenchSession(
            self.settings, self.config.rootpath, self.make_timer, cuda_available
        )
        try:
            self.session.baseline  # noqa: B018 - read (and check) the baseline before any test
        except GpubenchError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After -k/-m deselection: the multiple-comparison family counts what runs.
        for item in session.items:
            try:
                item.stash[SPEC_KEY] = resolve_markers(item, self.settings)
            except GpubenchError as exc:
                item.stash[SPEC_KEY] = str(exc)  # fails the test at setup: xdist carries it
        if self.session is not None:
            keys = self.session.baseline.entries.keys()
            family = 0
            for item in session.items:
                if MARKER in getattr(item, "fixturenames", ()):
                    named = sum(1 for k in keys if k.startswith(item.nodeid + "#"))
                    family += max(1, named)
            self.session.family = max(1, family)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        problem = item.stash.get(SPEC_KEY, None)
        if isinstance(problem, str):
            pytest.fail(problem, pytrace=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except GpubenchError as exc:
            raise pytest.fail.Exception(str(exc), pytrace=False) from None
        bench = item.stash.get(BENCH_KEY, None)
        if bench is None:
            return result
        problem = bench.finish()
        if problem:
            pytest.fail(problem, pytrace=False)
        if self.session is None or not bench.results:
            return result
        if any(self.session.wants_confirmation(r) for r in bench.results):
            # The verdict is final once fresh processes confirm it, with every other
            # flagged test of this process at once: pytest_runtest_protocol holds the reports.
            item.stash[PENDING_KEY] = True
            return result
        failures = self._failures(bench.results)
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return result

    def _failures(self, results: list[Result]) -> list[str]:
        from .report import failure_message
        from .verdict import fails

        if self.settings.save:
            return []  # a save accepts what it measured
        return [
            failure_message(r)
            for r in results
            if fails(
                r.status,
                fail_on_improvement=self.settings.fail_on_improvement,
                allow_incomparable=self.settings.allow_incomparable,
            )
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> bool | None:
        """Run a gpubench test as pytest does, but hold its reports while its verdict waits
        for confirmation; the last test of the process confirms all held ones together (one
        set of fresh processes, whatever the number of flagged tests) and logs them. An xdist
        worker may log a test's reports only while that test runs (the controller checks it),
        so a worker confirms each flagged test at once."""
        if (
            self.session is None
            or self.settings.confirm == 0
            or MARKER not in getattr(item, "fixturenames", ())
        ):
            return None  # pytest's own protocol (and other plugins' take on it)
        from _pytest.runner import runtestprotocol

        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        call = next((r for r in reports if r.when == "call"), None)
        if item.stash.get(PENDING_KEY, False) and call is not None and call.passed:
            self.held.append((item, reports))
        else:
            _log(item, reports)
        if nextitem is None or self.is_worker:
            self._flush()
        return True

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        holding = self._hold_device()
        try:
            outcome = yield
        except BaseException:
            # Interrupted: no fresh processes now; the held reports keep their first verdict.
            held, self.held = self.held, []
            for item, reports in held:
                _log(item, reports)
            raise
        finally:
            if holding:
                assert self.session is not None
                self.session.device_lock().release()
        self._flush()  # the last test was no gpubench test, or the run stopped early
        return outcome

    def _hold_device(self) -> bool:
        """Whether this process took the device for all its tests: a child confirming a
        verdict does. Such children start together (confirm.run_children); holding the device
        from the first test to the last, no first call or compile of a sibling runs beside
        its samples."""
        if self.session is None or not self.settings.confirming:
            return False
        try:
            self.session.device_lock().acquire()
        except GpubenchError:
            return False  # each measurement still waits for the device itself
        return True

    def _flush(self) -> None:
        """Confirm the held tests in fresh processes, judge them on all their sessions, fail
        the confirmed ones, and log their reports."""
        held, self.held = self.held, []
        if not held or self.session is None:
            return
        started = time.perf_counter()
        runs = self._children(
            self.settings.confirm,
            nodeids=[item.nodeid for item, _ in held],
            save=False,
            what=f"confirming {len(held)} flagged test{'s' if len(held) != 1 else ''} "
            "in fresh processes",
        )
        children = [child for run in runs for child in run.results]
        errors = sorted({run.error for run in runs if run.error})
        flagged = [
            (result, item.stash[BENCH_KEY].context.spec.measure)
            for item, _ in held
            for result in item.stash[BENCH_KEY].results
            if self.session.wants_confirmation(result)
        ]
        share = (time.perf_counter() - started) / max(1, len(flagged))
        for result, settings in flagged:
            self.session.confirmed(result, children, settings)
            if result.costs is not None:
                result.costs = dataclasses.replace(result.costs, confirm_s=share)
            if errors:
                result.note = "; ".join(filter(None, [result.note, *errors]))
        for item, reports in held:
            bench = item.stash[BENCH_KEY]
            call = next(r for r in reports if r.when == "call")
            setattr(call, REPORT_ATTRIBUTE, [r.to_dict() for r in bench.results])
            failures = self._failures(bench.results)
            if failures:
                call.outcome = "failed"
                call.longrepr = "\n".join(failures)
            _log(item, reports)

    def _children(
        self, count: int, *, nodeids: list[str] | None, save: bool, what: str
    ) -> list[Any]:
        from . import confirm

        invocation = self.config.invocation_params
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")

        def progress(i: int, n: int) -> None:
            if reporter is None or self.is_worker:
                return
            if nodeids is None:  # one after the other
                reporter.write_line(f"gpubench: {what} ({i}/{n})")
            elif i == 1:  # started together
                reporter.write_line(f"gpubench: {what} ({n} at once)")

        device = self.session.device if self.session is not None else None
        return confirm.run_children(
            count,
            confirm.child_args(
                list(invocation.args),
                save=save,
                confirm=0 if nodeids is not None else self.settings.confirm,
                single=nodeids is not None and self.config.pluginmanager.hasplugin("xdist"),
            ),
            Path(invocation.dir),
            progress,
            device.index if device is not None and device.kind == "cuda" else None,
            nodeids,
        )

    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """A fresh process started to confirm runs only the tests its parent asked for."""
        if self.settings.child is None:
            return
        from .confirm import read_request

        wanted = read_request(self.settings.child)
        if wanted is None:
            return
        keep = set(wanted)
        deselected = [item for item in items if item.nodeid not in keep]
        if deselected:
            items[:] = [item for item in items if item.nodeid in keep]
            config.hook.pytest_deselected(items=deselected)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        bench = item.stash.get(BENCH_KEY, None)
        if call.when == "call" and bench is not None and bench.results:
            setattr(report, REPORT_ATTRIBUTE, [r.to_dict() for r in bench.results])
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = getattr(report, REPORT_ATTRIBUTE, None)
        if not data or self.is_worker:
            return
        from .results import Result

        for entry in data:
            result = Result.from_dict(entry)
            result.passed = report.passed
            self.results.append(result)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        bench = self.session
        if bench is None or self.is_worker:
            return
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        writing = "baseline"
        try:
            if self.settings.save and not interrupted:
                self.saved = self._attempt(bench.save, self.results)
                if self.saved and self.settings.sessions > 1:
                    self._record_sessions()
            self._write_reports()
        except KeyboardInterrupt:
            # The writes are atomic: what was there before is intact.
            self.errors.append(f"interrupted: {writing} not written")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _record_sessions(self) -> None:
        """``--gpubench-sessions K``: K - 1 more sessions, each a fresh process that saves."""
        count = self.settings.sessions - 1
        runs = self._children(
            count, nodeids=None, save=True, what="recording a session in a fresh process"
        )
        from .report import counts

        for i, run in enumerate(runs, start=2):
            text = run.error or f"{counts(run.results) or 'no measurements'}"
            self.lines.append(f"session {i}/{self.settings.sessions}: {text}")
        assert self.session is not None
        self.session.reload_baseline()  # the children wrote it

    def _write_reports(self) -> None:
        from . import report

        bench = self.session
        assert bench is not None
        if self.settings.child is not None:
            from .confirm import child_document

            document = child_document(bench.env.session_id, bench.env.session_info(), self.results)
            self._attempt(
                storage.write_atomic, self.settings.child, report.json_text(document), "results"
            )
            return
        fingerprint = bench.env.fingerprint()
        writers: dict[str, Callable[[], str]] = {
            "JSON report": lambda: report.json_text(
                report.json_document(
                    self.results,
                    fingerprint,
                    _settings_dict(self.settings),
                    {"id": bench.env.session_id, **bench.env.session_info().to_json()},
                )
            ),
            "Markdown report": lambda: report.markdown(self.results, fingerprint),
            "pytest-benchmark JSON report": lambda: _benchmark_json(
                self.results, fingerprint, bench
            ),
        }
        for path, what in self.settings.reports:
            self._attempt(storage.write_atomic, path, writers[what](), what)
        summary = os.environ.get(STEP_SUMMARY)
        if summary and self.results:
            text = report.markdown(self.results, fingerprint, limit=report.STEP_SUMMARY_BYTES)
            self._attempt(storage.append_text, Path(summary), text, "GitHub step summary")

    def _attempt(self, write: Callable[..., Any], *args: Any) -> Any:
        """Run one write; a file that cannot be written is a line under the table, not a
        traceback that would cost the table and the other files."""
        try:
            return write(*args)
        except GpubenchError as exc:
            self.errors.append(str(exc))
            return None

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.session is None or self.is_worker:
            return
        from . import report

        device = self.session.device
        terminalreporter.write_sep(
            "=", f"gpubench: {device.fingerprint.get('name')} ({device.key})"
        )
        if self.results:
            for line in report.table_lines(self.results):
                terminalreporter.write_line(line)
            for line in report.notes(self.results):
                terminalreporter.write_line(line)
        for change in self.session.version_changes():
            terminalreporter.write_line(f"baseline was recorded with other software: {change}")
        for line in self.session.not_saved:
            terminalreporter.write_line(line, yellow=True)
        for line in self.lines:
            terminalreporter.write_line(f"gpubench: {line}")
        path = self.session.baseline.path
        if self.saved is True:
            terminalreporter.write_line(f"baseline written: {path}")
        elif self.session.baseline.exists:
            if self.saved is False:
                terminalreporter.write_line(f"baseline unchanged: {path}")
            elif self.session.baseline.schema != "pytest-gpubench/2":
                terminalreporter.write_line(
                    f"baseline {path} is of schema 1 (one session per test): "
                    "--gpubench-save rewrites it as schema 2"
                )
        else:
            hint = "" if self.settings.save else ": run with --gpubench-save"
            terminalreporter.write_line(f"no baseline yet at {path}{hint}")
        for line in self.errors:
            terminalreporter.write_line(f"ERROR: {line}", red=True)
        terminalreporter.write_line(
            report.footer(self.results, self.settings.measure, self.session.family)
        )


@pytest.fixture
def gpubench(request: pytest.FixtureRequest) -> GpuBench:
    """Time a function: ``y = gpubench(fn, *args, **kwargs)``; see ``GpuBench``."""
    from .fixture import GpuBench, TestContext
    from .timers import cuda_available

    plugin: GpubenchPlugin = request.config.pluginmanager.get_plugin("gpubench-session")
    spec = request.node.stash.get(SPEC_KEY, None)
    if not isinstance(spec, MarkerSpec):  # not collected by this session (or invalid)
        spec = resolve_markers(request.node, plugin.settings)
    context = TestContext(nodeid=request.node.nodeid, name=request.node.name, spec=spec)
    bench = GpuBench(context, session=plugin.session, device_probe=cuda_available)
    request.node.stash[BENCH_KEY] = bench
    return bench


def _log(item: pytest.Item, reports: list[pytest.TestReport]) -> None:
    """Log a test's reports as pytest's own protocol does."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)


def _settings_dict(settings: Settings) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in vars(settings).items():
        if isinstance(value, MeasureSettings):
            values.update(vars(value))
        else:
            values[key] = str(value) if isinstance(value, Path) else value
    return values


def _benchmark_json(results: list[Result], fingerprint: dict[str, Any], bench: Any) -> str:
    from . import benchjson

    return benchjson.dumps(results, fingerprint, bench.env)
