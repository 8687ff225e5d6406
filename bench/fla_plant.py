"""Size a slowdown planted in time on bench/fla_suite's tests (GPU, fla-core installed).

    python bench/fla_plant.py TARGET [--json PATH]

The kernels are a library's, not ours to slow: each test's timed call is followed by a spin
kernel (``torch.cuda._sleep``) on the working tree's side (test_fla.py's PLANTED). The spin
is sized by the clock (``sized``): TARGET times the call's time less the spin's fixed part,
in the spin's cycles at this GPU's clock. A spin adds its cycles and a fixed part besides, its
launch and the gap before the next kernel (0.8-0.9 µs on an H100: 3764 cycles at 1979 per µs
took 2.78 µs, bench/results/h100-2026-12-06e), measured as what a 1 µs spin adds beyond its
cycles to the shortest call (``fixed_us``; its ratio's spread is the fewest µs there).
bench/fla_suite/calibrate_fla.py times each test's call with a spin against the call
without (``reference=``, alternately in one process): a first process with a 1 µs spin for
the call's time, the clock and the fixed part, a second with the spin planted (its own clock
makes its cycles), whose ratio is the check a run's reads are compared with (``checked``;
said on stderr where it reads under the target). A call shorter than the fixed part over
TARGET gets a 1-cycle spin and reads above TARGET. On an H100 the fixed part read 0.77 and
1.04 µs in two calibrations and the plants of 175-558 µs calls read +0.9% to +1.2% (medians
of 17 runs; runs +0.6% to +1.5%, bench/results/h100-2026-12-06f): a spin cannot set a plant
within 0.1%.

Until 2026-12-06 the spin was where a least-squares line through six such ratios (two
processes) reached the target. Each ratio moves by 0.3-0.5% with the call's inputs, placed
anew per case, so for calls of 190-560 µs the line was noise: on an H100 the +1% plants read
+0.7% and +0.9% in time per call and in kernel time alike, the spin adding 3.4 µs to a
554 µs call (bench/results/h100-2026-12-06e).
Prints {test: cycles} for bench/ab_checks.sh's slowtime step; --json writes what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SUITE = Path(__file__).resolve().parent / "fla_suite"
FIRST_US = 1.0
TESTS = (
    "test_rms_norm[4096]",
    "test_rms_norm[16384]",
    "test_layer_norm_residual",
    "test_rms_norm_backward",
    "test_l2norm",
    "test_chunk_gated_delta_rule",
    "test_chunk_delta_rule_backward",
    "test_chunk_simple_gla",
)
_CASE = re.compile(r"test_spin\[k(\d+)\]#(\d+)cycles#vs-reference$")


def ratios_of(report: dict, spins: dict[str, list[float]]) -> dict[str, dict[int, float]]:
    """{test: {cycles: ratio}} from a --gpubench-json report of calibrate_fla.py run with
    FLA_SLEEP_US ``spins``."""
    cases = [test for test, us in spins.items() for _ in us]
    found: dict[str, dict[int, float]] = {}
    for r in report["results"]:
        case = _CASE.match(r.get("test", ""))
        if case and r.get("median_ms") is not None:
            found.setdefault(cases[int(case[1])], {})[int(case[2])] = float(r["median_ms"])
    return found


def times_of(report: dict, spins: dict[str, list[float]]) -> tuple[dict[str, float], float]:
    """Each test's call time (µs: its reference's median over its cases) and the spin's
    cycles per µs (the cycles a case spun for the µs asked) from the report ``ratios_of``
    reads."""
    cases = [(test, us) for test, spins_us in spins.items() for us in spins_us]
    calls: dict[str, list[float]] = {}
    clock: list[float] = []
    for r in report["results"]:
        case = _CASE.match(r.get("test", ""))
        if case and r.get("versus"):
            test, us = cases[int(case[1])]
            calls.setdefault(test, []).append(1e3 * float(r["versus"]["reference_ms"]))
            clock.append(int(case[2]) / us)
    return {t: float(np.median(v)) for t, v in calls.items()}, float(np.median(clock))


def fixed_us(first: dict[str, dict[int, float]], call_us: dict[str, float], per_us: float) -> float:
    """What a spin adds beyond its cycles (µs, at least 0): read on the shortest call, where
    the ratio's spread is the fewest µs."""
    test = min(call_us, key=call_us.__getitem__)
    cycles, ratio = next(iter(first[test].items()))
    return max(0.0, (ratio - 1) * call_us[test] - cycles / per_us)


def sized(call_us: float, cycles_per_us: float, target: float, fixed: float = 0.0) -> int:
    """The spin (cycles, at least 1) that adds ``target`` of the call's time, ``fixed`` µs of
    it whatever its cycles."""
    return max(1, round((target * call_us - fixed) * cycles_per_us))


def measure(
    spins: dict[str, list[float]], tmp: str
) -> tuple[dict, dict[str, dict[int, float]], str]:
    """One fresh process of calibrate_fla.py over ``spins``: its report, the ratios, and its
    output when it failed or measured less than asked ('' when all is there)."""
    out = Path(tmp) / "calibration.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--gpubench"]
        + [f"--gpubench-json={out}", f"--gpubench-dir={tmp}/baselines", "calibrate_fla.py"],
        cwd=SUITE,
        env={**os.environ, "FLA_SLEEP_US": json.dumps(spins)},
        capture_output=True,
        text=True,
    )
    report = json.loads(out.read_text()) if out.exists() else {"results": []}
    ratios = ratios_of(report, spins)
    short = [t for t, us in spins.items() if len(ratios.get(t, {})) != len(us)]
    if proc.returncode or short:
        failed = f"exit {proc.returncode}, not measured: {short}\n{proc.stdout[-3000:]}"
        return report, ratios, failed
    return report, ratios, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=float, help="the slowdown in time, e.g. 0.02")
    parser.add_argument("--json", type=Path, help="write every ratio measured here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spins = {t: [FIRST_US] for t in TESTS}
        report, first, failed = measure(spins, tmp)
        if not failed:
            call_us, per_us = times_of(report, spins)
            untimed = [t for t in TESTS if t not in call_us]
            failed = f"no call time for {untimed}" if untimed else ""
        if not failed:
            fixed = fixed_us(first, call_us, per_us)
            picked = {t: sized(call_us[t], per_us, args.target, fixed) for t in TESTS}
            # In microseconds: the second process's clock makes its own cycles.
            _, second, failed = measure({t: [picked[t] / per_us] for t in TESTS}, tmp)
    if failed:
        # Nothing is planted rather than a part: a run would count misses of nothing.
        print(f"calibration failed: {failed}", file=sys.stderr)
        return 1
    # The second process's cycles (its clock's) for the spin asked: the check's own.
    checked_cycles = {t: next(iter(second[t])) for t in TESTS}
    checked = {t: second[t][checked_cycles[t]] for t in TESTS}
    for test in TESTS:
        if checked[test] < 1 + args.target:
            said = f"{checked_cycles[test]} cycles read +{checked[test] - 1:.2%}"
            print(f"{test}: {said}", file=sys.stderr)
    if args.json:
        table = {"target": args.target, "picked": picked, "checked": checked}
        table["checked_cycles"] = checked_cycles
        table |= {"call_us": call_us, "cycles_per_us": per_us, "fixed_us": fixed}
        table |= {"first": first, "second": second}
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    print(repr(picked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
