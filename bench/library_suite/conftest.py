"""Set-up of the library suite: a GPU and liger-kernel, or nothing to collect; the tests in
reverse order where LIBRARY_SUITE_REVERSE=1 (a test's time must not depend on the ones
before it)."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

if not torch.cuda.is_available() or importlib.util.find_spec("liger_kernel") is None:
    collect_ignore_glob = ["test_*.py"]  # needs a GPU and the library


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("LIBRARY_SUITE_REVERSE") == "1":
        items.reverse()
