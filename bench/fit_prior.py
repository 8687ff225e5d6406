"""Fit the verdict's prior to the recorded GPU sessions (bench/results/sessions.json) and
the host clock's to recorded CPU sessions (WALL).

    python bench/fit_prior.py          # prints the tables judge/rule.py holds (*_POINTS)

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

from pytest_gpubench.core.records import RATIO_SUFFIX  # noqa: E402
from pytest_gpubench.store.baseline import load  # noqa: E402

# The host clock's sessions (timer ``wall``): 32 tests of CPU work, 20 fresh sessions each,
# on a quiet 2-CPU machine (bench/results/cpu-2026-12-05), as the plugin saved them.
WALL = ROOT / "bench" / "results" / "cpu-2026-12-05" / "wall-baselines" / "cpu-amd-epyc.json"

MIN_SESSIONS = 12
EXCURSION_Z = 3.0  # the same constant as judge.rule.EXCURSION_Z (checked by tests)
# Class edges, microseconds (per launch for PER_LAUNCH timers), per family of timers: the
# graph's time per call (launch gaps included) and the kernel time (CUPTI: ``cupti``,
# ``cupti-graph``), which moves less between sessions (recorded on H100s, 2026-11-24).
FAMILIES = {
    "graph": (("cuda-graph",), (1.6, 3.0, 6.0, 15.0, 40.0, 100.0)),
    "kernel": (("cupti", "cupti-graph"), (1.6, 3.0, 6.0, 40.0)),
    # The host clock (WALL's sessions): what a test's spread follows is the kind of its work
    # (numpy 0.1-0.6%, a Python loop 3-6%), so a class is the median of kinds (the edges
    # decades, a class joined to 8 tests as above).
    "wall": (("wall",), (10.0, 100.0, 1000.0)),
}
# A class is the median of at least this many tests; the longest, which holds for every
# longer kernel too, of at least MIN_END_TESTS (its tests move unlike the 40-100 us ones).
MIN_CLASS_TESTS = 8
MIN_END_TESTS = 4
# Tests of a class differ in their spread by at least this variance of log(sigma) (sd 0.41:
# a factor 1.5), whatever a handful of them shows: the prior is worth at most 1 / (2 * this)
# = 3 variance sessions (0.7 of a 20-session history's weight).
MIN_BETWEEN = 1 / 6
# The floor's shift between batches of fresh processes on one machine (a history, then A/A
# sessions hours later) is read where the floor is tight enough to show it: from this long.
CONTEXT_FROM_US = 20.0
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
            # A ratio to a reference is no time: its prior is rule.ratio_prior's bound.
            if len(ss) < MIN_SESSIONS or t["timer"].endswith(RATIO_SUFFIX):
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


def groups(rows: list[dict], edges_us: tuple[float, ...]) -> list[list[dict]]:
    """Rows by class of duration, a class of fewer than MIN_CLASS_TESTS tests joined to the
    next longer one (the longest, under MIN_END_TESTS, to the one before): a median of a
    handful of tests is one odd test's (a 10 us class of five, three of them bimodal, read
    2% where its neighbours read 0.1-0.2%)."""
    edges = (0.0, *edges_us, math.inf)
    out: list[list[dict]] = []
    pending: list[dict] = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        pending += [r for r in rows if lo <= r["us"] < hi]
        if len(pending) >= MIN_CLASS_TESTS:
            out.append(pending)
            pending = []
    if pending and out and len(pending) < MIN_END_TESTS:
        out[-1] += pending
    elif pending:
        out.append(pending)
    return out


def classes(rows: list[dict], edges_us: tuple[float, ...]) -> list[dict]:
    out = []
    for sel in groups(rows, edges_us):
        sig = np.array([r["sigma"] for r in sel])
        ks = np.array([r["k"] for r in sel])
        log_s = np.log(sig)
        # Between-test spread of log sigma beyond sampling noise: the lower-half median's
        # sampling sd of log sigma is about 1.1 / sqrt(k / 2) (efficiency ~ 0.4 of a
        # variance estimate of k/2 df), measured by simulation in tests/judge/test_resample.py.
        spread = (1.4826 * float(np.median(np.abs(log_s - np.median(log_s))))) ** 2
        noise = float(np.mean((1.1 / np.sqrt(ks / 2)) ** 2))
        between = max(spread - noise, MIN_BETWEEN)
        # A variance estimate of nu df has var(log sigma) = 1 / (2 nu): the prior is worth the
        # nu that matches the between-test spread.
        nu0 = 1 / (2 * between)
        n_sessions = int(ks.sum())
        rates = {}
        for side in ("slow", "fast"):
            # None seen is a rate under one in n, not none (the rule takes its logarithm).
            count = sum(r[side] for r in sel) or 0.5
            rate = count / n_sessions
            per_rates = np.array([r[side] / r["k"] for r in sel])
            var_true = max(float(np.var(per_rates)) - rate * (1 - rate) / float(ks.mean()), 1e-6)
            weight = min(50.0, max(2.0, rate * (1 - rate) / var_true - 1)) if rate > 0 else 50.0
            # An excursion is beyond EXCURSION_Z spreads: one not seen is at least that big.
            sizes = [s for r in sel for s in r[f"{side}_sizes"]]
            size = float(np.mean(sizes)) if sizes else EXCURSION_Z * float(np.median(sig))
            rates[side] = (rate, weight, size)
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


def context_offsets(data: dict) -> np.ndarray:
    """Per test from CONTEXT_FROM_US with a history and A/A sessions on one machine, the shift
    of its floor (the lower half's median) from the history's sessions to the A/A run's."""

    def floor(x: np.ndarray) -> float:
        return float(np.median(np.sort(x)[: max(1, len(x) // 2)]))

    out = []
    for machine in data["machines"].values():
        for t in machine["tests"].values():
            if t["timer"].endswith(RATIO_SUFFIX):
                continue
            h = np.log([s["median_ms"] for s in t["sessions"] if s["role"] == "history"])
            f = np.log([s["median_ms"] for s in t["sessions"] if s["role"] == "first"])
            if len(h) >= 10 and len(f) >= 3 and math.exp(np.median(h)) * 1000 >= CONTEXT_FROM_US:
                out.append(floor(f) - floor(h))
    return np.array(out)


def context_sd(data: dict, z_power: float) -> tuple[float, int]:
    """The sd that, at the verdict's power quantile, covers the 1% lowest shifts: a slowdown
    of the threshold measured in a context that runs that much faster is still caught."""
    offsets = context_offsets(data)
    return float(-np.percentile(offsets, 1)) / z_power, len(offsets)


def sessions_of(path: Path) -> dict:
    """A baseline file's sessions in DATA's shape: one machine, each test's history."""
    baseline = load(path)
    tests = {
        key: {
            "timer": entry.timer,
            "launches": len(entry.kernels),
            "sessions": [
                {"role": "history", "id": s.session, "median_ms": s.median_ms}
                for s in entry.history
            ],
        }
        for key, entry in baseline.entries.items()
    }
    return {"machines": {path.stem: {"tests": tests}}}


def fit(path: Path = DATA, wall: Path = WALL) -> dict[str, list[dict]]:
    rows = per_test(json.loads(path.read_text())) + per_test(sessions_of(wall))
    return {
        family: classes([r for r in rows if r["timer"] in timers], edges)
        for family, (timers, edges) in FAMILIES.items()
    }


def main() -> None:
    from statistics import NormalDist

    data = json.loads(DATA.read_text())
    tables = fit()
    for family, table in tables.items():
        print(f"{family} ({', '.join(FAMILIES[family][0])}):")
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
    for family, table in tables.items():
        print(f"{family.upper()}_POINTS = (")
        for c in table:
            print(
                f"    Prior({c['us'] / 1000:.3g}, sigma={c['sigma']:.2g}, nu0={c['nu0']:.2g}, "
                f"slow=({c['slow_rate']:.2g}, {c['slow_weight']:.2g}, {c['slow_size']:.2g}), "
                f"fast=({c['fast_rate']:.2g}, {c['fast_weight']:.2g}, {c['fast_size']:.2g})),"
            )
        print(")")
    sd, tests = context_sd(data, NormalDist().inv_cdf(0.99))
    print(f"CONTEXT_SD = {sd:.2g}  # {tests} tests from {CONTEXT_FROM_US:g} us")


if __name__ == "__main__":
    main()
