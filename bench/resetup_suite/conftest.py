"""GPU only: nothing to collect without one."""

from __future__ import annotations

import torch

if not torch.cuda.is_available():
    collect_ignore_glob = ["test_*.py"]
