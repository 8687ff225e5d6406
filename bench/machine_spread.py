"""How far another GPU of one model moves a test's time (issue 45), fitted to the recorded
sessions of tests timed with one binary on several GPUs, and the gate's allowance for it
(judge/machines.py) replayed on them.

Reads what bench/binary_spread.py reads (every committed run report and baseline file, the
runs that planted a change or ran beside a load left out), at the timer each test is timed by
now, the ``#vs-...`` ratios left out. A cell is one binary of a test on one GPU; cells of 3
sessions or more count.

Fit: per test and binary timed on ``k`` GPUs, the sum of squares ``SS`` of its cells' means
about their mean. The model of judge/machines.py (a GPU's offset normal with the test's own
variance, the variances a scaled inverse chi-square of ``nu0`` degrees of freedom and scale
``s0``) makes ``SS / (k - 1) / s0^2`` an F(k - 1, nu0); maximum likelihood per GPU model and
for all together (the prior judge/machines.MACHINE).

Groups: per test and binary on GROUP_GPUS GPUs or more, whether its GPUs fall in two groups
(the widest gap between its sorted GPU means beyond GROUP_GAP_MIN and beyond GROUP_GAP_SDS
times the spread of a session about its GPU's mean), and by maximum likelihood the chance
``pi`` that a test does and the rarer group's share ``f`` of GPUs, each test's chance of
showing a split with its ``k`` GPUs counted (no split shown: ``1 - pi + pi((1 - f)^k +
f^k)``); with the widest gap between two groups' means, the prior judge/machines.GROUPS.

Replay: a test set's history drawn from the sessions of ``h`` GPUs of a model (up to 20 in
all), a run from another GPU's sessions of the same binaries: its first session, then its
other sessions as the fresh processes that confirm a flagged test (never the history's: the
run's GPU is not in it). Each test judged as judge/gate.py judges it (judge/rule.decide on
arrays, the allowance of judge/machines.py applied as judge/offsets.py applies it, at the
default alpha, the family the run's tests) at a 5% threshold; every confirmation available
taken at once (the most looks a run could take). Prints per ``h``: the runs, those that
failed (an unchanged run), the median gate (``not gated`` beyond 50%), and, each test slowed
by 5%, how many of those whose gate is within 5% were caught (where the run's GPU has
sessions enough for every confirmation: a gate is what the most confirmations catch). Then
the same runs judged without the allowance (the rule before it).

    PYTHONPATH=. python bench/machine_spread.py
"""

from __future__ import annotations

import collections
import math
import random
import statistics
import sys
from functools import partial
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
import binary_spread as bs  # noqa: E402

from pytest_gpubench.core.records import SessionInfo, SessionRecord  # noqa: E402
from pytest_gpubench.judge import gate, machines, offsets, rule  # noqa: E402

THRESHOLD = 0.05
HISTORY = 20  # sessions a history holds at most
DRAWS = 80  # history draws per GPU model and count of history GPUs
MIN_TESTS = 8  # a run judges at least this many tests
GROUP_GPUS = 4  # GPUs a test needs to show two groups
GROUP_GAP_MIN = 0.02
GROUP_GAP_SDS = 4.0


def cells() -> dict[tuple[str, str], dict[str, dict[str, list[float]]]]:
    """(model, test) -> binary -> GPU -> log medians, at the timer timed by now."""
    sessions, _, _ = bs.gather()
    now = {(bs.MODELS.get(m, m), k): t for (m, k), t in bs.current_timer(sessions).items()}
    out: dict[tuple[str, str], dict[str, dict[str, list[float]]]] = collections.defaultdict(
        lambda: collections.defaultdict(dict)
    )
    for (model, key, timer), unit in bs.units(sessions).items():
        if now[(model, key)] != timer or "#" in key:
            continue
        for (binary, gpu), values in unit.items():
            out[(model, key)][binary][gpu] = values
    return out


def fit(data: list[tuple[float, int]]) -> tuple[float, float]:
    """(nu0, s0) of the F model by maximum likelihood."""

    def nll(p: np.ndarray) -> float:
        nu, s0 = math.exp(p[0]), math.exp(p[1])
        return -sum(
            stats.f.logpdf(ss / (k - 1) / s0**2, k - 1, nu) - math.log((k - 1) * s0**2)
            for ss, k in data
        )

    r = optimize.minimize(nll, [math.log(3), math.log(0.005)], method="Nelder-Mead")
    return float(math.exp(r.x[0])), float(math.exp(r.x[1]))


def groups(
    tests: dict[tuple[str, str], dict[str, dict[str, list[float]]]],
) -> tuple[list[tuple[str, str, int, int, float]], int, float, float]:
    """The tests that split: (model, test, GPUs, the rarer group's, the gap between the
    groups' means); of how many; and ``pi`` and ``f`` fitted (the module's docstring)."""
    found, shown = [], []
    for (model, key), binaries in sorted(tests.items()):
        for cell in binaries.values():
            runs = [v for v in cell.values() if len(v) >= bs.HISTORY_MIN]
            if len(runs) < GROUP_GPUS:
                continue
            means = sorted(statistics.fmean(v) for v in runs)
            ss = sum((x - statistics.fmean(v)) ** 2 for v in runs for x in v)
            within = math.sqrt(ss / sum(len(v) - 1 for v in runs))
            gap, i = max((means[i + 1] - means[i], i) for i in range(len(means) - 1))
            rarer = min(i + 1, len(means) - i - 1)
            if gap > max(GROUP_GAP_MIN, GROUP_GAP_SDS * within):
                high, low = means[i + 1 :], means[: i + 1]
                found.append(
                    (model, key, len(means), rarer, statistics.fmean(high) - statistics.fmean(low))
                )
                shown.append((len(means), rarer))
            else:
                shown.append((len(means), 0))

    def params(z: np.ndarray) -> tuple[float, float]:  # pi in (0, 1), f in (0, 1/2)
        return float(special.expit(z[0])), float(special.expit(z[1])) / 2

    def nll(z: np.ndarray) -> float:
        pi, f = params(z)
        total = 0.0
        for k, m in shown:
            if m == 0:
                p = 1 - pi + pi * ((1 - f) ** k + f**k)
            else:  # m GPUs of k in the rarer group; one term where the groups are alike
                both = f**m * (1 - f) ** (k - m) + (
                    f ** (k - m) * (1 - f) ** m if 2 * m != k else 0
                )
                p = pi * math.comb(k, m) * both
            total -= math.log(max(p, 1e-300))
        return total

    z = optimize.minimize(nll, np.array([-3.0, -1.0]), method="Nelder-Mead").x
    return found, len(shown), *params(z)


def replay(
    tests: dict[tuple[str, str], dict[str, dict[str, list[float]]]],
    gpus: int,
    allow: bool,
    groups: bool = True,
) -> tuple[int, int, list[float], int, int]:
    """(runs, failed runs, gates, tests gated within 5%, caught of them at +5%); without
    ``groups``, the allowance the t alone gives (before judge/machines.GROUPS)."""
    rng = random.Random(gpus)
    design = rule.Design()
    runs = failed = gated_n = caught = 0
    gates: list[float] = []
    for model in sorted({m for m, _ in tests}):
        # per GPU, the tests' (key, binary) it has a cell of (3 sessions or more)
        by_gpu: dict[str, dict[tuple[str, str], list[float]]] = collections.defaultdict(dict)
        for (m, key), binaries in tests.items():
            if m != model:
                continue
            for binary, cell in binaries.items():
                for gpu, values in cell.items():
                    if len(values) >= bs.HISTORY_MIN:
                        by_gpu[gpu][(key, binary)] = values
        names = sorted(by_gpu)
        for _ in range(DRAWS if len(names) > gpus else 0):
            drawn = rng.sample(names, gpus + 1)
            past, here = drawn[:gpus], drawn[gpus]
            common = [t for t in by_gpu[here] if all(t in by_gpu[g] for g in past)]
            if len(common) < MIN_TESTS:
                continue
            got = judged(common, past, here, by_gpu, design, allow, groups)
            runs += 1
            failed += bool(got[0])
            gates.extend(got[1])
            gated_n += got[2]
            caught += got[3]
    return runs, failed, gates, gated_n, caught


def judged(
    common: list[tuple[str, str]],
    past: list[str],
    here: str,
    by_gpu: dict[str, dict[tuple[str, str], list[float]]],
    design: rule.Design,
    allow: bool,
    groups: bool = True,
) -> tuple[int, list[float], int, int]:
    """One run's tests: (failed unchanged, gates, gated within 5%, caught at +5%)."""
    n = len(common)
    each = math.ceil(HISTORY / len(past))
    hist = np.full((n, HISTORY), np.nan)
    cur = np.full((n, 1 + design.cap), np.nan)
    priors, allowance, unlucky = [], np.zeros(n), np.zeros(n)
    share = rule.corrected_alpha(0.01, 2 * n, False) / design.looks
    for i, test in enumerate(common):
        logs, records, infos = [], [], {}
        for gpu in past:
            for j, v in enumerate(by_gpu[gpu][test][:each]):
                logs.append(v)
                records.append(SessionRecord(f"{gpu}-{j}", math.exp(v), 50, None))
                infos[f"{gpu}-{j}"] = SessionInfo("", None, gpu)
        logs = logs[:HISTORY]
        hist[i, : len(logs)] = logs
        run = by_gpu[here][test][: 1 + design.cap]
        cur[i, : len(run)] = run
        priors.append(rule.prior_for(math.exp(statistics.median(logs)), "cuda-graph"))
        spread = machines.machine_spread(records[:HISTORY], infos, here, "cuda-graph")
        if allow and spread is not None:
            at = spread.allowance if groups else partial(offsets.Spread.allowance, spread)
            allowance[i] = at(share)
            unlucky[i] = at(gate.MISSED)
    prior = rule.PriorArrays.of(priors)
    alpha1 = rule.corrected_alpha(0.01, 2 * n if allow else n, False)
    # Moved by the allowance, held to the threshold less it (judge/gate.Gate._judge).
    threshold = np.maximum(1e-6, np.expm1(np.log1p(THRESHOLD) - allowance))
    outcomes = []
    for shift in (0.0, math.log1p(THRESHOLD)):
        moved = cur + shift - allowance[:, None]
        first = rule.decide(
            hist, moved[:, :1], np.zeros((n, 1)), prior, threshold=threshold, alpha1=alpha1,
            design=design, side=1,
        )  # fmt: skip
        flagged = first.more | (first.direction != 0)
        last = rule.decide(
            hist, moved, np.zeros(moved.shape), prior, threshold=threshold, alpha1=alpha1,
            design=design, side=1,
        )  # fmt: skip
        regressed = np.where(flagged, last.direction == 1, first.direction == 1)
        widened = np.expm1(np.log1p(first.gateable) + allowance + unlucky)
        # Gated as judge/offsets.widened gates: an allowance and a widened gate within 50%.
        gated = first.gated & (allowance < math.log1p(rule.NOT_GATED_BEYOND))
        gated &= widened <= rule.NOT_GATED_BEYOND
        outcomes.append((regressed & gated, np.where(gated, widened, np.inf)))
    (unchanged, gates), (slowed, _) = outcomes
    # A gate is what the cap's sessions catch: counted where the run's GPU has as many.
    within = (gates <= THRESHOLD) & ~np.isnan(cur).any(axis=1)
    return int(unchanged.any()), list(gates), int(within.sum()), int((slowed & within).sum())


def shown_gate(gates: list[float]) -> str:
    """The median gate in a table's words."""
    median = statistics.median(gates) if gates else math.nan
    return f"{median:.1%}" if median <= rule.NOT_GATED_BEYOND else "not gated"


def main() -> None:
    tests = cells()
    data: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
    for (model, _), binaries in tests.items():
        for cell in binaries.values():
            means = [statistics.fmean(v) for v in cell.values() if len(v) >= bs.HISTORY_MIN]
            if len(means) >= 2:
                mean = statistics.fmean(means)
                ss = sum((x - mean) ** 2 for x in means)
                data[model].append((ss, len(means)))
                data["all"].append((ss, len(means)))
    print("## A GPU's offset: the F model fitted to tests timed on several GPUs\n")
    print("| GPU | tests | nu0 | s0 |")
    print("|---|---|---|---|")
    for model in sorted(data, key=lambda m: (m == "all", m)):
        nu0, s0 = fit(data[model])
        print(f"| {model} | {len(data[model])} | {nu0:.2f} | {s0 * 100:.3f}% |")
    print(f"\nthe gate's prior (judge/machines.MACHINE): nu0 {machines.MACHINE[0]}, ", end="")
    print(f"s0 {machines.MACHINE[1]:.3%}")
    found, units, pi, f = groups(tests)
    print("\n## Two groups: tests whose GPUs fall in two groups\n")
    print("| GPU | test | GPUs | in the rarer group | gap |")
    print("|---|---|---|---|---|")
    for model, key, k, rarer, gap in found:
        print(f"| {model} | {key} | {k} | {rarer} | {math.expm1(gap):.1%} |")
    widest = max((math.expm1(gap) for *_, gap in found), default=0.0)
    print(
        f"\nof {units} tests and binaries on {GROUP_GPUS} GPUs or more: pi {pi:.3f}, f {f:.3f}, ",
        end="",
    )
    print(f"widest gap {widest:.3f}")
    print(
        f"the gate's (judge/machines.GROUPS): pi {machines.GROUPS[0]}, f {machines.GROUPS[1]}, ",
        end="",
    )
    print(f"widest gap {machines.GROUPS[2]}")
    print("\n## Replay: a history of some GPUs, a run of another, at a 5% threshold\n")
    print("| history GPUs | runs | failed unchanged | median gate | gated within 5% | caught +5% |")
    print("|---|---|---|---|---|---|")
    for gpus in (1, 2, 3, 5):
        runs, failed, gates, gated, caught = replay(tests, gpus, allow=True)
        print(f"| {gpus} | {runs} | {failed} | {shown_gate(gates)} | {gated} | {caught} |")
    print("\nThe same runs with the t alone (before judge/machines.GROUPS):\n")
    print("| history GPUs | runs | failed unchanged | median gate | gated within 5% | caught +5% |")
    print("|---|---|---|---|---|---|")
    for gpus in (1, 2, 3, 5):
        runs, failed, gates, gated, caught = replay(tests, gpus, allow=True, groups=False)
        print(f"| {gpus} | {runs} | {failed} | {shown_gate(gates)} | {gated} | {caught} |")
    print("\nThe same runs without the allowance (the rule before judge/machines.py):\n")
    print("| history GPUs | runs | failed unchanged |")
    print("|---|---|---|")
    for gpus in (1, 2, 3, 5):
        runs, failed, *_ = replay(tests, gpus, allow=False)
        print(f"| {gpus} | {runs} | {failed} |")


if __name__ == "__main__":
    main()
