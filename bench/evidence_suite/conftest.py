"""Shared set-up of issue 18's check suite: GPU only, knobs read from the environment."""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]  # a GPU check suite: nothing to do without a GPU


def knob(name: str) -> float:
    """A number from the environment, GPUBENCH_CHECK_<NAME>, 0 when unset."""
    return float(os.environ.get(f"GPUBENCH_CHECK_{name}", "0"))
