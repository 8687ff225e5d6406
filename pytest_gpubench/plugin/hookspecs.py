"""Hooks other plugins and conftest files may implement."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from ..core.device import Device
    from ..core.settings import MeasureSettings
    from ..timing.engine import Timer

hookspec = pluggy.HookspecMarker("pytest")


@hookspec(firstresult=True)
def pytest_gpubench_make_timer(
    settings: MeasureSettings, device: Device, with_setup: bool
) -> Timer | None:
    """Return the timer for one measurement, or None to use the built-in choice.

    Called once per measurement, before it starts, in the process that measures (an xdist
    worker, never the controller), with the measurement's settings (the session's with the
    test's marker applied; ``settings.timer``: the timer asked for), the device
    (``device.kind``: ``"cuda"`` or ``"cpu"``) and whether the workload has a per-sample
    ``setup``. What a timer (``name``, ``sampler(workload) -> Sampler``) must do, and what
    the plugin guarantees it (the device lock, the budget), is docs/extending.md's. The
    plugin's own tests inject a deterministic fake timer through it.
    """
