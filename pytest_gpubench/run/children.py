"""Fresh processes: to confirm a verdict, and to record a session into the baselines.

A process's own shift is shared by everything measured in it, so a re-measure in the same
process confirms its false alarms. A child is a new ``python -m pytest`` with the user's
options that times the same tests and writes what it measured to a folder its parent owns.
Only the parent writes the user's files: a child gets no option that would write where its
parent writes, skip tests or stop early (``child_args``). A child dies with its parent
(run/processes.py; docs/architecture.md, "The roles of a process"); a folder whose parent died
is removed by the next parent that starts children (``sweep_folders``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.codec import decode, encode
from ..core.errors import GpubenchError
from ..core.records import Result
from ..store.files import write_atomic
from ..timing.gpus import DEVICE_VARIABLE
from . import processes
from .owner import alive, identity
from .processes import BEAT_POLL_S, FOLDER_PREFIX, ORPHANED, WRAPPED_VARIABLE

# Where a fresh process the plugin starts writes what it measured: an environment variable,
# not an option, since a path among the arguments would move pytest's rootdir and ini file.
CHILD_VARIABLE = "PYTEST_GPUBENCH_CHILD"
# The pid of the process that started a child: the child exits once it is gone.
PARENT_VARIABLE = "PYTEST_GPUBENCH_PARENT"
# Trees a side of a comparison must not import code from, os.pathsep-separated: the other
# side's (versus/ab.py). Measurements of the other side's code would make the two sides same.
FOREIGN_VARIABLE = "PYTEST_GPUBENCH_NOT_FROM"
# The least family a run judges its measurements in (the multiple-comparison correction): a
# bisect step timing the tests BAD regressed judges them as one of BAD's selection.
FAMILY_VARIABLE = "PYTEST_GPUBENCH_FAMILY"
# Set in a child of a relay (``relay``): it says in its status once it holds the device (the
# next child starts then, and queues behind it).
TURN_VARIABLE = "PYTEST_GPUBENCH_TURN"
# What a process of a duo (run/duo.py) is told, separated by spaces: "leader" or "follower",
# its side ("head" or "base"), the authkey in hex, the pairs of each call, the socket's path.
DUO_VARIABLE = "GPUBENCH_DUO"
# A process of duos started together (``run_duos``) says in its status once set up; a leader
# takes the device once this file exists.
GATE_VARIABLE = "PYTEST_GPUBENCH_GATE"
# A child runs for as long as it makes progress (:func:`beat`); quiet for this long since it
# could start (its predecessor on the device ended), it is stuck: one test's imports, compiles
# and measurements take less.
CHILD_TIMEOUT_S = 1800.0
# A relay leg's processes that may die in its tests (each followed by a fresh one timing the
# rest) before the rest is given up: code that ends its process in every test would
# otherwise start a process per test.
MAX_DEATHS = 3
# A folder whose parent is gone is swept once it is this old: a margin, as the parent's end is
# read from a pid (run.owner), and its children end with it.
STALE_AFTER_S = 4 * 3600.0
# Variables a child does not inherit: those of the parent's xdist worker, which would make it
# think it is one, and PYTEST_ADDOPTS, which reaches it filtered among its arguments (child_args).
UNSET_VARIABLES = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
    "PYTEST_CURRENT_TEST",
    "PYTEST_ADDOPTS",
)
# What a child must not inherit: our options it gets its own values of, and pytest's that
# would make it skip the tests it is asked to run, stop early, wait for a debugger no one
# attends, or write where the parent writes (it gets its own of those: Launcher.overrides).
DROPPED_FLAGS = (
    "--gpubench-save",
    "--lf",
    "--last-failed",
    "--ff",
    "--failed-first",
    "--nf",
    "--new-first",
    "--sw",
    "--stepwise",
    "--sw-skip",
    "--stepwise-skip",
    "-x",
    "--exitfirst",
    "--pdb",
    "--trace",
)
DROPPED_OPTIONS = (  # each with its value
    "--gpubench-confirm",
    "--gpubench-sessions",
    "--gpubench-against",
    "--gpubench-build",
    "--gpubench-pairs",
    "--maxfail",
    "--basetemp",
    "--junitxml",
    "--junit-xml",
    "--report-log",
    "--html",
    "--reruns",
)


# What a parent may write that a child writes into its own folder instead (Launcher.overrides):
# plugins, by the names pytest registers them under, and pytest's own log files.
LOG_FILE, DEBUG_FILE = "log_file", "debug"
# What a child gets instead, in order, by what writes ('': every child); {} stands for its
# folder and name.
OWN_TARGETS = (
    ("cacheprovider", ("-o", "cache_dir={}-cache")),
    ("junitxml", ("--junitxml={}-junit.xml",)),
    ("", ("--maxfail=0",)),
    ("rerunfailures", ("--reruns=0",)),
    ("pytest_reportlog", ("--report-log={}-log.jsonl",)),
    ("html", ("--html={}.html",)),
    ("pytest_cov", ("--no-cov",)),
    (LOG_FILE, ("--log-file={}-pytest.log",)),
    (DEBUG_FILE, ("--debug={}-debug.log",)),
)
# The plugins among them: a child gets its own targets for those loaded.
FILE_WRITING_PLUGINS = tuple(w for w, _ in OWN_TARGETS if w not in ("", LOG_FILE, DEBUG_FILE))


@dataclass(frozen=True)
class ChildRun:
    """What one fresh process measured (each result with whether its test passed), or why
    it did not."""

    results: tuple[tuple[Result, bool], ...] = ()
    error: str = ""
    # Files a process that measured could not collect, each with its error in one line.
    uncollected: tuple[tuple[str, str], ...] = ()
    # Modules it imported from a tree it must not (FOREIGN_VARIABLE): "name (file)".
    foreign: tuple[str, ...] = ()
    # Its tests that failed before any result (an error while timed), each with its error.
    failed: tuple[tuple[str, str], ...] = ()
    # The tests a process died in (an abort, a segfault, SIGKILL, an os._exit), each with
    # how it ended (``processes.died``) and its last words (:func:`reason_in`): a relay times
    # the rest in a fresh process, MAX_DEATHS times at most.
    crashed: tuple[tuple[str, str], ...] = ()
    # The tests a process that died was to time (its selection, from ``plan``); None where
    # not known. A relay that gave up: those its last process was to time.
    planned: tuple[str, ...] | None = None

    @property
    def trouble(self) -> str:
        return "; ".join(f"{path}: {error}" for path, error in self.uncollected)

    @property
    def gave_up(self) -> bool:
        """Its processes died MAX_DEATHS times: the rest of its tests were not timed."""
        return len(self.crashed) >= MAX_DEATHS


def child_addopts(args: Sequence[str]) -> list[str]:
    """``args`` without DROPPED_FLAGS and DROPPED_OPTIONS (``--opt value`` or ``--opt=value``)."""
    joined = tuple(f"{option}=" for option in DROPPED_OPTIONS)
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg in DROPPED_OPTIONS:
            next(rest, None)  # its value follows
        elif arg not in DROPPED_FLAGS and not arg.startswith(joined):
            out.append(arg)
    return out


def child_args(
    invocation: Sequence[str],
    *,
    save: bool,
    confirm: int,
    single: bool,
    addopts: Sequence[str] = (),
    env_addopts: str = "",
) -> list[str]:
    """The pytest arguments of a child: the user's ini ``addopts`` (replaced with ``-o``),
    ``env_addopts`` (PYTEST_ADDOPTS, which the child's environment lacks) and ``invocation``,
    in the order pytest reads them, each through :func:`child_addopts`; then our own options
    with the child's values. ``single``: the child times a few tests named in its request
    file (a confirmation), so without xdist workers."""
    args = ["-o", f"addopts={shlex.join(child_addopts(addopts))}"]
    args += child_addopts([*shlex.split(env_addopts), *invocation])
    if single:
        args += ["-n", "0"]  # xdist is loaded (the caller checked): no workers
    args += ["--gpubench-confirm", str(confirm), "--gpubench-sessions", "1"]
    if save:
        args.append("--gpubench-save")
    return args


@dataclass(frozen=True)
class Launcher:
    """How this process starts fresh ones: the user's invocation and ini ``addopts``, where it
    ran, and what of its files a child must write elsewhere (``writes``: the loaded plugins of
    FILE_WRITING_PLUGINS, LOG_FILE and DEBUG_FILE when pytest writes them): each child gets
    its own targets for these, inside its folder."""

    invocation: tuple[str, ...]
    cwd: Path
    confirm: int  # what a recording child passes on to its own confirmations
    xdist: bool = False
    writes: frozenset[str] = frozenset()
    addopts: tuple[str, ...] = ()
    # Variables a child gets on top of this process's (a side of a comparison: its paths and
    # compile caches, versus/ab.py).
    env: tuple[tuple[str, str], ...] = ()
    # This process's rootdir and ini file, given to a child: pytest finds them from the
    # positional arguments before it knows a plugin's options, so `--gpubench-dir DIR` (DIR
    # a path that exists once the first session is saved) would move a child's rootdir, and
    # with it every test's key.
    rootdir: Path | None = None
    inifile: Path | None = None
    # A command a child runs under (Nsight Compute's, run/ncu.py); none by default.
    wrapper: tuple[str, ...] = ()
    # The user's --capture method: "fd" (pytest's default), "sys", "tee-sys", "no" (-s);
    # None where pytest's capture plugin is not loaded.
    capture: str | None = None

    def confirming(
        self,
        nodeids: Sequence[str],
        count: int,
        device_index: int | None,
        progress: Callable[[int, int], None],
        first: int = 0,
        pairs: int | None = None,
    ) -> list[ChildRun]:
        """``count`` fresh processes that time the tests ``nodeids`` on the device
        ``device_index``, started together (each holds the device from its first test to
        its last), named from ``child-{first}`` on (a later batch of a sequential
        confirmation continues the numbering); ``pairs``: in lockstep, the pairs each takes
        in its own process (``--gpubench-pairs``)."""
        args = self._args()
        if pairs is not None:
            args.append(f"--gpubench-pairs={pairs}")
        names = [f"child-{first + i}" for i in range(count)]
        return run_children(self, names, args, device_index, Request(tuple(nodeids)), progress)

    def measuring_args(self) -> list[str]:
        """The arguments of a fresh process that times the tests of a request holding the
        device from its first test to its last (a side of a comparison, versus/ab.py)."""
        # A test the other side lacks, or a module it has not built, fails one file's
        # collection there, not the comparison.
        args = [*self._args(), "--continue-on-collection-errors"]
        # What native code writes to file descriptor 2 as it aborts (CUDA's error, a failed
        # assert in C) reaches the output its parent reads for why it died (reason_in): a
        # capture of the descriptors would lose it with the process. What Python writes is
        # captured still; -s, --capture=sys and tee-sys keep their meaning.
        if self.capture == "fd":
            args.append("--capture=sys")
        return args

    def profiling(self, nodeids: Sequence[str], device_index: int | None) -> list[ChildRun]:
        """One fresh process (under ``wrapper``) that makes one call of each measurement of
        the tests ``nodeids`` in its NVTX range, timing nothing (run/ncu.py)."""
        request = Request(tuple(nodeids), ncu=True)
        return run_children(self, ["ncu"], self._args(), device_index, request)

    def recording(self, device_index: int | None, session: int) -> ChildRun:
        """One fresh process that times the user's selection as recorded session number
        ``session``."""
        [run] = run_children(self, [f"session-{session}"], self._args(save=True), device_index)
        return run

    def _args(self, save: bool = False) -> list[str]:
        """The arguments of a child that times what its request names (``save``: that
        records a session of the user's selection)."""
        return child_args(
            self.invocation,
            save=save,
            confirm=self.confirm if save else 0,
            single=self.xdist and not save,
            addopts=self.addopts,
            env_addopts=os.environ.get("PYTEST_ADDOPTS", ""),
        )

    def overrides(self, folder: Path, name: str) -> list[str]:
        """Arguments that point the files of the child ``name`` into its folder, and its
        rootdir and ini file to this process's (last on the command line, they win over the
        user's ini and addopts)."""
        args = [f"--basetemp={folder / f'{name}-tmp'}"]
        if self.rootdir is not None:
            args.append(f"--rootdir={self.rootdir}")
        if self.inifile is not None:
            args += ["-c", str(self.inifile)]
        for writer, options in OWN_TARGETS:
            if writer in self.writes or not writer:
                args += [option.replace("{}", str(folder / name)) for option in options]
        return args


@dataclass(frozen=True)
class Request:
    """What a parent asks a child to run of its collection: these node ids (None: all) but
    the ``excluded``, and of them only the tests using this fixture (None: all)."""

    nodeids: tuple[str, ...] | None = None
    fixture: str | None = None
    excluded: tuple[str, ...] = ()  # a relay of another GPU times these
    # A profiler trace of one call of every measurement into this folder (the evidence of a
    # failure against a revision, versus/ab.py), else none.
    evidence: str | None = None
    # One call of each measurement in its NVTX range, nothing timed: the process runs under
    # Nsight Compute (run/ncu.py).
    ncu: bool = False
    # Measure the copy and matmul rates declared bytes= and flops= are held to, as the user's
    # own run does: a side of a comparison, whose parent holds the working tree's measurements
    # to them (versus/ab.py). A confirmation's parent has them.
    floors: bool = False

    def keeps(self, nodeid: str, fixtures: Sequence[str]) -> bool:
        return (
            (self.nodeids is None or nodeid in self.nodeids)
            and nodeid not in self.excluded
            and (self.fixture is None or self.fixture in fixtures)
        )


# Every test of the child's selection that uses the plugin's fixture (a side of a
# comparison, whose tests may differ from its parent's).
EVERY_BENCHMARK = Request(fixture="gpubench")


# A child's status file (``<name>.json``): one JSON object, replaced whole as it grows. Its
# parent's ``request``, then the child's ``held`` (a relay's next child starts), ``plan``
# (read if it dies: which tests it never timed), ``ready`` (a duo's process is set up), and
# its ``results``. The heartbeat (``beat``) is a file apart: touched at each file collected
# and each test's start and end, it must cost nothing, where the status grows with the tests.


def write_request(out: Path, request: Request) -> None:
    """Ask a child to run only part of its collection."""
    tell(out, request=encode(request))


def read_request(out: Path) -> Request | None:
    """What a parent asked this child to run, or None for all of its selection."""
    try:
        return decode(Request, status_of(out)["request"])
    except (KeyError, ValueError):
        return None


def tell(out: Path, **news: object) -> None:
    """Add ``news`` to the status file ``out`` (its readers see the old or the new file:
    store.files.write_atomic). Never raises: a child's folder goes with its parent."""
    status = {**status_of(out), **news}
    with contextlib.suppress(GpubenchError):
        write_atomic(out, json.dumps(status, allow_nan=True) + "\n", "a fresh process's status")


def status_of(out: Path) -> dict[str, Any]:
    """What the child writing to ``out`` last said ({}: nothing readable yet)."""
    try:
        status = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return status if isinstance(status, dict) else {}


Started = subprocess.Popen[bytes] | ChildRun  # a child, or why it did not start


@dataclass
class Batch:
    """Fresh processes on one device, their files in one folder of this process's
    (:func:`batch`)."""

    folder: Path
    device_index: int | None
    started: list[Started] = field(default_factory=list)

    def start(
        self,
        launcher: Launcher,
        name: str,
        request: Request | None,
        args: Sequence[str] | None = None,
        extra: Sequence[tuple[str, str]] = (),
    ) -> tuple[Started, Path]:
        """Start the child ``name``: ``python -m pytest`` in the launcher's folder (under its
        wrapper), with ``args`` (by default ``measuring_args``) and the launcher's overrides,
        in the parent's environment as no xdist worker, on this batch's device, with the
        launcher's and the ``extra`` variables, asked to run ``request`` (None: its whole
        selection). It writes to ``<name>.json`` (returned), its output to ``<name>.log``."""
        out = self.folder / f"{name}.json"
        if request is not None:
            write_request(out, request)
        if args is None:
            args = launcher.measuring_args()
        args = [*args, *launcher.overrides(self.folder, name)]
        env = {k: v for k, v in os.environ.items() if k not in UNSET_VARIABLES}
        env[CHILD_VARIABLE] = str(out)
        env[PARENT_VARIABLE] = str(os.getpid())
        if self.device_index is not None:
            env[DEVICE_VARIABLE] = str(self.device_index)
        # A child loads what its parent compiled from Inductor's caches; a pool of compile
        # workers only delays its exit (by 4.5 s on an H200: bench/child_cost.py).
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        env.update([*launcher.env, *extra])
        if launcher.wrapper:
            env[WRAPPED_VARIABLE] = "1"
        proc: Started
        try:  # it watches its parent itself (watch_parent): no lifeline of the kernel's
            proc = processes.start(
                [*launcher.wrapper, sys.executable, "-m", "pytest", *args],
                launcher.cwd,
                env,
                out.with_suffix(".log"),
                lifeline=False,
            )
        except OSError as exc:
            proc = ChildRun(error=f"cannot start a fresh process: {exc.strerror or exc}")
        self.started.append(proc)
        return proc, out


@contextlib.contextmanager
def batch(device_index: int | None) -> Iterator[Batch]:
    """A batch of fresh processes (folders of gone parents swept first): on leaving it,
    however (an error, Ctrl-C, a generator closed), the children still running are killed
    with their groups (processes.kill_all), then the folder is removed: no child goes on
    timing behind the user's back."""
    sweep_folders()
    with tempfile.TemporaryDirectory(prefix=folder_prefix()) as directory:
        children = Batch(Path(directory), device_index)
        try:
            yield children
        finally:
            processes.kill_all([p for p in children.started if not isinstance(p, ChildRun)])


def beat_of(out: Path) -> Path:
    """The file a child writing to ``out`` touches as it makes progress."""
    return out.with_suffix(".beat")


def beat(out: Path, running: str | None = None) -> None:
    """In a child writing to ``out``: a sign of progress for its parent (a file collected, a
    test started or ended); ``running``: the node id of the test that starts ('' once it
    ended), which its parent reads if the process dies. Never raises."""
    with contextlib.suppress(OSError):
        if running is None:
            beat_of(out).touch()
        else:
            # surrogatepass: a node id may hold a lone surrogate, read back as it was
            beat_of(out).write_text(running, encoding="utf-8", errors="surrogatepass")


def running_test(out: Path) -> str:
    """The node id of the test a child writing to ``out`` was running, '' between tests."""
    try:
        return beat_of(out).read_text(encoding="utf-8", errors="surrogatepass").strip()
    except (OSError, ValueError):
        return ""


class Signs:
    """When a child (or a batch of children) last showed progress, on this process's
    monotonic clock: when it was made (the child could start timing), renewed when its
    predecessor on the device ends and whenever one of ``beats`` changes. A file's time is
    compared only with itself: a suspended machine, a clock step or a TMPDIR on another
    machine's clock moves no limit."""

    def __init__(self, beats: Sequence[Path]) -> None:
        self.beats = tuple(beats)
        self.last = time.monotonic()
        self._seen = {path: _mtime_ns(path) for path in self.beats}

    def renew(self) -> None:
        self.last = max(self.last, time.monotonic())

    def quiet_s(self) -> float:
        """How long since the last sign (a changed beat counts from when seen)."""
        for path in self.beats:
            mtime = _mtime_ns(path)
            if mtime != self._seen[path]:
                self._seen[path] = mtime
                self.renew()
        return time.monotonic() - self.last


def _mtime_ns(path: Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _wait(
    proc: Started,
    signs: Signs,
    stop: threading.Event | None = None,
    meanwhile: Callable[[], None] = lambda: None,
) -> bool:
    """Wait until ``proc`` ended (it is left unreaped) or showed no ``signs`` for
    CHILD_TIMEOUT_S, doing ``meanwhile`` as it runs; False once ``stop`` is set."""
    while not isinstance(proc, ChildRun) and processes.running(proc):
        if signs.quiet_s() > CHILD_TIMEOUT_S:
            break
        if stop is not None and stop.is_set():
            return False
        meanwhile()
        time.sleep(BEAT_POLL_S)
    return True


def _log(out: Path) -> str:
    """The output of the child writing to ``out``, '' where there is none."""
    try:
        return out.with_suffix(".log").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def finish_child(proc: Started, out: Path, signs: Signs | None = None) -> ChildRun:
    """Wait for a started child until it ends, or is stuck: no sign of progress for
    CHILD_TIMEOUT_S (``signs``: by default its own beat file's since now; a batch's, whose
    children take the device in turns, or a relay's leg's, since its predecessor ended).
    Then read what it measured from ``out``."""
    if isinstance(proc, ChildRun):
        return proc  # it did not start
    _wait(proc, signs or Signs((beat_of(out),)))
    stuck = processes.running(proc)  # one that ended meanwhile is not stuck
    processes.kill_group(proc)  # also once it ended: what it left behind would outlive it
    if stuck:
        proc.kill()
    proc.wait()
    if stuck:
        return ChildRun(
            error=f"a fresh process showed no progress for {CHILD_TIMEOUT_S:g} s "
            "(no file collected, no test started or ended) and was stopped"
        )
    status = status_of(out)
    try:
        results = tuple(
            (Result.from_dict(entry), bool(entry.get("passed", True)))
            for entry in status["results"]
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        code = proc.returncode
        test = running_test(out)
        if test:  # it died in a test: pytest reports the failures it can catch
            said = reason_in(_log(out))
            how = processes.died(code) + (f": {said}" if said else "")
            plan = status.get("plan")
            return ChildRun(
                error=f"a fresh process died in {test}, {how}",
                crashed=((test, how),),
                planned=tuple(map(str, plan)) if isinstance(plan, list) else None,
            )
        how = f"{processes.died(code)}: {EXITS[code]}" if code in EXITS else processes.died(code)
        return ChildRun(
            error=f"a fresh process measured nothing ({how}): {reason_in(_log(out)) or exc}"
        )
    uncollected = collection_errors(_log(out)) if proc.returncode not in (0, 5) else ()
    foreign = tuple(str(m) for m in status.get("foreign", ()))
    failed = status.get("failed")
    failed = tuple((str(t), str(e)) for t, e in failed.items()) if isinstance(failed, dict) else ()
    return ChildRun(results, uncollected=uncollected, foreign=foreign, failed=failed)


def collection_errors(output: str) -> tuple[tuple[str, str], ...]:
    """(file, its error in one line) for each file a child could not collect (its tests
    are missing from what it measured)."""
    lines = output.splitlines()
    found: dict[str, str] = {}
    for i, line in enumerate(lines):
        header = re.search(r"ERROR collecting (\S+)", line)
        if not header or header.group(1) in found:
            continue
        error = "not collected"
        for after in lines[i + 1 :]:
            if "ERROR collecting" in after:
                break
            match = re.match(r"E\s+(\w+(?:Error|Exception): .*)", after)
            if match:
                error = match.group(1).strip()[:300]
                break
        found[header.group(1)] = error
    return tuple(found.items())


# What pytest's exit statuses mean, and the one a child ends with once its parent is gone.
EXITS = {
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no test collected",
    ORPHANED: "its parent was gone",
}


# What a child's output holds that says nothing of why it ended: pytest's session header
# (from its first line to "collected N items": plugins add lines of any shape), a file's
# progress line, and the stacks faulthandler dumps as a process dies (they say where, not
# why: a dump's innermost frame is the last resort).
SESSION_STARTS = re.compile(r"=+ test session starts =+")
HEADER_ENDS = re.compile(r"collect(ed|ing) .*")
# A progress line, or its start (what a test wrote under -s follows it): the file, its
# outcomes, the percentage.
PROGRESS = re.compile(
    r"\S+\.py(::\S+)?(?= |$)( [.sFExX]*(?= |$)| (PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR)\b)?"
    r"( +\[ *\d+%\])?"
)
DEATH = "Fatal Python error: "
FRAME = re.compile(r'File "(.*)", line (\d+) in (.*)')
DUMP = re.compile(
    r"((Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):|"
    r"Stack \(most recent call first\):|<no Python frame>|Extension modules: .*|"
    r"Python runtime state: .*|Garbage-collecting)"
)


def reason_in(output: str) -> str:
    """The line of a child's output that says most about why it measured nothing or died:
    its last error line (pytest's ``E   ...``, an ``ERROR``, a traceback's last line), else
    its last line but pytest's session header, progress lines and faulthandler's dump of a
    dying process's stacks (an abort's message, where pytest's capture let it through), else
    the frame that process died in."""
    lines, frame = [], ""
    header = current = False
    for raw in output.splitlines():
        line, _, death = raw.partition(DEATH)
        line = line.strip()
        if death:  # what pytest wrote before it on that line (a progress line) goes on
            header = False
        elif SESSION_STARTS.fullmatch(line):
            header = True
            continue
        elif header:
            header = not HEADER_ENDS.fullmatch(line)
            continue
        at = FRAME.fullmatch(line)
        if line.startswith("Current thread 0x"):
            current = True
        elif current and at:  # the innermost frame of the thread that died
            frame, current = f"at {Path(at[1]).name}, line {at[2]}, in {at[3]}", False
        progress = PROGRESS.match(line)
        line = line[progress.end() :].strip() if progress else line
        if line and not (at or DUMP.fullmatch(line)):
            lines.append(line)
    errors = [
        line
        for line in lines
        if line.startswith(("E ", "ERROR", "INTERNALERROR"))
        or re.match(r"\w+(Error|Exception):", line)
    ]
    return (errors or lines or [frame])[-1][:300]


def run_children(
    launcher: Launcher,
    names: Sequence[str],
    args: Sequence[str],
    device_index: int | None,
    request: Request | None = None,
    progress: Callable[[int, int], None] = lambda i, n: None,
) -> list[ChildRun]:
    """Fresh processes, one per name, started together, each writing to files named after it
    in a folder removed when they are done, timing ``request`` (a confirmation: each holds the
    device lock from its first test to its exit, so their start-up overlaps and their GPU work
    does not) or, where None, the user's selection (a recorded session)."""
    with batch(device_index) as children:
        started = []
        for i, name in enumerate(names):
            progress(i + 1, len(names))
            started.append(children.start(launcher, name, request, args))
        # They take the device in turns, in any order: one that waits for it is not stuck
        # while another makes progress.
        signs = Signs([beat_of(out) for _, out in started])
        runs = []
        for proc, out in started:
            signs.renew()  # the one before it ended: its turn may have come
            runs.append(finish_child(proc, out, signs))
        return runs


def follows_in_duo() -> bool:
    """Whether this process is the follower of a duo (DUO_VARIABLE)."""
    return os.environ.get(DUO_VARIABLE, "").startswith("follower ")


def run_duos(
    head: Launcher,
    base: Launcher,
    nodeids: Sequence[str],
    device_index: int | None,
    duos: Sequence[tuple[str, bool]],
    pairs: int = 1,
) -> list[tuple[ChildRun, ChildRun]]:
    """Duos (run/duo.py), all started at once: for each of ``duos`` (its name, whether the
    working tree's process leads), the working tree's fresh process (``head``) and the
    revision's (``base``) on the tests ``nodeids``, joined by a socket, each call taking
    ``pairs`` pairs. Their set-up overlaps; no leader touches the device before every
    process is set up or ended (GATE_VARIABLE). Each duo's runs, the leader's (holding both
    sides) first."""
    with batch(device_index) as children:
        go = children.folder / "go"
        started = []
        for name, head_leads in duos:
            key = os.urandom(16).hex()
            sides = [("head", head), ("base", base)]
            ordered = sides if head_leads else sides[::-1]
            for role, (side, launcher) in zip(("leader", "follower"), ordered, strict=True):
                sock = children.folder / f"{name}.sock"
                env = [
                    (DUO_VARIABLE, " ".join([role, side, key, str(pairs), str(sock)])),
                    (GATE_VARIABLE, str(go)),
                ]
                started.append(
                    children.start(launcher, f"{name}-{role}", Request(tuple(nodeids)), extra=env)
                )
        signs = Signs([beat_of(out) for _, out in started])
        while signs.quiet_s() <= CHILD_TIMEOUT_S and not all(
            isinstance(proc, ChildRun) or status_of(out).get("ready") or not processes.running(proc)
            for proc, out in started
        ):
            time.sleep(BEAT_POLL_S)
        go.touch()
        runs = [finish_child(proc, out, signs) for proc, out in started]
        return [(runs[i], runs[i + 1]) for i in range(0, len(runs), 2)]


@dataclass(frozen=True)
class Leg:
    """One fresh process of a relay: who starts it, what it times, its name, and what to
    say as its turn on the device comes."""

    launcher: Launcher
    request: Request
    name: str
    says: str = ""


def relay(
    legs: Sequence[Leg],
    device_index: int | None,
    announce: Callable[[str], None] = lambda line: None,
    stop: threading.Event | None = None,
) -> Generator[ChildRun, None, None]:
    """Fresh processes timing on the device one after another in the order of ``legs``: each
    starts once the one before it holds the device (TURN_VARIABLE), so start-up overlaps and
    GPU work does not. Yields what each leg measured, in order, and announces each leg as its
    turn comes. A process that dies in a test is followed by a fresh one for the rest of its
    leg (``ChildRun.crashed``; none after MAX_DEATHS deaths), which may wait behind the next
    leg: that leg's progress counts as its own against CHILD_TIMEOUT_S. Setting ``stop`` (from
    another thread) or closing the generator kills the processes it started."""
    with batch(device_index) as children:
        # Each leg's first process, and its progress since it could start timing: its start
        # or its predecessor's end.
        started: list[tuple[Started, Path, Signs]] = []
        dead: dict[Launcher, list[str]] = {}  # the tests a side's processes died in

        def start(
            leg: Leg, name: str, extra: Sequence[tuple[str, str]] = ()
        ) -> tuple[Started, Path]:
            skipped = [t for t in dead.get(leg.launcher, []) if t not in leg.request.excluded]
            request = replace(leg.request, excluded=(*leg.request.excluded, *skipped))
            return children.start(leg.launcher, name, request, extra=extra)

        def begin(i: int) -> None:
            """Start leg ``i``'s first process, which says once it holds the device."""
            proc, out = start(legs[i], legs[i].name, [(TURN_VARIABLE, "1")])
            started.append((proc, out, Signs((beat_of(out),))))

        def queue_next(i: int) -> None:
            """Start the leg after ``i`` once ``i`` holds the device: it queues behind it."""
            if i + 1 < len(legs) and len(started) == i + 1 and status_of(started[i][1]).get("held"):
                begin(i + 1)

        def rest(i: int, run: ChildRun) -> ChildRun | None:
            """Leg ``i``'s run, whose process died in a test, with the rest of its tests timed
            by fresh processes while each dies in another, up to MAX_DEATHS deaths
            (``ChildRun.gave_up``); None once ``stop`` is set."""
            leg, lost = legs[i], list(run.crashed)
            skipped: set[str] = set()
            while run.crashed and run.crashed[0][0] not in skipped:
                test, how = run.crashed[0]
                skipped.add(test)
                if test not in dead.setdefault(leg.launcher, []):
                    dead[leg.launcher].append(test)
                gave_up = len(lost) >= MAX_DEATHS
                if leg.says:
                    then = "the rest given up" if gave_up else "the rest again"
                    announce(f"{leg.says}: its process died in {test}, {how}; {then}")
                if gave_up:
                    names = ", ".join(t for t, _ in lost)
                    return ChildRun(
                        error=f"its process died {len(lost)} times (in {names}): the rest of "
                        "its tests were not timed",
                        crashed=tuple(lost),
                        planned=run.planned,
                    )
                proc, out = start(leg, f"{leg.name}-again-{len(lost)}")
                # It may wait for the device behind the next leg, started as this one took
                # it: that leg's progress is progress of the wait.
                sign = Signs([beat_of(out), *(beat_of(o) for _, o, _ in started[i + 1 :])])
                if not _wait(proc, sign, stop):
                    return None
                run = finish_child(proc, out, sign)
                lost += [c for c in run.crashed if c not in lost]
            return replace(run, crashed=tuple(lost))

        for i, leg in enumerate(legs):
            if stop is not None and stop.is_set():  # before starting or announcing another
                return
            if i == len(started):
                begin(i)
            if leg.says:
                announce(leg.says)
            proc, out, signs = started[i]
            # The next starts once this one holds the device (or has ended).
            if not _wait(proc, signs, stop, functools.partial(queue_next, i)):
                return
            run = finish_child(proc, out, signs)
            if run.crashed:
                rerun = rest(i, run)
                if rerun is None:
                    return
                run = rerun
            if i + 1 < len(started):
                started[i + 1][2].renew()
            yield run


def relays(
    lanes: Sequence[tuple[Sequence[Leg], int | None]],
    announce: Callable[[str], None] = lambda line: None,
    check: Callable[[Leg, ChildRun], None] = lambda leg, run: None,
) -> list[list[ChildRun]]:
    """A relay per GPU, at once (``lanes``: each relay's legs and its device's index): what
    each leg measured, per lane. One lane runs in this thread; several in threads of their
    own, all stopped (their processes killed) when one fails or this thread is interrupted.
    ``check`` sees each process as it ends: what it raises stops every relay and is raised
    here (a run that cannot be judged stops at its first process, not after the look)."""
    stop = threading.Event()
    found: list[list[ChildRun]] = [[] for _ in lanes]
    failed: list[BaseException] = []

    def run(k: int) -> None:
        legs, device = lanes[k]
        try:
            with contextlib.closing(relay(legs, device, announce, stop)) as measured:
                for leg, child in zip(legs, measured, strict=False):
                    check(leg, child)
                    found[k].append(child)
        except BaseException as exc:  # raised again in the caller's thread
            failed.append(exc)
            stop.set()

    if len(lanes) == 1:
        run(0)
    else:
        threads = [
            threading.Thread(target=run, args=(k,), name=f"gpubench-relay-{k}", daemon=True)
            for k in range(len(lanes))
        ]
        for thread in threads:
            thread.start()
        try:
            while any(thread.is_alive() for thread in threads):
                time.sleep(BEAT_POLL_S)
        finally:  # interrupted: every relay kills its processes before this thread goes on
            stop.set()
            for thread in threads:
                thread.join()
    if failed:
        raise failed[0]
    if any(len(got) < len(legs) for got, (legs, _) in zip(found, lanes, strict=True)):
        raise GpubenchError("a relay of fresh processes stopped before its last process")
    return found


def child_document(
    results: Sequence[tuple[Result, bool]],
    foreign: Sequence[str] = (),
    failed: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A child's last status: its results, each with whether its test passed, the modules
    it imported from a tree it must not (:func:`foreign_imports`), and its tests that failed
    before any result, each with its error."""
    return {
        "results": [r.to_dict(passed) for r, passed in results],
        "foreign": list(foreign),
        "failed": dict(failed or {}),
    }


def foreign_imports() -> tuple[str, ...]:
    """The modules this process loaded from a tree its environment names as the other
    side's (``FOREIGN_VARIABLE``), as "name (file)"; the plugin's own excepted (it runs on
    both sides)."""
    trees = [Path(p).resolve() for p in os.environ.get(FOREIGN_VARIABLE, "").split(os.pathsep) if p]
    if not trees:
        return ()
    # Also excepted: what is installed (a virtual environment inside the repository): the
    # install paths, and the environment's prefixes where they lie inside such a tree.
    installed = sysconfig.get_paths()
    places = [installed[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")]
    places += [*site.getsitepackages(), site.getusersitepackages()]
    prefixes = [Path(p).resolve() for p in (sys.prefix, sys.exec_prefix, sys.base_prefix)]
    excepted = {Path(__file__).resolve().parents[1], *(Path(p).resolve() for p in places)}
    excepted |= {p for p in prefixes if not any(t.is_relative_to(p) for t in trees)}
    found = []
    for name, module in sorted(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        path = Path(file).resolve()
        if any(path.is_relative_to(t) for t in trees) and not any(
            path.is_relative_to(e) for e in excepted
        ):
            found.append(f"{name} ({path})")
    return tuple(found)


# --- the child's side -----------------------------------------------------------------------


def watch_parent_from_environment() -> None:
    """In a fresh process the plugin started (its environment says so), watch its parent."""
    out, parent = os.environ.get(CHILD_VARIABLE), os.environ.get(PARENT_VARIABLE, "")
    if out and parent.isdigit():
        processes.watch_parent(int(parent), Path(out).parent)


def folder_prefix() -> str:
    """The start of this process's folders' names: the prefix, this machine, boot and pid
    namespace (run.owner), this pid."""
    return f"{FOLDER_PREFIX}{identity()}-{os.getpid()}-"


def sweep_folders(directory: Path | None = None, min_age_s: float = STALE_AFTER_S) -> None:
    """Remove the folders of children whose parent is gone (one that could not clean up:
    its children were frozen, or killed with it). Only this machine's, boot's and pid
    namespace's (run.owner), and only old ones."""
    root = Path(directory or tempfile.gettempdir())
    pattern = re.compile(re.escape(f"{FOLDER_PREFIX}{identity()}-") + r"(\d+)-")
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        match = pattern.match(name)
        if not match or alive(int(match.group(1))):
            continue
        try:
            age_s = time.time() - os.stat(root / name).st_mtime
        except OSError:
            continue
        if age_s >= min_age_s:
            shutil.rmtree(root / name, ignore_errors=True)
