"""The type of JSON data as ``json.loads`` returns it: readers check it before building
records from it, so its type says only where it came from."""

from typing import Any

Json = Any


def printable(text: str) -> str:
    """``text`` as any reader can write it: a character no encoding writes (a lone surrogate,
    which JSON's ``\\ud800`` carries from any file) escaped as ``\\ud800``; other text as it
    is. Every string a file gives is printed, drawn or written through this or a stream
    opened with ``errors="backslashreplace"`` (issue 46: a key of "\\ud800" broke show)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
