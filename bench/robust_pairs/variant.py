"""bench/pair_resample.py with the location/scale estimator swapped: an experiment of issue 17
(robust locations for the pair differences), kept to reproduce the note's numbers; the
product keeps the t-test (judge/pairs.py).

python bench/robust_pairs/variant.py [--quick] [--only NAME,...] --json /tmp/variant.json

Estimators:
  t          judge/pairs.py as is (checked against pr.sequential: identical statuses)
  huber1.5   Huber M, k=1.5, proposal-2 scale pooled with the prior (estimators.huber)
  huber1.0   same, k=1.0
  trim10     10% trimmed mean, Yuen se/df, winsorized variance pooled with the prior
  trim20     20% trimmed mean, same
  proc-t     process flag: a process whose tests are mostly slow against their own side's
             median (median over >= PROC_MIN tests of z = r / (sigma0/sqrt 2) > PROC_Z)
             is dropped with its pair, for every test; then the t-test on what is left
  proc-h1.5  the same flag, then huber1.5
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import estimators as E  # noqa: E402
import pair_resample as pr  # noqa: E402

from pytest_gpubench.judge import rule  # noqa: E402

PROC_MIN = 5
PROC_Z = 2.0

ESTIMATORS = {
    "t": E.t_test,
    "huber1.5": E.huber(1.5),
    "huber1.0": E.huber(1.0),
    "huber1.0m": E.huber(1.0, df_clipped=True),
    "huber1.345": E.huber(1.345),
    "trim10": E.trimmed(0.10),
    "trim20": E.trimmed(0.20),
}


@contextlib.contextmanager
def swapped(est):
    old = pr.pairs.decide_pairs
    pr.pairs.decide_pairs = functools.partial(E.decide, est)
    try:
        yield
    finally:
        pr.pairs.decide_pairs = old


# --- the process-flag variant: its own simulate (same draws as pr.simulate) ------------------


def simulate_proc(histories, config, est, replicates=1, runs=0, seed=pr.SEED):
    design = config.design
    rng = np.random.default_rng(
        [
            seed,
            config.tests,
            int(config.outliers),
            round(config.slowdown * 1e4),
            round(config.threshold * 1e4),
            design.first,
            design.batch,
            design.cap,
        ]
    )
    sigma0 = [h.sigma0() * config.prior_scale for h in histories]
    alternate = np.where(np.arange(design.cap) % 2 == 0, 1.0, -1.0)
    shift = math.log1p(config.slowdown)
    P = {k: [] for k in ("b", "hd", "s", "run", "h", "t", "us", "g")}
    group = 0

    def add(hi, idx, sign, run, take):
        nonlocal group
        h = histories[hi]
        x = h.x[:take, idx]
        if config.outliers:
            hit = rng.random(x.shape) < pr.OUTLIER_RATE
            size = np.log(rng.uniform(*pr.OUTLIER_RANGE, x.shape)) * rng.choice(
                [-1.0, 1.0], x.shape
            )
            x = x + np.where(hit, size, 0.0)
        first, second = x[:, 0::2], x[:, 1::2]
        head_second = (sign * alternate) > 0  # d = second - first
        P["hd"].append(np.where(head_second, second, first) + shift)
        P["b"].append(np.where(head_second, first, second))
        P["s"].append(sigma0[hi][:take])
        P["run"].append(np.full(take, run))
        P["h"].append(np.full(take, hi))
        P["t"].append(np.arange(take))
        P["us"].append(h.duration_us[:take])
        P["g"].append(np.full(take, group))
        group += 1

    count = 0
    if runs == 0:
        for _ in range(replicates):
            for hi, h in enumerate(histories):
                for idx, sign in pr.blocks(h, design.cap):
                    add(hi, idx, sign, count, len(h.keys))
                    count += 1
    else:
        for count in range(runs):
            total = 0
            while total < config.tests:
                hi = int(rng.integers(len(histories)))
                take = min(len(histories[hi].keys), config.tests - total)
                add(hi, *pr._draw(histories[hi], design.cap, rng), count, take)
                total += take
        count = runs
    cat = {k: np.concatenate(v) for k, v in P.items()}
    status, used, dropped = sequential_proc(cat, config, est)
    o = pr.Outcome(
        runs=count,
        status=status,
        used=used,
        run=cat["run"],
        history=cat["h"],
        test=cat["t"],
        duration_us=cat["us"],
    )
    o.dropped = dropped
    return o


def flags(side, sig, groups, rows, lo, hi, n):
    """Per row of ``rows``, which of the processes lo..hi-1 of ``side`` are flagged, judged
    over the rows of ``rows`` in the same group (medians over the first n sessions)."""
    x = side[rows, :n]
    z = (x - np.median(x, axis=1, keepdims=True)) / (sig[rows, None] / math.sqrt(2))
    z = z[:, lo:hi]
    g = groups[rows]
    out = np.zeros_like(z, dtype=bool)
    order = np.argsort(g, kind="stable")
    gs = g[order]
    starts = np.flatnonzero(np.r_[True, gs[1:] != gs[:-1]])
    ends = np.r_[starts[1:], len(gs)]
    for a, b in zip(starts, ends, strict=True):
        sel = order[a:b]
        if b - a >= PROC_MIN:
            out[sel] = np.median(z[sel], axis=0) > PROC_Z
    return out


def sequential_proc(cat, config, est):
    design = config.design
    alpha1 = rule.corrected_alpha(config.alpha, config.tests, False)
    N = len(cat["s"])
    cap = design.cap
    keep = np.ones((N, cap), dtype=bool)  # pair not dropped
    n = np.full(N, design.first)
    status = np.zeros(N, dtype=int)
    rows = np.arange(N)
    diffs = cat["hd"] - cat["b"]
    done_upto = 0
    while len(rows):
        m = int(n[rows].max())
        assert (n[rows] == m).all()
        if m > done_upto:  # processes done_upto..m-1 ran only the rows in play
            fb = flags(cat["b"], cat["s"], cat["g"], rows, done_upto, m, m)
            fh = flags(cat["hd"], cat["s"], cat["g"], rows, done_upto, m, m)
            keep[rows, done_upto:m] = ~(fb | fh)
            done_upto = m
        cols = np.arange(cap)
        judged = np.where((cols < m) & keep[rows], diffs[rows], np.nan)
        dec = E.decide(
            est,
            judged,
            cat["s"][rows],
            threshold=config.threshold,
            alpha1=alpha1,
            design=design,
            n_taken=n[rows],
        )
        status[rows] = np.where(dec.direction != 0, dec.direction, np.where(dec.same, 2, 0))
        rows = rows[dec.more]
        n[rows] += np.array([design.next_batch(int(k)) for k in n[rows]], dtype=int)
    dropped = (~keep & (np.arange(cap) < n[:, None])).sum(1)
    return status, n, dropped


def safe_est(est):
    """An estimator that tolerates rows with no pair left (d 0, se inf)."""

    def f(diffs, sigma0):
        present = ~np.isnan(diffs)
        empty = present.sum(-1) == 0
        dd = np.where(empty[:, None] & np.isnan(diffs), 0.0, diffs)
        if empty.any():
            dd = dd.copy()
            dd[empty, 1:] = np.nan
        d, se, s, df, nn = est(dd, sigma0)
        return (np.where(empty, 0.0, d), np.where(empty, np.inf, se), s, df, np.where(empty, 0, nn))

    return f


# --- tables ---------------------------------------------------------------------------------


def sim(name, histories, config, replicates=1, runs=0):
    if name.startswith("proc-"):
        base = {"proc-t": "t", "proc-h1.5": "huber1.5"}[name]
        return simulate_proc(histories, config, safe_est(ESTIMATORS[base]), replicates, runs)
    with swapped(ESTIMATORS[name]):
        return pr.simulate(histories, config, replicates=replicates, runs=runs)


def aa(name, histories, thresholds, replicates, runs):
    example = [h for h in histories if h.suite == "example"]
    out = []
    for thr in thresholds:
        for tests in (54, 500):
            for outliers in (False, True):
                cfg = pr.Config(tests=tests, outliers=outliers, threshold=thr)
                pool, nr = (histories, runs) if tests > 54 else (example, 0)
                rep = replicates if outliers else 1
                o = sim(name, pool, cfg, rep, nr)
                wide = sim(
                    name,
                    pool,
                    pr.Config(**{**cfg.__dict__, "alpha": pr.ALPHA * pr.MARGIN}),
                    rep,
                    nr,
                )
                out.append(
                    {
                        "threshold": thr,
                        "tests": tests,
                        "outliers": outliers,
                        "runs": o.runs,
                        "false_runs": o.runs_with(1),
                        "improved_runs": o.runs_with(-1),
                        "margin_runs": wide.runs_with(1),
                        "margin_improved": wide.runs_with(-1),
                        "unsure": float(np.mean(o.status == 0)),
                        "same": float(np.mean(o.status == 2)),
                        "pairs_per_test": float(o.used.mean()),
                        "dropped_per_test": float(getattr(o, "dropped", np.zeros(1)).mean()),
                    }
                )
    return out


def power(name, histories, cases):
    out = []
    for thr, slow in cases:
        o = sim(name, histories, pr.Config(slowdown=slow, threshold=thr))
        row = {"threshold": thr, "slowdown": slow}
        for label, sel in pr.classes(o):
            row[label] = float(np.mean(o.status[sel] == 1))
            row["unsure " + label] = float(np.mean(o.status[sel] == 0))
        row["unsure"] = float(np.mean(o.status == 0))
        row["pairs_per_test"] = float(o.used.mean())
        out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    histories = pr.load()
    names = args.only.split(",") if args.only else [*ESTIMATORS, "proc-t", "proc-h1.5"]
    reps, runs = (2, 200) if args.quick else (10, 1000)
    res = {}
    for name in names:
        res[name] = {
            "aa": aa(name, histories, (0.05, 0.03, 0.02), reps, runs),
            "power": power(
                name,
                histories,
                ((0.05, 0.05), (0.05, 0.03), (0.03, 0.03), (0.03, 0.05), (0.02, 0.03)),
            ),
        }
        print(name, json.dumps(res[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
