"""The verdict against a revision on recorded GPU sessions (bench/pair_resample.py), and
in lockstep on recorded processes (bench/lockstep_resample.py).

A/A runs are every block of consecutive recorded sessions (exact counts, no seed) or seeded
draws; each bound is checked with runs enough that it allows a count below one (0.1% of 324
runs) or a few. The constants of judge/pairs.py must be the ones the script fits, and the
tables of docs/verdict.md ("The verdict against a revision") the committed run's
(python bench/pair_resample.py --json bench/results/pair-resample.json).
"""

from __future__ import annotations

import json
import math

import pytest
from support import ROOT, bench_module

from pytest_gpubench.judge import pairs

# These resample the recorded sessions: the slow selection.
pytestmark = pytest.mark.slow

RESULTS = ROOT / "bench" / "results" / "pair-resample.json"


@pytest.fixture(scope="module")
def pr():
    return bench_module("pair_resample")


@pytest.fixture(scope="module")
def histories(pr):
    return pr.load()


@pytest.fixture(scope="module")
def committed() -> dict:
    return json.loads(RESULTS.read_text(encoding="utf-8"))


def test_the_recorded_histories_are_there(histories) -> None:
    shapes = sorted((h.model, h.suite, len(h.keys)) for h in histories)
    assert shapes == [
        ("H100", "example", 54),
        ("H100", "example", 54),
        ("H100", "user", 12),
        ("H100", "user", 12),
        ("H200", "example", 54),
        ("H200", "example", 54),
        ("H200", "user", 13),
        ("H200", "user", 13),
    ]
    assert min(h.x.shape[1] for h in histories) >= 16


def test_the_constants_of_pairs_py_are_the_fit(pr, histories, committed) -> None:
    fit = pr.fit_prior(histories)
    assert fit.scales == pairs.PAIR_PRIOR_SCALE
    assert fit.weight == pairs.PAIR_PRIOR_WEIGHT
    assert committed["fit"]["scales"] == fit.scales
    assert committed["fit"]["weight"] == fit.weight
    design = pairs.PairDesign()
    assert committed["design"] == [design.first, design.batch, design.cap]


@pytest.mark.parametrize("threshold", [0.05, 0.03, 0.02])
def test_unchanged_54_test_runs_do_not_fail(pr, histories, committed, threshold) -> None:
    """Every block of the example suite's four histories (324 runs): 0.1% allows none. The
    row is the committed run's (the enumeration is exact)."""
    row = pr.aa_row(histories, pr.Config(threshold=threshold), replicates=1, runs=0)
    assert row["runs"] == 324
    assert row["false_runs"] == 0
    assert row in committed["aa"]


@pytest.mark.parametrize("threshold", [0.05, 0.02])
def test_gross_outliers_rarely_fail_a_54_test_run(pr, histories, threshold) -> None:
    example = [h for h in histories if h.suite == "example"]
    cfg = pr.Config(threshold=threshold, outliers=True)
    outcome = pr.simulate(example, cfg, replicates=2)
    assert outcome.runs == 648
    assert outcome.runs_with(1) <= 0.005 * outcome.runs


def test_unchanged_500_test_runs_rarely_fail(pr, histories) -> None:
    outcome = pr.simulate(histories, pr.Config(tests=500), runs=200)
    assert outcome.runs_with(1) <= 0.01 * outcome.runs


@pytest.mark.parametrize(
    "threshold, slowdown, low_us, high_us, power",
    [
        # Issue 17: +5% from 5 us in ~100% of runs; the recorded sessions give 95.6% at
        # 20-100 us and 74.7% at 5-20 us at the default threshold (docs/verdict.md).
        (0.05, 0.05, 20, math.inf, 0.95),
        (0.03, 0.05, 20, math.inf, 0.97),
        # Issue 17: +3% from 20 us in >= 90%: met from 100 us; 20-100 us gives 77.9%, the
        # H100's graph-timed kernels (slow excursions in 30-40% of sessions) 56%.
        (0.03, 0.03, 100, math.inf, 0.90),
        (0.02, 0.03, 100, math.inf, 0.90),
        (0.03, 0.03, 20, 100, 0.75),
    ],
)
def test_slowdowns_are_caught(pr, histories, threshold, slowdown, low_us, high_us, power) -> None:
    outcome = pr.simulate(histories, pr.Config(threshold=threshold, slowdown=slowdown))
    sel = (outcome.duration_us >= low_us) & (outcome.duration_us < high_us)
    assert sel.sum() > 300
    assert (outcome.status[sel] == 1).mean() >= power


def test_verdict_md_shows_the_committed_run(pr, committed) -> None:
    text = (ROOT / "docs" / "verdict.md").read_text(encoding="utf-8")
    lines = (
        pr.aa_lines(committed["aa"])
        + pr.power_lines(committed["power"])
        + pr.detail_lines(committed["detail"], (0.03, 0.03))
        + pr.design_lines(committed["designs"])
        + pr.beyond_lines(committed["beyond"])
    )
    for line in lines:
        assert line in text, line


RATIO_SESSIONS = ROOT / "bench" / "results" / "h100-2026-11-24e" / "ratio-sessions.tgz"


def test_ratios_of_recorded_sessions_in_a_pairs_are_same_without_a_false_verdict() -> None:
    """The example suite's 42 ratios to their reference, 10 sessions of one H100, judged as
    A/A pairs at 3 pairs (every block): no false verdict, and nearly all same at the first
    look (at scale 1 instead of the timer's, none of the 27 cupti-graph ratios was)."""
    import tarfile

    module = bench_module("ratio_spread")
    with tarfile.open(RATIO_SESSIONS) as archive:
        member = archive.extractfile("example-baselines/sm90-nvidia-h100-80gb-hbm3.json")
        assert member is not None
        benchmarks = json.loads(member.read())["benchmarks"]
    found = module.ratio_pairs(benchmarks, 3)
    runs = sum(found.values())
    assert runs == 42 * 40  # 10 sessions: 10 starts, two directions, two labellings
    assert not [k for k in found if k[1] in ("regressed", "improved")], found
    same = sum(n for (_, verdict), n in found.items() if verdict == "same")
    assert same >= 0.95 * runs, found


@pytest.mark.slow
def test_the_lockstep_rule_and_its_second_process_on_recorded_processes() -> None:
    """bench/lockstep_resample.py on the committed runs' unchanged tests (A/A runs, and the
    tests of slowdown runs that nothing was planted in). By the design of pairs from fresh
    processes (1, then 4 more; the default until 2026-12-07), on every recorded process: at
    2% and 5% the failures expected after the second process stay under one in 540
    processes (the A/A target: no false failure in 10 runs of 54 tests), at 1% under one in
    400; with +5% planted at 2%, a second process (another run's) bears out nearly every
    failure of a process's own pairs and fails most of those left unsure beyond the
    threshold. By the default (1, then up to 9 more, 4 at a time), on the processes it
    decides within their recorded pairs: none
    expected at any threshold, no false `improved` at 2% or 5%, and +1% at 1% caught from
    100 µs in 9 of 10. docs/verdict.md
    holds both tables as the script prints them."""
    lr = bench_module("lockstep_resample")
    found = lr.processes(lr.committed_archives())
    assert len(found) >= 1500 and len({p.key for p in found}) >= 150
    # The A/A runs since 2026-12-02 took the kernel time too: judged on both numbers.
    assert sum(bool(p.kernel) for p in found) >= 80
    rows = lr.table(found, pairs.LOCKSTEP_FRESH_DESIGN)
    for threshold, bound in ((0.02, 540), (0.05, 540), (0.01, 400)):
        unchanged = [r for r in rows if (r["shift"], r["threshold"]) == (0.0, threshold)]
        used = sum(r["used"] for r in unchanged)
        assert used >= 800 and sum(r["failures"] for r in unchanged) < used / bound
    planted = [r for r in rows if (r["shift"], r["threshold"]) == (0.05, 0.02)]
    flagged, asked = (sum(r[k] for r in planted) for k in ("flagged", "asked"))
    # Unsure beyond the threshold, a second process decides: most of those fail too.
    assert sum(r["asked"] for r in rows if r["shift"] == 0) >= 10 and asked >= 100
    assert flagged >= 400 and sum(r["failures"] for r in planted) >= 0.95 * flagged + asked / 2
    default = lr.table(found)
    for threshold in (0.01, 0.02, 0.05):
        unchanged = [r for r in default if (r["shift"], r["threshold"]) == (0.0, threshold)]
        assert sum(r["used"] for r in unchanged) >= 300
        assert sum(r["failures"] for r in unchanged) < 0.5
        # A false `improved` is asked of no second process: none at 2% or 5%, and at 1%
        # only the 6 of two effects since removed (docs/verdict.md).
        assert sum(r["improved"] for r in unchanged) == (6 if threshold == 0.01 else 0)
    [long] = [
        r for r in default if (r["shift"], r["threshold"], r["bin"]) == (0.01, 0.01, ">= 100 µs")
    ]
    assert long["failures"] >= 0.9 * long["used"]
    verdict = (ROOT / "docs" / "verdict.md").read_text(encoding="utf-8")
    assert lr.markdown(rows) in verdict and lr.markdown(default) in verdict


def test_pairs_set_up_again_read_alike_by_index_while_the_pads_were_seeded_alike() -> None:
    """The processes recorded while every process drew its pads from a stream seeded alike
    (through 2026-12-07): a pair's difference less its process's mean reads alike at the
    same index across processes for far more tests than chance gives (docs/verdict.md,
    "Lockstep pairs": 10 of 56 at p < 0.01)."""
    lr = bench_module("lockstep_resample")
    # Folder names: GPU-date[letter]; h100-2026-12-07 is the last of the seeded pads.
    seeded = [a for a in lr.committed_archives() if a.parent.name.split("-", 1)[1] <= "2026-12-07"]
    rows = lr.pair_places(lr.processes(seeded))
    assert len(rows) == 56 and sum(r[0] < 0.01 for r in rows) == 10
    assert rows[0][1] == "test_legacy_stream_kernel" and rows[0][0] < 1e-50


@pytest.mark.slow
def test_a_large_copys_pairs_swing_by_which_side_was_copied_first() -> None:
    """On the H100 of h100-2026-12-07c (each side copied first in turn) the user suite's
    16 MiB legacy-stream copy's pairs set up again swing by about 3% with the copy order
    (the caching allocator's block, bench/placement_probe.py): with the order taken out of
    its pairs their spread is a sixth of it (docs/verdict.md, "Each side is copied first
    in turn": the judge does not take the order out yet)."""
    lr = bench_module("lockstep_resample")
    archives = sorted((ROOT / "bench" / "results" / "h100-2026-12-07c").glob("plan-*.tgz"))
    rows = {r[0]: r for r in lr.copy_order(lr.processes(archives))}
    _, processes, plain, residual, effect = rows["test_legacy_stream_kernel"]
    assert processes == 5 and plain > 2.5 and residual < 1.0 and abs(effect) > 2.5
