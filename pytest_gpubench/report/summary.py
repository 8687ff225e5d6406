"""Formatting results: the failure message, the summary table, notes, Markdown and JSON."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from ..core.device import Fingerprint
from ..core.jsondata import Json, printable
from ..core.kernels import base_name, describe, kernel_deltas, short
from ..core.records import (
    NCU_METRICS,
    Measurement,
    NcuEvidence,
    NcuKernel,
    Paired,
    Result,
    Status,
    is_ratio,
)
from ..core.samples import bytes_text, energy_text, plural, time_text
from ..core.settings import MeasureSettings

COLUMNS = (
    "test",
    "timer",
    "median",
    "noise",
    "spread",
    "baseline",
    "sessions",
    "change",
    "gate",
    "verdict",
    "GB/s",
    "% peak",
)
# Against a revision (--gpubench-against): both sides' times, the change with its interval
# and the pairs judged, in place of the history's spread, baseline, sessions and gate.
PAIRED_COLUMNS = (
    "test",
    "timer",
    "base median",
    "head median",
    "change",
    "pairs",
    "verdict",
    "GB/s",
    "% peak",
)
LEFT_ALIGNED = 2  # the first columns are text
# GitHub refuses a job summary over 1 MiB; stay well under it.
STEP_SUMMARY_BYTES = 900_000
# A failure's per-kernel table: for these verdicts, at most this many kernels.
KERNEL_TABLE_STATUSES = frozenset({Status.REGRESSED, Status.IMPROVED, Status.CHANGED})
KERNEL_ROWS = 8
# Kernels of a call shown with Nsight Compute's metrics (the report has them all).
NCU_ROWS = 3
# A graph replay whose kernels fill less than this share of it is mostly launch gaps.
GAPS_NOTED = 0.2


def format_time(ms: float | None) -> str:
    """A time in a table or a note (:func:`time_text`), ``-`` where there is none."""
    return "-" if ms is None else time_text(ms)


def format_value(value: float | None, timer: str) -> str:
    """A measurement's number: a time, or a ratio to a reference (``0.832x``)."""
    if value is not None and is_ratio(timer):
        return f"{value:.0f}x" if value >= 100 else f"{value:#.3g}x"  # 1.00x, 0.832x
    return format_time(value)


def format_median(m: Measurement) -> str:
    """The median column: a time; a ratio to a reference with the two medians of its first
    session it compares, ``0.832x (4.10 µs vs 4.93 µs)``."""
    text = format_value(m.median_ms, m.timer)
    if m.versus is None:
        return text
    return f"{text} ({format_time(m.versus.fn_ms)} vs {format_time(m.versus.reference_ms)})"


def distinct_rates(high: float, low: float) -> tuple[str, str]:
    """Two rates (GB/s) with the fewest decimals, none for most, that print them apart: one
    said to be above the other must not read the same (5.4 is above 5.1, not 5 above 5)."""
    for decimals in range(16):
        texts = f"{high:.{decimals}f}", f"{low:.{decimals}f}"
        if texts[0] != texts[1]:
            return texts
    return repr(high), repr(low)


def format_change(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def format_share(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value * 100:.1f}%"


def _binary_change(result: Result) -> str:
    """What another binary judged against a history is ('': none, or not so judged)."""
    v, ran = result.verdict, result.measurement.binary
    judged = v.judgement is not None and v.judgement.against == "history"
    # (a record of before 2026-12-03 names no baseline binary: its changes were its own)
    if not (v.kernel_changes and judged and ran and v.baseline_binary not in ("", ran)):
        return ""
    return "another pick" if v.same_kernels else "other kernels"


def _kernel_changes(result: Result) -> str:
    """What changed in the kernels: ``kernels: ...``, or ``another pick of the same work: ...``."""
    same_work = _binary_change(result) == "another pick"
    what = "another pick of the same work" if same_work else "kernels"
    return f"{what}: " + "; ".join(result.verdict.kernel_changes)


def verdict_label(result: Result) -> str:
    label = result.status.value
    if change := _binary_change(result):  # judged on time all the same (issue 45)
        label += f" ({change})"
    if result.verdict.by_kernel_time:  # the row's change is the time per call's
        label += " (kernel time)"
    if result.verdict.noisy:  # its spread between sessions, not its noise column
        label += f" (gate > {result.measurement.threshold * 100:g}%)"
    if result.measurement.context.throttled:
        label += " (throttled)"
    return label


def failure_message(result: Result) -> str:
    """E.g. ``gelu regressed: 512 µs -> 561 µs (+9.6%; gate 5.0%, 3 sessions against the
    history of 5, threshold 5%)``; against a revision the change with its interval, as the
    table prints it; then what changed in the kernels, and how to accept it. The words are
    the table's: the threshold, the gate (its column), the interval (issue 45)."""
    m, v = result.measurement, result.verdict
    j = v.judgement
    head = f"{m.test} {v.status.value}"
    threshold = f"threshold {m.threshold * 100:g}%"
    moved = f"{format_value(v.reference_ms, m.timer)} -> {format_median(m)}"
    if v.status in (Status.INCOMPARABLE, Status.CHANGED, Status.MORE_MEMORY) or j is None:
        text = f"{head}: {v.reason}"
    elif v.by_kernel_time and v.beside is not None:
        k = v.beside
        change = (
            f"{format_interval(k.ratio, k.ratio_low, k.ratio_high)} ("
            if j.against == "revision"
            else f"{format_change(k.ratio)} ({_gate(k.gateable, m.threshold)}"
        )
        text = (
            f"{head}: kernel time {change}{_sessions(result)}, {threshold}); time per call "
            f"{moved} ({format_change(j.ratio)}, {j.status.value})"
        )
    elif j.against == "revision":
        text = f"{head}: {moved} ({paired_change(result)}, {_sessions(result)}, {threshold})"
    else:
        text = (
            f"{head}: {moved} ({format_change(j.ratio)}; {_gate(j.gateable, m.threshold)}"
            f"{_sessions(result)}, {threshold})"
        )
        if v.status is Status.IMPROVED:
            text += "; refresh the baseline with --gpubench-save --gpubench-accept"
    lines = [text]  # the others indented under it
    if v.kernel_changes and v.status not in (Status.INCOMPARABLE, Status.CHANGED):
        lines.append(_kernel_changes(result))
    lines += kernel_table(result)
    e = m.evidence
    if e.trace:
        lines.append(f"evidence: a profiler trace of one call, {e.trace}")
    if e.reference_trace:
        whose = "the revision's" if v.paired is not None else "the reference's"
        lines.append(f"evidence: {whose}, {e.reference_trace}")
    lines += ncu_table(result, e.reference_ncu, True) + ncu_table(result, e.ncu, False)
    if m.timer != "cuda-graph":
        lines.append(f"timed by {m.timer}" + (f": {m.note}" if m.note else ""))
    return "\n  ".join(lines)


def _gate(gateable: float | None, threshold: float) -> str:
    """``gate 5.0%, `` as the table's gate column reads (nothing where it has none)."""
    return "" if gateable is None else f"gate {format_share(max(gateable, threshold))}, "


def kernel_table(result: Result) -> list[str]:
    """Per kernel, the reference's call against this one, the largest change first (at most
    KERNEL_ROWS): for a regressed, improved or changed verdict where both sides' launches
    are known; empty otherwise."""
    m, v = result.measurement, result.verdict
    if v.status not in KERNEL_TABLE_STATUSES or v.reference_ms is None or is_ratio(m.timer):
        return []  # a ratio's numbers are no times to share out
    deltas = kernel_deltas(v.reference_kernels, v.reference_ms, m.kernels, m.median_ms)
    if not deltas:
        return []
    rows = [["kernel", "launches", "before", "after", "change", "configuration"]]
    for d in deltas[:KERNEL_ROWS]:
        configs = d.config[0] if d.config[0] == d.config[1] else " -> ".join(d.config)
        counts = str(d.count[0]) if d.count[0] == d.count[1] else f"{d.count[0]} -> {d.count[1]}"
        change = ("+" if d.change_ms >= 0 else "-") + time_text(abs(d.change_ms))
        rows.append([short(d.name, 40), counts, *map(format_time, d.ms), change, configs])
    lines = [
        "per kernel (time per call: its share of the device time times the call's time):",
        *aligned(rows, left=1, last_left=True),
    ]
    if len(deltas) > KERNEL_ROWS:
        lines.append(f"{len(deltas) - KERNEL_ROWS} more kernels in the JSON report's kernels")
    return lines


def ncu_table(result: Result, evidence: NcuEvidence | None, reference: bool) -> list[str]:
    """Nsight Compute's metrics of one call (``reference``: the revision's), its kernels that
    changed most first (as the kernel table orders them), then the longest, at most NCU_ROWS;
    empty without them."""
    if evidence is None:
        return []
    m, v = result.measurement, result.verdict
    deltas = kernel_deltas(v.reference_kernels, v.reference_ms or 0.0, m.kernels, m.median_ms)
    changed = [base_name(d.name) for d in deltas]  # ncu spells a kernel's name its own way
    time_name = NCU_METRICS[0][0]

    def rank(k: NcuKernel) -> tuple[int, float]:
        name = base_name(k.name)
        first = changed.index(name) if name in changed else len(changed)
        return first, -(k.metric(time_name) or 0.0)

    kernels = sorted(evidence.kernels, key=rank)
    rows = [["kernel", *(title for _, title in NCU_METRICS), "grid x block"]]
    for k in kernels[:NCU_ROWS]:
        cells = []
        for name, _ in NCU_METRICS:
            value = k.metric(name)
            unit = next((u for n, _, u in k.metrics if n == name), "")
            cells.append("-" if value is None else _ncu_value(value, unit))
        rows.append([short(k.name, 40), *cells, f"{k.grid} x {k.block}"])
    whose = (
        ("the revision's" if v.paired is not None else "the reference's")
        if reference
        else ("the working tree's" if v.paired is not None else "this")
    )
    more = len(kernels) - NCU_ROWS
    return [
        f"evidence: Nsight Compute, one call of {whose}, {evidence.report}:",
        *aligned(rows, left=1, last_left=True),
        *([f"{more} more kernels in the report"] if more > 0 else []),
    ]


def _ncu_value(value: float, unit: str) -> str:
    """A metric as ncu gave it: a share in %, a time (ns, us, ms) as our times read."""
    scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "nsecond": 1e-6, "ms": 1.0, "msecond": 1.0}
    if unit in scale:
        return format_time(value * scale[unit])
    if unit == "%":
        return f"{value:.1f}%"
    return f"{value:g} {unit}".strip()


def _sessions(result: Result) -> str:
    j = result.verdict.judgement
    if j is not None and j.against == "revision":
        paired = result.verdict.paired
        how = "in lockstep" if paired is not None and paired.lockstep else "of fresh processes"
        return f"{plural(j.current_sessions, 'pair')} {how}"
    ran = plural(len(result.measurement.sessions), "session")
    if j is None:
        return ran
    reference = f"{j.against} of {j.history_sessions if j.against == 'history' else 'its epoch'}"
    return f"{ran} against the {reference}"


def sort_results(results: Sequence[Result]) -> list[Result]:
    return sorted(results, key=lambda r: (r.status.rank, r.measurement.group or "", r.key))


def row(result: Result) -> list[str]:
    m, v = result.measurement, result.verdict
    j = v.judgement
    return [
        m.test,
        m.timer,
        format_median(m),
        format_share(m.summary.noise),
        format_share(j.tau if j else None),
        format_value(v.reference_ms, m.timer),
        str(v.history_sessions) if v.history_sessions else "-",
        format_change(j.ratio) if j else _previous_change(result),
        format_share(max(j.gateable, m.threshold) if j and j.gateable else None),
        verdict_label(result),
        "-" if m.gbs is None else f"{m.gbs:.1f}",
        peak_cell(result),
    ]


def peak_cell(result: Result) -> str:
    """The % peak column: the share of the measured copy bandwidth, ``L2`` above it (data
    that stays in the cache), ``-`` where unknown or impossible."""
    m, share = result.measurement, result.measurement.peak_share
    if result.status is Status.IMPOSSIBLE or (share is None and not m.above_peak):
        return "-"
    return "L2" if m.above_peak else f"{(share or 0) * 100:.0f}%"


def paired_row(result: Result) -> list[str]:
    """A row of a run against a revision (PAIRED_COLUMNS)."""
    m, v = result.measurement, result.verdict
    p = v.paired
    return [
        m.test,
        m.timer,
        format_value(p.base_median_ms if p else v.reference_ms, m.timer),
        format_value(p.head_median_ms if p else m.median_ms, m.timer),
        paired_change(result),
        str(p.pairs) if p and p.pairs else "-",
        verdict_label(result),
        "-" if m.gbs is None else f"{m.gbs:.1f}",
        peak_cell(result),
    ]


def same_bounds(result: Result) -> tuple[float, float] | None:
    """The bounds a ``same`` against a revision rests on (its 90% interval, within the
    threshold both ways); None for any other verdict, or a file written before they were
    kept."""
    j = result.verdict.judgement
    if result.status is not Status.SAME or j is None or j.same_low is None or j.same_high is None:
        return None
    return j.same_low, j.same_high


def paired_change(result: Result) -> str:
    """The change column against a revision: a same with the bounds it rests on, any other
    verdict with its interval at the corrected level (which is tens of percent wide at 3
    pairs of a large suite, and says nothing of why a test is the same)."""
    j = result.verdict.judgement
    if j is None:
        return "-"
    low, high = same_bounds(result) or (j.ratio_low, j.ratio_high)
    return format_interval(j.ratio, low, high)


def format_interval(ratio: float | None, low: float | None, high: float | None) -> str:
    """A change with its interval: ``+8.0% [+5.7%, +10.3%]``; the change alone where the
    interval is unknown or unbounded."""
    text = format_change(ratio)
    if ratio is None or low is None or high is None or not math.isfinite(low * high):
        return text
    return f"{text} [{format_change(low)}, {format_change(high)}]"


def paired_run(results: Iterable[Result]) -> Paired | None:
    """The revision the results were judged against (``--gpubench-against``), None for a
    run against its history: a paired run's results all carry it."""
    return next((r.verdict.paired for r in results if r.verdict.paired is not None), None)


def legend(results: Iterable[Result]) -> str | None:
    """The line under the table of a run against a revision (None: a history's run): which
    side is which, what the change and its interval are, and a same's bounds where a row
    shows them (:func:`same_bounds`)."""
    results = list(results)
    paired = paired_run(results)
    if paired is None:
        return None
    interval = "its interval, corrected for the tests and looks"
    if any(same_bounds(r) is not None for r in results):
        interval += "; for same: its 90% interval, within the threshold"
    return (
        f"base: {paired.revision} ({paired.commit[:8]}); head: the working tree; "
        f"change: head / base [{interval}]"
    )


def _previous_change(result: Result) -> str:
    """A changed binary's time against the previous binary, in parentheses: not judged."""
    ratio = result.verdict.previous_ratio
    return "-" if ratio is None else f"({format_change(ratio)})"


def layout(results: Sequence[Result]) -> tuple[list[str], Callable[[Result], list[str]]]:
    """The table's columns and a row's cells: against a revision its own (PAIRED_COLUMNS);
    a TFLOP/s column where any test declares the flops of a call, a peak memory column where
    any call's is known (a GPU's)."""
    columns, cells = (COLUMNS, row) if paired_run(results) is None else (PAIRED_COLUMNS, paired_row)
    extra: list[tuple[str, Callable[[Measurement], str]]] = []
    if any(r.measurement.tflops is not None for r in results):
        extra.append(("TFLOP/s", lambda m: "-" if m.tflops is None else f"{m.tflops:.3g}"))
    if any(r.measurement.peak_bytes is not None for r in results):
        extra.append(
            ("peak mem", lambda m: "-" if m.peak_bytes is None else bytes_text(m.peak_bytes))
        )
    if any(r.measurement.energy is not None for r in results):
        extra.append(("energy/call", _energy_cell))

    def with_extra(result: Result) -> list[str]:
        return [*cells(result), *(cell(result.measurement) for _, cell in extra)]

    return [*columns, *(name for name, _ in extra)], with_extra


def _energy_cell(m: Measurement) -> str:
    """Energy per call and the mean power over its window: ``1.23 mJ, 312 W``."""
    if m.energy is None:
        return "-"
    return f"{energy_text(m.energy.joules_per_call)}, {m.energy.watts:.0f} W"


def grouped(results: Sequence[Result]) -> list[tuple[str | None, list[Result]]]:
    """The results by their marker's ``group=``, each group regressions first; the group
    with the worst verdict first, then by name, tests of no group (None) after the named.
    One group, None, when no test names a group: the table is as without groups."""
    groups: dict[str | None, list[Result]] = {}
    for r in sort_results(results):
        groups.setdefault(r.measurement.group, []).append(r)
    return sorted(groups.items(), key=lambda g: (g[1][0].status.rank, g[0] is None, g[0] or ""))


def group_heading(group: str | None, members: Sequence[Result]) -> str:
    """The line above a group's rows, as pytest-benchmark heads its groups."""
    name = f"group {group!r}" if group is not None else "no group"
    return f"{name}: {plural(len(members), 'test')}"


def table_lines(results: Sequence[Result]) -> list[str]:
    """The table, its rows under a heading per ``group=`` when a test names one; against a
    revision, its columns (PAIRED_COLUMNS) and the line naming it."""
    columns, cells = layout(results)
    groups = grouped(results)
    ordered = [r for _, members in groups for r in members]
    # Escaped before they are measured: a key may hold what no encoding writes.
    lines = aligned([columns, *([printable(c) for c in cells(r)] for r in ordered)])
    if any(group is not None for group, _ in groups):  # a test names one: headed
        head, rows = lines[:2], lines[2:]
        lines = head
        for group, members in groups:
            lines += [group_heading(group, members), *rows[: len(members)]]
            rows = rows[len(members) :]
    line = legend(results)
    return lines if line is None else [*lines, line]


def aligned(
    rows: Sequence[Sequence[str]], left: int = LEFT_ALIGNED, last_left: bool = False
) -> list[str]:
    """Rows as columns under a rule: the first ``left`` columns (and the last, with
    ``last_left``) aligned left, the numbers right."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    last = len(widths) - 1 if last_left else len(widths)
    pads = [str.ljust if j < left or j == last else str.rjust for j in range(len(widths))]
    lines = [
        "  ".join(pad(cell, w) for pad, cell, w in zip(pads, row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def notes(results: Sequence[Result]) -> list[str]:
    """Lines under the table: what a reader must know to trust it."""
    lines = []
    for r in sort_results(results):
        m, v = r.measurement, r.verdict
        if m.context.throttled:
            lines.append(f"{m.test}: measured while throttled ({', '.join(m.context.throttled)})")
        if m.note:
            lines.append(f"{m.test}: timed by {m.timer}: {m.note}")
        gaps = m.launch_gap_share
        if gaps is not None and m.timer == "cupti-graph":
            lines.append(
                f"{m.test}: launch gaps are {gaps:.0%} of the graph time per call "
                f"({format_time(m.graph_ms)}): its kernel time is the number "
                f"({describe(m.kernels)})"
            )
        elif gaps is not None and gaps > GAPS_NOTED:
            lines.append(
                f"{m.test}: launch gaps are {gaps:.0%} of the graph time (kernels "
                f"{format_time(m.device_ms)} of {format_time(m.summary.median_ms)} per call: "
                f"{describe(m.kernels)})"
            )
        if m.above_peak and v.status is not Status.IMPOSSIBLE:
            gbs, peak = distinct_rates(m.gbs or 0, m.floors.peak_gbs or 0)
            lines.append(
                f"{m.test}: {gbs} GB/s is above the measured copy bandwidth ({peak} GB/s): "
                "its data stays in L2 between calls, so no % of peak"
            )
        if v.status not in (Status.OK, Status.NEW, Status.SAME) or v.noisy:
            lines.append(f"{m.test}: {v.status.value}: {v.reason}")
        elif v.kernel_changes:  # (a reason said above names them)
            lines.append(f"{m.test}: {_kernel_changes(r)}")
        # Against a revision (any verdict: an impossible one has no judgement of its pairs)
        paired = v.paired is not None or (
            v.judgement is not None and v.judgement.against == "revision"
        )
        if m.confirmations and not paired:  # a pair's sessions confirm nothing: they are it
            medians = ", ".join(format_value(c.median_ms, m.timer) for c in m.confirmations)
            lines.append(
                f"{m.test}: confirmed in {len(m.confirmations)} fresh process"
                f"{'es' if len(m.confirmations) != 1 else ''} (medians {medians})"
            )
    return lines


def counts(results: Sequence[Result]) -> str:
    found = {status: sum(r.status is status for r in results) for status in Status}
    return ", ".join(f"{n} {status.value}" for status, n in found.items() if n)


def written_line(written: Mapping[str, int], path: object) -> str:
    """What a save wrote, counted from what it wrote (``written``: sessions by measurement
    key): ``baseline written: 54 tests, 3 sessions each (path)``; mixed counts by count, most
    first: ``baseline written: 2 tests: 1 with 3 sessions, 1 with 2 (path)``."""
    noun = _noun(written)
    by_count = sorted(Counter(written.values()).items(), reverse=True)
    if len(by_count) == 1:
        [(sessions, n)] = by_count
        what = f"{plural(n, noun)}, {plural(sessions, 'session')}" + (" each" if n > 1 else "")
    else:
        (most, n), *rest = by_count
        parts = [f"{n} with {plural(most, 'session')}"] + [f"{k} with {s}" for s, k in rest]
        what = f"{plural(len(written), noun)}: " + ", ".join(parts)
    return f"baseline written: {what} ({path})"


def recorded(n: int, keys: Collection[str]) -> str:
    """What one recorded session appended: ``2 tests recorded``, or ``1 of 2 tests recorded``
    (why the others were not: the lines under the table)."""
    noun = _noun(keys)
    if n == len(keys):
        return f"{plural(n, noun)} recorded"
    return f"{n} of {plural(len(keys), noun)} recorded"


def skipped_line(reasons: Mapping[str, str], width: int = 60) -> str | None:
    """One line for the gpubench tests that skipped, so were not timed (``reasons``: why
    each skipped, by node id), counted per reason, most first; None when none skipped:
    ``gpubench: 3 tests not timed (skipped): needs a GPU (2); no triton (1)``."""
    if not reasons:
        return None
    shorten = lambda r: r if len(r) <= width else r[: width - 3] + "..."  # noqa: E731
    found = Counter(shorten(" ".join(r.split())) for r in reasons.values())
    parts = [f"{reason} ({n})" for reason, n in found.most_common()]
    return f"gpubench: {plural(len(reasons), 'test')} not timed (skipped): " + "; ".join(parts)


def _noun(keys: Iterable[str]) -> str:
    """The name of what a save counts: tests, or measurements when a test records several
    named ones (keys ``node id#name``)."""
    return "measurement" if any("#" in key for key in keys) else "test"


def footer(
    results: Sequence[Result],
    measure: MeasureSettings,
    family: int,
    counted: str = "known at collection",
) -> str:
    """Counts per verdict and the levels they were judged at (the family travels with each
    result: an xdist controller collects no tests). The family is what alpha is divided
    over; where it is not the number of results, ``counted`` says what it counts (a run's:
    each collected test's measurements known to the baseline, at least one, whether or not
    the test then measured them: 10 results of 18 collected tests are not "over 18
    measurements")."""
    levels = f"threshold {measure.threshold * 100:g}%, alpha {measure.alpha:g}"
    if not results:  # nothing judged: no family to tell (a run's is at least 1)
        return f"gpubench: no measurements ({levels})"
    family = max([family, *(r.verdict.family for r in results)])
    levels += f" over {plural(family, 'measurement')}"
    if family != len(results):
        levels += f" {counted}"
    return f"gpubench: {counts(results)} ({levels})"


def markdown(
    results: Sequence[Result],
    device: Fingerprint,
    limit: int | None = None,
    footer: str | None = None,
) -> str:
    """The summary as GitHub-flavoured Markdown; regressions first, cut to ``limit`` bytes
    with a note when given (GitHub's job summary takes at most 1 MiB). ``footer``: the line
    under the table (default: the verdict counts)."""
    header = f"### gpubench: {device.get('name', 'unknown device')}\n\n"
    groups = grouped(results)
    ordered = [r for _, members in groups for r in members]
    line = legend(results)
    columns, cells = layout(results)
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    titled = any(group is not None for group, _ in groups)
    rows = []
    for group, members in groups:
        if titled:  # a row heading the group's rows, as in the terminal
            heading = group_heading(group, members).replace("|", "\\|")
            rows.append(f"| **{heading}** |" + " |" * (len(columns) - 1))
        rows += ["| " + " | ".join(c.replace("|", "\\|") for c in cells(r)) + " |" for r in members]
    extra = [f"- {line}" for line in notes(ordered)]
    for r in ordered:  # a failure's per-kernel table, folded
        kernel_lines = kernel_table(r)
        if kernel_lines:
            extra.append(
                f"<details><summary>{r.test}: {kernel_lines[0]}</summary>\n\n```\n"
                + "\n".join(kernel_lines[1:])
                + "\n```\n</details>"
            )
    footer_text = "\n" + (footer if footer is not None else counts(results)) + "\n"
    if line is not None:
        footer_text = f"\n{line}\n" + footer_text
    # A key may hold what no encoding writes (a lone surrogate in a test id): escaped.
    header, footer_text = printable(header), printable(footer_text)
    rows, extra = [printable(row) for row in rows], [printable(text) for text in extra]
    body = header + "\n".join(table + rows) + "\n" + footer_text
    if extra:
        body += "\n" + "\n".join(extra) + "\n"
    if limit is None or len(body.encode()) <= limit:
        return body
    # Keep the head of the table (regressions first) and say what was cut.
    kept, size = [], len((header + "\n".join(table) + footer_text).encode()) + 200
    for line in rows:
        size += len(line.encode()) + 1
        if size > limit:
            break
        kept.append(line)
    cut = len(rows) - len(kept)
    return (
        header
        + "\n".join(table + kept)
        + f"\n\n_{cut} more rows and the notes were cut to stay under GitHub's summary limit; "
        "the JSON report has them all._\n" + footer_text
    )


def json_document(
    results: Sequence[Result],
    device: Fingerprint,
    settings: Mapping[str, Json],
    session: Mapping[str, Json] | None = None,
    passed: Mapping[str, bool] | None = None,
    changes: Mapping[str, Json] | None = None,
) -> dict[str, Json]:
    """The JSON report: each result as ``Result.to_dict`` (``passed`` by key: whether its
    test passed), with its statistics, time, bandwidth and share of peak, and ``changes``:
    the change points of its history with this run (report/changes.py; null without a
    history)."""
    entries = []
    for r in sort_results(results):
        m = r.measurement
        data = r.to_dict((passed or {}).get(r.key, True))
        data["changes"] = (changes or {}).get(r.key)
        s = m.summary
        data["summary"] = {
            "median_ms": s.median_ms,
            "mean_ms": s.mean_ms,
            "min_ms": s.min_ms,
            "q1_ms": s.q1_ms,
            "q3_ms": s.q3_ms,
            "noise": s.noise,
            "samples": s.n,
        }
        data["median_ms"] = m.median_ms
        data["binary"] = m.binary  # the binary that ran (its verdict's: baseline_binary)
        data["gbs"], data["tflops"], data["peak_share"] = m.gbs, m.tflops, m.peak_share
        data["tflops_share"] = m.tflops_share
        data["against"] = against_json(r)
        entries.append(data)
    document: dict[str, Json] = {
        "device": dict(device),
        "settings": dict(settings),
        "results": entries,
    }
    if session is not None:
        document["session"] = dict(session)
    paired = paired_run(results)
    if paired is not None:  # what names the file an A/B run's (gpubench compare AB.json)
        document["against"] = {"revision": paired.revision, "commit": paired.commit}
    return document


def against_json(result: Result, sessions: bool = True) -> dict[str, Json] | None:
    """Both sides of a result judged against a revision: its record (with the sessions of
    each side when ``sessions``), both medians, the ratio head / base with its interval, a
    same's bounds (:func:`same_bounds`; null for other verdicts), the verdict; None for a
    result judged against its history."""
    v = result.verdict
    if v.paired is None:
        return None
    j = v.judgement
    same_low, same_high = same_bounds(result) or (None, None)
    data = v.paired.to_json()
    if not sessions:
        del data["base_sessions"], data["head_sessions"]
    data.update(
        base_median_ms=v.paired.base_median_ms,
        head_median_ms=v.paired.head_median_ms,
        ratio=None if j is None else j.ratio,
        ratio_low=None if j is None else j.ratio_low,
        ratio_high=None if j is None else j.ratio_high,
        same_low=same_low,
        same_high=same_high,
        verdict=v.status.value,
    )
    return data


def json_text(document: Json) -> str:
    """Standard JSON: non-finite numbers (an unbounded interval) become null."""

    def finite(value: Json) -> Json:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {key: finite(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [finite(item) for item in value]
        return value

    return json.dumps(finite(document), indent=2, sort_keys=True, allow_nan=False) + "\n"
