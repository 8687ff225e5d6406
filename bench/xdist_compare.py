"""Compare the runs of bench/gpu_checks.sh's xdist or multi phase: verdicts of -n W against
-n 0, the GPUs each used, and the wall time of the whole run and of its test phase, also
less the confirmations in fresh processes (each result's ``costs.confirm_s``; with workers, the
largest sum of one GPU's, the worker that waited for them: an estimate, as the other workers
took more tests meanwhile).

    python bench/xdist_compare.py LOGS PHASE WORKERS RUNS
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def run(logs: Path, phase: str, n: int | str, i: int) -> dict:
    return read_run(logs / f"{phase}-n{n}-{i}", n)


def gpu_of(result: dict[str, Any]) -> str:
    """The GPU a result was timed on: its UUID's start where recorded (``cuda:0 GPU-<uuid>``:
    xdist workers of a timing run each see their own GPU as cuda:0), else its index."""
    parts = str(result.get("gpu") or "").split(" ")
    return parts[1][:12] if len(parts) > 1 else parts[0]


def read_run(stem: Path, n: int | str) -> dict:
    """One run's report (``stem``.json), output (.txt) and test-phase clock (.clock), of a
    run with ``n`` xdist workers (0: none)."""
    data = json.loads(Path(f"{stem}.json").read_text())
    clock = Path(f"{stem}.clock")
    text = Path(f"{stem}.txt").read_text()
    wall = re.findall(r" in ([0-9.]+)s", text)
    costs: dict[str, dict[str, float]] = {}  # per GPU: seconds per step, summed over tests
    for r in data["results"]:
        for step, seconds in (r.get("costs") or {}).items():
            per_gpu = costs.setdefault(gpu_of(r), {})
            per_gpu[step] = per_gpu.get(step, 0.0) + seconds
    confirming = [steps.get("confirm_s", 0.0) for steps in costs.values()]
    waited = max(confirming, default=0.0) if str(n) != "0" else sum(confirming)
    phase = json.loads(clock.read_text())["test_phase_s"] if clock.exists() else None
    timing = [
        sum(steps.get(k, 0.0) for k in ("lock_wait_s", "timer_setup_s", "sampling_s"))
        for steps in costs.values()
    ]
    return {
        "costs": costs,
        "measuring_s": round(max(timing, default=0.0), 2),
        # Less the waits for the device lock, the GPU that timed longest: where another
        # process timed on a GPU meanwhile (fresh processes confirming beside a worker's tests,
        # commits c281cbd-65b9de6, not kept), what this run's own processes spent timing.
        "waited_s": round(max((s.get("lock_wait_s", 0.0) for s in costs.values()), default=0.0), 2),
        "unwaited_s": round(
            max(
                (
                    t - s.get("lock_wait_s", 0.0)
                    for t, s in zip(timing, costs.values(), strict=True)
                ),
                default=0.0,
            ),
            2,
        ),
        "confirmed": sum(1 for r in data["results"] if r.get("confirmations")),
        "timing_s": None if phase is None else round(phase - waited, 2),
        "verdicts": {r["test"]: r["status"] for r in data["results"]},
        "gpus": sorted({str(r.get("gpu")) for r in data["results"]}),
        "phase_s": phase,
        "wall_s": float(wall[-1]) if wall else None,
    }


def main() -> None:
    logs, phase, workers, runs = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    ratios, timing, measuring = [], [], []
    for i in range(1, runs + 1):
        try:
            a, b = run(logs, phase, workers, i), run(logs, phase, 0, i)
        except (OSError, ValueError, KeyError) as exc:
            print(f"run {i}: missing or unreadable ({exc})")
            continue
        differ = sorted(t for t in a["verdicts"] if a["verdicts"][t] != b["verdicts"].get(t))
        if a["phase_s"] and b["phase_s"]:
            ratios.append(a["phase_s"] / b["phase_s"])
        if a["timing_s"] and b["timing_s"]:
            timing.append(a["timing_s"] / b["timing_s"])
        if a["measuring_s"] and b["measuring_s"]:
            measuring.append(a["measuring_s"] / b["measuring_s"])
        print(
            f"run {i}: -n {workers} vs -n 0: {len(a['verdicts'])} vs {len(b['verdicts'])} "
            f"results, verdicts differ on {len(differ)} {differ[:4]}; "
            f"not ok: {sum(v != 'ok' for v in a['verdicts'].values())} vs "
            f"{sum(v != 'ok' for v in b['verdicts'].values())}; test phase "
            f"{a['phase_s']} s vs {b['phase_s']} s, "
            f"less confirmations {a['timing_s']} s vs {b['timing_s']} s "
            f"({a['confirmed']} vs {b['confirmed']} confirmed); timing on the busiest GPU "
            f"{a['measuring_s']} s vs {b['measuring_s']} s; "
            f"pytest wall {a['wall_s']} s vs {b['wall_s']} s; "
            f"GPUs used: {a['gpus']} vs {b['gpus']}"
        )
        for label, side in ((f"-n {workers}", a), ("-n 0", b)):
            for gpu, steps in sorted(side["costs"].items()):
                spent = ", ".join(f"{k} {v:.1f}" for k, v in sorted(steps.items()))
                print(f"  {label} {gpu}: seconds summed over its tests: {spent}")
    for what, values in (
        ("test phase", ratios),
        ("less confirmations", timing),
        ("timing on the busiest GPU", measuring),
    ):
        if values:
            shown = [round(v, 2) for v in values]
            print(f"{what} -n {workers} / -n 0: median {statistics.median(values):.2f} of {shown}")


if __name__ == "__main__":
    main()
