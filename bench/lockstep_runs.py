"""The lockstep pairs of recorded A/B runs: their spread against the prior, and their
verdicts under the current rule.

Input: archives of bench/ab_checks.sh plans run with
``AB_ARGS=--gpubench-pairing=lockstep`` (bench/results/*/plan-*.tgz, or their folders).
For each A/A run (aa), every measurement timed in lockstep gives one pair's difference
d = log(head median / base median) from the process that ran the tests (its first pair):
per timer and bin of the time per call (judge.pairs.LOCKSTEP_BINS_MS), their robust sd
(1.4826 x the median of |d|, which one excursion does not move) beside the prior's sigma
(judge.pairs.LOCKSTEP_SIGMA); and the same of the more pairs of unsure tests, by where they
were set up (the test's own process, inputs placed anew, or fresh processes). Then every
lockstep measurement of every run, re-judged by judge.pairs.judge_pairs on its recorded
pairs with the run's threshold and family: its verdict then and now. Then what differs
between a duo's two processes: the tests whose pairs all came from one duo, their mean d
(in an A/A run, what the two processes differ by, plus the pairs' own noise over their
count); since duos are units of the verdict, their means, their pairs' spread within, and
what the leading role adds. Then what a process adds to the mean of the pairs it sets up
again (every run, nothing planted: judge.pairs.LOCKSTEP_PROCESS_SIGMA). Last, where each run's
time went: pytest's time, the untimed first calls of both sides (compiles, autotuning), the
timers' set-up, the sampling, the more pairs of unsure tests (the measurements timed in
lockstep in the run's process), the pairs of fresh processes of the tests that could not
run both sides in one process, their duos (and of those, the duo's pairs: set-up and
sampling, its later pairs' counted since 2026-12-02; the rest of a duo is its processes'
start-up, collection, fixtures and first calls), and the rest (start-up, collection,
checkout, the tests' own bodies and checks). And each pair's kernel time beside its time
per call (Sampler.beside, since 685e5e0): the spread of each, and the verdicts of both.

    python bench/lockstep_runs.py ARCHIVE...
"""

from __future__ import annotations

import collections
import io
import json
import math
import re
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any

from pytest_gpubench.core.records import SessionSummary
from pytest_gpubench.judge.pairs import (
    DUO_DESIGN,
    LOCKSTEP_BINS_MS,
    LOCKSTEP_DESIGN,
    judge_pairs,
    lockstep_process_sigma,
    lockstep_sigma0,
)

sys.path.insert(0, str(Path(__file__).parent))
from ab_summary import planted  # noqa: E402

Run = tuple[str, dict[str, Any], str]  # its name, its JSON report, its output
# How far apart a pair's two calls per sample were (calls_apart), by upper edge.
APART = ((1.01, "same"), (1.5, "< 1.5x"), (3.0, "1.5-3x"), (math.inf, ">= 3x"))


def reports(archive: Path) -> list[Run]:
    """(run name, its JSON report, its output) of an archive or folder."""
    texts: dict[str, str] = {}
    found = []
    if archive.is_dir():
        for path in sorted(archive.glob("*-lockstep.json")):
            output = path.with_suffix(".txt")
            text = output.read_text() if output.exists() else ""
            found.append((path.stem, json.loads(path.read_text()), text))
        return found
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            run = name.endswith(("-lockstep.json", "-lockstep.txt"))
            data = tar.extractfile(member) if run else None
            if data is None:
                continue
            if name.endswith(".txt"):
                texts[name.removesuffix(".txt")] = data.read().decode(errors="replace")
            elif name.endswith(".json"):
                found.append((name.removesuffix(".json"), json.load(io.TextIOWrapper(data)), ""))
    return [(name, document, texts.get(name, "")) for name, document, _ in found]


def seconds(pattern: str, text: str) -> float:
    """The seconds a line of a run's output gives (the last such line; 0 where none)."""
    found = re.findall(pattern, text)
    return float(found[-1]) if found else 0.0


def costs_line(name: str, document: dict[str, Any], text: str) -> str:
    """Where a run's time went, in seconds (see the module's docstring)."""
    total: collections.Counter[str] = collections.Counter()
    in_duos: collections.Counter[str] = collections.Counter()
    for result in document["results"]:  # the others' are inside the pairs of processes'
        if (result.get("against") or {}).get("lockstep"):
            duo = "timed in duos" in result.get("reason", "")
            (in_duos if duo else total).update(result.get("costs") or {})
    pytest_s = seconds(r"in ([0-9.]+)s", text)
    apart_s = seconds(r"pairs of fresh processes in ([0-9.]+) s", text)
    duos_s = seconds(r"duos? \(a fresh process per side, at once\) in ([0-9.]+) s", text)
    steps = {
        "first calls": total["first_call_s"] + total["other_first_call_s"],
        "timer set-up": total["timer_setup_s"],
        "sampling": total["sampling_s"],
        "more pairs": total["confirm_s"],
        "apart": apart_s,
        "duos": duos_s,
    }
    rest = pytest_s - sum(steps.values()) if pytest_s else math.nan
    shown = " | ".join(f"{label} {value:.0f}" for label, value in steps.items())
    paired = sum(in_duos[k] for k in ("lock_wait_s", "timer_setup_s", "sampling_s", "confirm_s"))
    shown += f" (pairs {paired:.0f})" if duos_s else ""
    return f"  {name}: pytest {pytest_s:.0f} | {shown} | rest {rest:.0f}"


def pairs_of(
    result: dict[str, Any], number: str = "median_ms"
) -> tuple[list[float], list[float]] | None:
    """The base and head medians (ms) of a lockstep measurement's pairs (``number``:
    "beside_ms", their other time, None where a pair lacks it)."""
    against = result.get("against") or {}
    if not against.get("lockstep") or not against.get("pairs"):
        return None
    n = against["pairs"]
    sides = [[s.get(number) for s in against[k][:n]] for k in ("base_sessions", "head_sessions")]
    if any(v is None for side in sides for v in side):
        return None
    return sides[0], sides[1]


def more_pairs(runs: list[Run]) -> dict[tuple[str, int, str], list[float]]:
    """The A/A runs' d of each pair after a test's first, by timer, bin of the time per call
    and where the pair was set up: in the test's own process (its note says so), or in fresh
    processes."""
    found: dict[tuple[str, int, str], list[float]] = collections.defaultdict(list)
    for name, document, text in runs:
        if "-aa-" not in name:
            continue
        # Since 2026-12-01 (0e62bd2) a duo's calls take their more pairs in the duo.
        in_duo = "pairs each" in text or "where unsure)" in text
        for result in document["results"]:
            pairs = pairs_of(result)
            if pairs is None or len(pairs[0]) < 2:
                continue
            base, head = pairs
            where = "this process" if "in this process" in result.get("note", "") else "fresh"
            if "timed in duos" in result.get("reason", ""):
                where = "its duo" if in_duo else "a duo each"
            cell = sum(base[0] >= edge for edge in LOCKSTEP_BINS_MS)
            found[(result["timer"], cell, where)] += [
                math.log(h / b) for b, h in zip(base[1:], head[1:], strict=True)
            ]
    return found


def duo_offsets(runs: list[Run]) -> dict[str, list[tuple[float, float, int]]]:
    """The A/A runs' tests whose pairs all came from one duo (since 2026-12-01, 23810a6),
    by timer: each one's mean d over its pairs, their variance and how many."""
    found: dict[str, list[tuple[float, float, int]]] = collections.defaultdict(list)
    for name, document, text in runs:
        if "-aa-" not in name or "where unsure)" not in text or "pairs each" in text:
            continue
        for result in document["results"]:
            pairs = pairs_of(result)
            if pairs is None or len(pairs[0]) < 2 or "timed in duos" not in result["reason"]:
                continue
            ds = [math.log(h / b) for b, h in zip(*pairs, strict=True)]
            found[result["timer"]].append((statistics.fmean(ds), statistics.variance(ds), len(ds)))
    return found


def duo_units(runs: list[Run]) -> dict[str, list[tuple[list[float], float]]]:
    """The A/A runs' tests timed in duos judged as units (since 2026-12-02, 379fd16: their
    report names each pair's duo), by timer: each one's duo means (its working tree leading
    the odd duos) and its pairs' variance within a duo."""
    found: dict[str, list[tuple[list[float], float]]] = collections.defaultdict(list)
    for name, document, _ in runs:
        if "-aa-" not in name:
            continue
        for result in document["results"]:
            pairs, duos = pairs_of(result), (result.get("against") or {}).get("duos")
            if pairs is None or not duos:
                continue
            by_duo: dict[int, list[float]] = collections.defaultdict(list)
            for duo, b, h in zip(duos, *pairs, strict=True):
                by_duo[duo].append(math.log(h / b))
            inside = [statistics.variance(ds) for ds in by_duo.values() if len(ds) > 1]
            means = [statistics.fmean(by_duo[d]) for d in sorted(by_duo)]
            found[result["timer"]].append((means, statistics.fmean(inside) if inside else 0.0))
    return found


def process_parts(runs: list[Run]) -> dict[tuple[str, int], list[tuple[float, float, int]]]:
    """Every run's measurements whose more pairs came from their own process (its note
    says so; not a planted copy), by timer and bin of the time per call: each one's mean
    d over its pairs (its change plus what its process added: nothing planted, no change),
    their variance and how many (at least 3)."""
    found: dict[tuple[str, int], list[tuple[float, float, int]]] = collections.defaultdict(list)
    for name, document, _ in runs:
        for result in document["results"]:
            if "in this process" not in result.get("note", ""):
                continue
            kind, suite = name.split("-")[1:3]
            if planted(kind, suite, result["key"]):
                continue
            pairs = pairs_of(result)
            if pairs is None or len(pairs[0]) < 3:
                continue
            ds = [math.log(h / b) for b, h in zip(*pairs, strict=True)]
            cell = sum(pairs[0][0] >= edge for edge in LOCKSTEP_BINS_MS)
            found[(result["timer"], cell)].append(
                (statistics.fmean(ds), statistics.variance(ds), len(ds))
            )
    return found


def calls_apart(runs: list[Run]) -> dict[tuple[str, str], list[float]]:
    """Every pair of an unchanged test timed by a graph timer, by timer and how far apart its
    two sides' calls per sample were (the larger count over the smaller): its d signed so
    that + is the side of fewer calls reading slower."""
    found: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for name, document, _ in runs:
        kind, suite = name.split("-")[1:3]
        for result in document["results"]:
            timer, against = result["timer"], result.get("against") or {}
            if timer not in ("cuda-graph", "cupti-graph") or planted(kind, suite, result["key"]):
                continue
            sides = (against.get("base_sessions") or [], against.get("head_sessions") or [])
            for b, h in zip(*sides, strict=False):  # (a side that lost a pair)
                calls = (b.get("calls_per_sample", 1), h.get("calls_per_sample", 1))
                apart = max(calls) / min(calls)
                cell = next(c for edge, c in APART if apart < edge)
                sign = 1 if calls[1] < calls[0] else -1
                found[(timer, cell)].append(sign * math.log(h["median_ms"] / b["median_ms"]))
    return found


def positions(runs: list[Run]) -> dict[tuple[str, int], list[float]]:
    """Per timer and bin, each A/A measurement's position effect in its first pair: the
    median log of the working tree's samples taken first in their pair (after its own
    sample of the pair before: A B B A ...) less that of those taken second; where both
    positions hold 5 samples or more. The working tree's side is collect_pair's first, going
    first in the odd pairs counted from the warmup's; a duo's (whose leader may be either
    side) is left out."""
    found: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    for name, document, _ in runs:
        for result in document["results"] if "-aa-" in name else ():
            against = result.get("against") or {}
            sessions = against.get("head_sessions") or []
            if not against.get("lockstep") or not sessions or "duos" in result.get("reason", ""):
                continue
            samples = result["samples_ms"][: sessions[0]["n"]]
            taken = result.get("warmup") or 0
            logs: tuple[list[float], list[float]] = ([], [])
            for i, value in enumerate(samples):
                logs[(taken + i) % 2].append(math.log(value))
            if min(map(len, logs)) >= 5:
                cell = sum(sessions[0]["median_ms"] >= edge for edge in LOCKSTEP_BINS_MS)
                found[(result["timer"], cell)].append(
                    statistics.median(logs[0]) - statistics.median(logs[1])
                )
    return found


def main(archives: list[Path]) -> int:
    runs = [run for archive in archives for run in reports(archive)]
    if not runs:
        print("no lockstep run in these archives", file=sys.stderr)
        return 1
    spread: dict[tuple[str, int], list[float]] = collections.defaultdict(list)
    for name, document, _ in runs:
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
    print("\nA/A: the more pairs' d (after a test's first), by where set up: robust sd | pairs")
    for (timer, cell, where), ds in sorted(more_pairs(runs).items()):
        robust = 1.4826 * statistics.median(abs(d) for d in ds)
        print(f"  {timer} {edges[cell]}, {where}: {robust:.3%} | {len(ds)}")
    print(
        "\nA/A: what differs between a duo's two processes, in all of its pairs: per timer, "
        "sqrt(mean of a test's mean d squared - mean of its pairs' variance / n) | its "
        "pairs' sd | tests"
    )
    for timer, cells in sorted(duo_offsets(runs).items()):
        between = statistics.fmean(m * m for m, _, _ in cells)
        within = statistics.fmean(v / n for _, v, n in cells)
        process = math.sqrt(max(0.0, between - within))
        inside = math.sqrt(statistics.fmean(v for _, v, _ in cells))
        print(f"  {timer}: {process:.3%} | {inside:.3%} | {len(cells)}")
    print(
        "\nA/A: duos judged as units: per timer, the rms of a duo's mean d | of its pairs' "
        "sd within it | of a test's role effect (its odd duos' mean less its even ones', "
        "halved: what leading adds) | tests | duos"
    )
    for timer, units in sorted(duo_units(runs).items()):
        means = [m for ms, _ in units for m in ms]
        roles = [
            (statistics.fmean(ms[0::2]) - statistics.fmean(ms[1::2])) / 2
            for ms, _ in units
            if len(ms) > 1
        ]
        rms = math.sqrt(statistics.fmean(m * m for m in means))
        inside = math.sqrt(statistics.fmean(v for _, v in units))
        role = math.sqrt(statistics.fmean(r * r for r in roles)) if roles else math.nan
        print(f"  {timer}: {rms:.3%} | {inside:.3%} | {role:.3%} | {len(units)} | {len(means)}")
    print(
        "\nWhat a process adds to the mean of the pairs it sets up again (no change planted): "
        "per timer and time per call, sqrt(mean of a test's mean d squared - mean of its "
        "pairs' variance / n) | the prior (judge.pairs.LOCKSTEP_PROCESS_SIGMA) | tests"
    )
    for (timer, cell), cells in sorted(process_parts(runs).items()):
        between = statistics.fmean(m * m for m, _, _ in cells)
        within = statistics.fmean(v / n for _, v, n in cells)
        prior = lockstep_process_sigma((0.001, 0.02, 0.2)[cell], timer)
        print(
            f"  {timer} {edges[cell]}: {math.sqrt(max(0.0, between - within)):.3%} | "
            f"{prior:.3%} | {len(cells)}"
        )
    print(
        "\nThe two sides' calls per sample (no change planted): per graph timer and how far "
        "apart the counts were, pairs | the median d, + where the side of fewer calls read "
        "slower | the robust sd of d (1.4826 x its median absolute deviation)"
    )
    for (timer, cell), ds in sorted(calls_apart(runs).items()):
        mid = statistics.median(ds)
        sd = 1.4826 * statistics.median(abs(d - mid) for d in ds)
        print(f"  {timer} {cell}: {len(ds)} | {mid:+.2%} | {sd:.2%}")
    print(
        "\nKernel time beside time per call (since 685e5e0): per run kind, timer and time per "
        "call, the robust sd of a pair's d of each (the timer's number | the other) | pairs; "
        "then the other's verdicts"
    )
    besides: dict[tuple[str, str, int], list[tuple[float, float]]] = collections.defaultdict(list)
    statuses: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for name, document, _ in runs:
        kind = name.split("-")[1] if "-" in name else name
        for result in document["results"]:
            found, other = pairs_of(result), pairs_of(result, "beside_ms")
            if found is None or other is None:
                continue
            cell = sum(found[0][0] >= edge for edge in LOCKSTEP_BINS_MS)
            for b, h, ob, oh in zip(*found, *other, strict=True):
                besides[(kind, result["timer"], cell)].append((math.log(h / b), math.log(oh / ob)))
            if result.get("beside"):
                statuses[kind][f"{result['status']}/{result['beside']['status']}"] += 1
    for (kind, timer, cell), ds in sorted(besides.items()):
        own, theirs = (1.4826 * statistics.median(abs(d[i]) for d in ds) for i in (0, 1))
        print(f"  {kind} {timer} {edges[cell]}: {own:.3%} | {theirs:.3%} | {len(ds)}")
    for kind, counts in sorted(statuses.items()):
        print(f"  {kind}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    print("\nEvery lockstep measurement re-judged: run, test, pairs, d per pair, then -> now")
    for name, document, _ in runs:
        settings = document.get("settings", {})
        threshold = float(settings.get("threshold", 0.05))
        family = max(1, len(document["results"]))
        for result in document["results"]:
            found = pairs_of(result)
            if found is None:
                continue
            base, head = found
            duos = (result.get("against") or {}).get("duos", [])
            now = judge_pairs(
                [SessionSummary(m, 1, math.nan) for m in base],
                [SessionSummary(m, 1, math.nan) for m in head],
                threshold=threshold,
                alpha=float(settings.get("alpha", 0.01)),
                family=family,
                timer=result["timer"],
                design=DUO_DESIGN if duos else LOCKSTEP_DESIGN,
                lockstep=True,
                duos=duos,
            )
            moved = [f"{math.log(h / b):+.2%}" for b, h in zip(base, head, strict=True)]
            then = result["status"]
            # Other launches than the revision's make a same or unsure one changed (versus.ab).
            kept = now.status.value == then or (
                then == "changed" and now.status.value in ("same", "unsure")
            )
            mark = "" if kept else "  <- moved"
            print(
                f"  {name} {result['test']}: {len(base)}, {' '.join(moved)}: "
                f"{result['status']} -> {now.status.value}{mark}"
            )
    print(
        "\nA/A: the working tree's side taken first in its pair against second (its first "
        "pair's samples): median | tests beyond -0.5% | beyond +0.5% | tests"
    )
    for (timer, cell), effects in sorted(positions(runs).items()):
        low, high = sum(e < -0.005 for e in effects), sum(e > 0.005 for e in effects)
        mid = statistics.median(effects)
        print(f"  {timer} {edges[cell]}: {mid:+.2%} | {low} | {high} | {len(effects)}")
    print("\nWhere each run's time went (s): pytest's time, then its steps")
    for name, document, text in runs:
        print(costs_line(name, document, text))
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]]))
