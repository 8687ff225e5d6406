"""A comparison against a git revision measured in the same job (``--gpubench-against``).

The revision's checkout (versus/revision.py) is the base side, the working tree the head
side; both time the selected tests in fresh processes, alternating, and the pairs are judged
by judge/pairs.py through the gate. Only the head's plugin runs, on both sides. How the sides
run, build and share caches: docs/guide.md, "Against a revision"; the rule: docs/verdict.md,
"The verdict against a revision".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import GpubenchError
from ..core.kernels import Launch, binary_changes, launch_count, same_work
from ..core.records import (
    Evidence,
    Judgement,
    Measurement,
    Paired,
    Result,
    SessionSummary,
    Status,
    Verdict,
    Versus,
    node_id,
)
from ..core.samples import plural
from ..core.settings import MeasureSettings, Settings
from ..judge.gate import MIN_JUDGED_SAMPLES, Gate, with_memory
from ..judge.pairs import (
    DUO_DESIGN,
    LOCKSTEP_DESIGN,
    LOCKSTEP_FRESH_DESIGN,
    PairDesign,
    judge_pairs,
)
from ..run import ncu
from ..run.children import (
    EVERY_BENCHMARK,
    FOREIGN_VARIABLE,
    ChildRun,
    Launcher,
    Leg,
    Request,
    relays,
)
from ..store import files as storage
from .revision import Revision, code_paths

BASE, HEAD = "base", "head"
# The timer whose number a call's kernel time taken beside its time per call is.
KERNEL_TIME = "cupti-graph"
# Compile caches a side keeps apart from the other's: (variable, folder name). torch's
# extensions are kept by the name their code gives them. Triton's and Inductor's caches are
# keyed by what they compile, so they stay shared (the user's): identical code then runs
# one compiled choice on both sides. With a cache per side, an unchanged torch.compile
# softmax read +9.1% in every pair on an H100, its autotuner having chosen once per side
# (bench/results/h100-2026-11-24c/README.md).
CACHES = (("TORCH_EXTENSIONS_DIR", "torch-extensions"),)


@dataclass(frozen=True)
class Sides:
    """The launchers of both sides; ``narrow``: the user's selection names what the
    revision's side lacks or narrows from run to run (``--lf``), so both sides time exactly
    the tests this run selected, not every benchmark of their selection."""

    base: Launcher
    head: Launcher
    narrow: bool = False

    def of(self, side: str) -> Launcher:
        return self.base if side == BASE else self.head


def sides(
    head: Launcher,
    revision: Revision,
    folder: Path,
    plugin: Path,
    baselines: Path,
    roots: Iterable[Path] = (),
) -> Sides:
    """The launchers of both sides. ``folder``: the comparison's own (caches, the plugin's
    path entry); ``plugin``: the head's pytest_gpubench package; ``baselines``: the head's
    baseline directory, read by both sides; ``roots``: the folders the head finds its code
    in (``revision.import_roots``). The revision's side refuses to measure code it imported
    from the working tree (``FOREIGN_VARIABLE``)."""
    paths = code_paths(revision, folder, plugin, roots)
    trees = [p for p in os.environ.get(FOREIGN_VARIABLE, "").split(os.pathsep) if p]
    base_env = [
        ("PYTHONPATH", os.pathsep.join(paths)),
        (FOREIGN_VARIABLE, os.pathsep.join([*trees, str(revision.repo)])),
    ]
    directory = [f"--gpubench-dir={baselines}"]

    def caches(side: str) -> list[tuple[str, str]]:
        return [(name, str(folder / side / sub)) for name, sub in CACHES]

    moved = [_moved(a, revision, head.cwd) for a in head.invocation]
    base_args = tuple(a for a in moved if a is not None)
    narrow = len(base_args) < len(moved) or any(
        a in NARROWING or a.startswith("--last-failed") for a in head.invocation
    )
    return Sides(
        base=dataclasses.replace(
            head,
            cwd=revision.counterpart(head.cwd),
            rootdir=_there(head.rootdir, revision),
            inifile=_there(head.inifile, revision),
            invocation=(*base_args, *directory),
            env=(*head.env, *base_env, *caches(BASE)),
        ),
        head=dataclasses.replace(
            head,
            invocation=(*head.invocation, *directory),
            env=(*head.env, *caches(HEAD)),
        ),
        narrow=narrow,
    )


# Options that narrow the selection from run to run.
NARROWING = frozenset({"--lf", "--ff", "--sw", "--stepwise", "--failed-first", "--new-first"})


def _there(path: Path | None, revision: Revision) -> Path | None:
    """The same place in the checkout as ``path`` (a rootdir, an ini file) where it is in
    the repository; None where the revision lacks it (pytest then finds its own)."""
    there = None if path is None else revision.moved(path)
    if there is None:
        return path
    return there if there.exists() else None


def _moved(arg: str, revision: Revision, cwd: Path) -> str | None:
    """A command-line argument naming a path of the user's repository (a test file, a node
    id), for the checkout: an absolute one moved to the same place; None for one that the
    revision lacks (a test file added since: its tests are new)."""
    if arg.startswith("-"):
        return arg
    path, sep, rest = arg.partition("::")
    candidate = cwd / path  # as it is where absolute
    there = revision.moved(candidate) if candidate.exists() else None
    if there is None:
        return arg  # not a path of the repository (an option's value, a pattern)
    if not there.exists():
        return None
    return str(there) + sep + rest if Path(path).is_absolute() else arg


class Pairs:
    """Both sides' measurements so far, pair by pair (``duos``: by pair, the duo that timed
    it), and what kept a side from measuring a test, by node id: ``failed``, its test failed
    there (with why, or ''; ``errors``, the error of one that failed before any result);
    ``crashed``, its process died in it there, with what it did (``died in test_sum, killed
    by SIGABRT: ...``); ``uncollected``, by file, why the revision's side could not collect
    it."""

    def __init__(self) -> None:
        self.runs: dict[str, list[dict[str, Measurement]]] = {BASE: [], HEAD: []}
        self.failed: dict[str, dict[str, str]] = {BASE: {}, HEAD: {}}
        # By side, the error of each test that failed before any result (while timed).
        self.errors: dict[str, dict[str, str]] = {BASE: {}, HEAD: {}}
        self.crashed: dict[str, dict[str, str]] = {BASE: {}, HEAD: {}}
        self.uncollected: dict[str, str] = {}
        self.duos: list[int] = []

    @property
    def count(self) -> int:
        return len(self.runs[HEAD])

    def add(self, sides: Mapping[str, Mapping[str, Measurement]], duo: int = 0) -> None:
        """One more pair: each side's measurements by key (``duo``: the duo that timed it)."""
        for side in (BASE, HEAD):
            self.runs[side].append(dict(sides[side]))
        if duo:
            self.duos.append(duo)

    def heard(self, side: str, run: ChildRun) -> None:
        """What ``side``'s process ``run`` could not measure: its failed tests, those it
        died in, the files it could not collect (the revision's side)."""
        self.failed[side].update((node_id(r.key), "") for r, passed in run.results if not passed)
        self.failed[side].update((test, "") for test, _ in run.failed)
        self.errors[side].update(run.failed)
        for test, how in run.crashed:
            self.crashed[side].setdefault(test, f"died in {test.split('::')[-1]}, {how}")
        if side == BASE:
            self.uncollected.update(run.uncollected)

    def trouble(self, side: str, nodeid: str, who: str) -> str:
        """Why ``side`` (``who`` names it) measured the test ``nodeid`` not at all: its file
        not collected there, its process dead in it, its test failed there; '' for none."""
        path = nodeid.split("::")[0]
        if side == BASE and path in self.uncollected:
            error = self.uncollected[path]  # pytest's: an import error may be a build forgotten
            hint = (
                "build that revision with --gpubench-build"
                if error.startswith(("ModuleNotFoundError", "ImportError"))
                else "name a revision whose tests can be collected"
            )
            return f"its file could not be collected on {who}'s side ({error}): {hint}"
        if nodeid in self.crashed[side]:
            return f"{who}'s process {self.crashed[side][nodeid]}"
        if nodeid in self.failed[side]:
            said = f"its test failed on {who}'s side"
            if self.errors[side].get(nodeid):
                said += f" ({self.errors[side][nodeid]})"
            return self.failed[side][nodeid] or said
        return ""


@dataclass(frozen=True)
class Comparison:
    """What the comparison found: a result per measurement key (``removed`` where only the
    revision's side measured it), the pairs run, lines for under the table, the lines of the
    tests :func:`unjudged`, and ``crashed``: the tests the working tree's processes died in
    (or never timed, once given up): run in the user's process, they would end it too."""

    results: Mapping[str, Result]
    pairs: int
    lines: tuple[str, ...]
    cost_s: float
    unjudged: Mapping[str, str]
    crashed: frozenset[str]


def imported_other_side(revision: Revision, who: str, foreign: Sequence[str]) -> GpubenchError:
    """The error of a side's process (``who``: "the working tree", the revision's label) that
    imported the other side's code ``foreign``: its measurements are not of its own code."""
    more = len(foreign) - 3
    named = ", ".join(foreign[:3]) + (f" and {more} more" if more > 0 else "")
    return GpubenchError(
        f"--gpubench-against {revision.ref}: {who} imported {named}, code not of its side, "
        "so both sides would time the same code and nothing is judged; put the folder holding "
        "that package on pytest's pythonpath ini option or on PYTHONPATH (each side then finds "
        "its own), or install it with `pip install -e . --config-settings editable_mode=compat`"
    )


def design_of(
    pairs: int | None, more: bool, lockstep: bool = False, duos: bool = False, fresh: bool = False
) -> PairDesign:
    """The design of a run of ``pairs`` first pairs (None: the default's), with as many more
    for the unsure as the default's, in its batches, when ``more``; the default is the
    pairing's: lockstep (versus/lockstep.py; ``fresh``: its more pairs from fresh
    processes), duos, or processes. gpubench compare re-judges a file with it."""
    in_lockstep = LOCKSTEP_FRESH_DESIGN if fresh else LOCKSTEP_DESIGN
    default = DUO_DESIGN if duos else in_lockstep if lockstep else PairDesign()
    first = default.first if pairs is None else pairs
    extra = default.cap - default.first if more else 0
    return PairDesign(first=first, batch=max(1, min(default.batch, extra)), cap=first + extra)


def compare(
    nodeids: Sequence[str],
    sides_: Sides,
    revision: Revision,
    settings: Settings,
    measure_of: Callable[[str], MeasureSettings],
    devices: Sequence[int | None],
    announce: Callable[[str], None],
) -> Comparison:
    """Run the pairs over the tests ``nodeids`` and judge each measurement on them.
    ``devices``: the GPUs to time on, each with its own relay of processes: in the first look
    its share of the tests (the first GPU the first tests), every pair; in a later look every
    test still unsure, its block of the pairs (:func:`pair_blocks`). Both processes of a pair
    run on one GPU, and each GPU alternates base and head as one would."""
    started = time.perf_counter()
    # --gpubench-pairs pairs of the whole selection, then one batch of the default design's
    # size for the tests still unsure (none with --gpubench-confirm 0).
    design = design_of(settings.pairs, settings.confirm > 0)
    label = {BASE: f"the revision {revision.ref} ({revision.commit[:8]})", HEAD: "the working tree"}
    pairs = Pairs()
    # By side, what its processes did where a leg's died ``children.MAX_DEATHS`` times: the
    # tests that side never timed are lost to it (crashed, or unmeasurable), not new.
    gave_up: dict[str, str] = {}
    # By side, the tests its given-up processes were to time: a test the revision lacks is
    # none of them, and stays new.
    rest: dict[str, set[str]] = {BASE: set(), HEAD: set()}
    base_runs: list[ChildRun] = []
    errors: list[str] = []
    wanted = list(nodeids)
    lane_of = {n: i * len(devices) // max(1, len(nodeids)) for i, n in enumerate(nodeids)}
    results: dict[str, Result] = {}

    def check(leg: Leg, run: ChildRun) -> None:
        # At its first process: the look's others would time the same.
        # Its measurements are not of its code: it imported the other side's.
        if run.foreign:
            raise imported_other_side(revision, label[leg.name.partition("-")[0]], run.foreign)

    while wanted:
        done = pairs.count
        count = design.first if done == 0 else design.next_batch(done)
        if count == 0:
            break
        # The first look's pairs time every benchmark of each side's selection: a test on
        # the revision's side only is reported (removed) too (by the first GPU's relay).
        everything = done == 0 and not sides_.narrow
        blocks = pair_blocks(range(done + 1, done + count + 1), max(1, len(devices)))
        planned = [
            (i, side)
            for i in range(done + 1, done + count + 1)
            for side in ((BASE, HEAD) if i % 2 else (HEAD, BASE))
        ]
        lanes: list[tuple[list[Leg], int | None]] = []
        for k, device in enumerate(devices):
            if done == 0:  # the first look: each GPU its share of the tests, every pair
                mine = tuple(n for n in wanted if lane_of.get(n, 0) == k)
                others = tuple(n for n in nodeids if lane_of.get(n, 0) != k)
                request = (
                    dataclasses.replace(EVERY_BENCHMARK, excluded=others, floors=True)
                    if everything and k == 0
                    else Request(mine, floors=True)
                )
                share = planned if (mine or (everything and k == 0)) else []
            else:  # later looks: each GPU its block of the pairs, every test still unsure
                mine, request = tuple(wanted), Request(tuple(wanted), floors=True)
                share = [(i, side) for i, side in planned if i in blocks[k]]
            tests = plural(len(mine), "test")
            where = f"GPU {device}, " if len(devices) > 1 else ""
            legs = [
                Leg(
                    sides_.of(side),
                    request,
                    f"{side}-{i}",
                    says=f"{where}pair {i}/{design.cap}: {label[side]}, {tests}",
                )
                for i, side in share
            ]
            if legs:
                lanes.append((legs, device))
        measured = relays(lanes, announce, check)
        ran: dict[str, list[ChildRun]] = {}  # each leg's processes (one per GPU that ran it)
        for (legs, _), got in zip(lanes, measured, strict=True):
            for leg, run in zip(legs, got, strict=True):
                ran.setdefault(leg.name, []).append(run)
        for i, side in planned:
            merged: dict[str, Measurement] = {}
            for run in ran.get(f"{side}-{i}", []):
                if run.error or run.trouble:
                    errors.append(f"{label[side]}, pair {i}: {run.error or run.trouble}")
                merged.update(_measured(run))
                pairs.heard(side, run)
                if side == BASE:
                    base_runs.append(run)
                if run.gave_up:
                    names = ", ".join(test.split("::")[-1] for test, _ in run.crashed)
                    gave_up.setdefault(
                        side,
                        f"died {len(run.crashed)} times (in {names}) and was not started again",
                    )
                    rest[side].update(nodeids if run.planned is None else run.planned)
            pairs.runs[side].append(merged)
        for side, why in gave_up.items():  # the tests its processes never timed: the rest
            crashed = pairs.crashed[side]
            known = {node_id(key) for run in pairs.runs[side] for key in run} | set(crashed)
            crashed.update((n, why) for n in nodeids if n not in known and n in rest[side])
        if not any(pairs.runs[BASE]) and not any(pairs.runs[HEAD]):
            raise GpubenchError(
                f"--gpubench-against {revision.ref}: no process of either side measured "
                f"anything: {errors[-1] if errors else 'no gpubench test ran'}"
            )
        if not any(pairs.runs[BASE]) and all(r.error for r in base_runs):
            raise GpubenchError(
                f"--gpubench-against {revision.ref}: the revision's side measured nothing "
                f"({errors[-1] if errors else 'no gpubench test ran there'}): nothing is judged"
            )
        gate = Gate.of(settings, family=max(1, len(_keys(pairs.runs))))
        results = paired_results(pairs, gate, measure_of, design, revision)
        wanted = unsure_tests(nodeids, results)
    fails = Gate.of(settings).fails  # whether a verdict fails: not the family's to say
    # A call that ends its process leaves no trace of itself: a crash has its line instead.
    failed_keys = {
        key for key, r in results.items() if fails(r.verdict) and r.status is not Status.CRASHED
    }
    if failed_keys:
        results = _with_evidence(results, failed_keys, sides_, settings, devices, label, announce)
    lost = unjudged(nodeids, results, pairs, label)
    lines = tuple(dict.fromkeys([*errors, *lost.values()]))
    spent_s = time.perf_counter() - started
    return Comparison(results, pairs.count, lines, spent_s, lost, frozenset(pairs.crashed[HEAD]))


def unjudged(
    nodeids: Iterable[str], results: Mapping[str, Result], pairs: Pairs, label: Mapping[str, str]
) -> dict[str, str]:
    """The tests of ``nodeids`` no side measured though a side had trouble with them
    (:meth:`Pairs.trouble`), each with its line: they fail, for a gate that judged a test not
    at all must not pass it. One both sides ran and neither timed (a GPU-only benchmark) has
    nothing to judge: not one of them."""
    measured = {node_id(key) for key in results}
    found = {}
    for nodeid in nodeids:
        troubles = [pairs.trouble(side, nodeid, label[side]) for side in (HEAD, BASE)]
        if nodeid in measured or not any(troubles):
            continue
        why = "; ".join(
            t or f"{label[side]} did not time it"
            for t, side in zip(troubles, (HEAD, BASE), strict=True)
        )
        found[nodeid] = f"{nodeid.split('::')[-1]}: not judged, measured on neither side: {why}"
    return found


def _with_evidence(
    results: dict[str, Result],
    failed_keys: Collection[str],
    sides_: Sides,
    settings: Settings,
    devices: Sequence[int | None],
    label: Mapping[str, str],
    announce: Callable[[str], None],
) -> dict[str, Result]:
    """``results`` with a profiler trace of one call of each side of ``failed_keys`` (and
    with --gpubench-ncu, Nsight Compute's metrics): one more process of each side, on the
    first GPU, into a folder per side of the evidence directory. Evidence never fails a
    test: where it cannot be taken, the measurement's note says why."""
    failing = sorted({node_id(key) for key in failed_keys})
    folders = {side: settings.evidence / side for side in (BASE, HEAD)}
    if not settings.evidence.exists():  # ours, not the user's: never committed by accident
        with contextlib.suppress(OSError):  # the traces' own error says what is wrong
            settings.evidence.mkdir(parents=True)
            storage.gitignore(settings.evidence)
    tests = plural(len(failing), "failing test")
    legs = [
        Leg(
            sides_.of(side),
            Request(tuple(failing), evidence=str(folders[side])),
            f"{side}-evidence",
            says=f"evidence: a profiler trace of one call of {tests}, {label[side]}",
        )
        for side in (BASE, HEAD)
    ]
    path = ncu.found() if settings.ncu else None
    reports = {side: folders[side] / f"ncu{ncu.SUFFIX}" for side in (BASE, HEAD)}
    if path is not None:  # then each side's call under Nsight Compute
        for report in reports.values():  # an earlier run's is not this one's
            with contextlib.suppress(OSError):
                report.unlink(missing_ok=True)
        legs += [
            Leg(
                dataclasses.replace(
                    sides_.of(side), wrapper=ncu.command(path, reports[side], len(failing))
                ),
                Request(tuple(failing), ncu=True),
                f"{side}-ncu",
                says=f"evidence: Nsight Compute's metrics of {tests}, {label[side]}",
            )
            for side in (BASE, HEAD)
        ]
    try:
        [ran] = relays([(legs, devices[0] if devices else None)], announce)
    except GpubenchError as exc:
        ran, problem = [], str(exc)
    else:
        problem = "; ".join(r.error for r in ran[:2] if r.error)
    traces = {
        side: {key: m.evidence.trace for key, m in _measured(run).items() if m.evidence.trace}
        for side, run in zip((BASE, HEAD), ran, strict=False)
    }
    profiled = {
        side: ncu.read(path, reports[side], run)
        for side, run in zip((BASE, HEAD), ran[2:], strict=False)
        if path is not None
    }
    found = dict(results)
    for key, result in results.items():
        if key not in failed_keys:
            continue
        head, base = traces.get(HEAD, {}).get(key), traces.get(BASE, {}).get(key)
        measurement = result.measurement
        if head is None or base is None:
            why = problem or "a side measured it in no trace"
            measurement = measurement.noted(f"no trace of each side's call: {why}"[:300])
        metrics = {}  # each side's Nsight Compute metrics of one call, or a note of why none
        for side in (BASE, HEAD) if settings.ncu else ():
            kernels, error = profiled.get(side, ({}, problem or "ncu not found"))
            metrics[side] = ncu.evidence(reports[side], kernels, key)
            if metrics[side] is None:
                why = error or "none of its kernels"
                measurement = measurement.noted(
                    f"no Nsight Compute metrics of the {side} side: {why}"[:300]
                )
        evidence = Evidence(head, base, ncu=metrics.get(HEAD), reference_ncu=metrics.get(BASE))
        measurement = dataclasses.replace(measurement, evidence=evidence)
        found[key] = dataclasses.replace(result, measurement=measurement)
    return found


def pair_blocks(pairs: Sequence[int], lanes: int) -> list[range]:
    """``pairs`` in contiguous blocks, one per GPU, as even as whole pairs of pairs allow:
    each GPU that runs a later look runs all of its tests in fewer processes than a share of
    the tests in every pair would take (a process's start-up, not its tests, is most of its
    cost), and a block of an even count keeps the next one's order (base first in odd pairs)
    alternating base and head on its GPU. The odd block, if any, is the last."""
    sizes = [0] * lanes
    for unit in range(len(pairs) // 2):
        sizes[unit % lanes] += 2
    if len(pairs) % 2:
        sizes[sizes.index(min(sizes))] += 1
    sizes.sort(key=lambda n: n % 2)  # stable: the even blocks first, in lane order
    blocks, start = [], pairs[0] if pairs else 0
    for n in sizes:
        blocks.append(range(start, start + n))
        start += n
    return blocks


def _measured(run: ChildRun) -> dict[str, Measurement]:
    """The measurements of a side's process whose tests passed there."""
    return {r.key: r.measurement for r, passed in run.results if passed}


def _keys(runs: Mapping[str, list[dict[str, Measurement]]]) -> list[str]:
    return list(dict.fromkeys(key for side in (HEAD, BASE) for run in runs[side] for key in run))


def unsure_tests(nodeids: Iterable[str], results: Mapping[str, Result]) -> list[str]:
    """The tests of ``nodeids`` a measurement of which needs more pairs, in their order."""
    unsure = {
        node_id(key)
        for key, r in results.items()
        if r.verdict.judgement is not None and r.verdict.judgement.needs_confirmation
    }
    return [n for n in nodeids if n in unsure]


def held_to_floors(verdict: Verdict, measurement: Measurement, gate: Gate) -> Verdict:
    """``verdict``, unless the working tree's call is faster than its declared bytes or
    flops allow (``Gate.impossible``): then ``impossible``, whatever the pairs say, their
    numbers kept for the reports. A revision whose calls beat the same floors judges nothing
    (``not gated``). The run asks it, and gpubench compare again."""
    impossible = gate.impossible(measurement)
    if impossible is not None:
        return dataclasses.replace(
            impossible,
            reference_ms=verdict.reference_ms,
            history_sessions=verdict.history_sessions,
            paired=verdict.paired,
        )
    paired = verdict.paired
    # Pairs or none (the revision's calls launched nothing: another timer), its sessions.
    base_ms = None if paired is None else paired.base_median_ms
    if paired is None or base_ms is None:
        return verdict
    cheat = gate.impossible(measurement, base_ms)
    if cheat is None:
        return verdict
    # The revision's calls beat the floor (a cached output the working tree fixed): its
    # times are not of this work, so a slower working tree is no regression of it.
    return dataclasses.replace(
        verdict,
        status=Status.NOT_GATED,
        reason=f"{paired.label}'s calls are impossible ({cheat.reason}): its times are not "
        "of this work, so the working tree's (possible) are judged against no time of it",
        judgement=None,
    )


def paired_results(
    so_far: Pairs,
    gate: Gate,
    measure_of: Callable[[str], MeasureSettings],
    design: PairDesign,
    revision: Revision,
    *,
    lockstep: bool = False,
    fresh: bool = False,
) -> dict[str, Result]:
    """Each measurement key's verdict on its complete pairs in ``so_far`` (both sides timed
    by one timer, each with enough samples), held to its floors (:func:`held_to_floors`).
    A test the working tree's process died in is ``crashed``: its code's fault, whatever the
    revision did; one the revision's side could not measure is ``unmeasurable``, with why.
    ``lockstep``: each pair's sides shared one process (versus/lockstep.py); ``fresh``: its
    more pairs came from fresh processes."""
    runs, duos = so_far.runs, so_far.duos

    def paired_result(key: str) -> Result:
        base = [run.get(key) for run in runs[BASE]]
        head = [run.get(key) for run in runs[HEAD]]
        found = [
            (i, b, h)
            for i, (b, h) in enumerate(zip(base, head, strict=False))
            if b is not None
            and h is not None
            and b.timer == h.timer
            and min(len(b.samples_ms), len(h.samples_ms)) >= MIN_JUDGED_SAMPLES
        ]
        pairs = [(b, h) for _, b, h in found]
        heads = [h for h in head if h is not None]
        bases = [b for b in base if b is not None]
        # Without a pair, what each side measured: the reports show both.
        sides = Paired(
            revision.ref,
            revision.commit,
            tuple(b.record for b in bases),
            tuple(h.record for h in heads),
            lockstep=lockstep,
            fresh=fresh,
        )
        unpaired = functools.partial(Verdict, family=gate.family, paired=sides)
        name = sides.label
        nodeid = node_id(key)
        if nodeid in so_far.crashed[HEAD]:  # whatever its pairs say: its own process died
            why = so_far.trouble(HEAD, nodeid, "the working tree")
            return Result(heads[0] if heads else bases[0], unpaired(Status.CRASHED, reason=why))
        # One side only: its first session shows (more would read as confirmations).
        if not heads:
            error = so_far.errors[HEAD].get(nodeid)
            if error is not None:  # an error while timed, though its first call passes here
                why = f"its test failed in the working tree's timed process ({error})"
                return Result(bases[0], unpaired(Status.CRASHED, reason=why))
            failed = nodeid in so_far.failed[HEAD]
            why = "its test failed in the working tree" if failed else "only there"
            return Result(
                bases[0], unpaired(Status.REMOVED, reason=f"measured on {name}'s side: {why}")
            )
        if not bases:
            why = so_far.trouble(BASE, nodeid, name)
            if why:  # not new: not measurable there, and nothing is judged
                return Result(heads[0], unpaired(Status.UNMEASURABLE, reason=why))
            return Result(heads[0], unpaired(Status.NEW, reason=f"not measured on {name}'s side"))
        if not pairs:
            timers = sorted({m.timer for m in (*heads, *bases)})
            why = (
                f"the sides were timed by different timers ({', '.join(timers)}): pin one with "
                "--gpubench-timer"
                if len(timers) > 1
                else "no pair of processes measured it on both sides with enough samples"
            )
            verdict = unpaired(Status.UNSURE, reason=why, reference_ms=sides.base_median_ms)
            return Result(heads[0].with_confirmations(heads[1:]), verdict)
        b_first, h_first = pairs[0]
        changes: tuple[str, ...] = ()
        if b_first.kernels and h_first.kernels and b_first.binary != h_first.binary:
            changes = tuple(binary_changes(b_first.kernels, h_first.kernels))
        paired = dataclasses.replace(
            sides,
            base_sessions=tuple(b.record for b, _ in pairs),
            head_sessions=tuple(h.record for _, h in pairs),
            pairs=len(pairs),
            duos=tuple(duos[i] for i, _, _ in found) if duos else (),
        )
        verdict = paired_verdict(
            paired,
            timer=h_first.timer,
            launches=launch_count(h_first.kernels or b_first.kernels),
            measure=measure_of(nodeid),
            gate=gate,
            design=design,
            kernel_changes=changes,
            same_kernels=bool(changes) and same_work(b_first.kernels, h_first.kernels),
            baseline_binary=b_first.binary,
            versus=h_first.versus,
            reference_kernels=b_first.kernels,
        )
        # Every session's facts, the revision's too: which GPU ran each side, and when.
        infos = {k: v for b, _ in pairs for k, v in b.session_infos.items()}
        measured = h_first.with_confirmations(h for _, h in pairs[1:])
        measured = dataclasses.replace(measured, session_infos={**infos, **measured.session_infos})
        # What a later pair noted too, said once.
        measured = measured.noted(_news(measured.note, "; ".join(h.note for _, h in pairs[1:])))
        return Result(measured, verdict)

    found = {}
    for key in _keys(runs):
        r = paired_result(key)
        if r.status is not Status.REMOVED:  # the revision's has none of the head's floors
            r = dataclasses.replace(r, verdict=held_to_floors(r.verdict, r.measurement, gate))
        found[key] = r
    return found


def _news(said: str, note: str) -> str:
    """The clauses of ``note`` (later pairs' notes) that ``said`` lacks, each said once, their
    measured figures aside: each pair of a call that cannot be captured notes its own share
    of host work, and a test of ten pairs must not say the same thing ten times."""
    seen = {_MEASURED.sub("#", c) for c in said.split("; ")}
    news = []
    for clause in filter(None, note.split("; ")):
        if (shape := _MEASURED.sub("#", clause)) not in seen:
            seen.add(shape)
            news.append(clause)
    return "; ".join(news)


# A measured figure with its unit (55%, 82.7 µs, 1.00 ms, 1.5x): what differs between pairs
# that note the same thing; other numbers (an error code, a dtype's width) are the thing.
_MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:%|x\b|[µunm]?s\b)")


def nothing_judged(results: Iterable[Result], ref: str) -> str:
    """One line saying why a run against ``ref`` judged none of its tests, a side having
    measured none of them (``unmeasurable`` or ``crashed``), or '' where it judged one or
    lost none (``new`` tests are not lost). Such a run fails as a failed build does: a gate
    that judged nothing must not read as passed."""
    against = [
        r for r in results if r.verdict.paired is not None and r.status is not Status.REMOVED
    ]
    lost = [r for r in against if r.status in (Status.UNMEASURABLE, Status.CRASHED)]
    if not lost or any(r.verdict.paired is not None and r.verdict.paired.pairs for r in against):
        return ""
    statuses = " or ".join(sorted({r.status.value for r in lost}))
    return (
        f"--gpubench-against {ref}: nothing is judged, {plural(len(lost), 'test')} {statuses} "
        f"({lost[0].test}: {lost[0].verdict.reason})"
    )[:600]


MOVED = (Status.REGRESSED, Status.IMPROVED)


def with_kernel_time(judgement: Judgement, beside: Judgement | None) -> tuple[Status, str]:
    """The status of a test judged on its time per call (``judgement``) and its kernel time
    (``beside``), the steadier number (docs/verdict.md, "Lockstep pairs"), and what the
    reason adds. The kernel time decides where it moved and the time per call is unsure;
    where one moved and the other ruled a change out, or they moved apart, it is unsure."""
    status = judgement.status
    if beside is None or beside.ratio is None:
        return status, ""
    verb = "slower" if beside.ratio >= 1 else "faster"
    text = f"; kernel time {verb} by {abs(beside.ratio - 1):.1%} ({beside.status.value})"
    if beside.status not in MOVED or beside.status is status:
        if status in MOVED and beside.status is Status.SAME:
            text += ": the time per call moved, the kernel time did not"
        return status, text
    if status is Status.UNSURE:
        return beside.status, text + ": the kernel time moved, the time per call was unsure"
    if status is Status.SAME:
        return Status.UNSURE, text + ": the kernel time moved, the time per call did not"
    return Status.UNSURE, text + ": the kernel time and the time per call moved apart"


def rejudged(
    paired: Paired,
    measurement: Measurement,
    facts: Verdict,
    measure: MeasureSettings,
    gate: Gate,
    design: PairDesign,
) -> Verdict:
    """:func:`paired_verdict` on ``paired``'s pairs, with ``measurement``'s timer, launches
    and ratio, and the binary facts of ``facts`` (the verdict whose pairs found them)."""
    return paired_verdict(
        paired,
        timer=measurement.timer,
        launches=launch_count(measurement.kernels),
        measure=measure,
        gate=gate,
        design=design,
        kernel_changes=facts.kernel_changes,
        same_kernels=facts.same_kernels,
        baseline_binary=facts.baseline_binary,
        versus=measurement.versus,
        reference_kernels=facts.reference_kernels,
    )


def paired_verdict(
    paired: Paired,
    *,
    timer: str,
    launches: int,
    measure: MeasureSettings,
    gate: Gate,
    design: PairDesign,
    kernel_changes: tuple[str, ...] = (),
    same_kernels: bool = False,
    baseline_binary: str = "",
    versus: Versus | None = None,
    reference_kernels: tuple[Launch, ...] = (),
) -> Verdict:
    """The verdict on ``paired``'s pairs (at least one) by the pair rule; other launches
    than the revision's (``kernel_changes``) make a same or unsure test ``changed``. The run
    asks it, and gpubench compare of the run's file asks it again. ``versus``: what a ratio
    to a reference compares (its prior)."""
    base_pairs, head_pairs = (
        side[: paired.pairs] for side in (paired.base_sessions, paired.head_sessions)
    )

    def judged(
        base: Sequence[SessionSummary],
        head: Sequence[SessionSummary],
        timer: str,
        against: str,
        numbers: int,
        versus: Versus | None = None,
    ) -> Judgement:
        """The pair rule on the pairs' ``base`` and ``head`` numbers; ``against`` names the
        base side in the reason; ``numbers``: how many numbers of each test are judged (the
        family counts each)."""
        return judge_pairs(
            base,
            head,
            threshold=measure.threshold,
            alpha=measure.alpha,
            family=gate.family * numbers,
            timer=timer,
            launches=launches,
            fail_on_improvement=gate.fail_on_improvement,
            design=design,
            against=against,
            versus=versus,
            lockstep=paired.lockstep,
            duos=paired.duos,
        )

    # A call's kernel time (timing.engine.Beside: a graph-timed call's, the only one that
    # takes it) judged on the pairs that took it on both sides, as its time per call is,
    # with its own spread (the prior of KERNEL_TIME, whose number it is), each of the two
    # numbers at half the test's level; none where no pair took it (duos, other timers).
    took = [
        (SessionSummary(b.beside_ms, 1, math.nan), SessionSummary(h.beside_ms, 1, math.nan))
        for b, h in zip(base_pairs, head_pairs, strict=True)
        if b.beside_ms is not None and h.beside_ms is not None
    ]
    beside = None
    if took:
        base_k, head_k = zip(*took, strict=True)
        beside = judged(base_k, head_k, KERNEL_TIME, f"{paired.label}'s kernel time", numbers=2)
    judgement = judged(
        [r.summary for r in base_pairs],
        [r.summary for r in head_pairs],
        timer,
        paired.label,
        numbers=1 if beside is None else 2,
        versus=versus,
    )
    status, text = with_kernel_time(judgement, beside)
    reason = judgement.reason + text
    # The two numbers moved apart: more pairs may yet tell, as for an unsure time per call.
    more = judgement.needs_confirmation or (
        status is Status.UNSURE and beside is not None and design.next_batch(paired.pairs) > 0
    )
    if kernel_changes:
        reason += "; other launches than the revision's: " + "; ".join(kernel_changes)
        if status in (Status.SAME, Status.UNSURE):
            status = Status.CHANGED
    same = status is Status.SAME  # a same's bounds go with it: a changed one has none
    decided = beside is not None and status is beside.status is not judgement.status
    judgement = dataclasses.replace(
        judgement,
        # The time per call keeps its own status where the kernel time decided (a second
        # process asks each number that failed the test: Verdict.by_kernel_time).
        status=judgement.status if decided else status,
        reason=reason,
        same_low=judgement.same_low if same else None,
        same_high=judgement.same_high if same else None,
        needs_confirmation=more,
    )
    verdict = Verdict(
        status,
        judgement=judgement,
        reason=reason,
        kernel_changes=kernel_changes,
        reference_ms=paired.base_median_ms,
        history_sessions=paired.pairs,
        family=gate.family,
        baseline_binary=baseline_binary,
        same_kernels=same_kernels,
        paired=paired,
        reference_kernels=reference_kernels,
        beside=beside,
    )
    # Peak memory: the least the head's processes held against the most the revision's did.
    heads, bases = (
        [r.peak_bytes for r in records[: paired.pairs] if r.peak_bytes is not None]
        for records in (paired.head_sessions, paired.base_sessions)
    )
    if not heads or not bases:
        return verdict
    return with_memory(verdict, min(heads), max(bases), measure)
