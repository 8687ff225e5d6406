"""Does setting a test up again in one process move a lockstep pair as a fresh process does?

Input: archives (or folders) of bench/ab_checks.sh plans whose runs are A/A runs of
bench/resetup_suite in lockstep with no fresh processes (``aa:resetup`` steps, AB_ARGS
``--gpubench-pairing=lockstep --gpubench-confirm=0``). Each test is one set-up of a kernel
(its ``case``) in a ``mode`` (``fresh`` inputs, or a held ``pad`` before them), repeated per
process; its one pair gives d = log(head median / base median).

Per case and mode: the sd of d between the set-ups of one process (pooled over the runs),
and the sd between the runs' means of d. Were a new set-up as good as a new process, the
runs' means would spread as the within-process sd over the square root of the set-ups
(the last column near 1); a spread that belongs to each process makes it larger. The
spread between fresh processes of the same kernels is in bench/results/h200-2026-11-29d
(0.3-1.9% for the 1-4.5 µs kernels).

    python bench/resetup_spread.py ARCHIVE...
"""

from __future__ import annotations

import collections
import math
import statistics
import sys
from pathlib import Path

from lockstep_runs import reports


def setup_of(key: str) -> tuple[str, str] | None:
    """(case, mode) of a resetup test's key, or None for another test."""
    if "test_resetup[" not in key:
        return None
    parts = key.split("[", 1)[1].rstrip("]").split("-")
    mode = next((p for p in parts if p in ("fresh", "pad")), None)
    case = next((p for p in parts if p not in ("fresh", "pad") and not p.isdigit()), None)
    return None if mode is None or case is None else (case, mode)


def main(archives: list[Path]) -> int:
    # (case, mode) -> per run, the d of each set-up
    runs: dict[tuple[str, str], list[list[float]]] = collections.defaultdict(list)
    for archive in archives:
        for name, document, _ in reports(archive):
            if "-aa-resetup" not in name:
                continue
            found: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
            for result in document["results"]:
                against, which = result.get("against") or {}, setup_of(result["key"])
                if which is None or not against.get("lockstep") or not against.get("pairs"):
                    continue
                base, head = against["base_sessions"][0], against["head_sessions"][0]
                found[which].append(math.log(head["median_ms"] / base["median_ms"]))
            for which, ds in found.items():
                runs[which].append(ds)
    if not runs:
        print("no A/A run of bench/resetup_suite in lockstep here", file=sys.stderr)
        return 1
    print("case mode: runs x set-ups | sd within a process | sd of the runs' means | ratio")
    for (case, mode), per_run in sorted(runs.items()):
        full = [ds for ds in per_run if len(ds) > 1]
        if not full:
            continue
        within = math.sqrt(statistics.fmean(statistics.variance(ds) for ds in full))
        reps = statistics.fmean(len(ds) for ds in full)
        means = [statistics.fmean(ds) for ds in full]
        between = statistics.stdev(means) if len(means) > 1 else math.nan
        ratio = between / (within / math.sqrt(reps)) if within > 0 else math.nan
        print(
            f"  {case} {mode}: {len(full)} x {reps:.0f} | {within:.3%} | {between:.3%} | "
            f"{ratio:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]]))
