"""pytest-gpubench: GPU-kernel performance as a tested property.

The public API, for conftest files and plugins (docs/extending.md):

- ``GpuBench``: the object behind the ``gpubench`` fixture;
- ``Workload``, ``Sampler``, ``Timer``: what a timer of ``pytest_gpubench_make_timer``
  receives and returns (engine.py);
- ``MeasureSettings``, ``Settings``, ``MarkerSpec``: settings of a measurement and a session;
- ``Device``: the device a session times on;
- ``Launch``: one kernel (or copy, memset) of what a call launches;
- ``Status``, ``Judgement``, ``SessionSummary``: the verdict (rule.py); ``Result``: one
  measurement with its verdict (results.py).

Everything else is private. The statistics and results load numpy and scipy, so they are
imported on first access: a pytest run without ``--gpubench`` never pays for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .device import Device
from .engine import Sampler, Timer, Workload
from .fixture import GpuBench
from .kernels import Launch
from .settings import MarkerSpec, MeasureSettings, Settings

if TYPE_CHECKING:
    from .results import Result
    from .rule import Judgement, SessionSummary, Status

__version__ = "0.2.0"

__all__ = [
    "Device",
    "GpuBench",
    "Judgement",
    "Launch",
    "MarkerSpec",
    "MeasureSettings",
    "Result",
    "Sampler",
    "SessionSummary",
    "Settings",
    "Status",
    "Timer",
    "Workload",
    "__version__",
]

_LAZY = {
    "Judgement": "rule",
    "SessionSummary": "rule",
    "Status": "rule",
    "Result": "results",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
