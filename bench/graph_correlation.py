"""Whether a graph replay's kernels carry the CUPTI correlation id of the cudaGraphLaunch
that queued them, over many profiler sessions of one process (GPU, probe).

    python bench/graph_correlation.py [SESSIONS]

timing.cuda splits a lockstep trace of replays by that id. CUPTI's release notes for CUDA
13.1 Update 1 say graph kernels got wrong ids in profiling sessions after the first, so this
checks it on the GPU at hand: two graphs (one with a spin kernel of its own, 6 kernels; one
of 4 kernels) replayed ABBA twice in each session, an eager profile every third session
between. A session is right where each launch owns exactly its graph's kernels and no
device work is left unowned. Prints a line per session and the count of wrong ones (exit 1
if any). Results: bench/results/h100-2026-12-06e.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import torch
from torch.profiler import ProfilerActivity, profile

DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def trace(run) -> list[dict]:
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        run()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    os.unlink(path)
    return [e for e in events if e.get("ph") == "X"]


def correlation(event: dict) -> int | None:
    found = (event.get("args") or {}).get("correlation")
    return None if found is None else int(found)


def main() -> int:
    sessions = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    x = torch.randn(1 << 22, device="cuda")

    def spun():
        y = x * 2
        torch.cuda._sleep(3000)  # the function's own spin, as bench/fla_suite's plant
        return y + 1

    def plain():
        return x * 3 + 1

    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        for _ in range(3):
            spun(), plain()
    torch.cuda.synchronize()
    graphs = {
        "spun": (torch.cuda.CUDAGraph(), spun, 6),
        "plain": (torch.cuda.CUDAGraph(), plain, 4),
    }
    for graph, fn, _ in graphs.values():
        with torch.cuda.graph(graph):
            fn(), fn()
    torch.cuda.synchronize()
    order = ["spun", "plain", "plain", "spun"] * 2
    wrong = 0
    for session in range(sessions):
        if session % 3 == 2:  # an eager profile between, as a run profiles eager calls
            trace(lambda: [plain() for _ in range(5)])
        events = trace(lambda: [graphs[name][0].replay() for name in order])
        launches = sorted(
            (
                e
                for e in events
                if e.get("cat") == "cuda_runtime" and "cudaGraphLaunch" in str(e.get("name"))
            ),
            key=lambda e: e["ts"],
        )
        owned = {correlation(e): 0 for e in launches}
        unowned = 0
        for e in events:
            if e.get("cat") in DEVICE_WORK:
                if correlation(e) in owned:
                    owned[correlation(e)] += 1
                else:
                    unowned += 1
        counts = list(owned.values())
        right = counts == [graphs[name][2] for name in order] and unowned == 0
        wrong += not right
        print(
            f"session {session}: {'right' if right else 'WRONG'}: kernels per launch {counts}, "
            f"unowned {unowned}"
        )
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}: {wrong} of {sessions} wrong")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
