"""Element-wise square of a matrix in several implementations, checked against float64."""

from __future__ import annotations

import pytest
import torch
from conftest import check, randn, sizes, triton_timing_or_skip

SHAPES = sizes((64, 64), (1024, 1024), (4096, 4096))


def bench(gpubench, fn, rows, cols, **kwargs):
    """Time fn on a fresh rows x cols matrix (bytes: read x, write y) and check its result; a
    variant of our own is timed beside PyTorch's (``reference=torch.square``)."""
    x = randn(gpubench, rows, cols)
    check(gpubench(fn, x, bytes=2 * x.nbytes, **kwargs), x.double() ** 2)


def mul(a: torch.Tensor) -> torch.Tensor:
    return a * a


def power(a: torch.Tensor) -> torch.Tensor:
    return a**2


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_torch(gpubench, rows, cols):
    bench(gpubench, torch.square, rows, cols)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_mul(gpubench, rows, cols):
    bench(gpubench, mul, rows, cols, reference=torch.square)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_pow(gpubench, rows, cols):
    bench(gpubench, power, rows, cols, reference=torch.square)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_triton_rows(gpubench, rows, cols):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    bench(gpubench, triton_kernels.square_rows, rows, cols, reference=torch.square)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_triton_loop(gpubench, rows, cols):
    import triton_kernels

    triton_timing_or_skip(gpubench)
    bench(gpubench, triton_kernels.square_loop, rows, cols, reference=torch.square)


@pytest.mark.parametrize("rows, cols", SHAPES)
@pytest.mark.gpubench(group="square")
def test_square_cuda(gpubench, cuda_ext, rows, cols):
    bench(gpubench, cuda_ext.square, rows, cols, reference=torch.square)
