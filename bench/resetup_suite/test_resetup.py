"""The example suite's smallest kernels and two mid-size ones, each a test set up REPS
times in one process: ``fresh`` inputs only, or ``pad``: a tensor of a random size (0-4 MiB,
drawn per process and set-up) allocated first and held, so that the caching allocator
cannot hand the inputs their last addresses back."""

from __future__ import annotations

import os
import random

import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

REPS = int(os.environ.get("GPUBENCH_RESETUP_REPS", "6"))
DRAW = random.Random(os.getpid())  # per process: each process pads otherwise


@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(x_ptr + offsets, mask) + tl.load(y_ptr + offsets, mask)
    tl.store(out_ptr + offsets, total, mask)


def triton_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


compiled_gelu = torch.compile(F.gelu)
CASES = {
    "add_4096": (torch.add, [(4096,), (4096,)]),
    "gelu_1m": (F.gelu, [(1 << 20,)]),
    "square_1k": (torch.square, [(1024, 1024)]),
    "softmax_1k": (lambda x: torch.softmax(x, -1), [(1024, 1024)]),
    "triton_add_1m": (triton_add, [(1 << 20,), (1 << 20,)]),
    "compiled_gelu_1m": (compiled_gelu, [(1 << 20,)]),
    "copy_16m": (torch.clone, [(1 << 24,)]),
    "softmax_4k": (lambda x: torch.softmax(x, -1), [(4096, 4096)]),
}


@pytest.mark.parametrize("rep", range(REPS))
@pytest.mark.parametrize("mode", ["fresh", "pad"])
@pytest.mark.parametrize("case", list(CASES))
def test_resetup(gpubench, case, mode, rep):
    function, shapes = CASES[case]
    pad = torch.empty(DRAW.randrange(0, 4 << 20), dtype=torch.uint8, device="cuda")
    if mode == "fresh":
        del pad
    inputs = [torch.randn(shape, device="cuda") for shape in shapes]
    gpubench(function, *inputs)
