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


def test_a_helper_hands_over_its_bytes_or_nothing_where_it_fails() -> None:
    helper = helpers.start_helper(lambda: b"x" * (3 << 20))  # more than a pipe holds
    assert helper is not None
    assert helpers.helper_output(helper) == b"x" * (3 << 20)
    helpers.end_helper(helper)
    failing = helpers.start_helper(lambda: bytes(1 / 0))  # type: ignore[arg-type]
    assert failing is not None
    assert helpers.helper_output(failing) is None
    helpers.end_helper(failing)


def test_a_helper_is_ended_by_its_parent_out_of_reach_of_the_terminal() -> None:
    """Its own process group (the terminal's Ctrl-C reaches the parent only), killed and
    reaped as the parent leaves."""
    helper = helpers.start_helper(lambda: time.sleep(60) or b"")
    assert helper is not None
    deadline = time.monotonic() + 10
    while os.getpgid(helper.pid) != helper.pid and time.monotonic() < deadline:
        time.sleep(0.01)
    assert os.getpgid(helper.pid) == helper.pid != os.getpgid(0)
    helpers.end_helper(helper)
    assert not running(helper.pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(helper.pid, os.WNOHANG)


@pytest.mark.parametrize("end", [signal.SIGKILL, signal.SIGTERM])
def test_a_helper_dies_with_its_parent(tmp_path: Path, end: signal.Signals) -> None:
    script = (
        "import sys, time; from pytest_gpubench.run import helpers; "
        "h = helpers.start_helper(lambda: time.sleep(60) or b''); "
        "print(h.pid, flush=True); time.sleep(60)"
    )
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
    assert helpers.start_helper(lambda: b"") is None
