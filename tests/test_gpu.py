"""GPU tests (``pytest tests -m gpu``): the CUDA timers on code written the way users write
it; skipped without a CUDA GPU.

What the fallback tree (timing/fallback.py, tested on plain facts in tests/timing/test_fallback.py)
decides, here with torch on the device: a Triton kernel is timed by a validated graph; a
function that synchronizes is found before any capture and timed by ``cupti``; a kernel
launched with ``<<<grid, block>>>`` (the legacy default stream) is caught by the replay check;
work forked onto a side stream and joined back is captured whole; an autograd backward fails
capture, and the process is repaired (RNG and dropout work in the next test); ``cupti`` on
request; a chain of short launches, whose graph time is mostly launch gaps, is gated on its
kernel time in the replay (``cupti-graph``); all of it under ``-W error``. Then what a
baseline says of changed code: another launch configuration or other kernels are another
binary (``changed``, never judged on time), other software is named; and 10% more work in
the same launches fails once fresh processes on the same GPU confirm it.

Each pytest run is a subprocess: CUDA contexts, compiled kernels and captured graphs must not
leak between runs.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import read_baseline

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

USER_CODE = r'''
import os
import tempfile

import pytest
import torch
import triton
import triton.language as tl

# 2**25 floats: 128 MiB read and 128 MiB written, far beyond L2, so time grows with size.
N = 1 << 25
# More work in the same launches (the grid covers ALLOCATED whatever the work): a real
# regression of the same binary. More blocks would be another binary, never a regression.
EXTRA = float(os.environ.get("GPUBENCH_TEST_EXTRA", "0"))
ALLOCATED = N + N // 4
BLOCK = int(os.environ.get("GPUBENCH_TEST_BLOCK", "1024"))  # another launch configuration
MORE = os.environ.get("GPUBENCH_TEST_MORE") == "1"  # one more kernel per call


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, 2.0 * x + 1.0, mask=mask)


def axpb(x, y, n=None):
    n = x.numel() if n is None else n
    axpb_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, n, BLOCK=BLOCK)
    if MORE:
        y.mul_(1.0)
    return y


def test_triton(gpubench):
    assert gpubench.device == "cuda"
    x = torch.randn(ALLOCATED, device="cuda")
    n = round((1 + EXTRA) * N / 1024) * 1024  # a multiple of 16: one specialization of n
    y = gpubench(axpb, x, torch.empty_like(x), n, bytes=8 * n)
    torch.testing.assert_close(y[:n], 2 * x[:n] + 1)


def test_synchronizes(gpubench):
    x = torch.randn(1 << 22, device="cuda")

    def count_positive(t):
        return int((t > 0).sum().item())  # waits for the device

    assert gpubench(count_positive, x) == int((x > 0).sum())


HALVE = r"""
#include <torch/types.h>
__global__ void halve_kernel(const float* src, float* dst, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = 0.5f * src[i];
}
torch::Tensor halve(torch::Tensor src) {
  auto dst = torch::empty_like(src);
  int64_t n = src.numel();
  halve_kernel<<<(n + 511) / 512, 512>>>(src.data_ptr<float>(), dst.data_ptr<float>(), n);
  return dst;
}
"""


@pytest.fixture(scope="module")
def legacy():
    from torch.utils.cpp_extension import load_inline

    build = os.path.join(tempfile.gettempdir(), "gpubench-test-legacy")
    os.makedirs(build, exist_ok=True)
    return load_inline(
        "gpubench_test_legacy",
        cpp_sources="torch::Tensor halve(torch::Tensor src);",
        cuda_sources=HALVE,
        functions=["halve"],
        build_directory=build,
    )


def test_legacy_stream(gpubench, legacy):
    x = torch.randn(1 << 24, device="cuda")
    torch.testing.assert_close(gpubench(legacy.halve, x), 0.5 * x)


def test_side_stream(gpubench):
    x = torch.randn(1 << 24, device="cuda")
    side = torch.cuda.Stream()

    def overlapped(t):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            doubled = t * 2
        shifted = t - 1
        torch.cuda.current_stream().wait_stream(side)
        return doubled + shifted

    torch.testing.assert_close(gpubench(overlapped, x), 3 * x - 1)


def test_backward(gpubench):
    a = torch.randn(2048, 2048, device="cuda", requires_grad=True)
    b = torch.randn(2048, 2048, device="cuda", requires_grad=True)
    out = torch.nn.functional.silu(a @ b)
    grad = torch.randn_like(out)
    gpubench(lambda: out.backward(grad, retain_graph=True))
    assert a.grad is not None and b.grad is not None


def test_rng_after_a_failed_capture(gpubench):
    x = torch.randn(1 << 22, device="cuda")
    y = gpubench(torch.nn.functional.dropout, x, 0.25)
    assert 0.2 < (y == 0).float().mean().item() < 0.3


@pytest.mark.gpubench(timer="cupti")
def test_cupti_on_request(gpubench):
    x = torch.randn(N, device="cuda")
    gpubench(axpb, x, torch.empty_like(x))


def test_short_chain(gpubench):
    x = torch.randn(4096, device="cuda")

    def chain(t):  # 8 launches of about a microsecond: launch gaps dominate a graph's time
        for _ in range(4):
            t = torch.sigmoid(t) * 1.5
        return t

    gpubench(chain, x)
'''

# Short measurements keep this module short; the kernels' times are stable enough for them.
# Only this plugin is loaded: GPU machines often have many, and some import heavy modules.
FAST = ("--gpubench-budget-s=0.5", "-p", "pytest_gpubench.plugin", "-p", "no:cacheprovider")


@pytest.fixture
def user_code(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_user=USER_CODE)
    for knob in ("GPUBENCH_TEST_EXTRA", "GPUBENCH_TEST_BLOCK", "GPUBENCH_TEST_MORE"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # Hopper: load_inline would warn that no architecture was named (-W error makes it fail)
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    return pytester


@pytest.mark.parametrize("elements", [4096, 1 << 24])  # (on an H200 cupti-graph, cuda-graph)
def test_a_graph_sampler_made_again_replays_the_new_inputs_as_the_first(elements: int) -> None:
    """A lockstep pair set up again (inputs placed anew) makes its samplers with
    Sampler.again: a graph of as many calls, on the new inputs, by the same timer, with the
    first's profile; no probe."""
    from pytest_gpubench.timing import cuda
    from pytest_gpubench.timing.engine import Workload

    x = torch.zeros(elements, device="cuda")
    first = cuda.make("auto").sampler(Workload(torch.Tensor.add_, (x, 1)))
    assert first.again is not None
    y = torch.zeros_like(x)
    again = first.again(Workload(torch.Tensor.add_, (y, 1)))
    try:
        assert (again.timer, again.calls_per_sample) == (first.timer, first.calls_per_sample)
        assert again.profile == first.profile and again.taken == ()
        before = x.clone()
        assert again.sample() > 0
        torch.cuda.synchronize()
        assert torch.equal(x, before)  # the first's inputs untouched, the new ones replayed
        assert torch.all(y == y[0]) and y[0].item() >= again.calls_per_sample
    finally:
        first.close()
        again.close()


def test_a_graphs_kernel_time_is_taken_beside_its_time_per_call_side_by_side() -> None:
    """A cuda-graph sampler's kernel time (Sampler.beside), two samplers' taken in
    alternation, each its own: twice the work reads about twice the time, and each near what
    cupti-graph reads; a cupti-graph sampler takes none (its time per call is gaps)."""
    from pytest_gpubench.timing import cuda
    from pytest_gpubench.timing.engine import Workload

    elements = 1 << 24
    x, y = torch.zeros(elements, device="cuda"), torch.zeros(2 * elements, device="cuda")
    small = cuda.make("cuda-graph").sampler(Workload(torch.Tensor.add_, (x, 1)))
    large = cuda.make("cuda-graph").sampler(Workload(torch.Tensor.add_, (y, 1)))
    kernels = cuda.make("cupti-graph").sampler(Workload(torch.Tensor.add_, (x, 1)))
    try:
        assert small.timer == large.timer == "cuda-graph" and kernels.beside is None
        assert small.beside is not None and large.beside is not None
        assert small.beside.timer == "cupti-graph"
        mine, other = small.beside.alternate(large.beside, 4)
        assert len(mine) == len(other) == 4
        ratio = sorted(other)[2] / sorted(mine)[2]
        assert 1.6 < ratio < 2.4, (mine, other)
        assert 0.8 < kernels.sample() / sorted(mine)[2] < 1.25
    finally:
        for sampler in (small, large, kernels):
            sampler.close()


def test_the_profilers_own_events_read_as_its_exported_trace() -> None:
    """timing.cuda._own_events against _trace_events on one session of four replays of a
    graph that copies, sets memory and runs kernels: the same device work and graph
    launches, each with its duration and correlation id (what ``OwnEvents.agree`` checks
    once per process before a kernel time reads them)."""
    from torch.profiler import ProfilerActivity, profile

    from pytest_gpubench.timing import cuda

    x, y = torch.zeros(1 << 20, device="cuda"), torch.zeros(1 << 20, device="cuda")

    def work() -> None:
        y.copy_(x)
        x.zero_()
        x.add_(y)

    graph = cuda._capture(work, calls=3, warm_calls=1)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            graph.replay()
        torch.cuda.synchronize()
    own, exported = cuda._work(cuda._own_events(prof)), cuda._work(cuda._trace_events(prof))
    assert len(exported) >= 4 * 3 * 3 + 4 and own == exported, (own[:5], exported[:5])


def test_a_function_that_spins_with_torchs_sleep_is_timed_from_its_graph() -> None:
    """``torch.cuda._sleep`` inside the function is its work: the replay check drops only
    the blocking kernel the timer queued before the replay, so the function's own spin is
    counted as replayed and the function keeps its graph (it fell to cupti, its graph read
    as missing a launch: h200-2026-12-05b)."""
    from pytest_gpubench.timing import cuda
    from pytest_gpubench.timing.engine import Workload

    def spun(t: torch.Tensor) -> None:
        t.add_(1)
        torch.cuda._sleep(20_000)

    sampler = cuda.make("auto").sampler(Workload(spun, (torch.zeros(1 << 20, device="cuda"),)))
    try:
        assert sampler.timer in ("cuda-graph", "cupti-graph"), sampler.timer
    finally:
        sampler.close()


def results(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    report = json.loads((pytester.path / "out.json").read_text())
    return {r["test"]: r for r in report["results"]}


def test_each_function_gets_the_timer_it_can_stand_and_the_process_stays_whole(
    user_code: pytest.Pytester,
) -> None:
    saved = user_code.runpytest_subprocess(
        "--gpubench-save", "-W", "error", "--gpubench-json=out.json", *FAST
    )
    saved.assert_outcomes(passed=8)  # -W error: no warning of ours reached a test
    saved.stdout.fnmatch_lines_random(
        [
            "test_triton *cuda-graph * new *",
            "test_synchronizes *cupti * new *",
            "test_legacy_stream *cupti * new *",
            "test_side_stream *cuda-graph * new *",
            "test_backward *cupti * new *",
            "test_rng_after_a_failed_capture *-graph * new *",
            "test_cupti_on_request *cupti * new *",
            "test_short_chain *cupti-graph * new *",
            "test_short_chain: launch gaps are *% of the graph time per call (*): its kernel "
            "time is the number (8 launches *)",
            "test_synchronizes: timed by cupti: *",
            "test_legacy_stream: timed by cupti: *",
            "test_backward: timed by cupti: *",
            "test_cupti_on_request: timed by cupti: kernel time only: *",
            "baseline written: 8 tests, 1 session each (*/.gpubench/sm*.json)",
        ]
    )
    measured = results(user_code)
    # the legacy-stream kernel ran during the capture and never again: the replay check said
    # so, naming the user's launches only; an autograd backward failed capture
    assert measured["test_legacy_stream"]["note"].startswith(
        "not captured: a graph replay runs no device work, an eager call 1 launch "
        "(halve_kernel 100%): work launched outside the capturing stream"
    )
    assert "graph capture failed" in measured["test_backward"]["note"]
    # A function that synchronizes is found by one call under sync debug mode; one whose
    # untimed first call took a tenth of the budget (loading its kernels, say) is spared that
    # call, and its capture fails instead: both end in cupti, the process repaired (seen on
    # two H100s, 2026-11-23).
    synced = measured["test_synchronizes"]["note"]
    assert synced.startswith(
        ("not captured: the function synchronizes with the host", "graph capture failed (")
    ), synced
    # what one call launched, as CUPTI saw it
    [halve] = measured["test_legacy_stream"]["kernels"]
    assert halve["name"].startswith("halve_kernel") and halve["count"] == 1
    assert sum(k["count"] for k in measured["test_side_stream"]["kernels"]) == 3
    # the numbers: a graph's time per call and cupti's kernel time agree with the CUPTI time
    # of eager calls on a 256 MiB kernel (launch gaps are small beside it)
    for name in ("test_triton", "test_cupti_on_request"):
        ratio = measured[name]["median_ms"] / measured[name]["device_ms"]
        assert 0.9 < ratio < 1.15, (name, ratio)
    # a chain of short launches: its graph time is mostly gaps, so its number is the kernel
    # time inside the replay, which is an eager call's kernel time, and the graph time is kept
    chain = measured["test_short_chain"]
    assert chain["timer"] == "cupti-graph"
    assert 0.8 < chain["median_ms"] / chain["device_ms"] < 1.2, chain
    assert chain["graph_ms"] > 1.05 * chain["median_ms"], chain


def test_a_baseline_names_what_changed_in_the_code_and_the_software(
    user_code: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = ("-k", "test_triton", "--gpubench-confirm=0", *FAST)
    user_code.runpytest_subprocess("--gpubench-save", *one).assert_outcomes(passed=1, deselected=7)
    # another launch configuration of the same kernels: another pick of the same work, named
    # and judged on time against the work's history (one session: it gates nothing); it
    # passes by default (--gpubench-changed work) and fails when told to
    monkeypatch.setenv("GPUBENCH_TEST_BLOCK", "512")
    regrid = user_code.runpytest_subprocess("--gpubench", *one)
    regrid.assert_outcomes(passed=1, deselected=7)
    regrid.stdout.fnmatch_lines(
        [
            "test_triton: not gated: * vs history of 1 session; another pick of the same work: "
            "axpb_kernel grid (40960,1,1) -> (81920,1,1)*"
        ]
    )
    assert "regressed" not in regrid.stdout.str()
    strict = user_code.runpytest_subprocess("--gpubench", "--gpubench-changed=fail", *one)
    strict.assert_outcomes(failed=1, deselected=7)
    # one more kernel per call: other work, which fails by default
    monkeypatch.setenv("GPUBENCH_TEST_BLOCK", "1024")
    monkeypatch.setenv("GPUBENCH_TEST_MORE", "1")
    more = user_code.runpytest_subprocess("--gpubench", *one)
    more.assert_outcomes(failed=1, deselected=7)
    more.stdout.fnmatch_lines(
        ["test_triton changed: another binary than the baseline's (* -> *): 1 kernel added*"]
    )
    # a baseline recorded with other software says so under the table
    monkeypatch.setenv("GPUBENCH_TEST_MORE", "0")
    path = next((user_code.path / ".gpubench").glob("*.json"))
    data = read_baseline(user_code)
    for info in data["sessions"].values():
        info["versions"]["torch"] = "0.0.1"
    path.write_text(json.dumps(data))
    older = user_code.runpytest_subprocess("--gpubench", *one)
    older.stdout.fnmatch_lines(
        [f"baseline was recorded with other software: torch 0.0.1 -> {torch.__version__}"]
    )


def test_a_ten_percent_larger_kernel_fails_once_fresh_processes_confirm_it(
    user_code: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    one = ("-k", "test_triton", *FAST)
    # three sessions: a shorter history cannot gate ("not gated")
    saved = user_code.runpytest_subprocess("--gpubench-save", "--gpubench-sessions=3", *one)
    saved.assert_outcomes(passed=1, deselected=7)
    # A/A
    again = user_code.runpytest_subprocess("--gpubench", *one)
    again.assert_outcomes(passed=1, deselected=7)
    again.stdout.no_fnmatch_line("*regressed*")
    # 10% more work in the same launches: flagged, confirmed in fresh processes on this GPU
    # (they inherit the variable), batch after batch, judged on all sessions together
    monkeypatch.setenv("GPUBENCH_TEST_EXTRA", "0.10")
    slower = user_code.runpytest_subprocess("--gpubench", *one)
    slower.assert_outcomes(failed=1, deselected=7)
    slower.stdout.fnmatch_lines(
        [
            "gpubench: confirming test_triton in 2 fresh processes (2 at once)",
            "test_triton regressed: * -> * (+*%; gate *%, * sessions against the history of 3*",
            "test_triton: confirmed in * fresh processes (medians *)",
        ]
    )


MATMULS = r"""
import torch

N = 4096
A = torch.randn(N, N, device="cuda", dtype=torch.bfloat16)
DONE = A @ A


def test_matmul(gpubench):
    gpubench(torch.matmul, A, A, flops=2 * N**3)


def test_cached(gpubench):
    gpubench(lambda a: DONE, A, flops=2 * N**3)
"""


def test_declared_flops_are_held_to_the_measured_matmul_of_their_dtype(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: a bfloat16 matmul declaring its flops is possible and a share of the
    session's own bfloat16 matmul rate; a function returning a result computed before, with
    the same flops declared, is impossible."""
    pytester.makepyfile(test_matmuls=MATMULS)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # FAST names the plugin
    run = pytester.runpytest_subprocess("--gpubench", "--gpubench-json=out.json", *FAST)
    run.assert_outcomes(passed=1, failed=1)
    measured = results(pytester)
    matmul, cached = measured["test_matmul"], measured["test_cached"]
    assert matmul["status"] != "impossible" and matmul["matmul_dtype"] == "bfloat16"
    assert 0.3 < matmul["tflops"] / matmul["matmul_tflops"] < 1.5, matmul
    assert cached["status"] == "impossible", cached
    assert "bfloat16 matmul reached on this device" in cached["reason"]


COLD = """
import pytest
import torch

X = torch.randn(1 << 24, device="cuda")


@pytest.mark.gpubench(timer="cuda-event-cold")
def test_cold(gpubench):
    gpubench(torch.sum, X)
"""

SMALL_FLUSH = (
    "import torch; from pytest_gpubench.timing.cuda import flush_check; "
    "print(flush_check(torch.empty(1 << 20, dtype=torch.uint8, device='cuda')))"
)


def test_the_cold_timer_shows_its_flush_evicts_and_a_flush_that_does_not_is_said(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: cold timing says that its flush worked (a buffer that fits in L2 reads
    slower right after it than warm), and says so when a flush does not evict."""
    pytester.makepyfile(test_cold=COLD)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # FAST names the plugin
    run = pytester.runpytest_subprocess("--gpubench", "--gpubench-json=out.json", *FAST)
    run.assert_outcomes(passed=1)
    [cold] = results(pytester).values()
    assert cold["timer"] == "cuda-event-cold", cold
    assert "L2 flushed before each sample" in cold["note"], cold["note"]
    small = subprocess.run(
        [sys.executable, "-c", SMALL_FLUSH], capture_output=True, text=True, timeout=300
    )
    assert "not shown to evict" in small.stdout, small.stdout + small.stderr
