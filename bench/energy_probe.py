"""How NVML's energy counter and power readings move on this GPU (issue 18): while a
matmul loop keeps the GPU busy, poll the total-energy counter, the instantaneous power field
and the 1 s average for SECONDS, and print how often each changes and by how much.

    python bench/energy_probe.py [SECONDS]
"""

from __future__ import annotations

import statistics
import sys
import time

import pynvml
import torch


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    rows: list[tuple[float, int, float, float]] = []
    started = time.perf_counter()
    launched = 0
    while time.perf_counter() - started < seconds:
        # keep about 50 ms of work queued (1.6 ms a matmul)
        while launched < 30 + int((time.perf_counter() - started) / 0.0016):
            a @ b
            launched += 1
        energy = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        instant = float("nan")
        if field is not None:
            (v,) = pynvml.nvmlDeviceGetFieldValues(h, [field])
            if v.nvmlReturn == 0:
                instant = v.value.uiVal / 1e3
        average = pynvml.nvmlDeviceGetPowerUsage(h) / 1e3
        rows.append((time.perf_counter() - started, energy, instant, average))
    torch.cuda.synchronize()
    for name, col in (("energy mJ", 1), ("instant W", 2), ("average W", 3)):
        changes = [
            (rows[i][0], rows[i][col] - rows[i - 1][col])
            for i in range(1, len(rows))
            if rows[i][col] != rows[i - 1][col]
        ]
        gaps = [changes[i][0] - changes[i - 1][0] for i in range(1, len(changes))]
        print(
            f"{name}: {len(rows)} polls, {len(changes)} changes; gap ms median "
            f"{1e3 * statistics.median(gaps) if gaps else float('nan'):.2f}, min "
            f"{1e3 * min(gaps) if gaps else float('nan'):.2f}, max "
            f"{1e3 * max(gaps) if gaps else float('nan'):.2f}"
        )
    e0, e1 = rows[0][1], rows[-1][1]
    t = rows[-1][0] - rows[0][0]
    print(
        f"counter: {(e1 - e0) / 1e3 / t:.1f} W over {t:.2f} s; instant mean "
        f"{statistics.fmean(r[2] for r in rows):.1f} W; average mean "
        f"{statistics.fmean(r[3] for r in rows):.1f} W; matmuls {launched}"
    )
    # the counter's power over each 100 ms window, edge to edge
    edges = [rows[0]] + [rows[i] for i in range(1, len(rows)) if rows[i][1] != rows[i - 1][1]]
    windows = []
    i = 0
    for j in range(1, len(edges)):
        if edges[j][0] - edges[i][0] >= 0.1:
            windows.append((edges[j][1] - edges[i][1]) / 1e3 / (edges[j][0] - edges[i][0]))
            i = j
    print(
        "counter W per >=100 ms window, edge to edge:", " ".join(f"{w:.0f}" for w in windows[:30])
    )


if __name__ == "__main__":
    main()
