"""Unit tests of timing/gpus.py: one timing per device at a time, one device per worker.

The lock's folder is the temporary directory's: each test points it at its own, so that these
tests never wait for, nor hold up, a measurement running elsewhere on this machine.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from support import CUDA

from pytest_gpubench.core.errors import GpubenchError
from pytest_gpubench.timing.gpus import (
    DEVICE_VARIABLE,
    ROTATE_VARIABLE,
    ROTATED,
    DeviceLock,
    host_identity,
    inherited_device,
    intended_device,
    lock_path,
    pinned_device,
    rotate_worker,
    rotated_devices,
    visible_devices,
    worker_index,
)


@pytest.fixture(autouse=True)
def own_temporary_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


@pytest.mark.parametrize(
    "worker, index", [("gw0", 0), ("gw7", 7), ("gw12", 12), (None, None), ("master", None)]
)
def test_worker_index(worker: str | None, index: int | None) -> None:
    assert worker_index(worker) == index


@pytest.mark.parametrize(
    "worker, devices, device",
    [("gw0", 2, 0), ("gw1", 2, 1), ("gw2", 2, 0), ("gw5", 4, 1), ("gw3", 1, None), (None, 4, None)],
)
def test_workers_are_pinned_to_their_index_modulo_the_devices(
    worker: str | None, devices: int, device: int | None
) -> None:
    assert pinned_device(worker, devices) == device


@pytest.mark.parametrize(
    "environ, devices, device",
    [
        ({DEVICE_VARIABLE: "1"}, 2, 1),  # a fresh process: its parent's, not the current one
        ({DEVICE_VARIABLE: "1", "PYTEST_XDIST_WORKER": "gw0"}, 2, 1),
        ({DEVICE_VARIABLE: "3"}, 2, None),  # not visible here: the current one
        ({DEVICE_VARIABLE: "x", "PYTEST_XDIST_WORKER": "gw3"}, 2, 1),
        ({}, 2, None),
    ],
)
def test_a_process_knows_its_device_before_it_is_pinned(
    environ: dict[str, str], devices: int, device: int | None
) -> None:
    """A process that pins itself times on its parent's device, else its worker's."""
    assert intended_device(devices, environ) == device


@pytest.mark.parametrize(
    "visible, count, worker, devices",
    [
        (None, 2, 0, "0,1"),
        (None, 2, 1, "1,0"),
        (None, 4, 6, "2,3,0,1"),  # its index modulo the devices; the others stay visible
        ("3,5", None, 1, "5,3"),  # the devices the user made visible, by their names
        ("GPU-a, GPU-b,GPU-c", None, 4, "GPU-b,GPU-c,GPU-a"),
        ("0", None, 1, None),  # one device: nothing to rotate
        ("", None, 0, None),
        (None, None, 1, None),  # no count known (no NVML): the worker is pinned by torch
    ],
)
def test_a_worker_sees_its_own_device_first(
    visible: str | None, count: int | None, worker: int, devices: str | None
) -> None:
    assert rotated_devices(visible, count, worker) == devices


def test_a_worker_rotates_once_when_its_controller_asks_and_then_times_on_the_first() -> None:
    """Issue 20: every worker compiles for "cuda:0", its own GPU; what its tests start
    rotates nothing again."""
    environ = {ROTATE_VARIABLE: "1", "PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert rotate_worker(environ)
    assert environ["CUDA_VISIBLE_DEVICES"] == "1,0" and environ[ROTATE_VARIABLE] == ROTATED
    assert intended_device(2, environ) == 0
    assert not rotate_worker(environ) and environ["CUDA_VISIBLE_DEVICES"] == "1,0"
    # a process that worker's test starts, or the worker's relay, keeps it
    assert intended_device(2, {**environ, "PYTEST_XDIST_WORKER": ""}) is None
    assert intended_device(2, {**environ, DEVICE_VARIABLE: "0"}) == 0
    # not asked (gpubench off, no xdist), or not a worker: nothing changes
    for asked in ({"PYTEST_XDIST_WORKER": "gw1"}, {ROTATE_VARIABLE: "1"}):
        environ = {**asked, "CUDA_VISIBLE_DEVICES": "0,1"}
        assert not rotate_worker(environ) and environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    environ = {ROTATE_VARIABLE: "1", "PYTEST_XDIST_WORKER": "gw1", "CUDA_VISIBLE_DEVICES": "0"}
    assert not rotate_worker(environ) and environ[ROTATE_VARIABLE] == "done"
    assert intended_device(1, environ) is None


@pytest.mark.slow
@pytest.mark.parametrize("timing", [True, False])
def test_xdist_workers_of_a_timing_run_see_their_own_gpu_first(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, timing: bool
) -> None:
    """Through xdist: with gpubench on, gw1 sees the second GPU first from before the
    conftest files load; with it off, the environment is the user's."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    conftest = fake.path / "conftest.py"
    conftest.write_text(
        conftest.read_text() + "\nimport os\nSEEN = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
    )
    fake.makepyfile(
        test_env="""
        import os

        from conftest import SEEN

        with open(f"seen-{os.environ['PYTEST_XDIST_WORKER']}", "w") as out:
            out.write(SEEN)

        def test_a(gpubench):
            gpubench(abs, -1)

        def test_b(gpubench):
            gpubench(abs, -1)
        """
    )
    args = ("-n", "2") + (("--gpubench",) if timing else ())
    fake.runpytest_subprocess(*args).assert_outcomes(passed=2)
    seen = {worker: (fake.path / f"seen-{worker}").read_text() for worker in ("gw0", "gw1")}
    assert seen == ({"gw0": "0,1", "gw1": "1,0"} if timing else {"gw0": "0,1", "gw1": "0,1"})


@pytest.mark.parametrize(
    "environ, device",
    [
        ({DEVICE_VARIABLE: "1"}, 1),  # a fresh process of a relay, before it is pinned
        ({DEVICE_VARIABLE: "1", "PYTEST_XDIST_WORKER": "gw0"}, 1),
        # a process a worker's test started: not pinned, it times on the current device
        ({"PYTEST_XDIST_WORKER": "gw1"}, None),
        ({DEVICE_VARIABLE: "3"}, None),
    ],
)
def test_the_device_detected_is_the_parents_only_in_a_fresh_process(
    environ: dict[str, str], device: int | None
) -> None:
    """The device a session detects (and locks) before it is pinned: a relay's process
    takes its lock first, so it is named after the device it will time on."""
    assert inherited_device(2, environ) == device


def test_the_devices_visible_are_counted_where_the_one_cuda_probe_finds_cuda(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """visible_devices asks cuda_available, as the rest of the plugin does."""
    import torch

    from pytest_gpubench.timing import gpus

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(gpus, "cuda_available", lambda: False)
    assert visible_devices() == 0
    monkeypatch.setattr(gpus, "cuda_available", lambda: True)
    assert visible_devices() == 3


def test_the_lock_of_a_device_is_named_after_it_in_a_folder_every_user_may_use(
    own_temporary_directory: Path,
) -> None:
    path = lock_path("GPU-6b1a0f2e-77c3-4f3e")
    folder = own_temporary_directory / "pytest-gpubench-locks"
    assert path == folder / "GPU-6b1a0f2e-77c3-4f3e.lock"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o1777
    for identity in ("../../etc/passwd", "a/b c", "", "..."):
        odd = lock_path(identity)
        assert odd.parent == folder and odd.suffix == ".lock" and "/" not in odd.name
    assert lock_path("").name == "device.lock"
    assert host_identity().startswith("host-")


HOLDER = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1])
with lock:
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def hold_in_another_process(path: Path, seconds: float) -> subprocess.Popen[str]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def finish(holder: subprocess.Popen[str], kill: bool = False) -> None:
    if kill:
        holder.kill()
    holder.communicate()  # waits, and closes its output


@pytest.mark.slow
def test_a_device_lock_held_by_another_process_times_out_with_one_line() -> None:
    holder = hold_in_another_process(lock_path("GPU-x"), 30)
    try:
        started = time.perf_counter()
        with pytest.raises(GpubenchError) as info, DeviceLock("GPU-x", timeout_s=0.2):
            pass
        assert time.perf_counter() - started >= 0.2
    finally:
        finish(holder, kill=True)
    assert str(info.value) == (
        f"waited 0.2 s for the device lock {lock_path('GPU-x')}: another process has been "
        "timing on this device all that while; stop it or remove the lock file if no benchmark "
        "is running"
    )
    with DeviceLock("GPU-x", timeout_s=0.2):  # free once the other process is gone
        pass


@pytest.mark.slow
def test_a_device_lock_waits_for_the_other_process_and_other_devices_do_not() -> None:
    holder = hold_in_another_process(lock_path("GPU-x"), 0.5)
    try:
        with DeviceLock("GPU-y", timeout_s=0.1):  # another GPU: no waiting
            pass
        started = time.perf_counter()
        with DeviceLock("GPU-x", timeout_s=10):
            waited = time.perf_counter() - started
        assert waited > 0.2
    finally:
        finish(holder)


def test_a_device_lock_is_reentrant_within_a_process() -> None:
    lock = DeviceLock("GPU-x", timeout_s=0.1)
    with lock, lock:
        pass


@pytest.mark.skipif(CUDA, reason="on a GPU the lock is the GPU's, not the host's")
def test_a_measurement_holds_the_device_lock_and_the_untimed_call_does_not(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While another process times on this device, a test's correctness work (the untimed
    first call) runs; its measurement waits until the device is free."""
    fake.makepyfile(
        test_bench="""
        import json
        import time

        CALLS = []

        def work():
            CALLS.append(time.time())
            if len(CALLS) == 1:
                open("first-call", "w").close()

        def test_a(gpubench):
            gpubench(work)
            with open("calls.json", "w") as out:
                json.dump(CALLS, out)
        """
    )
    held, released = threading.Event(), []

    def hold() -> None:
        # Held until the untimed first call has run (however slow the machine), then a while.
        with DeviceLock(host_identity(), timeout_s=5):
            held.set()
            deadline = time.time() + 30
            while not (fake.path / "first-call").exists() and time.time() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)
            released.append(time.time())

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(5)
    try:
        fake.runpytest("--gpubench").assert_outcomes(passed=1)
    finally:
        thread.join()
    calls = json.loads((fake.path / "calls.json").read_text())
    assert len(calls) > 2
    assert calls[0] < released[0] <= calls[1]  # the first call ran, the samples waited


PROBE = """
import sys
from filelock import FileLock, Timeout
try:
    FileLock(sys.argv[1]).acquire(timeout=0)
    print("free")
except Timeout:
    print("busy")
"""


@pytest.mark.slow
@pytest.mark.skipif(CUDA, reason="on a GPU the lock is the GPU's, not the host's")
def test_a_confirming_child_holds_the_device_from_its_first_test_to_its_last(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Children that confirm a verdict start together; each holds the device lock through
    all its tests (untimed work included), so a sibling's first calls never run beside its
    samples. An ordinary run holds it only while it measures."""
    fake.makepyfile(
        test_bench=f"""
        import os, subprocess, sys

        def test_a(gpubench):
            gpubench(sum, [1, 2])
            probe = subprocess.run(
                [sys.executable, "-c", {PROBE!r}, os.environ["LOCK"]],
                capture_output=True, text=True, check=True,
            )
            with open("probe.txt", "a") as out:
                out.write(probe.stdout)
        """
    )
    lock = lock_path(host_identity())
    monkeypatch.setenv("LOCK", str(lock))
    monkeypatch.setenv("PYTEST_GPUBENCH_CHILD", str(fake.path / "child.json"))
    fake.runpytest("--gpubench", "--gpubench-confirm", "0").assert_outcomes(passed=1)
    monkeypatch.delenv("PYTEST_GPUBENCH_CHILD", raising=False)  # the plugin took it
    with DeviceLock(host_identity(), timeout_s=0.1):  # released at the end of its tests
        pass
    fake.runpytest("--gpubench").assert_outcomes(passed=1)
    assert (fake.path / "probe.txt").read_text().split() == ["busy", "free"]
