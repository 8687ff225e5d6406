"""``python -m pytest_gpubench``: the ``gpubench`` command."""

from __future__ import annotations

from .cli import main

raise SystemExit(main())
