"""A large baseline file for timing ``gpubench show`` and ``gpubench plot`` (docs/performance.md).

    python bench/big_baseline.py OUT.json [--tests 100000] [--sessions 25] [--seed 0] [--identical]

Writes a schema-2 file of ``--tests`` entries (CUDA-like timer, one binary each), each with a
history of the last 20 of ``--sessions`` sessions and an anchor of the first 5, medians drawn
around a per-test time with a few percent of noise between sessions (``--identical``: every
test a copy of the first one's entry, as a file of copied entries has it). Deterministic per
seed.
"""

from __future__ import annotations

import argparse
import datetime
import random
from pathlib import Path

from pytest_gpubench.core.baseline import ANCHOR_SESSIONS, HISTORY_SESSIONS, BaselineEntry
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.store.baseline import document, dumps

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "cuda": "13.0", "torch": "2.11.0", "python": "3.12"}
VERSIONS: dict[str, str | None] = {"cuda": "13.0", "torch": "2.11.0", "python": "3.12"}


def build(tests: int, sessions: int, seed: int, identical: bool = False) -> str:
    rng = random.Random(seed)
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    keys = [f"s{i:03d}" for i in range(sessions)]
    table = {
        key: SessionInfo(
            (start + datetime.timedelta(days=i)).isoformat(timespec="seconds"),
            f"{rng.getrandbits(160):040x}",
            "GPU-00000000-0000-0000-0000-000000000000",
            VERSIONS,
        )
        for i, key in enumerate(keys)
    }
    entries = {}
    for t in range(1 if identical else tests):
        base = 10 ** rng.uniform(-2.5, 1.5)  # 3 µs to 30 ms
        records = [
            SessionRecord(k, base * rng.lognormvariate(0, 0.02), 20, 0.002, 10) for k in keys
        ]
        entries[f"tests/test_big.py::test_kernel[{t}]"] = BaselineEntry(
            timer="cuda-graph",
            epoch=keys[0],
            anchor=tuple(records[:ANCHOR_SESSIONS]),
            history=tuple(records[-HISTORY_SESSIONS:]),
            samples_ms=tuple(base * rng.lognormvariate(0, 0.01) for _ in range(20)),
            group=f"group{t % 7}",
        )
    if identical:
        first = next(iter(entries.values()))
        entries = {f"tests/test_big.py::test_kernel[{t}]": first for t in range(tests)}
    return dumps(document(DEVICE, table, entries))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--tests", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--identical", action="store_true")
    args = parser.parse_args()
    text = build(args.tests, args.sessions, args.seed, args.identical)
    args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
