"""Issue 18's checks, each test unchanged unless its knob is set (bench/evidence_checks.py)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from conftest import knob

N = 1 << 24  # 64 MiB of float32


def test_temporary(gpubench):
    """GPUBENCH_CHECK_TEMP=1: the call also allocates a 64 MiB temporary (no launch)."""
    x, y = torch.randn(N, device="cuda"), torch.randn(N, device="cuda")

    def add(a, b):
        if knob("TEMP"):
            scratch = torch.empty(N, device="cuda")  # held while the sum is made
            out = a + b
            del scratch
            return out
        return a + b

    torch.testing.assert_close(gpubench(add, x, y, bytes=3 * x.nbytes), x + y)


@triton.jit
def _scale_kernel(src, dst, n, blocks, BLOCK: tl.constexpr):
    pid = tl.program_id(0) % blocks  # extra blocks redo the first ones' work
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(dst + offsets, 2.0 * tl.load(src + offsets, mask=mask), mask=mask)


def test_blocks(gpubench):
    """GPUBENCH_CHECK_BLOCKS=2: the kernel launches twice the blocks (twice the work)."""
    x = torch.randn(N, device="cuda")
    y = torch.empty_like(x)
    block = 1024
    blocks = triton.cdiv(N, block)
    factor = int(knob("BLOCKS") or 1)

    def scale(src, dst):
        _scale_kernel[(blocks * factor,)](src, dst, N, blocks, BLOCK=block)
        return dst

    torch.testing.assert_close(gpubench(scale, x, y, bytes=2 * x.nbytes), 2 * x)


CACHE: dict[str, torch.Tensor] = {}


def test_cached(gpubench):
    """GPUBENCH_CHECK_CACHED=1: after its first call, the function returns its first result
    without launching anything (a cached output)."""
    x = torch.randn(N, device="cuda")

    def relu(t):
        if knob("CACHED") and "y" in CACHE:
            return CACHE["y"]
        CACHE["y"] = torch.relu(t)
        return CACHE["y"]

    torch.testing.assert_close(gpubench(relu, x, bytes=2 * x.nbytes), torch.relu(x))


def test_matmul_energy(gpubench):
    """About 2 ms of cuBLAS on an H100: energy per call against power x time."""
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    gpubench(torch.matmul, a, b, flops=2 * n**3)
