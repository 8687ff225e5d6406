"""Triton versions of the classic kernels (run by the interpreter where there is no GPU)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    tanh = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh through exp
    tl.store(y_ptr + offsets, 0.5 * x * (1.0 + tanh), mask=mask)


def gelu(x: torch.Tensor, extra_pass: float = 0.0) -> torch.Tensor:
    """GeLU (tanh approximation). ``extra_pass`` recomputes that share of the elements once
    more: the same output, deliberately more work (the example suite's slowdown switch)."""
    y = torch.empty_like(x)
    n = x.numel()
    _gelu_kernel[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK)
    if extra_pass:
        m = int(n * extra_pass)
        _gelu_kernel[(triton.cdiv(m, BLOCK),)](x, y, m, BLOCK=BLOCK)
    return y


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    _add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out


def _row_warps(block_size: int) -> int:
    """Warps for a program that holds one row of BLOCK_SIZE elements (the Triton tutorial's
    rule): more threads for longer rows, so each thread keeps few elements in registers."""
    return 4 if block_size < 2048 else 8 if block_size < 4096 else 16


@triton.jit
def _square_rows_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask)
    tl.store(y_ptr + row * y_row_stride + cols, x * x, mask=mask)


def _per_row(kernel: triton.JITFunction, x: torch.Tensor, block_size: int) -> torch.Tensor:
    """Launch ``kernel`` with one program per row of the 2D ``x``; return its output."""
    assert x.dim() == 2 and x.stride(1) == 1
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    kernel[(n_rows,)](
        x,
        y,
        n_cols,
        x.stride(0),
        y.stride(0),
        BLOCK_SIZE=block_size,
        num_warps=_row_warps(block_size),
    )
    return y


def square_rows(x: torch.Tensor) -> torch.Tensor:
    """x * x of a 2D tensor, one program per row, the whole row in one block."""
    return _per_row(_square_rows_kernel, x, triton.next_power_of_2(x.shape[1]))


SQUARE_LOOP_BLOCK = 256


@triton.jit
def _square_loop_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask)
        tl.store(y_ptr + row * y_row_stride + cols, x * x, mask=mask)


def square_loop(x: torch.Tensor) -> torch.Tensor:
    """x * x of a 2D tensor, one program per row, looping over the row in fixed blocks."""
    return _per_row(_square_loop_kernel, x, SQUARE_LOOP_BLOCK)


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    # -inf in the padding: it changes neither the maximum nor (as exp(-inf) = 0) the sum
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
    numerator = tl.exp(x - tl.max(x, axis=0))  # minus the row maximum: exp cannot overflow
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax of a 2D tensor, fused: one program per row, one read, one write."""
    return _per_row(_softmax_kernel, x, triton.next_power_of_2(x.shape[1]))
