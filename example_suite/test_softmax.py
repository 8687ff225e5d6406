"""Row-wise, numerically stable softmax in several implementations, checked against float64."""

from __future__ import annotations

import pytest
import torch
from conftest import check, compiled_or_skip, randn, sizes, triton_timing_or_skip

SHAPES = sizes((64, 64), (1024, 1024), (4096, 4096))


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's softmax over rows: the reference the other variants are timed against."""
    return torch.softmax(x, dim=1)


def manual_softmax(x: torch.Tensor) -> torch.Tensor:
    """The unfused composite: max, subtract, exp, sum, divide, each its own kernel."""
    row_max = x.amax(dim=1, keepdim=True)
    numerator = torch.exp(x - row_max)
    return numerator / numerator.sum(dim=1, keepdim=True)


def bench(gpubench, fn, rows, cols, **kwargs):
    """Time fn on a fresh rows x cols matrix (bytes: read x, write y, the fused minimum) and
    check its result; the tolerance is relative, as the outputs are about 1 / cols. A variant
    of our own is timed beside PyTorch's (``reference=torch_softmax``), on the same input."""
    x = randn(gpubench, rows, cols)
    y = gpubench(fn, x, bytes=2 * x.nbytes, **kwargs)
    check(y, torch.softmax(x.double(), dim=1), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="softmax")
def test_softmax_torch(gpubench, rows, cols):
    bench(gpubench, torch.softmax, rows, cols, dim=1)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="softmax")
def test_softmax_manual(gpubench, rows, cols):
    bench(gpubench, manual_softmax, rows, cols, reference=torch_softmax)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="softmax")
def test_softmax_compiled(gpubench, rows, cols):
    bench(gpubench, compiled_or_skip(manual_softmax), rows, cols, reference=torch_softmax)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="softmax")
def test_softmax_triton(gpubench, rows, cols):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    bench(gpubench, triton_kernels.softmax, rows, cols, reference=torch_softmax)
