"""Vector add, checked against float64."""

from __future__ import annotations

import pytest
import torch
from conftest import check, randn, sizes, triton_timing_or_skip

SIZES = sizes(4096, 1 << 20, 1 << 24)


def bench(gpubench, fn, n, **kwargs):
    """Time fn on two fresh vectors of n elements (bytes: read x and y, write the sum); a
    variant of our own is timed beside PyTorch's (``reference=torch.add``)."""
    x, y = randn(gpubench, n), randn(gpubench, n)
    check(gpubench(fn, x, y, bytes=3 * x.nbytes, **kwargs), x.double() + y.double())


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="add")
def test_add_torch(gpubench, n):
    bench(gpubench, torch.add, n)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="add")
def test_add_triton(gpubench, n):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    bench(gpubench, triton_kernels.add, n, reference=torch.add)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.gpubench(group="add")
def test_add_cuda(gpubench, cuda_ext, n):
    bench(gpubench, cuda_ext.add, n, reference=torch.add)
