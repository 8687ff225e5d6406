"""Which signal tells a loaded host on the wall timer (issue 45, item 5)?

Times a few CPU functions (a Python loop, a sleep, torch matmuls of 1 and of all threads,
the numpy matmul the CPU's flops floor is measured with) and, with CUDA, a function that
waits on the GPU, by the wall timer, calm and beside BUSY processes that spin on a CPU each.
For each: the median, the rate, the timer's cpu_wait (the largest share of the sampling one
thread of the process spent ready to run without a CPU: Linux's run delay), the calling
thread's share alone (what the timer read before), the process's CPU
time over wall time (the busy share the host caveat once used), and the host's CPU pressure
(/proc/pressure/cpu, some avg10) before the run: a "calm" row on a shared host may not be.

    python bench/load_signals.py [BUSY ...]      # default: 0, half the CPUs, all, twice
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import torch

from pytest_gpubench.timing import wall
from pytest_gpubench.timing.engine import Plan, Workload, collect

CPUS = len(os.sched_getaffinity(0))


def pressure() -> float | None:
    try:
        with open("/proc/pressure/cpu", encoding="ascii") as f:
            return float(f.readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None


def workloads() -> dict[str, tuple[Workload, float | None]]:
    a = torch.randn(256, 256)
    b = np.random.default_rng(0).random((512, 512), dtype=np.float32)

    def loop() -> int:
        return sum(range(20000))

    def torch_mm(threads: int):  # type: ignore[no-untyped-def]
        def mm() -> torch.Tensor:
            torch.set_num_threads(threads)
            return torch.matmul(a, a)

        return mm

    found: dict[str, tuple[Workload, float | None]] = {
        "python loop": (Workload(loop, ()), None),
        "sleep 1 ms": (Workload(time.sleep, (0.001,)), None),
        "torch mm 1 thread": (Workload(torch_mm(1), ()), 2 * 256**3),
        f"torch mm {CPUS} threads": (Workload(torch_mm(CPUS), ()), 2 * 256**3),
        "numpy mm 512 (floor)": (Workload(np.matmul, (b, b)), 2 * 512**3),
    }
    if torch.cuda.is_available():
        x = torch.randn(4096, 4096, device="cuda")
        found["cuda mm 4096 (waits)"] = (Workload(torch.matmul, (x, x)), 2 * 4096**3)
    return found


def main(levels: list[int]) -> None:
    rows = []
    for busy in levels:
        spinners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)
        ]
        try:
            time.sleep(1.0 if busy else 0.0)
            for name, (workload, flops) in workloads().items():
                cuda = name.startswith("cuda")
                timer = wall.WallTimer(torch.cuda.synchronize if cuda else None)
                workload.fn(*workload.args)
                before = pressure()
                delays0 = wall.run_delays_ns() or {}
                cpu0, wall0 = time.process_time_ns(), time.perf_counter_ns()
                sampling = collect(timer.sampler(workload), Plan(min_samples=20, budget_s=1.0))
                span = time.perf_counter_ns() - wall0
                busy_share = (time.process_time_ns() - cpu0) / span
                delays = {t: d - delays0.get(t, 0) for t, d in (wall.run_delays_ns() or {}).items()}
                main = delays.get(str(threading.get_native_id()), 0) / span
                median = sorted(sampling.samples_ms)[len(sampling.samples_ms) // 2]
                rows.append(
                    {
                        "spinners": busy,
                        "work": name,
                        "median_ms": round(median, 4),
                        "gflops": round(flops / median / 1e6, 1) if flops else None,
                        "cpu_wait": sampling.cpu_wait,
                        "main_wait": round(main, 3),
                        "threads": len(delays),
                        "busy": round(busy_share, 2),
                        "psi_some_avg10": before,
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
        finally:
            for p in spinners:
                p.kill()
                p.wait()
    print(f"\n{CPUS} CPUs")
    print(
        "| spinners | work | median | GFLOP/s | cpu_wait (any thread) | calling thread's "
        "| busy | PSI some avg10 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        wait = "-" if r["cpu_wait"] is None else f"{r['cpu_wait']:.0%}"
        print(
            f"| {r['spinners']} | {r['work']} | {r['median_ms']} ms | {r['gflops'] or '-'} | "
            f"{wait} | {r['main_wait']:.0%} | {r['busy']} | {r['psi_some_avg10']} |"
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [0, CPUS // 2, CPUS, 2 * CPUS])
