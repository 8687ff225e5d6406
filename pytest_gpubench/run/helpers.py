"""Helper processes: a command shares out work that would keep one process too long
(``gpubench show`` of a big file, cli). A helper is a fork of the command's process, made
once what they share is read (a file of 10^5 tests is parsed once, not once per process):
it runs one function and hands its parent the bytes it returns, then exits at once. Only on
Linux (a fork of a process that loaded macOS's frameworks may crash); elsewhere, and where
a helper fails or takes too long, the parent does the work itself.

A helper dies with its parent, whatever ends the parent:
- it is a process group of its own, out of reach of the terminal's signals: Ctrl-C
  interrupts the parent, which kills its helpers as it leaves their ``Helpers`` block. The
  terminal's signals wait while a helper is made and while helpers are ended, so that no
  interrupt falls between a fork and its registration, or cuts an ending short;
- it watches its parent (``processes.watch_parent``) and exits at once once it is gone.
It writes nothing but its bytes, to a pipe, and leaves through ``os._exit``: none of the
parent's buffers or clean-ups runs twice.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from .processes import watch_parent

# Signals of a terminal, held back while a helper is made or ended.
TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


@contextlib.contextmanager
def _signals_wait() -> Iterator[dict[signal.Signals, Any]]:
    """The terminal's signals wait until the block ends (then each comes as it would have):
    Python runs their handlers in the main thread whichever thread the system gives them
    to, so a signal mask would not hold them. Yields the handlers it replaced."""
    if threading.current_thread() is not threading.main_thread():
        yield {}  # only the main thread sets handlers; nor do signals interrupt another
        return
    came: list[int] = []
    replaced: dict[signal.Signals, Any] = {}
    for number in TERMINAL_SIGNALS:
        if signal.getsignal(number) is not None:  # one set outside Python: not set back
            replaced[number] = signal.signal(number, lambda n, _: came.append(n))
    try:
        yield replaced
    finally:
        for number, handler in replaced.items():
            signal.signal(number, handler)
        for waited in came:
            signal.raise_signal(waited)


def available() -> bool:
    """Whether helpers can be made here."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


@dataclass(frozen=True)
class Helper:
    pid: int
    output: int  # the file descriptor its bytes come from


@dataclass
class Helpers:
    """The helpers started in a ``with`` block, each killed (where it still runs) and reaped
    as the block leaves, however it leaves (the terminal's signals wait meanwhile)."""

    started: list[Helper] = field(default_factory=list)

    def __enter__(self) -> Helpers:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        with _signals_wait():  # an interrupt waits until every helper is ended
            for helper in self.started:
                _end(helper)

    def start(self, work: Callable[[], bytes]) -> Helper | None:
        """Run ``work`` in a fork of this process; None where it cannot start."""
        if not available():
            return None
        parent = os.getpid()
        reader, writer = os.pipe()
        sys.stdout.flush()  # what the parent printed is not the helper's to print again
        sys.stderr.flush()
        with _signals_wait() as replaced:  # no interrupt between the fork and the list
            try:
                with warnings.catch_warnings():
                    # Python 3.12+ warns of a fork in a process with threads: numpy's BLAS
                    # threads, idle; their fork handlers make the helper's BLAS start its own.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    pid = os.fork()
            except OSError:
                os.close(reader)
                os.close(writer)
                return None
            if pid == 0:
                _helper(work, parent, reader, writer, replaced)  # never returns
            os.close(writer)
            helper = Helper(pid, reader)
            self.started.append(helper)
            with contextlib.suppress(OSError):  # the helper may have set it, or be gone
                os.setpgid(pid, pid)  # before it runs on: the terminal's Ctrl-C is ours
        return helper

    @staticmethod
    def output(helper: Helper, timeout_s: float) -> bytes | None:
        """The bytes ``helper`` handed over once it ended; None where it failed, or gave
        nothing within ``timeout_s`` (then it is killed as the block leaves)."""
        chunks: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([helper.output], [], [], left)[0]:
                return None
            chunk = os.read(helper.output, 1 << 20)
            if not chunk:  # its end of the pipe closed: it is leaving
                try:
                    _, status = os.waitpid(helper.pid, 0)
                except ChildProcessError:  # reaped by the system (SIGCHLD ignored): unknown
                    return None
                return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None
            chunks.append(chunk)
        return None


def _helper(
    work: Callable[[], bytes],
    parent: int,
    reader: int,
    writer: int,
    handlers: dict[signal.Signals, Any],
) -> None:
    """The helper's life: ``work``'s bytes to ``writer``, then its exit."""
    status = 1
    try:
        os.close(reader)
        os.setpgid(0, 0)  # out of the terminal's group, then its signals' handlers back
        for number, handler in handlers.items():
            signal.signal(number, handler)
        watch_parent(parent, None, wrapped=False)
        data = work()
        with open(writer, "wb") as out:
            out.write(data)
        status = 0
    finally:
        os._exit(status)


def _end(helper: Helper) -> None:
    """Kill ``helper`` where it still runs, reap it, and close its pipe."""
    with contextlib.suppress(ChildProcessError, ProcessLookupError):
        if os.waitpid(helper.pid, os.WNOHANG) == (0, 0):  # still running
            os.kill(helper.pid, signal.SIGKILL)
            os.waitpid(helper.pid, 0)
    os.close(helper.output)
