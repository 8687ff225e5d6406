"""Measured quality of pytest-gpubench against CUPTI and the peers, on the GPU machine.

One command (under 10 minutes on an H100):

    python bench/quality.py run --out bench/results

1. accuracy: for the example-suite kernels at 4 sizes, the time each method reports divided
   by the CUPTI device time of the kernels per call (torch.profiler, back-to-back calls):
   gpubench's default timer, triton.testing.do_bench (median), torch.utils.benchmark's
   blocked_autorange (median) and a wall clock around each call with synchronizations;
2. stability: the same gpubench measurements in 8 fresh processes; the coefficient of
   variation across processes of the reported median;
3. cost: wall-clock seconds per estimate of each method (first-call compile excluded);
4. detection: a copy over (1 + d) N elements at 4 sizes, through the real pytest plugin with
   default settings: a baseline at d = 0, then fresh pytest processes at d = 0 (20 sessions,
   false alarms), d = 2%, 5% and 10% (10 sessions each, detection).

It writes bench/results/<gpu>-<date>.json and prints the tables. ``plot RESULTS PNG`` draws
the accuracy figure; ``tables RESULTS`` prints the Markdown tables of
bench/results/h100-2026-11-21/README.md (docs/performance.md quotes three).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZES = (1 << 12, 1 << 20, 1 << 24, 1 << 28)
STABILITY_PROCESSES = 8
DETECTION = {0.0: 20, 0.02: 10, 0.05: 10, 0.10: 10}  # d -> fresh sessions
DETECTION_SIZES = (1 << 19, 1 << 21, 1 << 23, 1 << 25)  # copy kernels of ~2 to ~90 us

DETECTION_TEST = """
import os

import pytest
import torch
import triton
import triton.language as tl

D = float(os.environ["GPUBENCH_D"])
BLOCK = 1024


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


@pytest.mark.parametrize("n", {sizes})
def test_copy(gpubench, n):
    src = torch.randn(int(n * 1.25), device="cuda")
    dst = torch.empty_like(src)
    m = round(n * (1 + D) / BLOCK) * BLOCK  # whole blocks: the work grows by d, nothing else
    grid = (m // BLOCK,)
    gpubench(lambda: copy_kernel[grid](src, dst, m, BLOCK=BLOCK))
"""


def kernels(include_compiled: bool) -> dict[str, Callable]:
    import torch

    sys.path.insert(0, str(ROOT / "example_suite"))
    import triton_kernels

    def manual_gelu(x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))

    def rows(x):  # the 2D kernels take rows of 1024 elements
        return x.view(-1, 1024)

    found = {
        "add_torch": lambda x: torch.add(x, x),
        "add_triton": lambda x: triton_kernels.add(x, x),
        "gelu_torch": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        "gelu_manual": manual_gelu,
        "gelu_triton": triton_kernels.gelu,
        "square_torch": torch.square,
        "square_triton": lambda x: triton_kernels.square_rows(rows(x)),
        "softmax_torch": lambda x: torch.softmax(rows(x), dim=1),
        "softmax_triton": lambda x: triton_kernels.softmax(rows(x)),
    }
    if include_compiled:
        compiled = torch.compile(manual_gelu, dynamic=False)
        found["gelu_compiled"] = compiled
    return found


def gpubench_ms(fn) -> tuple[float, float, str]:
    """The plugin's default estimate (median) and its cost, first call already made."""
    from pytest_gpubench.timing.engine import Plan, Workload, collect
    from pytest_gpubench.timing.timers import make_timer

    start = time.perf_counter()
    sampler = make_timer("auto", "cuda").sampler(Workload(fn))
    sampling = collect(sampler, Plan(min_samples=20))
    sampler.close()
    return statistics.median(sampling.samples_ms), time.perf_counter() - start, sampling.timer


def peers_ms(fn) -> dict[str, tuple[float, float]]:
    import torch
    import triton
    from torch.utils import benchmark

    out = {}
    start = time.perf_counter()
    out["do_bench"] = (
        triton.testing.do_bench(fn, return_mode="median"),
        time.perf_counter() - start,
    )
    start = time.perf_counter()
    measurement = benchmark.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange()
    out["torch_benchmark"] = (measurement.median * 1e3, time.perf_counter() - start)
    start = time.perf_counter()
    times = []
    for _ in range(23):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    out["wall_sync"] = (statistics.median(times[3:]), time.perf_counter() - start)
    return out


def cupti_ms(fn, calls: int = 50) -> float:
    """Device time per call: the kernels' durations summed over back-to-back calls."""
    import torch
    from torch.profiler import ProfilerActivity, profile

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


def accuracy() -> list[dict]:
    import torch

    rows, inputs = [], {}
    found = kernels(include_compiled=True)
    for size in SIZES:
        inputs[size] = x = torch.randn(size, device="cuda")
        for name, kernel in found.items():
            fn = lambda k=kernel, x=x: k(x)  # noqa: E731
            fn()  # compile, load
            median, cost, timer = gpubench_ms(fn)
            row = {
                "kernel": name,
                "n": size,
                "gpubench_timer": timer,
                "gpubench_ms": median,
                "gpubench_cost_s": cost,
            }
            for peer, (ms, peer_cost) in peers_ms(fn).items():
                row[f"{peer}_ms"], row[f"{peer}_cost_s"] = ms, peer_cost
            rows.append(row)
    # CUPTI last: after torch.profiler has run in a process, launches in it were slower.
    for row in rows:
        kernel, x = found[row["kernel"]], inputs[row["n"]]
        row["cupti_ms"] = cupti_ms(lambda k=kernel, x=x: k(x))
    return rows


def measure_once() -> dict[str, float]:
    """One process's gpubench medians (the stability child)."""
    import torch

    medians = {}
    for size in SIZES:
        x = torch.randn(size, device="cuda")
        for name, kernel in kernels(include_compiled=False).items():
            fn = lambda k=kernel, x=x: k(x)  # noqa: E731
            fn()
            medians[f"{name}/{size}"] = gpubench_ms(fn)[0]
        del x
    return medians


def stability() -> dict[str, list[float]]:
    runs: dict[str, list[float]] = {}
    for _ in range(STABILITY_PROCESSES):
        child = subprocess.run(
            [sys.executable, __file__, "measure"], capture_output=True, text=True, check=True
        )
        for key, value in json.loads(child.stdout.splitlines()[-1]).items():
            runs.setdefault(key, []).append(value)
    return runs


def detection() -> list[dict]:
    with tempfile.TemporaryDirectory() as workdir:
        return _detection(Path(workdir))


def _detection(workdir: Path) -> list[dict]:
    (workdir / "test_copy.py").write_text(DETECTION_TEST.format(sizes=list(DETECTION_SIZES)))
    (workdir / "pytest.ini").write_text("[pytest]\n")

    def session(d: float, *flags: str) -> dict:
        report = workdir / "report.json"
        env = {**os.environ, "GPUBENCH_D": str(d)}
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                *flags,
                "--gpubench-json",
                str(report),
            ],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
        )
        results = json.loads(report.read_text())["results"]
        return {
            "d": d,
            "tests": [
                {
                    "key": r["key"].split("::")[-1],
                    **r["verdict"],
                    "median_ms": r["summary"]["median_ms"],
                    "samples": r["summary"]["samples"],
                    "remeasured": r["remeasured"],
                }
                for r in results
            ],
        }

    baseline = session(0.0, "--gpubench-save")
    sessions = [baseline | {"save": True}]
    for d, count in DETECTION.items():
        for _ in range(count):
            sessions.append(session(d, "--gpubench"))
    return sessions


def run(out: Path, only: list[str], previous: Path | None) -> None:
    import torch
    import triton

    from pytest_gpubench.timing.device import detect

    device = detect(True)
    started = time.perf_counter()
    from pytest_gpubench.timing.clocks import ClockMonitor

    fingerprint = {**device.fingerprint, **ClockMonitor(device.uuid, device.index).static_info()}
    results: dict = {"device": fingerprint, "date": datetime.date.today().isoformat()}
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{device.key}-{results['date']}.json"
    if previous is not None:
        results = {**json.loads(previous.read_text()), **results}
    phases = {"accuracy": accuracy, "stability": stability, "detection": detection}
    for name in only or list(phases):
        phase = phases[name]  # saved after each phase: a cut-off run still leaves numbers
        print(f"{name}: started at {time.perf_counter() - started:.0f} s", file=sys.stderr)
        results[name] = phase()
        results["harness_s"] = time.perf_counter() - started
        path.write_text(json.dumps(results, indent=1) + "\n")
    print(
        f"{device.fingerprint['name']}, torch {torch.__version__}, triton {triton.__version__},"
        f" {results['harness_s']:.0f} s -> {path}"
    )
    print(tables(results))


def tables(results: dict) -> str:
    """The Markdown tables of bench/results/h100-2026-11-21/README.md."""
    lines = []
    peers = ("gpubench", "do_bench", "torch_benchmark", "wall_sync")
    lines.append(
        "| kernel | elements | CUPTI µs | " + " | ".join(f"{p} / CUPTI" for p in peers) + " |"
    )
    lines.append("|---|---|---|" + "---|" * len(peers))
    for r in results["accuracy"]:
        ratios = " | ".join(f"{r[f'{p}_ms'] / r['cupti_ms']:.3f}" for p in peers)
        lines.append(
            f"| {r['kernel']} | 2^{r['n'].bit_length() - 1} | "
            f"{r['cupti_ms'] * 1e3:.2f} | {ratios} |"
        )
    lines.append("")
    for title, column in (
        ("median over kernels", "{}_ms"),
        ("cost per estimate, median s", "{}_cost_s"),
    ):
        lines.append(f"| elements | {title}: " + " | ".join(peers) + " |")
        lines.append("|---|" + "---|" * len(peers))
        for size in SIZES:
            rows = [r for r in results["accuracy"] if r["n"] == size]
            cells = []
            for p in peers:
                key = column.format(p)
                scale = (lambda r: r["cupti_ms"]) if key.endswith("_ms") else (lambda r: 1.0)
                value = statistics.median(r[key] / scale(r) for r in rows)
                cells.append(f"{value:.3f}")
            lines.append(f"| 2^{size.bit_length() - 1} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(
        "| elements | kernel time (median) | cross-process CV of the median: median | max |"
    )
    lines.append("|---|---|---|---|")
    for size in SIZES:
        series = [v for k, v in results["stability"].items() if k.endswith(f"/{size}")]
        cvs = [statistics.stdev(v) / statistics.mean(v) for v in series]
        times = [statistics.median(v) for v in series]
        lines.append(
            f"| 2^{size.bit_length() - 1} | {statistics.median(times) * 1e3:.1f} µs | "
            f"{statistics.median(cvs) * 100:.2f}% | {max(cvs) * 100:.2f}% |"
        )
    lines.append("")
    sessions = [s for s in results["detection"] if not s.get("save")]
    base = {t["key"]: t["median_ms"] for t in results["detection"][0]["tests"]}
    keys = sorted(base, key=base.get)
    lines.append(
        "| d | sessions | "
        + " | ".join(f"{k.split('[')[1].rstrip(']')} elem. ({base[k] * 1e3:.1f} µs)" for k in keys)
        + " | any test flagged |"
    )
    lines.append("|---|---|" + "---|" * len(keys) + "---|")
    for d in DETECTION:
        group = [s for s in sessions if s["d"] == d]
        cells = []
        for k in keys:
            verdicts = [t for s in group for t in s["tests"] if t["key"] == k]
            flagged = sum(t["status"] == "regressed" for t in verdicts)
            ratios = [t["ratio"] for t in verdicts if t["ratio"]]
            cells.append(f"{flagged}/{len(verdicts)} (x{statistics.median(ratios):.3f})")
        anyflag = sum(
            any(t["status"] in ("regressed", "improved") for t in s["tests"]) for s in group
        )
        lines.append(
            f"| {d:.0%} | {len(group)} | " + " | ".join(cells) + f" | {anyflag}/{len(group)} |"
        )
    return "\n".join(lines)


def plot(results_path: Path, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(results_path.read_text())
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for peer, label in (
        ("gpubench", "gpubench (default)"),
        ("do_bench", "triton do_bench"),
        ("torch_benchmark", "torch.utils.benchmark"),
        ("wall_sync", "wall clock + sync"),
    ):
        xs, ys = [], []
        for size in SIZES:
            rows = [r for r in results["accuracy"] if r["n"] == size]
            xs.append(statistics.median(r["cupti_ms"] for r in rows) * 1e3)
            ys.append(statistics.median(r[f"{peer}_ms"] / r["cupti_ms"] for r in rows))
        ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("CUPTI kernel time per call, µs (median over kernels)")
    ax.set_ylabel("reported time / CUPTI time")
    device = results["device"]
    ax.set_title(f"{device['name']}, torch {device['torch']}, triton {device['triton']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    running = sub.add_parser("run")
    running.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    running.add_argument(
        "--only",
        nargs="*",
        choices=("accuracy", "stability", "detection"),
        help="run these phases only",
    )
    running.add_argument("--previous", type=Path, help="results file to complete")
    sub.add_parser("measure")
    plotting = sub.add_parser("plot")
    plotting.add_argument("results", type=Path)
    plotting.add_argument("png", type=Path)
    sub.add_parser("tables").add_argument("results", type=Path)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out, args.only, args.previous)
    elif args.command == "measure":
        print(json.dumps(measure_once()))
    elif args.command == "plot":
        plot(args.results, args.png)
    else:
        print(tables(json.loads(args.results.read_text())))


if __name__ == "__main__":
    main()
