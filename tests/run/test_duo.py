"""Two processes timing a test's calls in lockstep (run/duo.py): a real second process as
the follower, fake samplers, the leader's side in this process."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from support import KERNELS, TESTS

from pytest_gpubench.core.records import Measurement, Result, Status, Verdict
from pytest_gpubench.core.settings import MarkerSpec, MeasureSettings
from pytest_gpubench.run.call import Call, Untimed
from pytest_gpubench.run.children import DUO_VARIABLE, ChildRun
from pytest_gpubench.run.duo import Follower, Leader, Offer, held_samplers
from pytest_gpubench.run.sides import DuoError, Held
from pytest_gpubench.timing.engine import Again, Plan, Sampler, Workload, collect_pair
from pytest_gpubench.versus.ab import BASE, HEAD
from pytest_gpubench.versus.lockstep import _sides_of, child_results

# Every test here starts a real second process: the slow selection.
pytestmark = pytest.mark.slow

FORK = multiprocessing.get_context("fork")


def follow(conn: Connection, offers: list[Offer], ms: dict[str, float], report: Connection) -> None:
    """The follower: serve each offer with samplers of ``ms[key]`` ms (a key missing: its
    sampler cannot be built), then end; what it timed, and how many samples, to ``report``."""
    follower = Follower(conn, wait_s=20)
    taken: dict[str, int] = {}

    def sampler_of(key: str, timer: str) -> Sampler:
        value = ms[key]  # KeyError: the call cannot be timed

        def sample() -> float:
            taken[key] = taken.get(key, 0) + 1
            return value

        return Sampler(timer=timer, sample=sample, note=f"{key} there")

    timed = [sorted(follower.serve(offer, sampler_of)) for offer in offers]
    follower.end()
    report.send((timed, taken))


@pytest.fixture
def duo() -> Iterator[Callable[..., tuple[Leader, Connection]]]:
    """Start a follower process with its offers and times: the leader and the follower's
    report."""
    started: list[multiprocessing.process.BaseProcess] = []

    def start(
        offers: list[Offer], ms: dict[str, float], order: list[str]
    ) -> tuple[Leader, Connection]:
        mine, theirs = FORK.Pipe()
        report, reported = FORK.Pipe()
        process = FORK.Process(target=follow, args=(theirs, offers, ms, reported), daemon=True)
        process.start()
        started.append(process)
        return Leader(mine, order, wait_s=20), report

    yield start
    for process in started:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()


@pytest.mark.slow
def test_each_process_draws_its_own_pads() -> None:
    """The pads that place a pair's inputs anew are drawn afresh in each process: drawn
    alike, a test's pairs landed in the same places in every process, and what a place did
    to a side repeated in each (docs/verdict.md, "Lockstep pairs")."""
    code = (
        "from pytest_gpubench.run.duo import Same; from pytest_gpubench.run.sides import "
        "Lockstep; print([Lockstep(Same()).draw.randrange(1 << 30) for _ in range(4)])"
    )
    drawn = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(drawn) == 2, drawn


def test_a_call_is_timed_alternately_with_the_followers_call_of_its_key(
    duo: Callable[..., tuple[Leader, Connection]],
) -> None:
    untimed = (Untimed(0.5, 0.01), Untimed(0.25))
    offered = Offer("t::a", ("k1", "k2"), untimed=untimed, inputs=(("(4,) float32",), ()))
    leader, report = duo([offered], {"k1": 2.0, "k2": 4.0}, ["t::a"])
    offer = leader.offer("t::a")
    assert offer == offered
    here = Sampler(timer="fake", sample=lambda: 1.0)
    there = leader.sampler("k1", "fake")
    assert (there.timer, there.note, there.peak_bytes and there.peak_bytes()) == (
        "fake",
        "k1 there",
        None,
    )
    pair = collect_pair(here, there, Plan(warmup=1, rounds=5))
    there.close()
    leader.done("t::a")
    assert pair.ratios == (0.5,) * 5 and pair.second.samples_ms == (2.0,) * 5
    timed, taken = report.recv()
    assert timed == [["k1"]] and taken == {"k1": 6}  # one warm-up pair, five pairs


def test_tests_on_one_side_only_are_found_missing_or_skipped(
    duo: Callable[..., tuple[Leader, Connection]],
) -> None:
    """The follower offers x (not the leader's), a and c; the leader runs a, b, c: a and c
    pair, b is the leader's alone, x is skipped; after the follower's end, none."""
    offers = [Offer("t::x", ()), Offer("t::a", ("k",)), Offer("t::c", ("k",), failed="boom")]
    leader, report = duo(offers, {"k": 1.0}, ["t::a", "t::b", "t::c", "t::d"])
    assert leader.offer("t::a") == Offer("t::a", ("k",))
    leader.done("t::a")
    assert leader.offer("t::b") is None
    assert leader.offer("t::c") == Offer("t::c", ("k",), "boom")
    leader.done("t::c")
    assert leader.offer("t::d") is None
    assert report.recv() == ([[], [], []], {})


def test_a_call_the_follower_cannot_time_is_an_error_and_it_goes_on(
    duo: Callable[..., tuple[Leader, Connection]],
) -> None:
    leader, report = duo([Offer("t::a", ("gone", "k"))], {"k": 3.0}, ["t::a"])
    assert leader.offer("t::a") is not None
    with pytest.raises(DuoError, match="could not time its call: KeyError: 'gone'"):
        leader.sampler("gone", "fake")
    there = leader.sampler("k", "fake")
    assert there.sample() == 3.0
    there.close()
    leader.done("t::a")
    assert report.recv() == ([["k"]], {"k": 1})


def test_a_follower_gone_or_silent_is_said() -> None:
    mine, theirs = FORK.Pipe()
    process = FORK.Process(target=os._exit, args=(3,))
    process.start()
    process.join()
    theirs.close()  # the follower's end closed, as its exit closes it
    with pytest.raises(DuoError, match="the revision's process ended"):
        Leader(mine, ["t::a"], wait_s=5).offer("t::a")
    silent, _kept = FORK.Pipe()
    with pytest.raises(DuoError, match="the revision's process sent nothing for 1 s"):
        Leader(silent, ["t::a"], wait_s=1).offer("t::a")


def test_a_leader_gone_ends_the_follower() -> None:
    mine, theirs = FORK.Pipe()
    mine.close()
    with pytest.raises(DuoError, match="the working tree's process ended"):
        Follower(theirs, wait_s=5).serve(Offer("t::a", ()), lambda key, timer: None)  # type: ignore[arg-type,return-value]


@pytest.mark.slow
@pytest.mark.parametrize("head_leads", [True, False])
def test_two_pytest_processes_time_each_call_in_lockstep(
    fake: pytest.Pytester, tmp_path: Path, head_leads: bool
) -> None:
    """A duo as its parent will start it (by hand here), each call taking 3 pairs: the
    working tree's pytest leads and the revision's (a copy whose kernel is 6% faster)
    follows, or the other way round; the leader's results hold both sides of each call's
    pairs, paired in its process, its own under the test's key, the later ones under their
    number."""
    fake.makepyfile(kernels=KERNELS.format(factor=1.06), test_bench=TESTS)
    base = tmp_path / "revision"
    shutil.copytree(fake.path, base)
    (base / "kernels.py").write_text(KERNELS.format(factor=1.0))
    socket, key = tmp_path / "duo.sock", os.urandom(16).hex()

    def start(role: str, side: str, cwd: Path) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "PYTEST_GPUBENCH_CHILD": str(tmp_path / f"{role}.json"),
            DUO_VARIABLE: f"{role} {side} {key} 3 {socket}",
        }
        return subprocess.Popen(
            [sys.executable, "-m", "pytest", "--gpubench", "-p", "no:randomly"],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    if head_leads:
        leader, follower = start("leader", "head", fake.path), start("follower", "base", base)
    else:  # the revision's leads: its own side is the revision's
        leader, follower = start("leader", "base", base), start("follower", "head", fake.path)
    factor = 1.06 if head_leads else 1 / 1.06
    try:
        said = [p.communicate(timeout=120)[0] for p in (leader, follower)]
    finally:  # a hung duo: no process of this test outlives it
        for process in (leader, follower):
            if process.poll() is None:
                process.kill()
                process.wait()
    assert (leader.returncode, follower.returncode) == (0, 0), said
    document = json.loads((tmp_path / "leader.json").read_text())
    medians = {
        r.measurement.key: r.measurement.summary.median_ms
        for r in (Result.from_dict(entry) for entry in document["results"])
    }
    for again in ("", "@again1", "@again2"):
        sums = [medians[f"test_bench.py::test_sum{again}{side}"] for side in ("", "@revision")]
        assert sums[0] / sums[1] == pytest.approx(factor, rel=0.005), medians
        joins = [medians[f"test_bench.py::test_join{again}{side}"] for side in ("", "@revision")]
        assert joins[0] / joins[1] == pytest.approx(1.0, rel=0.005), medians
    assert not any("@again3" in key for key in medians)


def test_the_follower_places_a_calls_inputs_anew_for_each_later_pair() -> None:
    """A held call's first sampler is of its inputs as the test gave them; each later one
    (a pair set up again) of copies placed anew, held until that sampler closes, and made
    as the first was (the first's Sampler.again)."""
    torch = pytest.importorskip("torch")
    x = torch.empty(8, device="meta")  # a GPU's tensor, as placed_anew sees it
    call = Call(key="t::a", test="t::a", spec=MarkerSpec(MeasureSettings()))
    held = {"t::a": Held(Workload(fn=print, args=(x,)), call)}
    given: list[tuple[Workload, Again | None]] = []
    closed: list[str] = []

    def again(workload: Workload) -> Sampler:
        raise AssertionError("made by remote_sampler, not here")

    def make(workload: Workload, call: Call, timer: str, like: Again | None) -> Sampler:
        given.append((workload, like))
        close = lambda: closed.append(timer)  # noqa: E731
        return Sampler(timer=timer, sample=lambda: 1.0, close=close, again=again)

    sampler_of = held_samplers(held, make, random.Random(0))
    first = sampler_of("t::a", "fake")
    assert given[0][0].args[0] is x and given[0][1] is None
    first.close()
    later = sampler_of("t::a", "fake")
    assert given[1][0].args[0] is not x and given[1][0].args[0].shape == x.shape
    assert given[1][1] is again
    later.close()
    assert closed == ["fake", "fake"]
    with pytest.raises(KeyError):
        sampler_of("t::gone", "fake")


def test_a_duos_pairs_reach_its_parent_under_their_numbers_whatever_the_names() -> None:
    """A duo leader's results (child_results) read back pair by pair (_sides_of), a name
    holding "@again" included, with the inputs a call was given otherwise on each side."""

    def m(key: str, ms: float) -> Measurement:
        return Measurement(
            key=key,
            test=key,
            timer="fake",
            samples_ms=(ms,) * 20,
            warmup=0,
            calls_per_sample=1,
            threshold=0.05,
            session="s",
        )

    first = {"t::a#x@again": m("t::a#x@again", 2.0), "t::b": m("t::b", 3.0)}
    base = {key: m(key, 1.0) for key in first}
    more = {"t::b": [(m("t::b", 3.1), m("t::b", 1.1)), (m("t::b", 3.2), m("t::b", 1.2))]}
    head = tuple(Result(measured, Verdict(Status.NEW)) for measured in first.values())
    results = child_results(head, base, more, inputs={"t::b": "argument 1: 1 -> 2"})
    run = ChildRun(tuple((r, True) for r in results))
    pairs, changed = _sides_of(run)
    assert [sorted(p[HEAD]) for p in pairs] == [sorted(first), ["t::b"], ["t::b"]]
    assert [p[BASE]["t::b"].summary.median_ms for p in pairs] == [1.0, 1.1, 1.2]
    assert pairs[0][HEAD]["t::a#x@again"].summary.median_ms == 2.0
    assert changed == {"t::b": "argument 1: 1 -> 2"}


def test_the_followers_later_sampler_is_made_as_its_first_was(tmp_path: Path) -> None:
    """remote_sampler with the first sampler's Sampler.again: made by it, the call's
    slowness told (a slow call's graph is not warmed up); one by another timer than the
    leader's is closed and the timer made instead; no again: the timer. The slowness is the
    fixture's untimed calls' (Call.untimed): no sampler made calls the function for it."""
    from pytest_gpubench.core.settings import Settings
    from pytest_gpubench.run.session import BenchSession

    probed: list[bool] = []

    class Timer:
        name = "fake"

        def sampler(self, workload: Workload) -> Sampler:
            probed.append(workload.slow)
            return Sampler(timer="fake", sample=lambda: 1.0)

    settings = Settings.resolve({"enabled": True}, {}, tmp_path)
    session = BenchSession(settings, tmp_path, lambda *a: Timer(), lambda: False)
    spec = MarkerSpec(MeasureSettings())
    slow = Call(key="t::a", test="t::a", spec=spec, untimed=Untimed(60.0, 60.0))
    called: list[object] = []
    workload = Workload(fn=called.append, args=(1,))
    told: list[bool] = []
    closed: list[str] = []

    def again(timer: str) -> Again:
        def make(workload: Workload) -> Sampler:
            told.append(workload.slow)
            return Sampler(timer=timer, sample=lambda: 2.0, close=lambda: closed.append(timer))

        return make

    assert session.remote_sampler(workload, slow, "fake", again("fake")).sample() == 2.0
    assert told == [True] and probed == [] and closed == []
    assert session.remote_sampler(workload, slow, "fake", again("cupti")).sample() == 1.0
    assert closed == ["cupti"] and probed == [True]
    assert session.remote_sampler(workload, slow, "fake").sample() == 1.0
    compiled = Call(key="t::a", test="t::a", spec=spec, untimed=Untimed(60.0, 0.001))
    assert session.remote_sampler(workload, compiled, "fake").sample() == 1.0
    assert probed == [True, True, False] and called == []
