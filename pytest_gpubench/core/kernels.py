"""What one call launches: the kernels behind a number, and how two such lists differ.

Built from the GPU events of a profiler trace (CUPTI through ``torch.profiler``): each kernel's
name, launch configuration, resources and share of the call's device time; copies and memsets
too. Pure: no torch here, so recording, storing and diffing are tested on recorded lists.

What one call launches identifies the binary that ran: compiled and autotuned code may choose
another grid, block or register count on another machine, and its time is then another
binary's (``fingerprint``, ``same_binary``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .codec import absent, empty, encode, spec
from .jsondata import Json

# Trace event categories that are device work of the call.
GPU_CATEGORIES = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
# Kernel names (C++ templates can be kilobytes) are cut to this for display and storage.
NAME_CHARS = 160
# At most this many changes are spelled out in a message; the rest are counted.
MAX_CHANGES = 4


# A grid or block: x, y, z.
Dims = tuple[int, int, int]
# What each field of Launch.config is called in a message.
CONFIG_LABELS = ("grid", "block", "registers", "shared memory")


@dataclass(frozen=True)
class Launch:
    """One distinct launch of a call: how many times it ran and what it looked like."""

    name: str  # cut to NAME_CHARS for storage
    kind: str = "kernel"  # kernel, memcpy or memset
    # Of the full name: two template instances may share a long prefix.
    digest: str = field(default="", metadata=spec(omit=empty))
    count: int = 1
    grid: tuple[int, int, int] | None = field(default=None, metadata=spec(omit=absent))
    block: tuple[int, int, int] | None = field(default=None, metadata=spec(omit=absent))
    registers: int | None = field(default=None, metadata=spec(omit=absent))  # per thread
    # Bytes per block.
    shared_memory: int | None = field(default=None, metadata=spec(omit=absent))
    # Share of the call's summed device time.
    share: float = field(default=0.0, metadata=spec(form=lambda share: round(share, 4)))

    @property
    def config(self) -> tuple[Dims | None, Dims | None, int | None, int | None]:
        return (self.grid, self.block, self.registers, self.shared_memory)

    @property
    def identity(self) -> str:
        return f"{self.kind}:{self.digest or self.name}"

    def to_dict(self) -> dict[str, Json]:
        return encode(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Json]) -> Launch:
        """Inverse of ``to_dict``; raises ValueError on a malformed entry."""
        if not isinstance(data, Mapping) or not isinstance(data.get("name"), str):
            raise ValueError("it has no name")
        count = _int(data.get("count", 1), "count")
        share = data.get("share", 0.0)
        if count < 1:
            raise ValueError(f"its count {count} is not a count of launches")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
            raise ValueError(f"its share {share!r:.40} is not a fraction of the time")
        return cls(
            name=data["name"],
            kind=str(data.get("kind", "kernel")),
            digest=str(data.get("digest", "")),
            count=count,
            grid=_dims(data.get("grid")),
            block=_dims(data.get("block")),
            registers=_opt_int(data.get("registers"), "registers"),
            shared_memory=_opt_int(data.get("shared_memory"), "shared_memory"),
            share=float(share),
        )


def from_trace(events: Iterable[Mapping[str, Json]], calls: int = 1) -> tuple[Launch, ...]:
    """The launches of one call from the chrome-trace events of ``calls`` profiled calls.

    Launches with the same name and configuration are merged; counts are per call (rounded
    up, so work that ran in only some calls still shows)."""
    found: dict[tuple[Json, ...], list[float]] = {}
    meta: dict[tuple[Json, ...], Launch] = {}
    for event in events:
        kind = GPU_CATEGORIES.get(str(event.get("cat")))
        if kind is None:
            continue
        args = event.get("args") or {}
        full = str(event.get("name", "?"))
        launch = Launch(
            name=full[:NAME_CHARS],
            kind=kind,
            digest=name_digest(full),
            grid=_dims(args.get("grid")),
            block=_dims(args.get("block")),
            registers=_opt_int(args.get("registers per thread"), "registers"),
            shared_memory=_opt_int(args.get("shared memory"), "shared memory"),
        )
        key = (launch.identity, *launch.config)
        meta.setdefault(key, launch)
        found.setdefault(key, []).append(float(event.get("dur") or 0.0))
    total = sum(sum(d) for d in found.values()) or 1.0
    launches = [
        replace(meta[key], count=-(-len(durations) // calls), share=sum(durations) / total)
        for key, durations in found.items()
    ]
    return tuple(sorted(launches, key=lambda x: (-x.share, x.name)))


def name_digest(name: str) -> str:
    """A short stable digest of a kernel's full name (empty for names kept whole)."""
    if len(name) <= NAME_CHARS:
        return ""
    return hashlib.blake2b(name.encode("utf-8", "replace"), digest_size=6).hexdigest()


def names(launches: Sequence[Launch]) -> Counter[str]:
    """The multiset of what ran (kind and full name, with counts): the identity of the work."""
    counts: Counter[str] = Counter()
    for launch in launches:
        counts[launch.identity] += launch.count
    return counts


def launch_count(launches: Sequence[Launch]) -> int:
    """Launches (kernels, copies, memsets) of one call; 1 when nothing was recorded."""
    if not launches:
        return 1  # most tests of a file of 10^5: no generator to start
    return max(1, sum(launch.count for launch in launches))


def same_work(old: Sequence[Launch], new: Sequence[Launch]) -> bool:
    """Whether two calls ran the same kernels the same number of times (configs may differ)."""
    return names(old) == names(new)


# The fields of a launch that make a binary: its time share is measured, not compiled.
Signature = tuple[int, Dims | None, Dims | None, int | None, int | None]


def fingerprint(launches: Sequence[Launch]) -> str:
    """A short stable hash of the binary behind a call: each launch's kind and name, count,
    grid, block, registers and shared memory (not its share of the time); '' when nothing
    was recorded."""
    if not launches:
        return ""
    canonical = sorted(
        json.dumps([identity, *signature])
        for identity, signatures in _signatures(launches)
        for signature in signatures
    )
    text = "\n".join(canonical).encode("utf-8", "replace")
    return hashlib.blake2b(text, digest_size=4).hexdigest()


def same_binary(old: Sequence[Launch], new: Sequence[Launch]) -> bool:
    """Whether two calls ran the same binary: the same launches, each as many times, with the
    same grid, block, registers and shared memory. A field one side did not record (a
    profiler that did not report it) matches any value."""
    if fingerprint(old) == fingerprint(new):
        return True
    a, b = dict(_signatures(old)), dict(_signatures(new))
    if a.keys() != b.keys():
        return False
    for key, first in a.items():
        second = b[key]
        if len(first) != len(second):
            return False
        for x, y in zip(first, second, strict=True):
            if not all(u is None or v is None or u == v for u, v in zip(x, y, strict=True)):
                return False
    return True


def binary_changes(old: Sequence[Launch], new: Sequence[Launch]) -> list[str]:
    """What makes ``new`` another binary than ``old``, in a few readable changes (``diff``),
    or one line when only a second configuration of a kernel changed (``diff`` names the
    main one)."""
    changes = diff(old, new)
    if changes or same_binary(old, new):
        return changes
    return [f"launch configurations {fingerprint(old)} -> {fingerprint(new)}"]


def describe_configs(launches: Sequence[Launch], limit: int = 3) -> str:
    """The configuration of the main launches, one clause each:
    ``softmax grid (64,1,1) block (128,1,1) 16 registers 0 B shared``."""
    parts = []
    for launch in launches[:limit]:
        words = [short(launch.name, 40)]
        if launch.count != 1:
            words.append(f"{launch.count}x")
        for label, value in (("grid", launch.grid), ("block", launch.block)):
            if value is not None:
                words.append(f"{label} {_fmt(value)}")
        if launch.registers is not None:
            words.append(f"{launch.registers} registers")
        if launch.shared_memory is not None:
            words.append(f"{launch.shared_memory} B shared")
        parts.append(" ".join(words))
    more = f"; {len(launches) - limit} more" if len(launches) > limit else ""
    return "; ".join(parts) + more


def _signatures(launches: Sequence[Launch]) -> list[tuple[str, list[Signature]]]:
    """Per launch identity, the sorted signatures (count and configuration) of its launches."""
    found: dict[str, list[Signature]] = {}
    for launch in launches:
        found.setdefault(launch.identity, []).append((launch.count, *launch.config))
    return [(key, sorted(found[key], key=repr)) for key in sorted(found)]


def replay_problem(
    eager: Sequence[Launch], once: Sequence[Launch], many: Sequence[Launch] = (), calls: int = 1
) -> str:
    """Why a CUDA graph does not stand for eager calls, or '' when it does.

    ``eager``: what one eager call launches; ``once``: what a replay of a one-call graph
    launched; ``many``: what a replay of a ``calls``-call graph launched. The one-call replay
    must run every launch of the eager call; the n-call replay exactly n times each, plus at
    most the launches the one-call replay added once (the RNG offset bookkeeping of a graph
    that uses dropout, say). Work launched outside the capturing stream (the legacy default
    stream of ``kernel<<<grid, block>>>``) runs during capture and is missing from both."""
    per_call, replayed = names(eager), names(once)
    if per_call - replayed:
        return (
            f"a graph replay runs {describe(once)}, an eager call {describe(eager)}: work "
            "launched outside the capturing stream (the legacy default stream of "
            "kernel<<<grid, block>>>, or another thread) is not in the graph"
        )
    if calls < 2:
        return ""
    repeated, extra = names(many), replayed - per_call
    wrong = [k for k in per_call if repeated[k] != calls * per_call[k]] + [
        k for k in repeated if k not in per_call and repeated[k] > extra[k]
    ]
    if wrong:
        name = {x.identity: x.name for x in (*eager, *once, *many)}
        differ = ", ".join(short(name[k]) for k in sorted(wrong)[:3])
        return (
            f"a replay of {calls} calls does not run {calls} times the eager call's work "
            f"(it differs in {differ}): the function does not repeat its work"
        )
    return ""


def diff(old: Sequence[Launch], new: Sequence[Launch]) -> list[str]:
    """Human-readable changes from ``old`` to ``new``; empty when they are the same.

    E.g. ``triton_per_fused_softmax_0 grid (64,1,1) -> (32,1,1)``, ``1 kernel added: k2``."""
    changes: list[str] = []
    old_by, new_by = _by_name(old), _by_name(new)
    for key in sorted(old_by.keys() & new_by.keys()):
        a, b = old_by[key], new_by[key]
        name = a.name
        if a.count != b.count:
            changes.append(f"{short(name)} runs {a.count}x -> {b.count}x")
        for label, x, y in zip(CONFIG_LABELS, a.config, b.config, strict=True):
            if x != y and x is not None and y is not None:
                changes.append(f"{short(name)} {label} {_fmt(x)} -> {_fmt(y)}")
    for label, names_ in (
        ("added", sorted(new_by[k].name for k in new_by.keys() - old_by.keys())),
        ("removed", sorted(old_by[k].name for k in old_by.keys() - new_by.keys())),
    ):
        if names_:
            noun = "kernel" if len(names_) == 1 else "kernels"
            changes.append(
                f"{len(names_)} {noun} {label}: {', '.join(short(n) for n in names_[:3])}"
                + (", ..." if len(names_) > 3 else "")
            )
    if len(changes) > MAX_CHANGES:
        changes = changes[:MAX_CHANGES] + [f"{len(changes) - MAX_CHANGES} more changes"]
    return changes


def describe(launches: Sequence[Launch]) -> str:
    """One line: ``2 kernels (k 71%, softmax_warp_forward 29%)``."""
    kernels = sum(launch.count for launch in launches)
    if not kernels:
        return "no device work"
    parts = ", ".join(f"{short(x.name, 40)} {x.share:.0%}" for x in launches[:3])
    more = ", ..." if len(launches) > 3 else ""
    return f"{kernels} launch{'es' if kernels != 1 else ''} ({parts}{more})"


def base_name(kernel: str) -> str:
    """A kernel's function name without its return type, namespaces, template arguments and
    parameters: ncu and the profiler's trace spell the rest differently
    (``void at::native::k<4, ...>(int)`` and ``void k<4, ...>(int)``)."""
    name = kernel.removeprefix("void ").split("<")[0].split("(")[0]
    return name.rsplit("::", 1)[-1].strip()


def short(name: str, limit: int = 60) -> str:
    """A kernel's readable name: return type, namespaces, template and call arguments dropped
    (``void at::native::reduce_kernel<512, 1, ...>(...)`` -> ``reduce_kernel``)."""
    text = name.replace("(anonymous namespace)::", "").removeprefix("void ")
    depth, out = 0, []
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                break
            out.append(ch)
    result = "".join(out).strip().rsplit("::", 1)[-1] or text
    return result if len(result) <= limit else result[: limit - 3] + "..."


def _by_name(launches: Sequence[Launch], shares: bool = False) -> dict[str, Launch]:
    """One launch per kernel (the longest-running configuration kept), counts summed, and
    with ``shares`` their shares of the device time too."""
    merged: dict[str, Launch] = {}
    for launch in launches:
        key = launch.identity
        kept = merged.get(key)
        if kept is None:
            merged[key] = launch
            continue
        main = kept if kept.share >= launch.share else launch
        share = kept.share + launch.share if shares else main.share
        merged[key] = replace(main, count=kept.count + launch.count, share=share)
    return merged


def _fmt(value: Json) -> str:
    return "(" + ",".join(str(v) for v in value) + ")" if isinstance(value, tuple) else str(value)


def _dims(value: Json) -> tuple[int, int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError(f"expected three dimensions, got {value!r}")
    x, y, z = (_int(v, "dimension") for v in value)
    return (x, y, z)


def _int(value: Json, what: str) -> int:
    # Not finite (1e999 in a file reads as infinity): int() would raise OverflowError.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ValueError(f"{what} must be a whole number, got {value!r}")
    return int(value)


def _opt_int(value: Json, what: str) -> int | None:
    return None if value is None else _int(value, what)


@dataclass(frozen=True)
class KernelDelta:
    """One kernel (copy, memset) of two calls: launches per call and time per call on each
    side (0 where it did not run there), and its configuration on each (``_config_text``)."""

    name: str
    count: tuple[int, int]
    ms: tuple[float, float]
    config: tuple[str, str]

    @property
    def change_ms(self) -> float:
        return self.ms[1] - self.ms[0]


def kernel_deltas(
    old: Sequence[Launch], old_ms: float, new: Sequence[Launch], new_ms: float
) -> list[KernelDelta]:
    """Per kernel, what two calls spent on it: its share of each call's device time times
    that call's time per call (``old_ms``, ``new_ms``), the largest change first. Empty when
    either side's launches are not recorded."""
    if not old or not new:
        return []
    sides = [_by_name(old, shares=True), _by_name(new, shares=True)]
    deltas = []
    for key in sorted(sides[0].keys() | sides[1].keys()):
        a, b = (side.get(key) for side in sides)
        name = (a or b or Launch("")).name
        deltas.append(
            KernelDelta(
                name,
                (a.count if a else 0, b.count if b else 0),
                (a.share * old_ms if a else 0.0, b.share * new_ms if b else 0.0),
                (_config_text(a), _config_text(b)),
            )
        )
    return sorted(deltas, key=lambda d: (-abs(d.change_ms), d.name))


def _config_text(launch: Launch | None) -> str:
    """``grid (64,1,1) block (128,1,1) 32 regs``; '-' where it did not run."""
    if launch is None:
        return "-"
    parts = [
        f"{label} {_fmt(value)}"
        for label, value in (("grid", launch.grid), ("block", launch.block))
        if value is not None
    ]
    if launch.registers is not None:
        parts.append(f"{launch.registers} regs")
    if launch.shared_memory:
        parts.append(f"{launch.shared_memory} B smem")
    return " ".join(parts) or launch.kind
