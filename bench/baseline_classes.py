"""What the committed baselines gate, per class of time per call (issue 16, part 10).

For each committed baseline file, the tests per class of time per call, how many gate the
default 5% threshold, how many are noisy (they gate more) and how many are not gated, and
the largest gate from 20 µs: ``gpubench show``'s judgement of a next session at each test's
reference (report.baselines.survey). A ratio to a reference function is not a time: its rows
(``ratio,`` before the class) class it by its function's time per call. docs/performance.md
holds this table; tests/test_docs.py checks it against this script's output.

    python bench/baseline_classes.py
"""

from __future__ import annotations

import math
from pathlib import Path

from pytest_gpubench import cli
from pytest_gpubench.core.records import RATIO_KEY, is_ratio
from pytest_gpubench.report.baselines import survey

ROOT = Path(__file__).resolve().parents[1]
FILES = (
    "example_suite/.gpubench/sm90-nvidia-h100-80gb-hbm3.json",
    "example_suite/.gpubench/sm90-nvidia-h200.json",
    "bench/user_suite/.gpubench/sm90-nvidia-h100-80gb-hbm3.json",
    "bench/user_suite/.gpubench/sm90-nvidia-h200.json",
    "bench/fla_suite/.gpubench/sm90-nvidia-h100-80gb-hbm3.json",
    "bench/fla_suite/.gpubench/sm90-nvidia-h200.json",
)
CLASSES_US = ((0.0, 3.0), (3.0, 20.0), (20.0, 100.0), (100.0, math.inf))


def label(low: float, high: float) -> str:
    return f"{low:g}-{high:g} µs" if high != math.inf else f">= {low:g} µs"


def table() -> str:
    """The Markdown table, one row per file and class."""
    lines = [
        "| baseline | sessions | time per call | tests | gate 5% | noisy | not gated | "
        "largest gate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in FILES:
        baseline = cli.read_baseline(ROOT / name)
        views = survey(baseline, cli.DEFAULT_THRESHOLD, cli.DEFAULT_ALPHA)
        counts = sorted({len(v.entry.history) for v in views})
        sessions = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        times = {v.key: v.entry.median_ms for v in views if not is_ratio(v.entry.timer)}
        for ratios in (False, True):
            for low, high in CLASSES_US:
                rows = [
                    v
                    for v in views
                    if is_ratio(v.entry.timer) == ratios
                    and low <= times.get(v.key.split(RATIO_KEY)[0], math.nan) * 1e3 < high
                ]
                if not rows:
                    continue
                gated = [v for v in rows if v.judgement.gated]
                ok = sum(1 for v in gated if not v.judgement.noisy)
                gates = [v.gate for v in gated]
                largest = f"{max(gates):.1%}" if low >= 20 and gates else ""
                lines.append(
                    f"| {name} | {sessions} | {'ratio, ' if ratios else ''}{label(low, high)} "
                    f"| {len(rows)} | {ok} | {len(gated) - ok} | {len(rows) - len(gated)} "
                    f"| {largest} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
