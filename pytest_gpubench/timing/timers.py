"""Which timer a ``--gpubench-timer`` name means on a device."""

from __future__ import annotations

from .engine import Timer
from .wall import WallTimer


def make_timer(name: str, device: str) -> Timer:
    """The timer for a ``--gpubench-timer`` name on this device (``auto`` picks the best).

    A CUDA timer asked for on a machine without a CUDA GPU is the wall timer, with a note on
    every result it times: ini files travel between GPU and CPU machines."""
    if device == "cuda":
        if name != "wall":
            from . import cuda

            return cuda.make(name)
        from .device import synchronizer

        return WallTimer(synchronizer("cuda"))
    if name in ("auto", "wall"):
        return WallTimer()
    return WallTimer(note=f"{name} asked for, but there is no CUDA GPU")


def requested(name: str, stored: str | None) -> str:
    """The timer to ask for a measurement whose baseline was taken by ``stored``: ``auto``
    keeps the baseline's graph timer (fallback.gated_kernels), so a function near the boundary
    between graph time and kernel time is judged by one timer in every session."""
    return stored if name == "auto" and stored in ("cuda-graph", "cupti-graph") else name
