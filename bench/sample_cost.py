"""The host's cost of one cupti-graph sample, by step, in this process (issue 20).

A cupti-graph sample is a graph replay under ``torch.profiler``, its trace exported to a
file and read back (timing/cuda.py). On two H200s, a 1 us test's 20 samples (with their
warm-up) took 1.02 s on an xdist worker beside another, against 0.44 s in a serial run
(bench/results/h200x2-2026-11-28f): this says whether the sample's own steps grow when
both GPUs sample. Run it alone, then one per GPU at once:

    python bench/sample_cost.py [SAMPLES]                       # one process
    bash -c 'for g in 0 1; do CUDA_VISIBLE_DEVICES=$g python bench/sample_cost.py & done; wait'

Prints one line: the median milliseconds of a whole sample, of the profiler's start and
stop around a replay (no export), of the export, and of reading the file back.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import warnings

import torch
from torch.profiler import ProfilerActivity, profile

from pytest_gpubench.timing import cuda


def main() -> None:
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    x = torch.zeros(4096, device="cuda")
    graph = cuda.TorchGraph(cuda._capture(lambda: x.add_(1), calls=61, warm_calls=3))
    cuda.prime_profiler()
    whole, around, export, read = [], [], [], []
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
            json.load(handle)
        os.unlink(path)
        t4 = time.perf_counter()
        if i >= 5:  # the first ones set the profiler up
            whole.append(t1 - t0)
            around.append(t2 - t1)
            export.append(t3 - t2)
            read.append(t4 - t3)
    ms = [round(1e3 * statistics.median(v), 2) for v in (whole, around, export, read)]
    print(
        f"GPU {os.environ.get('CUDA_VISIBLE_DEVICES', 'all')} pid {os.getpid()}: sample "
        f"{ms[0]} ms; profiler around a replay {ms[1]} ms, export {ms[2]} ms, read {ms[3]} ms "
        f"(medians of {samples}; {os.cpu_count()} CPUs)",
        flush=True,
    )


if __name__ == "__main__":
    main()
