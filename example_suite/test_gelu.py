"""GeLU (tanh approximation) in several implementations, checked against float64."""

from __future__ import annotations

import pytest
import torch
from conftest import sizes, slowed, triton_timing_or_skip

SIZES = sizes(4096, 1 << 20, 1 << 24)


def reference(x: torch.Tensor) -> torch.Tensor:
    x64 = x.double()
    return 0.5 * x64 * (1 + torch.tanh(0.7978845608028654 * (x64 + 0.044715 * x64**3)))


def manual_gelu(x: torch.Tensor) -> torch.Tensor:
    """The unfused composite: each operation is a kernel and a full trip through memory."""
    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def check(y: torch.Tensor, x: torch.Tensor) -> None:
    torch.testing.assert_close(y.double(), reference(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_torch(gpubench, n):
    x = torch.randn(n, device=gpubench.device)
    y = gpubench(torch.nn.functional.gelu, x, approximate="tanh", bytes=2 * x.nbytes)
    check(y, x)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_manual(gpubench, n):
    x = torch.randn(n, device=gpubench.device)
    check(gpubench(manual_gelu, x, bytes=2 * x.nbytes), x)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="gelu")
def test_gelu_triton(gpubench, n):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    x = torch.randn(n, device=gpubench.device)
    extra = 0.10 if slowed("gelu_triton") else 0.0
    check(gpubench(triton_kernels.gelu, x, extra_pass=extra, bytes=2 * x.nbytes), x)
