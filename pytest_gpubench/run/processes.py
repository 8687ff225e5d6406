"""Starting, watching and ending the processes we start: the one home of process groups,
signals and lifelines (run.children, versus.revision, versus.bisect and the
plugin's controller use it).

A process we start dies with us, whatever ends us:
- it leads a process group of its own, out of reach of the terminal's signals, and it is
  ended as a group (:func:`end`, :func:`kill_group`, :func:`kill_all`): what it started goes
  with it;
- it has a lifeline: the kernel signals it once we are gone (:func:`start`, Linux's
  PR_SET_PDEATHSIG), or it watches us from a thread of its own (:func:`watch_parent`);
- SIGTERM and SIGHUP (a cancelled CI job, a closed terminal) interrupt us as Ctrl-C does
  while we hold such processes (:func:`interrupts`), so that we end them in order.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from .owner import alive

# prctl(2): the signal a process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1
# How long a killed process may take to be reaped by Popen before we reap it ourselves.
KILLED_WAIT_S = 5.0
# How often a process looks for its parent (watch_parent).
LIFELINE_INTERVAL_S = 0.2
# How often a parent looks at its children while it waits for them (whether they ended,
# their beats, a relay's turn's file, a duo's set-up) and a duo's leader at its parent's gate.
BEAT_POLL_S = 0.02
# The exit status of a process whose parent is gone (watch_parent).
ORPHANED = 70
# Set in a process started under a wrapper command (Nsight Compute): its parent process is
# the wrapper, which it watches as well as the process that started the wrapper.
WRAPPED_VARIABLE = "PYTEST_GPUBENCH_WRAPPED"
# Folders of the plugin's fresh processes (run.children): <prefix><host>-<parent pid>-<random>,
# in the temporary directory; the only folders watch_parent removes.
FOLDER_PREFIX = "gpubench-child-"


def start(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    *,
    lifeline: bool = True,
) -> subprocess.Popen[bytes]:
    """Start ``args`` in ``cwd`` as the leader of a process group of its own (ended as one:
    :func:`end`), its output to the file ``log`` (not a pipe: nobody reads one while we wait,
    and a background job it leaves cannot block us). ``lifeline``: the kernel sends it
    SIGTERM once we are gone (:func:`_dies_with_us`); without, it watches us itself
    (:func:`watch_parent`). Raises OSError."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            list(args),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Not in the terminal's group: our Ctrl-C ends it, in order (what it started,
            # and a wrapper's child that outlives the wrapper, are in its group).
            start_new_session=True,
            preexec_fn=_dies_with_us(signal.SIGTERM) if lifeline else None,
        )


def _dies_with_us(signum: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send ``signum`` to the new process once this
    thread is gone, also when it is killed outright (Linux's PR_SET_PDEATHSIG); None where
    there is no such thing. Its lifeline: in a session of its own, it is out of reach of the
    terminal's signals, and of our ``killpg`` once we are gone."""
    if not sys.platform.startswith("linux"):
        return None
    try:  # resolved here, not after the fork
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # gone before the lifeline was armed
            os.kill(os.getpid(), signum)

    return arm


def died(returncode: int) -> str:
    """How a process ended, in words, as every message of ours says it: ``killed by
    SIGABRT`` (a signal: Popen's negative return code), ``exit code 3``."""
    if returncode >= 0:
        return f"exit code {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:  # a real-time signal, or one this platform does not name
        return f"killed by signal {-returncode}"


def exited(pid: int) -> bool:
    """Whether the child ``pid`` has ended, without reaping it (reaped, it is no child)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def running(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child ``proc`` still runs. One that ended is left unreaped (its reaper
    ends its group first: :func:`kill_group`): until then its group's id, its pid, can be no
    other process's."""
    if proc.returncode is None and hasattr(os, "waitid"):  # not reaped: asked without reaping
        return not exited(proc.pid)
    return proc.poll() is None  # where there is no waitid (macOS), reaped: its group stays


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(OSError):  # the group is gone, or not ours
        os.killpg(pid, signum)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill every process of the group ``proc`` leads (:func:`start`), ``proc`` too, unless
    ``proc`` was reaped (its group's id could be another's then); it is not reaped here."""
    if proc.returncode is None:
        _signal_group(proc.pid, signal.SIGKILL)


def end(proc: subprocess.Popen[bytes], grace_s: float = 0.0) -> None:
    """End the group ``proc`` leads, then reap ``proc``: with a ``grace_s``, SIGTERM first (its
    processes end their own in order), SIGKILL to what is left after it or at a second Ctrl-C;
    without, SIGKILL at once. Also once ``proc`` was reaped: a group outlives its leader while
    a member runs (a background job, a compile server), so its id is not reused meanwhile."""
    if grace_s > 0:
        _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        with contextlib.suppress(KeyboardInterrupt):
            while time.monotonic() < deadline and not exited(proc.pid):
                time.sleep(0.1)
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def kill_all(started: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill the processes of ``started`` not yet reaped with their groups (also those that
    ended: their group may hold what outlived them), then reap them."""
    # Unreaped first: running() reaps where there is no waitid (macOS), and the group stays.
    left = [p for p in started if p.returncode is None or running(p)]
    for proc in left:  # all of them first: a second Ctrl-C may cut the waits short
        kill_group(proc)
        proc.kill()
    for proc in left:
        try:
            proc.wait(timeout=KILLED_WAIT_S)
        except subprocess.TimeoutExpired:
            # A Ctrl-C inside Popen.wait(timeout) can leave its lock taken (CPython: between
            # its acquire and its try); an untimed wait would then wait forever: reap it here.
            with contextlib.suppress(ChildProcessError):
                _, status = os.waitpid(proc.pid, 0)
                proc.returncode = os.waitstatus_to_exitcode(status)


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP (a cancelled CI job, a closed terminal, a dropped ssh session)
    raise KeyboardInterrupt meanwhile, so that what we started is ended in order, as on
    Ctrl-C. Only in the main thread (the only one that sets handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


# --- the started process's side -------------------------------------------------------------


_watching: list[int] = []  # the parent this process already watches (once per process)
if hasattr(os, "register_at_fork"):  # a fork has no thread of its parent's: nor its watch
    os.register_at_fork(after_in_child=_watching.clear)


def watch_parent(
    parent_pid: int,
    folder: Path | None,
    interval_s: float = LIFELINE_INTERVAL_S,
    wrapped: bool | None = None,
) -> None:
    """End this process once the process ``parent_pid`` that started it is gone: remove the
    folder it shares with its siblings (only a folder of ours; None: it has none), then exit
    at once (``os._exit``: no cleanup that could write, no waiting for the main thread,
    which may be anywhere: a conftest's import, a CUDA call, a user's test). A daemon
    thread, started once per process."""
    if _watching:
        return
    _watching.append(parent_pid)

    # Under a wrapper (Nsight Compute: run/ncu.py) its parent process is the wrapper: it ends
    # once either is gone (a wrapper does not end with the process that started it).
    if wrapped is None:
        wrapped = WRAPPED_VARIABLE in os.environ
    first = os.getppid() if wrapped else parent_pid

    def watch() -> None:
        while os.getppid() == first and (first == parent_pid or alive(parent_pid)):
            time.sleep(interval_s)
        if folder is not None and folder.name.startswith(FOLDER_PREFIX):
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(ORPHANED)

    threading.Thread(target=watch, name="gpubench-lifeline", daemon=True).start()
