"""One timing per device at a time, and one device per xdist worker (docs/guide.md,
"pytest-xdist").

Processes that time on the same GPU at once disturb each other (four xdist workers on one
H200 changed 12 of 54 verdicts). Every measurement holds an inter-process lock named after
the physical device (its UUID; the host for the CPU timer) while it captures, warms up and
samples. With several GPUs visible, each xdist worker sees its own first where it can
(``rotate_worker``: all compile for "cuda:0", so compile caches keyed by the device's index
serve them all), else is pinned to it by ``torch.cuda.set_device`` (``pin_worker``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from ..core.errors import GpubenchError

# How long a measurement waits for another process's measurement on the same device.
LOCK_TIMEOUT_S = 900.0


def lock_path(identity: str, directory: Path | None = None) -> Path:
    """The lock file of a device: one per physical device, shared by all users of the host."""
    folder = directory or Path(tempfile.gettempdir()) / "pytest-gpubench-locks"
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        folder.chmod(0o1777)  # other users' sessions time on the same GPU
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", identity).strip("-.") or "device"
    return folder / f"{name}.lock"


def host_identity() -> str:
    """The CPU timer's device: this host, by a digest of its name (baselines are committed:
    they say which sessions ran on one host, not the host's name)."""
    return "host-" + hashlib.sha256(socket.gethostname().encode()).hexdigest()[:12]


class DeviceLock:
    """Held around one measurement; re-entrant within a process."""

    def __init__(self, identity: str, timeout_s: float = LOCK_TIMEOUT_S) -> None:
        from filelock import FileLock  # only a timing run needs it

        self.path = lock_path(identity)
        self.timeout_s = timeout_s
        self._lock = FileLock(str(self.path), mode=0o666)

    def __enter__(self) -> DeviceLock:
        self.acquire()
        return self

    def acquire(self, wait_s: float | None = None) -> None:
        """Take the lock (once more: each acquire needs its release), waiting ``wait_s``
        (None: the lock's timeout; -1: as long as it takes)."""
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=self.timeout_s if wait_s is None else wait_s)
        except Timeout:
            raise GpubenchError(
                f"waited {self.timeout_s:g} s for the device lock {self.path}: another "
                "process has been timing on this device all that while; stop it or remove "
                "the lock file if no benchmark is running"
            ) from None

    def __exit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        self._lock.release()


def worker_index(worker_id: str | None) -> int | None:
    """0 for xdist's ``gw0``, 1 for ``gw1``...; None outside xdist."""
    match = re.fullmatch(r"gw(\d+)", worker_id or "")
    return int(match.group(1)) if match else None


def pinned_device(worker_id: str | None, device_count: int) -> int | None:
    """The device index an xdist worker times on: its index modulo the devices visible."""
    index = worker_index(worker_id)
    if index is None or device_count < 2:
        return None
    return index % device_count


# Set by a parent for the fresh processes it starts: time on the parent's device.
DEVICE_VARIABLE = "PYTEST_GPUBENCH_DEVICE"


def pin_worker() -> int | None:
    """Make this process's current CUDA device its own; return the index chosen.

    An xdist worker takes its index modulo the devices visible; a fresh process started by
    the plugin takes its parent's. ``torch.cuda.set_device``, not CUDA_VISIBLE_DEVICES: CUDA
    may already be initialized by a conftest, and tests that use ``device="cuda"`` follow
    the current device either way."""
    import torch

    if not torch.cuda.is_available():
        return None
    index = intended_device(torch.cuda.device_count())
    os.environ.pop(DEVICE_VARIABLE, None)  # not for processes the tests start
    if index is not None:
        torch.cuda.set_device(index)
    return index


def intended_device(device_count: int, environ: Mapping[str, str] = os.environ) -> int | None:
    """The index of the device a process that pins itself times on (None: the current
    one): its parent's, for a fresh process the plugin started; an xdist worker's own (the
    first, where its devices were rotated to put its own first: rotate_worker)."""
    inherited = inherited_device(device_count, environ)
    if inherited is not None:
        return inherited
    if environ.get(ROTATE_VARIABLE) == ROTATED:
        return 0 if worker_index(environ.get("PYTEST_XDIST_WORKER")) is not None else None
    return pinned_device(environ.get("PYTEST_XDIST_WORKER"), device_count)


# Set to "1" by an xdist controller timing with gpubench, for its workers: each rotates the
# devices it sees, its own first, before anything starts CUDA (rotate_worker); ROTATED or
# "done" after, so that the processes its tests start rotate nothing.
ROTATE_VARIABLE = "PYTEST_GPUBENCH_ROTATE"
ROTATED = "rotated"


def rotated_devices(visible: str | None, device_count: int | None, worker: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for xdist worker ``worker``: the devices it sees (``visible``,
    else ``device_count`` of them), its own first (the worker's index modulo their number),
    the others after it in order (a test that asks for a second GPU still has one). None
    with fewer than two or none known."""
    if visible is not None:
        entries = [entry.strip() for entry in visible.split(",") if entry.strip()]
    else:
        entries = [str(i) for i in range(device_count or 0)]
    if len(entries) < 2:
        return None
    first = worker % len(entries)
    return ",".join(entries[first:] + entries[:first])


def nvml_device_count() -> int | None:
    """The GPUs NVML sees, without starting CUDA (None without NVML)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no NVML library, no driver, no GPU: nothing to rotate
        return None


def rotate_worker(environ: MutableMapping[str, str] = os.environ) -> bool:
    """In an xdist worker its controller asked to (ROTATE_VARIABLE), before anything starts
    CUDA: see its own GPU first. Whether it rotated them."""
    if environ.get(ROTATE_VARIABLE) != "1":
        return False
    environ[ROTATE_VARIABLE] = "done"
    index = worker_index(environ.get("PYTEST_XDIST_WORKER"))
    if index is None:
        return False
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    count = nvml_device_count() if visible is None else None
    devices = rotated_devices(visible, count, index)
    if devices is None:
        return False
    environ["CUDA_VISIBLE_DEVICES"] = devices
    environ[ROTATE_VARIABLE] = ROTATED
    return True


def inherited_device(device_count: int, environ: Mapping[str, str] = os.environ) -> int | None:
    """The device a fresh process the plugin started is to time on, its parent's; None in
    any other process (the variable is gone once the process is pinned), or where the index
    is not visible. Asked before the process is pinned: a process of a relay takes its
    device's lock first. Not an xdist worker's index: a process a worker's test starts
    inherits PYTEST_XDIST_WORKER and is not pinned."""
    inherited = environ.get(DEVICE_VARIABLE, "")
    if inherited.isdigit() and int(inherited) < device_count:
        return int(inherited)
    return None


def cuda_available() -> bool:
    """True when torch is importable and sees a usable CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def visible_devices() -> int:
    """The GPUs this process sees (0 without torch or CUDA)."""
    if not cuda_available():
        return 0
    import torch

    return int(torch.cuda.device_count())
