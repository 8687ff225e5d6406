"""What `gpubench show` costs on big baseline files of several shapes (issue 47).

For each number of tests and each shape (one session per test or twenty with an anchor of
five; distinct entries or every test a copy of one), writes a file with
bench/big_baseline.py, then times `python -m pytest_gpubench show FILE` in a fresh process:
its wall time, CPU time and peak memory, and whether it met the target (10^4 tests in 5 s,
10^5 in 60 s). Run it on a quiet machine: the wall time is what a user waits.

    python bench/show_cost.py [--tests 10000 100000] [--dir DIR] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from big_baseline import build  # noqa: E402

TARGET_S = {10_000: 5.0, 100_000: 60.0}
SHAPES = ((1, False), (1, True), (20, False), (20, True))  # (sessions, identical)


def timed_show(path: Path) -> dict[str, object]:
    """One fresh `gpubench show` of ``path``: wall and CPU seconds, peak memory (MB), and
    its error line where it failed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpubench", "show", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    error = done.stderr.strip().splitlines()[-1] if done.returncode else ""
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": after.ru_maxrss / 1024, "error": error}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, nargs="+", default=sorted(TARGET_S))
    parser.add_argument("--dir", type=Path, default=None, help="where the files go (a temp dir)")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        for tests in args.tests:
            for sessions, identical in SHAPES:
                path = Path(directory) / f"{tests}-{sessions}-{int(identical)}.json"
                path.write_text(build(tests, sessions, 0, identical), encoding="utf-8")
                row = {
                    "tests": tests,
                    "sessions": sessions,
                    "identical": identical,
                    "mb": path.stat().st_size / 1e6,
                    **timed_show(path),
                }
                row["target_s"] = TARGET_S.get(tests)
                rows.append(row)
                path.unlink()
                print(json.dumps(row), file=sys.stderr, flush=True)
    print(
        f"{os.uname().nodename}, {len(os.sched_getaffinity(0))} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print("| tests | sessions | entries | file MB | wall s | CPU s | peak MB | target |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        target = r["target_s"]
        met = (
            "-"
            if target is None
            else f"<= {target:g} s: " + ("met" if r["wall_s"] <= target else "NOT met")
        )
        if r["error"]:
            met = f"failed: {r['error']}"
        print(
            f"| {r['tests']} | {r['sessions']} | {'identical' if r['identical'] else 'distinct'} "
            f"| {r['mb']:.0f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_mb']:.0f} | {met} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
