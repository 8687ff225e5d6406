"""How much a ratio to a reference function moves between sessions, against the times it
divides and against the bound the verdict assumes (judge.rule.ratio_prior).

Input: a baseline file whose measurements hold several sessions each (``pytest
--gpubench-save --gpubench-sessions N`` of a suite whose tests pass ``reference=``; the
example suite does). For each ratio ``<test>#vs-reference`` with its function's own time
``<test>`` (the same paired samples): the standard deviation between sessions of the log of
the ratio's median, of the function's, and of the reference's (the function's over the
ratio, session by session), the share of the two times' variance that the ratio cancels
(1 - var(ratio) / (var(fn) + var(ref))), and the bound's sigma. Usage:

    python bench/ratio_spread.py BASELINE.json [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from pytest_gpubench.core.records import Versus
from pytest_gpubench.judge.rule import ratio_prior

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("baseline", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    found = rows(json.loads(args.baseline.read_text())["benchmarks"])
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
