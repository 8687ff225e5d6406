"""Summarize the runs of bench/ab_checks.sh: per run its seconds, pairs and verdicts; false
verdicts (regressed or improved where nothing changed); the planted slowdowns caught.

    python bench/ab_summary.py LOGS_DIR

A/A runs (aa) and plain runs change nothing: any regressed or improved is false. Slow runs
(slow) plant more work in the user suite's copy kernels (test_copy_blocks) on the working
tree's side only: those must read regressed, the other tests are A/A.
"""

from __future__ import annotations

import collections
import csv
import json
import sys
from pathlib import Path

PLANTED = "test_copy_blocks"
FALSE = {"regressed", "improved"}


def duration_class(ms: float) -> str:
    us = ms * 1e3
    return "<5 us" if us < 5 else "5-20 us" if us < 20 else "20-100 us" if us < 100 else ">=100 us"


def main(logs: Path) -> None:
    rows = list(csv.reader((logs / "runs.tsv").open(), delimiter="\t"))
    print("| run | seconds | exit | pairs | verdicts | false | planted caught |")
    print("|---|---|---|---|---|---|---|")
    caught: dict[tuple[str, str, str], list[bool]] = collections.defaultdict(list)
    totals: collections.Counter[str] = collections.Counter()
    for name, kind, _suite, frac, thr, seconds, rc in rows:
        path = logs / f"{name}.json"
        if not path.exists():
            print(f"| {name} | {seconds} | {rc} | - | no report | - | - |")
            continue
        document = json.loads(path.read_text())
        if kind == "bisect":
            first = (document.get("first_bad") or {}).get("subject", "none")
            cost = document.get("cost", {})
            print(
                f"| {name} | {seconds} | {rc} | {cost.get('pairs', '-')} "
                f"| first bad: {first} | - | - |"
            )
            continue
        results = document["results"]
        statuses = collections.Counter(r["status"] for r in results)
        planted = [r for r in results if kind == "slow" and PLANTED in r["key"]]
        others = [r for r in results if r not in planted]
        false = [r["test"] for r in others if r["status"] in FALSE]
        pairs = (
            max((r.get("history_sessions", 0) for r in results), default=0)
            if kind != "plain"
            else "-"
        )
        got = []
        for r in planted:
            hit = r["status"] == "regressed"
            caught[(frac, thr, duration_class(r["median_ms"]))].append(hit)
            ratio = (r.get("judgement") or {}).get("ratio")
            got.append(
                f"{r['test'].split('[')[-1].rstrip(']')}: {r['status']}"
                + (f" {100 * (ratio - 1):+.1f}%" if ratio else "")
            )
        totals[kind] += 1
        totals[f"{kind}-false"] += bool(false)
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
        print(
            f"| {name} | {seconds} | {rc} | {pairs} | {verdicts} | {', '.join(false) or 0} "
            f"| {'; '.join(got) or '-'} |"
        )
    print()
    for kind in ("aa", "slow", "plain"):
        if totals[kind]:
            print(f"{kind}: {totals[kind]} runs, {totals[f'{kind}-false']} with a false verdict")
    for (frac, thr, cls), hits in sorted(caught.items()):
        print(
            f"+{float(frac):.0%} more work at threshold {thr}, {cls}: "
            f"caught {sum(hits)} of {len(hits)}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
