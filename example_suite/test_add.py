"""Vector add, checked against float64."""

from __future__ import annotations

import pytest
import torch
from conftest import sizes, triton_timing_or_skip

SIZES = sizes(4096, 1 << 20, 1 << 24)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="add")
def test_add_torch(gpubench, n):
    x, y = torch.randn(n, device=gpubench.device), torch.randn(n, device=gpubench.device)
    out = gpubench(torch.add, x, y, bytes=3 * x.nbytes)
    torch.testing.assert_close(out.double(), x.double() + y.double())


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="add")
def test_add_triton(gpubench, n):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    x, y = torch.randn(n, device=gpubench.device), torch.randn(n, device=gpubench.device)
    out = gpubench(triton_kernels.add, x, y, bytes=3 * x.nbytes)
    torch.testing.assert_close(out.double(), x.double() + y.double())
