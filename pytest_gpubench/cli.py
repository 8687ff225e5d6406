"""The ``gpubench`` command; each command's description (``--help``) says what it does.

``compare`` judges result files with the plugin's own gate (judge.gate), an A/B run's file
on its pairs (versus.ab), stored runs by name (store/runs.py); ``show`` and ``plot`` read
baselines (report.baselines; report.plots, the only importer of matplotlib); ``bisect``
runs versus/bisect.py; ``merge-baselines`` is a git merge driver (store/merge.py).

Errors a user can fix are one line, ``gpubench: error: ...``, and exit status 2, as in the
plugin; a failing verdict of ``compare`` exits 1. The pytest plugin never imports this module.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import io
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar

from .core.baseline import Update
from .core.device import Fingerprint
from .core.errors import BaselineError, GpubenchError
from .core.jsondata import Json
from .core.records import Paired, Result, SessionInfo, Status, is_number, whole
from .core.settings import (
    CHANGED_ACTIONS,
    MeasureSettings,
    Settings,
    parse_alpha,
    parse_fraction_or_percent,
    parse_pairs,
)
from .core.version import __version__
from .judge.gate import Gate
from .judge.rule import MIN_GATED_SESSIONS, SHORT_GATE
from .report import baselines
from .report import summary as report
from .run import processes
from .store import files as storage
from .store import runs as stored_runs
from .store.baseline import Baseline, load
from .store.merge import merge_files
from .versus import ab
from .versus import bisect as bisection

RESULT_FILE = "result file"
# A result file holds the samples of each test of one run; far larger is no result file.
MAX_RESULT_BYTES = 256 << 20
# The plugin's defaults: where it keeps its baselines (relative to the project), its levels.
DEFAULT_DIR = Settings.dir
DEFAULT_THRESHOLD = MeasureSettings.threshold
DEFAULT_ALPHA = MeasureSettings.alpha
T = TypeVar("T")
PLOT_HINT = "gpubench plot needs matplotlib: pip install 'pytest-gpubench[plot]'"


# --- reading files --------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultFile:
    """One run's results, as ``pytest --gpubench-json`` wrote them."""

    path: Path
    device: Fingerprint
    settings: Mapping[str, Json]
    results: dict[str, Result]  # by key
    # An A/B run's (pytest --gpubench-against): the revision as typed and its commit.
    against: Paired | None = None

    @property
    def device_name(self) -> str:
        return str(self.device.get("name") or "unknown device")


def read_results(path: Path) -> ResultFile:
    """The result file at ``path``; GpubenchError (one line) when it is missing or not one."""
    text = storage.read_text(path, RESULT_FILE, MAX_RESULT_BYTES)
    if text is None:
        raise GpubenchError(
            f"no result file {path}: write one with pytest --gpubench --gpubench-json {path}"
        )
    data = storage.parse_json(text, f"{RESULT_FILE} {path}")
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("pytest-gpubench/"):
        raise GpubenchError(
            f"{path} is a baseline file, not a result file: compare reads the files of "
            "pytest --gpubench --gpubench-json (gpubench show and plot read baselines)"
        )
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise GpubenchError(
            f"{path} is not a result file (no 'results' list): compare reads the files of "
            "pytest --gpubench --gpubench-json"
        )
    for part in ("device", "settings"):
        if not isinstance(data.get(part, {}), dict):
            raise GpubenchError(f"{RESULT_FILE} {path} has a {part!r} that is not an object")
    try:  # the revision and commit of an A/B run: a Paired of no sessions
        against = None if data.get("against") is None else Paired.from_json(data["against"])
    except ValueError:
        raise GpubenchError(
            f"{RESULT_FILE} {path} has an 'against' that is not an object with 'revision' and "
            "'commit' strings; write it again with pytest --gpubench-against REF --gpubench-json"
        ) from None
    results: dict[str, Result] = {}
    for index, item in enumerate(data["results"]):
        problem = _result_problem(item)
        try:
            result = None if problem else Result.from_dict(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            result, problem = None, f"cannot be read ({type(exc).__name__}: {exc})"
        if result is None:
            raise GpubenchError(
                f"{RESULT_FILE} {path} has a results[{index}] that {problem}; write it again "
                "with pytest --gpubench --gpubench-json"
            )
        results[result.key] = result
    return ResultFile(path, data.get("device", {}), data.get("settings", {}), results, against)


# Why a BASE result holds no time to judge HEAD against (HEAD's is then new, saying so),
# where its file stores no reason (an A/B run's unmeasurable stores one: :func:`_unusable`).
UNUSABLE_BASE = {
    Status.IMPOSSIBLE: "no time of its work to compare with",
    Status.UNMEASURABLE: "the times of a loaded host, none to compare with",
}


def _unusable(result: Result) -> str:
    """Why the BASE ``result`` holds no time to compare with: in its run's words where its
    file stores them (an A/B run's unmeasurable: a side's process died), else UNUSABLE_BASE's."""
    if result.status is Status.UNMEASURABLE and result.verdict.reason:
        return f"{result.verdict.reason}, none to compare with"
    return UNUSABLE_BASE[result.status]


def _result_problem(item: Json) -> str:
    """What keeps one entry of a result file from being judged, or ''."""
    if not isinstance(item, dict):
        return "is not an object"
    for name in ("key", "test", "timer"):
        if not isinstance(item.get(name), str) or not item[name]:
            return f"has no {name!r} string"
    samples = item.get("samples_ms")
    if (
        not isinstance(samples, list)
        or not samples
        or not all(is_number(s) and 0 < s < math.inf for s in samples)
    ):
        return "has no 'samples_ms' list of positive times"
    threshold = item.get("threshold")
    if not (is_number(threshold) and 0 < threshold < 1):
        return f"has a 'threshold' of {threshold!r:.40}, not a fraction in (0, 1)"
    for name in ("bytes", "flops", "peak_gbs", "cached_gbs", "cache_bytes", "matmul_tflops"):
        value = item.get(name)
        if value is not None and not (is_number(value) and 0 < value < math.inf):
            return f"has a {name!r} of {value!r:.40}, not a positive number"
    dtype = item.get("matmul_dtype")
    if dtype is not None and not isinstance(dtype, str):
        return f"has a 'matmul_dtype' of {dtype!r:.40}, not a string"
    peak = item.get("peak_bytes")
    if peak is not None and not whole(0)(peak):
        return f"has a 'peak_bytes' of {peak!r:.40}, not a count of bytes"
    return ""


def baseline_paths(names: Sequence[str]) -> list[Path]:
    """The baseline files named, a directory standing for its ``*.json``; without names,
    those of ``.gpubench`` under the current directory."""
    if not names:
        if not DEFAULT_DIR.is_dir():
            raise GpubenchError(
                f"no baseline directory {DEFAULT_DIR} here: run gpubench in the project root, "
                "or name baseline files or directories"
            )
        names = [str(DEFAULT_DIR)]
    paths: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise GpubenchError(
                    f"no baseline files (*.json) in {path}: record one with pytest --gpubench-save"
                )
            paths.extend(found)
        elif path.exists():
            paths.append(path)
        else:
            raise GpubenchError(f"no such baseline file or directory: {path}")
    return paths


def read_baseline(path: Path) -> Baseline:
    """The baseline file at ``path``; GpubenchError (one line) when it cannot be read."""
    try:
        baseline = load(path)
    except BaselineError:
        if _is_result_file(path):
            raise GpubenchError(
                f"{path} is a result file of pytest --gpubench-json, not a baseline file: "
                "gpubench compare reads result files"
            ) from None
        raise
    if not baseline.exists:
        raise GpubenchError(f"no such baseline file: {path}")
    for note in baseline.notes:  # what the read left out, on stderr: the output stays as it was
        print(f"gpubench: {note}", file=sys.stderr, flush=True)
    return baseline


def _is_result_file(path: Path) -> bool:
    try:
        read_results(path)
    except GpubenchError:
        return False
    return True


# --- compare --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """HEAD's results judged against BASE's (or an A/B run's judged again on its pairs)."""

    title: str  # the terminal report's first line
    results: list[Result]  # HEAD's, judged; keys only in HEAD are "new"
    gate: Gate  # its family: the keys in both (the multiplicity correction)
    levels: MeasureSettings  # the default threshold and the alpha, for the footer
    notes: list[str]  # under the table: another device, the keys in one file only
    removed: int = 0  # BASE's results whose keys HEAD lacks
    family_of: str = "in both files"  # what the family counts, for the footer

    @property
    def failed(self) -> bool:
        return any(self.gate.fails(r.verdict) for r in self.results)


def compare(
    base: ResultFile,
    head: ResultFile,
    gate: Gate,
    threshold: float | None = None,
    alpha: float | None = None,
) -> Comparison:
    """Judge each of HEAD's results against BASE's result of the same key, as the plugin
    judges a run against a baseline: BASE's sessions (its first and its confirmations) are
    the history, HEAD's the current sessions; launches other than BASE's are another binary
    (``gate``, :func:`_gate`: fails or warns). ``threshold`` None: each test's own, as its
    run recorded it; ``alpha`` None: HEAD's run's."""
    levels = _levels(head, threshold, alpha)
    common = [key for key in head.results if key in base.results]
    # The family is this comparison's, not its run's: the footer reports it.
    gate = dataclasses.replace(gate, family=max(1, len(common)))
    judged = []
    for key, result in head.results.items():
        measurement = result.measurement
        before = base.results.get(key)
        entry = None  # else BASE's as the baseline entry a save of it would start (a new epoch)
        infos: Mapping[str, SessionInfo] = {}  # BASE's sessions: their GPUs
        if before is not None and before.status not in UNUSABLE_BASE:
            entry = Update.of(before.measurement, new_epoch=True).apply(None)
            infos = before.measurement.session_infos
        measure = dataclasses.replace(levels, threshold=threshold or measurement.threshold)
        try:
            verdict = gate.verdict(measurement, entry, measure, infos)
        except ValueError as exc:  # a value the rule refuses (the files were checked)
            raise GpubenchError(f"cannot judge {key}: {exc}") from None
        if entry is None and verdict.status is Status.NEW:
            why = (
                f"not in {base.path}"
                if before is None
                else f"{before.status.value} in {base.path}: {_unusable(before)}"
            )
            verdict = dataclasses.replace(verdict, reason=why)
        measurement = dataclasses.replace(measurement, threshold=measure.threshold)
        judged.append(Result(measurement, verdict))
    notes = []
    if base.device_name != head.device_name:
        notes.append(
            f"BASE was measured on {base.device_name}, HEAD on {head.device_name}: the "
            "changes include the difference between the devices"
        )
    notes += [
        f"{r.test}: new: {r.verdict.reason}"
        if not r.verdict.reason.startswith("not in ")
        else f"added (in HEAD only): {r.test}"
        for r in report.sort_results(judged)
        if r.status is Status.NEW
    ]
    removed = [r for key, r in base.results.items() if key not in head.results]
    notes += [f"removed (in BASE only): {r.test}" for r in removed]
    title = f"gpubench compare: {base.path} -> {head.path} ({head.device_name})"
    return Comparison(title, judged, gate, levels, notes, len(removed))


def compare_pairs(
    run: ResultFile, gate: Gate, threshold: float | None = None, alpha: float | None = None
) -> Comparison:
    """Judge again each result of an A/B run's file (pytest --gpubench-against) on its pairs,
    by the pair rule with the run's design and family, the working tree's measurement held to
    its declared bytes and flops (ab.held_to_floors), as the run judged it. ``threshold`` None: each
    test's own; ``alpha`` None: the run's. A result without a pair (new, removed, timed by
    another timer on each side) keeps its verdict."""
    levels = _levels(run, threshold, alpha)
    # The run's family (every measurement of both sides), recorded with each verdict.
    family = max([1, *(r.verdict.family for r in run.results.values())])
    gate = dataclasses.replace(gate, family=family)
    pairs, confirm = run.settings.get("pairs"), run.settings.get("confirm", 6)
    if not ((pairs is None or whole(1)(pairs)) and whole(0)(confirm)):
        raise GpubenchError(
            f"{RESULT_FILE} {run.path} has settings 'pairs' {pairs!r:.40} and 'confirm' "
            f"{confirm!r:.40}, not counts; write it again with pytest --gpubench-against REF "
            "--gpubench-json"
        )
    first, more = None if pairs is None else int(pairs), int(confirm) > 0
    judged = []
    for key, result in run.results.items():
        m, verdict = result.measurement, result.verdict
        measure = dataclasses.replace(levels, threshold=threshold or m.threshold)
        if verdict.paired is not None and verdict.paired.pairs:
            try:
                p = verdict.paired
                design = ab.design_of(first, more, p.lockstep, bool(p.duos), p.fresh)
                paired = ab.rejudged(verdict.paired, m, verdict, measure, gate, design)
                verdict = ab.held_to_floors(paired, m, gate)
            except ValueError as exc:  # a value the rule refuses
                raise GpubenchError(f"cannot judge {key}: {exc}") from None
        judged.append(Result(dataclasses.replace(m, threshold=measure.threshold), verdict))
    revision = run.against.label if run.against else ""
    title = f"gpubench compare: {run.path}: the working tree against {revision} ({run.device_name})"
    return Comparison(title, judged, gate, levels, [], family_of="of either side")


def _gate(args: argparse.Namespace) -> Gate:
    """The gate of ``gpubench compare``'s options: no confirmations (the files are all there
    is); its family is the comparison's to set."""
    return Gate.of(
        Settings(
            confirm=0,
            fail_on_improvement=args.fail_on_improvement,
            allow_incomparable=args.allow_incomparable,
            changed=args.changed,
        )
    )


def _levels(run: ResultFile, threshold: float | None, alpha: float | None) -> MeasureSettings:
    """The levels given, else those ``run`` recorded in its settings: the threshold is the
    footer's default (each test is judged at its own where none is given)."""

    def recorded(name: str, default: float) -> float:
        value = run.settings.get(name)
        return float(value) if is_number(value) and 0 < value < 1 else default

    return MeasureSettings(
        threshold=threshold or recorded("threshold", DEFAULT_THRESHOLD),
        alpha=alpha if alpha is not None else recorded("alpha", DEFAULT_ALPHA),
    )


def _report(comparison: Comparison, device: Fingerprint, markdown: bool) -> int:
    """Print the comparison: the plugin's table and notes, the comparison's own notes and
    footer (in Markdown, the plugin's summary with that footer, the notes under it); return
    the exit status."""
    if markdown:
        text = report.markdown(comparison.results, device, footer=_footer(comparison))
        if comparison.notes:
            text += "\n" + "\n".join(f"- {line}" for line in comparison.notes) + "\n"
        sys.stdout.write(text)
    else:
        lines = [comparison.title]
        if comparison.results:
            lines += report.table_lines(comparison.results) + report.notes(comparison.results)
        print("\n".join([*lines, *comparison.notes, _footer(comparison)]))
    return 1 if comparison.failed else 0


def _footer(comparison: Comparison) -> str:
    text = report.footer(
        comparison.results, comparison.levels, comparison.gate.family, comparison.family_of
    )
    if comparison.removed:
        text += f"; {comparison.removed} removed"
    return text


# --- commands -------------------------------------------------------------------------------


def result_path(name: str, directory: Path) -> Path:
    """The result file ``name`` means: a file, else a run stored under ``directory``
    (``last``, ``last~N``, or the start of its id; store/runs.py)."""
    path = Path(name)
    if os.path.lexists(path):  # a dangling link too: a file, not a stored run's name
        return path
    return stored_runs.resolve(directory, name)


def run_runs(args: argparse.Namespace) -> int:
    """``gpubench runs``: the stored runs, newest first, with the names compare takes."""
    found = stored_runs.stored(args.dir)
    if not found:
        raise GpubenchError(
            f"no stored runs in {stored_runs.folder(args.dir)}: each pytest --gpubench run "
            "stores its results there (--gpubench-keep-runs); point --dir at the baseline "
            "directory"
        )
    rows = [["name", "id", "tests", "device"]]
    for back, path in enumerate(reversed(found)):
        try:
            run = read_results(path)
            tests, device = str(len(run.results)), run.device_name
        except GpubenchError:
            tests, device = "-", "unreadable"
        rows.append([f"last~{back}" if back else "last", path.stem, tests, device])
    print("\n".join(report.aligned(rows, left=2, last_left=True)))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    base_path = result_path(args.base, args.dir)
    if args.head is None:  # an A/B run's file, judged again on its pairs
        run = read_results(base_path)
        if run.against is None:
            raise GpubenchError(
                f"{run.path} is the file of one run, not of an A/B run: pass BASE.json HEAD.json "
                "to compare two runs, or alone a file of pytest --gpubench-against REF "
                "--gpubench-json"
            )
        comparison = compare_pairs(run, _gate(args), args.threshold, args.alpha)
        return _report(comparison, run.device, args.markdown)
    head_path = result_path(args.head, args.dir)
    base, head = read_results(base_path), read_results(head_path)
    both = [f for f in (base, head) if f.against is not None]
    if len(both) == 2:
        raise GpubenchError(
            f"{base.path} and {head.path} are both files of A/B runs (pytest --gpubench-against), "
            f"each judged alone: pass one file, such as gpubench compare {head.path}"
        )
    if both:
        raise GpubenchError(
            f"{both[0].path} is the file of an A/B run (pytest --gpubench-against), judged "
            f"alone: pass it alone (gpubench compare {both[0].path}), or two files of runs "
            "without --gpubench-against"
        )
    comparison = compare(base, head, _gate(args), args.threshold, args.alpha)
    return _report(comparison, head.device, args.markdown)


@contextlib.contextmanager
def _without_collector() -> Iterator[None]:
    """No cyclic garbage collection while a command builds the records of big files: they
    hold no cycles, and the collector walked all of them again and again (a file of 10^5
    tests spent more than half of `gpubench show` there)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@_without_collector()
def run_show(args: argparse.Namespace) -> int:
    for i, path in enumerate(baseline_paths(args.paths)):
        baseline = read_baseline(path)
        title = f"{baseline.path}: {baselines.file_header(baseline)}"
        lines = baselines.show_lines(title, baseline, args.threshold, args.alpha)
        if i:
            print()
        print("\n".join(lines))
    print(baselines.SHOW_NOTE)
    return 0


@_without_collector()
def run_plot(args: argparse.Namespace) -> int:
    if args.out is None and args.html is None:
        raise GpubenchError(
            "gpubench plot writes nothing: give --out DIR, --html PAGE.html or both"
        )
    try:
        from .report import plots
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "matplotlib":
            raise
        raise GpubenchError(PLOT_HINT) from None
    files = [read_baseline(path) for path in baseline_paths(args.paths)]
    sections = [
        plots.Section(b, baselines.survey(b, args.threshold, args.alpha), baselines.file_header(b))
        for b in files
    ]
    written, notes = plots.write(sections, out=args.out, image_format=args.format, html=args.html)
    for note in notes:
        print(note)
    for path in written:
        print(f"wrote {path}")
    return 0


def run_bisect(args: argparse.Namespace) -> int:
    if args.max_pairs < args.pairs:  # an unsure step could never get more
        raise GpubenchError(f"--max-pairs {args.max_pairs} is below --pairs {args.pairs}")
    if args.json is not None:
        storage.check_target(args.json, "bisect JSON file")  # before hours of steps, not after

    def progress(line: str) -> None:
        print(f"gpubench bisect: {line}", file=sys.stderr, flush=True)

    try:
        with processes.interrupts():
            found = bisection.bisect(
                args.good,
                args.bad,
                Path.cwd(),
                pytest_args=args.pytest_args,
                pairs=args.pairs,
                max_pairs=args.max_pairs,
                threshold=args.threshold,
                build=args.build,
                timeout_s=args.timeout,
                announce=lambda line: print(line, flush=True),
                progress=progress,
            )
    except KeyboardInterrupt:
        print(
            "gpubench bisect: interrupted: the step's processes were ended and its checkouts "
            "removed",
            file=sys.stderr,
        )
        return 130
    if found is None:
        print(f"nothing to bisect: GOOD {args.good!r} and BAD {args.bad!r} are one commit")
        return 1
    print("\n".join(bisection.report_lines(found)))
    if args.json is not None:
        document = bisection.report_json(found, args.pytest_args)
        storage.write_atomic(args.json, json.dumps(document, indent=1) + "\n", "bisect JSON file")
    return 0 if found.state is bisection.State.FOUND else 1


# --- the parser -----------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, as the plugin's: the usage is one --help away."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    # A command whose arguments after "--" pass on unparsed (bisect's pytest arguments): the
    # attribute they go to. argparse alone would refuse options between them and the
    # positionals, and drop a second "--".
    rest: str | None = None

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.rest is None or args is None:
            return super().parse_known_args(args, namespace)
        cut = list(args).index("--") if "--" in args else len(args)
        parsed, extra = super().parse_known_args(list(args)[:cut], namespace)
        if extra:
            self.error(f"unrecognized arguments: {' '.join(extra)}: pytest's go after --")
        setattr(parsed, self.rest, list(args)[cut + 1 :])
        return parsed, extra


def run_merge(args: argparse.Namespace) -> int:
    merge_files(Path(args.ancestor), Path(args.current), Path(args.other))
    return 0


def _typed(parse: Callable[[str], T]) -> Callable[[str], T]:
    """``parse`` as an argparse type: its ValueError a usage error naming the text."""

    def parsed(text: str) -> T:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None

    return parsed


_percent, _alpha = _typed(parse_fraction_or_percent), _typed(parse_alpha)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected seconds such as 3600, got {text!r}")
    return value


COMPARE_DESCRIPTION = (
    "Judge the results of HEAD against those of BASE, both written by pytest --gpubench "
    "--gpubench-json, with the plugin's rule: per test, BASE's sessions (its first and any "
    "confirmations) are the history, HEAD's the current sessions. Another timer makes a test "
    "incomparable, other launches (kernels, grid, block, registers, shared memory) changed, "
    f"too few samples unstable. A test with fewer than {MIN_GATED_SESSIONS} BASE sessions "
    f"gates only a change of {SHORT_GATE:.0%} or more, on its timer's prior (one session "
    "tells no spread between sessions). "
    "Given one file of an A/B run (pytest --gpubench-against REF --gpubench-json), judge its "
    "pairs again with the pair rule, the run's design and levels (--threshold and --alpha "
    "override them), and print its table: both sides' medians, the change with its "
    "interval, the pairs, the verdict. "
    "Exit status 1 when a verdict fails, 2 on an error."
)
RUNS_DESCRIPTION = (
    "List the runs stored under the baseline directory (each pytest --gpubench run with "
    "results stores its result file in DIR/runs, the newest --gpubench-keep-runs kept), "
    "newest first: the name compare takes (last, last~1, ...), the run's id (its UTC time, "
    "a random part and its commit), its results and device."
)
SHOW_DESCRIPTION = (
    "List the tests of baseline files: timer, sessions in the history and the anchor, "
    "reference median, the between-session spread the rule uses and the smallest slowdown "
    "a next single session is failed for (of each test's latest binary); then the binaries "
    "each test keeps a history of: what one call launches, sessions and reference time. "
    "Last, the tests whose history shows a creep or a step toward slower by half the "
    "threshold or more (a warning, never a failure)."
)
BISECT_DESCRIPTION = (
    "Find the first commit at which the selected gpubench tests got slower: a binary search "
    "over the first-parent commits after GOOD up to BAD. Each step checks a commit out "
    "outside your tree and runs pytest --gpubench --gpubench-against GOOD there, with the "
    "pytest arguments after -- (a node id, -k softmax); BAD comes first, and the tests it "
    "regressed are the ones followed, with their ratios to GOOD. A step is bad when one of "
    "them regressed or its interval lies above halfway to BAD's ratio, good when none is bad "
    "and one lies below halfway (the others' ratios below it too), else "
    "unsure: run again with twice the pairs up to --max-pairs, then the search stops and "
    "names the commits left. Exit status 0 when the first bad commit is found, 1 when BAD "
    "is not slower than GOOD or a step stayed unsure, 2 on an error, 130 when interrupted."
)
PLOT_DESCRIPTION = (
    "Draw baseline files with matplotlib (pip install 'pytest-gpubench[plot]'): per test the "
    "session medians with the first look's band, and the % of peak copy bandwidth "
    "per group where the device's peak was measured."
)
MERGE_DESCRIPTION = (
    "Write into CURRENT the sessions that OTHER saved since ANCESTOR, as a save of them "
    "would have: two saves of one baseline file on two branches keep both. Refused (exit "
    "status 2, CURRENT untouched) when OTHER is not ANCESTOR plus saved sessions. As a git "
    'merge driver: git config merge.gpubench.driver "gpubench merge-baselines %O %A %B", '
    'and ".gpubench/*.json merge=gpubench" in .gitattributes (docs/ci.md).'
)


def _add_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help=f"Baseline files or directories of them (default: {DEFAULT_DIR}/*.json)",
    )


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        default=DEFAULT_DIR,
        help=f"Baseline directory whose runs folder holds the stored runs (default: {DEFAULT_DIR})",
    )


def _add_levels(parser: argparse.ArgumentParser, defaults: bool) -> None:
    parser.add_argument(
        "--threshold",
        type=_percent,
        metavar="PCT",
        default=DEFAULT_THRESHOLD if defaults else None,
        help="Slowdown to gate, such as 5%%"
        + (" (default: 5%%)" if defaults else " (default: each test's own, as HEAD ran it)"),
    )
    parser.add_argument(
        "--alpha",
        type=_alpha,
        metavar="LEVEL",
        default=DEFAULT_ALPHA if defaults else None,
        help="Significance level over all tests, such as 0.01"
        + (" (default: 0.01)" if defaults else " (default: HEAD's run's)"),
    )


def parser() -> argparse.ArgumentParser:
    main_parser = _Parser(
        prog="gpubench",
        description="Compare, list and draw the measurements of pytest-gpubench",
    )
    main_parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="Show the version"
    )
    commands = main_parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compare_parser = commands.add_parser(
        "compare",
        help="Judge HEAD.json against BASE.json; exit 1 when a verdict fails",
        description=COMPARE_DESCRIPTION,
    )
    compare_parser.add_argument(
        "base",
        metavar="BASE.json",
        help="Result file of the base, or alone the file of an A/B run (--gpubench-against); "
        "or a stored run: last, last~N (N runs before the last) or the start of its id",
    )
    compare_parser.add_argument(
        "head", metavar="HEAD.json", nargs="?", help="Result file to judge, or a stored run"
    )
    _add_dir(compare_parser)
    _add_levels(compare_parser, defaults=False)
    compare_parser.add_argument(
        "--fail-on-improvement", action="store_true", help="Fail significant improvements too"
    )
    compare_parser.add_argument(
        "--allow-incomparable",
        action="store_true",
        help="Do not fail tests timed by another timer; implies --changed warn",
    )
    compare_parser.add_argument(
        "--changed",
        choices=CHANGED_ACTIONS,
        default="work",
        help="What a test that ran another binary than BASE's does: work (default) fails when "
        "its kernels differ and warns when only their configuration does, fail fails on both, "
        "warn on neither",
    )
    compare_parser.add_argument(
        "--markdown", action="store_true", help="Print GitHub-flavoured Markdown"
    )
    compare_parser.set_defaults(run=run_compare)

    runs_parser = commands.add_parser(
        "runs",
        help="List the stored runs, newest first, with the names compare takes",
        description=RUNS_DESCRIPTION,
    )
    _add_dir(runs_parser)
    runs_parser.set_defaults(run=run_runs)

    show_parser = commands.add_parser(
        "show", help="List the tests of baseline files", description=SHOW_DESCRIPTION
    )
    _add_paths(show_parser)
    _add_levels(show_parser, defaults=True)
    show_parser.set_defaults(run=run_show)

    plot_parser = commands.add_parser(
        "plot",
        help="Draw baseline files as images and a self-contained HTML page",
        description=PLOT_DESCRIPTION,
    )
    _add_paths(plot_parser)
    plot_parser.add_argument(
        "--out", type=Path, metavar="DIR", help="Directory to write the images to"
    )
    plot_parser.add_argument(
        "--format", choices=("png", "svg"), default="png", help="Image format (default: png)"
    )
    plot_parser.add_argument(
        "--html",
        type=Path,
        metavar="PAGE.html",
        help="Write one self-contained page: the table and the figures as inline SVG",
    )
    _add_levels(plot_parser, defaults=True)
    plot_parser.set_defaults(run=run_plot)

    bisect_parser = commands.add_parser(
        "bisect",
        help="Find the first commit between GOOD and BAD at which gpubench tests got slower",
        description=BISECT_DESCRIPTION,
        usage="%(prog)s [options] GOOD BAD [-- PYTEST ARGS...]",
    )
    bisect_parser.rest = "pytest_args"
    bisect_parser.add_argument("good", metavar="GOOD", help="A revision that was fast")
    bisect_parser.add_argument("bad", metavar="BAD", help="A later revision that is slower")
    bisect_parser.add_argument(
        "--pairs",
        type=_typed(parse_pairs),
        default=bisection.DEFAULT_PAIRS,
        metavar="N",
        help="Pairs per step before the first verdict, in lockstep from the step's own "
        f"process (default: {bisection.DEFAULT_PAIRS})",
    )
    bisect_parser.add_argument(
        "--max-pairs",
        type=_typed(parse_pairs),
        default=bisection.DEFAULT_MAX_PAIRS,
        metavar="N",
        help="An unsure step runs again with twice the pairs, up to this many (default: "
        f"{bisection.DEFAULT_MAX_PAIRS})",
    )
    bisect_parser.add_argument(
        "--threshold",
        type=_percent,
        metavar="PCT",
        help="Slowdown to find, such as 5%% (default: each test's own)",
    )
    bisect_parser.add_argument(
        "--build", metavar="CMD", help="A shell command run in each checkout before its step"
    )
    bisect_parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="S",
        help="Stop with an error when a step (its builds included) runs longer (default: none; "
        "a build alone stops after 3600 s)",
    )
    bisect_parser.add_argument(
        "--json", type=Path, metavar="FILE", help="Write the steps and the answer to this JSON file"
    )
    bisect_parser.set_defaults(run=run_bisect, pytest_args=[])

    merge_parser = commands.add_parser(
        "merge-baselines",
        help="Merge two saves of one baseline file into CURRENT (a git merge driver)",
        description=MERGE_DESCRIPTION,
    )
    merge_parser.add_argument("ancestor", metavar="ANCESTOR", help="The common ancestor's file")
    merge_parser.add_argument("current", metavar="CURRENT", help="One side's file, merged into")
    merge_parser.add_argument("other", metavar="OTHER", help="The other side's file")
    merge_parser.set_defaults(run=run_merge)
    return main_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``gpubench`` command; return its exit status."""
    # A character the terminal cannot encode (a key's lone surrogate from a file) is written
    # escaped, as Python's own tracebacks do, not a UnicodeEncodeError (issue 46).
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except GpubenchError as exc:
        print(f"gpubench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # gpubench show | head: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except KeyboardInterrupt:  # Ctrl-C: a line, not a traceback (the commands write nothing
        # but their own target files, atomically; bisect says what it ended itself)
        print("gpubench: interrupted", file=sys.stderr)
        return 130
