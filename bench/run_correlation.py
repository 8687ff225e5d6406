"""How alike the sessions of one run are: the rule's RUN_ICC and SIZE_ICC, fitted.

    python bench/run_correlation.py     # about half a minute

A run's first session and its confirmations are fresh processes seconds apart on one
machine. bench/results/sessions.json holds each GPU's whole-suite sessions (roles ``first``
and ``history``) in time order, 12-70 s apart, like a run's; per test series (ratios left
out, as bench/fit_prior.py does) of 10 sessions or more, each session's slow excursion is
what judge.rule calls one (beyond EXCURSION_Z floor sds of the series' fitted floor, its
prior as the rule takes it).

- **RUN_ICC**: the correlation of the excursion indicators of sessions 1-6 apart (the pairs
  a run of seven sessions holds), pooled over series, each about its own series' rate, less
  the same statistic over random orders of each machine's sessions (a series' own rate makes
  it about -0.05 where there is no order at all). Checked against what it predicts: windows
  of 3, 5, 7 consecutive sessions all in excursion, against random orders; and the recorded
  confirmations (one test alone in a fresh process right after a session).
- **SIZE_ICC**: how alike one test's excursions are: the share of the variance of log
  excursion sizes within a duration class (bench/fit_prior.py's edges) that lies between its
  tests, pooled over pairs of excursions; and whether pairs close in time are closer.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "results" / "sessions.json"
sys.path.insert(0, str(ROOT))

from pytest_gpubench.core.records import RATIO_SUFFIX  # noqa: E402
from pytest_gpubench.judge import rule  # noqa: E402

SEED = 20261203
MIN_SESSIONS = 10
LAGS = range(1, 7)  # a run of 1 + Design().cap = 7 sessions
WINDOWS = (2, 3, 5, 7)
ORDERS = 2000
EDGES_US = (1.6, 3.0, 6.0, 15.0, 40.0, 100.0)  # bench/fit_prior.py's graph classes


def load(path: Path = DATA) -> list[list[dict]]:
    """Per machine, its test series: excursion indicators and deviations in time order."""
    data = json.loads(path.read_text())
    machines = []
    for _, m in sorted(data["machines"].items()):
        series = []
        for _, t in sorted(m["tests"].items()):
            if t["timer"].endswith(RATIO_SUFFIX):
                continue
            ss = sorted(
                (s for s in t["sessions"] if s["role"] in ("first", "history")),
                key=lambda s: s["date"],
            )
            if len(ss) < MIN_SESSIONS:
                continue
            x = np.log([s["median_ms"] for s in ss])
            launches = t["launches"] or 1
            prior = rule.prior_for(math.exp(float(np.median(x))), t["timer"], launches)
            f = rule.fit(x[None, :], rule.PriorArrays.of([prior]))
            dev, bar = x - f.m[0], rule.EXCURSION_Z * f.sigma[0]
            ids = [s["id"] for s in ss]
            confirms: dict[int, list[bool]] = {}
            for s in t["sessions"]:
                if s["role"] == "confirm" and s.get("parent") in ids:
                    slow = math.log(s["median_ms"]) - f.m[0] > bar
                    confirms.setdefault(ids.index(s["parent"]), []).append(slow)
            per = launches if t["timer"] in rule.PER_LAUNCH_TIMERS else 1
            us = math.exp(f.m[0]) * 1000 / per
            series.append({"slow": dev > bar, "dev": dev, "us": us, "confirms": confirms})
        if series:
            machines.append(series)
    return machines


def lag_icc(machines: list[list[dict]], orders: list[np.ndarray] | None = None) -> np.ndarray:
    """Pooled correlation of excursion indicators at each lag (index 1-6), each series about
    its own rate; sessions in ``orders`` (per machine) instead of time order where given."""
    num, den = np.zeros(max(LAGS) + 1), np.zeros(max(LAGS) + 1)
    for i, series in enumerate(machines):
        for s in series:
            e = s["slow"].astype(float)
            e = e[orders[i]] if orders is not None else e
            p = e.mean()
            if p in (0.0, 1.0):
                continue
            for lag in LAGS:
                num[lag] += ((e[:-lag] - p) * (e[lag:] - p)).sum()
                den[lag] += p * (1 - p) * (len(e) - lag)
    return num / np.where(den > 0, den, 1.0), den


def windows(machines: list[list[dict]], orders: list[np.ndarray] | None = None) -> np.ndarray:
    """Windows of each length in WINDOWS whose sessions are all slow excursions."""
    out = np.zeros(len(WINDOWS))
    for i, series in enumerate(machines):
        for s in series:
            e = s["slow"].astype(float)
            e = e[orders[i]] if orders is not None else e
            for j, n in enumerate(WINDOWS):
                out[j] += np.lib.stride_tricks.sliding_window_view(e, n).prod(axis=1).sum()
    return out


def run_icc(machines: list[list[dict]]) -> dict:
    rng = np.random.default_rng(SEED)
    observed, weights = lag_icc(machines)
    shuffled, wins = [], []
    for _ in range(ORDERS):
        orders = [rng.permutation(len(series[0]["slow"])) for series in machines]
        shuffled.append(lag_icc(machines, orders)[0])
        wins.append(windows(machines, orders))
    null = np.array(shuffled)[:, 1:]
    w = weights[1:] / weights[1:].sum()
    excess = observed[1:] - null.mean(axis=0)
    spread = (null - null.mean(axis=0)) @ w
    win_random = np.array(wins)
    return {
        "series": sum(len(s) for s in machines),
        "by_lag": excess.tolist(),
        "random_order": null.mean(axis=0).tolist(),
        "run_icc": float(excess @ w),
        "null_sd": float(spread.std()),
        "windows": windows(machines).tolist(),
        "windows_random": win_random.mean(axis=0).tolist(),
    }


def by_machine(machines: list[list[dict]]) -> list[float]:
    rng = np.random.default_rng(SEED)
    out = []
    for series in machines:
        observed, weights = lag_icc([series])
        null = np.mean(
            [
                lag_icc([series], [rng.permutation(len(series[0]["slow"]))])[0]
                for _ in range(ORDERS // 4)
            ],
            axis=0,
        )
        w = weights[1:] / weights[1:].sum()
        out.append(float((observed[1:] - null[1:]) @ w))
    return out


def confirmations(machines: list[list[dict]]) -> dict:
    """Recorded confirmations: how often in excursion after a session that was or was not."""
    after = {True: [0, 0, 0.0], False: [0, 0, 0.0]}  # slow, all, expected at the series' rate
    for series in machines:
        for s in series:
            rate = float(s["slow"].mean())
            for i, slow in s["confirms"].items():
                row = after[bool(s["slow"][i])]
                row[0] += sum(slow)
                row[1] += len(slow)
                row[2] += rate * len(slow)
    return {"after_slow": after[True], "after_other": after[False]}


def size_icc(machines: list[list[dict]]) -> dict:
    """Share of the variance of log excursion sizes, within a duration class, between tests;
    and the half squared difference of one test's pairs of sizes close in time and apart."""
    classes: dict[int, list[np.ndarray]] = {}
    near, far = [], []
    for series in machines:
        for s in series:
            idx = np.flatnonzero(s["slow"])
            if not len(idx):
                continue
            sizes = np.log(s["dev"][idx])
            classes.setdefault(int(np.searchsorted(EDGES_US, s["us"])), []).append(sizes)
            for u in range(len(idx)):
                for v in range(u + 1, len(idx)):
                    diff = (sizes[u] - sizes[v]) ** 2 / 2
                    (near if idx[v] - idx[u] <= max(LAGS) else far).append(diff)
    num = den = 0.0
    for tests in classes.values():
        total = float(np.concatenate(tests).var())
        pairs = [
            ((t[:, None] - t[None, :]) ** 2 / 2)[np.triu_indices(len(t), 1)]
            for t in tests
            if len(t) > 1
        ]
        within = np.concatenate(pairs) if pairs else np.zeros(0)
        if len(within) and total > 0:
            num += len(within) * (1 - float(within.mean()) / total)
            den += len(within)
    return {"size_icc": num / den, "near": float(np.mean(near)), "far": float(np.mean(far))}


def main() -> None:
    machines = load()
    r = run_icc(machines)
    print(f"{r['series']} series of {len(machines)} GPUs")
    lags = ", ".join(f"{lag}: {v:+.3f}" for lag, v in zip(LAGS, r["by_lag"], strict=True))
    print(f"excursion correlation by lag, less random orders' ({lags})")
    print(f"RUN_ICC = {r['run_icc']:.2g}  # random orders' sd {r['null_sd']:.3f}")
    print("by GPU: " + ", ".join(f"{v:+.3f}" for v in by_machine(machines)))
    for n, seen, rand in zip(WINDOWS, r["windows"], r["windows_random"], strict=True):
        print(f"windows of {n} all in excursion: {seen:.0f}, random orders {rand:.1f}")
    c = confirmations(machines)
    for name, (slow, total, expected) in c.items():
        print(f"confirmations {name}: {slow} of {total} slow (at the series' rate {expected:.1f})")
    s = size_icc(machines)
    print(
        f"SIZE_ICC = {s['size_icc']:.2g}  # pairs 1-6 apart {s['near']:.3f}, apart {s['far']:.3f}"
    )


if __name__ == "__main__":
    main()
