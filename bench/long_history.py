"""Time and memory of ``gpubench show`` and of a save over one test's very long history
(issue 46, G1: a merged, hand-edited or old file whose history the plugin never trims).

    python bench/long_history.py [--records 10000] [--out bench/results/FILE.md]

Writes a baseline file of two tests, one with a history and an anchor of ``--records``
sessions (each its own session in the table), one of 20; then, each in a fresh process,
runs ``gpubench show`` on it and saves one more session of the long test into it
(``store.save``, what ``--gpubench-save`` calls). Prints, per step, its wall time and the
process's peak resident memory (``ru_maxrss`` of the child), and the machine. Not a test:
CI never asserts wall-clock time.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_gpubench.core.baseline import BaselineEntry
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.store.baseline import document, dumps

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "cuda": "13.0", "torch": "2.11.0", "python": "3.12"}
LONG = "tests/test_long.py::test_kernel"

SAVE = """
import sys
from pathlib import Path
from pytest_gpubench.core.baseline import Update
from pytest_gpubench.core.records import Measurement, Result, SessionInfo, Status, Verdict
from pytest_gpubench.report import changes
from pytest_gpubench.store import baseline as store
path, key = Path(sys.argv[1]), sys.argv[2]
measurement = Measurement(
    key=key, test=key, timer="cuda-graph", samples_ms=(1.0, 1.01, 0.99), warmup=3,
    calls_per_sample=1, threshold=0.05, session="z-next",
)
results = [Result(measurement, Verdict(Status.NEW))]
# What a run with --gpubench-save does around the save: the change points of each
# measured test's history with the run, the save, and those of the saved history.
base = store.load(path)
changes.of_run(results, base)
info = {"z-next": SessionInfo("2027-01-01T00:00:00+00:00", "abc", "GPU-1")}
update = Update.of(measurement, False)
assert store.save(base, {"name": "NVIDIA H100 80GB HBM3"}, info, [update])
changes.saved_lines(results, base)
"""


def build(records: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    keys = [f"s{i:05d}" for i in range(records)]
    table = {
        key: SessionInfo(
            (start + datetime.timedelta(hours=i)).isoformat(timespec="seconds"), "abc", "GPU-1"
        )
        for i, key in enumerate(keys)
    }
    history = tuple(SessionRecord(k, rng.lognormvariate(0, 0.02), 20, 0.002) for k in keys)
    short = history[-20:]
    entries = {
        LONG: BaselineEntry("cuda-graph", keys[0], history, history, samples_ms=(1.0, 1.01)),
        "tests/test_long.py::test_short": BaselineEntry(
            "cuda-graph", short[0].session, short[:5], short, samples_ms=(1.0, 1.01)
        ),
    }
    return dumps(document(DEVICE, table, entries))


def timed(command: list[str], limit_s: float) -> tuple[float, int, str]:
    """Wall seconds, peak resident MiB of the child (its own ``ru_maxrss``, by ``wait4``) and
    its exit ('0', or what stopped it)."""
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - started > limit_s:
            child.kill()
            pid, status, usage = os.wait4(child.pid, 0)
            break
        time.sleep(0.02)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait
    err = child.stderr.read().decode(errors="backslashreplace").strip().splitlines()
    if wall > limit_s:
        said = f"killed at {limit_s:.0f} s"
    else:
        said = str(child.returncode) + (f": {err[-1][:120]}" if child.returncode and err else "")
    return wall, usage.ru_maxrss // 1024, said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--limit-s", type=float, default=120.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = [
        f"# One test's history of {args.records} records: show and save",
        "",
        f"- date: {datetime.date.today().isoformat()}",
        f"- machine: {platform.node() or 'unknown'}, {platform.processor() or platform.machine()}"
        f", {os.cpu_count()} CPUs, Python {platform.python_version()}",
        f"- command: python bench/long_history.py --records {args.records}",
        "",
        "| step | wall s | peak MiB | exit |",
        "|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory, "sm90-nvidia-h100-80gb-hbm3.json")
        path.write_text(build(args.records), encoding="utf-8")
        size = path.stat().st_size
        steps = {
            "gpubench show": [sys.executable, "-m", "pytest_gpubench", "show", str(path)],
            "save of the long test": [sys.executable, "-c", SAVE, str(path), LONG],
            "gpubench show after the save": [
                sys.executable,
                "-m",
                "pytest_gpubench",
                "show",
                str(path),
            ],
        }
        for name, command in steps.items():
            wall, peak, status = timed(command, args.limit_s)
            lines.append(f"| {name} | {wall:.2f} | {peak} | {status} |")
        lines += [
            "",
            f"File before: {size / 2**20:.1f} MiB; after: {path.stat().st_size / 2**20:.2f} MiB.",
        ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
