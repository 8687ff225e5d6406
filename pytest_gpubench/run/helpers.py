"""Helper processes: a command shares out work that would keep one process too long
(``gpubench show`` of a big file, cli). A helper is a fork of the command's process, made
once what they share is read (a file of 10^5 tests is parsed once, not once per process):
it runs one function and hands its parent the bytes it returns, then exits at once. Only on
Linux (a fork of a process that loaded macOS's frameworks may crash); elsewhere, and where
a helper fails, the parent does the work itself.

A helper dies with its parent, whatever ends the parent:
- it is a process group of its own, out of reach of the terminal's signals: Ctrl-C
  interrupts the parent, which kills the helper as it leaves (``end_helper``);
- it watches its parent (``children.watch_parent``) and exits at once once it is gone.
It writes nothing but its bytes, to a pipe, and leaves through ``os._exit``: none of the
parent's buffers or clean-ups runs twice.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .children import watch_parent


@dataclass(frozen=True)
class Helper:
    pid: int
    output: int  # the file descriptor its bytes come from


def start_helper(work: Callable[[], bytes]) -> Helper | None:
    """Run ``work`` in a fork of this process; None where it cannot start."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    reader, writer = os.pipe()
    sys.stdout.flush()  # what the parent printed is not the helper's to print again
    sys.stderr.flush()
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns of a fork in a process with threads: numpy's BLAS threads,
            # idle. Its fork handlers make the helper's BLAS start its own.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(reader)
        os.close(writer)
        return None
    if pid == 0:  # the helper: never returns
        status = 1
        try:
            os.close(reader)
            os.setpgid(0, 0)
            watch_parent(parent, None, wrapped=False)
            data = work()
            with open(writer, "wb") as out:
                out.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(writer)
    with contextlib.suppress(OSError):  # the helper may have set it, or be gone already
        os.setpgid(pid, pid)  # before it runs on: the terminal's Ctrl-C is the parent's
    return Helper(pid, reader)


def helper_output(helper: Helper) -> bytes | None:
    """The bytes ``helper`` handed over once it ended; None where it failed."""
    chunks = []
    with open(helper.output, "rb", closefd=False) as source:
        while chunk := source.read(1 << 20):
            chunks.append(chunk)
    _, status = os.waitpid(helper.pid, 0)
    return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def end_helper(helper: Helper) -> None:
    """Kill ``helper`` where it still runs (its parent is leaving), reap it, and close its
    pipe."""
    with contextlib.suppress(ChildProcessError, ProcessLookupError):
        if os.waitpid(helper.pid, os.WNOHANG) == (0, 0):  # still running
            os.kill(helper.pid, signal.SIGKILL)
            os.waitpid(helper.pid, 0)
    os.close(helper.output)
