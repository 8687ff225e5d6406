"""How much a test's time moves when its binary changes (issue 45, item 1), fitted to the
recorded sessions where binaries changed.

A binary is what one call launches (``core.kernels.fingerprint``): compiled code (Inductor)
and autotuned Triton kernels may launch another grid, block, register count or shared memory
on another machine or in another process. The verdict today calls such a measurement
``changed`` and does not judge its time (``judge.gate.another_binary``). To judge it, the
spread of the current-vs-history difference needs what differs between binaries.

Reads, all committed: every run report (``pytest --gpubench --gpubench-json``: a ``results``
list whose records carry ``binary``, ``kernels``, ``median_ms`` and the GPU's ``machine``) and
every baseline file (``benchmarks``: per measurement one history per binary, its sessions'
machines in ``sessions``) under bench/results/, loose or inside the ``.tgz`` archives, and the
suites' committed ``.gpubench/*.json``. Left out: runs that planted a change (slow, slowtime,
detect, cross, blocks, cached, fixed, temp, bisect), runs beside a load (busy, beside, multi,
loadfile), the evidence suite (its planted regrid), the ``#vs-reference`` ratios (they move
with their test's binary), and A/B reports, except that from A/A runs against HEAD the working
tree's session of each test is kept (role ``aa``), and every A/B result in lockstep whose two
sides ran different binaries in one process is a pick pair (below). A session is one process's
median of one test, counted once (keyed by its id).

Per test (GPU model, node id, the timer it is timed by now): a cell is one binary on one GPU
(``machine``); each binary's mean is the median of its GPUs' cell means; the reference binary
is the one with the most sessions (the stored history's, as a run meets it). On the log scale:

- within: sessions about their cell's mean (one binary on one GPU), pooled;
- machine: per GPU, from pairs of cells (3 sessions or more each) of one binary on two GPUs,
  their difference over sqrt 2 less its noise (what a history from another GPU of the model
  adds when the binary is the same);
- pick: each other binary's mean over the reference's, classed ``same work``
  (``core.kernels.same_work``: the same kernels as many times, only grid, block, registers or
  shared memory differ) or ``other kernels``, and by who picks: ``inductor`` (the example
  suite's torch.compile tests) or ``autotuner`` (Triton's: the user suite, the fla library);
- cross: every cell of 3 sessions or more taken as a history, against every other GPU's cell,
  of another binary (pick and machine offset both) or of the same one.

Pick pairs: an A/B run in lockstep times both sides in one process and each side autotunes for
itself; where they picked different binaries, the verdict's ratio is a pick effect with no
machine in it; beside them, the same test's lockstep results whose sides ran one binary.

Prints, as Markdown tables: the tests with more than one binary (each binary's GPUs, sessions,
offset from the reference, its GPUs' spread about its mean, what differs); each ``changed``
verdict of a plain run against a stored history beside the pick effect and the run's own
offset where the binary was the same (pick or machine?); the fla library's tests as a history
on one H200 and a run on another would read them; the lockstep pick pairs; the spreads per
GPU model and class (robust sd 1.4826 x median |d|, d's sign being arbitrary; root mean
square; the largest; the shares beyond 2% and 5%); and sigma_b per class with the machine's
part out and back in, with a Student t fitted to the picks (its degrees of freedom: the tail).

    PYTHONPATH=. python bench/binary_spread.py
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import re
import statistics
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import special, stats

from pytest_gpubench.core.baseline import MAX_BINARIES
from pytest_gpubench.core.kernels import Launch, binary_changes, fingerprint, same_work
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.judge import machines, picks, rule

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_summary import mismeasured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
COMMITTED = [ROOT / "example_suite" / ".gpubench", ROOT / "bench" / "user_suite" / ".gpubench"]
SUITES = {
    "test_add.py": "example",
    "test_gelu.py": "example",
    "test_softmax.py": "example",
    "test_square.py": "example",
    "test_user.py": "user",
    "test_fla.py": "fla",
    "test_liger.py": "library",
}
# Runs that planted a change, or ran beside a load: not unchanged code on a calm GPU.
LEFT_OUT = re.compile(
    r"slow|detect|cross|blocks|cached|fixed|temp|bisect|calibrat|busy|beside|multi|loadfile"
)
# Tests the A/B steps plant their changes in (bench/ab_checks.sh).
PLANTED_KEYS = re.compile(r"test_copy_blocks|test_spin_work")
ROBUST = 1.4826  # sd over median |d| of a normal centred at 0
HISTORY_MIN = 3  # sessions a cell needs to stand for a history in the cross comparison


@dataclass(frozen=True)
class Session:
    model: str
    suite: str
    key: str
    timer: str
    machine: str
    binary: str
    kernels: tuple[Launch, ...]
    log_ms: float
    date: str
    role: str  # first (a run's own session), history (a baseline's), aa (an A/A run's side)
    source: str


def documents() -> Iterator[tuple[str, Any]]:
    """(where, parsed JSON) of every JSON file under RESULTS and the suites' baselines."""
    paths = sorted(RESULTS.rglob("*")) + sorted(p for d in COMMITTED for p in d.glob("*.json"))
    for path in paths:
        rel = str(path.relative_to(ROOT))
        if path.suffix == ".json":
            yield rel, _parse(path.read_bytes())
        elif path.name.endswith(".tgz"):
            with tarfile.open(path) as tar:
                for member in sorted(tar.getmembers(), key=lambda m: m.name):
                    if member.isfile() and member.name.endswith(".json"):
                        if "trace" in member.name:  # profiler traces
                            continue
                        data = tar.extractfile(member)
                        assert data is not None
                        yield f"{rel}:{member.name}", _parse(data.read())


def _parse(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _launches(raw: list[dict[str, Any]] | None) -> tuple[Launch, ...]:
    return tuple(Launch.from_dict(k) for k in raw or ())


def _kept(key: str) -> str | None:
    """The suite of a measurement worth reading, or None."""
    if "#" in key:
        return None
    return SUITES.get(key.split("::")[0])


def gather() -> tuple[list[Session], list[dict[str, Any]], list[dict[str, Any]]]:
    """The sessions (deduplicated by session id and test), the lockstep pick pairs, and the
    plain runs that judged a history and found another binary."""
    found: dict[tuple[str, str], Session] = {}
    picks: dict[tuple[str, str], dict[str, Any]] = {}
    runs: dict[str, dict[str, Any]] = {}
    for source, doc in documents():
        if not isinstance(doc, dict):
            continue
        name = source.rsplit("/", 1)[-1]
        if "results" in doc:
            if doc.get("against"):
                _pairs(doc, source, name, picks)
                if LEFT_OUT.search(name) or "aa" not in name:
                    continue
                role = "aa"
            elif LEFT_OUT.search(name):
                continue
            else:
                role = "first"
                _against_history(doc, source, runs)
            for r in doc["results"]:
                suite = _kept(r.get("key", ""))
                if suite is None or r.get("median_ms") is None or not r.get("kernels"):
                    continue
                if mismeasured(source, r["key"]):
                    continue
                info = (r.get("session_infos") or {}).get(r["session"], {})
                kernels = _launches(r["kernels"])
                found.setdefault(
                    (r["session"], r["key"]),
                    Session(
                        doc["device"]["name"],
                        suite,
                        r["key"],
                        r["timer"],
                        info.get("machine") or r["gpu"].split()[-1],
                        fingerprint(kernels),
                        kernels,
                        math.log(r["median_ms"]),
                        r.get("date") or "",
                        role,
                        source,
                    ),
                )
        elif "benchmarks" in doc and not LEFT_OUT.search(name):
            machines = doc["sessions"]
            for key, entry in doc["benchmarks"].items():
                suite = _kept(key)
                if suite is None:
                    continue
                for binary in [entry, *entry.get("others", [])]:
                    kernels = _launches(binary.get("kernels"))
                    if not kernels:
                        continue
                    for rec in [*binary["anchor"], *binary["history"]]:
                        info = machines[rec["session"]]
                        found.setdefault(
                            (rec["session"], key),
                            Session(
                                doc["device"]["name"],
                                suite,
                                key,
                                entry["timer"],
                                info["machine"],
                                fingerprint(kernels),
                                kernels,
                                math.log(rec["median_ms"]),
                                info["date"],
                                "history",
                                source,
                            ),
                        )
    return list(found.values()), list(picks.values()), list(runs.values())


def _against_history(doc: dict[str, Any], source: str, runs: dict[str, dict[str, Any]]) -> None:
    """A plain run with ``changed`` verdicts: each one's ratio to the previous binary's
    history, and the run's offset from its histories where the binary was the same (the
    median over those tests of its median over the history's reference)."""
    results = [r for r in doc["results"] if _kept(r.get("key", "")) is not None]
    changed = [r for r in results if r.get("status") == "changed" and r.get("previous_ratio")]
    if not changed:
        return
    same = [
        math.log(r["median_ms"] / r["reference_ms"])
        for r in results
        if r.get("reference_ms") and r.get("baseline_binary") == r.get("binary")
    ]
    runs.setdefault(
        doc["session"]["id"],
        {
            "model": doc["device"]["name"],
            "source": source,
            "machine": doc["session"]["machine"],
            "offset": statistics.median(same) if same else math.nan,
            "same": len(same),
            "changed": [
                (
                    r["key"],
                    r["timer"],
                    r["baseline_binary"],
                    r["binary"],
                    math.log(r["previous_ratio"]),
                )
                for r in changed
            ],
        },
    )


def _pairs(
    doc: dict[str, Any], source: str, name: str, picks: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """Lockstep results of untouched tests: their ratio and both sides' binaries."""
    for r in doc["results"]:
        judgement, reason = r.get("judgement") or {}, r.get("reason") or ""
        key = r.get("key", "")
        if (
            _kept(key) is None
            or PLANTED_KEYS.search(key)
            or "in lockstep" not in reason
            or not judgement.get("ratio")
            or not r.get("baseline_binary")
        ):
            continue
        picks.setdefault(
            (r["session"], key),
            {
                "model": doc["device"]["name"],
                "key": key,
                "head": r["baseline_binary"],
                "tree": r["binary"],
                "d": math.log(judgement["ratio"]),
                "pairs": int(re.search(r"over (\d+) pair", reason).group(1)),  # type: ignore[union-attr]
                "source": f"{source.split('.tgz')[0]} {name}",
            },
        )


def current_timer(sessions: list[Session]) -> dict[tuple[str, str], str]:
    """Per (model, test) the timer of its latest session: the one it is timed by now."""
    latest: dict[tuple[str, str], Session] = {}
    for s in sessions:
        k = (s.model, s.key)
        if k not in latest or s.date > latest[k].date:
            latest[k] = s
    return {k: s.timer for k, s in latest.items()}


Unit = dict[tuple[str, str], list[float]]  # (binary, machine) -> log medians


def units(sessions: list[Session]) -> dict[tuple[str, str, str], Unit]:
    """(model, test, timer) -> its cells, every timer."""
    out: dict[tuple[str, str, str], Unit] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for s in sessions:
        out[(MODELS.get(s.model, s.model), s.key, s.timer)][(s.binary, s.machine)].append(s.log_ms)
    return out


def binary_means(unit: Unit) -> dict[str, float]:
    """Each binary's mean: the median of its GPUs' cell means."""
    means: dict[str, list[float]] = collections.defaultdict(list)
    for (binary, _), values in unit.items():
        means[binary].append(statistics.fmean(values))
    return {b: statistics.median(v) for b, v in means.items()}


def reference(unit: Unit) -> str:
    """The binary with the most sessions: the history's, as a run would meet it."""
    count: collections.Counter[str] = collections.Counter()
    for (binary, _), values in unit.items():
        count[binary] += len(values)
    return max(sorted(count), key=count.__getitem__)


def robust_sd(ds: list[float]) -> float:
    return ROBUST * statistics.median(abs(d) for d in ds) if ds else math.nan


def rms(ds: list[float]) -> float:
    return math.sqrt(sum(d * d for d in ds) / len(ds)) if ds else math.nan


def pct(x: float) -> str:
    return "-" if math.isnan(x) else f"{x * 100:.2f}%"


def signed(x: float) -> str:
    return "-" if math.isnan(x) else f"{(math.exp(x) - 1) * 100:+.1f}%"


def kind(key: str) -> str:
    """Who picks the binary: Inductor (the example suite's torch.compile tests) or a Triton
    autotuner (the user suite's autotuned kernel, the fla library)."""
    return "inductor" if key.startswith(("test_gelu", "test_softmax")) else "autotuner"


MODELS = {"NVIDIA H200": "H200", "NVIDIA H100 80GB HBM3": "H100"}


def main() -> None:
    sessions, picks, runs = gather()
    kernels = {s.binary: s.kernels for s in sessions}
    timer_now = {(MODELS.get(m, m), k): t for (m, k), t in current_timer(sessions).items()}
    every = units(sessions)
    now = {u: c for u, c in every.items() if timer_now[(u[0], u[1])] == u[2]}
    models = sorted({u[0] for u in now})

    # Within a cell; between GPUs of one binary; another GPU's cell over a history.
    within: dict[str, list[float]] = collections.defaultdict(list)
    between: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    cross_same: dict[str, list[float]] = collections.defaultdict(list)
    for (model, _, _), unit in now.items():
        spread: list[float] = []
        for values in unit.values():
            if len(values) > 1:
                mean, scale = statistics.fmean(values), math.sqrt(len(values) / (len(values) - 1))
                spread.extend((v - mean) * scale for v in values)
        within[model].extend(spread)
        sd_w = robust_sd(spread) if len(spread) >= 4 else math.nan
        for (b1, g1), (b2, g2) in itertools.permutations(unit, 2):
            if b1 != b2 or g1 == g2 or len(unit[(b1, g1)]) < HISTORY_MIN:
                continue
            d = statistics.fmean(unit[(b2, g2)]) - statistics.fmean(unit[(b1, g1)])
            cross_same[model].append(d)
            if g1 < g2 and len(unit[(b2, g2)]) >= HISTORY_MIN and not math.isnan(sd_w):
                noise = sd_w**2 * (1 / len(unit[(b1, g1)]) + 1 / len(unit[(b2, g2)]))
                between[model].append((d, noise))

    print("## Tests with more than one binary, at the timer they are timed by now\n")
    print("Offset: the binary's mean (median of its GPUs' cell means) over the reference")
    print("binary's (most sessions); GPUs: its cells about that mean, lowest to highest.\n")
    print("| GPU | test | timer | binary | GPUs | sessions | offset | GPUs | what differs |")
    print("|---|---|---|---|---|---|---|---|---|")
    effects: list[dict[str, Any]] = []  # each other binary against its test's reference
    cross: list[tuple[str, str, float]] = []  # (model, kind, d): another binary's GPU
    tested = collections.Counter()
    for (model, key, timer), unit in sorted(now.items()):
        means = binary_means(unit)
        if len(means) < 2:
            continue
        tested[model] += 1
        ref = reference(unit)
        for b in sorted(means, key=means.__getitem__):
            cells_b = [statistics.fmean(v) - means[b] for (bb, _), v in unit.items() if bb == b]
            n = sum(len(v) for (bb, _), v in unit.items() if bb == b)
            what = (
                "reference" if b == ref else "; ".join(binary_changes(kernels[ref], kernels[b])[:1])
            )
            if b != ref and not same_work(kernels[ref], kernels[b]):
                what = "other kernels: " + what
            gpus = _range(cells_b) if len(cells_b) > 1 else "-"
            print(
                f"| {model} | {key} | {timer} | {b} | {len(cells_b)} | {n} | "
                f"{signed(means[b] - means[ref])} | {gpus} | {what[:60]} |"
            )
            if b != ref:
                both = {g for bb, g in unit if bb == b} & {g for bb, g in unit if bb == ref}
                effects.append(
                    {
                        "model": model,
                        "key": key,
                        "kind": kind(key),
                        "d": means[b] - means[ref],
                        "same": same_work(kernels[ref], kernels[b]),
                        "one_gpu": len(both),
                    }
                )
        for (b1, g1), (b2, g2) in itertools.permutations(unit, 2):
            if b1 != b2 and g1 != g2 and len(unit[(b1, g1)]) >= HISTORY_MIN:
                d = statistics.fmean(unit[(b2, g2)]) - statistics.fmean(unit[(b1, g1)])
                cross.append((model, kind(key), d))

    print("\n## Changed verdicts of plain runs against a stored history\n")
    print("Reported: the run's time over the previous binary's history. Pick: the two")
    print("binaries' means above (the run's timer). Run offset: the same run's median over its")
    print("histories where the binary was the same (the GPU's and the day's offset).\n")
    print("| GPU | run | test | binaries | reported | pick | reported - pick | run offset |")
    print("|---|---|---|---|---|---|---|---|")
    for run in sorted(runs, key=lambda r: r["source"]):
        model = MODELS.get(run["model"], run["model"])
        where = run["source"].replace("bench/results/", "")
        for key, timer, b1, b2, d in sorted(run["changed"]):
            means = binary_means(every.get((model, key, timer), {}))
            pick = means[b2] - means[b1] if b1 in means and b2 in means else math.nan
            print(
                f"| {model} | {where[:48]} | {key} | {b1} -> {b2} | {signed(d)} | "
                f"{signed(pick)} | {signed(d - pick)} | {signed(run['offset'])} "
                f"({run['same']}) |"
            )

    print("\n## The fla library as a user meets it: a history on one H200, a run on another\n")
    print("Each test's history: its cell on the first GPU (3 sessions or more); the run: its")
    print("cell on the second. Changed: tests whose binary differs, their time over the")
    print("history; same: the others.\n")
    print("| history GPU | run GPU | changed | their d | same binary | their d |")
    print("|---|---|---|---|---|---|")
    fla = {u: c for u, c in now.items() if u[1].startswith("test_fla")}
    gpus = sorted({g for unit in fla.values() for _, g in unit})
    for g1, g2 in itertools.permutations(gpus, 2):
        changed, same = [], []
        for unit in fla.values():
            h = [(b, v) for (b, g), v in unit.items() if g == g1 and len(v) >= HISTORY_MIN]
            r = [(b, v) for (b, g), v in unit.items() if g == g2]
            if h and r:
                d = statistics.fmean(r[0][1]) - statistics.fmean(h[0][1])
                (same if h[0][0] == r[0][0] else changed).append(d)
        if changed or same:
            print(
                f"| {g1[:12]} | {g2[:12]} | {len(changed)} | {_range(changed)} | {len(same)} | "
                f"{_range(same)} |"
            )

    print("\n## Pick pairs: an A/B run in lockstep, both sides in one process\n")
    print("| GPU | test | binaries (oriented) | results | mean | sd about it | range |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str, str], list[float]] = collections.defaultdict(list)
    for p in picks:
        lo, hi = sorted((p["head"], p["tree"]))
        d = p["d"] if p["head"] == lo else -p["d"]
        label = "one binary" if lo == hi else f"{lo} -> {hi}"
        groups[(MODELS.get(p["model"], p["model"]), p["key"], label)].append(d)
    with_picks = {(m, k) for m, k, label in groups if label != "one binary"}
    pair_noise: dict[str, list[float]] = collections.defaultdict(list)
    pair_picks: dict[str, list[float]] = collections.defaultdict(list)
    for (m, key, label), ds in sorted(groups.items()):
        if (m, key) not in with_picks:
            continue
        centre = statistics.fmean(ds)
        if label == "one binary":
            pair_noise[m].extend(ds)
        else:
            pair_picks[m].append(centre)
        print(
            f"| {m} | {key} | {label} | {len(ds)} | {signed(centre)} | "
            f"{pct(statistics.stdev(ds)) if len(ds) > 1 else '-'} | {_range(ds)} |"
        )

    print("\n## Fitted spreads, log scale (d's sign is arbitrary: centred at 0)\n")
    print("| GPU | what | n | robust sd | rms | largest | share > 2% | share > 5% |")
    print("|---|---|---|---|---|---|---|---|")

    def row(m: str, what: str, ds: list[float]) -> None:
        if not ds:
            print(f"| {m} | {what} | 0 | | | | | |")
            return
        big = [sum(abs(d) > x for d in ds) / len(ds) for x in (0.02, 0.05)]
        print(
            f"| {m} | {what} | {len(ds)} | {pct(robust_sd(ds))} | {pct(rms(ds))} | "
            f"{signed(max(ds, key=abs))} | {big[0]:.0%} | {big[1]:.0%} |"
        )

    fitted: dict[str, dict[str, float]] = {}
    for m in models:
        row(m, "within: sessions of one binary on one GPU", within[m])
        row(m, "cross, one binary: another GPU's cell over a history", cross_same[m])
        total = robust_sd([d for d, _ in between[m]]) / math.sqrt(2)
        noise = math.sqrt(statistics.median(n for _, n in between[m]) / 2)
        sigma_m = math.sqrt(max(0.0, total**2 - noise**2))
        print(
            f"| {m} | machine: per GPU, from {len(between[m])} pairs of cells of 3+ "
            f"sessions (d / sqrt 2 {pct(total)}, their noise {pct(noise)}) | | "
            f"{pct(sigma_m)} | | | | |"
        )
        mine = [e for e in effects if e["model"] == m]
        row(
            m,
            "pick, other kernels: binary over the reference",
            [e["d"] for e in mine if not e["same"]],
        )
        row(m, "pick, same work: binary over the reference", [e["d"] for e in mine if e["same"]])
        for who in ("autotuner", "inductor"):
            ds = [e["d"] for e in mine if e["kind"] == who]
            row(m, f"pick, {who}: binary over the reference", ds)
            row(
                m,
                f"cross, {who}: another binary's GPU over a history",
                [d for mm, k, d in cross if mm == m and k == who],
            )
            sigma_p = math.sqrt(max(0.0, robust_sd(ds) ** 2 - 2 * sigma_m**2)) if ds else math.nan
            fitted[f"{m} {who}"] = {"pick": sigma_p, "machine": sigma_m, "ds": ds}
        if pair_picks.get(m):
            row(m, "lockstep pairs of one binary (pair noise)", pair_noise[m])
            row(m, "lockstep pick means (one process, no machine)", pair_picks[m])

    print("\n## sigma_b for the rule (robust; the machine's part taken out, then put back)\n")
    print("Student t fitted to the picks (centre 0, maximum likelihood): its degrees of freedom")
    print("say how heavy the tail is (1: a Cauchy).\n")
    print(
        "| GPU | picked by | tests | picks | pick, machine out | with two GPUs' offsets "
        "| GPU offset | t: df, scale |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, f in fitted.items():
        m, who = name.split()
        n = len({e["key"] for e in effects if e["model"] == m and e["kind"] == who})
        both = math.sqrt(f["pick"] ** 2 + 2 * f["machine"] ** 2)
        t = "-"
        if len(f["ds"]) >= 5:
            df, _, scale = stats.t.fit(f["ds"], floc=0)
            t = f"{df:.1f}, {pct(scale)}"
        print(
            f"| {m} | {who} | {n} | {len(f['ds'])} | {pct(f['pick'])} | {pct(both)} | "
            f"{pct(f['machine'])} | {t} |"
        )
    held_out(now, kernels)


def held_out(now: dict[tuple[str, str, str], Unit], kernels: dict[str, Any]) -> None:
    """Each binary of a test with three or more of the same work taken as a pick its history
    has not seen, its other binaries (up to MAX_BINARIES, the most sessions first) as the
    history's: its offset from the reference binary (the most sessions) against the
    allowance the gate gives it (judge/picks.py; where the pick ran on a GPU the reference
    binary's sessions did not, judge/machines.py's too, each at half the level, as
    judge/gate.py gives them) in a suite of 8 tests (the fla library's) and of 54 (the
    example suite's), at the default alpha and confirmations."""
    print("\n## Picks held out: the allowance of judge/picks.py against what a pick did\n")
    print("Each binary of a test with three or more binaries of the same work, taken as a pick")
    print("the history has not seen, the others as the history's binaries. Beyond: the pick's")
    print("offset over the allowance (the gate would fail the unchanged code). GPU: whether")
    print("the pick ran on a GPU the reference binary's sessions did not (its allowance added).\n")
    print("| GPU | test | pick | history's binaries | GPU | offset | allowance, 8 tests | 54 |")
    print("|---|---|---|---|---|---|---|---|")
    design = rule.Design()
    total = beyond = 0
    for (model, key, _), unit in sorted(now.items()):
        means = binary_means(unit)
        count = collections.Counter({b: len(v) for (b, _), v in unit.items()})
        for b in sorted(means):
            others = [o for o in means if o != b and same_work(kernels[o], kernels[b])]
            if len(others) < 2:
                continue
            others = sorted(others, key=lambda o: -count[o])[:MAX_BINARIES]
            ref = others[0]
            df, scale = picks.spread(
                [means[o] - means[ref] for o in others[1:]], picks.picker(kernels[b])
            )
            gpu = _gpu_spread(unit, ref, b)
            allow = []
            for family in (8, 54):
                level = rule.corrected_alpha(0.01, 2 * family, False) / design.looks
                share = level / (2 if gpu is not None else 1)
                a = scale * float(special.stdtrit(df, 1 - share))
                allow.append(a + (gpu.allowance(share) if gpu is not None else 0.0))
            d = means[b] - means[ref]
            total += 1
            beyond += d > min(allow)
            shown = [pct(math.expm1(a)) if a < math.log1p(0.5) else "> 50%" for a in allow]
            where = "other" if gpu is not None else "same"
            print(
                f"| {model} | {key} | {b} | {len(others)} | {where} | {signed(d)} | {shown[0]} "
                f"| {shown[1]} |"
            )
    print(f"\nheld out: {total} picks, {beyond} beyond their allowance")


def _gpu_spread(unit: Unit, ref: str, pick: str) -> machines.MachineSpread | None:
    """What judge/machines.py allows a GPU of ``pick`` that the reference binary's sessions
    lack (None: every GPU of the pick is one of them)."""
    gpus = {g for (b, g) in unit if b == ref}
    new = sorted(g for (b, g) in unit if b == pick and g not in gpus)
    if not new:
        return None
    records, infos = [], {}
    for g in sorted(gpus):
        for i, v in enumerate(unit[(ref, g)]):
            records.append(SessionRecord(f"{g}-{i}", math.exp(v), 50, None))
            infos[f"{g}-{i}"] = SessionInfo("", None, g)
    return machines.machine_spread(records, infos, new[0], "cuda-graph")


def _range(ds: list[float]) -> str:
    return f"{signed(min(ds))} to {signed(max(ds))}" if ds else "-"


if __name__ == "__main__":
    main()
