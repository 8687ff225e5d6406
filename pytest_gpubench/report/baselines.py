"""The view of baseline files that ``gpubench show`` prints and ``gpubench plot`` draws: each
test's history, the spread the rule uses, the smallest slowdown a next session would be
failed for, and the binaries it keeps a history of. The table is of each test's latest
binary."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..core.baseline import BaselineEntry
from ..core.jsondata import printable
from ..core.kernels import describe, describe_configs, launch_count
from ..core.records import Judgement, SessionSummary
from ..core.samples import plural
from ..judge.machines import OWN_SESSIONS, short
from ..judge.rule import Case, judge_many
from ..store.baseline import UNKNOWN_DATE, Baseline
from . import changes as history_changes
from .summary import aligned, format_share, format_value


@dataclass(frozen=True)
class EntryView:
    """One baseline entry, with what the rule makes of a next session at its reference."""

    key: str
    entry: BaselineEntry
    judgement: Judgement  # of one new session at the reference median
    threshold: float

    @property
    def gate(self) -> float:
        """The smallest slowdown a next single session is failed for (with target power)."""
        gateable = self.judgement.gateable
        return self.threshold if gateable is None else max(gateable, self.threshold)

    @property
    def band(self) -> tuple[float, float]:
        """The bar of a change around the reference (ms), over and times 1 + bar: a next
        session beyond it, its first batch of confirmations at the same change, fails."""
        bar = self.judgement.bar or 0.0
        reference = self.entry.median_ms
        return reference / (1 + bar), reference * (1 + bar)

    @property
    def flags(self) -> str:
        words = []
        if self.judgement.noisy:  # as the run's table says it
            words.append(f"gate > {self.threshold * 100:g}%")
        if not self.judgement.gated:  # the history cannot gate it yet (rule.py)
            words.append("not gated")
        return ", ".join(words)


def survey(baseline: Baseline, threshold: float, alpha: float) -> list[EntryView]:
    """Each entry of ``baseline`` (sorted by key), judged as if a next single session
    measured exactly its reference median: the rule's spread, gate and gateable slowdown for
    that session, in a family of all of them, as a run of them all would judge them. All
    entries are judged in one pass (``judge_many``): one at a time, 10^5 tests took hours."""
    keys = sorted(baseline.entries)
    entries = [baseline.entries[key] for key in keys]
    cases = [
        Case(
            entry.history,
            [SessionSummary(entry.median_ms, entry.history[-1].n, entry.history[-1].se_log_or_nan)],
            entry.timer,
            launch_count(entry.kernels),
            entry.versus,
        )
        for entry in entries
    ]
    judgements = judge_many(
        cases,
        threshold=threshold,
        alpha=alpha,
        family=max(1, len(entries)),
        ask_to_gate=False,  # not shown
    )
    return [
        EntryView(key, entry, judgement, threshold)
        for key, entry, judgement in zip(keys, entries, judgements, strict=True)
    ]


SHOW_COLUMNS = ("test", "timer", "sessions", "anchor", "median", "spread", "gate", "flags")


def show_rows(views: Sequence[EntryView]) -> list[list[str]]:
    """The table of ``show`` (and of the HTML page): a header row, then one row per entry."""
    rows = [list(SHOW_COLUMNS)]
    for view in views:
        entry = view.entry
        rows.append(
            [
                printable(view.key),  # escaped where it holds what no terminal writes
                printable(entry.timer),
                str(len(entry.history)),
                str(len(entry.anchor)),
                format_value(entry.median_ms, entry.timer),
                format_share(view.judgement.tau),
                format_share(view.gate if view.judgement.gated else None),
                view.flags,
            ]
        )
    return rows


def file_header(baseline: Baseline, drawn: Collection[str] | None = None) -> str:
    """``NVIDIA H100 80GB HBM3: 12 sessions on GPU-618df060, 2026-01-02 to 2026-03-04, 8
    tests`` (``on 3 GPUs`` where its sessions name several, nothing where none); with
    ``drawn`` (the sessions a plot's panels show, each test's latest binary), those only:
    ``12 sessions drawn``."""
    name = printable(str(baseline.device.get("name") or "unknown device"))
    sessions = [i for k, i in baseline.sessions.items() if drawn is None or k in drawn]
    dates = sorted(info.date[:10] for info in sessions if info.date != UNKNOWN_DATE)
    span = f", {dates[0]} to {dates[-1]}" if dates else ""
    count = plural(len(sessions), "session") + ("" if drawn is None else " drawn")
    # Its GPUs: the gate holds on them; another GPU of the model is judged with an allowance.
    gpus = sorted({info.machine for info in sessions if info.machine})
    if gpus:  # (a host's digest, for the wall timer's files)
        many = "GPUs" if all(g.startswith("GPU-") for g in gpus) else "machines"
        count += f" on {short(gpus[0])}" if len(gpus) == 1 else f" on {len(gpus)} {many}"
    return f"{name}: {count}{span}, {plural(len(baseline.entries), 'test')}"


def show_lines(title: str, baseline: Baseline, threshold: float, alpha: float) -> list[str]:
    """The lines ``show`` prints of one file (``title``: ``path: file_header``): the table of
    its entries in key order, their binaries, and the flagged histories."""
    views = survey(baseline, threshold, alpha)
    lines = [f"== {title}", *aligned(show_rows(views), last_left=True)]
    binaries = [line for view in views for line in binary_lines(view)]
    if binaries:
        lines.append("binaries (what one call launches), the latest saved first:")
        lines += binaries
    return lines + history_changes.headed(history_changes.flagged_of(baseline, threshold))


def binary_lines(view: EntryView) -> list[str]:
    """The binaries of one test whose launches were recorded: the short hash of each, its
    sessions and reference time, and what it launches (the configurations of its main
    launches where the test has several binaries)."""
    entry = view.entry
    if not entry.kernels and not any(b.kernels for b in entry.others):
        return []
    binaries = entry.binaries
    launches = describe_configs if len(binaries) > 1 else describe
    lines = []
    key = printable(view.key)
    for i, binary in enumerate(binaries):
        median = format_value(binary.median_ms, entry.timer)
        lines.append(
            f"  {key if i == 0 else ' ' * len(key)}  {binary.fingerprint or '-'}, "
            f"{plural(len(binary.history), 'session')}, {median}: "
            f"{launches(binary.kernels) if binary.kernels else 'launches not recorded'}"
        )
    return lines


SHOW_NOTE = (
    "gate: the smallest slowdown this history catches once confirmed, at least the threshold "
    "(spread: the between-session spread the rule uses); gate > threshold: it cannot gate "
    f"the threshold; on a GPU with fewer than {OWN_SESSIONS} of a history's sessions, others "
    "on other GPUs, wider: it allows for what another GPU of the model may move (not for the "
    "wall timer nor a ratio to a reference; docs/verdict.md, Another GPU)"
)
