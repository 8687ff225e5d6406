"""The role of the process that owns the session: the user's pytest, or an xdist controller.

It alone writes the user's files: after the tests it saves this session into the baselines
(``--gpubench-save``; what is saved is the gate's to say), records more sessions of the
measurements it saved in fresh processes one at a time, appending each as it ends
(``--gpubench-sessions``), writes the report files, and prints the summary with what the
saves wrote. A run that is interrupted saves nothing more.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable, Collection, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from ..core.errors import GpubenchError
from ..core.jsondata import Json, printable
from ..core.records import Result, node_id
from ..core.samples import plural
from ..core.settings import MarkerSpec, MeasureSettings, Settings
from .collect import Collected
from .lockstep import EVERY, lockstep_refusal, only_in_revision
from .measuring import REFUSED_KEY, SPEC_KEY, Measuring, uses_fixture

if TYPE_CHECKING:
    from ..report.files import RunInfo
    from ..run.session import BenchSession, Saved
    from ..versus.ab import Sides
    from ..versus.revision import Revision

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
        measuring: Measuring,
    ) -> None:
        self.config = config
        self.measuring = measuring  # the role that times: its pairing in lockstep
        self.settings = settings
        self.session = session
        self.collected = collected
        self.announce = announce
        self.saved: bool | None = None  # None: no save was made
        self.written: dict[str, int] = {}  # sessions written, by measurement key
        self.sessions_written = 0  # of --gpubench-sessions N, those that wrote a test
        self.accepted: list[str] = []  # the sessions a save accepted, one line each
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
        """Against a revision: the tests that both sides can run in this process are timed
        in lockstep as they run (versus/lockstep.py), the revision's checkout held meanwhile;
        the others are timed in fresh processes before the tests run (versus/ab.py), and then
        run untimed and take their verdicts from them. Either way a regression fails its
        test as any failure does (``-x``, ``--lf``, JUnit)."""
        option = session.config.option
        collection_failed = session.testsfailed and not option.continue_on_collection_errors
        if (
            self.session is None
            or self.settings.against is None
            or option.collectonly
            or collection_failed
        ):
            return (yield)
        if not self._lockstep_possible():
            self.compare(self._measures(session.items))
            return (yield)
        with contextlib.ExitStack() as stack:
            rev, folder = self._checkout(stack)
            self._pair(session, rev, folder)
            started = time.perf_counter()
            try:
                return (yield)
            finally:
                self._lockstep_line(rev, time.perf_counter() - started)
                self._only_in_revision(session, rev)

    def _lockstep_line(self, rev: Revision, spent_s: float) -> None:
        """What the lockstep structure did, for under the table: its tests, and the pairs
        added to the unsure ones (beyond a first look of --gpubench-pairs), by where."""
        pairing = self.measuring.pairing  # set by _pair, as is the session
        assert self.session is not None and pairing is not None
        duos = self.session.apart
        paired = [
            r.verdict.paired
            for r in self.collected.results
            if r.verdict.paired is not None
            and r.verdict.paired.lockstep
            and node_id(r.measurement.key) not in duos  # said on their own line
        ]
        if not paired:
            return
        tests = plural(len(paired), "measurement")
        extra = "".join(
            f"; {unsure} unsure got {pairs} more from {where}"
            for where, (unsure, pairs) in pairing.added.items()
            if unsure
        )
        first = pairing.design.first
        each = "a pair each" if first == 1 else f"{first} pairs each"
        if first > 1 and not pairing.in_process:
            each += ", the first there"
        self.lines.append(
            f"against {rev.ref} ({rev.commit[:8]}): {tests} timed in lockstep, both sides in "
            f"one process, {each}{extra}; the tests took {spent_s:.0f} s"
        )

    def _only_in_revision(self, session: pytest.Session, rev: Revision) -> None:
        """The tests of gpubench that the working tree removed, for under the table: in
        lockstep they are not run (in processes they read `removed`)."""
        try:
            gone = only_in_revision(session, rev)
        except OSError:  # (a file it cannot read: it says nothing rather than fail the run)
            return
        if gone:
            shown = ", ".join(gone[:5]) + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")
            self.lines.append(
                f"against {rev.ref} ({rev.commit[:8]}): {plural(len(gone), 'test')} only in the "
                f"revision, not run in lockstep: {shown} (--gpubench-pairing=processes times "
                "them as removed)"
            )

    def _lockstep_possible(self) -> bool:
        """Whether the tests may run both sides in lockstep: asked, not under xdist's
        controller (plugin/distributed.py times each side in processes of its own)."""
        distributed = self.config.getoption("dist", "no") != "no"
        return self.settings.pairing == "lockstep" and not distributed

    def _measures(self, items: Iterable[pytest.Item]) -> dict[str, MeasureSettings]:
        specs = {i.nodeid: i.stash.get(SPEC_KEY, None) for i in items if uses_fixture(i)}
        return {
            nodeid: spec.measure if isinstance(spec, MarkerSpec) else self.settings.measure
            for nodeid, spec in specs.items()
        }

    def _pair(self, session: pytest.Session, rev: Revision, folder: Path) -> None:
        """Set up both sides in this process: the tests whose revision's file cannot be
        loaded beside the working tree's are compared in fresh processes now; the others
        when they run, in lockstep (plugin/measuring.py), or in fresh processes from the
        first whose fixture values turn out to hold code (:meth:`apart`)."""
        assert self.session is not None
        from .. import __file__ as package_init
        from ..run.children import foreign_imports
        from ..versus.ab import imported_other_side
        from ..versus.lockstep import MORE_VARIABLE, Pairing, TwoSides

        # A bisect step's side collected a tree it must not (an editable install's import
        # finder maps the package to the user's tree): both sides would time that code.
        found = foreign_imports()
        if found:
            _usage_exit(imported_other_side(rev, "this process's side", found))
        two = TwoSides(rev, Path(package_init).parent)
        pairing = Pairing(
            two,
            self.session,
            self.settings,
            self.session.launcher,
            in_process=os.environ.get(MORE_VARIABLE) != "fresh",
        )
        pairing.apart = self._apart_from
        self.measuring.pairing = pairing
        self.session.lockstep = True
        self.session.comparison = {}
        self._folder, self._rev = folder, rev
        self._items = [i for i in session.items if uses_fixture(i)]
        why: dict[str, list[str]] = {}
        if self.settings.build is not None:  # its output may be native code of the revision
            built = f"--gpubench-build {self.settings.build!r} builds the revision's code"
            why[built] = [i.nodeid for i in self._items]
        else:
            for item in self._items:
                problem = lockstep_refusal(item, two)
                if problem:
                    why.setdefault(problem, []).append(item.nodeid)
        for problem, nodeids in why.items():
            self.apart(nodeids, problem)
        here = len(self._items) - len(self.session.apart)
        if here:
            self.announce(
                f"against {rev.ref} ({rev.commit[:8]}): {here}"
                " tests to time in lockstep in this process, both sides alternately (one found"
                " to need a process per side goes to duos)"
            )

    def _apart_from(self, nodeid: str, why: str, fixture: str) -> None:
        """The test ``nodeid`` is found, as it runs, to need a process per side: so are the
        later tests using the same culprit ``fixture`` (one batch of processes for all)."""
        ids = [i.nodeid for i in self._items]
        later = self._items[ids.index(nodeid) + 1 :] if nodeid in ids and fixture else []
        shared = [
            i.nodeid for i in later if fixture == EVERY or fixture in getattr(i, "fixturenames", ())
        ]
        self.apart([nodeid, *shared], why)

    def apart(self, nodeids: Sequence[str], why: str) -> None:
        """Time the tests ``nodeids`` in pairs of fresh processes, one per side, now, for
        ``why`` one process cannot hold both sides: their verdicts wait for them."""
        assert self.session is not None and self.session.comparison is not None
        wanted = [n for n in nodeids if n not in self.session.apart]
        if not wanted:
            return
        self.session.apart.update(wanted)
        tests = plural(len(wanted), "test")
        self.announce(f"{tests} in duos, a fresh process per side at once: {why}")
        measures = self._measures(i for i in self._items if i.nodeid in wanted)
        found = self._duo_in(measures, why)
        self.session.comparison = {**self.session.comparison, **found}

    def _duo_in(self, measures: Mapping[str, MeasureSettings], why: str) -> Mapping[str, Result]:
        """The tests ``measures`` names timed in duos (versus.lockstep.Pairing.duo_verdicts):
        their results by key, each reason saying ``why`` they ran there."""
        pairing = self.measuring.pairing
        assert pairing is not None
        started = time.perf_counter()
        rev = self._rev
        try:
            sides = self._sides(rev, self._folder)
            found, errors, duos = pairing.duo_verdicts(
                list(measures),
                sides.head,
                sides.base,
                lambda nodeid: measures.get(nodeid, self.settings.measure),
                self.announce,
            )
        except GpubenchError as exc:
            _usage_exit(exc)
        results = {}
        for key, result in found.items():
            if node_id(key) in measures:
                reason = f"{result.verdict.reason}; {why}: timed in duos"
                results[key] = dataclasses.replace(
                    result, verdict=dataclasses.replace(result.verdict, reason=reason)
                )
        self.lines.extend(errors)
        self.lines.append(
            f"against {rev.ref} ({rev.commit[:8]}): {plural(duos, 'duo')} "
            f"(a fresh process per side, at once) in {time.perf_counter() - started:.0f} s "
            f"({why}); each duo is judged as one pair of processes (its pairs share them), "
            "each side leading half of them"
        )
        return results

    def _checkout(self, stack: contextlib.ExitStack) -> tuple[Revision, Path]:
        """The revision checked out (and built) for as long as ``stack`` holds, in a folder
        of the comparison's own (its compile caches); SIGTERM ends it as Ctrl-C does. An
        error exits the session in one line."""
        from ..run import processes
        from ..versus import revision

        ref = self.settings.against
        assert ref is not None
        log = Path(tempfile.gettempdir()) / f"gpubench-build-{os.getpid()}.log"
        stack.enter_context(processes.interrupts())  # SIGTERM and SIGHUP: as Ctrl-C
        revision.sweep(Path(tempfile.gettempdir()).resolve(), AB_FOLDER)  # runs killed outright
        try:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix=AB_FOLDER))
            revision.own(Path(folder))  # owned before the checkout: swept if we are killed
            rev = stack.enter_context(
                revision.checkout(
                    ref, self.config.invocation_params.dir, build=self.settings.build, log=log
                )
            )
        except GpubenchError as exc:  # a build that failed or ran over leaves its log, named
            stack.close()
            _usage_exit(exc)
        with contextlib.suppress(OSError):
            log.unlink()  # built: its output is not needed
        return rev, Path(folder)

    def compare(
        self, measures: Mapping[str, MeasureSettings], devices: Sequence[int] = ()
    ) -> Mapping[str, Result]:
        """Time the benchmarks ``measures`` names (node id: its measurement settings) on both
        sides in fresh processes, on this process's GPU or spread over ``devices``, and keep
        their verdicts for the tests (none when there are none); exits the session on an
        error, in one line."""
        assert self.session is not None
        if not measures or self.session.launcher is None:
            return {}
        from ..versus import ab

        tests = plural(len(measures), "test")
        # Lockstep asked (the default) but not possible: under xdist, the workers run the tests.
        why = (
            " (lockstep runs without pytest-xdist's -n)"
            if self.settings.pairing == "lockstep"
            else ""
        )
        with contextlib.ExitStack() as stack:
            rev, folder = self._checkout(stack)
            self.announce(
                f"against {rev.ref} ({rev.commit[:8]}): {tests}, timed in pairs of fresh "
                f"processes, one of each side{why}"
            )
            try:
                found = ab.compare(
                    list(measures),
                    self._sides(rev, folder),
                    rev,
                    self.settings,
                    lambda nodeid: measures.get(nodeid, self.settings.measure),
                    devices or [self.session.device_index],
                    self.announce,
                )
            except GpubenchError as exc:
                _usage_exit(exc)
            for key, result in found.results.items():
                if node_id(key) not in measures:  # on the revision's side only
                    self.collected.add(result)
                elif node_id(key) in found.crashed:  # its test fails at its setup: no call report
                    self.collected.add(result, passed=False)
            self.lines.extend(found.lines)
            pairs = plural(found.pairs, "pair")
            self.lines.append(
                f"against {rev.ref} ({rev.commit[:8]}): {pairs} of fresh processes in "
                f"{found.cost_s:.0f} s"
            )
        self.session.comparison = found.results
        self.session.unjudged = found.unjudged
        self.session.crashed = found.crashed
        self.session.family = max(1, len(found.results))
        return found.results

    def _sides(self, rev: Revision, folder: Path) -> Sides:
        """The launchers of both sides of a comparison (versus.ab.sides)."""
        assert self.session is not None and self.session.launcher is not None
        from .. import __file__ as package_init
        from ..versus import ab, revision

        return ab.sides(
            self.session.launcher,
            rev,
            folder,
            Path(package_init).parent,
            self.settings.dir,
            revision.import_roots(),
        )

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
        from ..run import processes

        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        lost = "baseline not written"  # what a Ctrl-C now would cost
        try:
            # SIGTERM and SIGHUP (a cancelled CI job) as Ctrl-C: the run says what it wrote.
            with processes.interrupts():
                if self.settings.save and not interrupted:
                    self._save(self.collected.outcomes)
                    if self.written and self.settings.sessions > 1:
                        self.sessions_written = 1  # the save above wrote the first
                        lost = ""  # said by _record_sessions, from the sessions written
                        self._record_sessions()
                lost = "report files not written"
                if self.collected.results or self.settings.reports or self.session.env.probed:
                    # None asked of a run without gpubench tests: no probe. An interrupted
                    # run writes the reports asked for, and stores no run.
                    self._write_reports(store=not interrupted)
        except KeyboardInterrupt:
            # The writes are atomic: what is on disk is whole, old or new.
            if not lost:  # of --gpubench-sessions N: what was written and what not
                total, written = self.settings.sessions, self.sessions_written
                lost = f"{written} of {total} sessions written, {total - written} not"
            self.errors.append(f"interrupted: {lost}")
            session.exitstatus = pytest.ExitCode.INTERRUPTED
        if self.settings.against is not None and not interrupted:
            from ..versus.ab import nothing_judged

            # A gate that judged nothing fails the run, as a revision that fails to build does.
            judged = nothing_judged(self.collected.results, self.settings.against)
            if judged:
                self.errors.append(judged)
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.USAGE_ERROR
        if self.errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _save(
        self, outcomes: Iterable[tuple[Result, bool]], keys: Collection[str] | None = None
    ) -> Saved | None:
        """Save this run's first session, or with ``keys`` append a recorded one to those
        measurements (all of it to those whose first session the save accepted); return
        what was saved, None when the save failed (its error is kept). A recorded session
        refused for spoiling its history fails the run, in a line of its own."""
        assert self.session is not None
        try:
            if keys is None:
                saved = self.session.save(outcomes)
            else:
                accepted = {r.key for r, _ in self.collected.outcomes if r.verdict.accepted}
                saved = self.session.append(outcomes, keys, accepted)
        except GpubenchError as exc:
            self.errors.append(str(exc))
            return None
        self.saved = bool(self.saved) or saved.written
        for key in saved.keys:
            self.written[key] = self.written.get(key, 0) + 1
        self.accepted.extend(saved.accepted)
        self.not_saved.extend(saved.not_saved)
        self.errors.extend(saved.refused)
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
            self.sessions_written += bool(saved.keys)
            self.lines.append(f"session {i}/{total}: {recorded(len(saved.keys), keys)}")

    def _write_reports(self, store: bool) -> None:
        assert self.session is not None
        from ..report.files import RunInfo, write_reports

        env = self.session.env
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

        def write(line: str, **markup: bool) -> None:
            # A key may hold what no encoding writes (a lone surrogate in a test id): escaped.
            terminalreporter.write_line(printable(line), **markup)

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
        for line in self.session.baseline.notes:  # what its read left out
            write(f"gpubench: {line}", yellow=True)
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


def _usage_exit(exc: GpubenchError) -> NoReturn:
    """End the run on an error in how it was asked, saying it as pytest's usage error."""
    pytest.exit(f"gpubench: {exc}", returncode=pytest.ExitCode.USAGE_ERROR)


def settings_dict(settings: Settings) -> dict[str, Json]:
    """The session's settings as plain values, measurement settings flattened in."""
    values: dict[str, Json] = {}
    for key, value in vars(settings).items():
        if isinstance(value, MeasureSettings):
            values.update(vars(value))
        else:
            values[key] = str(value) if isinstance(value, Path) else value
    return values
