"""Set-up of the fla suite: a GPU and flash-linear-attention's kernels (``fla-core``), or
nothing to collect."""

from __future__ import annotations

import importlib.util

import torch

if not torch.cuda.is_available() or importlib.util.find_spec("fla") is None:
    collect_ignore_glob = ["test_*.py"]  # needs a GPU and the library
