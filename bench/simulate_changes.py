"""Seeded simulation of the change-point detection (pytest_gpubench/judge/changes.py).

One command, under a minute on one CPU core:

    python bench/simulate_changes.py            # --quick: a smoke run

prints the Markdown tables of docs/verdict.md ("Change points and creep") and writes
bench/results/changes-simulation.json (seeded: the same file every run).

Model of a test's session medians (log scale), from what the recorded GPU sessions show
(issue 16): a tight floor, sd ``floor``, plus one-sided slow excursions, a share ``rate`` of
the sessions slower by U(``low``, ``high``). Two orders in time:

- ``iid``: sessions independent (exchangeable: the permutation null is exact);
- ``bursts``: sessions close in time correlated: the floor an AR(1) with correlation 0.5,
  the excursions a two-state Markov chain that stays slow with probability 0.5 (same rate,
  bursts of 2 on average).

Tables: false flags of stationary histories (20 sessions: a saved history; 21: a history with
the current run's session; 10), and how many sessions a creep of ``c`` per session, or a +10%
step, starting after a stationary history of 20, takes to be flagged in the saved history
(its last 20 sessions). Flags need ``min_change`` = 2.5% (half the default threshold of 5%).

And the recorded GPU sessions of unchanged code (bench/results/sessions.json, made by
bench/sessions_data.py): per test and machine, its sessions that ran the whole suite
(``first`` and ``history``) in time order; every history they make (the last 20 sessions, or
fewer, at least MIN_SESSIONS, ending at each session in turn) is judged, and any flag is
false.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pytest_gpubench.judge import changes  # noqa: E402

SEED = 20261124
HISTORY = 20
MIN_CHANGE = changes.min_change_for(0.05)
MODELS = ("iid", "bursts")
RHO = 0.5  # the floor's correlation between consecutive sessions (bursts)
STAY = 0.5  # chance that a slow excursion goes on into the next session (bursts)
WITHIN = 0.0005  # the within-session error of a median (log scale)


@dataclass(frozen=True)
class Kind:
    name: str
    floor: float  # sd of the floor (log scale)
    rate: float  # share of sessions in a slow excursion
    low: float  # excursion size, fraction, uniform between low and high
    high: float


KINDS = (
    # A 33.6 us kernel: 17 of 20 sessions within +-0.2%, three at +2.0/+2.6/+3.8%.
    Kind("quiet (0.2% floor, 15% at +2-4%)", 0.002, 0.15, 0.02, 0.04),
    # 5-17 us kernels: cross-process CV 0.4-0.7% (docs/method.md).
    Kind("5-17 us (0.6% floor, 15% at +2-5%)", 0.006, 0.15, 0.02, 0.05),
    # A 1 us add: 4 of 20 at +15.7 to +24.2%; 1-5 us kernels' floor 2-5%.
    Kind("short (2% floor, 20% at +15-25%)", 0.02, 0.20, 0.15, 0.25),
    Kind("short (5% floor, 20% at +15-25%)", 0.05, 0.20, 0.15, 0.25),
)
# What a power scenario adds per session after the stationary history, as a fraction.
CREEPS = (
    ("quiet (0.2% floor, 15% at +2-4%)", 0.005),
    ("quiet (0.2% floor, 15% at +2-4%)", 0.01),
    ("5-17 us (0.6% floor, 15% at +2-5%)", 0.005),
    ("5-17 us (0.6% floor, 15% at +2-5%)", 0.01),
    ("short (2% floor, 20% at +15-25%)", 0.01),
    ("short (5% floor, 20% at +15-25%)", 0.01),
)
STEP = 0.10
SESSIONS = ROOT / "bench/results/sessions.json"
AFTER = 20  # sessions simulated after the stationary history


def sessions(rng: np.random.Generator, kind: Kind, model: str, n: int, k: int) -> np.ndarray:
    """``n`` stationary histories of ``k`` log session medians (time along axis 1)."""
    floor = rng.standard_normal((n, k))
    slow = rng.random((n, k)) < kind.rate
    if model == "bursts":
        for i in range(1, k):  # AR(1) with the same stationary sd
            floor[:, i] = RHO * floor[:, i - 1] + math.sqrt(1 - RHO**2) * floor[:, i]
        enter = kind.rate * (1 - STAY) / (1 - kind.rate)  # keeps the stationary rate
        u = rng.random((n, k))
        for i in range(1, k):
            slow[:, i] = np.where(slow[:, i - 1], u[:, i] < STAY, u[:, i] < enter)
    size = np.log1p(rng.uniform(kind.low, kind.high, (n, k)))
    return np.asarray(
        kind.floor * floor + np.where(slow, size, 0.0) + WITHIN * rng.standard_normal((n, k))
    )


def flags(x: np.ndarray, min_change: float = MIN_CHANGE) -> list[str]:
    """The flag of each row ("" for none): screened by the p-values, then decided by
    changes.detect itself (a flag needs a p-value at most ALPHA)."""
    p_step, p_trend = changes.p_values(x)
    out = [""] * len(x)
    for i in np.flatnonzero((p_step <= changes.ALPHA) | (p_trend <= changes.ALPHA)):
        found = changes.detect(x[i], min_change=min_change).flag
        out[i] = "" if found is None else found.value
    return out


def false_flags(rng: np.random.Generator, n: int) -> list[dict[str, object]]:
    rows = []
    for kind in KINDS:
        for model in MODELS:
            for k in (HISTORY, HISTORY + 1, 10):
                found = flags(sessions(rng, kind, model, n, k))
                rows.append(
                    {
                        "kind": kind.name,
                        "model": model,
                        "sessions": k,
                        "histories": n,
                        "creep": found.count("creep") / n,
                        "step": found.count("step") / n,
                        "any": sum(map(bool, found)) / n,
                    }
                )
    return rows


def first_flags(history: np.ndarray) -> np.ndarray:
    """Per lifetime (a stationary history, then AFTER changed sessions), the number of
    changed sessions after which the saved history (its last HISTORY) is first flagged; 0:
    never within AFTER."""
    n = len(history)
    first = np.zeros(n, dtype=int)
    for j in range(1, AFTER + 1):
        window = history[:, j : j + HISTORY]
        todo = np.flatnonzero(first == 0)
        found = flags(window[todo])
        first[todo[[bool(f) for f in found]]] = j
    return first


def summary(first: np.ndarray, change_at: list[float], label: str) -> dict[str, object]:
    """How soon: shares flagged before the change reaches 5% and within AFTER sessions, the
    median number of sessions and the change then."""
    caught = first[first > 0]
    creep = change_at[0] < 0.05  # a step is at its full size from its first session
    before = sum(1 for j in caught if change_at[j - 1] < 0.05) / len(first) if creep else None
    median = float(np.median(np.where(first > 0, first, AFTER + 1)))
    at = None if median > AFTER else change_at[int(math.ceil(median)) - 1]
    return {
        "scenario": label,
        "lifetimes": len(first),
        "before_5pct": before,
        "within": len(caught) / len(first),
        "median_sessions": None if median > AFTER else median,
        "change_at_median": at,
    }


def power(rng: np.random.Generator, n: int) -> list[dict[str, object]]:
    by_name = {kind.name: kind for kind in KINDS}
    rows = []
    for model in MODELS:
        for name, creep in CREEPS:
            kind = by_name[name]
            x = sessions(rng, kind, model, n, HISTORY + AFTER)
            j = np.arange(HISTORY + AFTER) - HISTORY + 1
            x = x + np.maximum(j, 0) * math.log1p(creep)
            change_at = [math.expm1(i * math.log1p(creep)) for i in range(1, AFTER + 1)]
            row = summary(first_flags(x), change_at, f"+{creep:.1%}/session, {name}")
            rows.append({"model": model, **row})
        for kind in KINDS:
            x = sessions(rng, kind, model, n, HISTORY + AFTER)
            x[:, HISTORY:] += math.log1p(STEP)
            row = summary(first_flags(x), [STEP] * AFTER, f"+{STEP:.0%} step, {kind.name}")
            rows.append({"model": model, **row})
    return rows


def recorded(path: Path) -> dict[str, object]:
    """Flags of the histories that the recorded sessions make (all false: unchanged code)."""
    data = json.loads(path.read_text())
    tests = histories = 0
    found = []
    for machine, info in sorted(data["machines"].items()):
        for test, entry in sorted(info["tests"].items()):
            runs = sorted(
                (s for s in entry["sessions"] if s.get("role") in ("first", "history")),
                key=lambda s: s["date"],
            )
            x = np.log([s["median_ms"] for s in runs])
            if len(x) < changes.MIN_SESSIONS:
                continue
            tests += 1
            for end in range(changes.MIN_SESSIONS, len(x) + 1):
                window = x[max(0, end - HISTORY) : end]
                histories += 1
                if flags(window[None, :])[0]:
                    reason = changes.detect(window, min_change=MIN_CHANGE).reason
                    found.append({"machine": machine, "test": test, "end": end, "reason": reason})
    return {
        "tests": tests,
        "histories": histories,
        "flagged": len(found),
        "flagged_tests": len({(f["machine"], f["test"]) for f in found}),
        "found": found,
    }


def pct(value: object) -> str:
    return "-" if value is None else f"{float(value) * 100:.2f}%"  # type: ignore[arg-type]


def markdown(result: dict[str, object]) -> str:
    lines = [
        "False flags of stationary histories (share of histories flagged):",
        "",
        "| kind | order | sessions | creep | step | any |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["false_flags"]:  # type: ignore[attr-defined]
        lines.append(
            f"| {r['kind']} | {r['model']} | {r['sessions']} | {pct(r['creep'])} | "
            f"{pct(r['step'])} | {pct(r['any'])} |"
        )
    lines += [
        "",
        "How soon a change after 20 stationary sessions is flagged in the saved history:",
        "",
        "| change | order | flagged before +5% | within 20 sessions | median sessions | "
        "change then |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["power"]:  # type: ignore[attr-defined]
        median = r["median_sessions"]
        lines.append(
            f"| {r['scenario']} | {r['model']} | {pct(r['before_5pct'])} | {pct(r['within'])} "
            f"| {'-' if median is None else f'{median:g}'} | {pct(r['change_at_median'])} |"
        )
    real = result.get("recorded")
    if isinstance(real, dict):
        lines += [
            "",
            f"Recorded sessions of unchanged code: {real['flagged']} of {real['histories']} "
            f"histories flagged ({real['flagged_tests']} of {real['tests']} tests)"
            + (":" if real["found"] else "."),
        ]
        lines += [
            f"- {f['test']} ({f['machine'][:12]}, sessions to {f['end']}): {f['reason']}"
            for f in real["found"]
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer histories (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/changes-simulation.json")
    opts = parser.parse_args()
    started = time.perf_counter()
    n_null, n_power = (20_000, 200) if opts.quick else (200_000, 2_000)
    rng = np.random.default_rng(SEED)
    result: dict[str, object] = {
        "seed": SEED,
        "alpha": changes.ALPHA,
        "min_change": MIN_CHANGE,
        "min_sessions": changes.MIN_SESSIONS,
        "permutations": changes.PERMUTATIONS,
        "kinds": [asdict(kind) for kind in KINDS],
        "false_flags": false_flags(rng, n_null),
        "power": power(rng, n_power),
    }
    if SESSIONS.exists():
        result["recorded"] = recorded(SESSIONS)
    print(markdown(result))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if not opts.quick:
        opts.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"wrote {opts.out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
