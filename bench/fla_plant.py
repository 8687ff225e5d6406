"""Size a slowdown planted in time on bench/fla_suite's tests (GPU, fla-core installed).

    python bench/fla_plant.py TARGET [--json PATH]

The kernels are a library's, not ours to slow: each test's timed call is followed by a spin
kernel (``torch.cuda._sleep``) on the working tree's side (test_fla.py's PLANTED). A spin
adds its cycles and a launch's gap, so it is sized by measurement, as
bench/calibrate_slowdown.py sizes the user suite's copies: bench/fla_suite/calibrate_fla.py
times each test's call with a spin against the call without (``reference=``, alternately in
one process). A first run spins 1 and 8 µs; a second 0.9, 1, 1.1 and 1.25 times where the
first's line reaches TARGET. The spin planted is where the least-squares line through all six
ratios reaches 1 + TARGET (``fitted``; past the spins measured, said on stderr). Not the
smallest spin whose ratio reached it, as before 2026-12-06: one process's ratio of these
calls moves by 0.3-0.5% (their inputs placed anew), more than the second run's spins change
it (rms_norm's backward read 1.003 to 1.011 over 221-483 cycles on an H100,
bench/results/h100-2026-12-06b), so that pick was whichever spin read high by chance, and
where none did, the largest, short of the target (+0.77% for +1% on an H200,
bench/results/h200-2026-12-05; a third process spun further since).
Prints {test: cycles} for bench/ab_checks.sh's slowtime step; --json writes every ratio.
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
FIRST_US = (1.0, 8.0)
AROUND = (0.9, 1.0, 1.1, 1.25)
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


def reaching(measured: dict[int, float], target: float) -> float | None:
    """Cycles where the line through the least and the most spun ratios reaches 1 + target
    (None if the ratio does not grow with the spin)."""
    (c0, r0), (c1, r1) = min(measured.items()), max(measured.items())
    if c1 <= c0 or r1 <= r0:
        return None
    return max(c0 / 8, c0 + (1 + target - r0) * (c1 - c0) / (r1 - r0))


def fitted(points: dict[int, float], target: float) -> tuple[int, float]:
    """The spin (cycles, at least 1) where the least-squares line through ``points``
    ({cycles: ratio}, every process's) reaches 1 + ``target``, and the line's ratio there
    (above the target where the launch's gap alone exceeds it). Raises ValueError where the
    line does not grow with the spin (no spin reaches the target)."""
    x = np.array(list(points), dtype=float)
    slope, at_zero = np.polyfit(x, np.array(list(points.values())), 1)
    if slope <= 0:
        raise ValueError(f"the ratio does not grow with the spin over {sorted(points)} cycles")
    cycles = max(1, round((1 + target - at_zero) / slope))
    return cycles, float(at_zero + slope * cycles)


def measure(spins: dict[str, list[float]], tmp: str) -> tuple[dict[str, dict[int, float]], str]:
    """One fresh process of calibrate_fla.py over ``spins``: the ratios, and its output when
    it failed or measured less than asked ('' when all is there)."""
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
    ratios = ratios_of(json.loads(out.read_text()), spins) if out.exists() else {}
    short = [t for t, us in spins.items() if len(ratios.get(t, {})) != len(us)]
    if proc.returncode or short:
        return ratios, f"exit {proc.returncode}, not measured: {short}\n{proc.stdout[-3000:]}"
    return ratios, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=float, help="the slowdown in time, e.g. 0.02")
    parser.add_argument("--json", type=Path, help="write every ratio measured here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        first, failed = measure({t: list(FIRST_US) for t in TESTS}, tmp)
        if not failed:
            lines = {t: reaching(first[t], args.target) for t in TESTS}
            flat = [t for t, c in lines.items() if c is None]
            failed = f"the ratio did not grow with the spin: {flat}" if flat else ""
        if not failed:
            # Back to microseconds: the second process's clock makes its own cycles.
            per_us = {t: max(first[t]) / FIRST_US[-1] for t in TESTS}
            asked = {t: [round(m * lines[t] / per_us[t], 3) for m in AROUND] for t in TESTS}
            second, failed = measure(asked, tmp)
    if failed:
        # Nothing is planted rather than a part: a run would count misses of nothing.
        print(f"calibration failed: {failed}", file=sys.stderr)
        return 1
    picked, line = {}, {}
    for test in TESTS:
        points = {**first[test], **second[test]}
        try:
            picked[test], line[test] = fitted(points, args.target)
        except ValueError as exc:  # nothing planted rather than a guess
            print(f"calibration failed: {test}: {exc}", file=sys.stderr)
            return 1
        if picked[test] == 1:
            print(f"{test}: the launch alone reads +{line[test] - 1:.2%}", file=sys.stderr)
        elif picked[test] > 1.25 * max(points):  # the line, past what was measured
            print(
                f"{test}: {picked[test]} cycles, beyond the {max(points)} measured", file=sys.stderr
            )
    if args.json:
        table = {"target": args.target, "picked": picked, "line": line, "first": first}
        table["second"] = second
        args.json.write_text(json.dumps(table, indent=1) + "\n")
    print(repr(picked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
