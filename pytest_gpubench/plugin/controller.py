"""The role of the process that owns the session: the user's pytest, or an xdist controller.

It alone writes the user's files: after the tests it saves this session into the baselines
(``--gpubench-save``; what is saved is the gate's to say), records more sessions of the
measurements it saved in fresh processes one at a time, appending each as it ends
(``--gpubench-sessions``), writes the report files, and prints the summary with what the
saves wrote. A run that is interrupted saves nothing more.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..core.errors import GpubenchError
from ..core.jsondata import Json
from ..core.records import Result
from ..core.settings import MarkerSpec, MeasureSettings, Settings
from .collect import Collected
from .measuring import REFUSED_KEY, SPEC_KEY, uses_fixture

if TYPE_CHECKING:
    from ..report.files import RunInfo
    from ..run.session import BenchSession, Saved

STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
# The folder of a run against a revision (its compile caches), in the temporary directory.
AB_FOLDER = "gpubench-ab-"


class Controller:
    def __init__(
        self,
        config: pytest.Config,
        settings: Settings,
        session: BenchSession | None,
        collected: Collected,
        announce: Callable[[str], None],
    ) -> None:
        self.config = config
        self.settings = settings
        self.session = session
        self.collected = collected
        self.announce = announce
        self.saved: bool | None = None  # None: no save was made
        self.written: dict[str, int] = {}  # sessions written, by measurement key
        self.accepted: list[str] = []  # the changes a save accepted, one line each
        self.not_saved: list[str] = []  # why results were left out of a save
        self.errors: list[str] = []  # files that could not be written, one line each
        self.refused = False  # the run stopped at a usage error
        self.stored_run: Path | None = None  # this run's result file under the baselines
        self.warnings: list[str] = []  # what was not written and fails nothing
        self.lines: list[str] = []  # what fresh processes did, for the summary
        # Change points of the histories with this run's session (report/changes.py).
        self.change_notes: list[str] = []  # the flagged ones, for under the table
        self.change_json: dict[str, Json] = {}  # each, by key, for the JSON report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Against a revision: both sides are timed in fresh processes before the tests run
        (run/ab.py); each test then runs untimed and takes its verdict from them, so a
        regression fails its test as any failure does (``-x``, ``--lf``, JUnit)."""
        option = session.config.option
        collection_failed = session.testsfailed and not option.continue_on_collection_errors
        if (
            self.session is not None
            and self.settings.against is not None
            and not option.collectonly
            and not collection_failed
        ):
            self._compare(session)
        return (yield)

    def _compare(self, session: pytest.Session) -> None:
        items = [i for i in session.items if uses_fixture(i)]
        specs = {i.nodeid: i.stash.get(SPEC_KEY, None) for i in items}
        self.compare(
            {
                nodeid: spec.measure if isinstance(spec, MarkerSpec) else self.settings.measure
                for nodeid, spec in specs.items()
            }
        )

    def compare(
        self, measures: Mapping[str, MeasureSettings], devices: Sequence[int] = ()
    ) -> Mapping[str, Result]:
        """Time the benchmarks ``measures`` names (node id: its measurement settings) on both
        sides, on this process's GPU or spread over ``devices``, and keep their verdicts for
        the tests (none when there are none); exits the session on an error, in one line."""
        assert self.session is not None and self.settings.against is not None
        from .. import __file__ as package_init
        from ..run import ab, revision

        if not measures or self.session.launcher is None:
            return {}
        items = list(measures)

        def measure_of(nodeid: str) -> MeasureSettings:
            return measures.get(nodeid, self.settings.measure)

        ref = self.settings.against
        log = Path(tempfile.gettempdir()) / f"gpubench-build-{os.getpid()}.log"
        terminated = _terminate_as_interrupt()
        revision.sweep(Path(tempfile.gettempdir()).resolve(), AB_FOLDER)  # runs killed outright
        try:
            with (
                tempfile.TemporaryDirectory(prefix=AB_FOLDER) as folder,
                # Owned before the checkout and build: swept if we are killed meanwhile.
                contextlib.nullcontext(revision.own(Path(folder))),
                revision.checkout(
                    ref, self.config.invocation_params.dir, build=self.settings.build, log=log
                ) as rev,
            ):
                tests = f"{len(items)} test{'s' if len(items) != 1 else ''}"
                self.announce(
                    f"against {ref} ({rev.commit[:8]}): {tests}, timed in pairs of fresh "
                    "processes, one of each side"
                )
                found = ab.compare(
                    items,
                    ab.sides(
                        self.session.launcher,
                        rev,
                        Path(folder),
                        Path(package_init).parent,
                        self.settings.dir,
                        revision.import_roots(),
                    ),
                    rev,
                    self.settings,
                    measure_of,
                    list(devices) or [self._device_index()],
                    self.announce,
                )
        except GpubenchError as exc:
            failed_build = "--gpubench-build" in str(exc)
            if not failed_build:
                with contextlib.suppress(OSError):
                    log.unlink()
            pytest.exit(f"gpubench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)
        except BaseException:
            with contextlib.suppress(OSError):
                log.unlink()
            raise
        finally:
            terminated()
        with contextlib.suppress(OSError):
            log.unlink()  # built: its output is not needed
        self.session.comparison = found.results
        self.session.family = max(1, len(found.results))
        tested = set(items)
        for key, result in found.results.items():
            if key.split("#")[0] not in tested:  # on the revision's side only
                self.collected.add(result)
        self.lines.extend(found.lines)
        pairs = f"{found.pairs} pair{'s' if found.pairs != 1 else ''}"
        self.lines.append(
            f"against {ref} ({rev.commit[:8]}): {pairs} of fresh processes in {found.cost_s:.0f} s"
        )
        return found.results

    def _device_index(self) -> int | None:
        assert self.session is not None
        return self.session.device.index if self.session.device.kind == "cuda" else None

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # A damaged baseline, found once the tests were collected, was said in one line (a
        # usage error): nothing to save, write or summarize.
        self.refused = session.config.stash.get(REFUSED_KEY, False)
        if self.session is None or self.refused:
            return
        if self.collected.results:  # read before a save adds this run's sessions
            from ..report import changes

            with contextlib.suppress(GpubenchError):  # a damaged baseline: said elsewhere
                found = changes.of_run(self.collected.results, self.session.baseline)
                self.change_notes = changes.note_lines(self.collected.results, found)
                self.change_json = {key: c.to_json() for key, c in found.items()}
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        lost = "baseline not written"  # what a Ctrl-C now would cost
        try:
            if self.settings.save and not interrupted:
                self._save(self.collected.outcomes)
                if self.written and self.settings.sessions > 1:
                    lost = "no further session written"
                    self._record_sessions()
            lost = "report files not written"
            if self.collected.results or self.settings.reports or self.session.env.probed:
                # None asked of a run without gpubench tests: no probe. An interrupted run
                # writes the reports asked for, and stores no run.
                self._write_reports(store=not interrupted)
        except KeyboardInterrupt:
            # The writes are atomic: what is on disk is whole, old or new.
            self.errors.append(f"interrupted: {lost}")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _save(
        self, outcomes: Iterable[tuple[Result, bool]], keys: Collection[str] | None = None
    ) -> Saved | None:
        """Save this run's first session, or with ``keys`` append a recorded one to those
        measurements; return what was saved, None when the save failed (its error is kept)."""
        assert self.session is not None
        try:
            if keys is None:
                saved = self.session.save(outcomes)
            else:
                saved = self.session.append(outcomes, keys)
        except GpubenchError as exc:
            self.errors.append(str(exc))
            return None
        self.saved = bool(self.saved) or saved.written
        for key in saved.keys:
            self.written[key] = self.written.get(key, 0) + 1
        self.accepted.extend(saved.accepted)
        self.not_saved.extend(saved.not_saved)
        return saved

    def _record_sessions(self) -> None:
        """``--gpubench-sessions N``: N - 1 more sessions, each timed in a fresh process and
        appended as it ends to the measurements the first session saved, so that each has N
        sessions (fewer where a fresh process could not time it: the summary says so)."""
        assert self.session is not None
        from ..report.summary import recorded

        keys = frozenset(self.written)
        total = self.settings.sessions
        for i in range(2, total + 1):
            self.announce(f"recording session {i}/{total} in a fresh process")
            try:
                run = self.session.record(i)
            except KeyboardInterrupt:
                self.lines.append(f"session {i}/{total}: interrupted, not recorded")
                raise
            if run.error:
                self.lines.append(f"session {i}/{total}: {run.error}")
                continue
            saved = self._save(run.results, keys)
            if saved is None:
                self.lines.append(f"session {i}/{total}: not saved: stopped")
                return  # the next would fail as this one did (its error is under the table)
            self.lines.append(f"session {i}/{total}: {recorded(len(saved.keys), keys)}")

    def _write_reports(self, store: bool) -> None:
        assert self.session is not None
        from ..report.files import write_reports

        env = self.session.env
        from ..report.files import RunInfo

        info = RunInfo(
            device=env.fingerprint(),
            settings=settings_dict(self.settings),
            session={"id": env.session_id, **env.session_info().to_json()},
            commit=env.git_commit(),
            project=env.rootdir.name,
            changes=self.change_json,
            node=env.node,
        )
        summary = os.environ.get(STEP_SUMMARY)
        self.errors += write_reports(
            self.collected.outcomes,
            info,
            self.settings.reports,
            Path(summary) if summary else None,
        )
        if store and self.collected.results and self.settings.keep_runs > 0:
            self._store_run(info, env.session_id)

    def _store_run(self, info: RunInfo, session_id: str) -> None:
        """Keep this run's result file under the baseline directory (store/runs.py), for
        ``gpubench compare last~1 last``; one that cannot be stored is a warning, not a
        failure: the run asked for no file."""
        from ..report.files import json_report
        from ..store import runs

        try:
            name = runs.file_name(session_id, info.commit)
            self.stored_run = runs.save(
                self.settings.dir,
                name,
                json_report(self.collected.outcomes, info),
                self.settings.keep_runs,
            )
        except GpubenchError as exc:
            self.warnings.append(f"run not stored: {exc}")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.session is None or self.refused:
            return
        from ..report import summary

        write = terminalreporter.write_line
        results = self.collected.results
        if not results and not self.session.env.probed and not self.errors:
            # No gpubench test ran: the device was never detected, and is not for a title.
            terminalreporter.write_sep("=", "gpubench")
            skipped = summary.skipped_line(self.collected.skipped)
            if skipped:
                write(skipped, yellow=True)
            write(summary.footer(results, self.settings.measure, self.session.family))
            return
        device = self.session.device
        terminalreporter.write_sep("=", f"gpubench: {device.name} ({device.key})")
        for line in summary.table_lines(results) + summary.notes(results) if results else []:
            write(line)
        # A creep or a step toward slower (report/changes.py) fails nothing: a creep past the
        # threshold is the verdict's. After a save, that of the saved histories, as a warning.
        if self.saved:
            from ..report.changes import saved_lines

            for line in saved_lines(results, self.session.baseline):
                write(line, yellow=True)
        else:
            for line in self.change_notes:
                write(line)
        for change in self.session.version_changes():
            write(f"baseline was recorded with other software: {change}")
        for line in self.accepted:
            write(line)
        for line in self.not_saved:
            write(line, yellow=True)
        for line in self.lines:
            write(f"gpubench: {line}")
        skipped = summary.skipped_line(self.collected.skipped)
        if skipped:
            write(skipped, yellow=True)
        baseline = self.session.baseline
        if self.saved:
            write(summary.written_line(self.written, baseline.path))
        elif baseline.exists:
            if self.saved is False:
                write(f"baseline unchanged: {baseline.path}")
            elif baseline.schema != "pytest-gpubench/2":
                write(
                    f"baseline {baseline.path} is of schema 1 (one session per test): "
                    "--gpubench-save rewrites it as schema 2"
                )
        elif self.settings.against is None:  # against a revision, none is needed
            hint = "" if self.settings.save else ": run with --gpubench-save"
            write(f"no baseline yet at {baseline.path}{hint}")
        if self.stored_run is not None:
            write(f"run stored: {self.stored_run} (gpubench runs lists the stored runs)")
        for line in self.warnings:
            write(f"gpubench: {line}", yellow=True)
        for line in self.errors:
            write(f"ERROR: {line}", red=True)
        # The family of a run against a revision: every measurement of either side.
        counted = "known at collection" if self.settings.against is None else "of either side"
        write(summary.footer(results, self.settings.measure, self.session.family, counted))


def _terminate_as_interrupt() -> Callable[[], None]:
    """SIGTERM (a CI job cancelled) and SIGHUP raise KeyboardInterrupt while the revision is checked
    out, built and timed, so that the build and the fresh processes are ended and the
    checkout removed, as on Ctrl-C; returns what restores the previous handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGHUP too: a closed terminal, a dropped ssh session.
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    return restore


def settings_dict(settings: Settings) -> dict[str, Json]:
    """The session's settings as plain values, measurement settings flattened in."""
    values: dict[str, Json] = {}
    for key, value in vars(settings).items():
        if isinstance(value, MeasureSettings):
            values.update(vars(value))
        else:
            values[key] = str(value) if isinstance(value, Path) else value
    return values
