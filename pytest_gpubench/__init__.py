"""pytest-gpubench: GPU-kernel performance as a tested property."""

from __future__ import annotations

__version__ = "0.1.0"
