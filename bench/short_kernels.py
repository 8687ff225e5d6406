"""Short kernels: graph time per call against CUPTI kernel time inside the replay (issue 16).

Graph-timed kernels of 1-3 µs read 1.14-1.31x CUPTI kernel time and move 2-9.5% between
sessions (a survey of code this project did not write, not recorded here); Triton's
``do_bench_cudagraph_proton`` instead reads each iteration's kernels with CUPTI inside a graph
replay. This script measures, in one fresh process, a fixed set of short functions (and one
~50 µs reference) four ways:

- ``graph_us``: a CUDA graph of N back-to-back calls (N chosen so that a replay takes about
  1.5 ms), timed by CUDA events around each replay (queued behind a spin kernel, as the
  plugin's ``cuda-graph`` timer does), median of 30 replays, divided by N;
- ``cupti_sum_us``: the summed CUPTI duration of the function's kernels over a few replays of
  that graph, per call (what ``do_bench_cudagraph_proton`` returns in its default mean mode:
  launch gaps left out);
- ``cupti_span_us``: per call inside those replays, the last kernel's end minus the first
  kernel's start (gaps between a call's own kernels in, gaps between calls out), median over
  the calls;
- ``eager_cupti_us``: the summed CUPTI duration of one eager call's kernels, averaged over
  10 back-to-back eager calls (the plugin's ``cupti`` timer).

CUPTI runs after every function's graph timing: once ``torch.profiler`` has run in a process,
later launches in it are slower (bench/results/h100-2026-11-21/README.md).
``--prime-profiler`` starts the profiler once before anything is timed, as the plugin does
(``prime_profiler``), so the graph time is the one the plugin gates. Kernel timestamps come
from the profiler's Chrome trace (the plugin reads the same), kernels (``"cat": "kernel"``)
only. Each call's kernels are told apart by order: an eager call's kernel sequence repeats N
times per replay; kernels not in that sequence (a replay's prologue) are left out and counted.

Usage:
    python bench/short_kernels.py session --out DIR/session-K.json [--prime-profiler]
    python bench/short_kernels.py summarize DIR/*.json [--markdown]
    bash bench/short_kernels.sh OUT [N] [MODE]   # N fresh sessions, then the summary

Importable without torch, triton or a GPU: the summary and the span arithmetic are pure and
tested on the CPU (tests/timing/test_short_kernels.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

try:
    import triton
    import triton.language as tl

    @triton.jit
    def square_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x * x + y, mask=mask)

except ImportError:  # the summary and the tests need neither triton nor a GPU
    triton = None

# A kernel (start µs, end µs, name) and a kernel of a call (start µs, end µs, call index).
Kernel = tuple[float, float, str]
Tagged = tuple[float, float, int]

REPLAY_TARGET_MS = 1.5  # a timed replay lasts about this long
MIN_CALLS, MAX_CALLS = 20, 2000  # calls per graph
TIMED_REPLAYS = 30
PROFILED_REPLAYS = 3
EAGER_CALLS = 10
SLEEP_MS = 0.05  # the spin kernel before a timed replay outlasts the host's enqueueing of it
NAME_CHARS = 120
METRICS = ("graph_us", "cupti_span_us", "cupti_sum_us", "eager_cupti_us")
LABELS = {
    "graph_us": "graph",
    "cupti_span_us": "span",
    "cupti_sum_us": "sum",
    "eager_cupti_us": "eager",
}
MAD_NORMAL = 0.6745  # the median absolute deviation of a standard normal


# --- pure: kernels of a trace, calls, spans -----------------------------------------------


def kernel_events(trace: Iterable[Mapping[str, Any]]) -> list[Kernel]:
    """The kernels of a Chrome trace (torch.profiler's export), in start order."""
    out = []
    for event in trace:
        if event.get("cat") == "kernel":
            start = float(event["ts"])
            out.append((start, start + float(event.get("dur") or 0.0), str(event.get("name"))))
    return sorted(out)


def assign_calls(
    kernels: Sequence[Kernel], sequence: Sequence[str]
) -> tuple[list[Tagged], Counter[str], int]:
    """Each of the function's kernels tagged with its call, by order: ``sequence`` (one eager
    call's kernel names) repeats once per call. Returns the tagged kernels, the kernels left out
    (not in the sequence) by name, and how many calls ran another sequence."""
    names = set(sequence)
    kept = [k for k in kernels if k[2] in names]
    excluded = Counter(k[2] for k in kernels if k[2] not in names)
    per = len(sequence)
    tagged = [(start, end, i // per) for i, (start, end, _) in enumerate(kept)]
    calls = [[k[2] for k in kept[i : i + per]] for i in range(0, len(kept), per)]
    return tagged, excluded, sum(1 for call in calls if call != list(sequence))


def _by_call(kernels: Iterable[Tagged]) -> dict[int, list[tuple[float, float]]]:
    calls: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for start, end, call in kernels:
        calls[call].append((start, end))
    return dict(sorted(calls.items()))


def call_spans(kernels: Iterable[Tagged]) -> list[float]:
    """Per call (in call order): its last kernel's end minus its first kernel's start."""
    return [max(e for _, e in ks) - min(s for s, _ in ks) for ks in _by_call(kernels).values()]


def call_sums(kernels: Iterable[Tagged]) -> list[float]:
    """Per call (in call order): the summed duration of its kernels."""
    return [sum(e - s for s, e in ks) for ks in _by_call(kernels).values()]


# --- pure: between-session statistics and the table ---------------------------------------


def log_sd(values: Sequence[float]) -> float | None:
    """The between-session CV: the sample standard deviation of the logs (None under 2)."""
    if len(values) < 2:
        return None
    return statistics.stdev(math.log(v) for v in values)


def lower_half_spread(values: Sequence[float]) -> float | None:
    """The spread of the logs from the lower half only: the median distance below the median,
    over 0.6745 (a normal's sd; blind to one-sided slow excursions). None under 3 values."""
    if len(values) < 3:
        return None
    logs = [math.log(v) for v in values]
    middle = statistics.median(logs)
    below = [middle - x for x in logs if x < middle]
    return statistics.median(below) / MAD_NORMAL if below else 0.0


def _values(entries: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    """One metric of a function over the sessions that measured it without an error."""
    values = (e.get(key) for e in entries if not e.get("error"))
    return [float(v) for v in values if isinstance(v, int | float) and v > 0]


def group_key(session: Mapping[str, Any]) -> str:
    mode = "profiler primed first" if session.get("prime_profiler") else "profiler after timing"
    return f"{session.get('device', '?')}, {mode}"


def summarize(sessions: Sequence[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Per group (device and profiler mode), per function: the sessions, each metric's median
    and spreads, the ratio graph/sum (median of the sessions' ratios), the steadiest metric
    by each spread and the sessions' errors."""
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for s in sessions:
        groups[group_key(s)].append(s)
    out = {}
    for key, members in sorted(groups.items()):
        functions = list(dict.fromkeys(f for s in members for f in s["functions"]))
        rows = []
        for function in functions:
            entries = [s["functions"][function] for s in members if function in s["functions"]]
            row: dict[str, Any] = {
                "function": function,
                "sessions": sum(1 for e in entries if not e.get("error")),
                "errors": sorted({e["error"] for e in entries if e.get("error")}),
                "kernels_per_call": _common(e.get("kernels_per_call") for e in entries),
            }
            for metric in METRICS:
                values = _values(entries, metric)
                row[metric] = statistics.median(values) if values else None
                row[f"{metric}_cv"] = log_sd(values)
                row[f"{metric}_low"] = lower_half_spread(values)
            ratios = [
                e["graph_us"] / e["cupti_sum_us"]
                for e in entries
                if not e.get("error") and e.get("graph_us") and e.get("cupti_sum_us")
            ]
            row["graph_over_sum"] = statistics.median(ratios) if ratios else None
            row["steadiest_cv"] = steadiest(row, "cv")
            row["steadiest_low"] = steadiest(row, "low")
            rows.append(row)
        out[key] = rows
    return out


def _common(values: Iterable[Any]) -> Any:
    found = {v for v in values if v is not None}
    return found.pop() if len(found) == 1 else (sorted(found) or None)


def steadiest(row: Mapping[str, Any], spread: str) -> str | None:
    """The metric whose ``spread`` ("cv" or "low") is the smallest; None without spreads."""
    scored = [(row[f"{m}_{spread}"], m) for m in METRICS if row[f"{m}_{spread}"] is not None]
    return LABELS[min(scored)[1]] if scored else None


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def markdown(summary: Mapping[str, Sequence[Mapping[str, Any]]], meta: str = "") -> str:
    """The summary as Markdown: one table per group."""
    lines = []
    for key, rows in summary.items():
        lines += [f"### {key}", ""]
        if meta:
            lines += [meta, ""]
        head = ["function", "kernels", "sessions", "graph µs", "span µs", "sum µs", "eager µs"]
        head += ["graph/sum", "graph CV / low %", "span CV / low %", "sum CV / low %"]
        head += ["eager CV / low %", "steadiest by CV / low"]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        notes = []
        for r in rows:
            cells = [r["function"], str(r["kernels_per_call"] or "–"), str(r["sessions"])]
            cells += [_us(r[m]) for m in METRICS]
            ratio = r["graph_over_sum"]
            cells.append("–" if ratio is None else f"{ratio:.3f}")
            cells += [f"{_pct(r[f'{m}_cv'])} / {_pct(r[f'{m}_low'])}" for m in METRICS]
            cells.append(f"{r['steadiest_cv'] or '–'} / {r['steadiest_low'] or '–'}")
            lines.append("| " + " | ".join(cells) + " |")
            notes += [f"- {r['function']}: {error}" for error in r["errors"]]
        lines.append("")
        if notes:
            lines += ["Errors (sessions left out of that function's numbers):", *notes, ""]
    lines += [
        "graph: time per call of a CUDA graph replay (CUDA events); span: per call inside the "
        "replay, last kernel end minus first kernel start (CUPTI); sum: the call's summed "
        "kernel durations inside the replay (CUPTI, what do_bench_cudagraph_proton returns); "
        "eager: summed kernel durations of one eager call (CUPTI). CV: sd of the sessions' "
        "log medians; low: the lower half's spread (median distance below the median / "
        "0.6745), blind to slow excursions. graph/sum: the median of the sessions' ratios.",
    ]
    return "\n".join(lines) + "\n"


def load(paths: Sequence[Path]) -> list[dict[str, Any]]:
    sessions = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
            continue
        if not isinstance(data, dict) or not isinstance(data.get("functions"), dict):
            print(f"skipped {path}: not a session of bench/short_kernels.py", file=sys.stderr)
            continue
        sessions.append(data)
    return sessions


# --- on the GPU ---------------------------------------------------------------------------


def functions() -> dict[str, Callable[[], object]]:
    """The measured functions, inputs allocated once (float32)."""
    import torch
    import torch.nn.functional as F

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device="cuda")

    def square_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        square_add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out

    def chain(x: torch.Tensor) -> torch.Tensor:  # 8 launches: launch gaps dominate
        return x.add(1).mul(2).sin().abs().sqrt().neg().exp().relu()

    k4, m1, m16 = 4096, 1 << 20, 1 << 24
    a4, b4, a1, b1, a16, b16 = randn(k4), randn(k4), randn(m1), randn(m1), randn(m16), randn(m16)
    s64, s1k = randn(64, 64), randn(1024, 1024)
    return {
        "torch add 4096": lambda: torch.add(a4, b4),
        "torch add 1M": lambda: torch.add(a1, b1),
        "torch gelu 4096": lambda: F.gelu(a4),
        "triton square_add 4096": lambda: square_add(a4, b4),
        "triton square_add 1M": lambda: square_add(a1, b1),
        "torch softmax 64x64": lambda: torch.softmax(s64, dim=-1),
        "torch softmax 1024x1024": lambda: torch.softmax(s1k, dim=-1),
        "torch chain of 8 ops 4096": lambda: chain(a4),
        "torch add 16M (reference)": lambda: torch.add(a16, b16),
    }


def _trace(run: Callable[[], object]) -> list[dict[str, Any]]:
    """The Chrome-trace events of what ``run`` does on the device (CUPTI via torch.profiler)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run()
            torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(prefix="short-kernels-", suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as handle:
            return list(json.load(handle).get("traceEvents", []))
    finally:
        os.unlink(path)


def _capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture's stream (workspaces, autotune)
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    return graph


def _sleep_cycles_per_ms() -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cycles = 2_000_000
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(3):
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return cycles / best


def _replay_ms(graph: torch.cuda.CUDAGraph, sleep_cycles: int) -> float:
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(sleep_cycles)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end))


def time_graph(
    fn: Callable[[], object], sleep_cycles: int
) -> tuple[torch.cuda.CUDAGraph, dict[str, Any]]:
    """(a): the graph of N calls and its time per call."""
    probe = _capture(fn, MIN_CALLS)
    for _ in range(3):
        _replay_ms(probe, sleep_cycles)
    estimate_ms = statistics.median(_replay_ms(probe, sleep_cycles) for _ in range(5)) / MIN_CALLS
    del probe
    calls = max(MIN_CALLS, min(MAX_CALLS, round(REPLAY_TARGET_MS / max(estimate_ms, 1e-6))))
    graph = _capture(fn, calls)
    for _ in range(3):
        _replay_ms(graph, sleep_cycles)
    samples = [_replay_ms(graph, sleep_cycles) * 1e3 / calls for _ in range(TIMED_REPLAYS)]
    return graph, {
        "graph_calls": calls,
        "graph_replays": TIMED_REPLAYS,
        "graph_us": statistics.median(samples),
        "graph_samples_us": [round(s, 5) for s in samples],
    }


def _repeat(fn: Callable[[], object], times: int) -> Callable[[], None]:
    def run() -> None:
        for _ in range(times):
            fn()

    return run


def profile_function(
    fn: Callable[[], object], graph: torch.cuda.CUDAGraph, calls: int
) -> dict[str, Any]:
    """(c) then (b): an eager call's kernels and CUPTI time; the kernels of a few replays."""
    fn()
    eager = kernel_events(_trace(_repeat(fn, EAGER_CALLS)))
    if not eager:
        raise RuntimeError(
            f"CUPTI recorded no kernels in {EAGER_CALLS} eager calls: the function runs no "
            "kernel, or the profiler records none on this machine"
        )
    if len(eager) % EAGER_CALLS:
        raise RuntimeError(
            f"{len(eager)} kernels in {EAGER_CALLS} eager calls: calls differ in their kernels"
        )
    per_call = len(eager) // EAGER_CALLS
    sequence = [name for _, _, name in eager[:per_call]]
    found = kernel_events(_trace(_repeat(graph.replay, PROFILED_REPLAYS)))
    tagged, excluded, misordered = assign_calls(found, sequence)
    expected = PROFILED_REPLAYS * calls * per_call
    result: dict[str, Any] = {
        "kernels_per_call": per_call,
        "kernels": [name[:NAME_CHARS] for name in sequence],
        "eager_cupti_us": sum(e - s for s, e, _ in eager) / EAGER_CALLS,
        "cupti_replays": PROFILED_REPLAYS,
        "excluded_kernels": {name[:NAME_CHARS]: n for name, n in excluded.items()},
        "misordered_calls": misordered,
    }
    if len(tagged) != expected:
        hint = (
            " (a graph captured before the profiler first ran may go unrecorded: compare "
            "--prime-profiler sessions)"
            if not tagged
            else ""
        )
        result["error"] = (
            f"CUPTI recorded {len(tagged)} of the function's kernels in {PROFILED_REPLAYS} "
            f"replays of {calls} calls, {expected} expected ({len(found)} kernels in all){hint}"
        )
        return result
    spans, sums = call_spans(tagged), call_sums(tagged)
    result["cupti_sum_us"] = sum(sums) / len(sums)
    result["cupti_sum_call_median_us"] = statistics.median(sums)
    result["cupti_span_us"] = statistics.median(spans)
    return result


def session(out: Path, prime: bool) -> None:
    import torch

    if not torch.cuda.is_available():
        sys.exit("no CUDA device: the session command measures on a GPU")
    started = time.perf_counter()
    if prime:  # as the plugin does: every timing then runs with the profiler attached
        scratch = torch.zeros(1, device="cuda")
        _trace(lambda: scratch.add_(1))
    sleep_cycles = int(SLEEP_MS * _sleep_cycles_per_ms())
    fns = functions()
    results: dict[str, dict[str, Any]] = {}
    graphs = {}
    for name, fn in fns.items():
        try:
            graphs[name], results[name] = time_graph(fn, sleep_cycles)
        except Exception as exc:
            traceback.print_exc()
            results[name] = {"error": f"graph timing failed: {type(exc).__name__}: {exc}"}
    # CUPTI only after every graph timing: the profiler slows later launches.
    for name, fn in fns.items():
        if name not in graphs:
            continue
        try:
            results[name].update(profile_function(fn, graphs[name], results[name]["graph_calls"]))
        except Exception as exc:
            traceback.print_exc()
            results[name]["error"] = f"CUPTI failed: {type(exc).__name__}: {exc}"
        if results[name].get("error"):
            print(f"{name}: {results[name]['error']}", file=sys.stderr)
    data = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__ if triton is not None else None,
        "cuda": torch.version.cuda,
        "prime_profiler": prime,
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 2),
        "functions": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(out)
    for name, r in results.items():
        cells = [f"{m}={r[m]:.4g}" for m in METRICS if isinstance(r.get(m), float)]
        print(f"{name}: {' '.join(cells) or r.get('error')}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("session", help="One process's measurements, into a JSON file")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument(
        "--prime-profiler", action="store_true", help="Start the profiler once before timing"
    )
    summary = commands.add_parser("summarize", help="Between-session spreads of sessions")
    summary.add_argument("paths", nargs="+", type=Path)
    summary.add_argument("--markdown", action="store_true", help="A Markdown table, not JSON")
    args = parser.parse_args(argv)
    if args.command == "session":
        session(args.out, args.prime_profiler)
        return 0
    sessions = load(args.paths)
    if not sessions:
        print("no sessions to summarize", file=sys.stderr)
        return 1
    result = summarize(sessions)
    if args.markdown:
        versions = sorted({f"torch {s.get('torch')}, triton {s.get('triton')}" for s in sessions})
        print(markdown(result, "; ".join(versions)), end="")
    else:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
