"""Unit tests of timing/device.py: the yardsticks a call's declared work is held to."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pytest_gpubench.timing.device import CPU_MATMUL_SIZE, call_dtype, matmul_workload


def test_a_calls_dtype_is_its_first_floating_point_tensors() -> None:
    ints = torch.ones(3, dtype=torch.int64)
    assert call_dtype([1, ints, torch.ones(2, dtype=torch.bfloat16), torch.ones(2)]) == "bfloat16"
    assert call_dtype([ints, "x"]) == "float32"  # no floating-point tensor: float32's rate
    assert call_dtype([]) == "float32"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_the_cpus_matmul_is_square_and_counts_its_flops(dtype: str) -> None:
    made = matmul_workload("cpu", dtype)
    assert made is not None
    workload, flops = made
    assert flops == 2.0 * CPU_MATMUL_SIZE**3
    result = workload.prepare()()
    assert result.shape == (CPU_MATMUL_SIZE, CPU_MATMUL_SIZE)
    assert result.dtype == (np.float64 if dtype == "float64" else np.float32)


@pytest.mark.parametrize("dtype", ["int8", "float8_e4m3fn", "complex64"])
def test_a_dtype_without_a_measured_matmul_has_no_yardstick(dtype: str) -> None:
    assert matmul_workload("cpu", dtype) is None
