"""Size a planted slowdown of the user suite's copies in time, not work (GPU).

    python bench/calibrate_slowdown.py TARGET [--json PATH]

Whole blocks added to a copy do not add their share of its time: +5% blocks made a 47 µs copy
about 4.4% slower on an H100 and a 7 µs one 13% slower (a wave more). For each copy size this
times the copy grown by fractions of TARGET (0.5x to 3x) against the plain copy, alternately
in one process (bench/user_suite/calibrate_copy.py, ``reference=``), and picks the smallest
fraction whose ratio reaches 1 + TARGET; if none does, the largest (said on stderr). Prints
the picked fractions as a Python dict, {n: fraction}, for bench/ab_checks.sh's slowtime step;
--json writes every ratio measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "user_suite"
# Fine near the target (the smallest reaching it overshoots by at most a step), coarse beyond
# (a copy whose time jumps a wave at once).
MULTIPLES = (0.5, 0.75, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 2.0, 3.0)
SIZES = (1 << 22, 1 << 24, 1 << 26)  # test_copy_blocks's


def pick(ratios: dict[float, float], target: float) -> tuple[float, bool]:
    """The smallest fraction whose ratio reaches 1 + target (and True), else the largest."""
    reaching = [f for f, r in sorted(ratios.items()) if r >= 1 + target]
    return (reaching[0], True) if reaching else (max(ratios), False)


def ratios_of(report: dict) -> dict[int, dict[float, float]]:
    """{n: {fraction: ratio}} from a --gpubench-json report of calibrate_copy.py."""
    found: dict[int, dict[float, float]] = {}
    for r in report["results"]:
        if not r["key"].endswith("#vs-reference") or r.get("median_ms") is None:
            continue
        params = r["test"].split("[", 1)[1].split("]", 1)[0]  # "n-fraction"
        n, fraction = params.split("-", 1)
        found.setdefault(int(n), {})[float(fraction)] = float(r["median_ms"])
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=float, help="the slowdown in time, e.g. 0.03")
    parser.add_argument("--json", type=Path, help="write every ratio measured here")
    args = parser.parse_args()
    fractions = [round(args.target * m, 6) for m in MULTIPLES]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "calibration.json"
        env = {**os.environ, "GPUBENCH_USER_FRACTIONS": ",".join(map(str, fractions))}
        gpubench = ["--gpubench", f"--gpubench-json={out}", f"--gpubench-dir={tmp}/baselines"]
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        proc = subprocess.run(
            [*pytest, *gpubench, "calibrate_copy.py"],
            cwd=SUITE,
            env=env,
            capture_output=True,
            text=True,
        )
        ratios = ratios_of(json.loads(out.read_text())) if out.exists() else {}
        missing = [n for n in SIZES if len(ratios.get(n, {})) != len(fractions)]
        if proc.returncode != 0 or missing:
            # Nothing is planted rather than a part: a run would count misses of nothing.
            print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
            print(
                f"calibration failed (exit {proc.returncode}; sizes not measured at every "
                f"fraction: {missing})",
                file=sys.stderr,
            )
            return 1
    picked = {}
    for n, measured in sorted(ratios.items()):
        fraction, reached = pick(measured, args.target)
        picked[n] = fraction
        if not reached:
            print(
                f"copy of {n}: no fraction up to {max(measured):.1%} reached "
                f"+{args.target:.1%} (largest ratio {max(measured.values()):.4f})",
                file=sys.stderr,
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "target": args.target,
                    "picked": {str(n): f for n, f in picked.items()},
                    "ratios": {
                        str(n): {str(f): r for f, r in sorted(m.items())}
                        for n, m in sorted(ratios.items())
                    },
                },
                indent=1,
            )
            + "\n"
        )
    print(repr(picked))
    return 0


if __name__ == "__main__":
    sys.exit(main())
