"""Summarize issue 20's runs of bench/ab_checks.sh on a machine with two GPUs.

    python bench/two_gpus.py LOGS_DIR_OR_ARCHIVE

Plain runs (``xdist:SUITE:WORKERS:CACHE`` steps): each run with workers against the serial
run of the same cache state that follows it (warm runs in order: the k-th -n 2 with the k-th
-n 0): whether their verdicts are the same, the test phase, the timing on the busiest GPU
(lock wait, timer set-up and sampling summed over its tests: the two GPUs time at once) and
the first calls (compiling), with pytest's wall time; where a GPU waited for the device
lock, how long, and the busiest GPU's timing less the waits. Then each plain run on its
own: its flags, its sampling per measurement, its times against the history's.

A/B runs (``aa`` steps, with and without -n): their verdicts against each other, their wall
time, and from the JSON where each side ran: each pair's two sessions, base and head, on
one GPU, and on each GPU the processes in the order they started (``B``: base, ``H``: head),
which the A/B design makes ``BHHB`` for each two pairs (in a later look, each GPU
runs its block of the pairs).
"""

from __future__ import annotations

import collections
import csv
import io
import json
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from xdist_compare import gpu_of, read_run

# A run whose GPU waited longer than this for the device lock says how long, and what the
# busiest GPU timed less the waits (a worker's tests wait while fresh processes confirm
# beside them: commits c281cbd-65b9de6, not kept).
WAITS_SHOWN_S = 1.0


def rows_of(logs: Path) -> list[dict[str, str]]:
    text = (logs / "runs.tsv").read_text()
    fields = ("name", "kind", "suite", "frac", "thr", "seconds", "rc")
    return [
        dict(zip(fields, r, strict=False)) for r in csv.reader(io.StringIO(text), delimiter="\t")
    ]


def expected_order(pairs: int) -> str:
    """The sides of ``pairs`` pairs in the order a relay starts them: base first in odd pairs."""
    return "".join("BH" if i % 2 else "HB" for i in range(1, pairs + 1))


def sides_by_gpu(document: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """Each GPU's sessions in the order they started, as a string of sides; and the tests
    with a pair whose two sessions ran on different GPUs, or on a GPU not recorded."""
    started: dict[str, dict[str, tuple[str, str]]] = collections.defaultdict(dict)
    split: list[str] = []
    for r in document["results"]:
        against = r.get("against") or {}
        infos = r.get("session_infos") or {}

        def gpu(record: dict[str, Any], side: str, infos: dict[str, Any] = infos) -> str | None:
            info = infos.get(record["session"])
            if info is None or info.get("machine") is None:
                return None
            started[info["machine"]][record["session"]] = (info["date"], side)
            return str(info["machine"])

        pairs = zip(
            against.get("base_sessions", []), against.get("head_sessions", []), strict=False
        )
        where = [(gpu(b, "B"), gpu(h, "H")) for b, h in pairs]
        if any(b is None or b != h for b, h in where):
            split.append(r["key"])
    order = {
        gpu: "".join(side for _, side in sorted(sessions.values()))
        for gpu, sessions in started.items()
    }
    return order, split


def verdicts(document: dict[str, Any]) -> dict[str, str]:
    return {r["key"]: r["status"] for r in document["results"]}


def differing(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def per_gpu(path: Path) -> dict[str, int]:
    """Measurements a run took on each GPU."""
    results = json.loads(path.read_text())["results"]
    return dict(collections.Counter(gpu_of(r) for r in results))


def plain_runs(logs: Path, rows: list[dict[str, str]]) -> None:
    runs = [r for r in rows if r["kind"] == "xdist"]
    print("## Plain runs: -n W against -n 0\n")
    print(
        "| runs | caches | verdicts | not ok | confirmed | measurements per GPU | test phase | "
        "timing, busiest GPU | first calls, summed per GPU | pytest wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    waits: list[str] = []
    for cache in ("cold", "warm"):
        xdist = [r for r in runs if r["thr"] == cache and r["frac"] != "0"]
        serial = [r for r in runs if r["thr"] == cache and r["frac"] == "0"]
        for a_row, b_row in zip(xdist, serial, strict=False):
            try:
                a, b = (
                    read_run(logs / a_row["name"], a_row["frac"]),
                    read_run(logs / b_row["name"], 0),
                )
            except (OSError, ValueError, KeyError) as exc:
                print(f"| {a_row['name']} / {b_row['name']} | {cache} | unreadable: {exc} |")
                continue
            diff = differing(a["verdicts"], b["verdicts"])
            shares = "/".join(
                str(n) for _, n in sorted(per_gpu(logs / f"{a_row['name']}.json").items())
            )
            first = [
                "/".join(
                    f"{steps.get('first_call_s', 0.0):.1f}"
                    for _, steps in sorted(x["costs"].items())
                )
                for x in (a, b)
            ]
            ratio = f" ({a['phase_s'] / b['phase_s']:.2f})" if a["phase_s"] and b["phase_s"] else ""
            timing = f"{a['measuring_s']} vs {b['measuring_s']} s" + (
                f" (**{a['measuring_s'] / b['measuring_s']:.2f}**)" if b["measuring_s"] else ""
            )
            print(
                f"| {a_row['name']} / {b_row['name']} | {cache} | "
                f"{'same' if not diff else 'differ: ' + ', '.join(diff[:3])} | "
                f"{sum(v != 'ok' for v in a['verdicts'].values())} / "
                f"{sum(v != 'ok' for v in b['verdicts'].values())} | "
                f"{a['confirmed']} / {b['confirmed']} | {shares} | "
                f"{a['phase_s']} vs {b['phase_s']} s{ratio} | {timing} | "
                f"{first[0]} vs {first[1]} s | {a['wall_s']} vs {b['wall_s']} s |"
            )
            if a["waited_s"] > WAITS_SHOWN_S:
                waits.append(
                    f"{a_row['name']}: a GPU waited {a['waited_s']} s for the device lock; less "
                    f"the waits, the busiest GPU timed {a['unwaited_s']} s "
                    f"({a['unwaited_s'] / b['measuring_s']:.2f} of the serial run's timing)"
                )
    if waits:
        print("\n" + "\n".join(f"- {line}" for line in waits))


def against_history(r: dict[str, Any]) -> bool:
    """A result whose time is comparable with its history's: of the history's binary (not
    changed), a time (not a ratio to a reference), with a reference time."""
    return r["status"] != "changed" and ":ratio" not in r["timer"] and bool(r.get("reference_ms"))


def offsets(logs: Path, rows: list[dict[str, str]]) -> None:
    """Each warm plain run's times against the recorded history's (the median of the
    tests' ratios to their reference), by GPU and duration: what timing on both GPUs at
    once, or on the GPU the history was not recorded on, shifts. Tests of another binary
    (changed) and ratios to a reference are left out."""
    ratios: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for row in rows:
        if row["kind"] != "xdist" or row["thr"] != "warm":
            continue
        for r in json.loads((logs / f"{row['name']}.json").read_text())["results"]:
            if not against_history(r):
                continue
            where = f"-n {row['frac']}, {gpu_of(r)}"
            size = ">= 20 us" if r["median_ms"] >= 0.02 else "< 20 us"
            ratios[(where, size)].append(r["median_ms"] / r["reference_ms"])
    print("\n## Warm runs against the history: median time / history's, by GPU\n")
    print("| run, GPU | tests | < 20 us | >= 20 us |")
    print("|---|---|---|---|")
    for where in sorted({w for w, _ in ratios}):
        cells = [ratios.get((where, size), []) for size in ("< 20 us", ">= 20 us")]
        shown = [f"{statistics.median(c):.4f} ({len(c)})" if c else "-" for c in cells]
        print(f"| {where} | {sum(map(len, cells))} | {shown[0]} | {shown[1]} |")


def each_run(logs: Path, rows: list[dict[str, str]]) -> None:
    """Each plain run on its own: its first looks flagged (confirmed in fresh processes), its
    sampling per measurement, and its times against the recorded history's (the median of
    the tests' ratios, as :func:`offsets` takes them: :func:`against_history`)."""
    print("\n## Each plain run\n")
    print(
        "| run | workers | measurements | flagged | sampling per measurement | "
        "median time / history's, < 20 us | >= 20 us | samples' p90 / median, graphs of "
        "15-200 us |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        if row["kind"] != "xdist":
            continue
        results = json.loads((logs / f"{row['name']}.json").read_text())["results"]
        kept = list(filter(against_history, results))
        cells = [
            [r["median_ms"] / r["reference_ms"] for r in kept if (r["median_ms"] >= 0.02) == big]
            for big in (False, True)
        ]
        shown = [f"{statistics.median(c):.4f} ({len(c)})" if c else "-" for c in cells]
        sampling = statistics.mean(r["costs"]["sampling_s"] for r in results)
        flagged = sum(bool(r["confirmations"]) for r in results)
        tails = [tail(r["samples_ms"]) for r in results if tails_shown(r)]
        spread = f"{statistics.mean(tails):.4f} ({len(tails)})" if tails else "-"
        print(
            f"| {row['name']} | {row['frac']} | {len(results)} | {flagged} | "
            f"{sampling:.3f} s | {shown[0]} | {shown[1]} | {spread} |"
        )


def tails_shown(r: dict[str, Any]) -> bool:
    """The tests whose samples' tail the table shows: CUDA-graph timings of 15-200 us, the
    class that first looks under -n 2 flagged (bench/results/h200-2026-11-29), with 10 samples
    or more."""
    return (
        r["timer"] == "cuda-graph"
        and 0.015 <= r["median_ms"] < 0.2
        and len(r.get("samples_ms") or []) >= 10
    )


def tail(samples: list[float]) -> float:
    """The 90th percentile of a test's samples over their median."""
    return statistics.quantiles(samples, n=10)[-1] / statistics.median(samples)


def ab_runs(logs: Path, rows: list[dict[str, str]]) -> None:
    runs = [r for r in rows if r["kind"] == "aa"]
    print("\n## A/B runs against HEAD: with and without -n\n")
    print(
        "| run | workers | wall | pairs | verdicts | not same | "
        "tests with each pair on one GPU | each GPU's processes in order |"
    )
    print("|---|---|---|---|---|---|---|---|")
    found: dict[str, dict[str, str]] = {}
    for row in runs:
        path = logs / f"{row['name']}.json"
        if not path.exists():
            print(
                f"| {row['name']} | {row['frac'] or 0} | {row['seconds']} s | "
                f"no report (exit {row['rc']}) |"
            )
            continue
        document = json.loads(path.read_text())
        found[row["name"]] = verdicts(document)
        order, split = sides_by_gpu(document)
        pairs = max((r.get("against", {}) or {}).get("pairs", 0) for r in document["results"])
        designed = {gpu: sides == expected_order(len(sides) // 2) for gpu, sides in order.items()}
        shown = "; ".join(
            f"{gpu[:12]}…: {sides} ({'as designed' if designed[gpu] else 'NOT as designed'})"
            for gpu, sides in sorted(order.items())
        )
        print(
            f"| {row['name']} | {row['frac'] or 0} | {row['seconds']} s | {pairs} | "
            f"{dict(collections.Counter(found[row['name']].values()))} | "
            f"{sum(v != 'same' for v in found[row['name']].values())} | "
            f"{len(document['results']) - len(split)} of {len(document['results'])} | {shown} |"
        )
    names = list(found)
    for a, b in zip(names, names[1:], strict=False):
        diff = differing(found[a], found[b])
        said = "the same" if not diff else "differ on " + ", ".join(diff)
        print(f"\n{a} against {b}: verdicts {said}")


def main() -> None:
    source = Path(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        logs = source
        if source.is_file():
            with tarfile.open(source) as archive:
                archive.extractall(tmp, filter="data")
            logs = Path(tmp)
        rows = rows_of(logs)
        plain_runs(logs, rows)
        offsets(logs, rows)
        each_run(logs, rows)
        ab_runs(logs, rows)


if __name__ == "__main__":
    main()
