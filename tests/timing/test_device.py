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


def test_kept_apart_copies_what_shares_an_arguments_memory_and_nothing_else() -> None:
    """The fixture's result after its first call (run/fixture.py): tensors that view an
    argument's memory are copied, in tuples, lists and dicts; the rest is returned as it is;
    arguments that hold themselves, or a result nested past NESTING, are no error."""
    from pytest_gpubench.timing.device import NESTING, kept_apart
    from pytest_gpubench.timing.engine import Workload

    x, own = torch.zeros(8), torch.ones(2)
    looped: list[object] = [x]
    looped.append(looped)
    workload = Workload(lambda *a, **k: None, (looped,), {"y": {"z": [x]}})
    view = x[2:]
    got = kept_apart((view, [own], {"k": x}, 3), workload)
    assert isinstance(got, tuple) and got[3] == 3
    assert got[1][0] is own  # its own memory: not copied
    for copy in (got[0], got[2]["k"]):
        assert copy.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    x.add_(5)  # what the timed calls do to the argument
    assert got[0].tolist() == [0.0] * 6 and got[2]["k"].tolist() == [0.0] * 8
    assert kept_apart(own, workload) is own
    deep: object = x
    for _ in range(NESTING + 2):
        deep = [deep]
    assert kept_apart(deep, workload) is not None
    fresh = Workload(lambda: None, (x,), setup=lambda: None)  # fresh arguments each call
    assert kept_apart(view, fresh) is view
