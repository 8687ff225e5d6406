"""Helper processes (run/helpers.py): forks that hand their parent bytes, and never outlive
it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import running

from pytest_gpubench.run import helpers

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="helpers are forks of Linux; read from /proc"
)


def gone_soon(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds  # a loaded machine may take its time
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not running(pid)


def reaped(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_a_helper_hands_over_its_bytes_or_nothing_where_it_fails() -> None:
    with helpers.Helpers() as started:
        big = started.start(lambda: b"x" * (3 << 20))  # more than a pipe holds
        failing = started.start(lambda: bytes(1 / 0))  # type: ignore[arg-type]
        assert big is not None and failing is not None
        assert started.output(big, 60) == b"x" * (3 << 20)
        assert started.output(failing, 60) is None
    assert reaped(big.pid) and reaped(failing.pid)


def test_a_helper_that_takes_too_long_gives_nothing_and_is_ended() -> None:
    with helpers.Helpers() as started:
        slow = started.start(lambda: time.sleep(60) or b"late")
        assert slow is not None
        assert started.output(slow, 0.3) is None
    assert reaped(slow.pid) and not running(slow.pid)


def test_a_helper_is_out_of_reach_of_the_terminal_and_ended_as_its_block_leaves() -> None:
    """Its own process group (the terminal's Ctrl-C reaches the parent only), killed and
    reaped as the parent leaves the block, an interrupt included."""
    with pytest.raises(KeyboardInterrupt), helpers.Helpers() as started:
        helper = started.start(lambda: time.sleep(60) or b"")
        assert helper is not None
        deadline = time.monotonic() + 10
        while os.getpgid(helper.pid) != helper.pid and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.getpgid(helper.pid) == helper.pid != os.getpgid(0)
        raise KeyboardInterrupt
    assert reaped(helper.pid) and not running(helper.pid)


def test_an_interrupt_right_after_the_fork_ends_the_helper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The terminal's signals wait while a helper is made: one that comes before it is
    registered is taken after, and the block ends it."""
    pids = []

    def group(pid: int, to: int) -> None:
        if pid:  # the parent's call, with the helper's pid: a Ctrl-C now
            pids.append(pid)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(helpers.os, "setpgid", group)
    with pytest.raises(KeyboardInterrupt), helpers.Helpers() as started:
        started.start(lambda: time.sleep(60) or b"")
    assert len(pids) == 1, pids
    assert reaped(pids[0])
    assert not running(pids[0])


def test_a_helper_whose_end_the_system_reaps_gives_nothing() -> None:
    """With SIGCHLD ignored the system reaps the helper: its exit status is unknown."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        with helpers.Helpers() as started:
            helper = started.start(lambda: b"done")
            assert helper is not None
            assert started.output(helper, 60) is None
    finally:
        signal.signal(signal.SIGCHLD, previous)


@pytest.mark.parametrize("end", [signal.SIGKILL, signal.SIGTERM])
@pytest.mark.parametrize("watching", [False, True])
def test_a_helper_dies_with_its_parent(tmp_path: Path, end: signal.Signals, watching: bool) -> None:
    """Also where its parent itself watches its own parent, as the plugin's fresh processes
    do (the fork inherits no thread, so it starts its own watch)."""
    script = f"""if True:
        import os, time
        from pytest_gpubench.run import helpers, processes
        if {watching}:
            processes.watch_parent(os.getppid(), None, wrapped=False)
        with helpers.Helpers() as started:
            helper = started.start(lambda: time.sleep(60) or b"")
            print(helper.pid, flush=True)
            time.sleep(60)
    """
    with subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    ) as parent:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert running(pid)
        parent.send_signal(end)
    assert gone_soon(pid)


def test_no_helper_where_no_fork_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helpers.sys, "platform", "darwin")
    assert not helpers.available()
    with helpers.Helpers() as started:
        assert started.start(lambda: b"") is None
