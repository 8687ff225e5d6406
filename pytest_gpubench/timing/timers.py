"""Which timer a ``--gpubench-timer`` name means on a device."""

from __future__ import annotations

from .engine import Timer
from .wall import WallTimer


def make_timer(name: str, device: str) -> Timer:
    """The timer for a ``--gpubench-timer`` name on this device (``auto`` picks the best).

    A CUDA timer asked for on a machine without a CUDA GPU is the wall timer, with a note on
    every result it times: ini files travel between GPU and CPU machines."""
    if device != "cuda" or name == "wall":
        if device == "cuda":
            from .device import synchronizer

            return WallTimer(synchronizer("cuda"))
        if name not in ("auto", "wall"):
            return WallTimer(note=f"{name} asked for, but there is no CUDA GPU")
        return WallTimer()
    from . import cuda

    return cuda.make(name)


# The timers ``auto`` chooses between for a captured graph (fallback.gated_kernels).
AUTO_GRAPH_TIMERS = frozenset({"cuda-graph", "cupti-graph"})


def requested(name: str, stored: str | None) -> str:
    """The timer to ask for a measurement whose baseline was taken by ``stored``: ``auto``
    keeps the graph timer the baseline has, so a function near the boundary between graph
    time and kernel time is judged by one timer in every session, never ``incomparable``."""
    return stored if name == "auto" and stored in AUTO_GRAPH_TIMERS else name
