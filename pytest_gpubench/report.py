"""Formatting results: the failure message, the summary table, Markdown and JSON documents."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from .results import Result
from .settings import Settings
from .stats import IMPROVED, REGRESSED, VERDICT_ORDER

COLUMNS = (
    "test",
    "timer",
    "median",
    "noise",
    "baseline",
    "change",
    "p",
    "verdict",
    "GB/s",
    "% peak",
)


def format_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 0.1:
        return f"{ms * 1e3:.3g} µs"
    return f"{ms:.3f} ms"


def format_p(p: float | None) -> str:
    return "-" if p is None else f"{p:.1g}" if p < 0.001 else f"{p:.3f}"


def format_change(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def failure_message(result: Result) -> str:
    """E.g. ``gelu_triton regressed: 0.512 ms -> 0.561 ms (+9.6%, p=2e-06, threshold 5%)``."""
    v = result.verdict
    text = (
        f"{result.test} {v.status}: {format_time(result.baseline_median_ms)} -> "
        f"{format_time(result.summary.median_ms)} ({format_change(v.ratio)}, "
        f"p={format_p(v.p_value)}, threshold {result.threshold * 100:g}%)"
    )
    if v.status == IMPROVED:
        text += "; refresh the baseline with --gpubench-save"
    return text


def is_failure(result: Result, fail_on_improvement: bool) -> bool:
    status = result.verdict.status
    return status == REGRESSED or (status == IMPROVED and fail_on_improvement)


def sort_results(results: Sequence[Result]) -> list[Result]:
    return sorted(
        results, key=lambda r: (VERDICT_ORDER.index(r.verdict.status), r.group or "", r.key)
    )


def row(result: Result) -> list[str]:
    s, v = result.summary, result.verdict
    verdict = v.status + (" (throttled)" if result.throttled else "")
    share = result.peak_share
    return [
        result.test,
        result.timer,
        format_time(s.median_ms),
        f"{s.noise * 100:.1f}%" if math.isfinite(s.noise) else "-",
        format_time(result.baseline_median_ms),
        format_change(v.ratio),
        format_p(v.p_value),
        verdict,
        "-" if result.gbs is None else f"{result.gbs:.1f}",
        "-" if share is None else f"{share * 100:.0f}%",
    ]


def table_lines(results: Sequence[Result]) -> list[str]:
    rows = [list(COLUMNS)] + [row(r) for r in sort_results(results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = []
    for i, cells in enumerate(rows):
        lines.append(
            "  ".join(
                c.ljust(w) if j < 2 else c.rjust(w)
                for j, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def notes(results: Sequence[Result]) -> list[str]:
    """Lines under the table: what a reader must know to trust it."""
    lines = []
    for r in sort_results(results):
        if r.throttled:
            lines.append(f"{r.test}: measured while throttled ({', '.join(r.throttled)})")
        if r.note:
            lines.append(f"{r.test}: {r.note}")
        if r.verdict.reason and r.verdict.reason != "no baseline":
            lines.append(f"{r.test}: {r.verdict.status}: {r.verdict.reason}")
    return lines


def counts(results: Sequence[Result]) -> str:
    found = {status: sum(r.verdict.status == status for r in results) for status in VERDICT_ORDER}
    return ", ".join(f"{n} {status}" for status, n in found.items() if n)


def footer(results: Sequence[Result], settings: Settings) -> str:
    """Counts per verdict and the levels they were judged at."""
    # The corrected level travels with each verdict (xdist's controller collects nothing).
    alphas = [r.verdict.alpha for r in results if r.verdict.alpha]
    levels = f"threshold {settings.threshold * 100:g}%"
    if alphas:
        levels += f", alpha {settings.alpha:g} corrected to {min(alphas):.2g}"
    return f"gpubench: {counts(results) or 'no measurements'} ({levels})"


def markdown(results: Sequence[Result], device: dict[str, Any]) -> str:
    header = f"### gpubench: {device.get('name', 'unknown device')}\n\n"
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [
        "| " + " | ".join(c.replace("|", "\\|") for c in row(r)) + " |"
        for r in sort_results(results)
    ]
    extra = notes(results)
    body = header + "\n".join(lines) + "\n\n" + counts(results) + "\n"
    if extra:
        body += "\n" + "\n".join(f"- {line}" for line in extra) + "\n"
    return body


def json_document(
    results: Sequence[Result], device: dict[str, Any], settings: dict[str, Any]
) -> dict[str, Any]:
    entries = []
    for r in sort_results(results):
        data = r.to_dict()
        s = r.summary
        data["summary"] = {
            "median_ms": s.median_ms,
            "mean_ms": s.mean_ms,
            "min_ms": s.min_ms,
            "q1_ms": s.q1_ms,
            "q3_ms": s.q3_ms,
            "noise": s.noise,
            "samples": s.n,
        }
        data["gbs"], data["tflops"], data["peak_share"] = r.gbs, r.tflops, r.peak_share
        entries.append(data)
    return {"device": device, "settings": settings, "results": entries}


def json_text(document: Any) -> str:
    """Standard JSON: non-finite numbers (an unbounded interval) become null."""

    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {key: finite(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [finite(item) for item in value]
        return value

    return json.dumps(finite(document), indent=2, sort_keys=True, allow_nan=False) + "\n"
