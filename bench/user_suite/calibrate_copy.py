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

    def copy(k: int):
        # Each copy its own buffers, as each side of an A/B run has: on shared ones one copy
        # finds the other's lines in L2 (50 MB on an H200: the 4M copy's 32 MB fit, the 16M
        # one's 128 MB partly), and until 2026-12-02 the 34 µs copy read 0.3-0.4 points
        # less slowed in lockstep runs than its calibration had planted.
        src, dst = torch.randn(k, device="cuda"), torch.empty(k, device="cuda")
        return lambda: _copy_kernel[(k // COPY_BLOCK,)](src, dst, k, BLOCK=COPY_BLOCK)

    gpubench(copy(m), reference=copy(n))
