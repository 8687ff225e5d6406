"""Nsight Compute's basic metrics in a failure's evidence (--gpubench-ncu; docs/guide.md,
"The fixture"): a fresh process under ``ncu`` makes one warm call of each measurement of the
failing tests inside an NVTX range named after its key (``range_name``); ncu profiles only
the kernels inside those ranges, and the parent reads its report back as CSV (``ncu --import``).
Only on failure, and only where asked: ncu replays each kernel it profiles.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.errors import GpubenchError
from ..core.records import NCU_METRICS, RATIO_KEY, NcuEvidence, NcuKernel
from . import processes
from .children import ChildRun, Launcher

NCU = "ncu"
# Kernels profiled per test of a process at most (its measurements' calls together): a call
# of a long chain of launches is profiled in its first ones.
LAUNCHES = 64
# NVTX ranges of the calls ncu profiles: this prefix and the digest of the measurement's key.
RANGE_PREFIX = "gpubench-ncu"
# How long reading a report back may take.
READ_TIMEOUT_S = 120.0
SUFFIX = ".ncu-rep"


def found() -> str | None:
    """The ``ncu`` on PATH, or None."""
    return shutil.which(NCU)


def digest(key: str) -> str:
    # surrogatepass: a key may hold what no encoding writes (a lone surrogate in a test id)
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def stem(key: str) -> str:
    """A measurement's evidence files' name: readable, and unique (two keys may read alike
    once cut and cleaned)."""
    name = re.sub(r"[^\w.-]+", "_", key).strip("_")[:120]
    return f"{name}-{digest(key)}"


def range_name(key: str) -> str:
    """The NVTX range of one call of the measurement ``key`` (a ratio's: its function's)."""
    return f"{RANGE_PREFIX} {digest(key.removesuffix(RATIO_KEY))}"


def log_of(report: Path) -> Path:
    """Where ncu writes its own lines beside ``report``: a profile that failed (no permission
    to the counters) says why there, while the process it ran may end well."""
    return report.with_name(report.name.removesuffix(SUFFIX) + ".ncu.log")


def command(ncu: str, report: Path, tests: int = 1) -> tuple[str, ...]:
    """What a fresh process of ``tests`` tests runs under: ``ncu`` profiling the kernels
    inside our ranges (at most LAUNCHES per test) into ``report`` (ncu adds SUFFIX), its own
    lines into ``log_of(report)``."""
    return (
        ncu,
        "--nvtx",
        "--nvtx-include",
        f"regex:{RANGE_PREFIX}.*/",  # push/pop ranges of that name
        "--metrics",
        ",".join(name for name, _ in NCU_METRICS),
        "--launch-count",
        str(LAUNCHES * max(tests, 1)),
        "--export",
        str(report.with_name(report.name.removesuffix(SUFFIX))),
        "--force-overwrite",
        "--log-file",
        str(log_of(report)),
    )


def profile(
    launcher: Launcher,
    ncu: str,
    nodeids: Sequence[str],
    report: Path,
    device_index: int | None,
) -> tuple[dict[str, tuple[NcuKernel, ...]], str]:
    """Profile one call of each measurement of the tests ``nodeids`` in a fresh process under
    ``ncu``, into ``report``: the kernels by the digest of their measurement's key, and what
    went wrong ('' when nothing did)."""
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        for old in (report, log_of(report)):  # an earlier run's are not this one's
            old.unlink(missing_ok=True)
        wrapped = dataclasses.replace(launcher, wrapper=command(ncu, report, len(nodeids)))
        [run] = wrapped.profiling(nodeids, device_index)
    except (OSError, GpubenchError) as exc:
        return {}, f"no process under ncu: {exc}"
    return read(ncu, report, run)


def read(ncu: str, report: Path, run: ChildRun) -> tuple[dict[str, tuple[NcuKernel, ...]], str]:
    """The kernels of ``report`` by digest, and what went wrong where it has none: ncu's own
    errors, else the process's."""
    said = errors(log_of(report))
    if not report.exists():
        return {}, said or run.error or f"Nsight Compute wrote no report ({report})"
    try:
        proc = subprocess.run(
            [ncu, "--import", str(report), "--csv", "--page", "details"],
            capture_output=True,
            text=True,
            timeout=READ_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {}, f"cannot read {report} back: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
        how = processes.died(proc.returncode)
        return {}, f"cannot read {report} back: ncu {how}: {last[0][:200]}"
    kernels = parse(proc.stdout)
    return kernels, "" if kernels else said or run.error or "Nsight Compute profiled no kernel"


def errors(log: Path) -> str:
    """ncu's error lines in ``log``, in one line ('' where it has none or cannot be read)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    said = [line.removeprefix("==ERROR==").strip() for line in lines if "==ERROR==" in line]
    return "; ".join(said)[:300]


def parse(text: str) -> dict[str, tuple[NcuKernel, ...]]:
    """The kernels of ``ncu --import R --csv --page details`` (a row per metric of a kernel,
    after ncu's own lines), by the digest of their range's measurement key, in launch order.
    Rows of no range of ours, or whose value is no number, are left out."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {}
    rows = csv.DictReader(lines[start:])
    ranges = next((f for f in rows.fieldnames or () if "Push/Pop" in f), None)
    pattern = re.compile(re.escape(RANGE_PREFIX) + r" ([0-9a-f]{10})")
    # Per (measurement digest, ncu's launch ID): the kernel's name, block, grid, metrics.
    launches: dict[tuple[str, str], tuple[str, str, str, list[tuple[str, float, str]]]] = {}
    for row in rows:
        # A short row (a line of ncu's own after the table) has None for what it lacks.
        where = pattern.search((row.get(ranges) or "") if ranges else "")
        name, value = row.get("Kernel Name"), row.get("Metric Value") or ""
        if where is None or not name:
            continue
        block, grid = row.get("Block Size") or "", row.get("Grid Size") or ""
        launch = launches.setdefault((where.group(1), row.get("ID", "")), (name, block, grid, []))
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            continue
        launch[3].append((row.get("Metric Name") or "", number, row.get("Metric Unit") or ""))
    out: dict[str, list[NcuKernel]] = {}
    for (key, _), (name, block, grid, metrics) in launches.items():
        out.setdefault(key, []).append(NcuKernel(name, block, grid, tuple(metrics)))
    return {key: tuple(kernels) for key, kernels in out.items()}


def evidence(
    report: Path, kernels: Mapping[str, tuple[NcuKernel, ...]], key: str
) -> NcuEvidence | None:
    """The measurement ``key``'s share of a report, None where it profiled none of its
    kernels."""
    own = kernels.get(digest(key.removesuffix(RATIO_KEY)))
    return None if not own else NcuEvidence(str(report), own)
