"""Example suite set-up: Triton runs in its interpreter where there is no CUDA GPU.

TRITON_INTERPRET must be set before triton is first imported, so it is set here, in the
conftest pytest loads before any test module.
"""

from __future__ import annotations

import os

import pytest
import torch

from pytest_gpubench.fixture import GpuBench

CUDA = torch.cuda.is_available()
if not CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")


def slowed(variant: str) -> bool:
    """Whether GPUBENCH_EXAMPLE_SLOWDOWN names this variant (comma-separated names)."""
    names = os.environ.get("GPUBENCH_EXAMPLE_SLOWDOWN", "")
    return variant in {name.strip() for name in names.split(",")}


def sizes(*cuda_sizes: int) -> list[int]:
    """The sizes to test: all of them on a GPU, the smallest in Triton's CPU interpreter."""
    return list(cuda_sizes) if CUDA else [min(cuda_sizes)]


def triton_timing_or_skip(gpubench: GpuBench) -> None:
    """Triton's interpreter is for correctness: timing it would measure the interpreter."""
    if not CUDA and gpubench.enabled:
        pytest.skip("Triton runs in its CPU interpreter here: checked for correctness in plain "
                    "runs, not timed")
