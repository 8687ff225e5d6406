"""pytest layer: options, marker, fixture, verdict-as-failure, reporting. Thin on purpose.

Nothing heavy is imported at start-up: torch, scipy and the timing core load when a gpubench
test first runs.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import hookspecs, storage
from .errors import GpubenchError
from .settings import OPTIONS, Settings, check_marker_keywords

if TYPE_CHECKING:
    from .device import Device
    from .engine import Timer
    from .fixture import GpuBench
    from .results import Result
    from .session import BenchSession

MARKER = "gpubench"
REPORT_ATTRIBUTE = "gpubench"  # results ride on the call report (through xdist too)
BENCH_KEY = pytest.StashKey["GpuBench"]()
REPORTS = ("JSON report", "Markdown report")


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
    try:
        settings = Settings.resolve(cli, ini, config.rootpath)
        for path, what in ((settings.json, REPORTS[0]), (settings.markdown, REPORTS[1])):
            if settings.enabled and path is not None:
                storage.check_target(path, what)  # refuse now rather than after the run
    except GpubenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.pluginmanager.register(GpubenchPlugin(config, settings), "gpubench-session")


class GpubenchPlugin:
    """Session state of one pytest process (controller or xdist worker)."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.session: BenchSession | None = None
        self.results: list[Result] = []
        self.saved: bool | None = None
        self.errors: list[str] = []  # files that could not be written, one line each
        self.is_worker = hasattr(config, "workerinput")

    def make_timer(self, settings: Settings, device: Device, with_setup: bool) -> Timer:
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
        from .session import BenchSession
        from .timers import cuda_available

        self.session = BenchSession(
            self.settings, self.config.rootpath, self.make_timer, cuda_available
        )
        try:
            self.session.baseline  # noqa: B018 - read (and check) the baseline before any test
        except GpubenchError as exc:
            raise pytest.UsageError(str(exc)) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # After -k/-m deselection: the multiple-test correction counts the tests that run.
        for item in session.items:
            for marker in item.iter_markers(MARKER):
                if marker.args:
                    raise pytest.UsageError(
                        f"{item.nodeid}: @pytest.mark.gpubench takes keywords only, got "
                        f"positional {marker.args!r}"
                    )
                try:
                    check_marker_keywords(marker.kwargs, item.nodeid, self.settings)
                except GpubenchError as exc:
                    raise pytest.UsageError(str(exc)) from None
        if self.session is not None:
            bench_items = [i for i in session.items if MARKER in getattr(i, "fixturenames", ())]
            self.session.bench_tests = max(1, len(bench_items))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            result = yield
        except GpubenchError as exc:
            raise pytest.fail.Exception(str(exc), pytrace=False) from None
        bench = item.stash.get(BENCH_KEY, None)
        if bench is None:
            return result
        from .report import failure_message, is_failure

        problem = bench.finish()
        if problem:
            pytest.fail(problem, pytrace=False)
        failures = [
            failure_message(r)
            for r in bench.results
            if is_failure(r, self.settings.fail_on_improvement) and not self.settings.save
        ]
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return result

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
        json_path, markdown_path = self.settings.json, self.settings.markdown
        writing = "baseline"
        try:
            if self.settings.save and not interrupted:
                self.saved = self._attempt(bench.save, self.results)
            from . import report

            fingerprint = bench.fingerprint()
            if json_path is not None:
                writing = REPORTS[0]
                settings = _settings_dict(self.settings)
                text = report.json_text(report.json_document(self.results, fingerprint, settings))
                self._attempt(storage.write_atomic, json_path, text, writing)
            if markdown_path is not None:
                writing = REPORTS[1]
                text = report.markdown(self.results, fingerprint)
                self._attempt(storage.write_atomic, markdown_path, text, writing)
        except KeyboardInterrupt:
            # The writes are atomic: what was there before is intact.
            self.errors.append(f"interrupted: {writing} not written")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

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
        path = self.session.baseline.path
        if self.saved is True:
            terminalreporter.write_line(f"baseline written: {path}")
        elif self.session.baseline.exists:
            if self.saved is False:
                terminalreporter.write_line(f"baseline unchanged: {path}")
        else:
            hint = "" if self.settings.save else ": run with --gpubench-save"
            terminalreporter.write_line(f"no baseline yet at {path}{hint}")
        for line in self.errors:
            terminalreporter.write_line(f"ERROR: {line}", red=True)
        terminalreporter.write_line(report.footer(self.results, self.settings))


@pytest.fixture
def gpubench(request: pytest.FixtureRequest) -> GpuBench:
    """Time a function: ``y = gpubench(fn, *args, **kwargs)``; see ``GpuBench``."""
    from .fixture import GpuBench, TestContext
    from .timers import cuda_available

    plugin: GpubenchPlugin = request.config.pluginmanager.get_plugin("gpubench-session")
    marker = request.node.get_closest_marker(MARKER)
    keywords = dict(marker.kwargs) if marker else {}
    context = TestContext(
        nodeid=request.node.nodeid,
        name=request.node.name,
        settings=check_marker_keywords(keywords, request.node.nodeid, plugin.settings),
        group=keywords.get("group"),
        bytes=keywords.get("bytes"),
        flops=keywords.get("flops"),
    )
    bench = GpuBench(context, session=plugin.session, device_probe=cuda_available)
    request.node.stash[BENCH_KEY] = bench
    return bench


def _settings_dict(settings: Settings) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, Path) else v for k, v in vars(settings).items()}
