"""Fixtures of the pytester tests: a directory with the fake timer, and one with a baseline."""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import (
    BENCH,
    FAKE_CONFTEST,
    FAKE_NAME,
    IGNORED,
    KERNELS,
    NO_CONFIRM,
    TESTS,
    commit,
    git,
)

# Suites that tests run through pytester, not tests of this project (data/*/README.md).
collect_ignore = ["data"]

# pytester's in-process runs restore sys.modules afterwards, so what one run imports the next
# imports again: torch cannot be imported twice in one process, and the others are slow to.
# Import them once, here, with the plugin modules loaded lazily. Where bytecode is not written
# (PYTHONDONTWRITEBYTECODE), each import of a module compiles it again: pytest-benchmark's,
# which every run loads as a plugin, cost more than half of the default selection's time.
for _name in (
    "numpy",
    "scipy.stats",
    "torch",
    "triton",
    "hypothesis",
    "filelock",
    "pytest_gpubench.store.baseline",
    "pytest_gpubench.run.fixture",
    "pytest_gpubench.report.summary",
    "pytest_gpubench.run.session",
    "pytest_gpubench.run.benchmark",
    "pytest_gpubench.report.files",
    "pytest_gpubench.report.changes",
    "pytest_gpubench.judge.picks",
    "pytest_benchmark.plugin",
    "pytest_benchmark.storage.file",
):
    try:
        importlib.import_module(_name)
    except ImportError:
        pass


def _trace_once() -> None:
    """A profiler trace, taken once here for the same reason: what a failure's trace imports
    (torch's profiler and the operators it registers, which cannot register twice)."""
    import tempfile

    from pytest_gpubench.timing.device import trace

    with tempfile.TemporaryDirectory() as directory:
        trace("cpu", lambda: None, Path(directory) / "trace.json")


_trace_once()


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap() -> Iterator[None]:
    """Every in-process run ends with pytest's gc.collect() calls (unraisable-exception
    check); with torch loaded each walks millions of long-lived objects. Frozen, they are
    skipped: ten times faster. Unfrozen afterwards so that shutdown frees them as usual."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def repo(fake: pytest.Pytester) -> pytest.Pytester:
    """The fake timer's directory as a git repository: a kernel module and its two tests,
    committed once on main (--gpubench-against and bisect)."""
    fake.makepyfile(kernels=KERNELS.format(factor=1.0), test_bench=TESTS)
    fake.path.joinpath(".gitignore").write_text(IGNORED)
    git(fake.path, "init", "-q", "-b", "main")
    commit(fake.path, "kernels and their tests")
    return fake


@pytest.fixture
def processes_pairing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs against a revision (and bisect's steps) pair fresh processes, one per side, the
    structure these tests were written for: --gpubench-pairing=processes in PYTEST_ADDOPTS,
    which the plugin's fresh processes inherit; a test's own --gpubench-pairing, later on
    its command line, wins."""
    for name in ("fake", "pytester"):  # they clear PYTEST_ADDOPTS: set it after them
        if name in request.fixturenames:
            request.getfixturevalue(name)
            break
    monkeypatch.setenv("PYTEST_ADDOPTS", "--gpubench-pairing=processes")


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin appends its table to $GITHUB_STEP_SUMMARY: in CI, this suite's own runs
    would fill the job's summary. Tests of that set it themselves."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(autouse=True)
def _no_run_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    """This suite's in-process runs of the real wall timer share the machine with its other
    workers: their run delay would make them `unmeasurable` at random. They read none (not
    known); the tests of the load check set their own (FAKE_CPU_WAIT, or the real one after
    monkeypatch.undo())."""
    from pytest_gpubench.timing import wall

    monkeypatch.setattr(wall, "run_delays_ns", lambda: None)


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under `-n`, this suite's in-process runs inherit the worker's PYTEST_XDIST_WORKER:
    pytest-benchmark (installed for its loader) then warns at configure time, an error here."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester directory whose conftest provides the fake timer, at scale 1, named like
    a timer whose prior gates 5% at 1 ms, without shifts between processes."""
    pytester.makeconftest(FAKE_CONFTEST)
    monkeypatch.setenv("FAKE_NAME", FAKE_NAME)
    monkeypatch.setenv("FAKE_SCALE", "1.0")
    monkeypatch.setenv("FAKE_NOISE", "0.0005")
    monkeypatch.setenv("FAKE_SEED", "1")
    monkeypatch.setenv("FAKE_SLEEP_S", "0")
    monkeypatch.setenv("FAKE_SHIFT", "0")
    for name in (
        "FAKE_SHIFT_SEED",
        "FAKE_SCALES",
        "FAKE_PARENT_SCALES",
        "FAKE_BASE_MS",
        "FAKE_KERNELS",
        "FAKE_DEVICE_MS",
        "FAKE_PEAK_BYTES",
        "FAKE_ENERGY",
        "FAKE_CHILD_PIDS",
        "FAKE_CHILD_START_S",
        "FAKE_CHILD_IMPORT_S",
        "FAKE_CHILD_CRASH",
        "FAKE_BESIDE",
        "FAKE_BESIDE_FAIL_FROM",
        "FAKE_CPU_WAIT",
        "FAKE_CHILD_CPU_WAIT",
        "FAKE_YARDSTICK_CPU_WAIT",
        "PYTEST_ADDOPTS",
    ):
        monkeypatch.delenv(name, raising=False)
    return pytester


@pytest.fixture
def saved(fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """BENCH with a baseline of three sessions saved at scale 1; later runs use another seed
    (a true A/A). Three sessions, not one: one session's history leaves the rule only the
    prior's few degrees of freedom, and a 1 ms test would gate 5% by a hair (or be "noisy")
    depending on the prior of the day."""
    fake.makepyfile(test_bench=BENCH)
    for seed in ("1", "3", "4"):
        monkeypatch.setenv("FAKE_SEED", seed)
        fake.runpytest("--gpubench-save", NO_CONFIRM).assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SEED", "2")
    return fake
