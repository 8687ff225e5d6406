"""A reference function timed in the same process: ``gpubench(fn, x, reference=ref)``.

Through pytester with the fake timer (tests/support.py): a function's ``fake_factor`` makes
it slower, ``FAKE_SCALE`` makes the whole machine slower, so what the ratio cancels and what
it keeps is seen as users see it. The bound of the ratio's prior is unit-tested at the end.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from support import (
    KIND,
    NO_CONFIRM,
    USAGE_ERROR,
    baseline_file,
    commit,
    entry,
    git,
    medians,
    output,
    record_history,
    timer_calls,
)

from pytest_gpubench import cli
from pytest_gpubench.core.baseline import BaselineEntry, Update
from pytest_gpubench.core.records import Measurement, Versus
from pytest_gpubench.judge import pairs, rule

SUM = "test_bench.py::test_sum"
RATIO = SUM + "#vs-reference"

# work is 0.8 of its reference's time (the fake timer multiplies by fake_factor).
BENCH = """
calls = {{"work": 0, "ref": 0}}


def work(n):
    calls["work"] += 1
    return sum(range(n))


work.fake_factor = {factor}


def ref(n):
    calls["ref"] += 1
    return n * (n - 1) // 2


def test_sum(gpubench):
    assert gpubench(work, 100, reference=ref) == 4950
"""


def bench(pytester: pytest.Pytester, factor: float = 0.8) -> None:
    pytester.makepyfile(test_bench=BENCH.format(factor=factor))


def report(pytester: pytest.Pytester) -> dict[str, dict[str, object]]:
    results = json.loads((pytester.path / "out.json").read_text())["results"]
    return {r["key"]: r for r in results}


# --- the fixture ----------------------------------------------------------------------------


def test_without_the_flag_the_reference_is_not_run(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench=BENCH.format(factor=1.0)
        + """

def test_calls():
    assert calls == {"work": 1, "ref": 0}
"""
    )
    fake.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    assert timer_calls(fake) == []


@pytest.mark.parametrize("flag", [(), ("--gpubench",)], ids=["plain", "timed"])
def test_a_reference_that_is_no_function_is_one_line(
    fake: pytest.Pytester, flag: tuple[str, ...]
) -> None:
    fake.makepyfile("def test_a(gpubench):\n    gpubench(abs, -1, reference=3)\n")
    result = fake.runpytest(*flag)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "invalid gpubench reference=3 in test_a: expected a function, called with the "
            "same arguments as the one timed, e.g. reference=torch.nn.functional.gelu"
        ]
    )
    assert "Traceback" not in output(result) and "def test_a" not in output(result)


def test_an_error_of_the_reference_says_it_came_from_the_reference(
    fake: pytest.Pytester,
) -> None:
    fake.makepyfile(
        test_bench="""
def work(n, block=128):
    return n


def ref(n):
    return n


def test_sum(gpubench):
    gpubench(work, 100, reference=ref, block=64)
"""
    )
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TypeError: ref() got an unexpected keyword argument 'block'",
            "*in the reference= function of gpubench in test_sum, called with the timed "
            "function's arguments",
        ]
    )


@pytest.mark.parametrize("name", ["vs-reference", "fp16#vs-reference"])
def test_the_name_of_a_ratio_is_reserved(fake: pytest.Pytester, name: str) -> None:
    fake.makepyfile(f"def test_a(gpubench):\n    gpubench(abs, -1, name={name!r})\n")
    result = fake.runpytest("--gpubench")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            f"gpubench measurement name {name!r} in test_a is reserved for the ratio to a "
            "reference function; choose another name"
        ]
    )


def test_the_ratio_is_a_measurement_of_its_own(fake: pytest.Pytester) -> None:
    bench(fake)
    result = fake.runpytest(
        "--gpubench", "--gpubench-json=out.json", "--gpubench-benchmark-json=bench.json"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum  *  cuda-graph  *800 µs * new *",
            "test_sum#vs-reference  *cuda-graph:ratio  *0.800x (800 µs vs 1.00 ms) * new *",
            "gpubench: 2 new (*)",
        ]
    )
    found = report(fake)
    ratio = found[RATIO]
    assert ratio["timer"] == "cuda-graph:ratio" and ratio["test"] == "test_sum#vs-reference"
    versus = ratio["versus"]
    assert versus == {  # the medians of the pairs' samples (the fake timer's noise: 0.05%)
        "fn_ms": pytest.approx(0.8, rel=2e-3),
        "reference_ms": pytest.approx(1.0, rel=2e-3),
        "fn_launches": 1,
        "reference_launches": 1,
    }
    # Its samples are the pairs' ratios, as many as the function's samples.
    assert set(ratio["samples_ms"]) == {0.8}  # type: ignore[arg-type]
    assert len(ratio["samples_ms"]) == len(found[SUM]["samples_ms"])  # type: ignore[arg-type]
    assert ratio["gbs"] is None and ratio["peak_share"] is None
    # A ratio is no time: pytest-benchmark's file (seconds) leaves it out.
    benchmarks = json.loads((fake.path / "bench.json").read_text())["benchmarks"]
    assert [b["fullname"] for b in benchmarks] == [SUM]
    # One timer for both: built once for the pair.
    assert timer_calls(fake) == [f"auto {KIND} False"]


def test_the_ratio_is_saved_and_judged_against_its_own_history(fake: pytest.Pytester) -> None:
    bench(fake)
    record_history(fake)
    stored = entry(fake, RATIO)
    assert stored["timer"] == "cuda-graph:ratio" and medians(fake, RATIO) == [0.8] * 3
    assert stored["versus"]["reference_ms"] == pytest.approx(1.0, rel=2e-3)
    # The function's own time, as without a reference: the fake timer's noise (0.05%) is in
    # it, and not in the ratio, whose two sides it moves alike.
    assert medians(fake, SUM) == [pytest.approx(0.8, rel=2e-3)] * 3
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum  * 800 µs * 800 µs * 3 * +0.0% * 5.0% * ok *",
            "test_sum#vs-reference * 0.800x (800 µs vs 1.00 ms) * 0.800x * 3 * +0.0% * ok *",
            "gpubench: 2 ok (threshold 5%, alpha 0.01 over 2 measurements)",
        ]
    )


def test_a_slower_function_regresses_its_time_and_its_ratio(fake: pytest.Pytester) -> None:
    bench(fake)
    record_history(fake)
    bench(fake, factor=0.96)  # the function 20% slower, its reference as it was
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum regressed: 800 µs -> 960 µs (+20.0%; *",
            "test_sum#vs-reference regressed: 0.800x -> 0.960x (960 µs vs 1.00 ms) (+20.0%; *",
            "gpubench: 2 regressed (*)",
        ]
    )
    found = report(fake)
    assert found[RATIO]["judgement"]["ratio"] == pytest.approx(1.2, rel=1e-4)  # type: ignore[index]


def test_a_failing_ratio_keeps_a_trace_of_the_function_and_of_its_reference(
    fake: pytest.Pytester,
) -> None:
    """Issue 18: the evidence of a ratio's failure is both sides' call, side by side."""
    bench(fake)
    record_history(fake)
    bench(fake, factor=0.96)
    result = fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=out.json")
    result.assert_outcomes(failed=1)
    found = report(fake)
    ratio, time = found[RATIO], found[SUM]
    assert isinstance(ratio["trace"], str) and isinstance(ratio["reference_trace"], str)
    assert ratio["reference_trace"].endswith(".reference.trace.json")
    assert isinstance(time["trace"], str) and time["reference_trace"] is None
    for path in (ratio["trace"], ratio["reference_trace"], time["trace"]):
        assert json.loads(Path(path).read_text())["traceEvents"]
    assert f"evidence: the reference's, {ratio['reference_trace']}" in output(result)

    # Unchanged: a pass leaves none (a flagged ratio that passes keeps neither).
    shutil.rmtree(fake.path / "gpubench-evidence")
    bench(fake)
    fake.runpytest("--gpubench", NO_CONFIRM).assert_outcomes(passed=1)
    assert not list((fake.path / "gpubench-evidence").glob("*"))


def test_a_slower_machine_moves_the_time_and_not_the_ratio(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench(fake)
    record_history(fake)
    monkeypatch.setenv("FAKE_SCALE", "1.2")  # both functions 20% slower: another machine, day
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "test_sum regressed: 800 µs -> 960 µs (+20.0%; *",
            "test_sum  * 960 µs * 800 µs * 3 * +20.0% * regressed *",
            "test_sum#vs-reference * 0.800x (960 µs vs 1.20 ms) * 0.800x * 3 * +0.0% * ok *",
        ]
    )
    result.stdout.no_fnmatch_line("test_sum#vs-reference regressed*")


def test_named_measurements_each_with_a_reference(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
def slow(n):
    return n


slow.fake_factor = 2.0


def test_sum(gpubench):
    assert gpubench(slow, 1, name="a", reference=abs) == 1
    assert gpubench(abs, -2, name="b", reference=slow) == 2
"""
    )
    record_history(fake)
    keys = sorted(json.loads(baseline_file(fake).read_text())["benchmarks"])
    assert keys == [f"{SUM}#a", f"{SUM}#a#vs-reference", f"{SUM}#b", f"{SUM}#b#vs-reference"]
    assert medians(fake, f"{SUM}#a#vs-reference") == [2.0] * 3
    assert medians(fake, f"{SUM}#b#vs-reference") == [0.5] * 3
    result = fake.runpytest("--gpubench", NO_CONFIRM)
    result.assert_outcomes(passed=1)
    # Each measurement and each ratio is one of the family: alpha is shared four ways.
    result.stdout.fnmatch_lines(
        [
            "test_sum#a#vs-reference * 2.00x (2.00 ms vs 1.00 ms) *",
            "test_sum#b#vs-reference * 0.500x (1.00 ms vs 2.00 ms) *",
            "gpubench: 4 ok (threshold 5%, alpha 0.01 over 4 measurements)",
        ]
    )


def test_pedantic_gives_the_reference_the_setup_and_counts_pairs(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        test_bench="""
import itertools

seen = {"work": [], "ref": []}
fresh = itertools.count()


def setup():
    return (next(fresh),), {}


def work(i):
    seen["work"].append(i)
    return i


def ref(i):
    seen["ref"].append(i)
    return i


def test_sum(gpubench):
    assert gpubench.pedantic(work, setup=setup, warmup=1, rounds=4, reference=ref) == 0
    # Each call of either gets a fresh output of setup: a function that changes its inputs
    # never hands the other its changed data.
    both = seen["work"] + seen["ref"]
    assert len(set(both)) == len(both) == 2 * (1 + 1 + 4)
"""
    )
    result = fake.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1)
    found = report(fake)
    assert len(found[RATIO]["samples_ms"]) == len(found[SUM]["samples_ms"]) == 4  # type: ignore[arg-type]
    assert found[RATIO]["warmup"] == 1
    assert timer_calls(fake) == [f"auto {KIND} True"]


# A timer that times a function by the timer asked for, unless the function can only be timed
# by one (its ``only`` attribute): as auto captures a graph of one function and not another.
TIMERS_CONFTEST = """
from pytest_gpubench import Sampler


class Named:
    def __init__(self, name):
        self.name = name

    def sampler(self, workload):
        name = getattr(workload.fn, "only", None) or self.name
        ms = getattr(workload.fn, "ms", 1.0)
        return Sampler(timer=name, sample=lambda: ms)


def pytest_gpubench_make_timer(settings, device, with_setup):
    return Named("cuda-graph" if settings.timer == "auto" else settings.timer)
"""

TIMERS_BENCH = """
def work(n):
    return n


def ref(n):
    return n


work.ms, work.only, ref.only = 0.5, {work!r}, {ref!r}


def test_sum(gpubench):
    assert gpubench(work, 3, reference=ref) == 3
"""


def test_a_reference_another_timer_must_time_leaves_the_function_on_its_own(
    pytester: pytest.Pytester,
) -> None:
    """The function keeps the timer it takes alone (its history's): a reference that only
    another timer can time gives no ratio, never a function moved to that timer."""
    pytester.makeconftest(TIMERS_CONFTEST)
    pytester.makepyfile(test_bench=TIMERS_BENCH.format(work=None, ref="cupti"))
    result = pytester.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1)
    found = report(pytester)
    assert list(found) == [SUM] and found[SUM]["timer"] == "cuda-graph"
    result.stdout.fnmatch_lines(["test_sum: timed by cuda-graph: no ratio to its reference: *"])


def test_two_functions_no_timer_times_alike_get_no_ratio(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TIMERS_CONFTEST)
    pytester.makepyfile(test_bench=TIMERS_BENCH.format(work="wall", ref="cupti"))
    result = pytester.runpytest("--gpubench", "--gpubench-json=out.json")
    result.assert_outcomes(passed=1)
    assert list(report(pytester)) == [SUM]  # the function's time, and no ratio
    result.stdout.fnmatch_lines(
        [
            "test_sum: timed by wall: no ratio to its reference: the reference was timed by "
            "cupti (1.00 ms), this function by wall: a ratio of two timers' numbers is not "
            "measured",
            "gpubench: 1 new (*)",
        ]
    )


# --- what a ratio's baseline says -----------------------------------------------------------


def test_show_prints_a_ratio_and_gates_it_by_its_functions_times(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench(fake)
    record_history(fake)
    monkeypatch.chdir(fake.path)
    capsys.readouterr()
    assert cli.main(["show"]) == 0
    [line] = [x for x in capsys.readouterr().out.splitlines() if x.startswith(RATIO + " ")]
    assert line.split()[1:5] == ["cuda-graph:ratio", "3", "3", "0.800x"]
    # The bound of its prior is that of 1 ms graph timings, far tighter than the noisiest
    # table a ratio of unknown times gets: it gates 5% from three sessions.
    assert line.split()[6] == "5.0%"


def test_a_damaged_versus_in_a_baseline_is_one_line(fake: pytest.Pytester) -> None:
    bench(fake)
    record_history(fake, sessions=1)
    path = baseline_file(fake)
    data = json.loads(path.read_text())
    data["benchmarks"][RATIO]["versus"]["fn_ms"] = -1
    path.write_text(json.dumps(data))
    result = fake.runpytest("--gpubench")
    assert result.ret == USAGE_ERROR
    assert f"has an entry '{RATIO}' that has a 'versus' 'fn_ms' of -1, not a time in ms" in (
        output(result)
    )
    assert "Traceback" not in output(result)


# --- confirmation and a revision, in fresh processes ----------------------------------------


@pytest.mark.slow
def test_a_flagged_ratio_is_confirmed_in_fresh_processes(fake: pytest.Pytester) -> None:
    bench(fake)
    record_history(fake)
    bench(fake, factor=0.96)
    result = fake.runpytest("--gpubench", "--gpubench-confirm=2")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "gpubench: confirming test_sum in 2 fresh processes (2 at once)",
            "test_sum#vs-reference: confirmed in 2 fresh processes (medians 0.960x, 0.960x)",
        ]
    )


@pytest.mark.usefixtures("processes_pairing")  # the structure it was written for
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
def test_against_a_revision_both_keys_are_judged_in_pairs(fake: pytest.Pytester) -> None:
    fake.makepyfile(
        kernels="""
def work(n):
    return sum(range(n))


def ref(n):
    return n * (n - 1) // 2


work.fake_factor = 1.0
""",
        test_bench="""
from kernels import ref, work


def test_sum(gpubench):
    assert gpubench(work, 100, reference=ref) == 4950


def test_join(gpubench):
    assert gpubench(",".join, ["a", "b"], reference=lambda x: "a,b") == "a,b"
""",
    )
    fake.path.joinpath(".gitignore").write_text("__pycache__/\n.gpubench/\ntimer-calls.log\n")
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    kernels = fake.path / "kernels.py"
    kernels.write_text(kernels.read_text().replace("= 1.0", "= 1.2"))  # not committed
    result = fake.runpytest(
        "--gpubench-against=HEAD",
        "--gpubench-pairs=2",
        NO_CONFIRM,
        "--gpubench-json=out.json",
    )
    result.assert_outcomes(passed=1, failed=1)
    # The ratio's row: both sides' ratios, the change of the ratio.
    result.stdout.fnmatch_lines(["test_sum#vs-reference * 1.00x * 1.20x * +20.0%*regressed*"])
    found = report(fake)
    assert {k: r["status"] for k, r in found.items()} == {
        SUM: "regressed",
        RATIO: "regressed",
        "test_bench.py::test_join": "same",
        "test_bench.py::test_join#vs-reference": "same",
    }
    assert found[RATIO]["judgement"]["against"] == "revision"  # type: ignore[index]


# --- the ratio's prior: a bound ------------------------------------------------------------


def test_the_ratio_prior_is_sqrt2_times_the_larger_of_its_functions_priors() -> None:
    versus = Versus(fn_ms=1.0, reference_ms=0.002)
    prior = rule.prior_for(0.8, "cuda-graph:ratio", versus=versus)
    short = rule.prior_for(0.002, "cuda-graph")
    assert short.sigma > rule.prior_for(1.0, "cuda-graph").sigma
    assert prior.sigma == pytest.approx(math.sqrt(2) * short.sigma)
    # A slow session of the reference is a fast one of the ratio: both sides alike.
    rate = short.slow[0] + short.fast[0]
    assert prior.slow == prior.fast
    assert prior.slow[0] == pytest.approx(rate)
    assert prior.slow[2] == pytest.approx(math.sqrt(2) * max(short.slow[2], short.fast[2]))


def test_the_ratio_prior_goes_by_time_per_launch() -> None:
    # 10 µs of ten launches is 1 µs per launch: shorter than a 5 µs call of one.
    versus = Versus(fn_ms=0.01, reference_ms=0.005, fn_launches=10, reference_launches=1)
    prior = rule.prior_for(2.0, "cuda-graph:ratio", versus=versus)
    assert prior.sigma == pytest.approx(math.sqrt(2) * rule.prior_for(0.001, "cuda-graph").sigma)


def test_a_ratio_of_unknown_times_gets_the_noisiest_prior() -> None:
    assert rule.prior_for(1.0, "cuda-graph:ratio").sigma == pytest.approx(0.078)


def test_the_pair_prior_of_a_ratio_is_its_bound_at_its_timers_scale() -> None:
    versus = Versus(fn_ms=0.05, reference_ms=0.04)
    sigma0 = pairs.pair_sigma0(1.25, "cuda-graph:ratio", versus=versus)
    bound = rule.ratio_prior(versus, "cuda-graph", pairs.PAIR_BASIS)
    scale = pairs.PAIR_PRIOR_SCALE["cuda-graph"]
    assert sigma0 == pytest.approx(scale * pairs.prior_pair_spread(bound))
    assert sigma0 < pairs.pair_sigma0(1.25, "cuda-graph:ratio")  # without it: the noisiest
    # Kernel time in the replay: the ratio's bound is corrected as its two times' priors are.
    short = Versus(fn_ms=0.001, reference_ms=0.001)
    cupti = pairs.pair_sigma0(0.001, "cupti-graph:ratio", versus=short)
    assert cupti == pytest.approx(
        pairs.PAIR_PRIOR_SCALE["cupti-graph"]
        * pairs.prior_pair_spread(rule.ratio_prior(short, "cupti-graph", pairs.PAIR_BASIS))
    )
    # Without its two times (an old report): the noisiest prior, whole.
    assert pairs.pair_sigma0(0.001, "cupti-graph:ratio") > 3 * cupti


def test_a_ratio_measurement_round_trips_through_json() -> None:
    versus = Versus(0.123, 0.456, 2, 3)
    m = Measurement(
        key=RATIO,
        test="test_sum#vs-reference",
        timer="cupti:ratio",
        samples_ms=(0.27, 0.26, 0.28),
        warmup=1,
        calls_per_sample=1,
        threshold=0.05,
        session="s",
        versus=versus,
    )
    assert Measurement.from_json(json.loads(json.dumps(m.to_json()))) == m
    with pytest.raises(ValueError, match="'versus' 'reference_launches' of 0, not a count"):
        Measurement.from_json(
            m.to_json() | {"versus": versus.to_json() | {"reference_launches": 0}}
        )


def test_a_stored_versus_round_trips() -> None:
    m = Measurement(
        key=RATIO,
        test="t",
        timer="wall:ratio",
        samples_ms=(0.5, 0.5),
        warmup=0,
        calls_per_sample=1,
        threshold=0.05,
        session="s",
        versus=Versus(0.5, 1.0),
    )
    entry = Update.of(m, new_epoch=True).apply(None)
    assert BaselineEntry.from_json(entry.to_json(), {"s": None}).versus == m.versus  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="'versus' that is not an object"):
        BaselineEntry.from_json(entry.to_json() | {"versus": 3}, {"s": None})  # type: ignore[dict-item]
