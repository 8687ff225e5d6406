"""The lockstep pairs of recorded A/B runs: their spread against the prior, and their
verdicts under the current rule.

Input: archives of bench/ab_checks.sh plans run with
``AB_ARGS=--gpubench-pairing=lockstep`` (bench/results/*/plan-*.tgz, or their folders).
For each A/A run (aa), every measurement timed in lockstep gives one pair's difference
d = log(head median / base median) from the process that ran the tests (its first pair):
per timer and bin of the time per call (judge.pairs.LOCKSTEP_BINS_MS), their robust sd
(1.4826 x the median of |d|, which one excursion does not move) beside the prior's sigma
(judge.pairs.LOCKSTEP_SIGMA). Then every lockstep measurement of every run, re-judged by
judge.pairs.judge_pairs on its recorded pairs with the run's threshold and family: its
verdict then and now.

    python bench/lockstep_runs.py ARCHIVE...
"""

from __future__ import annotations

import collections
import io
import json
import math
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any

from pytest_gpubench.core.records import SessionSummary
from pytest_gpubench.judge.pairs import (
    LOCKSTEP_BINS_MS,
    LOCKSTEP_DESIGN,
    judge_pairs,
    lockstep_sigma0,
)


def reports(archive: Path) -> list[tuple[str, dict[str, Any]]]:
    """(run name, its JSON report) of an archive or folder."""
    found = []
    if archive.is_dir():
        for path in sorted(archive.glob("*.json")):
            found.append((path.stem, json.loads(path.read_text())))
        return found
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if name.endswith("-lockstep.json"):
                data = tar.extractfile(member)
                assert data is not None
                found.append((name.removesuffix(".json"), json.load(io.TextIOWrapper(data))))
    return found


def pairs_of(result: dict[str, Any]) -> tuple[list[float], list[float]] | None:
    """The base and head medians (ms) of a lockstep measurement's pairs."""
    against = result.get("against") or {}
    if not against.get("lockstep") or not against.get("pairs"):
        return None
    n = against["pairs"]
    return (
        [s["median_ms"] for s in against["base_sessions"][:n]],
        [s["median_ms"] for s in against["head_sessions"][:n]],
    )


def main(archives: list[Path]) -> int:
    runs = [run for archive in archives for run in reports(archive)]
    if not runs:
        print("no lockstep run in these archives", file=sys.stderr)
        return 1
    spread: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    for name, document in runs:
        if "-aa-" not in name:
            continue
        for result in document["results"]:
            found = pairs_of(result)
            if found is not None:
                (base, *_), (head, *_) = found
                cell = sum(base >= edge for edge in LOCKSTEP_BINS_MS)
                spread[(result["timer"], cell)].append(math.log(head / base))
    edges = ("< 5 µs", "5-100 µs", ">= 100 µs")
    print("A/A: one pair's d per timer and time per call: robust sd | prior sigma | tests")
    for (timer, cell), ds in sorted(spread.items()):
        robust = 1.4826 * statistics.median(abs(d) for d in ds)
        prior = lockstep_sigma0((0.001, 0.02, 0.2)[cell], timer)
        print(f"  {timer} {edges[cell]}: {robust:.3%} | {prior:.3%} | {len(ds)}")
    print("\nEvery lockstep measurement re-judged: run, test, pairs, d per pair, then -> now")
    for name, document in runs:
        settings = document.get("settings", {})
        threshold = float(settings.get("threshold", 0.05))
        family = max(1, len(document["results"]))
        for result in document["results"]:
            found = pairs_of(result)
            if found is None:
                continue
            base, head = found
            now = judge_pairs(
                [SessionSummary(m, 1, math.nan) for m in base],
                [SessionSummary(m, 1, math.nan) for m in head],
                threshold=threshold,
                alpha=float(settings.get("alpha", 0.01)),
                family=family,
                timer=result["timer"],
                design=LOCKSTEP_DESIGN,
                lockstep=True,
            )
            moved = [f"{math.log(h / b):+.2%}" for b, h in zip(base, head, strict=True)]
            then = result["status"]
            # Other launches than the revision's make a same or unsure one changed (run.ab).
            kept = now.status.value == then or (
                then == "changed" and now.status.value in ("same", "unsure")
            )
            mark = "" if kept else "  <- moved"
            print(
                f"  {name} {result['test']}: {len(base)}, {' '.join(moved)}: "
                f"{result['status']} -> {now.status.value}{mark}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]]))
