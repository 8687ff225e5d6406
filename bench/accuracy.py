"""Timing accuracy of the plugin's timers against CUPTI kernel time (torch.profiler).

Run on a GPU machine:  python bench/accuracy.py [--out results.json]
For each kernel and size it prints the CUPTI device time per call (sum of the durations of
the kernels one call launches, measured over back-to-back calls, L2 hot), the time reported
by gpubench's default timer (and the cuda-event timer), their ratios to CUPTI, the ratio of
triton.testing.do_bench (median) for reference, and the seconds each estimate cost.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import torch
import triton
from torch.profiler import ProfilerActivity, profile

from pytest_gpubench.engine import Plan, Workload, collect
from pytest_gpubench.timers import make_timer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "example_suite"))
import triton_kernels  # noqa: E402  (the example suite's kernels)

SIZES = (1 << 12, 1 << 20, 1 << 24, 1 << 28)


def manual_gelu(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


KERNELS = {
    "add": lambda x: torch.add(x, x),
    "gelu_torch": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "gelu_triton": triton_kernels.gelu,
    "gelu_manual": manual_gelu,
    "softmax": lambda x: torch.softmax(x.view(-1, 1024) if x.numel() >= 1024 else x, dim=-1),
}


def cupti_ms(fn, calls: int = 50) -> float:
    """Device time per call: sum of CUDA kernel/memory durations over back-to-back calls."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(
        e.time_range.elapsed_us()
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    return total_us / 1e3 / calls


def plugin_ms(fn, timer_name: str) -> tuple[float, float, str]:
    timer = make_timer(timer_name, "cuda")
    start = time.perf_counter()
    sampler = timer.sampler(Workload(fn))
    sampling = collect(sampler, Plan())
    sampler.close()
    cost = time.perf_counter() - start
    samples = sorted(sampling.samples_ms)
    return samples[len(samples) // 2], cost, sampling.timer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES))
    args = parser.parse_args()
    # CUPTI is measured last: once torch.profiler has run in a process, later launches may
    # carry its overhead, which would bias the other timers.
    rows, inputs = [], {}
    for size in (int(s) for s in args.sizes.split(",")):
        inputs[size] = x = torch.randn(size, device="cuda")
        for name, kernel in KERNELS.items():
            fn = functools.partial(kernel, x)
            fn()  # compile / load
            graph, graph_cost, graph_timer = plugin_ms(fn, "auto")
            event, event_cost, _ = plugin_ms(fn, "cuda-event")
            start = time.perf_counter()
            dob = triton.testing.do_bench(fn, return_mode="median")
            dob_cost = time.perf_counter() - start
            rows.append(
                dict(
                    kernel=name,
                    n=size,
                    gpubench_ms=graph,
                    gpubench_timer=graph_timer,
                    gpubench_cost_s=graph_cost,
                    event_ms=event,
                    event_cost_s=event_cost,
                    do_bench_ms=dob,
                    do_bench_cost_s=dob_cost,
                )
            )
    for row in rows:
        row["cupti_ms"] = cupti_ms(functools.partial(KERNELS[row["kernel"]], inputs[row["n"]]))
    print(
        f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"triton {triton.__version__}"
    )
    print(
        f"{'kernel':12} {'n':>10} {'CUPTI':>10} {'gpubench':>10} {'ratio':>6} "
        f"{'event':>6} {'do_bench':>8} {'cost s':>6}"
    )
    for r in rows:
        print(
            f"{r['kernel']:12} {r['n']:>10} {r['cupti_ms'] * 1e3:>8.2f}us "
            f"{r['gpubench_ms'] * 1e3:>8.2f}us {r['gpubench_ms'] / r['cupti_ms']:>6.3f} "
            f"{r['event_ms'] / r['cupti_ms']:>6.2f} {r['do_bench_ms'] / r['cupti_ms']:>8.2f} "
            f"{r['gpubench_cost_s']:>6.2f}"
        )
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(
                {
                    "device": torch.cuda.get_device_name(),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "rows": rows,
                },
                handle,
                indent=1,
            )


if __name__ == "__main__":
    main()
