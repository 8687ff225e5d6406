"""Which device we time on, its fingerprint, and the readable key of its baseline file."""

from __future__ import annotations

import importlib.metadata
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Fingerprint fields whose change between baseline and run is reported (never fatal).
VERSION_FIELDS = ("driver", "cuda", "torch", "triton", "python")


@dataclass(frozen=True)
class Device:
    kind: str  # "cuda" or "cpu"
    key: str  # file name stem of the baseline, e.g. sm90-nvidia-h100-80gb-hbm3
    fingerprint: dict[str, Any] = field(default_factory=dict)
    uuid: str | None = None
    index: int = 0


def slug(text: str) -> str:
    """Lower-case letters, digits and single hyphens: safe as a file name, readable."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def detect(use_cuda: bool) -> Device:
    versions = _versions()
    if use_cuda:
        import torch

        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        uuid_text = f"GPU-{uuid}" if uuid is not None else None
        fingerprint: dict[str, Any] = {
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
            "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)),
            **versions,
        }
        key = f"sm{props.major}{props.minor}-{slug(props.name)}"
        return Device("cuda", key, fingerprint, uuid_text, index)
    model = cpu_model()
    return Device("cpu", f"cpu-{slug(model)}", {"name": model, **versions})


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _versions() -> dict[str, Any]:
    versions: dict[str, Any] = {"python": platform.python_version(), "driver": None}
    try:
        import torch

        versions["torch"] = torch.__version__
        versions["cuda"] = torch.version.cuda
    except ImportError:
        versions["torch"] = versions["cuda"] = None
    try:  # metadata, not import: importing triton fixes TRITON_INTERPRET for the process
        versions["triton"] = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        versions["triton"] = None
    return versions


def version_changes(baseline: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Human-readable differences in software versions between two fingerprints."""
    changes = []
    for name in VERSION_FIELDS:
        old, new = baseline.get(name), current.get(name)
        if old != new and old is not None and new is not None:
            changes.append(f"{name} {old} -> {new}")
    return changes
