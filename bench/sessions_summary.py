"""Summarize many gpubench JSON reports (one per pytest session) of the same suite.

Per session: how many tests failed and with which verdicts (an A/A run must have none).
Per test, across sessions: the timer that judged it, its median, the cross-process CV of its
median, its ratio to the CUPTI device time of one eager call, its gateable slowdown and how
often it was flagged. Usage:

    python bench/sessions_summary.py [--json OUT.json] REPORT.json [REPORT.json ...]

Reports come from ``pytest --gpubench --gpubench-json REPORT.json``; bench/gpu_checks.sh
writes them.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

FAILING = ("regressed", "incomparable")


def load(paths: list[Path]) -> list[dict[str, Any]]:
    sessions = []
    for path in paths:
        try:
            sessions.append({"path": str(path), **json.loads(path.read_text())})
        except (OSError, ValueError) as exc:
            sessions.append({"path": str(path), "error": str(exc), "results": []})
    return sessions


def summarize(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    per_session = []
    per_test: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"medians": [], "timers": set(), "ratios": [], "gates": [], "statuses": []}
    )
    for s in sessions:
        statuses = [r["status"] for r in s["results"]]
        per_session.append(
            {
                "path": s["path"],
                "results": len(statuses),
                "failing": sorted(r["test"] for r in s["results"] if r["status"] in FAILING),
                "confirmed": sum(1 for r in s["results"] if r.get("confirmations")),
                "error": s.get("error", ""),
            }
        )
        for r in s["results"]:
            t = per_test[r["test"]]
            t["medians"].append(r["median_ms"])
            t["timers"].add(r["timer"])
            t["statuses"].append(r["status"])
            if r.get("device_ms"):
                t["ratios"].append(r["summary"]["median_ms"] / r["device_ms"])
            j = r.get("judgement") or {}
            if j.get("gateable") is not None:
                t["gates"].append(max(j["gateable"], r["threshold"]))
    tests = {}
    for name, t in sorted(per_test.items()):
        medians = t["medians"]
        logs = [math.log(m) for m in medians]
        tests[name] = {
            "timer": "/".join(sorted(t["timers"])),
            "sessions": len(medians),
            "median_ms": statistics.median(medians),
            "cv": statistics.stdev(logs) if len(logs) > 1 else None,
            "range": (max(medians) / min(medians) - 1) if medians else None,
            "cupti_ratio": statistics.median(t["ratios"]) if t["ratios"] else None,
            "gate": statistics.median(t["gates"]) if t["gates"] else None,
            "statuses": {s: t["statuses"].count(s) for s in sorted(set(t["statuses"]))},
        }
    return {
        "sessions": per_session,
        "false_failures": sum(len(s["failing"]) for s in per_session),
        "sessions_with_failures": sum(1 for s in per_session if s["failing"]),
        "tests": tests,
    }


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(summary: dict[str, Any]) -> str:
    lines = [
        f"sessions: {len(summary['sessions'])}, with a failing test: "
        f"{summary['sessions_with_failures']}, failing tests in all: {summary['false_failures']}",
        "",
        "| test | timer | sessions | median µs | CV between sessions | range | "
        "median / CUPTI | gate | verdicts |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in summary["tests"].items():
        verdicts = ", ".join(f"{k} {v}" for k, v in t["statuses"].items())
        lines.append(
            f"| {name} | {t['timer']} | {t['sessions']} | {t['median_ms'] * 1e3:.4g} | "
            f"{fmt(t['cv'] and t['cv'] * 100, '.2f')}% | "
            f"{fmt(t['range'] and t['range'] * 100, '.1f')}% | "
            f"{fmt(t['cupti_ratio'], '.3f')} | {fmt(t['gate'] and t['gate'] * 100, '.1f')}% | "
            f"{verdicts} |"
        )
    for s in summary["sessions"]:
        if s["failing"] or s["error"]:
            lines.append(f"- {Path(s['path']).name}: failing {s['failing']} {s['error']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="also write the summary as JSON")
    args = parser.parse_args()
    summary = summarize(load(args.reports))
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1, default=sorted))
    print(table(summary))


if __name__ == "__main__":
    main()
