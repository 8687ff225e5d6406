"""The device a session times on: detected once, with torch where there is a GPU; and the
few torch calls the session needs outside the timers (a synchronize, the copy whose
bandwidth is the yardstick of "% of peak", the matmul whose rate declared flops are held to)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import platform
import random
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.device import Device, slug
from .engine import Workload

# Bytes copied to measure the device's copy bandwidth, the yardstick of "% of peak".
PEAK_COPY_BYTES = 1 << 28
# Bytes of each buffer of the copy that stays in the cache: a quarter of the GPU's L2 (its
# source and destination then fill half of it), or this on a CPU (whose cache is not known).
CPU_CACHED_COPY_BYTES = 1 << 18
# Side of the square matmul whose rate declared flops are held to: large enough for the
# library's fastest kernels (about 1.1 TFLOP, 1-4 ms on an H100), or this on a CPU; float64
# a quarter of it (GPUs without float64 units take a second for the large one).
MATMUL_SIZE = 8192
CPU_MATMUL_SIZE = 512
# The dtypes whose matmul rate is measured; a call of another (integers, float8) has no floor.
MATMUL_DTYPES = ("float16", "bfloat16", "float32", "float64")


def cached_copy_bytes(cache_bytes: int | None) -> int:
    """Bytes of each buffer of a copy whose source and destination stay in a cache of
    ``cache_bytes`` (None: a CPU's, not known) between calls."""
    return cache_bytes // 4 if cache_bytes else CPU_CACHED_COPY_BYTES


def detect(use_cuda: bool) -> Device:
    versions = _versions()
    if use_cuda:
        import torch

        from .gpus import inherited_device

        # A process of a relay asks before it is pinned (it takes the device's lock first):
        # the device it will time on, not the current one.
        index = inherited_device(torch.cuda.device_count())
        if index is None:
            index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        uuid = getattr(props, "uuid", None)
        uuid_text = f"GPU-{uuid}" if uuid is not None else None
        fingerprint: dict[str, str | int | float | None] = {
            "name": props.name,
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_bytes": int(props.total_memory),
            "multiprocessors": int(props.multi_processor_count),
            "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)),
            **versions,
        }
        key = f"sm{props.major}{props.minor}-{slug(props.name)}"
        return Device("cuda", key, fingerprint, uuid_text, index)
    model = cpu_model()
    return Device("cpu", f"cpu-{slug(model)}", {"name": model, **versions})


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version(), "driver": None}
    try:
        import torch

        versions["torch"] = str(torch.__version__)
        versions["cuda"] = torch.version.cuda
    except ImportError:
        versions["torch"] = versions["cuda"] = None
    try:  # metadata, not import: importing triton fixes TRITON_INTERPRET for the process
        versions["triton"] = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        versions["triton"] = None
    return versions


def synchronizer(kind: str) -> Callable[[], None]:
    """What waits for the device's queued work: ``torch.cuda.synchronize`` on a GPU."""
    if kind != "cuda":
        return lambda: None
    import torch

    return torch.cuda.synchronize


# How deep kept_apart looks into tuples, lists and dicts: a result or arguments nested
# deeper (or holding themselves) are not walked further.
NESTING = 8


def kept_apart(result: object, workload: Workload) -> object:
    """``result``, of the untimed first call of ``workload``, with a copy of each tensor in it
    (in tuples, lists and dicts) that shares memory with a tensor argument: the calls timed
    after it may write into their arguments (a rotary embedding in place, a backward into
    the incoming gradient), and the fixture returns what the first call gave. A copy that
    does not fit in the device's memory is not made: the tensor is returned as it is."""
    torch = sys.modules.get("torch")
    if torch is None or workload.setup is not None:  # fresh arguments for every call
        return result
    if not any(_storages([result], torch)):  # no tensor in it: nothing to keep apart
        return result
    inputs = set(_storages([workload.args, list(workload.kwargs.values())], torch))

    def kept(value: object, depth: int) -> object:
        if isinstance(value, torch.Tensor):
            if inputs.isdisjoint(_storages([value], torch)):
                return value
            try:
                return value.clone()
            except RuntimeError:  # out of memory, among others: as it is, shared
                return value
        if depth >= NESTING:
            return value
        if isinstance(value, tuple | list) and type(value) in (tuple, list):
            return type(value)(kept(v, depth + 1) for v in value)
        if type(value) is dict:
            return {k: kept(v, depth + 1) for k, v in value.items()}
        return value

    return kept(result, 0)


def _storages(values: Iterable[object], torch: Any, depth: int = 0) -> Iterator[int]:
    """The addresses of the memory the tensors among ``values`` (and in their tuples, lists
    and dicts, NESTING deep) view; none of a tensor without one of its own (sparse, empty)."""
    for value in values:
        if isinstance(value, torch.Tensor):
            with contextlib.suppress(Exception):  # sparse, nested and meta tensors have none
                address = value.untyped_storage().data_ptr()
                if address:
                    yield address
        elif depth >= NESTING:
            continue
        elif isinstance(value, tuple | list) and type(value) in (tuple, list):
            yield from _storages(value, torch, depth + 1)
        elif isinstance(value, dict) and type(value) is dict:
            yield from _storages(value.values(), torch, depth + 1)


def peak_bytes(kind: str, workload: Workload) -> int | None:
    """The bytes one call of ``workload`` holds at its peak, above what was held before it:
    the caching allocator's exact count (its peak statistic reset, one synchronized call; its
    result counts while the call holds it). None on a CPU, which keeps no such count (and
    runs no call for it)."""
    if kind != "cuda":
        return None
    import torch

    call = workload.prepare()
    torch.cuda.synchronize()
    # The bytes asked for, not the blocks handed out: a cached block up to 1 MiB larger than
    # a request is handed out whole, so blocks would depend on what ran before.
    stats = torch.cuda.memory_stats()
    counter = (
        "requested_bytes.all" if "requested_bytes.all.current" in stats else "allocated_bytes.all"
    )
    before = stats.get(f"{counter}.current", 0)
    torch.cuda.reset_peak_memory_stats()
    result = call()
    torch.cuda.synchronize()
    peak = torch.cuda.memory_stats().get(f"{counter}.peak", 0) - before
    del result
    return max(0, int(peak))


def call_dtype(values: Iterable[object]) -> str:
    """The dtype of a call's first floating-point tensor argument (``float32`` when it has
    none: a rate is still the device's). Looks only where torch is already imported."""
    torch = sys.modules.get("torch")
    if torch is not None:
        for value in values:
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return str(value.dtype).removeprefix("torch.")
    return "float32"


def inputs_of(workload: Workload) -> tuple[str, ...]:
    """What a call is given, as the work it sets: a tensor's shape and dtype, a number's or
    a string's value, another object's type (one level into a list or tuple), arguments
    then keywords; a call with ``setup`` takes its inputs from it, so is not described."""
    if workload.setup is not None:
        return ()
    torch = sys.modules.get("torch")

    def one(value: object) -> str:
        if torch is not None and isinstance(value, torch.Tensor):
            return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
        if isinstance(value, bool | int | float | str | None):
            return repr(value)[:40]
        if isinstance(value, list | tuple) and len(value) <= 16:
            items = (type(v).__name__ if isinstance(v, list | tuple) else one(v) for v in value)
            return f"[{', '.join(items)}]"
        return type(value).__name__

    return (
        *(one(a) for a in workload.args),
        *(f"{k}={one(v)}" for k, v in sorted(workload.kwargs.items())),
    )


# The largest pad placed before each input set up anew (placed_anew).
PAD_MAX_BYTES = 4 << 20


@contextlib.contextmanager
def placed_anew(
    workloads: Sequence[Workload], draw: random.Random
) -> Iterator[tuple[list[Workload], int]]:
    """``workloads`` with each device tensor they are given or their functions' closures
    hold (one level into a list, tuple or dict) copied to new memory behind a pad of a
    random size, held meanwhile: the inputs where another set-up of the test might have put
    them. A copy keeps the tensor's strides and storage offset (a view stays a view of a
    buffer as large as its base's), ``requires_grad``, and its aliases (one tensor given
    twice is one copy); a tensor whose elements overlap (``expand``) or that an autograd
    graph computed stays as it is, as does a call with ``setup``, and a tensor the device
    has no memory left to copy. Also how many tensors were copied (0: the calls take none,
    or by ``setup``, or memory ran out)."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield list(workloads), 0
        return
    pads: list[object] = []
    copies: dict[int, object] = {}  # by the id of the tensor copied
    no_memory = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError

    def copied(value: Any) -> Any:
        if id(value) in copies:
            return copies[id(value)]
        base = _base_of(value)
        size = draw.randrange(PAD_MAX_BYTES)
        try:
            pad = torch.empty(size, dtype=torch.uint8, device=value.device)
            with torch.no_grad():
                buffer = torch.empty_like(base, memory_format=torch.preserve_format).copy_(base)
        except no_memory:  # a big test's inputs: timed again where they are
            copies[id(value)] = value
            return value
        pads.append(pad)
        buffer.requires_grad_(base.requires_grad)  # a view of it then needs grad as before
        copy = (
            buffer
            if base is value
            else buffer.as_strided(value.size(), value.stride(), value.storage_offset())
        )
        copies[id(value)] = copy
        return copy

    def anew(value: object, depth: int = 0) -> object:
        if _copyable(torch, value):
            return copied(value)
        if depth == 0 and _opened(value):
            if isinstance(value, dict):
                return {k: anew(v, 1) for k, v in value.items()}
            assert isinstance(value, list | tuple)
            return type(value)(anew(v, 1) for v in value)
        return value

    placed = [
        w
        if w.setup is not None
        else dataclasses.replace(
            w,
            args=tuple(anew(a) for a in w.args),
            kwargs={k: anew(v) for k, v in w.kwargs.items()},
        )
        for w in workloads
    ]
    # What a closure holds (def step(): return kernel(x, out)) moves too, its cells pointed
    # at the copies meanwhile and back after: such a call's time depends on where its
    # buffers lie as much as a call given them.
    held: dict[int, tuple[Any, object]] = {}  # by the cell's id: its value before
    try:
        for cell in (c for w in workloads for c in _cells(w) if id(c) not in held):
            was = cell.cell_contents
            now = anew(was)
            if now is not was and not _same_items(was, now):
                held[id(cell)] = (cell, was)
                cell.cell_contents = now
        yield placed, sum(id(copy) != key for key, copy in copies.items())
    finally:
        for cell, was in held.values():
            cell.cell_contents = was
        pads.clear()
        copies.clear()


def _same_items(was: object, now: object) -> bool:
    """Whether ``now``, a container placed_anew made anew of ``was``, holds the same items."""
    if isinstance(was, dict) and isinstance(now, dict):
        return all(now[k] is v for k, v in was.items())
    if isinstance(was, list | tuple) and isinstance(now, list | tuple):
        return all(a is b for a, b in zip(was, now, strict=True))
    return False


def _cells(workload: Workload) -> list[Any]:
    """The closure cells that hold a value of ``workload``'s function and of the functions
    it wraps (``functools.wraps``' ``__wrapped__``: a decorator's, or lockstep's side
    wrapper, versus/lockstep.py); none for a call with ``setup``, which makes its inputs
    itself."""
    if workload.setup is not None:
        return []
    fns = [workload.fn]
    while hasattr(fns[-1], "__wrapped__") and len(fns) < 16:  # a cycle stops at 16
        fns.append(fns[-1].__wrapped__)
    return [c for fn in fns for c in getattr(fn, "__closure__", None) or () if _filled(c)]


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def placeable(workload: Workload) -> bool:
    """Whether :func:`placed_anew` can move any of ``workload``'s inputs: it is given a
    tensor that placed_anew copies, where placed_anew looks (its closure's cells too), and
    no ``setup``; nor does its closure hold device tensors placed_anew leaves where they
    are (an ``nn.Module``'s weights, an object's fields), nor is it given or does it hold a
    tensor of an autograd graph (``lambda: loss.backward(retain_graph=True)``): its sides
    would keep them."""
    torch = sys.modules.get("torch")
    if torch is None or workload.setup is not None:
        return False
    held = _items([cell.cell_contents for cell in _cells(workload)])
    if any(_holds_device_tensors(torch, v) for v in held):
        return False
    given = _items([*workload.args, *workload.kwargs.values()]) + held
    if any(_in_graph(torch, v) for v in given):
        return False
    return any(_copyable(torch, v) for v in given)


def _items(values: list[object]) -> list[object]:
    """``values`` and the items of those placed_anew looks into (one level)."""
    opened: list[Any] = [v for v in values if _opened(v)]
    return values + [i for v in opened for i in (v.values() if isinstance(v, dict) else v)]


def _holds_device_tensors(torch: Any, value: object) -> bool:
    """Whether ``value``, which placed_anew does not copy or open, holds device tensors: an
    ``nn.Module``'s parameters and buffers, or an object's own fields (not a function's,
    a class's or a module's, whose globals placed_anew never moves either way)."""
    if isinstance(value, torch.nn.Module):
        held = [*value.parameters(), *value.buffers()]
        return any(t.device.type != "cpu" for t in held)
    if isinstance(value, types.FunctionType | types.ModuleType | type) or _opened(value):
        return False
    fields = getattr(value, "__dict__", None)
    return isinstance(fields, dict) and any(_copyable(torch, v) for v in fields.values())


def _opened(value: object) -> bool:
    """Whether placed_anew looks into ``value`` (one level only): a plain list, tuple or dict
    of at most 16 items; a namedtuple's fields are its own, left as they are."""
    return type(value) in (list, tuple, dict) and len(value) <= 16  # type: ignore[arg-type]


def _copyable(torch: Any, value: object) -> bool:
    """Whether placed_anew copies ``value``: a device tensor whose elements do not overlap
    (an ``expand``: no copy says the same) and whose base is on its device."""
    if not isinstance(value, torch.Tensor) or value.device.type == "cpu":
        return False
    if value.layout is not torch.strided or value.is_nested:  # sparse, nested: no strides
        return False
    if _in_graph(torch, value):  # a copy would be a leaf: its backward another call's
        return False
    base = _base_of(value)
    return not (0 in value.stride() and value.numel() > 1) and base.device == value.device


def _base_of(tensor: Any) -> Any:
    """The tensor ``tensor`` is a view of, or itself."""
    return tensor._base if tensor._base is not None else tensor


def _in_graph(torch: Any, value: object) -> bool:
    """Whether ``value`` is a device tensor an autograd graph computed (or a view of one):
    its graph, saved tensors and all, stays where it is, as a module's weights do."""
    if not isinstance(value, torch.Tensor) or value.device.type == "cpu":
        return False
    return _base_of(value).grad_fn is not None


def matmul_workload(kind: str, dtype: str) -> tuple[Workload, float] | None:
    """A square matmul of ``dtype`` and its flops (None: no matmul of that dtype is measured).
    On a GPU float32 runs on the tensor cores (TF32, torch.backends' switch on while it is
    timed: tensor_cores), the fastest a float32 kernel may legitimately go."""
    if dtype not in MATMUL_DTYPES:
        return None
    if kind == "cuda":
        import torch

        n = MATMUL_SIZE // 4 if dtype == "float64" else MATMUL_SIZE
        a = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
        return Workload(torch.matmul, (a, a)), 2.0 * n**3
    import numpy as np

    n = CPU_MATMUL_SIZE
    # numpy has no bfloat16, and a CPU's float16 matmul is no faster than its float32 one
    precision = np.float64 if dtype == "float64" else np.float32
    b = np.random.default_rng(0).random((n, n), dtype=precision)
    return Workload(np.matmul, (b, b)), 2.0 * n**3


@contextlib.contextmanager
def tensor_cores(kind: str) -> Iterator[None]:
    """float32 matmuls on TF32 tensor cores while the yardstick is timed (a float32 kernel
    may use them), torch's own setting restored after."""
    if kind != "cuda":
        yield
        return
    import torch

    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def trace(kind: str, call: Callable[[], object], path: Path) -> None:
    """Write a ``torch.profiler`` trace of one synchronized call of ``call`` to ``path``
    (Chrome/Perfetto JSON: the host's operators, and the device's kernels on a GPU)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if kind == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sync = synchronizer(kind)
    sync()
    with warnings.catch_warnings():  # the profiler's notices: errors under -W error
        warnings.simplefilter("ignore")
        with profile(activities=activities) as profiler:
            call()
            sync()
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(str(path))
    # torch logs a trace it could not write and returns: a report must not name it.
    if not path.is_file():
        Path(f"{path}.tmp").unlink(missing_ok=True)  # (its half-written trace)
        raise OSError(f"the profiler could not write {path}")


def in_range(kind: str, call: Callable[[], object], name: str) -> None:
    """One synchronized call of ``call`` inside the NVTX range ``name`` (on a GPU): what
    Nsight Compute profiles under --gpubench-ncu (run.ncu filters on the range)."""
    sync = synchronizer(kind)
    sync()
    if kind != "cuda":
        call()
        return
    import torch

    torch.cuda.nvtx.range_push(name)
    try:
        call()
        sync()
    finally:
        torch.cuda.nvtx.range_pop()


def copy_workload(kind: str, nbytes: int = PEAK_COPY_BYTES) -> tuple[Workload, int]:
    """A copy of ``nbytes`` (by default a buffer far beyond any cache), and the bytes it moves
    (read + written)."""
    if kind == "cuda":
        import torch

        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_()
        return Workload(torch.empty_like(src).copy_, (src,)), 2 * nbytes
    import numpy as np

    if nbytes == PEAK_COPY_BYTES:
        nbytes //= 4  # a CPU copy of 256 MiB would cost seconds
    data = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    return Workload(np.copyto, (np.empty_like(data), data)), 2 * nbytes
