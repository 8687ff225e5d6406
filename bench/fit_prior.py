"""Fit the verdict's prior to the recorded GPU sessions (bench/results/sessions.json).

    python bench/fit_prior.py          # prints the table judge/rule.py holds as PRIOR

Per test with at least MIN_SESSIONS sessions that ran the whole suite (roles ``first`` and
``history``; a confirmation, which times one test alone, is left out), on the log of the
session medians:

- the floor: ``m`` the median, ``sigma`` the lower half's spread (the median of ``m - x``
  over the sessions below ``m``, over 0.6745, the normal's): blind to the one-sided slow
  excursions and to a fast outlier or two;
- the excursions: sessions above ``m + EXCURSION_Z * sigma``, slow; their rate and their mean
  size ``x - m``. Fast ones (below ``m - EXCURSION_Z * sigma``) likewise.

Tests are pooled into classes of duration (per launch for timers that time the gaps between
a call's launches). Per class the prior is the typical test, not the worst: the median of the
tests' ``sigma``, the pooled excursion rates and mean size; and how much a test's own history
should outweigh it, from how much the tests of a class differ beyond their sampling noise
(``nu0``: the prior's weight in sessions for sigma; ``rate_weight`` for the rates). What the
prior does to the false-failure rate and the power is checked by bench/resample.py on these
same sessions.
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

MIN_SESSIONS = 12
EXCURSION_Z = 3.0  # the same constant as judge.rule.EXCURSION_Z (checked by tests)
# Class edges, microseconds per launch.
EDGES_US = (1.6, 3.0, 6.0, 15.0, 40.0, 100.0)
# Floor of sigma: timestamps and medians are kept to 6 digits; nothing is steadier than this.
MIN_SIGMA = 2e-4
PER_LAUNCH = ("cuda-graph", "cuda-event", "cuda-event-cold")


def lower_sigma(x: np.ndarray) -> tuple[float, float]:
    """(median, lower-half spread) of log medians ``x``."""
    m = float(np.median(x))
    below = m - x[x < m]
    if len(below) == 0:
        return m, MIN_SIGMA
    return m, max(MIN_SIGMA, float(np.median(below)) / 0.6745)


def per_test(data: dict) -> list[dict]:
    rows = []
    for gpu, machine in data["machines"].items():
        for key, t in machine["tests"].items():
            ss = [s for s in t["sessions"] if s["role"] in ("first", "history")]
            if len(ss) < MIN_SESSIONS:
                continue
            x = np.log([s["median_ms"] for s in ss])
            m, sigma = lower_sigma(x)
            slow = x - m > EXCURSION_Z * sigma
            fast = m - x > EXCURSION_Z * sigma
            launches = t["launches"] or 1
            per = math.exp(m) * 1000 / (launches if t["timer"] in PER_LAUNCH else 1)
            rows.append(
                {
                    "gpu": gpu,
                    "key": key,
                    "timer": t["timer"],
                    "us": per,
                    "k": len(x),
                    "sigma": sigma,
                    "slow": int(slow.sum()),
                    "fast": int(fast.sum()),
                    "slow_sizes": (x[slow] - m).tolist(),
                    "fast_sizes": (m - x[fast]).tolist(),
                }
            )
    return rows


def classes(rows: list[dict]) -> list[dict]:
    out = []
    edges = (0.0, *EDGES_US, math.inf)
    for lo, hi in zip(edges, edges[1:], strict=False):
        sel = [r for r in rows if lo <= r["us"] < hi]
        if not sel:
            continue
        sig = np.array([r["sigma"] for r in sel])
        ks = np.array([r["k"] for r in sel])
        log_s = np.log(sig)
        # Between-test spread of log sigma beyond sampling noise: the lower-half median's
        # sampling sd of log sigma is about 1.1 / sqrt(k / 2) (efficiency ~ 0.4 of a
        # variance estimate of k/2 df), measured by simulation in tests/test_resample.py.
        spread = (1.4826 * float(np.median(np.abs(log_s - np.median(log_s))))) ** 2
        noise = float(np.mean((1.1 / np.sqrt(ks / 2)) ** 2))
        between = max(spread - noise, 0.02)
        # A variance estimate of nu df has var(log sigma) = 1 / (2 nu): the prior is worth the
        # nu that matches the between-test spread.
        nu0 = 1 / (2 * between)
        n_sessions = int(ks.sum())
        rates = {}
        for side in ("slow", "fast"):
            count = sum(r[side] for r in sel)
            rate = count / n_sessions
            per_rates = np.array([r[side] / r["k"] for r in sel])
            var_true = max(float(np.var(per_rates)) - rate * (1 - rate) / float(ks.mean()), 1e-6)
            weight = min(50.0, max(2.0, rate * (1 - rate) / var_true - 1)) if rate > 0 else 50.0
            sizes = [s for r in sel for s in r[f"{side}_sizes"]]
            rates[side] = (rate, weight, float(np.mean(sizes)) if sizes else 0.0)
        out.append(
            {
                "us": float(np.exp(np.mean(np.log([r["us"] for r in sel])))),
                "tests": len(sel),
                "sessions": n_sessions,
                "sigma": float(np.median(sig)),
                "nu0": nu0,
                "slow_rate": rates["slow"][0],
                "slow_weight": rates["slow"][1],
                "slow_size": rates["slow"][2],
                "fast_rate": rates["fast"][0],
                "fast_weight": rates["fast"][1],
                "fast_size": rates["fast"][2],
            }
        )
    return out


def fit(path: Path = DATA) -> list[dict]:
    return classes(per_test(json.loads(path.read_text())))


def main() -> None:
    table = fit()
    print(
        "| us/launch | tests | sessions | sigma | nu0 | slow rate | weight | size | "
        "fast rate | weight | size |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in table:
        print(
            f"| {c['us']:.3g} | {c['tests']} | {c['sessions']} | {c['sigma']:.2%} | "
            f"{c['nu0']:.1f} | {c['slow_rate']:.1%} | {c['slow_weight']:.0f} | "
            f"{c['slow_size']:.1%} | {c['fast_rate']:.1%} | {c['fast_weight']:.0f} | "
            f"{c['fast_size']:.1%} |"
        )
    print()
    print("PRIOR_POINTS = (")
    for c in table:
        print(
            f"    Prior({c['us'] / 1000:.3g}, sigma={c['sigma']:.2g}, nu0={c['nu0']:.2g}, "
            f"slow=({c['slow_rate']:.2g}, {c['slow_weight']:.2g}, {c['slow_size']:.2g}), "
            f"fast=({c['fast_rate']:.2g}, {c['fast_weight']:.2g}, {c['fast_size']:.2g})),"
        )
    print(")")


if __name__ == "__main__":
    main()
