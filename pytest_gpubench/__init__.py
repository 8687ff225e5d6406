"""pytest-gpubench: GPU-kernel performance as a tested property.

The public API, for conftest files and plugins (docs/extending.md):

- ``GpuBench``: the object behind the ``gpubench`` fixture;
- ``Workload``, ``Sampler``, ``Profile``, ``Timer``: what a timer of
  ``pytest_gpubench_make_timer`` receives and returns;
- ``MeasureSettings``, ``Settings``, ``MarkerSpec``: settings of a measurement and a session;
- ``Device``: the device a session times on;
- ``Launch``: one kernel (or copy, memset) of what a call launches;
- ``Energy``: a call's energy, which a ``Sampler`` may read itself;
- ``Measurement``, ``Verdict``, ``Result``, ``Status``, ``Judgement``, ``SessionSummary``:
  the frozen records of a run.

Everything else is private. The layout: docs/architecture.md.
"""

from __future__ import annotations

from .core.device import Device
from .core.kernels import Launch
from .core.records import (
    Energy,
    Judgement,
    Measurement,
    Result,
    SessionSummary,
    Status,
    Verdict,
)
from .core.settings import MarkerSpec, MeasureSettings, Settings
from .core.version import __version__
from .run.fixture import GpuBench
from .timing.engine import Profile, Sampler, Timer, Workload

__all__ = [
    "Device",
    "Energy",
    "GpuBench",
    "Judgement",
    "Launch",
    "MarkerSpec",
    "MeasureSettings",
    "Measurement",
    "Profile",
    "Result",
    "Sampler",
    "SessionSummary",
    "Settings",
    "Status",
    "Timer",
    "Verdict",
    "Workload",
    "__version__",
]
