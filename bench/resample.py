"""What the verdict does on real GPU sessions: resampling the recorded ones.

    python bench/resample.py --json bench/results/resample.json   # about two minutes

prints the tables of docs/verdict.md ("On recorded sessions"); tests/judge/test_resample.py runs
the same code, fewer runs, in CI and asserts the bounds of issue 16.

Data: bench/results/sessions.json (bench/sessions_data.py), the sessions of unchanged code
recorded on H200s and H100s: per GPU and suite whose tests share 16 sessions or more (the
example suite on two H200s and two H100s, the user suite on two H200s), 16-27 sessions of
each test, each a fresh process running the whole suite. Sessions are never simulated:
every number judged is a recorded session median (times a slowdown where power is
measured).

One replicate run of a suite on one machine:

- the *current* session is one recorded session, the same for all tests of the run (a
  session's disturbance hits many of its tests at once: that correlation is kept);
- the *history* is up to K other sessions of the machine, distinct, the same for all tests:
  as many as the machine holds beside the run's, so fewer than K where it has too few (9-20
  of 20 on the example suite's GPUs; the tables say how many). A real history never holds
  one session twice; until 2026-12-04 the resampling repeated sessions to K, and the rule
  counted each repeat as a session of evidence (issue 45);
- a flagged test's *confirmations* are the sessions recorded right after that first session
  when there are (real fresh processes, seconds later), then sessions outside the history,
  never its own (issue 45: confirming with the history's sessions hid every test whose
  sessions fall in two groups): RESERVE of the machine's sessions are kept out of every
  history, distinct confirmations drawn from them;
- with gross outliers, any session (history, current, confirmation) is, with 1% chance,
  multiplied or divided by a factor uniform in [1.3, 3].

A 54-test run is the example suite on one of its four GPUs in turn; a 500-test run joins
independent replicates of the example (54 tests) and user (13 tests) suites on all six
until 500 tests, judged as one family. Power: every current and confirmation
session of a test slowed by the same factor.

Held out: the machines whose tests share 10-15 sessions (an H100's example suite with its 42
ratios, 10 sessions; another H100's user suite, 11) are replayed whole (``held_out``): every
session as the current one, every set of 5 others as its history, confirmations drawn from
the sessions outside both.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "results" / "sessions.json"
sys.path.insert(0, str(ROOT))

from pytest_gpubench.core.records import Versus, is_ratio  # noqa: E402
from pytest_gpubench.judge import rule  # noqa: E402

SEED = 20261124
ALPHA = 0.01
MIN_SESSIONS = 16
# Machines whose tests share fewer sessions are held out of the resampling; from this many,
# they are replayed whole (held_out).
HELD_OUT_SESSIONS = 10
OUTLIER_RATE = 0.01
OUTLIER_RANGE = (1.3, 3.0)
# Sessions of a machine kept outside every history, to draw confirmations from: as many as
# the default cap, so that a flagged test's confirmations are distinct sessions (drawn with
# replacement from 4, a run's 7 sessions held 4 values and failed 3.4% of unchanged 20-session
# runs at 5%). A history is the machine's other sessions less these, up to Config.k.
RESERVE = 6


@dataclass
class Machine:
    """One GPU's recorded sessions of one suite: ``x[test, session]`` log medians (time
    order), the confirmations recorded after a session, and the tests' priors."""

    name: str
    suite: str
    keys: list[str]
    x: np.ndarray
    confirms: dict[tuple[int, int], list[float]]
    priors: list[rule.Prior]
    duration_us: np.ndarray  # per launch where the timer times launch gaps
    gpu_name: str = ""


def load(path: Path = DATA, held_out: bool = False) -> list[Machine]:
    """The machines whose tests share MIN_SESSIONS sessions or more (with ``held_out``: the
    others whose tests share HELD_OUT_SESSIONS or more, which the resampling never saw)."""
    return machines_of(json.loads(path.read_text()), held_out)


def machines_of(data: dict, held_out: bool = False) -> list[Machine]:
    """:func:`load`'s machines of ``data`` (sessions.json's shape; bench/fit_prior.py's
    sessions_of gives a baseline file's the same)."""
    machines = []
    for gpu, m in sorted(data["machines"].items()):
        by_suite: dict[str, list[tuple[str, dict]]] = {}
        for key, t in m["tests"].items():
            by_suite.setdefault(key.split("::", 1)[0], []).append((key, t))
        for suite, tests in sorted(by_suite.items()):
            firsts = [
                [s for s in t["sessions"] if s["role"] in ("first", "history")] for _, t in tests
            ]
            ids = sorted({s["id"] for f in firsts for s in f})
            enough = len(ids) >= MIN_SESSIONS
            if held_out:
                enough = HELD_OUT_SESSIONS <= len(ids) < MIN_SESSIONS
            if not enough or any(len(f) != len(ids) for f in firsts):
                continue
            order = {sid: i for i, sid in enumerate(ids)}
            x = np.full((len(tests), len(ids)), np.nan)
            confirms: dict[tuple[int, int], list[float]] = {}
            priors, durations = [], []
            key_of = [k for k, _ in tests]
            for i, ((_, t), f) in enumerate(zip(tests, firsts, strict=True)):
                for s in f:
                    x[i, order[s["id"]]] = math.log(s["median_ms"])
                for s in t["sessions"]:
                    if s["role"] == "confirm" and s.get("parent") in order:
                        confirms.setdefault((i, order[s["parent"]]), []).append(
                            math.log(s["median_ms"])
                        )
                median_ms = math.exp(float(np.median(x[i])))
                launches = t["launches"] or 1
                versus = _versus(m["tests"], key_of[i], median_ms) if is_ratio(t["timer"]) else None
                priors.append(rule.prior_for(median_ms, t["timer"], launches, versus))
                per = launches if t["timer"] in rule.PER_LAUNCH_TIMERS else 1
                durations.append(median_ms * 1000 / per)
            machines.append(
                Machine(
                    gpu,
                    suite,
                    [k for k, _ in tests],
                    x,
                    confirms,
                    priors,
                    np.array(durations),
                    m.get("gpu_name") or "",
                )
            )
    return machines


def _versus(tests: dict, key: str, ratio: float) -> Versus:
    """What a ratio series compares: its function's median time and launches (the series of
    the key without its suffix), the reference's time by the ratio."""
    fn = tests[key.split("#", 1)[0]]
    fn_ms = math.exp(float(np.median([math.log(s["median_ms"]) for s in fn["sessions"]])))
    launches = fn["launches"] or 1
    return Versus(fn_ms, fn_ms / ratio, launches, max(1, tests[key]["launches"] - launches))


@dataclass(frozen=True)
class Config:
    k: int = 20  # history sessions, at most (the machine's distinct ones beside a run's)
    tests: int = 54  # 54: the example suite on one machine; more: joined replicates
    outliers: bool = False
    slowdown: float = 0.0
    threshold: float = 0.05
    cap: int = 6
    # Spare sessions for confirmations drawn each once before any again (False: with
    # replacement from the start). Neither is a fresh process's draw: distinct spares cannot
    # all fall in one group where they hold both, repeats fall there too often; their false
    # failures bound the rate from below and above (docs/verdict.md, "Held out").
    distinct: bool = True


@dataclass
class Outcome:
    runs: int
    failed_runs: int  # runs with any test failing (regressed)
    flagged: np.ndarray  # per row: regressed
    not_gated: np.ndarray  # per row
    gateable: np.ndarray  # per row: the smallest slowdown the test says it catches
    duration_us: np.ndarray  # per row
    confirmations: float  # fresh-process sessions per run

    @property
    def false_rate(self) -> float:
        return self.failed_runs / self.runs


def _outliers(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    hit = rng.random(shape) < OUTLIER_RATE
    size = np.log(rng.uniform(*OUTLIER_RANGE, shape)) * rng.choice([-1.0, 1.0], shape)
    return np.where(hit, size, 0.0)


def _pieces(machines: list[Machine], config: Config) -> list[Machine]:
    """The machines one run joins: one example machine for 54 tests (where none is the
    example's, the machines given: one run joins one); else a mix to 500."""
    example = [m for m in machines if m.suite == "example"]
    return example if config.tests <= 54 and example else machines


def _draw(rng: np.random.Generator, sessions: int, c: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(history, spare) for current session ``c`` of ``sessions``: up to ``k`` distinct other
    sessions for the history and at least RESERVE sessions kept outside it, from which
    confirmations are drawn."""
    others = np.delete(np.arange(sessions), c)
    keep = max(RESERVE, len(others) - k)
    spare = rng.choice(others, min(keep, len(others) - 1), replace=False)
    rest = np.setdiff1d(others, spare)
    return rng.choice(rest, min(k, len(rest)), replace=False), spare


def _plan(
    machines: list[Machine], config: Config, runs: int, rng: np.random.Generator
) -> list[list[tuple[Machine, int, np.ndarray, np.ndarray]]]:
    """Per run, the pieces it joins: (machine, current session, history, spare sessions)."""
    pool = _pieces(machines, config)
    plan = []
    for r in range(runs):
        pieces, total = [], 0
        while total < config.tests:
            m = pool[rng.integers(len(pool))] if config.tests > 54 else pool[r % len(pool)]
            c = int(rng.integers(m.x.shape[1]))
            pieces.append((m, c, *_draw(rng, m.x.shape[1], c, config.k)))
            total += m.x.shape[0]
        plan.append(pieces)
    return plan


def held_out(machine: Machine, config: Config, seed: int = SEED) -> Outcome:
    """Every run of ``machine``'s whole suite: each session as the current one, each set of
    ``config.k`` other sessions as its history (without replacement), confirmations drawn
    from the sessions outside both (each once before any again, where fewer than the cap:
    drawn with replacement from 4, a run of 7 held 2-3 distinct sessions and failed tests
    whose sessions fall in two groups in up to 18% of its runs;
    bench/results/two-groups-2026-12-05.md)."""
    sessions = machine.x.shape[1]
    plan = []
    for c in range(sessions):
        others = [j for j in range(sessions) if j != c]
        for h in itertools.combinations(others, config.k):
            spare = np.setdiff1d(others, h)
            plan.append([(machine, c, np.array(h), spare)])
    cfg = dataclasses.replace(config, tests=machine.x.shape[0])
    return simulate([machine], cfg, len(plan), seed, plan)


def simulate(
    machines: list[Machine],
    config: Config,
    runs: int,
    seed: int = SEED,
    plan: list[list[tuple[Machine, int, np.ndarray, np.ndarray]]] | None = None,
) -> Outcome:
    """``runs`` replicate runs (their pieces drawn, or given as ``plan``), each judged as one
    family of ``config.tests`` tests, flagged tests confirmed in sequential looks."""
    rng = np.random.default_rng(
        [
            seed,
            config.k,
            config.tests,
            int(config.outliers),
            round(config.slowdown * 1e4),
            round(config.threshold * 1e4),
            config.cap,
        ]
    )
    if plan is None:
        plan = _plan(machines, config, runs, rng)
    hist_rows, cur_rows, extra_rows, prior_list, dur_list, run_of = [], [], [], [], [], []
    design = rule.Design(cap=config.cap)
    n_cap = 1 + config.cap
    shift = math.log1p(config.slowdown)
    for r, pieces in enumerate(plan):
        total = 0
        for m, c, h, spare in pieces:
            take = min(m.x.shape[0], config.tests - total)
            for i in range(take):
                # Confirmations: those recorded after the session, then sessions outside the
                # history, never the history's own (issue 45: confirming with the history's
                # sessions hid every test whose sessions fall in two groups).
                extra = list(m.confirms.get((i, c), []))[: config.cap]
                need = config.cap - len(extra)
                first = min(need, len(spare)) if config.distinct else 0
                draws = rng.choice(spare, first, replace=False)
                if len(draws) < need:  # each spare session once before any is drawn again
                    draws = np.concatenate([draws, rng.choice(spare, need - len(draws))])
                extra += [m.x[i, j] for j in draws]
                hist_rows.append(np.pad(m.x[i, h], (0, config.k - len(h)), constant_values=np.nan))
                cur_rows.append(m.x[i, c])
                extra_rows.append(extra)
                prior_list.append(m.priors[i])
                dur_list.append(m.duration_us[i])
                run_of.append(r)
            total += take
    runs = len(plan)
    hist = np.array(hist_rows)
    cur = np.array(cur_rows)
    extra = np.array(extra_rows).reshape(len(cur), config.cap)
    if config.outliers:
        hist = hist + _outliers(rng, hist.shape)
        cur = cur + _outliers(rng, cur.shape)
        extra = extra + _outliers(rng, extra.shape)
    current = np.full((len(cur), n_cap), np.nan)
    current[:, 0] = cur + shift
    priors = rule.PriorArrays.of(prior_list)
    alpha1 = rule.corrected_alpha(ALPHA, config.tests, False)
    rows = np.arange(len(cur))
    n = np.ones(len(cur), dtype=int)
    direction = np.zeros(len(cur), dtype=int)
    gated = np.zeros(len(cur), dtype=bool)
    gateable = np.full(len(cur), np.nan)
    confirmations = 0
    while len(rows):
        dec = rule.decide(
            hist[rows],
            current[rows],
            np.zeros(current[rows].shape),
            priors.take(rows),
            threshold=config.threshold,
            alpha1=alpha1,
            design=design,
        )
        direction[rows] = dec.direction
        gated[rows] = dec.gated
        first = np.isnan(gateable[rows])
        gateable[rows[first]] = dec.gateable[first]
        more = dec.more
        rows = rows[more]
        if not len(rows):
            break
        add = np.array([design.next_batch(k) for k in n[rows]])
        for j in range(int(add.max())):
            take = rows[add > j]
            col = n[take] + j
            current[take, col] = extra[take, col - 1] + shift
        confirmations += int(add.sum())
        n[rows] += add
    run_of_a = np.array(run_of)
    failed = np.zeros(runs, dtype=bool)
    np.logical_or.at(failed, run_of_a, direction == 1)
    return Outcome(
        runs=runs,
        failed_runs=int(failed.sum()),
        flagged=direction == 1,
        not_gated=~gated,
        gateable=gateable,
        duration_us=np.array(dur_list),
        confirmations=confirmations / runs,
    )


CLASSES_US = ((0, 3), (3, 20), (20, 100), (100, math.inf))


def by_class(outcome: Outcome, values: np.ndarray) -> list[tuple[str, float, int]]:
    out = []
    for lo, hi in CLASSES_US:
        sel = (outcome.duration_us >= lo) & (outcome.duration_us < hi)
        if sel.any():
            label = f"{lo}-{hi} us" if hi != math.inf else f">= {lo} us"
            out.append((label, float(values[sel].mean()), int(sel.sum())))
    return out


def history_label(machines: list[Machine], config: Config) -> str:
    """The history's sessions as the tables say them: the range the machines of the run hold
    beside a run's, up to ``k``."""
    sizes = {min(config.k, m.x.shape[1] - 1 - RESERVE) for m in _pieces(machines, config)}
    low, high = min(sizes), max(sizes)
    return f"{low}-{high}" if low < high else f"{high}"


def false_table(machines: list[Machine], runs: int) -> list[dict]:
    rows = []
    for threshold in (0.05, 0.02):
        for k in (5, 20):
            for tests in (54, 500):
                for outliers in (False, True):
                    cfg = Config(k, tests, outliers, threshold=threshold)
                    o = simulate(machines, cfg, runs if tests == 54 else max(runs // 5, 100))
                    rows.append(
                        {
                            "threshold": threshold,
                            "k": k,
                            "history": history_label(machines, cfg),
                            "tests": tests,
                            "outliers": outliers,
                            "runs": o.runs,
                            "false_runs": o.failed_runs,
                            "false_rate": o.false_rate,
                            "confirmations": o.confirmations,
                            "not_gated": float(o.not_gated.mean()),
                        }
                    )
    return rows


def power_table(machines: list[Machine], runs: int) -> list[dict]:
    rows = []
    for threshold, slowdowns in ((0.05, (0.05, 0.07, 0.10)), (0.02, (0.02, 0.03))):
        for k in (5, 20):
            for s in slowdowns:
                cfg = Config(k=k, slowdown=s, threshold=threshold)
                o = simulate(machines, cfg, runs)
                for label, rate, count in by_class(o, o.flagged.astype(float)):
                    rows.append(
                        {
                            "threshold": threshold,
                            "k": k,
                            "history": history_label(machines, cfg),
                            "slowdown": s,
                            "class": label,
                            "power": rate,
                            "rows": count,
                        }
                    )
    return rows


def false_lines(rows: list[dict]) -> list[str]:
    lines = [
        "| threshold | history | tests | 1% gross outliers | runs | runs with a false "
        "failure | fresh sessions per run | not gated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['threshold']:.0%} | {r['history']} | {r['tests']} | "
            f"{'yes' if r['outliers'] else 'no'} | {r['runs']} | {r['false_runs']} "
            f"({r['false_rate']:.2%}) | {r['confirmations']:.2f} | {r['not_gated']:.0%} |"
        )
    return lines


def power_lines(rows: list[dict]) -> list[str]:
    lines = ["| threshold | history | slowdown | duration | caught |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['threshold']:.0%} | {r['history']} | +{r['slowdown']:.0%} | {r['class']} | "
            f"{r['power']:.1%} |"
        )
    return lines


def held_out_table(machines: list[Machine], k: int = 5) -> list[dict]:
    rows = []
    for m in machines:
        for threshold in (0.05, 0.02):
            o = held_out(m, Config(k=k, threshold=threshold))
            keys = np.array(m.keys * o.runs)
            rows.append(
                {
                    "gpu": m.gpu_name,
                    "suite": m.suite,
                    "tests": m.x.shape[0],
                    "sessions": m.x.shape[1],
                    "k": k,
                    "threshold": threshold,
                    "runs": o.runs,
                    "false_runs": o.failed_runs,
                    "failing_tests": sorted(set(keys[o.flagged].tolist())),
                    "confirmations": o.confirmations,
                }
            )
    return rows


def held_out_lines(rows: list[dict]) -> list[str]:
    lines = [
        "| GPU | suite | tests | sessions | history | threshold | runs | runs with a false "
        "failure | tests that failed | fresh sessions per run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        names = ", ".join(t.split("::")[-1] for t in r["failing_tests"]) or "-"
        lines.append(
            f"| {r['gpu'].removeprefix('NVIDIA ')} | {r['suite']} | {r['tests']} | "
            f"{r['sessions']} | {r['k']} | {r['threshold']:.0%} | {r['runs']} | "
            f"{r['false_runs']} ({r['false_runs'] / r['runs']:.2%}) | {names} | "
            f"{r['confirmations']:.2f} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--json", type=Path, help="also write the tables' data here")
    args = parser.parse_args()
    machines = load()
    false = false_table(machines, args.runs)
    power = power_table(machines, max(args.runs // 4, 100))
    held = held_out_table(load(held_out=True))
    tables = (false_lines(false), power_lines(power), held_out_lines(held))
    print("\n\n".join("\n".join(t) for t in tables))
    if args.json:
        data = {"runs": args.runs, "false": false, "power": power, "held_out": held}
        args.json.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
