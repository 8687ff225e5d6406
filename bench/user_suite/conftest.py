"""Shared set-up of the user suite: GPU only, knobs for controlled slowdowns."""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]  # a GPU check suite: nothing to do without a GPU


def knob(name: str, default: float) -> float:
    """A number from the environment: GPUBENCH_USER_<NAME>."""
    return float(os.environ.get(f"GPUBENCH_USER_{name}", default))


@pytest.fixture
def device() -> str:
    return "cuda"
