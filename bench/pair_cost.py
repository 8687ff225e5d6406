"""Where a lockstep pair's seconds go, on a GPU (issue 44: a pair of a 1-4 µs kernel cost
about 0.36 s in the example suite's A/A runs, and most of its more pairs are of such kernels).

For a few sizes of an in-place add, it times a sampler's making (``timer.sampler``: the
eager profile, the capture, the replay's check), one sample, and the parts of one CUPTI
read of a replay (the profiler's start and stop, the trace's export and parse, the same sum
read from the profiler's own records), each the median of REPEATS. Prints a table; writes
nothing. Needs a GPU: python bench/pair_cost.py
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pytest_gpubench.timing import cuda  # noqa: E402
from pytest_gpubench.timing.engine import Workload  # noqa: E402

REPEATS = 7
SIZES = (4096, 1 << 20, 1 << 24)
DEVICE_KINDS = ("kernel", "gpu_memcpy", "gpu_memset")
KINDS: set[tuple[str, str]] = set()  # (name, device type) of the records seen
DEVICE = torch.device("cuda").type and torch._C._autograd.DeviceType.CUDA


def median_s(run: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def parts(graph: torch.cuda.CUDAGraph) -> dict[str, float]:
    """One CUPTI read of a replay, in its parts (seconds), and both sums (ms) to compare."""
    found: dict[str, list[float]] = {}
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            graph.replay()
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        events = prof.profiler.kineto_results.events()
        KINDS.update((e.name()[:30], str(e.device_type())) for e in events)
        # (torch 2.11's records carry no activity type: the device's are the GPU's work)
        own = sum(e.duration_ns() for e in events if e.device_type() == DEVICE) / 1e6
        t2 = time.perf_counter()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as handle:
            trace = json.load(handle)["traceEvents"]
        os.unlink(path)
        exported = sum(float(e.get("dur") or 0) for e in trace if e.get("cat") in DEVICE_KINDS)
        t3 = time.perf_counter()
        for name, value in (
            ("profiler_s", t1 - t0),
            ("own_records_s", t2 - t1),
            ("export_parse_s", t3 - t2),
            ("own_ms", own),
            ("exported_ms", exported / 1e3),
        ):
            found.setdefault(name, []).append(value)
    return {name: statistics.median(values) for name, values in found.items()}


def main() -> None:
    cuda.prime_profiler()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(
        "| elements | timer | calls | sampler made | one sample | profiler | export+parse "
        "| own records | sums (ms): exported, own |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in SIZES:
        x = torch.zeros(n, device="cuda")
        workload = Workload(fn=torch.Tensor.add_, args=(x, 1))
        timer = cuda.make("auto")
        made = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            sampler = timer.sampler(workload)
            made.append(time.perf_counter() - start)
            sampler.close()
        sampler = timer.sampler(workload)
        one = median_s(sampler.sample)
        graph = cuda._capture(workload.prepare(), sampler.calls_per_sample, 2)
        p = parts(graph)
        graph.reset()
        sampler.close()
        print(
            f"| {n} | {sampler.timer} | {sampler.calls_per_sample} "
            f"| {statistics.median(made) * 1e3:.1f} ms | {one * 1e3:.1f} ms "
            f"| {p['profiler_s'] * 1e3:.1f} ms | {p['export_parse_s'] * 1e3:.1f} ms "
            f"| {p['own_records_s'] * 1e3:.2f} ms | {p['exported_ms']:.5f}, {p['own_ms']:.5f} |"
        )
    print("records seen (name, device type):", sorted(KINDS))


if __name__ == "__main__":
    main()
