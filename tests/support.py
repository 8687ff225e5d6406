"""Helpers shared by the pytester tests: the fake timer's conftest and readers of results.

The fake timer comes from a conftest implementing ``pytest_gpubench_make_timer``. It reads its
name, scale, noise, seed and cost from environment variables at sampling time, so one test can
save a baseline and re-run against it at other speeds, in process; and it models the shift of
a whole process (issue 9): a factor drawn once per pytest session, shared by everything that
session measures, different in every fresh process the plugin starts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import pytest_gpubench.timing.device
import pytest_gpubench.timing.gpus
from pytest_gpubench.core.kernels import Launch, fingerprint
from pytest_gpubench.core.records import Context, Evidence, Floors, Measurement

# tests/, this file's folder (on sys.path, through its conftest.py, for the tests in its
# subfolders, which mirror the packages), and the project's root above it.
TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent

USAGE_ERROR = pytest.ExitCode.USAGE_ERROR
MARKDOWN_HEADER = (
    "| test | timer | median | noise | spread | baseline | sessions | change | gate | verdict "
    "| GB/s | % peak |"
)
# The fake timer works on any machine; what the plugin detects depends on this one.
CUDA = pytest_gpubench.timing.gpus.cuda_available()
KIND = "cuda" if CUDA else "cpu"
# The name the fake timer takes in the ``fake`` fixture: the rule's prior depends on the timer
# name, and a 1 ms cuda-graph measurement has a tight one (rule.GRAPH_POINTS), so a history of
# three sessions (record_history) gates 5%. An unknown name ("fake") gets the noisiest table
# (7.8%): such a test is "not gated" with a short history.
FAKE_NAME = "cuda-graph"
# Where a test does not test confirmation in fresh processes (each costs seconds).
NO_CONFIRM = "--gpubench-confirm=0"

FAKE_CONFTEST = '''
import itertools
import json
import math
import os
import random
import time
from pathlib import Path

import pytest

from pytest_gpubench import Energy, Launch, Profile, Sampler

LOG = Path(__file__).with_name("timer-calls.log")
if os.environ.get("PYTEST_GPUBENCH_CHILD"):  # imported by a fresh process the plugin started
    pids = os.environ.get("FAKE_CHILD_PIDS")
    if pids:
        with open(pids, "a") as log:
            log.write(f"{os.getpid()}\\n")
    time.sleep(float(os.environ.get("FAKE_CHILD_IMPORT_S", "0")))
if os.environ.get("FAKE_PLACED"):  # where inputs sit moves time here too, as on a GPU
    import pytest_gpubench.versus.lockstep as lockstep

    lockstep.PLACED_KINDS = frozenset({"cuda", "cpu"})
if os.environ.get("FAKE_TRACE_S"):  # an evidence trace takes this long (a profiler's start)
    import pytest_gpubench.run.session as measuring_session

    untraced = measuring_session.trace

    def slow_trace(*args, **kwargs):
        time.sleep(float(os.environ["FAKE_TRACE_S"]))
        return untraced(*args, **kwargs)

    measuring_session.trace = slow_trace
# Set once per pytest session (one process; a fresh one for each child the plugin starts).
BESIDE_SEEDS_FROM = 1000 * int(os.environ.get("FAKE_SEED", "1"))
BESIDE_SEEDS = itertools.count(BESIDE_SEEDS_FROM)
CHILD = None  # the results file of a child the plugin started, None in the user's own run
SHIFT = 1.0  # this process's factor
# A function marked ``fake_scattered``: in the user's own run each of its samplers takes
# the next of these factors (a disturbed stretch of one process; lockstep tests): scattered
# so that a lockstep design's cap of 10 pairs from that process leaves an 8% slowdown unsure.
SCATTER = itertools.cycle([1.0, 0.9, 1.17, 0.91, 1.1])


@pytest.hookimpl(trylast=True)  # after the plugin's: it knows whether this is a child
def pytest_configure(config):
    """Draw this process's shift: log-normal with sd FAKE_SHIFT, from os.urandom, or, with
    FAKE_SHIFT_SEED, from that seed and which process this is (the parent, or the child
    writing child-<i>.json): deterministic, and still different in every process."""
    global CHILD, SHIFT
    CHILD = config.pluginmanager.get_plugin("gpubench-measuring").settings.child
    sd = float(os.environ.get("FAKE_SHIFT", "0"))
    seed = os.environ.get("FAKE_SHIFT_SEED")
    where = Path(CHILD).name if CHILD else "parent"
    rng = random.Random(f"{seed}:{where}" if seed is not None else os.urandom(16))
    SHIFT = math.exp(rng.gauss(0.0, sd))
    if CHILD:  # a fresh process the plugin started: FAKE_CHILD_START_S, FAKE_CHILD_CRASH
        time.sleep(float(os.environ.get("FAKE_CHILD_START_S", "0")))
        if os.environ.get("FAKE_CHILD_CRASH"):
            raise RuntimeError("no GPU here")


def factor_of_this_test(variable):
    """The factor of the running test in a JSON object {test name: factor} (the test's name
    from PYTEST_CURRENT_TEST, 'test_bench.py::test_sum (call)'); 1 for tests not in it."""
    name = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0]
    return float(json.loads(os.environ.get(variable) or "{}").get(name, 1.0))


class FakeTimer:
    """FAKE_BASE_MS * scales * shift * exp(noise * gauss): deterministic for a given FAKE_SEED
    (and FAKE_SHIFT_SEED). FAKE_SCALE applies to every test, FAKE_SCALES to the tests it names
    (a change in their code); FAKE_PARENT_SCALES only in the user's own process, not in the
    plugin's children: a shift confined to one process. Each sample also sleeps FAKE_SLEEP_S
    for real (a slow function, for the budget); FAKE_KERNELS says what a call launches;
    FAKE_PEAK_BYTES, a JSON object {test name: bytes}, what one call of the tests it names
    holds at its peak (the others: the device's allocator, none on a CPU), or the function's
    own ``fake_peak_bytes``; FAKE_ENERGY, a JSON object {test name: watts}, the power a call
    of the tests it names draws (its energy per call: watts x time per call). With
    FAKE_AGAIN_LOG, a file, a sampler can be made again (Sampler.again, as a graph's is): a
    line 'made FUNCTION' or 'again FUNCTION' there for each sampler made, ' slow' after it
    where the sampler was asked for a slow call's (Workload.slow). A sampler batches the
    function's ``fake_calls`` calls per sample (1), or the count it is made again with."""

    def __init__(self):
        self.name = os.environ.get("FAKE_NAME", "fake")

    def sampler(self, workload, made="made", count=None):
        again = None
        log = os.environ.get("FAKE_AGAIN_LOG")
        calls = count or getattr(workload.fn, "fake_calls", 1)
        if log:
            with open(log, "a") as out:
                slow = " slow" if workload.slow else ""
                out.write(f"{made} {getattr(workload.fn, '__name__', '?')}{slow}\\n")
            again = lambda other, count=None: self.sampler(other, "again", count or calls)
        scale = float(os.environ.get("FAKE_SCALE", "1.0")) * SHIFT
        scale *= factor_of_this_test("FAKE_SCALES")
        # A factor in the code itself: a commit that makes a function slower (A/B tests).
        scale *= getattr(workload.fn, "fake_factor", 1.0)
        if CHILD is None:
            scale *= factor_of_this_test("FAKE_PARENT_SCALES")
            scale *= next(SCATTER) if getattr(workload.fn, "fake_scattered", False) else 1.0
        base_ms = float(os.environ.get("FAKE_BASE_MS", "1.0"))
        noise = float(os.environ.get("FAKE_NOISE", "0.0005"))
        sleep_s = float(os.environ.get("FAKE_SLEEP_S", "0"))
        rng = random.Random(os.environ.get("FAKE_SEED", "1"))

        def sample():
            workload.prepare()()  # run the workload, so tests can count its calls
            time.sleep(sleep_s)
            return base_ms * scale * math.exp(rng.gauss(0.0, noise))

        name = os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[-1].split(" ")[0]
        peak = json.loads(os.environ.get("FAKE_PEAK_BYTES") or "{}").get(name)
        peak = getattr(workload.fn, "fake_peak_bytes", peak)  # in the code: a commit's change
        watts = json.loads(os.environ.get("FAKE_ENERGY") or "{}").get(name)
        beside = None
        share = os.environ.get("FAKE_BESIDE")
        if share:  # its kernel time: FAKE_BESIDE of its time ("fail": taking it fails)
            # Its own noise: each sampler's seed drawn anew (both sides share FAKE_SEED).
            seed = next(BESIDE_SEEDS)
            # FAKE_BESIDE_FAIL_FROM: samplers from that one on (0 the first) fail to take it.
            fails = seed - BESIDE_SEEDS_FROM >= int(os.environ.get("FAKE_BESIDE_FAIL_FROM", 10**9))
            kernel_ms = None if share == "fail" or fails else base_ms * SHIFT * float(share)
            kernel_ms = kernel_ms and kernel_ms * getattr(workload.fn, "fake_kernel_factor", 1.0)
            beside = FakeBeside(kernel_ms, random.Random(seed), noise)
        # Its share of time waiting for a CPU: FAKE_CPU_WAIT, FAKE_CHILD_CPU_WAIT in a child;
        # FAKE_YARDSTICK_CPU_WAIT, where set, for the session's yardsticks (a CPU's numpy
        # matmul and copies: the floors of flops= and bytes=).
        wait = os.environ.get("FAKE_CHILD_CPU_WAIT" if CHILD else "FAKE_CPU_WAIT")
        if getattr(workload.fn, "__name__", "") in ("matmul", "copyto", "copy_"):
            wait = os.environ.get("FAKE_YARDSTICK_CPU_WAIT", wait)
        return Sampler(
            timer=self.name,
            sample=sample,
            calls_per_sample=calls,
            profile=profile(),
            peak_bytes=None if peak is None else (lambda: peak),
            energy=None if watts is None else (lambda per_call_s: fake_energy(watts, per_call_s)),
            again=again,
            beside=beside,
            cpu_wait=lambda: float(wait) if wait else None,
        )


class FakeBeside:
    """A fake graph's kernel time (Sampler.beside), with FAKE_BESIDE: that share of the
    function's time, times the function's own ``fake_kernel_factor`` (a commit that moves its
    kernels' time), not its ``fake_factor`` (which moves its time per call); FAKE_SCALES and
    FAKE_SCALE move the time per call only. FAKE_BESIDE=fail: taking it raises, as a trace
    whose graph launches are not the replays' does (timing.cuda._kernel_ms_each)."""

    timer = "cupti-graph"

    def __init__(self, ms, rng, noise):
        self.ms, self.rng, self.noise = ms, rng, noise

    def one(self):
        return self.ms * math.exp(self.rng.gauss(0.0, self.noise))

    def alternate(self, other, rounds):
        if self.ms is None:  # as a trace with a launch the replays did not make
            launches = f"{2 * rounds + 1} graph launches"
            raise RuntimeError(f"{launches} in the trace of {2 * rounds} replays")
        return [self.one() for _ in range(rounds)], [other.one() for _ in range(rounds)]


def fake_energy(watts, per_call_s):
    """What NVML's counter would read over a window of calls drawing ``watts``."""
    calls = max(1, math.ceil(1.0 / per_call_s))
    return Energy(watts * per_call_s, watts, calls, calls * per_call_s, watts, "fake")


def profile():
    """What one call launches, from FAKE_KERNELS (a JSON list of kernels.Launch dicts), with
    FAKE_DEVICE_MS as its device time; None (a timer that cannot tell) without it."""
    kernels = os.environ.get("FAKE_KERNELS")
    if not kernels:
        return None
    device_ms = os.environ.get("FAKE_DEVICE_MS")
    return Profile(
        launches=tuple(Launch.from_dict(k) for k in json.loads(kernels)),
        device_ms=float(device_ms) if device_ms else None,
    )


def pytest_gpubench_make_timer(settings, device, with_setup):
    with LOG.open("a") as log:
        child = " child" if CHILD else ""
        log.write(f"{settings.timer} {device.kind} {with_setup}{child}\\n")
    return FakeTimer()
'''

BENCH = """
import pytest


def work(n):
    return sum(range(n))


def test_sum(gpubench):
    assert gpubench(work, 100) == 4950


def test_join(gpubench):
    assert gpubench(",".join, ["a", "b"]) == "a,b"
"""


def record_history(
    pytester: pytest.Pytester, *args: str, sessions: int = 3
) -> list[pytest.RunResult]:
    """Save ``sessions`` sessions in a row (``--gpubench-save`` with ``args``), in process: a
    history the rule judges (rule.MIN_GATED_SESSIONS; with fewer, a test is ``not gated``).
    Each save appends one session of the fake timer; identical sessions are fine (a spread
    under 0.02% is gated). Not ``--gpubench-sessions``: it starts a process per session."""
    return [pytester.runpytest("--gpubench-save", NO_CONFIRM, *args) for _ in range(sessions)]


def baseline_file(pytester: pytest.Pytester, directory: str = ".gpubench") -> Path:
    [path] = (pytester.path / directory).glob("*.json")
    return path


def read_baseline(pytester: pytest.Pytester) -> dict[str, Any]:
    return json.loads(baseline_file(pytester).read_text(encoding="utf-8"))


def timer_calls(pytester: pytest.Pytester) -> list[str]:
    log = pytester.path / "timer-calls.log"
    return log.read_text().splitlines() if log.exists() else []


def entry(pytester: pytest.Pytester, key: str) -> dict[str, Any]:
    """One measurement's entry in the baseline file."""
    return read_baseline(pytester)["benchmarks"][key]


def medians(pytester: pytest.Pytester, key: str, part: str = "history") -> list[float]:
    """The session medians of an entry's history (or anchor), oldest first."""
    return [r["median_ms"] for r in entry(pytester, key)[part]]


def kernels(*launches: dict[str, Any]) -> str:
    """FAKE_KERNELS: what one call of the fake timer's workload launches."""
    return json.dumps(list(launches))


def binary_of(*launches: dict[str, Any]) -> str:
    """The fingerprint of the binary that launches these (kernels.Launch dicts)."""
    return fingerprint(tuple(Launch.from_dict(x) for x in launches))


def device_key() -> str:
    return pytest_gpubench.timing.device.detect(CUDA).key


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + "\n" + result.stderr.str()


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` as a test author; its output."""
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    done = subprocess.run(
        ["git", "-C", str(cwd), *identity, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    """Commit everything in ``repo``; the new commit's sha."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# A generated repository's kernel module and its tests (--gpubench-against): the fake timer
# multiplies ``work``'s time by its ``fake_factor``, so a commit that sets it makes it slower.
KERNELS = """
def work(n):
    return sum(range(n))


work.fake_factor = {factor}
"""

# What a generated repository ignores: the plugin's and pytest's files, the fake timer's log.
IGNORED = "__pycache__/\n.gpubench/\n.pytest_cache/\ntimer-calls.log\n"


def slower(repo: pytest.Pytester, factor: float = 1.5, where: str = "kernels") -> None:
    """The working tree's ``work`` (in module ``where``) made ``factor`` times slower."""
    repo.makepyfile(**{where: KERNELS.format(factor=factor)})


def failing_on(call: int, then: str) -> str:
    """A kernel module whose ``work`` is 6% slower and does ``then`` on its ``call``-th
    call in the process (the first pair takes about 27, a more pair 7)."""
    return (
        KERNELS.format(factor=1.06)
        + f"\nimport time\n\ncalls = []\n\n\ndef work(n, _work=work):\n    calls.append(n)\n"
        f"    if len(calls) == {call}:\n        {then}\n    return _work(n)\n\n\n"
        "work.fake_factor = 1.06\n"
    )


TESTS = """
from kernels import work


def test_sum(gpubench):
    assert gpubench(work, 100) == 4950


def test_join(gpubench):
    assert gpubench(",".join, ["a", "b"]) == "a,b"
"""


def bench_module(name: str) -> ModuleType:
    """A script of bench/ imported as the module ``name`` (registered, so its dataclasses
    resolve their annotations)."""
    path = ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def running(pid: int) -> bool:
    """Whether the process ``pid`` runs: a zombie does not (its reaper may be slow), and it
    is gone for the user."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return not Path("/proc").is_dir()  # gone meanwhile, or a system without /proc
    except OSError:
        return True
    return state != "Z"


def measurement(**values: Any) -> Measurement:
    """A Measurement from its fields by name, its parts' (context, floors, evidence) among
    them: a test sets the few it is about."""
    for name, part in (("context", Context), ("floors", Floors), ("evidence", Evidence)):
        own = {f.name: values.pop(f.name) for f in dataclasses.fields(part) if f.name in values}
        values[name] = part(**own) if own else values.get(name) or part()
    return Measurement(**values)


def bench_output(script: str) -> str:
    """What ``bench/<script>`` prints, run from the project root (it reads the committed
    results)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return done.stdout


def in_lib(repo: pytest.Pytester, hook: str) -> None:
    """The kernel module moved to lib/, found through ``hook`` in the conftest: an
    absolute path of the working tree, as an editable install's .pth or import hook
    names it (the revision's copy of the conftest names the same path)."""
    (repo.path / "lib").mkdir()
    git(repo.path, "mv", "kernels.py", "lib/kernels.py")
    conftest = repo.path / "conftest.py"
    conftest.write_text(conftest.read_text() + hook.format(lib=str(repo.path / "lib")))
    commit(repo.path, "the kernels in lib/")
    (repo.path / "lib" / "kernels.py").write_text(KERNELS.format(factor=1.08))


PATH_HOOK = """
import sys
sys.path.append({lib!r})
"""

# A finder first on the meta path, as setuptools' editable finders are (after the path).
IMPORT_HOOK = """
import importlib.util, sys

class WorkingTree:
    def find_spec(self, name, path=None, target=None):
        if name == "kernels":
            return importlib.util.spec_from_file_location(name, {lib!r} + "/kernels.py")

sys.meta_path.insert(0, WorkingTree())
"""
