"""Hooks other plugins and conftest files may implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .device import Device
    from .engine import Timer
    from .settings import Settings

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_gpubench_make_timer(
    settings: Settings, device: Device, with_setup: bool
) -> Timer | None:
    """Return the timer for one measurement, or None to use the built-in choice.

    ``settings.timer`` is the requested timer name (after marker overrides), ``device.kind``
    is ``"cuda"`` or ``"cpu"`` and ``with_setup`` says whether the workload has a per-sample
    ``setup``. A timer has a ``name`` (stored with its results; results of different timers
    are never compared) and ``sampler(workload) -> Sampler``; see ``pytest_gpubench.engine``.
    The time ``sampler`` spends counts against the budget: when ``workload.slow`` is true (one
    call takes a large share of it) a timer should spend no calls on calibration, and a
    calibration call that is a valid sample belongs in ``Sampler.taken``.
    This is how the plugin's own tests inject a deterministic fake timer.
    """
