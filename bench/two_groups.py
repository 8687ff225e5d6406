"""Issue 45, item 3: what each remedy tried for two groups costs, on the recorded sessions.

    python bench/two_groups.py   # ~6 min on 2 idle cores

prints the table of bench/results/two-groups-2026-12-03.md (then with histories that
repeated sessions, and a row without). Each row is the rule with one change (a constant of
pytest_gpubench/judge/rule.py set otherwise, the history's sessions taken as correlated, or
a stricter level than the default alpha 0.01), measured by bench/resample.py as
docs/verdict.md measures the rule: unchanged 54-test runs with histories of up to 20
sessions (2000, as tests/judge/test_resample.py), the held-out H100s' 5-session replays,
tests/judge/test_rule.py's two-group case, and slowdowns of the threshold caught (200 runs).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import resample  # noqa: E402

from pytest_gpubench.judge import rule  # noqa: E402

VARIANTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("the rule (RUN_ICC 0.042, SIZE_ICC 0.39)", {}),
    ("RUN_ICC 0.08", {"RUN_ICC": 0.08}),
    ("RUN_ICC 0.15", {"RUN_ICC": 0.15}),
    ("SIZE_ICC 0.6", {"SIZE_ICC": 0.6}),
    ("SIZE_ICC 0.8", {"SIZE_ICC": 0.8}),
    ("SIZE_ICC 0.95", {"SIZE_ICC": 0.95}),
    ("MAX_RATE_WEIGHT 5", {"MAX_RATE_WEIGHT": 5.0}),
    ("history's sessions correlated at RUN_ICC", {"history_icc": True}),
    ("alpha 0.005 (the rule's level, a setting)", {"alpha": 0.005}),
)


def _history_icc_fit(fit):  # type: ignore[no-untyped-def]
    """rule.fit with the history's K sessions worth K / (1 + (K - 1) RUN_ICC) for the
    excursion rates: a history's sessions are consecutive fresh processes, as a run's are."""

    def fitted(history: np.ndarray, prior: rule.PriorArrays) -> rule.Fit:
        f = fit(history, prior)
        k = f.k.astype(float)
        k_eff = k / (1 + np.maximum(k - 1, 0) * rule.RUN_ICC)
        fields = {}
        for side, (rate0, weight, _) in (("slow", prior.slow), ("fast", prior.fast)):
            w = np.minimum(weight, rule.MAX_RATE_WEIGHT)
            count = getattr(f, f"{side}_rate") * (k + w) - w * rate0
            fields[f"{side}_rate"] = (count * k_eff / np.maximum(k, 1) + w * rate0) / (k_eff + w)
            fields[f"{side}_total"] = k_eff + w
        return dataclasses.replace(f, **fields)

    return fitted


def _group_case(threshold: float) -> int:
    """tests/judge/test_rule.py's two-group case: rows of 2 that fail."""
    prior = rule.PriorArrays.of([rule.prior_for(0.047, "cuda-graph", 1)] * 2)
    lower = [[-0.005, -0.003, -0.003, -0.002, -0.001], [-0.026, -0.025, -0.025, -0.024, -0.025]]
    upper = [
        [0.015, 0.016, 0.019, 0.019, 0.016, 0.015, 0.019],
        [-0.002, 0.005, 0.01, 0.015, 0.02, 0.023, 0.012],
    ]
    h, c = np.log1p(np.array(lower)), np.log1p(np.array(upper))
    alpha1 = rule.corrected_alpha(resample.ALPHA, 54, False)
    dec = rule.decide(
        h, c, np.zeros(c.shape), prior, threshold=threshold, alpha1=alpha1, design=rule.Design()
    )
    return int((dec.direction == 1).sum())


def measure(variant: tuple[str, dict[str, object]]) -> str:
    name, change = variant
    change = dict(change)
    resample.ALPHA = float(change.pop("alpha", resample.ALPHA))  # type: ignore[arg-type]
    if change.pop("history_icc", False):
        rule.fit = _history_icc_fit(rule.fit)
    for key, value in change.items():
        setattr(rule, key, value)
    machines, held = resample.load(), resample.load(held_out=True)
    false = [
        resample.simulate(machines, resample.Config(k=20, threshold=t), 2000) for t in (0.05, 0.02)
    ]
    replays = {
        (m.suite, t): resample.held_out(m, resample.Config(k=5, threshold=t)).failed_runs
        for m in held
        for t in (0.05, 0.02)
    }
    cells = [name, " / ".join(str(o.failed_runs) for o in false)]
    cells += [f"{replays[s, 0.05]} / {replays[s, 0.02]}" for s in ("user", "example")]
    cells.append(f"{_group_case(0.05)} / {_group_case(0.02)}")
    for t in (0.05, 0.02):
        cfg = resample.Config(k=20, slowdown=t, threshold=t)
        o = resample.simulate(machines, cfg, 200)
        bands = ((0, 3), (3, 20), (20, math.inf)) if t == 0.05 else ((20, math.inf),)
        for low, high in bands:
            sel = (o.duration_us >= low) & (o.duration_us < high)
            cells.append(f"{o.flagged[sel].mean():.1%}")
        promise = (o.duration_us >= 20) & ~o.not_gated & (o.gateable <= t)
        cells.append(f"{o.flagged[promise].mean():.1%}")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    print(
        "| rule | 20 sessions: runs failing of 2000 at 5% / 2% | held-out user suite, of 2772 "
        "| held-out example suite, of 1260 | tests/judge/test_rule.py two groups, of 2 "
        "| +5% at 5%: 0-3 us | 3-20 us | >= 20 us | gated >= 20 us | +2% at 2%: >= 20 us "
        "| gated >= 20 us |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with multiprocessing.get_context("spawn").Pool(2, maxtasksperchild=1) as pool:
        for line in pool.imap(measure, VARIANTS):
            print(line, flush=True)


if __name__ == "__main__":
    main()
