"""Gather every recorded GPU session of unchanged code into one data file.

    python bench/sessions_data.py            # writes bench/results/sessions.json

The verdict is fitted to, and validated on, these sessions (bench/fit_prior.py,
bench/resample.py, tests/judge/test_resample.py). Sources, all under bench/results/ (loose files
and the .tgz archives the GPU scripts packed):

- A/A reports (``aa-example-N.json``, ``aa-user-N.json``, ``example_aa.json``,
  ``user_aa.json``, ``example_save.json``/``user_save.json``): ``pytest --gpubench --gpubench-json``
  of unchanged code. Each result gives its first session (the median and within-session error
  of its own samples) and, when it was confirmed, the sessions of the fresh processes that
  confirmed it, seconds later on the same GPU, each timing that one test alone.
- Baseline files (``*.json`` with a ``benchmarks`` table): the sessions recorded with
  ``--gpubench-save --gpubench-sessions N``, each a fresh process running the whole suite.

Runs with a deliberate slowdown (``detect-*``, ``*_slow*``, ``cross-*``) are left out: they
are not unchanged code. A session is one process's median of one test; sessions are keyed by
their id, so one recorded twice (a report and a baseline) counts once. Per test the sessions
are sorted by date. The roles are kept, because they differ: ``first`` and ``history``
sessions ran the whole suite in their process, ``confirm`` sessions one test alone, right
after a ``first`` session (``parent``).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
OUT = RESULTS / "sessions.json"
sys.path.insert(0, str(ROOT))

REPORT = re.compile(
    r"(?:^|/)(?:aa-(?:example|user)-\d+|(?:example|user)-aa-\d+|(?:example|user)_(?:aa|save))\.json$"
)
BASELINE = re.compile(r"(?:^|/)(example|user)-baselines/[^/]+\.json$|(?:^|/)sm\d+-[^/]+\.json$")


def documents() -> Iterator[tuple[str, str, Any]]:
    """(source name, member name, parsed JSON) of every file under RESULTS worth reading."""
    for path in sorted(RESULTS.rglob("*")):
        rel = str(path.relative_to(RESULTS))
        if path.suffix == ".json" and (REPORT.search(rel) or BASELINE.search(rel)):
            yield rel, rel, json.loads(path.read_text())
        elif path.name.endswith(".tgz"):
            with tarfile.open(path) as tar:
                for member in sorted(tar.getmembers(), key=lambda m: m.name):
                    if member.isfile() and (
                        REPORT.search(member.name) or BASELINE.search(member.name)
                    ):
                        data = tar.extractfile(member)
                        assert data is not None
                        yield rel, member.name, json.loads(data.read())


def se_log(samples: list[float]) -> float | None:
    """Within-session standard error of log(median), as the plugin computes it."""
    from pytest_gpubench.core.samples import session_summary

    _, _, se = session_summary(samples)
    return se if math.isfinite(se) else None


def suite_of(name: str) -> str:
    return "user" if "user" in name.rsplit("/", 1)[-1] or "user-baselines" in name else "example"


def gather() -> dict[str, Any]:
    machines: dict[str, dict[str, Any]] = {}

    def test_entry(gpu: str, suite: str, key: str, timer: str) -> dict[str, Any]:
        # Per timer: sessions of two timers are two series, never one (a release moved short
        # calls from the graph's time to their kernel time between recordings).
        m = machines.setdefault(gpu, {"gpu_name": None, "tests": {}})
        return m["tests"].setdefault(
            (f"{suite}::{key}", timer),
            {"timer": timer, "launches": None, "device_ms": None, "sessions": {}},
        )

    for source, member, doc in documents():
        if "results" in doc:  # a report
            suite = suite_of(member)
            name = (doc.get("device") or {}).get("name")
            for r in doc["results"]:
                infos = r.get("session_infos") or r.get("confirmation_infos") or {}
                gpu = (r.get("gpu") or "").split(" ")[-1] or doc["session"].get("machine")
                if not gpu or not r.get("samples_ms"):
                    continue
                machines.setdefault(gpu, {"gpu_name": name, "tests": {}})["gpu_name"] = name
                t = test_entry(gpu, suite, r["key"], r["timer"])
                if r.get("kernels"):
                    t["launches"] = sum(k.get("count", 1) for k in r["kernels"])
                if r.get("device_ms"):
                    t["device_ms"] = r["device_ms"]
                first = r["session"]
                samples = r["samples_ms"]
                t["sessions"][first] = {
                    "date": r["date"],
                    "median_ms": statistics.median(samples),
                    "se_log": se_log(samples),
                    "n": len(samples),
                    "role": "first",
                    "source": f"{source}:{member}",
                }
                for c in r.get("confirmations") or []:
                    date = (infos.get(c["session"]) or {}).get("date") or r["date"]
                    t["sessions"].setdefault(
                        c["session"],
                        {
                            "date": date,
                            "median_ms": c["median_ms"],
                            "se_log": c.get("se_log"),
                            "n": c["n"],
                            "role": "confirm",
                            "parent": first,
                            "source": f"{source}:{member}",
                        },
                    )
        elif "benchmarks" in doc and doc.get("schema") == "pytest-gpubench/2":
            suite = suite_of(member)
            infos = doc["sessions"]
            for key, entry in doc["benchmarks"].items():
                for rec in entry["history"] + entry["anchor"]:
                    info = infos[rec["session"]]
                    gpu = info.get("machine")
                    if not gpu:
                        continue
                    name = (doc.get("device") or {}).get("name")
                    machine = machines.setdefault(gpu, {"gpu_name": name, "tests": {}})
                    machine["gpu_name"] = machine["gpu_name"] or name
                    t = test_entry(gpu, suite, key, entry["timer"])
                    if entry.get("kernels") and t["launches"] is None:
                        t["launches"] = sum(k.get("count", 1) for k in entry["kernels"])
                    t["sessions"].setdefault(
                        rec["session"],
                        {
                            "date": info["date"],
                            "median_ms": rec["median_ms"],
                            "se_log": rec.get("se_log"),
                            "n": rec["n"],
                            "role": "history",
                            "source": f"{source}:{member}",
                        },
                    )
    # Sorted, lists instead of id-keyed maps.
    out: dict[str, Any] = {}
    for gpu in sorted(machines):
        tests = {}
        series = machines[gpu]["tests"]
        for key, timer in sorted(series):
            t = series[key, timer]
            # A test timed by one timer keeps its name; one timed by several, a name per timer.
            if sum(k == key for k, _ in series) > 1:
                key = f"{key}@{timer}"
            sessions = sorted(
                ({"id": sid, **s} for sid, s in t["sessions"].items()),
                key=lambda s: (s["date"], s["id"]),
            )
            for s in sessions:
                s["median_ms"] = float(f"{s['median_ms']:.6g}")
                if s["se_log"] is not None:
                    s["se_log"] = float(f"{s['se_log']:.4g}")
            tests[key] = {**t, "sessions": sessions}
        out[gpu] = {"gpu_name": machines[gpu]["gpu_name"], "tests": tests}
    return {
        "about": "Recorded GPU sessions of unchanged code; made by bench/sessions_data.py",
        "machines": out,
    }


def main() -> None:
    data = gather()
    OUT.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n")
    for gpu, m in data["machines"].items():
        counts = [len(t["sessions"]) for t in m["tests"].values()]
        roles: dict[str, int] = {}
        for t in m["tests"].values():
            for s in t["sessions"]:
                roles[s["role"]] = roles.get(s["role"], 0) + 1
        print(
            f"{gpu[:12]} {m['gpu_name']}: {len(counts)} tests, sessions per test "
            f"{min(counts)}-{max(counts)}, roles {roles}"
        )
    print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
