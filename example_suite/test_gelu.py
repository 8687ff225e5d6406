"""GeLU (tanh approximation) in several implementations, checked against float64."""

from __future__ import annotations

import functools

import pytest
import torch
from conftest import check, compiled_or_skip, randn, sizes, slowed, triton_timing_or_skip

SIZES = sizes(4096, 1 << 20, 1 << 24)


def reference(x: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    return 0.5 * x64 * (1 + torch.tanh(0.7978845608028654 * (x64 + 0.044715 * x64**3)))


def torch_gelu(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's fused GeLU: the reference the other variants are timed against."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def manual_gelu(x: torch.Tensor) -> torch.Tensor:
    """The unfused composite: each operation is a kernel and a full trip through memory."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def bench(gpubench, fn, n, **kwargs):
    """Time fn on n fresh elements (bytes: read x, write y) and check its result; a variant
    of our own is timed beside PyTorch's (``reference=torch_gelu``), on the same input."""
    x = randn(gpubench, n)
    check(gpubench(fn, x, bytes=2 * x.nbytes, **kwargs), reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_torch(gpubench, n):
    bench(gpubench, torch.nn.functional.gelu, n, approximate="tanh")


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_manual(gpubench, n):
    bench(gpubench, manual_gelu, n, reference=torch_gelu)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_compiled(gpubench, n):
    bench(gpubench, compiled_or_skip(manual_gelu), n, reference=torch_gelu)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_triton(gpubench, n):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    extra = 0.10 if slowed("gelu_triton") else 0.0
    gelu = functools.partial(triton_kernels.gelu, extra_pass=extra)  # not the reference's
    bench(gpubench, gelu, n, reference=torch_gelu)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_cuda(gpubench, cuda_ext, n):
    bench(gpubench, cuda_ext.gelu, n, reference=torch_gelu)
