"""How much a ratio to a reference function moves between sessions, against the times it
divides and against the bound the verdict assumes (judge.rule.ratio_prior).

Input: a baseline file whose measurements hold several sessions each (``pytest
--gpubench-save --gpubench-sessions N`` of a suite whose tests pass ``reference=``; the
example suite does). For each ratio ``<test>#vs-reference`` with its function's own time
``<test>`` (the same paired samples): the standard deviation between sessions of the log of
the ratio's median, of the function's, and of the reference's (the function's over the
ratio, session by session), the share of the two times' variance that the ratio cancels
(1 - var(ratio) / (var(fn) + var(ref))), and the bound's sigma.

With ``--pairs N``, A/A pairs of the ratios as a run against a revision would judge them
(judge.pairs.decide_pairs, N pairs, no more, alpha 0.01 over the file's measurements): every
block of 2N consecutive sessions, forward or backward in time, circularly, labelled base/head
or the mirror (as bench/pair_resample.py does with times); the verdicts counted per timer.
tests/judge/test_pair_resample.py runs it on the recorded ratio sessions. Usage:

    python bench/ratio_spread.py BASELINE.json [--json OUT.json] [--pairs N]
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pytest_gpubench.core.records import Versus
from pytest_gpubench.judge import pairs
from pytest_gpubench.judge.rule import corrected_alpha, ratio_prior

SUFFIX = "#vs-reference"


def sessions(entry: dict[str, Any]) -> dict[str, float]:
    """Session id -> median of the measurement's current history (its binary's)."""
    history = (
        entry["history"]
        if "history" in entry
        else next(iter(entry["binaries"].values()))["history"]
    )
    return {r["session"]: float(r["median_ms"]) for r in history}


def sd_log(values: list[float]) -> float:
    return statistics.stdev([math.log(v) for v in values]) if len(values) > 1 else math.nan


def rows(benchmarks: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for key, entry in sorted(benchmarks.items()):
        if not key.endswith(SUFFIX) or key[: -len(SUFFIX)] not in benchmarks:
            continue
        ratio = sessions(entry)
        fn = sessions(benchmarks[key[: -len(SUFFIX)]])
        common = sorted(set(ratio) & set(fn))
        if len(common) < 3 or "versus" not in entry:
            continue
        versus = Versus(**entry["versus"])
        ref = [fn[s] / ratio[s] for s in common]
        sd_r, sd_f, sd_ref = (
            sd_log([ratio[s] for s in common]),
            sd_log([fn[s] for s in common]),
            sd_log(ref),
        )
        both = sd_f**2 + sd_ref**2
        out.append(
            {
                "test": key[: -len(SUFFIX)],
                "sessions": len(common),
                "fn_ms": versus.fn_ms,
                "reference_ms": versus.reference_ms,
                "ratio": statistics.median(ratio[s] for s in common),
                "sd_ratio": sd_r,
                "sd_fn": sd_f,
                "sd_reference": sd_ref,
                "cancelled": 1 - sd_r**2 / both if both > 0 else math.nan,
                "bound": ratio_prior(versus, entry["timer"].removesuffix(":ratio")).sigma,
            }
        )
    return out


def ratio_pairs(
    benchmarks: dict[str, dict[str, Any]], count: int, alpha: float = 0.01
) -> collections.Counter[tuple[str, str]]:
    """(timer, verdict) -> A/A runs of the ratios, each block of ``2 * count`` sessions."""
    alpha1 = corrected_alpha(alpha, len(benchmarks), False)
    design = pairs.PairDesign(first=count, batch=1, cap=count)
    alternate = np.where(np.arange(count) % 2 == 0, 1.0, -1.0)
    found: collections.Counter[tuple[str, str]] = collections.Counter()
    for key, entry in sorted(benchmarks.items()):
        if not key.endswith(SUFFIX):
            continue
        x = np.log(list(sessions(entry).values()))
        v = entry["versus"]
        versus = Versus(
            v["fn_ms"], v["reference_ms"], v.get("fn_launches", 1), v.get("reference_launches", 1)
        )
        sigma0 = pairs.pair_sigma0(float(np.exp(np.median(x))), entry["timer"], 1, versus)
        for start in range(len(x)):
            for step in (1, -1):
                for sign in (1.0, -1.0):
                    block = x[(start + step * np.arange(2 * count)) % len(x)]
                    d = sign * alternate * (block[1::2] - block[0::2])
                    dec = pairs.decide_pairs(
                        d[None, :], np.array([sigma0]), threshold=0.05, alpha1=alpha1, design=design
                    )
                    direction = int(dec.direction[0])
                    verdict = {1: "regressed", -1: "improved"}.get(direction) or (
                        "same" if dec.same[0] else "unsure"
                    )
                    found[entry["timer"], verdict] += 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--pairs", type=int, help="Also judge A/A pairs of N pairs")
    args = parser.parse_args()
    benchmarks = json.loads(args.baseline.read_text())["benchmarks"]
    if args.pairs:
        for (timer, verdict), runs in sorted(ratio_pairs(benchmarks, args.pairs).items()):
            print(f"{timer}: {verdict} in {runs} A/A runs of {args.pairs} pairs")
    found = rows(benchmarks)
    if not found:
        print("no ratio with 3 sessions or more in", args.baseline, file=sys.stderr)
        return 1
    head = ("test", "sessions", "fn", "reference", "ratio", "sd ratio", "sd fn", "sd ref")
    print("| " + " | ".join((*head, "cancelled", "bound")) + " |")
    print("|---" * (len(head) + 2) + "|")
    for r in found:
        cells = [r["test"], str(r["sessions"])]
        cells += [f"{r[k] * 1e3:.3g} µs" for k in ("fn_ms", "reference_ms")]
        cells.append(f"{r['ratio']:.3g}")
        cells += [f"{r[k]:.2%}" for k in ("sd_ratio", "sd_fn", "sd_reference")]
        cells += [f"{r['cancelled']:.2f}", f"{r['bound']:.2%}"]
        print("| " + " | ".join(cells) + " |")
    over = [r for r in found if r["sd_ratio"] > r["bound"]]
    cancelled = [r["cancelled"] for r in found if not math.isnan(r["cancelled"])]
    print(
        f"\n{len(found)} ratios; sd between sessions above the bound: {len(over)}; median share "
        f"of the times' variance the ratio cancels: {statistics.median(cancelled):.2f}; median "
        f"sd ratio / bound: {statistics.median(r['sd_ratio'] / r['bound'] for r in found):.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(found, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
