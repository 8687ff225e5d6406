"""The lockstep rule with its second process, replayed on recorded A/A processes (issue 44).

Every measurement of a committed A/A run timed in lockstep in the run's own process is one
recorded process of its test (key: the test and its timer): its first pair, and where the
run found the test unsure, the 4 more pairs that process set up again. Each process is
judged as a run judges it (judge.pairs.judge_pairs, the lockstep design, alpha 0.01 over
the run's measurements): on its first pair, then on its five where it took more; where every
pair took the kernel time beside the time per call (since 2026-12-02), on both numbers, each
at half the level, the kernel time deciding where the time per call is unsure
(versus.ab.with_kernel_time). A failure (`regressed`) is judged again against each other
recorded process of the test that has five pairs (always one of another run: outside the
first), and stands where judge.pairs.second_process_agrees says that process bears it out
by a number that failed it; the expected failures of a process are its flag times the
share of second processes that agree. A process left unsure at the cap while reading beyond
the threshold by either number is decided by each such second process: a failure where that
one's own pairs fail it the way the first read (versus.lockstep._unsure_beyond).

A process whose call held its inputs where they were ("inputs placed anew for 0 of 1 call":
a closure's before 442e9cf, ``setup=``'s or a global's since) is left out: on a GPU such a
call takes its more pairs from fresh processes since 14f4564, and on two H100s one
process's placement kept its sides 2.5-3.9% apart.

Then the same with every pair's difference shifted by +s, as if a change of s were planted
in every process. A process of one recorded pair that the shift leaves unsure is left out
(its more pairs were never taken), so detection is read on the processes that took five:
the tests that were unsure in their A/A run, mostly the shortest kernels; the count of
processes used says how many.

    python bench/lockstep_resample.py [ARCHIVE...] [--design FIRST,BATCH,CAP] [--min-pairs N]

(default: every committed archive, the lockstep default design; --min-pairs 10 and a few
designs compare them on the same processes). ``--pair-places``: the tests whose pairs read
alike by index; ``--copy-order``: per test, a pair's spread with and without the order in
which its sides were copied (alternating since 7cba070) taken out.
"""

from __future__ import annotations

import argparse
import collections
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from pytest_gpubench.core.records import Judgement, SessionSummary, Status
from pytest_gpubench.judge.pairs import (
    LOCKSTEP_DESIGN,
    PairDesign,
    judge_pairs,
    lockstep_process_sigma,
    second_process_agrees,
)
from pytest_gpubench.versus.ab import with_kernel_time

sys.path.insert(0, str(Path(__file__).parent))
from ab_summary import SLOW, committed_archives, mismeasured, planted  # noqa: E402
from lockstep_runs import pairs_of, reports  # noqa: E402

ALPHA = 0.01
BINS_US = (5.0, 20.0, 100.0)  # the tally's classes: under 5 µs, 5-20, 20-100, from 100
CHECKS = ((0.0, 0.01), (0.0, 0.02), (0.0, 0.05), (0.01, 0.01), (0.02, 0.02), (0.05, 0.02))


@dataclass(frozen=True)
class Process:
    """One recorded process of a test: its pairs' base and head medians (ms), the run's
    family, and its pairs' kernel times where every pair took them (else empty)."""

    key: tuple[str, str]
    run: str
    base: tuple[float, ...]
    head: tuple[float, ...]
    family: int
    # Each pair's kernel times (None where a side did not take it), empty where none did.
    kernel: tuple[tuple[float | None, ...], tuple[float | None, ...]] | tuple[()] = ()


def processes(archives: list[Path]) -> list[Process]:
    """The unchanged tests' measurements timed in lockstep with every pair from the run's
    process: every test of an A/A run, the tests of a slowdown run that nothing was planted in."""
    found = []
    for archive in archives:
        for name, document, _ in reports(archive):
            kind, suite = name.split("-")[1:3]
            if kind != "aa" and kind not in SLOW:
                continue
            family = max(1, len(document["results"]))
            for result in document["results"]:
                pairs = pairs_of(result)
                if pairs is None or "timed in duos" in result.get("reason", ""):
                    continue
                if planted(kind, suite, result["key"]) or mismeasured(str(archive), result["key"]):
                    continue  # an unchanged test only: an A/A run's, a slowdown run's others
                note = result.get("note", "")
                if len(pairs[0]) > 1 and "in this process" not in note:
                    continue  # its more pairs came from fresh processes
                moved = re.search(r"inputs placed anew for (\d+) of (\d+) call", note)
                if moved and int(moved[1]) < int(moved[2]):
                    continue  # held in place: its more pairs come from fresh processes now
                key = (result["test"], result["timer"])
                run = f"{archive.parent.name}/{archive.name}:{name}"
                kernel = kernel_times(result)
                found.append(Process(key, run, tuple(pairs[0]), tuple(pairs[1]), family, kernel))
    return found


def kernel_times(
    result: dict,
) -> tuple[tuple[float | None, ...], tuple[float | None, ...]] | tuple[()]:
    """Each pair's kernel time on each side (None where not taken); empty where none was."""
    against = result["against"]
    n = against["pairs"]
    sides = tuple(
        tuple(s.get("beside_ms") for s in against[k][:n])
        for k in ("base_sessions", "head_sessions")
    )
    return (sides[0], sides[1]) if any(v is not None for v in sides[0] + sides[1]) else ()


@dataclass(frozen=True)
class Judged:
    """A process's verdict on its first ``n`` pairs: the status, the time per call's
    judgement and the kernel time's (None where it took none)."""

    status: Status
    time: Judgement
    kernel: Judgement | None
    more: bool  # the run would take more pairs (an unsure test, its numbers apart too)


def _judge(
    base: tuple[float, ...],
    head: tuple[float, ...],
    timer: str,
    family: int,
    factor: float,
    threshold: float,
    design: PairDesign,
) -> Judgement:
    return judge_pairs(
        [SessionSummary(b, 1, math.nan) for b in base],
        [SessionSummary(h * factor, 1, math.nan) for h in head],
        threshold=threshold,
        alpha=ALPHA,
        family=family,
        timer=timer,
        # launches left at 1 (the archives keep no launch count): it matters only to a timer
        # LOCKSTEP_SIGMA has no table for (`cupti`: 2 of the recorded processes).
        design=design,
        lockstep=True,
    )


def judged(
    p: Process, n: int, shift: float, threshold: float, design: PairDesign = LOCKSTEP_DESIGN
) -> Judged:
    """As a run judges it: both numbers where the process took both, at half the level each
    (a planted change shifts both alike)."""
    factor = math.exp(shift)
    # The pairs that took the kernel time on both sides, as versus.ab.paired_verdict takes them.
    both = [(b, h) for b, h in list(zip(*p.kernel, strict=True))[:n] if None not in (b, h)]
    numbers = 2 if both else 1
    time = _judge(p.base[:n], p.head[:n], p.key[1], p.family * numbers, factor, threshold, design)
    if not both:
        return Judged(time.status, time, None, time.needs_confirmation)
    base, head = (tuple(v for v in side if v is not None) for side in zip(*both, strict=True))
    kernel = _judge(base, head, "cupti-graph", p.family * 2, factor, threshold, design)
    status = with_kernel_time(time, kernel)[0]
    more = time.needs_confirmation or (status is Status.UNSURE and design.next_batch(n) > 0)
    return Judged(status, time, kernel, more)


def first_process(p: Process, shift: float, threshold: float, design: PairDesign) -> Judged | None:
    """The run's verdict on its own process's pairs, look by look as the design takes them;
    None where it would have taken more pairs than were recorded."""
    looked = looks(p, shift, threshold, design)
    return None if looked is None else looked[1]


def looks(
    p: Process, shift: float, threshold: float, design: PairDesign
) -> tuple[int, Judged] | None:
    """The pairs the run's own process took and its verdict on them (first_process)."""
    n = design.first
    while True:
        if n > len(p.base):
            return None
        j = judged(p, n, shift, threshold, design)
        if not (j.more and design.next_batch(n)):
            return n, j
        n += design.next_batch(n)


def mean_pairs(found: list[Process], threshold: float, design: PairDesign) -> float:
    """The pairs an unchanged process takes by ``design`` at ``threshold``, on average over
    those it decides within their recorded pairs (its cost: each pair after the first is
    one set up again)."""
    taken = [looked[0] for p in found if (looked := looks(p, 0.0, threshold, design))]
    return statistics.fmean(taken) if taken else math.nan


def failure_share(
    p: Process,
    others: list[Process],
    shift: float,
    threshold: float,
    design: PairDesign = LOCKSTEP_DESIGN,
) -> tuple[float, bool, bool, bool] | None:
    """(the share of second processes bearing out its failure or deciding it, whether its
    own pairs failed it, whether it was unsure beyond the threshold, whether they read it
    ``improved``); None where the rule would have needed pairs not recorded, or no second
    process has the design's cap. An ``improved`` fails nothing by default, so no second
    process is asked and a run reports it as it reads: where nothing faster was planted, a
    false verdict."""
    first = first_process(p, shift, threshold, design)
    if first is None:
        return None
    beyond = unsure_beyond(first, threshold)
    if first.status is not Status.REGRESSED and not beyond:
        return 0.0, False, False, first.status is Status.IMPROVED
    seconds = [o for o in others if len(o.base) >= design.cap]
    if not seconds:
        return None
    if beyond:  # a second process decides: its own pairs fail it, the way this one read
        slower = all(j.ratio > 1 for j in (first.time, first.kernel) if j and j.ratio)
        decided = [judged(o, design.cap, shift, threshold, design).status for o in seconds]
        return slower * decided.count(Status.REGRESSED) / len(decided), False, True, False
    agree = [
        bears_out(first, judged(o, design.cap, shift, threshold, design), p, threshold)
        for o in seconds
    ]
    return sum(agree) / len(agree), True, False, False


def unsure_beyond(first: Judged, threshold: float) -> bool:
    """Unsure at the cap, reading beyond the threshold by either number: as
    versus.lockstep._unsure_beyond, which a second process then decides."""
    edge = math.log1p(threshold)
    return first.status is Status.UNSURE and any(
        j.ratio is not None and j.ratio > 0 and abs(math.log(j.ratio)) >= edge
        for j in (first.time, first.kernel)
        if j is not None
    )


def bears_out(first: Judged, second: Judged, p: Process, threshold: float) -> bool:
    """Whether a second process bears out a failure by a number that failed it, as
    versus.lockstep asks: each of the two that moved as the verdict did."""
    asked = [(first.time, second.time, p.key[1])] if first.time.status is first.status else []
    if first.kernel is not None and first.kernel.status is first.status and second.kernel:
        asked.append((first.kernel, second.kernel, "cupti-graph"))
    return any(
        second_process_agrees(
            mine,
            theirs,
            threshold=threshold,
            alpha=ALPHA,
            process_sigma=lockstep_process_sigma(p.base[0], timer),
        )
        for mine, theirs, timer in asked
    )


def bin_of(ms: float) -> str:
    us = ms * 1e3
    edges = ("< 5 µs", "5-20 µs", "20-100 µs", ">= 100 µs")
    return edges[sum(us >= e for e in BINS_US)]


def table(found: list[Process], design: PairDesign = LOCKSTEP_DESIGN) -> list[dict[str, object]]:
    """Per check (shift, threshold) and bin: processes used, left out, flagged by their own
    pairs, failures expected after the second process, and those read faster (improved)."""
    by_key: dict[tuple[str, str], list[Process]] = collections.defaultdict(list)
    for p in found:
        by_key[p.key].append(p)
    rows = []
    for shift, threshold in CHECKS:
        cells: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0, 0.0, 0, 0])
        for p in found:
            others = [o for o in by_key[p.key] if o.run != p.run]
            share = failure_share(p, others, shift, threshold, design)
            cell = cells[bin_of(p.base[0])]
            if share is None:
                cell[1] += 1
                continue
            cell[0] += 1
            cell[2] += share[1]
            cell[3] += share[0]
            cell[4] += share[2]
            cell[5] += share[3]
        for where, (used, left, flagged, failed, asked, faster) in sorted(cells.items()):
            rows.append(
                {
                    "shift": shift,
                    "threshold": threshold,
                    "bin": where,
                    "used": int(used),
                    "left_out": int(left),
                    "flagged": int(flagged),
                    "asked": int(asked),
                    "failures": failed,
                    "improved": int(faster),
                }
            )
    return rows


def cell_notes(row: dict[str, object]) -> str:
    """The cell's " + k unsure", k the processes unsure beyond the threshold (a second process
    decided them), and ", k improved", the processes read faster, else nothing."""
    unsure = f" + {row['asked']} unsure" if row["asked"] else ""
    return unsure + (f", {row['improved']} improved" if row["improved"] else "")


def markdown(rows: list[dict[str, object]]) -> str:
    """The table: per check, per bin of the time per call, the processes failed by their own
    pairs (+ unsure beyond the threshold, read faster) -> the failures expected after the
    second process, of the processes used."""
    bins = ("< 5 µs", "5-20 µs", "20-100 µs", ">= 100 µs")
    out = [
        "| change | threshold | " + " | ".join(bins) + " |",
        "|---|---|" + "---|" * len(bins),
    ]
    for shift, threshold in CHECKS:
        cells = {
            r["bin"]: f"{r['flagged']}{cell_notes(r)} -> {float(r['failures']):.1f} of {r['used']}"  # type: ignore[arg-type]
            for r in rows
            if (r["shift"], r["threshold"]) == (shift, threshold)
        }
        out.append(
            f"| +{shift:.0%} | {threshold:.0%} | "
            + " | ".join(cells.get(b, "-") for b in bins)
            + " |"
        )
    return "\n".join(out) + "\n"


def pair_places(found: list[Process], pairs: int = 5) -> list[tuple[float, str, str, int]]:
    """Per test with 3 or more recorded processes of ``pairs`` pairs: whether its pairs set
    up again read alike at the same index in every process (their inputs placed anew, the
    pads drawn from a stream seeded alike in each process before 2026-12-07): the p-value of
    a one-way ANOVA of each such pair's difference less its process's mean, grouped by
    index; the test, its timer and its processes. Sorted by p-value."""
    by_key: dict[tuple[str, str], list[list[float]]] = collections.defaultdict(list)
    for p in found:
        if len(p.base) >= pairs:
            d = [math.log(h / b) for b, h in zip(p.base[1:pairs], p.head[1:pairs], strict=True)]
            by_key[p.key].append([v - sum(d) / len(d) for v in d])
    rows = []
    for key, rows_ in by_key.items():
        if len(rows_) >= 3:
            groups = list(zip(*rows_, strict=True))
            rows.append((float(stats.f_oneway(*groups).pvalue), *key, len(rows_)))
    return sorted(rows)


def copy_order(found: list[Process], pairs: int = 10) -> list[tuple[str, int, float, float, float]]:
    """Per test with processes of ``pairs`` pairs: the median over its processes of a pair's
    sd (%), of the residual sd once the copy order is a covariate (+1 where the revision's
    side was copied first, the odd pairs set up again; -1 the even ones; 0 the first pair,
    not copied), and of that order's effect; with its process count. Sorted by how much
    the covariate narrows the spread."""
    by_test: dict[str, list[tuple[float, float, float]]] = collections.defaultdict(list)
    order = np.array([0.0] + [1.0 if i % 2 else -1.0 for i in range(1, pairs)])
    design = np.column_stack([np.ones(pairs), order])
    for p in found:
        if len(p.base) < pairs:
            continue
        d = np.array([100 * math.log(h / b) for b, h in zip(p.base, p.head, strict=True)])[:pairs]
        beta = np.linalg.lstsq(design, d, rcond=None)[0]
        residual = d - design @ beta
        by_test[p.key[0]].append(
            (float(d.std(ddof=1)), math.sqrt(float(residual @ residual) / (pairs - 2)), beta[1])
        )
    rows = [
        (test, len(v), *(statistics.median(x[i] for x in v) for i in range(3)))
        for test, v in by_test.items()
    ]
    return sorted(rows, key=lambda r: -r[2] / max(r[3], 1e-9))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("archives", nargs="*", type=Path)
    parser.add_argument(
        "--design",
        default=f"{LOCKSTEP_DESIGN.first},{LOCKSTEP_DESIGN.batch},{LOCKSTEP_DESIGN.cap}",
        help="FIRST,BATCH,CAP: the pair design to replay (default: the lockstep default's)",
    )
    parser.add_argument(
        "--min-pairs",
        type=int,
        default=1,
        help="only processes that took this many pairs or more (designs on the same processes)",
    )
    parser.add_argument(
        "--pair-places",
        action="store_true",
        help="instead: the tests whose pairs read alike at the same index in every process",
    )
    parser.add_argument(
        "--copy-order",
        action="store_true",
        help="instead: per test, a pair's spread with the sides' copy order taken out",
    )
    args = parser.parse_args(argv)
    first, batch, cap = (int(v) for v in args.design.split(","))
    design = PairDesign(first=first, batch=batch, cap=cap)
    found = [
        p for p in processes(args.archives or committed_archives()) if len(p.base) >= args.min_pairs
    ]
    if not found:
        print("no A/A process timed in lockstep in these archives", file=sys.stderr)
        return 1
    if args.pair_places:
        rows = pair_places(found)
        small = sum(r[0] < 0.01 for r in rows)
        print(f"{small} of {len(rows)} tests with p < 0.01 (by chance: {0.01 * len(rows):.1f})")
        for pvalue, test, timer, n in rows[:small]:
            print(f"  {pvalue:.1e}  {test} ({timer}, {n} processes)")
        return 0
    if args.copy_order:
        rows = copy_order(found)
        print("| test | processes | sd of a pair | with the copy order out | its effect |")
        print("|---|---|---|---|---|")
        for test, n, plain, residual, effect in rows:
            print(f"| {test} | {n} | {plain:.2f}% | {residual:.2f}% | {effect:+.2f}% |")
        return 0
    tests = len({p.key for p in found})
    print(
        f"{len(found)} recorded processes of {tests} tests (A/A, lockstep, own pairs), {design}\n"
    )
    print(markdown(table(found, design)), end="")
    cost = ", ".join(f"{t:.0%} {mean_pairs(found, t, design):.2f}" for t in (0.01, 0.02, 0.05))
    print(f"\nPairs an unchanged process took, mean: {cost}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
