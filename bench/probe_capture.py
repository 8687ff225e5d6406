"""GPU probes behind issue 8: what CUDA-graph capture, its failure and the profiler do.

Each experiment runs in a fresh process (CUDA and profiler state must not leak) and prints
one JSON line. Usage on a GPU machine: ``python bench/probe_capture.py`` (all experiments),
or ``python bench/probe_capture.py NAME`` for one. Findings are recorded in
bench/results/h200-2026-11-22/README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

LEGACY_SOURCE = r"""
#include <torch/types.h>
__global__ void twice_kernel(const float* x, float* y, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor twice_legacy(torch::Tensor x, torch::Tensor y) {
  int64_t n = x.numel();
  twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""


def legacy_module():
    from torch.utils.cpp_extension import load_inline

    build = os.path.join(tempfile.gettempdir(), "gpubench-probe-legacy")
    os.makedirs(build, exist_ok=True)
    return load_inline(
        "gpubench_probe_legacy",
        cpp_sources="torch::Tensor twice_legacy(torch::Tensor x, torch::Tensor y);",
        cuda_sources=LEGACY_SOURCE,
        functions=["twice_legacy"],
        build_directory=build,
        extra_cuda_cflags=["-O3"],
    )


def kernels_of(fn, torch):
    """(name, grid, block, metadata) of the GPU kernels one call of fn runs, from CUPTI."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    out = []
    for ev in prof.profiler.kineto_results.events():
        if ev.device_type() == torch.autograd.DeviceType.CUDA:
            meta = ev.metadata_json() if hasattr(ev, "metadata_json") else ""
            out.append({"name": ev.name()[:80], "us": ev.duration_ns() / 1e3, "meta": meta[:300]})
    return out


def graph_of(call, calls, torch, mode="global"):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g, capture_error_mode=mode):
        for _ in range(calls):
            call()
    torch.cuda.synchronize()
    return g


def graph_nodes(g):
    """Node types of a kept graph, through cuda-bindings (None when unavailable)."""
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return None
    raw = g.raw_cuda_graph()
    err, _, n = rt.cudaGraphGetNodes(raw, 0)
    err, nodes, n = rt.cudaGraphGetNodes(raw, n)
    kinds = []
    for node in nodes[:n]:
        err, kind = rt.cudaGraphNodeGetType(node)
        kinds.append(str(kind).split(".")[-1])
    return kinds


def last_error():
    try:
        from cuda.bindings import runtime as rt
    except ImportError:
        return None
    return str(rt.cudaGetLastError()[0]).split(".")[-1]


def event_ms(fn, torch, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        torch.cuda._sleep(100_000)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return sorted(times)[len(times) // 2]


def replay_ms(g, calls, torch, reps=20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        torch.cuda._sleep(100_000)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / calls)
    return sorted(times)[len(times) // 2]


# --- experiments ------------------------------------------------------------------------


def triple_kernel():
    """A Triton kernel that writes 3 * x (imported only by the probes that run it)."""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = o < n
        tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) * 3, mask=m)

    return k


def exp_legacy():
    import torch

    t0 = time.time()
    mod = legacy_module()
    build_s = time.time() - t0
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    call = lambda: mod.twice_legacy(x, y)  # noqa: E731
    call()
    torch.cuda.synchronize()
    out = {"build_s": round(build_s, 1), "eager_us": event_ms(call, torch) * 1e3}
    for mode in ("global", "thread_local", "relaxed"):
        y.zero_()
        try:
            g = graph_of(call, 10, torch, mode)
            out[mode] = {
                "captured": True,
                "last_error": last_error(),
                "nodes": graph_nodes(g),
                "replay_us": replay_ms(g, 10, torch) * 1e3,
                "y_written_by_capture": bool((y == 2 * x).all()),
            }
            y.zero_()
            torch.cuda.synchronize()
            g.replay()
            torch.cuda.synchronize()
            out[mode]["y_written_by_replay"] = bool((y == 2 * x).all())
            out[mode]["replay_kernels"] = kernels_of(g.replay, torch)
        except Exception as exc:
            out[mode] = {"captured": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            torch.cuda.synchronize()
    out["eager_kernels"] = kernels_of(call, torch)
    return out


def exp_item_then_rng():
    """A function that syncs fails capture; is the process still sane afterwards?"""
    import torch

    x = torch.randn(1 << 16, device="cuda")

    def syncing():
        return int((x > 0).sum().item())

    syncing()
    out = {}
    # Detection without capture: sync debug mode raises on synchronizing torch calls.
    torch.cuda.set_sync_debug_mode("error")
    try:
        syncing()
        out["sync_debug_detects"] = False
    except RuntimeError as exc:
        out["sync_debug_detects"] = str(exc)[:120]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    state = torch.cuda.get_rng_state()
    try:
        graph_of(syncing, 1, torch)
        out["capture"] = "succeeded?!"
    except Exception as exc:
        out["capture"] = f"{type(exc).__name__}: {str(exc)[:150]}"
    for label, action in (
        ("randn_after_failure", lambda: torch.randn(8, device="cuda")),
        ("dropout_after_failure", lambda: torch.nn.functional.dropout(x, 0.5)),
    ):
        try:
            action()
            torch.cuda.synchronize()
            out[label] = "ok"
        except Exception as exc:
            out[label] = f"{type(exc).__name__}: {str(exc)[:120]}"
    # Repairs, in order: restore the RNG state; an empty successful capture.
    try:
        torch.cuda.set_rng_state(state)
        torch.randn(8, device="cuda")
        out["after_set_rng_state"] = "ok"
    except Exception as exc:
        out["after_set_rng_state"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            pass
        torch.randn(8, device="cuda")
        out["after_empty_capture"] = "ok"
    except Exception as exc:
        out["after_empty_capture"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    out["generator_attrs"] = [a for a in dir(gen) if not a.startswith("_")]
    return out


def exp_item_rng_fresh_generator():
    """Same failure; repair by a capture that registers the generator and ends cleanly."""
    import torch

    x = torch.randn(1 << 16, device="cuda")

    def syncing():
        return int((x > 0).sum().item())

    syncing()
    gen = torch.cuda.default_generators[torch.cuda.current_device()]
    seed, offset = gen.initial_seed(), None
    try:
        offset = gen.get_offset()
    except Exception:
        pass
    try:
        graph_of(syncing, 1, torch)
    except Exception:
        pass
    out = {"seed": seed, "offset_before": offset}
    try:
        out["offset_after"] = gen.get_offset()
    except Exception as exc:
        out["offset_after"] = f"{type(exc).__name__}: {str(exc)[:100]}"
    try:
        g = torch.cuda.CUDAGraph()
        g.capture_begin()
        g.capture_end()
        torch.randn(8, device="cuda")
        out["after_capture_begin_end"] = "ok"
    except Exception as exc:
        out["after_capture_begin_end"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    return out


def exp_profiler_effect():
    """Does a torch.profiler session slow later graph-timed small kernels? TEARDOWN_CUPTI?"""
    import torch

    x = torch.randn(4096, device="cuda")
    big = torch.randn(1 << 24, device="cuda")
    call = lambda: x.mul_(1.0000001)  # noqa: E731
    bigcall = lambda: big.mul_(1.0000001)  # noqa: E731
    g = graph_of(call, 200, torch)
    gb = graph_of(bigcall, 20, torch)
    out = {"TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI")}
    out["before_us"] = replay_ms(g, 200, torch, 50) * 1e3
    out["before_big_us"] = replay_ms(gb, 20, torch, 20) * 1e3
    out["before_eager_us"] = event_ms(call, torch, 50) * 1e3
    t0 = time.perf_counter()
    ks = kernels_of(call, torch)
    out["profile_s"] = round(time.perf_counter() - t0, 4)
    t0 = time.perf_counter()
    kernels_of(call, torch)
    out["profile2_s"] = round(time.perf_counter() - t0, 4)
    out["kernels"] = ks
    out["after_us"] = replay_ms(g, 200, torch, 50) * 1e3
    out["after_big_us"] = replay_ms(gb, 20, torch, 20) * 1e3
    out["after_eager_us"] = event_ms(call, torch, 50) * 1e3
    # Graphs captured after profiling, and many profile/capture cycles: crashes?
    for _ in range(20):
        g2 = graph_of(call, 50, torch)
        kernels_of(g2.replay, torch)
    out["cycles"] = "20 ok"
    g3 = graph_of(call, 200, torch)
    out["after_cycles_us"] = replay_ms(g3, 200, torch, 50) * 1e3
    return out


def exp_triton_meta():
    """What CUPTI through torch.profiler tells of a Triton kernel and a torch kernel."""
    import torch
    import triton

    k = triple_kernel()

    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)

    def call():
        k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, num_warps=4)
        torch.nn.functional.softmax(x.view(1024, 1024), dim=-1)

    call()
    return {"kernels": kernels_of(call, torch)}


def exp_perturb():
    """Do profiler sessions between timings slow later graph replays? Control: captures only."""
    import torch

    k = triple_kernel()

    mode = os.environ.get("PROBE_MODE", "control")
    small = torch.randn(4096, device="cuda")
    mid = torch.randn(1 << 20, device="cuda")
    mid_out = torch.empty_like(mid)
    big = torch.randn(1 << 24, device="cuda")
    calls = {
        "small": lambda: small.mul_(1.0000001),
        "triton_1m": lambda: k[(1024,)](mid, mid_out, mid.numel(), BLOCK=1024),
        "big": lambda: big.mul_(1.0000001),
    }
    for c in calls.values():
        c()
    reps = {"small": 200, "triton_1m": 100, "big": 10}
    graphs = {n: graph_of(c, reps[n], torch) for n, c in calls.items()}

    def timings():
        return {n: round(replay_ms(graphs[n], reps[n], torch, 40) * 1e3, 4) for n in calls}

    out = {"mode": mode, "before": timings()}
    other = torch.randn(1 << 16, device="cuda")
    t0 = time.perf_counter()
    for _ in range(30):
        fn = lambda: other.add_(1.0)  # noqa: E731
        g = graph_of(fn, 5, torch)
        if mode != "control":
            kernels_of(fn, torch)
            kernels_of(g.replay, torch)
    out["cycles_s"] = round(time.perf_counter() - t0, 3)
    out["after"] = timings()
    graphs = {n: graph_of(c, reps[n], torch) for n, c in calls.items()}
    out["after_recaptured"] = timings()
    return out


def exp_trace_meta():
    """Kernel grid, block, registers and shared memory from a chrome trace of one call."""
    import torch
    import triton
    from torch.profiler import ProfilerActivity, profile

    k = triple_kernel()

    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)

    def call():
        k[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024, num_warps=4)
        torch.nn.functional.softmax(x.view(1024, 1024), dim=-1)
        y.zero_()
        y.copy_(x)

    call()
    kernels_of(call, torch)  # the first profile pays CUPTI's start-up
    out = {}
    for rep in range(3):
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        path = os.path.join(tempfile.gettempdir(), f"trace{rep}.json")
        prof.export_chrome_trace(path)
        t2 = time.perf_counter()
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        t3 = time.perf_counter()
        out[f"cost_{rep}"] = {
            "profile_s": round(t1 - t0, 4),
            "export_s": round(t2 - t1, 4),
            "parse_s": round(t3 - t2, 4),
            "events": len(events),
        }
    out["gpu_events"] = [
        {
            "cat": e.get("cat"),
            "name": e.get("name", "")[:60],
            "dur": e.get("dur"),
            "args": {a: v for a, v in e.get("args", {}).items() if a not in ("External id",)},
        }
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    return out


EXPERIMENTS = {
    "perturb": exp_perturb,
    "trace_meta": exp_trace_meta,
    "legacy": exp_legacy,
    "item_then_rng": exp_item_then_rng,
    "item_rng_fresh_generator": exp_item_rng_fresh_generator,
    "profiler_effect": exp_profiler_effect,
    "triton_meta": exp_triton_meta,
}


def main() -> None:
    if len(sys.argv) > 1:
        name = sys.argv[1]
        try:
            result = EXPERIMENTS[name]()
        except Exception:
            result = {"crashed": traceback.format_exc()[-800:]}
        print(json.dumps({"experiment": name, **result}, default=str))
        return
    if len(sys.argv) == 1 and os.environ.get("PROBE_ONLY"):
        names = os.environ["PROBE_ONLY"].split(",")
    else:
        names = list(EXPERIMENTS)
    runs = [(n, {}) for n in names if n != "perturb"]
    if "perturb" in names:
        for mode in ("control", "profile", "control", "profile"):
            runs.append(("perturb", {"PROBE_MODE": mode}))
        runs.append(("perturb", {"PROBE_MODE": "profile", "TEARDOWN_CUPTI": "1"}))
    for name, env in runs:
        proc = subprocess.run(
            [sys.executable, __file__, name],
            capture_output=True,
            text=True,
            env={**os.environ, **env},
            timeout=300,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        print(
            lines[-1] if lines else json.dumps({"experiment": name, "stderr": proc.stderr[-800:]})
        )


if __name__ == "__main__":
    main()
