"""Cost and within-session spread of a graph's two numbers (issue 16, part 9).

For four functions (a 4096-element add, a chain of 8 launches on 4096 elements, adds of 2^20
and 2^24 elements), each graph timer mode of ``timing.cuda.CudaGraphTimer``: auto (None),
kernel time (True), graph time (False); the timer it chose, calls per replay, set-up time,
cost per sample, median and coefficient of variation of 10 samples, the graph time per call
kept beside a kernel time, and the eager CUPTI time. Needs a CUDA GPU:

    python bench/cupti_graph_probe.py
"""

from __future__ import annotations

import statistics
import time

import torch

from pytest_gpubench.timing import cuda
from pytest_gpubench.timing.engine import Workload


def chain(t: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        t = torch.sigmoid(t) * 1.5
    return t


def main() -> None:
    small = torch.randn(4096, device="cuda")
    medium = torch.randn(1 << 20, device="cuda")
    large = torch.randn(1 << 24, device="cuda")
    cases = {
        "add4096": (torch.add, (small, small)),
        "chain8": (chain, (small,)),
        "add1M": (torch.add, (medium, medium)),
        "add16M": (torch.add, (large, large)),
    }
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    cuda.prime_profiler()
    for name, (fn, args) in cases.items():
        for kernels in (None, True, False):
            timer = cuda.CudaGraphTimer(kernels)
            fn(*args)
            torch.cuda.synchronize()
            started = time.perf_counter()
            sampler = timer.sampler(Workload(fn, args))
            prepared = time.perf_counter()
            values = [sampler.sample() for _ in range(10)]
            sampled = time.perf_counter()
            sampler.close()
            median = statistics.median(values)
            profile = sampler.profile
            print(
                f"{name:8s} {kernels!s:5s} -> {sampler.timer:11s} calls "
                f"{sampler.calls_per_sample:4d} setup {prepared - started:6.3f}s per-sample "
                f"{(sampled - prepared) / 10 * 1e3:7.1f} ms median {median * 1e3:8.3f} us cv "
                f"{statistics.pstdev(values) / median:.4f} graph_ms "
                f"{profile.graph_ms if profile else None} device_ms "
                f"{profile.device_ms if profile else None}",
                flush=True,
            )


if __name__ == "__main__":
    main()
