"""GPU tests: a real Triton kernel timed by the CUDA timers; skipped without a CUDA GPU.

Each pytest run is a subprocess: CUDA contexts, compiled kernels and captured graphs must not
leak between runs. The kernel's size grows by the fraction in GPUBENCH_TEST_EXTRA, which is
how a real regression of known size is made.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

KERNELS = """
import os

import torch
import triton
import triton.language as tl

# 2**25 floats: 128 MiB read and 128 MiB written, far beyond L2, so time grows with size.
N = 1 << 25
EXTRA = float(os.environ.get("GPUBENCH_TEST_EXTRA", "0"))


@triton.jit
def axpb_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, 2.0 * x + 1.0, mask=mask)


def axpb(x, y):
    n = x.numel()
    axpb_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


def test_axpb(gpubench):
    assert gpubench.device == "cuda"
    x = torch.randn(int((1 + EXTRA) * N), device="cuda")
    y = gpubench(axpb, x, torch.empty_like(x))
    torch.testing.assert_close(y, 2 * x + 1)


def test_synchronizes(gpubench):
    x = torch.randn(1 << 20, device="cuda")

    def doubled_and_synchronized():
        y = x * 2
        torch.cuda.synchronize()  # not allowed while a CUDA graph is captured
        return y

    torch.testing.assert_close(gpubench(doubled_and_synchronized), 2 * x)
"""


# Short measurements keep this test short; the kernel's time is stable enough for them.
# Only this plugin is loaded: GPU machines often have many, and some import heavy modules.
FAST = ("--gpubench-budget-s=0.5", "-p", "pytest_gpubench.plugin", "-p", "no:cacheprovider")


@pytest.fixture
def kernels(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    pytester.makepyfile(test_kernels=KERNELS)
    monkeypatch.setenv("GPUBENCH_TEST_EXTRA", "0")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def test_graph_timer_fallback_and_a_ten_percent_larger_kernel(
    kernels: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = kernels.runpytest_subprocess("--gpubench-save", *FAST)
    saved.assert_outcomes(passed=2)
    saved.stdout.fnmatch_lines(
        [
            "*= gpubench: * (sm*) =*",
            # the kernel is timed by graph replay...
            "test_axpb *cuda-graph *new*",
            # ...a function that synchronizes cannot be captured: its kernels' CUPTI time,
            # with the reason
            "test_synchronizes *cupti *new*",
            "test_synchronizes: timed by cupti: *capture*",
            "baseline written: */.gpubench/sm*.json",
        ]
    )

    # A/A. Only the kernel: test_synchronizes times host latency too (its sample includes a
    # synchronize), which can shift between processes by more than the threshold.
    again = kernels.runpytest_subprocess("--gpubench", "-k", "axpb", *FAST)
    again.assert_outcomes(passed=1, deselected=1)
    again.stdout.no_fnmatch_line("*regressed*")

    # 10% more work: flagged, confirmed in two fresh processes (they inherit the variable),
    # judged on the three sessions together.
    monkeypatch.setenv("GPUBENCH_TEST_EXTRA", "0.10")
    slower = kernels.runpytest_subprocess("--gpubench", "-k", "axpb", *FAST)
    slower.assert_outcomes(failed=1, deselected=1)
    slower.stdout.fnmatch_lines(
        [
            # (a history of one session may leave it "noisy: can gate >= N%" below 10%)
            "test_axpb regressed: * -> * (+*%; bar *%, 3 sessions against the history of 1, "
            "threshold 5%*)",
            "test_axpb: confirmed in 2 fresh processes (medians *)",
        ]
    )
