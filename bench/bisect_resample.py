"""What gpubench bisect answers on real GPU sessions: its search over recorded A/A pairs.

    python bench/bisect_resample.py [--trials N] [--json OUT.json] [--alone]   # seconds

Each trial is a bisection of 16 commits after GOOD, run by the plugin's own search
(``pytest_gpubench.versus.bisect.search``: BAD first, then halving, an unsure step again with
twice the pairs up to 12, the tests that regressed at BAD followed, timed alone in BAD's
family) with a step runner made of recorded sessions instead of GPU processes. A step of ``n``
pairs at a commit is a block of ``2 n`` consecutive sessions of one recorded history
(bench/pair_resample.py: any start, either direction, circularly, labelled base/head or the
mirror), the same block for the whole selection, judged as the step's A/B run judges it
(exactly ``n`` pairs, alpha 0.01 over the selection: ``judge.pairs.judge_pairs``, each test's
prior by its timer and duration); at and after the slow commit every head session of the
selection is slower by the slowdown. Each step draws a block of its own.

The selection is ``--tests`` tests (default 3, as ``-k test_copy_blocks`` selects three
copies) drawn from one of the eight recorded histories (H100 and H200, example and user
suites), all slowed alike; the slow commit is drawn uniformly from 1 to 16. A trial's answer
is right (the slow commit), wrong (another commit: a false answer), or none (the search
stopped unsure, or said BAD is not slower). With no slowdown, any answer is a false one.

Limits: 12 pairs are 24 sessions, more than some histories hold (16-25): a block then wraps
around and reuses sessions. Steps are independent draws; a real bisection's steps run minutes
apart on one machine. Never a simulated session: only recorded ones, shifted.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpubench.core.records import SessionSummary, node_id
from pytest_gpubench.judge import pairs
from pytest_gpubench.versus import bisect

HERE = Path(__file__).resolve().parent
SEED = 20261124
COMMITS = 16
ALPHA = 0.01
THRESHOLD = 0.05
SLOWDOWNS = (0.0, 0.03, 0.05, 0.08, 0.10)


def _pair_resample() -> Any:
    spec = importlib.util.spec_from_file_location("pair_resample", HERE / "pair_resample.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pair_resample"] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Trial:
    history: str
    slow_at: int  # 1-based; 0: no slow commit
    answer: str  # right, wrong, none
    state: str
    steps: int
    pairs: int


def trial(
    history: Any,
    tests: np.ndarray,
    slowdown: float,
    slow_at: int,
    rng: np.random.Generator,
    threshold: float = THRESHOLD,
    alone: bool = False,
) -> Trial:
    """One bisection over COMMITS commits of the tests ``tests`` of ``history``."""
    commits = [bisect.Commit(f"{i:040x}", f"change {i}") for i in range(1, COMMITS + 1)]
    keys = [history.keys[t] for t in tests]
    shift = math.log1p(slowdown)
    k = history.x.shape[1]

    def run(commit: bisect.Commit, n: int, focus: bisect.Focus) -> bisect.StepRun:
        position = int(commit.subject.split()[-1])
        start, step = int(rng.integers(k)), int(rng.choice([1, -1]))
        x = history.x[np.ix_(tests, (start + step * np.arange(2 * n)) % k)]
        # Pair i's two sessions, base first in odd pairs (1-based), or the mirror labelling.
        first = np.arange(n) % 2 == 0
        if rng.random() < 0.5:
            first = ~first
        base = np.where(first, x[:, 0::2], x[:, 1::2])
        head = np.where(first, x[:, 1::2], x[:, 0::2])
        if slow_at and position >= slow_at:
            head = head + shift
        readings = {}
        # A later step times the tests BAD regressed alone, in BAD's family.
        timed = [i for i, key in enumerate(keys) if node_id(key) not in focus.left_out]
        family = len(timed) if alone else max(len(timed), focus.family)
        for i in timed:
            key = keys[i]
            judgement = pairs.judge_pairs(
                [SessionSummary(math.exp(v), 20, math.nan) for v in base[i]],
                [SessionSummary(math.exp(v), 20, math.nan) for v in head[i]],
                threshold=threshold,
                alpha=ALPHA,
                family=family,
                timer=history.timers[t := int(tests[i])],
                launches=history.launches[t],
                design=pairs.PairDesign(first=n, batch=1, cap=n),  # a step: exactly n
            )
            readings[key] = bisect.Reading(
                key,
                judgement.status,
                ratio=judgement.ratio,
                ratio_high=judgement.ratio_high,
                threshold=threshold,
                pairs=n,
                ratio_low=judgement.ratio_low,
            )
        return bisect.StepRun(readings, n, 0.0, family)

    found = bisect.search(
        bisect.Commit("0" * 40, "good"),
        "GOOD",
        commits,
        run,
        pairs=bisect.DEFAULT_PAIRS,
        max_pairs=bisect.DEFAULT_MAX_PAIRS,
        clock=lambda: 0.0,
    )
    first = found.first_bad
    if first is None:
        answer = "none"
    elif slow_at and first.subject == f"change {slow_at}":
        answer = "right"
    else:
        answer = "wrong"
    return Trial(history.name, slow_at, answer, found.state.value, found.tested, found.pairs)


def table(
    histories: list[Any], trials: int, tests: int, seed: int = SEED, alone: bool = False
) -> list[dict[str, Any]]:
    rows = []
    for slowdown in SLOWDOWNS:
        rng = np.random.default_rng([seed, round(slowdown * 1e4), tests])
        done = []
        for _ in range(trials):
            h = histories[int(rng.integers(len(histories)))]
            chosen = rng.choice(len(h.keys), size=min(tests, len(h.keys)), replace=False)
            slow_at = int(rng.integers(1, COMMITS + 1)) if slowdown else 0
            done.append(trial(h, np.sort(chosen), slowdown, slow_at, rng, alone=alone))
        answers = Counter(t.answer for t in done)
        rows.append(
            {
                "slowdown": slowdown,
                "threshold": THRESHOLD,
                "tests": tests,
                "trials": trials,
                "right": answers["right"],
                "wrong": answers["wrong"],
                "none": answers["none"],
                "states": dict(Counter(t.state for t in done)),
                "mean_steps": float(np.mean([t.steps for t in done])),
                "mean_pairs": float(np.mean([t.pairs for t in done])),
                "max_pairs": int(max(t.pairs for t in done)),
            }
        )
    return rows


def lines(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| slowdown | threshold | trials | right | wrong (false answers) | no answer | "
        "commits tested (mean) | pairs (mean, max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['slowdown']:.0%} | {r['threshold']:.0%} | {r['trials']} | {r['right']} | "
            f"{r['wrong']} | {r['none']} | {r['mean_steps']:.1f} | "
            f"{r['mean_pairs']:.1f}, {r['max_pairs']} |"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--alone",
        action="store_true",
        help="later steps judged in the family of what they time, not BAD's (not the rule)",
    )
    args = parser.parse_args()
    histories = _pair_resample().load()
    rows = table(histories, args.trials, args.tests, alone=args.alone)
    print("\n".join(lines(rows)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
