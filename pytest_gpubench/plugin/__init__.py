"""The pytest layer: options, marker, fixture, and the roles of a process.

``pytest_configure`` decides once what this process is and registers the objects of its role
(as pytest-xdist registers ``DSession`` on its controller and ``WorkerInteractor`` on a
worker); no hook asks again:

- ``Measuring`` (measuring.py), in every process: times gpubench tests, judges them through
  the gate, confirms a flagged verdict in fresh processes, and makes a final verdict the
  test's outcome;
- ``Collected`` (collect.py), in every process but an xdist worker: the results of the
  run's call reports, the last attempt of each test;
- ``Controller`` (controller.py), in the process that owns the session (the user's pytest,
  or an xdist controller): saves, records more sessions, writes the reports, prints the
  summary;
- ``Child`` (child.py), in a fresh process the plugin started: runs the tests its parent
  asked for, hands its results to its parent, and dies with it;
- against a revision under pytest-xdist (distributed.py), ``DistributedComparison`` in the
  controller (the comparison, once the workers have collected) and ``WorkerVerdicts`` in
  each worker (its tests take their verdicts from it).

Nothing heavy is imported at start-up: numpy, scipy and torch load when a gpubench run
starts (``--gpubench``), and the session's own modules only then.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..core.errors import GpubenchError
from ..core.settings import OPTIONS, MarkerSpec, MeasureSettings, Settings
from ..store import files as storage
from . import hookspecs
from .collect import Collected
from .measuring import BENCH_KEY, MARKER, SPEC_KEY, Measuring, accept_expression, resolve_markers

if TYPE_CHECKING:
    from ..core.device import Device
    from ..run.fixture import GpuBench
    from ..run.session import BenchSession
    from ..timing.engine import Timer

MEASURING = "gpubench-measuring"
COLLECTED = "gpubench-collected"
CONTROLLER = "gpubench-controller"
CHILD = "gpubench-child"
DISTRIBUTED = "gpubench-distributed"
BENCHMARK = "gpubench-benchmark-fixture"
SELECTION = "gpubench-selection"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """A fresh process the plugin started watches its parent from before the user's conftest
    files load: one that hangs importing them still dies with its parent. An xdist worker
    of a timing run sees its own GPU first from before they load (gpus.rotate_worker)."""
    from ..run.children import watch_parent_from_environment
    from ..timing.gpus import rotate_worker

    watch_parent_from_environment()
    rotate_worker()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpubench", "GPU kernel benchmarks (pytest-gpubench)")
    for spec in OPTIONS:
        cli_help = spec.help.replace("%", "%%")  # argparse formats help text with %
        how = {"action": "store_true"} if spec.is_flag else {"metavar": spec.metavar}
        group.addoption(spec.flag, default=None, dest=spec.dest, help=cli_help, **how)
        # Every ini value is a string parsed by Settings, so an invalid one names its key.
        parser.addini(spec.ini, spec.help, default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(threshold=, alpha=, timer=, budget_s=, min_samples=, max_samples=, "
        "precision=, group=, bytes=, flops=): per-test benchmark settings and work",
    )
    from ..run.children import (
        CHILD_VARIABLE,
        FAMILY_VARIABLE,
        GATE_VARIABLE,
        PARENT_VARIABLE,
        TURN_VARIABLE,
        follows_in_duo,
    )
    from . import benchmark

    # Taken out of the environment: processes the tests start are no children of ours.
    named = (CHILD_VARIABLE, PARENT_VARIABLE, TURN_VARIABLE, GATE_VARIABLE, FAMILY_VARIABLE)
    out, parent, turn, gate, family = (os.environ.pop(name, "") for name in named)
    settings = _settings(config, Path(out) if out else None)
    if family.isdigit() and settings.against is not None:  # a bisect step's (versus/bisect.py)
        settings = dataclasses.replace(settings, least_family=int(family))
    session = _session(config, settings) if settings.enabled else None
    worker = hasattr(config, "workerinput")  # an xdist worker: its controller collects
    owner = not worker and settings.child is None
    dist = config.getoption("dist", "no") != "no"
    if owner and session is not None and dist:
        _rotate_workers(config)

    def announce(line: str) -> None:
        """A line for the user, from the process they started (no one reads a worker's or
        a child's terminal)."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if owner and reporter is not None:
            reporter.write_line(f"gpubench: {line}")

    manager = config.pluginmanager
    if not benchmark.benchmark_plugin_active(config):
        # A suite written for pytest-benchmark collects under --strict-markers without it.
        config.addinivalue_line(
            "markers",
            f"{benchmark.BENCHMARK_MARKER}(group=, ...): pytest-benchmark's marker; with "
            "--gpubench-benchmark-fixture its group= is the test's group (pytest-gpubench)",
        )
    if settings.benchmark_fixture:
        benchmark.refuse_beside_pytest_benchmark(config)
        manager.register(benchmark, BENCHMARK)
    if settings.only or settings.skip:
        from .selection import Selection

        manager.register(Selection(only=settings.only), SELECTION)
    # An xdist worker, or a fresh process, times on the GPU it was given (gpus.pin_worker).
    measuring = Measuring(settings, session, announce, pin=worker or settings.child is not None)
    manager.register(measuring, MEASURING)
    if settings.child is not None and session is not None:
        _pair_in_child(measuring, session, settings)
    against = settings.against is not None and session is not None
    if worker:
        if against and session is not None:
            from .distributed import FOLDER_INPUT, WorkerVerdicts

            workerinput = config.workerinput  # type: ignore[attr-defined]
            folder = workerinput.get(FOLDER_INPUT)  # the controller's, when it compares
            if folder:
                worker_id = str(workerinput.get("workerid", "gw"))
                manager.register(WorkerVerdicts(Path(folder), worker_id, session), DISTRIBUTED)
        return
    collected = Collected()
    manager.register(collected, COLLECTED)
    if settings.child is not None:
        from .child import Child

        manager.register(
            Child(
                settings.child,
                session,
                collected,
                parent=int(parent) if parent.isdigit() else None,
                # Its siblings start with it: one on the GPU. A duo's follower samples only
                # while its leader, which holds the device, waits (run/duo.py).
                hold_device=settings.confirming and not follows_in_duo(),
                turn=turn,
                gate=gate,
            ),
            CHILD,
        )
    else:
        from .controller import Controller

        controller = Controller(config, settings, session, collected, announce, measuring)
        manager.register(controller, CONTROLLER)
        distributed = dist and manager.hasplugin("xdist") and config.getoption("tx", None)
        if against and distributed and not config.getoption("collectonly"):
            from .distributed import DistributedComparison

            # The workers collect and run the tests: the comparison waits for their collection.
            manager.register(DistributedComparison(controller), DISTRIBUTED)


def _pair_in_child(measuring: Measuring, session: BenchSession, settings: Settings) -> None:
    """A fresh process whose parent times tests in lockstep (versus/lockstep.py) does the same,
    in the parent's checkout: one more pair of each test it runs."""
    from .. import __file__ as package_init
    from ..versus.lockstep import CHECKOUT_VARIABLE, Pairing, TwoSides

    two = TwoSides.from_environment(Path(package_init).parent)  # None where not asked
    os.environ.pop(CHECKOUT_VARIABLE, None)
    if two is not None:
        measuring.pairing = Pairing(two, session, settings, None)
        session.lockstep = True
        session.comparison = {}


def _rotate_workers(config: pytest.Config) -> None:
    """Ask the xdist workers this controller starts to see their own GPU first
    (gpus.rotate_worker): they inherit its environment."""
    from ..timing.gpus import ROTATE_VARIABLE

    if ROTATE_VARIABLE not in os.environ:
        os.environ[ROTATE_VARIABLE] = "1"

        def forget() -> None:
            os.environ.pop(ROTATE_VARIABLE, None)

        config.add_cleanup(forget)


def _refuse_paths_apart(config: pytest.Config) -> None:
    """A path of ours outside the current directory given apart from its option
    (``--gpubench-dir ../b``) is read by pytest as a test path while it looks for its rootdir
    and ini file, before it knows our options: once the path exists, the rootdir moves up,
    the ini file is missed and every test's key changes. Refused, naming the fix."""
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *config.invocation_params.args]
    # As pytest places paths: absolute, symlinks not followed.
    here = Path(os.path.abspath(config.invocation_params.dir))
    flags = {spec.flag for spec in OPTIONS if spec.metavar in ("DIR", "PATH")}
    for flag, value in itertools.pairwise(args):
        if flag in flags and not Path(os.path.abspath(here / value)).is_relative_to(here):
            raise pytest.UsageError(
                f"write {flag}={value} (with '='): given apart, pytest takes {value} for a "
                "test path while it looks for its rootdir and ini file"
            )


def _settings(config: pytest.Config, child: Path | None) -> Settings:
    """The session's settings from the command line and the ini file; a usage error names
    the option or key at fault."""
    invocation = config.invocation_params.dir
    cli: dict[str, object] = {}
    for spec in OPTIONS:
        value = config.getoption(spec.dest)
        if isinstance(value, str) and spec.metavar in ("DIR", "PATH"):
            value = str(invocation / value)  # command-line paths are relative to the cwd
        cli[spec.field] = value
    ini = {spec.field: config.getini(spec.ini) for spec in OPTIONS}
    if child is None and not hasattr(config, "workerinput"):
        # The user's process: ours get their parent's rootdir and ini file (and run
        # elsewhere: a revision's checkout), xdist's workers their controller's.
        _refuse_paths_apart(config)
    try:
        settings = Settings.resolve(cli, ini, config.rootpath, child)
        if settings.enabled:
            for path, what in settings.reports:
                storage.check_target(path, what)  # refuse now rather than after the run
    except GpubenchError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.accept_only is not None:
        accept_expression(settings.accept_only)  # an expression pytest cannot parse: refused
    narrowed = [f for f, on in (("--lf", "lf"), ("--sw", "stepwise")) if config.getoption(on, 0)]
    if settings.sessions > 1 and narrowed:
        raise pytest.UsageError(
            f"--gpubench-sessions {settings.sessions} records the selection of the command "
            f"line in fresh processes, and {narrowed[0]} narrows it from run to run: record "
            f"the sessions without {narrowed[0]}"
        )
    return settings


def _session(config: pytest.Config, settings: Settings) -> BenchSession:
    """This process's benchmark session: its fresh processes run the user's invocation,
    with the user's plugins that write files pointed elsewhere."""
    from ..run.children import DEBUG_FILE, FILE_WRITING_PLUGINS, LOG_FILE, Launcher
    from ..run.session import BenchSession
    from ..timing.gpus import cuda_available

    invocation = config.invocation_params
    writes = {n for n in FILE_WRITING_PLUGINS if config.pluginmanager.hasplugin(n)}
    if config.pluginmanager.hasplugin("logging") and (
        config.getoption("log_file", None) or config.getini("log_file")
    ):
        writes.add(LOG_FILE)
    if config.getoption("debug", None):
        writes.add(DEBUG_FILE)
    launcher = Launcher(
        invocation=tuple(invocation.args),
        cwd=Path(invocation.dir),
        confirm=settings.confirm,
        xdist=config.pluginmanager.hasplugin("xdist"),
        writes=frozenset(writes),
        addopts=tuple(config.getini("addopts")),
        rootdir=config.rootpath,
        inifile=config.inipath,
        capture=config.getoption("capture", None),
    )

    def make_timer(measure: MeasureSettings, device: Device, with_setup: bool) -> Timer:
        timer: Timer | None = config.hook.pytest_gpubench_make_timer(
            settings=measure, device=device, with_setup=with_setup
        )
        if timer is None:
            from ..timing.timers import make_timer as builtin

            timer = builtin(measure.timer, device.kind)
        return timer

    return BenchSession(settings, config.rootpath, make_timer, cuda_available, launcher)


@pytest.fixture
def gpubench(request: pytest.FixtureRequest) -> GpuBench:
    """Time a function: ``y = gpubench(fn, *args, **kwargs)``; see ``GpuBench``."""
    from ..run.fixture import GpuBench, TestContext
    from ..timing.gpus import cuda_available

    measuring = request.config.pluginmanager.get_plugin(MEASURING)
    assert isinstance(measuring, Measuring)
    spec = request.node.stash.get(SPEC_KEY, None)
    if not isinstance(spec, MarkerSpec):  # not collected by this session (or invalid)
        spec = resolve_markers(request.node, measuring.settings)
    context = TestContext(nodeid=request.node.nodeid, name=request.node.name, spec=spec)
    bench = GpuBench(context, session=measuring.session, device_probe=cuda_available)
    request.node.stash[BENCH_KEY] = bench
    return bench
