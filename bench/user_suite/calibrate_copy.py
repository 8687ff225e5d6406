"""Not a test of the suite (pytest collects only test_*.py): bench/calibrate_slowdown.py runs
it to size a planted slowdown in time. Each case times the copy grown by a fraction of whole
blocks against the copy of ``n`` (``reference=``, alternately in one process, by the timer
the suite's test_copy_blocks gets): the ratio is what that fraction does to its time."""

from __future__ import annotations

import os

import pytest
import torch
from test_user import COPY_BLOCK, _copy_kernel, copy_elements

FRACTIONS = [float(f) for f in os.environ.get("GPUBENCH_USER_FRACTIONS", "0.05").split(",")]


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("n", [1 << 22, 1 << 24, 1 << 26])
def test_grown_copy(gpubench, n, fraction):
    m = copy_elements(n, fraction)
    src, dst = torch.randn(m, device="cuda"), torch.empty(m, device="cuda")

    def copy(k: int):
        return lambda: _copy_kernel[(k // COPY_BLOCK,)](src, dst, k, BLOCK=COPY_BLOCK)

    gpubench(copy(m), reference=copy(n))
