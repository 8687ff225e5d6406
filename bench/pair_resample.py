"""What the verdict against a revision does on real GPU sessions: recorded A/A pairs, resampled.

    python bench/pair_resample.py --json bench/results/pair-resample.json   # about a minute

prints the constants it fits for pytest_gpubench/judge/pairs.py and the tables of
docs/verdict.md ("The verdict against a revision"); tests/judge/test_pair_resample.py checks the
constants and runs the same code, fewer runs, in CI.

Data: every recorded history of unchanged code with at least MIN_SESSIONS sessions of a whole
suite, each session a fresh process minutes after the one before on the same GPU:
bench/results/sessions.json (bench/sessions_data.py; roles ``first`` and ``history``, never a
confirmation, which times one test alone) and the baseline files (each history record is one
session's own median, never a median of sessions): the committed ones of the example and user
suites and those packed in bench/results/**/*.tgz. Sessions are keyed by their id, so one
recorded twice counts once. Eight histories: the example suite (54 tests) and the user suite
(12-13) on two H200s each (graph time; 16-25 sessions) and on two H100s each (20 sessions;
the example suite's short calls by ``cupti-graph``). A test lacking some of its history's
sessions (an autotuned kernel whose binary changed) is left out.

A/A pairs. The plugin runs pair i as one base and one head process back to back, base first
in odd pairs and head first in even ones. Two consecutive sessions of a history are such a
pair of unchanged code, and which of them is "base" is a label: a run takes a block of
``2 * cap`` consecutive sessions (any start, forward or backward in time, circularly) as pairs
(s1, s2), (s3, s4), ..., labels them base/head, head/base, ... (or the mirror), and its pair
differences are ``d_i = log(head_i) - log(base_i)``; the same block for every test of the
run (a disturbed process disturbs many tests). Blocks, not pairs drawn at random: the
sessions of four of the eight histories are correlated from one to the next (lag-1 rank
correlation +0.07 to +0.13, against -0.04 to -0.05 for independent ones: the script's
correlation table), and a block keeps that, whatever the alternation does with it (the
pairs' differences are near their independent value on seven histories, not on one). Every
block is a run: a 20-session history gives 80 (20 starts, two directions, two labelings),
the four example histories 324; a cap beyond half a history's sessions would reuse its
sessions, so the design's cap stops at 10. The runs are the complete resampling
distribution, so the counts below are exact, but they are few: a false failure in 0 of 324
runs bounds the rate at about 1% (95%), and the margin (runs that would fail at 10 times the
level) says how far from failing they are.

One run of the rule: the first pairs for every test, then batches for the tests it asks more
of, up to the cap (pytest_gpubench.judge.pairs.decide_pairs on all runs at once), each test
with the prior of its duration and timer (``pair_sigma0``), the level alpha = 0.01 over the
family (``rule.corrected_alpha``, improvements not failing). A 54-test run is the example
suite on one machine; a 500-test run joins random blocks of all eight histories until 500
tests, judged as one family. Gross outliers: any session is, with 1% chance, multiplied or
divided by a factor uniform in [1.3, 3] (as bench/resample.py). Power: every head session
slowed by the same factor, on all eight histories, each judged as in a 54-test family; by the
kernel's time per launch (per call for CUPTI timers), as bench/resample.py. Caps beyond what
blocks can check: pairs drawn independently (``beyond_table``), a what-if.

Fit: per test, the spread of its disjoint consecutive pairs (root mean square of ``d``: zero
is the truth of an A/A pair) over the prior's (``pairs.prior_pair_spread``); per timer the
scale is the median ratio; the weight ``1 / (2 v)`` pairs, ``v`` the variance of the log
ratio within timers less its mean sampling variance (delta method, ``var(d^2) / (4 n
E[d^2]^2)``), as bench/fit_prior.py weighs the history prior.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SESSIONS = RESULTS / "sessions.json"
COMMITTED = (ROOT / "example_suite" / ".gpubench", ROOT / "bench" / "user_suite" / ".gpubench")
sys.path.insert(0, str(ROOT))

from pytest_gpubench.judge import pairs, rule  # noqa: E402

SEED = 20261124
ALPHA = 0.01
MIN_SESSIONS = 16
# The fit's data: sessions recorded up to this day (their ids start with the date). Later
# histories (the 20-session H200 files of 2026-11-28) wait for the next refit, which moves
# judge/pairs.py's constants and this file's committed tables together.
FIT_UNTIL = "20261127"
OUTLIER_RATE = 0.01
OUTLIER_RANGE = (1.3, 3.0)
MARGIN = 10  # the margin: runs that would fail at this many times the level
CLASSES_US = ((0.0, 5.0), (5.0, 20.0), (20.0, 100.0), (100.0, math.inf))
MEMBER = re.compile(r"(?:^|/)(example|user)-baselines/[^/]+\.json$")
# The designs weighed against each other (first, batch, cap) and the one chosen.
DESIGNS = ((3, 2, 9), (3, 3, 9), (3, 6, 9), (4, 3, 10), (4, 6, 10), (3, 7, 10))


@dataclass
class History:
    """One GPU's recorded sessions of one suite: ``x[test, session]`` log medians in time
    order, with each test's timer, launches, median and time per launch (per call for
    timers that do not time launch gaps)."""

    gpu: str
    model: str
    suite: str
    keys: list[str]
    timers: list[str]
    launches: list[int]
    x: np.ndarray
    median_ms: np.ndarray = field(init=False)
    duration_us: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.median_ms = np.exp(np.median(self.x, axis=1))
        per = [
            n if t in rule.PER_LAUNCH_TIMERS else 1
            for t, n in zip(self.timers, self.launches, strict=True)
        ]
        self.duration_us = self.median_ms * 1000 / np.array(per)

    @property
    def name(self) -> str:
        return f"{self.model} {self.gpu[:12]} {self.suite}"

    def sigma0(self) -> np.ndarray:
        return np.array(
            [
                pairs.pair_sigma0(m, t, n)
                for m, t, n in zip(self.median_ms, self.timers, self.launches, strict=True)
            ]
        )


def _baselines() -> Iterator[tuple[str, dict[str, Any]]]:
    """(suite, parsed file) of every baseline file: committed, then packed in archives."""
    for folder in COMMITTED:
        suite = "user" if "user_suite" in str(folder) else "example"
        for path in sorted(folder.glob("*.json")):
            yield suite, json.loads(path.read_text())
    for path in sorted(RESULTS.rglob("*.tgz")):
        with tarfile.open(path) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                match = MEMBER.search(member.name)
                data = tar.extractfile(member) if member.isfile() and match else None
                if match and data is not None:
                    yield match.group(1), json.loads(data.read())


def load() -> list[History]:
    """The histories of at least MIN_SESSIONS whole-suite sessions, per GPU and suite."""
    tests: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    models: dict[str, str] = {}

    def entry(gpu: str, suite: str, key: str, timer: str, launches: int) -> dict[str, Any]:
        return tests.setdefault((gpu, suite), {}).setdefault(
            key, {"timer": timer, "launches": launches, "sessions": {}}
        )

    for gpu, machine in json.loads(SESSIONS.read_text())["machines"].items():
        models[gpu] = machine.get("gpu_name") or ""
        # One batch of consecutive sessions per GPU and suite, the role with the most: a
        # history and an A/A run hours later meet in a pair no A/B run makes.
        roles: dict[tuple[str, str], dict[str, int]] = {}
        for full_key, t in machine["tests"].items():
            for s in t["sessions"]:
                count = roles.setdefault((full_key.split("::", 1)[0], s["role"]), {})
                count[s["id"]] = 1
        for full_key, t in machine["tests"].items():
            suite, key = full_key.split("::", 1)
            role = max(("first", "history"), key=lambda r: len(roles.get((suite, r), {})))
            e = entry(gpu, suite, key, t["timer"], t["launches"] or 1)
            for s in t["sessions"]:
                if s["role"] == role:
                    e["sessions"][s["id"]] = s["median_ms"]
    for suite, doc in _baselines():
        for key, bench in doc["benchmarks"].items():
            for b in bench["binaries"].values() if "binaries" in bench else [bench]:
                kernels = b.get("kernels") or bench.get("kernels") or []
                launches = sum(k.get("count", 1) for k in kernels) or 1
                for rec in b["history"]:
                    gpu = doc["sessions"][rec["session"]].get("machine")
                    if gpu and rec["session"][:8] <= FIT_UNTIL and "#" not in key:
                        models.setdefault(gpu, (doc.get("device") or {}).get("name", ""))
                        e = entry(gpu, suite, key, b.get("timer") or bench["timer"], launches)
                        e["sessions"].setdefault(rec["session"], rec["median_ms"])
    out = []
    for (gpu, suite), by_key in sorted(tests.items()):
        counts: dict[str, int] = {}
        for e in by_key.values():
            for sid in e["sessions"]:
                counts[sid] = counts.get(sid, 0) + 1
        ids = sorted(sid for sid, c in counts.items() if 2 * c >= len(by_key))  # time order
        if len(ids) < MIN_SESSIONS:
            continue
        keys = sorted(k for k, e in by_key.items() if all(s in e["sessions"] for s in ids))
        x = np.log([[by_key[k]["sessions"][s] for s in ids] for k in keys])
        model = models.get(gpu, "").replace("NVIDIA ", "").split(" ")[0]
        out.append(
            History(
                gpu,
                model,
                suite,
                keys,
                [by_key[k]["timer"] for k in keys],
                [by_key[k]["launches"] for k in keys],
                x,
            )
        )
    return out


# --- the fit ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PriorFit:
    scales: dict[str, float]  # per timer
    weight: float
    tests: dict[str, int]  # per timer
    between_sd: float  # sd of log(spread / prior) between tests, beyond sampling noise


def significant(value: float, digits: int = 2) -> float:
    return float(f"{value:.{digits}g}")


def fit_prior(histories: list[History]) -> PriorFit:
    """PAIR_PRIOR_SCALE per timer and PAIR_PRIOR_WEIGHT from the disjoint consecutive pairs
    of every recorded test (module docstring)."""
    ratios: dict[str, list[float]] = {}
    sampling: list[float] = []
    for h in histories:
        k = h.x.shape[1] // 2 * 2
        d = h.x[:, 1:k:2] - h.x[:, 0:k:2]
        square = np.maximum(np.mean(d**2, axis=1), pairs.MIN_PAIR_SIGMA**2)
        for i, timer in enumerate(h.timers):
            prior = rule.prior_for(
                float(h.median_ms[i]), timer, h.launches[i], graph=pairs.PAIR_BASIS
            )
            spread = math.sqrt(square[i]) / pairs.prior_pair_spread(prior)
            ratios.setdefault(timer, []).append(math.log(spread))
            sampling.append(float(np.var(d[i] ** 2) / (4 * d.shape[1] * square[i] ** 2)))
    within = np.concatenate([np.array(v) - np.mean(v) for v in ratios.values()])
    between = float(np.sum(within**2) / (len(within) - len(ratios))) - float(np.mean(sampling))
    return PriorFit(
        scales={t: significant(math.exp(float(np.median(v)))) for t, v in sorted(ratios.items())},
        weight=significant(1 / (2 * between), 1),
        tests={t: len(v) for t, v in sorted(ratios.items())},
        between_sd=math.sqrt(between),
    )


@contextlib.contextmanager
def prior_weight(weight: float) -> Iterator[None]:
    """judge/pairs.py with another prior weight (what-if rows of the design table)."""
    old = pairs.PAIR_PRIOR_WEIGHT
    pairs.PAIR_PRIOR_WEIGHT = weight
    try:
        yield
    finally:
        pairs.PAIR_PRIOR_WEIGHT = old


# --- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    tests: int = 54  # 54: the example suite on one machine; more: joined random blocks
    outliers: bool = False
    slowdown: float = 0.0
    threshold: float = 0.05
    design: pairs.PairDesign = pairs.PairDesign()
    alpha: float = ALPHA
    prior_scale: float = 1.0  # times pairs.pair_sigma0 (what-if rows)


@dataclass
class Outcome:
    runs: int
    status: np.ndarray  # per row: 1 regressed, -1 improved, 2 same, 0 unsure
    used: np.ndarray  # per row: pairs judged
    run: np.ndarray  # per row: its run
    history: np.ndarray  # per row: index of its history
    test: np.ndarray  # per row: index of its test in that history
    duration_us: np.ndarray

    def runs_with(self, status: int) -> int:
        hit = np.zeros(self.runs, dtype=bool)
        np.logical_or.at(hit, self.run, self.status == status)
        return int(hit.sum())

    @property
    def pairs_per_run(self) -> float:
        most = np.zeros(self.runs)
        np.maximum.at(most, self.run, self.used)
        return float(most.mean())


def blocks(h: History, cap: int) -> Iterator[tuple[np.ndarray, float]]:
    """Every block of ``2 * cap`` consecutive sessions, with its labeling."""
    k = h.x.shape[1]
    for start in range(k):
        for step in (1, -1):
            for sign in (1.0, -1.0):
                yield (start + step * np.arange(2 * cap)) % k, sign


def _draw(h: History, cap: int, rng: np.random.Generator) -> tuple[np.ndarray, float]:
    k = h.x.shape[1]
    step = int(rng.choice([1, -1]))
    return (int(rng.integers(k)) + step * np.arange(2 * cap)) % k, float(rng.choice([1.0, -1.0]))


def simulate(
    histories: list[History], config: Config, replicates: int = 1, runs: int = 0, seed: int = SEED
) -> Outcome:
    """Runs of the rule: with ``runs`` 0 (a suite of one history), every block of every
    history, ``replicates`` times (outliers are drawn anew each time); otherwise ``runs``
    runs of ``config.tests`` tests joined from random blocks."""
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
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("d", "s", "run", "h", "t", "us")}

    def add(hi: int, idx: np.ndarray, sign: float, run: int, take: int) -> None:
        h = histories[hi]
        x = h.x[:take, idx]
        if config.outliers:
            hit = rng.random(x.shape) < OUTLIER_RATE
            size = np.log(rng.uniform(*OUTLIER_RANGE, x.shape)) * rng.choice([-1.0, 1.0], x.shape)
            x = x + np.where(hit, size, 0.0)
        parts["d"].append(sign * alternate * (x[:, 1::2] - x[:, 0::2]) + shift)
        parts["s"].append(sigma0[hi][:take])
        parts["run"].append(np.full(take, run))
        parts["h"].append(np.full(take, hi))
        parts["t"].append(np.arange(take))
        parts["us"].append(h.duration_us[:take])

    count = 0
    if runs == 0:
        for _ in range(replicates):
            for hi, h in enumerate(histories):
                for idx, sign in blocks(h, design.cap):
                    add(hi, idx, sign, count, len(h.keys))
                    count += 1
    else:
        for count in range(runs):
            total = 0
            while total < config.tests:
                hi = int(rng.integers(len(histories)))
                take = min(len(histories[hi].keys), config.tests - total)
                add(hi, *_draw(histories[hi], design.cap, rng), count, take)
                total += take
        count = runs
    diffs = np.concatenate(parts["d"])
    s0 = np.concatenate(parts["s"])
    status, used = sequential(diffs, s0, config)
    return Outcome(
        runs=count,
        status=status,
        used=used,
        run=np.concatenate(parts["run"]),
        history=np.concatenate(parts["h"]),
        test=np.concatenate(parts["t"]),
        duration_us=np.concatenate(parts["us"]),
    )


def sequential(diffs: np.ndarray, sigma0: np.ndarray, config: Config) -> tuple[np.ndarray, ...]:
    """The plugin's procedure on every row at once: ``design.first`` pairs, then a batch for
    each row the rule asks more of, until none asks. Returns (status, pairs used)."""
    design = config.design
    alpha1 = rule.corrected_alpha(config.alpha, config.tests, False)
    n = np.full(len(diffs), design.first)
    status = np.zeros(len(diffs), dtype=int)
    rows = np.arange(len(diffs))
    columns = np.arange(design.cap)
    while len(rows):
        judged = np.where(columns < n[rows, None], diffs[rows], np.nan)
        dec = pairs.decide_pairs(
            judged, sigma0[rows], threshold=config.threshold, alpha1=alpha1, design=design
        )
        status[rows] = np.where(dec.direction != 0, dec.direction, np.where(dec.same, 2, 0))
        rows = rows[dec.more]
        n[rows] += np.array([design.next_batch(int(k)) for k in n[rows]], dtype=int)
    return status, n


def classes(outcome: Outcome, rows: np.ndarray | None = None) -> list[tuple[str, np.ndarray]]:
    sel = np.ones(len(outcome.status), dtype=bool) if rows is None else rows
    out = []
    for lo, hi in CLASSES_US:
        label = f"{lo:g}-{hi:g} us" if hi != math.inf else f">= {lo:g} us"
        out.append((label, sel & (outcome.duration_us >= lo) & (outcome.duration_us < hi)))
    return out


# --- tables ----------------------------------------------------------------------------------

THRESHOLDS = (0.05, 0.03, 0.02)
SLOWDOWNS = (0.02, 0.03, 0.05)


def aa_row(histories: list[History], config: Config, replicates: int, runs: int) -> dict[str, Any]:
    example = [h for h in histories if h.suite == "example"]
    joined = config.tests > 54
    pool = histories if joined else example
    o = simulate(pool, config, replicates=replicates, runs=runs if joined else 0)
    wide = simulate(
        pool,
        Config(**{**config.__dict__, "alpha": ALPHA * MARGIN}),
        replicates=replicates,
        runs=runs if joined else 0,
    )
    return {
        "threshold": config.threshold,
        "tests": config.tests,
        "outliers": config.outliers,
        "runs": o.runs,
        "false_runs": o.runs_with(1),
        "false_rate": o.runs_with(1) / o.runs,
        "improved_runs": o.runs_with(-1),
        "margin_runs": wide.runs_with(1),
        "unsure": float(np.mean(o.status == 0)),
        "pairs_per_test": float(o.used.mean()),
        "pairs_per_run": o.pairs_per_run,
    }


def aa_table(
    histories: list[History], replicates: int, runs: int, design: pairs.PairDesign
) -> list[dict[str, Any]]:
    rows = []
    for threshold in THRESHOLDS:
        for tests in (54, 500):
            for outliers in (False, True):
                cfg = Config(tests=tests, outliers=outliers, threshold=threshold, design=design)
                rows.append(aa_row(histories, cfg, replicates if outliers else 1, runs))
    return rows


def power_table(
    histories: list[History], design: pairs.PairDesign
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Share caught as regressed per class of duration; and, for the targets' cases, per GPU
    model and timer from 5 us."""
    rows, detail = [], []
    for threshold in THRESHOLDS:
        for slowdown in SLOWDOWNS:
            o = simulate(histories, Config(slowdown=slowdown, threshold=threshold, design=design))
            caught = o.status == 1
            row: dict[str, Any] = {"threshold": threshold, "slowdown": slowdown}
            for label, sel in classes(o):
                row[label] = float(caught[sel].mean())
            row["pairs_per_test"] = float(o.used.mean())
            rows.append(row)
            if (slowdown, threshold) not in ((0.05, 0.05), (0.03, 0.03), (0.03, 0.02)):
                continue
            timers = np.array(
                [histories[h].timers[t] for h, t in zip(o.history, o.test, strict=True)]
            )
            models = np.array([histories[h].model for h in o.history])
            for model in sorted(set(models)):
                for timer in sorted(set(timers)):
                    for label, sel in classes(o, (models == model) & (timers == timer)):
                        if sel.any() and not label.startswith("0-"):
                            tests = {
                                (int(h), int(t))
                                for h, t in zip(o.history[sel], o.test[sel], strict=True)
                            }
                            detail.append(
                                {
                                    "threshold": threshold,
                                    "slowdown": slowdown,
                                    "gpu": model,
                                    "timer": timer,
                                    "class": label,
                                    "tests": len(tests),
                                    "caught": float(caught[sel].mean()),
                                    "unsure": float(np.mean(o.status[sel] == 0)),
                                }
                            )
    return rows, detail


def design_table(histories: list[History], fit: PriorFit) -> list[dict[str, Any]]:
    """The tradeoff the design was chosen from, and what-ifs of the prior."""
    example = [h for h in histories if h.suite == "example"]
    variants = [(pairs.PairDesign(*d), fit.weight, 1.0) for d in DESIGNS]
    chosen = pairs.PairDesign()
    variants += [(chosen, w, 1.0) for w in (0.0, 2.0, 5.0)]
    variants += [(chosen, fit.weight, m) for m in (0.5, 2.0)]
    rows = []
    for design, weight, scale in variants:
        row: dict[str, Any] = {
            "first": design.first,
            "batch": design.batch,
            "cap": design.cap,
            "weight": weight,
            "scale": scale,
        }
        with prior_weight(weight):
            for threshold in (0.05, 0.02):
                cfg = Config(threshold=threshold, design=design, prior_scale=scale)
                o = simulate(example, cfg)
                wide = simulate(example, Config(**{**cfg.__dict__, "alpha": ALPHA * MARGIN}))
                key = f"{threshold:.0%}"
                row[f"false {key}"] = o.runs_with(1)
                row[f"margin {key}"] = wide.runs_with(1)
                row[f"unsure {key}"] = float(np.mean(o.status == 0))
                row[f"pairs {key}"] = float(o.used.mean())
                row[f"pairs per run {key}"] = o.pairs_per_run
                row["runs"] = o.runs
            for slowdown, threshold, lo, hi in ((0.05, 0.05, 20, math.inf), (0.03, 0.03, 20, 100)):
                cfg = Config(
                    slowdown=slowdown, threshold=threshold, design=design, prior_scale=scale
                )
                o = simulate(histories, cfg)
                sel = (o.duration_us >= lo) & (o.duration_us < hi)
                row[f"+{slowdown:.0%} at {threshold:.0%}"] = float(np.mean(o.status[sel] == 1))
        rows.append(row)
    return rows


def fit_lines(fit: PriorFit) -> list[str]:
    scales = ", ".join(f'"{t}": {s:g}' for t, s in fit.scales.items())
    tests = ", ".join(f"{t} {n}" for t, n in fit.tests.items())
    return [
        f"PAIR_PRIOR_SCALE = {{{scales}}}  # tests: {tests}",
        f"PAIR_PRIOR_WEIGHT = {fit.weight:g}  # sd of log spread between tests "
        f"{fit.between_sd:.2f}",
    ]


def aa_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| threshold | tests | 1% gross outliers | runs | runs with a false failure | "
        f"runs with an improved | at {MARGIN}x the level | unsure tests | pairs per test | "
        "pairs per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['threshold']:.0%} | {r['tests']} | {'yes' if r['outliers'] else 'no'} | "
            f"{r['runs']} | {r['false_runs']} ({r['false_rate']:.2%}) | {r['improved_runs']} | "
            f"{r['margin_runs']} | {r['unsure']:.1%} | {r['pairs_per_test']:.2f} | "
            f"{r['pairs_per_run']:.2f} |"
        )
    return lines


def power_lines(rows: list[dict[str, Any]]) -> list[str]:
    labels = [k for k in rows[0] if k.endswith(" us")]
    lines = [
        "| threshold | slowdown | " + " | ".join(labels) + " | pairs per test |",
        "|---|---|" + "---|" * len(labels) + "---|",
    ]
    for r in rows:
        cells = " | ".join(f"{r[k]:.1%}" for k in labels)
        lines.append(
            f"| {r['threshold']:.0%} | +{r['slowdown']:.0%} | {cells} | {r['pairs_per_test']:.2f} |"
        )
    return lines


def detail_lines(rows: list[dict[str, Any]], case: tuple[float, float] | None = None) -> list[str]:
    """The power from 5 us per GPU model and timer; ``case``: (threshold, slowdown) only."""
    lines = [
        "| threshold | slowdown | GPU | timer | duration | tests | caught | unsure |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if case is not None and (r["threshold"], r["slowdown"]) != case:
            continue
        lines.append(
            f"| {r['threshold']:.0%} | +{r['slowdown']:.0%} | {r['gpu']} | {r['timer']} | "
            f"{r['class']} | {r['tests']} | {r['caught']:.1%} | {r['unsure']:.1%} |"
        )
    return lines


def design_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| first, batch, cap | prior weight | prior scale | false failures 5% / 2% | "
        f"at {MARGIN}x the level 5% / 2% | unsure 5% / 2% | pairs per test 5% / 2% | "
        "pairs per run 5% / 2% | +5% at 5%, >= 20 us | +3% at 3%, 20-100 us |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['first']}, {r['batch']}, {r['cap']} | {r['weight']:g} | {r['scale']:g} | "
            f"{r['false 5%']} / {r['false 2%']} of {r['runs']} | "
            f"{r['margin 5%']} / {r['margin 2%']} | "
            f"{r['unsure 5%']:.1%} / {r['unsure 2%']:.1%} | "
            f"{r['pairs 5%']:.2f} / {r['pairs 2%']:.2f} | "
            f"{r['pairs per run 5%']:.2f} / {r['pairs per run 2%']:.2f} | "
            f"{r['+5% at 5%']:.1%} | {r['+3% at 3%']:.1%} |"
        )
    return lines


def lag_one(x: np.ndarray) -> np.ndarray:
    """Per row, the correlation of the ranks of consecutive values."""
    r = np.argsort(np.argsort(x, axis=1), axis=1).astype(float)
    a, b = r[:, :-1] - r[:, :-1].mean(axis=1, keepdims=True), r[:, 1:]
    b = b - b.mean(axis=1, keepdims=True)
    return np.asarray(np.sum(a * b, axis=1) / np.sqrt(np.sum(a**2, axis=1) * np.sum(b**2, axis=1)))


def correlation_table(histories: list[History], seed: int = SEED) -> list[dict[str, Any]]:
    """Whether consecutive sessions, and consecutive pairs' differences (labelled as the
    plugin alternates them), are correlated: the mean lag-1 rank correlation over the tests
    of each history, against its mean over random orders of the same values."""
    rng = np.random.default_rng(seed)
    rows = []
    for h in histories:
        k = h.x.shape[1] // 2 * 2
        alternate = np.where(np.arange(k // 2) % 2 == 0, 1.0, -1.0)
        d = alternate * (h.x[:, 1:k:2] - h.x[:, 0:k:2])
        row: dict[str, Any] = {"history": f"{h.model} {h.gpu[4:12]} {h.suite}"}
        for name, x in (("sessions", h.x), ("pairs", d)):
            shuffled = [lag_one(rng.permuted(x, axis=1)).mean() for _ in range(200)]
            row[name] = float(lag_one(x).mean())
            row[f"{name} independent"] = float(np.mean(shuffled))
        rows.append(row)
    return rows


def beyond_table(
    histories: list[History], replicates: int = 40, seed: int = SEED
) -> list[dict[str, Any]]:
    """Caps the histories are too short to check by blocks: pairs of consecutive sessions
    drawn independently (with replacement, either orientation; the same draws for every test
    of a run), which the pairs' lack of correlation allows. +3% at a 3% threshold, 20-100 us,
    in a 54-test family; at a cap of 10 it repeats the blocks' figure."""
    rng = np.random.default_rng(seed)
    shift = math.log1p(0.03)
    rows = []
    for cap in (10, 16, 20):
        design = pairs.PairDesign(3, cap - 3, cap)
        cfg = Config(slowdown=0.03, threshold=0.03, design=design)
        d, s0, groups, us = [], [], [], []
        for h in histories:
            k = h.x.shape[1]
            for _ in range(replicates):
                j = rng.integers(k - 1, size=cap)
                sign = rng.choice([-1.0, 1.0], size=cap)
                d.append(sign * (h.x[:, j + 1] - h.x[:, j]) + shift)
                s0.append(h.sigma0())
                groups += [f"{h.model} {t}" for t in h.timers]
                us.append(h.duration_us)
        status, used = sequential(np.concatenate(d), np.concatenate(s0), cfg)
        sel = (np.concatenate(us) >= 20) & (np.concatenate(us) < 100)
        group = np.array(groups)
        row: dict[str, Any] = {"cap": cap, "all": float(np.mean(status[sel] == 1))}
        for name in ("H100 cuda-graph", "H200 cuda-graph"):
            row[name] = float(np.mean(status[sel & (group == name)] == 1))
        row["pairs_per_test"] = float(used[sel].mean())
        rows.append(row)
    return rows


def correlation_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| history | sessions: lag-1 rank correlation | independent | pairs' differences | "
        "independent |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['history']} | {r['sessions']:+.3f} | {r['sessions independent']:+.3f} | "
            f"{r['pairs']:+.3f} | {r['pairs independent']:+.3f} |"
        )
    return lines


def beyond_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| cap (pairs drawn independently) | +3% at 3%, 20-100 us | H100 cuda-graph | "
        "H200 cuda-graph | pairs per test |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['cap']} | {r['all']:.1%} | {r['H100 cuda-graph']:.1%} | "
            f"{r['H200 cuda-graph']:.1%} | {r['pairs_per_test']:.2f} |"
        )
    return lines


def history_lines(histories: list[History]) -> list[str]:
    lines = ["| GPU | suite | tests | sessions | timers |", "|---|---|---|---|---|"]
    for h in histories:
        timers = ", ".join(f"{t} {h.timers.count(t)}" for t in sorted(set(h.timers)))
        lines.append(
            f"| {h.model} {h.gpu[4:12]} | {h.suite} | {len(h.keys)} | {h.x.shape[1]} | {timers} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--replicates", type=int, default=10, help="outlier draws per block")
    parser.add_argument("--runs", type=int, default=1000, help="500-test runs")
    parser.add_argument("--json", type=Path, help="also write the tables' data here")
    parser.add_argument(
        "--design",
        type=int,
        nargs=3,
        metavar=("FIRST", "BATCH", "CAP"),
        help="the A/A and power tables of this design (the duos': 2 2 8, a duo being a pair "
        "of processes; the default: pairs.PairDesign())",
    )
    args = parser.parse_args()
    histories = load()
    fit = fit_prior(histories)
    design = pairs.PairDesign(*args.design) if args.design else pairs.PairDesign()
    aa = aa_table(histories, args.replicates, args.runs, design)
    power, detail = power_table(histories, design)
    designs = design_table(histories, fit)
    correlations = correlation_table(histories)
    beyond = beyond_table(histories)
    sections = [
        history_lines(histories),
        correlation_lines(correlations),
        fit_lines(fit),
        [f"design: first {design.first}, batch {design.batch}, cap {design.cap}"],
        aa_lines(aa),
        power_lines(power),
        detail_lines(detail),
        design_lines(designs),
        beyond_lines(beyond),
    ]
    print("\n\n".join("\n".join(s) for s in sections))
    if args.json:
        data = {
            "replicates": args.replicates,
            "runs": args.runs,
            "fit": {"scales": fit.scales, "weight": fit.weight, "tests": fit.tests},
            "design": [design.first, design.batch, design.cap],
            "aa": aa,
            "power": power,
            "detail": detail,
            "designs": designs,
            "correlations": correlations,
            "beyond": beyond,
        }
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
