"""The report files a run writes: the JSON report, the Markdown summary, pytest-benchmark's
JSON, and the GitHub job summary. Each write is atomic; one that cannot be written is a line
under the table, not a traceback that would cost the table and the other files."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.device import Fingerprint
from ..core.errors import GpubenchError
from ..core.jsondata import Json
from ..core.records import Result
from ..core.settings import BENCHMARK_REPORT, JSON_REPORT, MARKDOWN_REPORT
from ..store import files as storage
from . import benchjson, summary


@dataclass(frozen=True)
class RunInfo:
    """What the reports say of the run besides its results."""

    device: Fingerprint
    settings: Mapping[str, Json]  # the session's settings, as plain values
    session: Mapping[str, Json]  # this process's session: its id and what it ran on
    commit: str | None
    project: str  # the name of the project's root directory
    # Per result key, the change points of its history with this run (report/changes.py).
    changes: Mapping[str, Json] = field(default_factory=dict)
    # pytest-benchmark's machine_info.node: the host's name only where asked, else a digest.
    node: str = ""


def json_report(outcomes: Sequence[tuple[Result, bool]], info: RunInfo) -> str:
    """The JSON report (``--gpubench-json``), also the file of a stored run."""
    results = [result for result, _ in outcomes]
    passed = {result.key: ok for result, ok in outcomes}
    return summary.json_text(
        summary.json_document(
            results, info.device, info.settings, info.session, passed, info.changes
        )
    )


def write_reports(
    outcomes: Sequence[tuple[Result, bool]],
    info: RunInfo,
    targets: Sequence[tuple[Path, str]],
    step_summary: Path | None = None,
) -> list[str]:
    """Write each report of ``targets`` (path, which report) and append the Markdown summary
    to ``step_summary`` (GitHub's job summary) when given; return one line per file that
    could not be written. ``outcomes``: each result with whether its test passed."""
    results = [result for result, _ in outcomes]
    writers: dict[str, Callable[[], str]] = {
        JSON_REPORT: lambda: json_report(outcomes, info),
        MARKDOWN_REPORT: lambda: summary.markdown(results, info.device),
        BENCHMARK_REPORT: lambda: summary.json_text(
            benchjson.document(results, info.device, info.commit, info.project, info.node)
        ),
    }
    errors = []
    for path, what in targets:
        try:
            storage.write_atomic(path, writers[what](), what)
        except GpubenchError as exc:
            errors.append(str(exc))
    if step_summary is not None and results:
        text = summary.markdown(results, info.device, limit=summary.STEP_SUMMARY_BYTES)
        try:
            storage.append_text(step_summary, text, "GitHub step summary")
        except GpubenchError as exc:
            errors.append(str(exc))
    return errors
