"""A prior for the lockstep verdict, fitted to and checked on recorded in-process ratios.

A lockstep A/B run times both revisions of a test alternately in one process: one process, one
difference d = log(median head) - log(median base). The closest recorded data are the ratios
to a reference function timed alternately in one process (``<test>#vs-reference``): the sd
between sessions of log(ratio median) is the sd of one in-process d. This script

1. lists every ratio with ``--min-sessions`` sessions or more: its function's median
   (duration), timer, the sd between sessions of log(ratio) and of log(function time);
2. fits sigma0(duration, timer): per timer family, the median of the observed sd in each
   duration bin (edges ``BIN_EDGES_US``), and the prior's weight 1 / (2 v), v the variance
   between tests of log(sd / sigma0) beyond its sampling noise 1 / (2 (n - 1)) (as
   judge/pairs.py's PAIR_PRIOR_WEIGHT was fitted);
3. checks the rule A/A: each session's log ratio centred on the median of the key's other
   sessions is one replication's d; runs of 54 tests (keys drawn with replacement) judged by
   judge.pairs.decide_pairs (its PAIR_PRIOR_WEIGHT set to the fitted weight, sigma0 the fit,
   alpha 0.01 Bonferroni over 54), per design (first, batch, cap): false failures per run and
   the share unsure; then detection: d shifted by +1, +2, +5%, caught at thresholds 1, 2, 5%,
   by duration class.

Usage:

    python bench/lockstep_prior.py BASELINE.json... [--min-sessions 8] [--runs 20000]
        [--seed 0] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpubench.judge import pairs
from pytest_gpubench.judge.rule import corrected_alpha

sys.path.insert(0, str(Path(__file__).parent))
from ratio_spread import SUFFIX, sd_log, sessions  # noqa: E402

BIN_EDGES_US = (5.0, 100.0)
FAMILY = 54
ALPHA = 0.01
THRESHOLDS = (0.01, 0.02, 0.05)
SHIFTS = (0.01, 0.02, 0.05)
CLASSES_US = (100.0, 20.0, 5.0)  # keys of at least this duration; and those under the last
# (first, batch, cap): R replications fixed, then a first look at R with more up to the cap.
DESIGNS = ((1, 1, 1), (2, 1, 2), (3, 1, 3), (1, 2, 3), (2, 1, 3), (1, 4, 5), (2, 3, 5), (3, 2, 5))


def ratio_rows(path: Path, min_sessions: int) -> list[dict[str, Any]]:
    """One row per ratio of the file with ``min_sessions`` sessions shared with its function."""
    benchmarks = json.loads(path.read_text())["benchmarks"]
    out = []
    for key, entry in sorted(benchmarks.items()):
        fn_key = key.removesuffix(SUFFIX)
        if not key.endswith(SUFFIX) or fn_key not in benchmarks:
            continue
        ratio, fn = sessions(entry), sessions(benchmarks[fn_key])
        common = sorted(set(ratio) & set(fn))  # session ids sort by time
        if len(common) < min_sessions:
            continue
        out.append(
            {
                "file": str(path),
                "test": fn_key,
                "timer": entry["timer"].removesuffix(":ratio"),
                "duration_us": 1e3 * statistics.median(fn[s] for s in common),
                "sessions": len(common),
                "sd_ratio": sd_log([ratio[s] for s in common]),
                "sd_fn": sd_log([fn[s] for s in common]),
                "log_ratio": [math.log(ratio[s]) for s in common],
            }
        )
    return out


def bin_of(duration_us: float) -> int:
    return int(np.searchsorted(BIN_EDGES_US, duration_us, side="right"))


def fit(rows: list[dict[str, Any]]) -> tuple[dict[str, list[float | None]], float, float]:
    """sigma0 per timer and duration bin (None: no test there), the weight and v."""
    sds: dict[str, list[list[float]]] = {
        r["timer"]: [[] for _ in range(len(BIN_EDGES_US) + 1)] for r in rows
    }
    for r in rows:
        sds[r["timer"]][bin_of(r["duration_us"])].append(r["sd_ratio"])
    table = {t: [statistics.median(sd) if sd else None for sd in sds[t]] for t in sorted(sds)}
    dev = [math.log(r["sd_ratio"] / sigma0(table, r["timer"], r["duration_us"])) for r in rows]
    noise = statistics.mean(1 / (2 * (r["sessions"] - 1)) for r in rows)
    v = statistics.variance(dev) - noise
    return table, 1 / (2 * v), v


def sigma0(table: dict[str, list[float | None]], timer: str, duration_us: float) -> float:
    """The fitted prior; a bin with no test takes the nearest bin of the timer that has one."""
    values = table[timer]
    b = bin_of(duration_us)
    return min(
        ((abs(i - b), s) for i, s in enumerate(values) if s is not None), key=lambda t: t[0]
    )[1]


def loo_diffs(rows: list[dict[str, Any]]) -> np.ndarray:
    """Per key (NaN-padded): each session's log ratio minus the median of the key's others."""
    out = np.full((len(rows), max(r["sessions"] for r in rows)), np.nan)
    for i, r in enumerate(rows):
        x = np.array(r["log_ratio"])
        out[i, : len(x)] = [x[j] - np.median(np.delete(x, j)) for j in range(len(x))]
    return out


def judge(
    diffs: np.ndarray, s0: np.ndarray, threshold: float, design: pairs.PairDesign
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's verdict after the design's looks: direction, same, replications used."""
    alpha1 = corrected_alpha(ALPHA, FAMILY, False)
    n = np.full(len(diffs), design.first)
    while True:
        shown = np.where(np.arange(diffs.shape[1]) < n[:, None], diffs, np.nan)
        dec = pairs.decide_pairs(shown, s0, threshold=threshold, alpha1=alpha1, design=design)
        more = dec.more & (n < design.cap)
        if not more.any():
            return dec.direction, dec.same, n
        n = np.where(more, np.minimum(n + design.batch, design.cap), n)


def draws(d: np.ndarray, keys: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """For each drawn key, ``cap`` of its sessions' d in random order, no session twice."""
    u = rng.random((len(keys), d.shape[1]))
    u[np.isnan(d[keys])] = np.inf
    order = np.argsort(u, axis=1)[:, :cap]
    return np.take_along_axis(d[keys], order, axis=1)


def check(
    rows: list[dict[str, Any]], s0: np.ndarray, runs: int, rng: np.random.Generator
) -> list[dict[str, Any]]:
    d = loo_diffs(rows)
    dur = np.array([r["duration_us"] for r in rows])
    out = []
    for first, batch, cap in DESIGNS:
        design = pairs.PairDesign(first=first, batch=batch, cap=cap)
        result: dict[str, Any] = {"design": [first, batch, cap], "aa": {}, "caught": {}}
        keys = rng.integers(len(rows), size=runs * FAMILY)
        aa = draws(d, keys, cap, rng)
        for t in THRESHOLDS:
            direction, same, n = judge(aa, s0[keys], t, design)
            per_run = (direction == 1).reshape(runs, FAMILY).sum(axis=1)
            result["aa"][f"{t:.0%}"] = {
                "false_per_run": float(per_run.mean()),
                "runs_failing": float((per_run > 0).mean()),
                "unsure": float(((direction == 0) & ~same).mean()),
                "replications": float(n.mean()),
            }
        # Detection: every key equally often, whatever its timer.
        keys = np.repeat(np.arange(len(rows)), max(1, runs * FAMILY // (20 * len(rows))))
        base = draws(d, keys, cap, rng)
        classes = {f">= {c:g} µs": dur[keys] >= c for c in CLASSES_US}
        classes[f"< {CLASSES_US[-1]:g} µs"] = dur[keys] < CLASSES_US[-1]
        for shift in SHIFTS:
            for t in THRESHOLDS:
                direction, _, _ = judge(base + math.log1p(shift), s0[keys], t, design)
                result["caught"][f"+{shift:.0%} at {t:.0%}"] = {
                    c: float((direction[m] == 1).mean()) if m.any() else None
                    for c, m in classes.items()
                }
        out.append(result)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baselines", type=Path, nargs="+")
    parser.add_argument("--min-sessions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=20000, help="A/A runs of 54 tests per design")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = [r for path in args.baselines for r in ratio_rows(path, args.min_sessions)]
    if not rows:
        print(f"no ratio with {args.min_sessions} sessions or more", file=sys.stderr)
        return 1
    table, weight, v = fit(rows)
    print("| file | test | timer | duration | sessions | sd ratio | sd fn |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {Path(r['file']).name} | {r['test']} | {r['timer']} | {r['duration_us']:.3g} µs "
            f"| {r['sessions']} | {r['sd_ratio']:.2%} | {r['sd_fn']:.2%} |"
        )
    edges = ("0", *(f"{e:g}" for e in BIN_EDGES_US), "inf")
    print("\nsigma0 (median sd of log ratio; tests) per timer and duration bin (µs):")
    for timer, values in table.items():
        cells = []
        for b, s in enumerate(values):
            count = sum(r["timer"] == timer and bin_of(r["duration_us"]) == b for r in rows)
            shown = "-" if s is None else f"{s:.3%}"
            cells.append(f"[{edges[b]}, {edges[b + 1]}) {shown} ({count})")
        print(f"  {timer}: " + "; ".join(cells))
    print(f"weight 1 / (2 v) = {weight:.2f} (v = {v:.3f}, {len(rows)} keys)")

    # decide_pairs reads the module's weight when called: the lockstep weight for this run.
    pairs.PAIR_PRIOR_WEIGHT = weight
    s0 = np.array([sigma0(table, r["timer"], r["duration_us"]) for r in rows])
    results = check(rows, s0, args.runs, np.random.default_rng(args.seed))
    print(
        f"\nA/A, {args.runs} runs of {FAMILY} tests: false failures per run / share unsure / "
        "mean replications"
    )
    print("| first, batch, cap | " + " | ".join(f"at {t:.0%}" for t in THRESHOLDS) + " |")
    print("|---" * (len(THRESHOLDS) + 1) + "|")
    for res in results:
        cells = [
            f"{a['false_per_run']:.4f} / {a['unsure']:.1%} / {a['replications']:.2f}"
            for a in res["aa"].values()
        ]
        print(f"| {', '.join(map(str, res['design']))} | " + " | ".join(cells) + " |")
    classes = list(next(iter(results[0]["caught"].values())))
    print("\nCaught (regressed), shifts at or above the threshold (under it: 0 by design)")
    print("| first, batch, cap | shift at threshold | " + " | ".join(classes) + " |")
    print("|---" * (len(classes) + 2) + "|")
    for res in results:
        for what, caught in res["caught"].items():
            shift, t = (float(p.strip("+%")) for p in what.split(" at "))
            if shift < t:
                continue
            cells = ["-" if c is None else f"{c:.0%}" for c in caught.values()]
            print(f"| {', '.join(map(str, res['design']))} | {what} | " + " | ".join(cells) + " |")
    if args.json:
        fitted = {"sigma0": table, "bin_edges_us": BIN_EDGES_US, "weight": weight, "v": v}
        for r in rows:
            del r["log_ratio"]
        args.json.write_text(
            json.dumps({"fit": fitted, "keys": rows, "checks": results}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
