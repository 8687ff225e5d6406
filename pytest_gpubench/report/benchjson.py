"""Results in pytest-benchmark's JSON format, for the trackers that read it.

github-action-benchmark, Bencher and ``pytest-benchmark compare`` read ``benchmarks[]`` with
``fullname`` and ``stats`` (seconds), and top-level ``machine_info`` and ``commit_info``.
Every field of ``stats`` is pytest-benchmark's statistic of ``stats.data`` (``ops`` is
rounds / total, 1 / mean, as it documents); ``data`` are the samples of the session that
timed the test. A run confirmed in fresh processes is timed by the median of its sessions'
medians, which is not a statistic of ``data``: it rides in ``extra_info.gpubench.median_s``
with our verdict, the timer and the kernels of a call.
"""

from __future__ import annotations

import bisect
import datetime
import math
import os
import platform
import statistics
import struct
from collections.abc import Sequence

from ..core.device import Fingerprint
from ..core.jsondata import Json
from ..core.records import Result, is_ratio
from ..core.version import __version__
from .summary import against_json, sort_results


def quartiles(data: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 of sorted ``data`` as pytest-benchmark computes them (Wikipedia's methods 2
    and 3), so trackers comparing our files with theirs see the same statistics."""
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2 == 0:  # method 2: medians of the halves
        return statistics.median(data[: n // 2]), statistics.median(data[n // 2 :])
    k, r = n // 4, n % 4  # method 3
    if r == 1:
        return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
    return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]


def stats(samples_ms: Sequence[float]) -> dict[str, Json]:
    """pytest-benchmark's statistics of samples (ms in, seconds out, its definitions and the
    order of its Stats.fields), every one of them of the ``data`` it writes beside them."""
    data = sorted(s / 1e3 for s in samples_ms)
    n = len(data)
    q1, q3 = quartiles(data)
    iqr = q3 - q1
    mean = statistics.fmean(data)
    stddev = statistics.stdev(data) if n > 1 else 0.0
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_outliers = sum(1 for x in data if x < low or x > high)
    stddev_outliers = sum(1 for x in data if x < mean - stddev or x > mean + stddev)
    above = bisect.bisect_right(data, high)
    total = math.fsum(data)
    return {
        "min": data[0],
        "max": data[-1],
        "mean": mean,
        "stddev": stddev,
        "rounds": n,
        "median": statistics.median(data),
        "iqr": iqr,
        "q1": q1,
        "q3": q3,
        "iqr_outliers": iqr_outliers,
        "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}",
        "ld15iqr": data[0] if n == 1 else data[bisect.bisect_left(data, low)],
        "hd15iqr": data[-1] if n == 1 or above == n else data[above],
        "ops": n / total if total > 0 else 0.0,  # pytest-benchmark's: rounds / total
        "total": total,
        "data": data,
    }


def entry(result: Result) -> dict[str, Json]:
    m, v = result.measurement, result.verdict
    judgement = v.judgement
    values = stats(m.samples_ms)
    values["iterations"] = m.calls_per_sample
    extra = dict(m.extra_info)
    extra["gpubench"] = {
        "verdict": v.status.value,
        "change": None if judgement is None else judgement.change,
        "gateable": None if judgement is None else judgement.gateable,
        "timer": m.timer,
        # The run's time (the median of its sessions' medians): what the verdict judged.
        "median_s": m.median_ms / 1e3,
        "sessions": len(m.sessions),
        "baseline_sessions": v.history_sessions,
        "gpu": m.context.gpu,
        "kernels": [k.to_dict() for k in m.kernels],
        "kernel_changes": list(v.kernel_changes),
        "binary": m.binary,
        "baseline_binary": v.baseline_binary,
        "previous_change": None if v.previous_ratio is None else v.previous_ratio - 1,
        "gbs": m.gbs,
        "peak_share": m.peak_share,
    }
    paired = against_json(result, sessions=False)
    if paired is not None:
        # pytest-benchmark's schema has one side per benchmark: the stats are the head's (the
        # working tree's), the revision's median, the change and the verdict ride here.
        extra["gpubench"]["against"] = paired
    test = m.test.partition("#")[0]  # a named measurement: the test's own parameters
    param = test.partition("[")[2].removesuffix("]") or None
    return {
        "group": m.group,
        "name": m.test,
        "fullname": m.key,
        "params": None,
        "param": param,
        "extra_info": extra,
        "options": {"timer": m.timer, "threshold": m.threshold},
        "stats": values,
    }


# py-cpuinfo's names of the architectures that platform.machine() spells otherwise.
CPU_ARCHES = {
    **dict.fromkeys(("x86_64", "amd64"), "X86_64"),
    **dict.fromkeys(("i386", "i486", "i586", "i686", "x86"), "X86_32"),
    **dict.fromkeys(("aarch64", "arm64"), "ARM_8"),
    "armv7l": "ARM_7",
    **dict.fromkeys(("ppc64", "ppc64le"), "PPC_64"),
    "s390x": "S390X",
    "riscv64": "RISCV_64",
}


def cpu_info(proc_cpuinfo: str = "/proc/cpuinfo") -> dict[str, Json]:
    """The host's CPU in py-cpuinfo's keys, as pytest-benchmark writes it, from what the
    standard library gives (py-cpuinfo is no dependency of ours): brand, vendor,
    architecture, bits and count; a key it cannot learn is left out."""
    fields: dict[str, str] = {}
    try:
        with open(proc_cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, sep, value = line.partition(":")
                if sep and name.strip():
                    fields.setdefault(name.strip(), value.strip())  # the first CPU's
    except OSError:
        pass  # not Linux: platform.processor() is what there is
    machine = platform.machine()
    info: dict[str, Json] = {
        "brand_raw": fields.get("model name") or platform.processor(),
        "vendor_id_raw": fields.get("vendor_id"),
        "arch_string_raw": machine,
        "arch": CPU_ARCHES.get(machine.lower()),
        "bits": struct.calcsize("P") * 8,
        "count": os.cpu_count(),
    }
    return {key: value for key, value in info.items() if value}


def document(
    results: Sequence[Result],
    fingerprint: Fingerprint,
    commit: str | None,
    project: str,
    node: str = "",
) -> dict[str, Json]:
    """``node``: machine_info's host, the name only where the user asked for it (its files
    may be kept or published: ``--gpubench-record-host``)."""
    uname = platform.uname()
    machine_info = {
        "node": node,
        "processor": uname.processor,
        "machine": uname.machine,
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": uname.release,
        "system": uname.system,
        "cpu": cpu_info(),
        "gpu": dict(fingerprint),
    }
    commit_info = {
        "id": commit,
        "time": None,
        "author_time": None,
        "dirty": None,
        "project": project,
        "branch": None,
    }
    return {
        "machine_info": machine_info,
        "commit_info": commit_info,
        # A ratio to a reference is no time: its seconds would be false (our JSON holds it).
        "benchmarks": [
            entry(r) for r in sort_results(results) if not is_ratio(r.measurement.timer)
        ],
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": f"pytest-gpubench {__version__}",
    }
