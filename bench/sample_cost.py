"""The host's cost of one cupti-graph sample, by step, in this process (issues 20 and 44).

A cupti-graph sample is a graph replay under ``torch.profiler``, its trace exported to a
file and read back (timing/cuda.py). On two H200s, a 1 us test's 20 samples (with their
warm-up) took 1.02 s on an xdist worker beside another, against 0.44 s in a serial run
(bench/results/h200x2-2026-11-28f): this says whether the sample's own steps grow when
both GPUs sample. On an H100 such samples were most of a lockstep run's more pairs
(bench/results/h100-2026-12-07d): ``--calls`` says how the steps grow with the calls a
replay batches, whether the profiler's own events (``kineto_results``, no file) read the
same kernel time cheaper, and the kernel time per call by calls per replay (a replay of
fewer calls is another instrument if it reads another time). Run it alone, then one per
GPU at once:

    python bench/sample_cost.py [SAMPLES] [--calls 61 300]       # one process
    bash -c 'for g in 0 1; do CUDA_VISIBLE_DEVICES=$g python bench/sample_cost.py & done; wait'

Prints one line per replay size: the median milliseconds of a whole sample, of the
profiler's start and stop around a replay (no export), of the export, of reading the file
back, and of reading the profiler's own events instead; the kernel time per call; and
whether both reads gave the same kernel time in every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

from pytest_gpubench.timing import cuda


def measure(samples: int, calls: int) -> str:
    x = torch.zeros(4096, device="cuda")
    graph = cuda.TorchGraph(cuda._capture(lambda: x.add_(1), calls=calls, warm_calls=3))
    cuda.prime_profiler()
    steps: dict[str, list[float]] = {k: [] for k in ("whole", "around", "export", "read", "own")}
    per_call, same = [], True
    warnings.simplefilter("ignore")
    for i in range(samples + 5):
        t0 = time.perf_counter()
        graph.kernel_ms()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            graph.graph.replay()
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        prof.export_chrome_trace(path)
        t3 = time.perf_counter()
        with open(path, encoding="utf-8") as handle:
            events = json.load(handle).get("traceEvents", [])
        os.unlink(path)
        t4 = time.perf_counter()
        own = prof.profiler.kineto_results.events()
        own_us = sum(e.duration_ns() for e in own if e.device_type().name == "CUDA") / 1e3
        t5 = time.perf_counter()
        file_us = sum(e.get("dur") or 0.0 for e in events if e.get("cat") in cuda.DEVICE_WORK)
        if i >= 5:  # the first ones set the profiler up
            for key, spent in zip(
                steps, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True
            ):
                steps[key].append(spent)
            per_call.append(file_us / calls)
            same = same and abs(own_us - file_us) < 1e-3
    ms = [round(1e3 * statistics.median(v), 2) for v in steps.values()]
    return (
        f"GPU {os.environ.get('CUDA_VISIBLE_DEVICES', 'all')} pid {os.getpid()}, {calls} calls "
        f"a replay: sample {ms[0]} ms; profiler around a replay {ms[1]} ms, export {ms[2]} ms, "
        f"read {ms[3]} ms, its own events instead {ms[4]} ms (the same kernel time: {same}); "
        f"{statistics.median(per_call):.4f} us a call (medians of {samples}; "
        f"{os.cpu_count()} CPUs)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=int, nargs="?", default=60)
    parser.add_argument("--calls", type=int, nargs="+", default=[61])
    args = parser.parse_args()
    for calls in args.calls:
        print(measure(args.samples, calls), flush=True)


if __name__ == "__main__":
    main()
