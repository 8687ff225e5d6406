"""Does where a kernel's buffers lie change its time? (issue 44: a lockstep side offset)

In one process, a memory-bound kernel (``torch.mul(x, 2, out=y)``) is timed on copies of
its input and output placed behind pads of random sizes (as lockstep's ``placed_anew``
places a side's inputs), each placement timed twice, apart; then the spread of time
between placements against the spread between the two timings of one placement.
A spread between placements well over the repeat spread says placement moves the time.
Then two sides placed as lockstep places them in turn (in_order).
Usage (a GPU): python bench/placement_probe.py [--places 16] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys

import torch


def timed(fn, calls: int = 200, reps: int = 5) -> float:
    """Median over ``reps`` of the mean µs per call of ``calls`` back-to-back calls."""
    fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        means.append(start.elapsed_time(end) * 1e3 / calls)
    return statistics.median(means)


def probe(nbytes: int, pad_max: int, places: int, draw: random.Random) -> dict[str, object]:
    source = torch.randn(nbytes // 4, device="cuda")
    held: list[tuple[torch.Tensor, torch.Tensor]] = []
    pads: list[torch.Tensor] = []
    for _ in range(places):
        pads.append(torch.empty(draw.randrange(pad_max), dtype=torch.uint8, device="cuda"))
        x = source.clone()
        pads.append(torch.empty(draw.randrange(pad_max), dtype=torch.uint8, device="cuda"))
        held.append((x, torch.empty_like(x)))
    order = list(range(places))
    first = {i: timed(lambda i=i: torch.mul(held[i][0], 2, out=held[i][1])) for i in order}
    draw.shuffle(order)
    second = {i: timed(lambda i=i: torch.mul(held[i][0], 2, out=held[i][1])) for i in order}
    mean = statistics.fmean(list(first.values()) + list(second.values()))
    place = [100 * ((first[i] + second[i]) / 2 / mean - 1) for i in range(places)]
    repeat = [100 * (first[i] - second[i]) / mean / 2**0.5 for i in range(places)]
    return {
        "mib": nbytes >> 20,
        "pad_max_mib": pad_max >> 20,
        "us": round(mean, 3),
        "place_sd_pct": round(statistics.stdev(place), 3),
        "place_range_pct": [round(min(place), 2), round(max(place), 2)],
        "repeat_sd_pct": round(statistics.stdev(repeat), 3),
        "place_pct": [round(p, 2) for p in place],
    }


def in_order(nbytes: int, sets: int, draw: random.Random) -> dict[str, object]:
    """As lockstep's pairs set up again place a call's two sides (timing.device.placed_anew:
    a pad, the first side's copy, a pad, the other's, freed after the pair): ``sets`` such
    placements, the side copied first alternating, each side's ``torch.mul(x, 2)`` (its
    output allocated by the call) timed in ABBA blocks. Per set the first-copied side's time
    over the other's: alike in every set says the allocation order, not the pads, places
    the sides."""
    source = torch.randn(nbytes // 4, device="cuda")
    firsts = []
    for k in range(sets):
        pads, copies = [], []
        for _ in range(2):
            pads.append(torch.empty(draw.randrange(4 << 20), dtype=torch.uint8, device="cuda"))
            copies.append(source.clone())
        a, b = copies if k % 2 == 0 else copies[::-1]  # a: side A's, whichever was first
        ta = tb = 0.0
        for block in range(4):
            order = ((a, "a"), (b, "b")) if block in (0, 3) else ((b, "b"), (a, "a"))
            for x, side in order:
                t = timed(lambda x=x: torch.mul(x, 2), calls=100, reps=3)
                ta, tb = (ta + t, tb) if side == "a" else (ta, tb + t)
        first, second = (ta, tb) if k % 2 == 0 else (tb, ta)
        firsts.append(100 * (first / second - 1))
        del pads, copies, a, b
    return {
        "mib": nbytes >> 20,
        "first_over_second_pct": [round(f, 2) for f in firsts],
        "mean_pct": round(statistics.fmean(firsts), 3),
        "sd_pct": round(statistics.stdev(firsts), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--places", type=int, default=16)
    parser.add_argument("--json")
    args = parser.parse_args()
    draw = random.Random()
    rows = []
    for mib in (4, 16, 64):
        for pad_mib in (4, 64):
            rows.append(probe(mib << 20, pad_mib << 20, args.places, draw))
            torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}; {args.places} placements each, timed twice")
    print("| MiB | pads < MiB | µs | sd between places | range | sd of a repeat |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["place_range_pct"]
        print(
            f"| {r['mib']} | {r['pad_max_mib']} | {r['us']} | {r['place_sd_pct']}% "
            f"| {lo}..{hi}% | {r['repeat_sd_pct']}% |"
        )
    orders = [in_order(mib << 20, args.places, draw) for mib in (4, 16, 64)]
    print("\nTwo sides copied in turn, the first-copied's time over the other's, per set:")
    print("| MiB | mean | sd | sets |")
    print("|---|---|---|---|")
    for o in orders:
        sets = " ".join(f"{v:+.2f}" for v in o["first_over_second_pct"])
        print(f"| {o['mib']} | {o['mean_pct']:+.2f}% | {o['sd_pct']}% | {sets} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"places": rows, "orders": orders}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
