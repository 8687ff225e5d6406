"""Functions as users write them, timed with the README's one-liner."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch
import triton
import triton.language as tl
from conftest import knob

LEGACY_SOURCE = r"""
#include <torch/types.h>
__global__ void twice_kernel(const float* x, float* y, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
torch::Tensor twice(torch::Tensor x) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""


@pytest.fixture(scope="session")
def legacy_ext():
    from torch.utils.cpp_extension import load_inline

    build = os.path.join(tempfile.gettempdir(), "gpubench-user-suite-ext")
    os.makedirs(build, exist_ok=True)
    return load_inline(
        "gpubench_user_legacy",
        cpp_sources="torch::Tensor twice(torch::Tensor x);",
        cuda_sources=LEGACY_SOURCE,
        functions=["twice"],
        build_directory=build,
    )


def test_legacy_stream_kernel(gpubench, legacy_ext):
    """kernel<<<grid, block>>> with no stream: the legacy default stream."""
    x = torch.randn(1 << 22, device="cuda")
    y = gpubench(legacy_ext.twice, x, bytes=2 * x.nbytes)
    torch.testing.assert_close(y, 2 * x)


def test_item_sync(gpubench):
    """A function that synchronizes: .item() inside."""
    x = torch.randn(1 << 22, device="cuda")

    def positives(t):
        return int((t > 0).sum().item())

    assert gpubench(positives, x) == int((x > 0).sum())


def test_randn_and_dropout_after_sync(gpubench):
    """RNG in the test and in the timed function, after the syncing test in the same process."""
    x = torch.randn(1 << 20, device="cuda")
    y = gpubench(torch.nn.functional.dropout, x, 0.5)
    assert 0.4 < (y == 0).float().mean().item() < 0.6


def test_multi_kernel_layernorm(gpubench):
    """An unfused layer norm: several small kernels per call."""
    x = torch.randn(256, 4096, device="cuda")

    def layernorm(t):
        mean = t.mean(dim=-1, keepdim=True)
        var = ((t - mean) ** 2).mean(dim=-1, keepdim=True)
        return (t - mean) / torch.sqrt(var + 1e-5)

    y = gpubench(layernorm, x)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (4096,)), atol=1e-4, rtol=1e-4)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=2),
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a * x + y, mask=mask)


def axpy(a, x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _axpy_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, out, a, n)
    return out


def test_autotuned_triton(gpubench):
    x, y = torch.randn(1 << 24, device="cuda"), torch.randn(1 << 24, device="cuda")
    out = gpubench(axpy, 2.0, x, y, bytes=3 * x.nbytes)
    torch.testing.assert_close(out, 2.0 * x + y)


def test_matmul_bf16(gpubench):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    c = gpubench(torch.matmul, a, b, flops=2 * 4096**3)
    assert c.shape == (4096, 4096)


def test_sdpa(gpubench):
    q, k, v = (torch.randn(8, 16, 1024, 64, device="cuda", dtype=torch.bfloat16) for _ in "qkv")
    out = gpubench(torch.nn.functional.scaled_dot_product_attention, q, k, v, is_causal=True)
    assert out.shape == q.shape


def test_backward(gpubench):
    """A backward pass through a small MLP, retaining the graph to call it again."""
    x = torch.randn(4096, 1024, device="cuda", requires_grad=True)
    w = torch.randn(1024, 1024, device="cuda", requires_grad=True)
    y = torch.nn.functional.gelu(x @ w)
    dy = torch.randn_like(y)
    gpubench(lambda: y.backward(dy, retain_graph=True))
    assert w.grad is not None


def test_side_stream(gpubench):
    """Work forked onto a side stream and joined back, as overlapping code does."""
    x = torch.randn(1 << 22, device="cuda")
    side = torch.cuda.Stream()

    def forked(t):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            a = t * 2
        b = t + 1
        torch.cuda.current_stream().wait_stream(side)
        return a + b

    torch.testing.assert_close(gpubench(forked, x), 3 * x + 1)


@triton.jit
def _copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, tl.load(src + offsets, mask=mask), mask=mask)


# Per size, the fraction of blocks a slowdown sized in time adds (bench/ab_checks.sh's slowtime
# step writes it on the head's side only, from bench/calibrate_slowdown.py); empty: the knob.
PLANTED: dict[int, float] = {}
COPY_BLOCK = 1024


def copy_elements(n: int, fraction: float) -> int:
    """Elements of a copy of ``n`` whose work grows by ``fraction`` in whole blocks."""
    return round(n * (1 + fraction) / COPY_BLOCK) * COPY_BLOCK


@pytest.mark.parametrize("n", [1 << 22, 1 << 24, 1 << 26])
def test_copy_blocks(gpubench, n):
    """A copy whose work grows by GPUBENCH_USER_SLOWDOWN (or PLANTED's fraction) in whole
    blocks (same block shape)."""
    block = COPY_BLOCK
    m = copy_elements(n, PLANTED.get(n, knob("SLOWDOWN", 0.0)))
    src, dst = torch.randn(m, device="cuda"), torch.empty(m, device="cuda")
    gpubench(lambda: _copy_kernel[(m // block,)](src, dst, m, BLOCK=block), bytes=8 * n)
    torch.testing.assert_close(dst[:n], src[:n])


def test_block_size_config(gpubench):
    """The same kernel launched with GPUBENCH_USER_BLOCK elements per program (a config
    change between save and check shows in the message)."""
    block = int(knob("BLOCK", 1024))
    n = 1 << 24
    src, dst = torch.randn(n, device="cuda"), torch.empty(n, device="cuda")
    gpubench(lambda: _copy_kernel[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block))
    torch.testing.assert_close(dst, src)


@triton.jit
def _spin_kernel(x_ptr, y_ptr, iters, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offsets)
    for _ in range(iters):  # a runtime count: the same binary and launch at any count
        v = v * 0.999 + 0.001
    tl.store(y_ptr + offsets, v)


SPIN_ELEMENTS = 1 << 21  # 2048 programs of 1024: whole waves on 132 SMs do not matter here


@pytest.mark.parametrize("iters", [128, 512, 2560])
def test_spin_work(gpubench, iters):
    """Work whose time follows its amount: a loop of dependent multiply-adds in registers, one
    load and one store per element, its count grown by GPUBENCH_USER_SLOWDOWN. A copy's
    planted blocks change its time by what its buffers' placement in memory makes of them,
    which differs between processes (bench/results/h200-2026-12-03); this loop's do not."""
    k = round(iters * (1 + knob("SLOWDOWN", 0.0)))
    x = torch.rand(SPIN_ELEMENTS, device="cuda")
    y = torch.empty_like(x)
    gpubench(lambda: _spin_kernel[(SPIN_ELEMENTS // 1024,)](x, y, k, BLOCK=1024))
    expected = 1 + (x.double() - 1) * 0.999**k  # the loop's closed form
    torch.testing.assert_close(y.double(), expected, atol=1e-4, rtol=1e-4)
