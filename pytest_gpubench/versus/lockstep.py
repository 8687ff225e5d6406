"""Both revisions of a test in one process: the first structure of ``--gpubench-against``.

Alternating inside one process cancels what differs between processes; alternating processes
does not (docs/verdict.md, "Lockstep pairs"; bench/results/lockstep-prior.md). The revision's
test and project code are loaded from its checkout under the working tree's module names, in
a namespace of their own (:class:`TwoSides`), and each call is timed alternately with the
revision's call of the same key. Where one process cannot hold both (plugin.lockstep says
why), the test is timed in duos (:meth:`Pairing.duo_verdicts`, run/duo.py). How it runs and
what refuses it: docs/guide.md, "Both revisions in one process (lockstep)".
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import getpass
import importlib.machinery
import importlib.util
import inspect
import itertools
import math
import os
import random
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FunctionType, MethodType, ModuleType, SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import GpubenchError
from ..core.records import Costs, Judgement, Measurement, Result, Status, Verdict, node_id
from ..core.samples import plural
from ..core.settings import MeasureSettings, Settings
from ..judge.gate import Gate
from ..judge.pairs import DUO_PAIRS, PairDesign, lockstep_process_sigma, second_process_agrees
from ..run.children import ChildRun, Launcher
from ..run.sides import Lockstep, Pair, error_line
from ..timing.engine import Workload
from .ab import (
    BASE,
    HEAD,
    KERNEL_TIME,
    MOVED,
    Pairs,
    design_of,
    imported_other_side,
    paired_results,
    rejudged,
    unsure_tests,
)
from .revision import Revision

if TYPE_CHECKING:
    from ..run.session import BenchSession

# What a process that runs both sides is told: the checkout's top level, the repository's,
# the revision as typed and its commit, one per line (a fresh process doing a replication
# reuses its parent's checkout).
CHECKOUT_VARIABLE = "GPUBENCH_LOCKSTEP_CHECKOUT"
# The key suffix of the revision's measurement of a call, in a fresh process's results.
BASE_SUFFIX = "@revision"
# The key suffix of a duo's pairs after the first, before their number (child_results).
AGAIN_SUFFIX = "@again"
# Where a lockstep test's more pairs come from: this process, each pair's inputs placed anew
# (timing.device.placed_anew; the default), or, with "fresh", fresh processes. On an H200 a
# pair set up again in one process moved as much as one from a fresh process, and no part of
# the spread belonged to the process (bench/results/h200-2026-11-29e); "fresh" is kept to
# compare them. The notes and the summary say which ran.
MORE_VARIABLE = "GPUBENCH_LOCKSTEP_MORE"
# The devices where a call's time depends on where its inputs sit: a call whose inputs cannot be
# placed anew takes its more pairs from fresh processes (bench/results/h100-2026-12-05b).
PLACED_KINDS = frozenset({"cuda"})
NATIVE_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)
ONCE = "which one process holds once"


class Pending(NamedTuple):
    """A test whose second process waits (Pairing.second_processes): its node id, its
    results as its pairs judge them, its settings, and the inputs that differ between the
    sides by key."""

    nodeid: str
    results: tuple[Result, ...]
    measure: MeasureSettings
    inputs: Mapping[str, str]


class TwoSides:
    """The revision's modules beside the working tree's in one process. ``plugin``: this
    package's folder (one copy serves both sides)."""

    def __init__(self, revision: Revision, plugin: Path) -> None:
        self.revision = revision
        self.plugin = plugin.resolve()
        self.repo = revision.repo.resolve()
        self.root = revision.root.resolve()
        self._base: dict[str, ModuleType] = {}
        self._head: dict[str, ModuleType] = {}
        self._paths: tuple[list[str], list[str]] = ([], [])  # sys.path: the tree's, the revision's
        self._in_base = False
        self._files: dict[Path, ModuleType | str] = {}  # the revision's test files, or why not
        self._owners: dict[str, str] = {}  # by a module's file
        self._installed = tuple(
            Path(p).resolve()
            for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()}
            if p
        )
        # Compilers' caches, keyed by what they compile: a library loaded from one (Triton's
        # launcher of a kernel) is that code's, whichever side compiled it.
        triton = os.environ.get("TRITON_CACHE_DIR") or os.path.join(
            os.environ.get("TRITON_HOME") or os.path.expanduser("~"), ".triton", "cache"
        )
        inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(
            tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"
        )
        self._known = (*self._installed, *(Path(p).resolve() for p in (triton, inductor)))
        self.foreign: list[str] = []  # the working tree's modules the revision's side imported
        self.natives: list[str] = []  # why its side's native code cannot load here
        self._raised: BaseException | None = None  # the error a revision's timed call raised
        self._current = False  # whose modules stand in sys.modules: the revision's, or yours
        self._count = 0  # how many modules it held when a side was made current

    @classmethod
    def from_environment(cls, plugin: Path) -> TwoSides | None:
        """The two sides of a fresh process whose parent runs both (CHECKOUT_VARIABLE)."""
        lines = os.environ.get(CHECKOUT_VARIABLE, "").split("\n")
        if len(lines) != 4 or not all(lines):
            return None
        root, repo, ref, commit = lines
        return cls(Revision(ref, commit, Path(repo), Path(root)), plugin)

    def environment(self) -> tuple[str, str]:
        """The variable that hands this process's checkout to a fresh process."""
        r = self.revision
        return CHECKOUT_VARIABLE, "\n".join([str(r.root), str(r.repo), r.ref, r.commit])

    def owner(self, module: object) -> str:
        """'base', 'head' or '' (not the project's: installed, the standard library, us)."""
        file = getattr(module, "__file__", None)
        paths = [file] if isinstance(file, str) else list(getattr(module, "__path__", []) or [])
        if not paths or not isinstance(paths[0], str):
            return ""
        found = self._owners.get(paths[0])
        if found is None:  # once per file: every swap asks of every module
            path = Path(paths[0]).resolve()
            found = (
                ""
                if path.is_relative_to(self.plugin)
                or any(path.is_relative_to(p) for p in self._installed)
                else "base"
                if path.is_relative_to(self.root)
                else "head"
                if path.is_relative_to(self.repo)
                else ""
            )
            self._owners[paths[0]] = found
        return found

    def _take(self, side: str) -> dict[str, ModuleType]:
        """The modules of ``side`` out of sys.modules."""
        taken = {n: m for n, m in list(sys.modules.items()) if self.owner(m) == side}
        for name in taken:
            del sys.modules[name]
        return taken

    def _path(self, entries: list[str]) -> list[str]:
        """sys.path for the revision's side: each folder of the repository replaced by its
        place in the checkout, the checkout's top level first."""
        moved = [str(self.root)]
        for entry in entries:
            there = self.revision.moved(Path(entry or os.getcwd()).resolve())
            moved.append(entry if there is None else str(there))
        return list(dict.fromkeys(moved))

    @contextlib.contextmanager
    def base(self) -> Iterator[None]:
        """The revision's side in sys.modules and on sys.path meanwhile (re-entrant)."""
        if self._in_base:
            yield
            return
        self.current(False)  # (the working tree's, as a pair leaves it)
        self._head = self._take("head")
        saved = list(sys.path)
        sys.path[:] = self._path(saved)
        sys.modules.update(self._base)
        self._in_base = True
        before = set(sys.modules)
        try:
            with self._loading_checked():
                yield
        finally:
            self._in_base = False
            for name in sorted(set(sys.modules) - before):
                if file := _native_file(sys.modules.get(name)):
                    self._refuse(self._refused(name, file))
            stray = self._take("head")  # the working tree's code, imported by the revision's
            self.foreign += [n for n in stray if n not in self.foreign]
            self._base = self._take("base")
            sys.path[:] = saved
            sys.modules.update(self._head)

    def on_side(self, base: bool, workload: Workload) -> Workload:
        """``workload`` whose calls find its side's modules (a lazy import inside a timed
        call): its side is made current as its calls are prepared (:meth:`current`), before
        a timer's clock starts, and by a call that finds the other side's (a call prepared
        once and made again later). Swapping around each call cost 4-17 µs a call (5-50
        modules a side), timed with it: a host-timed call read that much slower, and the
        two sides' costs differed."""
        self._head.update(self._here("head"))  # the working tree's first calls' imports
        self._paths = (list(sys.path), self._path(list(sys.path)))
        self._count = len(sys.modules)
        fn = workload.fn

        @functools.wraps(fn)  # its attributes too (a test's timer may read them)
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._current != base:
                self.current(base)
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                if base:  # the revision's (revision_error): raised as it is, for the timer
                    self._raised = exc  # probing it (a synchronizing call) catches its type
                raise

        enter = functools.partial(self.current, base)
        return dataclasses.replace(workload, fn=call, enter=enter)

    def current(self, base: bool) -> None:
        """Make one side's modules and folders current (the working tree's after a pair:
        ``current(False)``). What the calls imported since the last change stays the side's
        that imported it: without it, the working tree's lazily imported submodule left
        with each revision's call and was imported again in every call of its own."""
        if len(sys.modules) != self._count:
            self._keep(self._current)
        if base != self._current:
            self._swap(base)
            self._current = base
        self._count = len(sys.modules)

    def revision_error(self, exc: BaseException) -> str | None:
        """``exc``'s line where it is, or came from, the error a revision's timed call raised
        (the revision's failure, not the working tree's test's); None where it is not."""
        seen: BaseException | None = exc
        for _ in range(16):  # (a chain may loop)
            if seen is None:
                break
            if seen is self._raised:
                return error_line(seen)
            seen = seen.__cause__ or seen.__context__
        return None

    def _here(self, side: str) -> dict[str, ModuleType]:
        """The modules of ``side`` in sys.modules."""
        return {n: m for n, m in list(sys.modules.items()) if self.owner(m) == side}

    def _swap(self, base: bool) -> None:
        """Put one side's modules in sys.modules and its folders on sys.path (a lazy import
        of a top-level module), the other's out."""
        sys.path[:] = self._paths[base]
        mine, other = (self._base, self._head) if base else (self._head, self._base)
        sys.modules.update(mine)
        for name in other:
            if name not in mine:
                sys.modules.pop(name, None)

    def _keep(self, base: bool) -> None:
        """What one side's call imported, kept as that side's; the working tree's code
        imported by the revision's call is foreign (it cannot run both sides here)."""
        if base:
            self._base.update(self._here("base"))
            self.foreign += [n for n in self._here("head") if n not in self.foreign]
        else:
            self._head.update(self._here("head"))

    def test_function(
        self, path: Path, module: str, qualname: str
    ) -> Callable[..., Any] | str | None:
        """The revision's function of the test at ``qualname`` in the file ``path`` of the
        working tree, imported as ``module``; None where the revision has no such test, a
        line saying why where it cannot be run here."""
        there = self.revision.counterpart(path)
        if not there.is_file():
            return None
        if there not in self._files:
            self._files[there] = self._import(there, module)
        loaded = self._files[there]
        if isinstance(loaded, str):
            return loaded
        obj: Any = loaded
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return None
            if inspect.isclass(obj) and part != qualname.split(".")[-1]:
                obj = obj()  # pytest makes an instance of a test class per test
        return obj if callable(obj) else None

    def _import(self, file: Path, module: str) -> ModuleType | str:
        """The revision's test file as ``module``, in its namespace."""
        with self.base():
            sys.modules.pop(module, None)
            try:
                spec = importlib.util.spec_from_file_location(module, file)
                if spec is None or spec.loader is None:
                    return f"{file.name} of the revision is not a Python module"
                loaded = importlib.util.module_from_spec(spec)
                sys.modules[module] = loaded
                spec.loader.exec_module(loaded)
            except Exception as exc:  # the revision's code: its error, said in one line
                sys.modules.pop(module, None)
                return self.native() or (
                    f"its file cannot be imported beside the working tree's ({error_line(exc)})"
                )
        return self.native() or loaded

    def native(self) -> str:
        """Why one process cannot hold both sides' code: the revision's side asked for
        native code it cannot hold beside the working tree's (:meth:`_refused`), or imported
        the working tree's code; '' when neither."""
        if self.natives:
            return self.natives[0]
        if self.foreign:
            return f"the revision's code imported the working tree's {', '.join(self.foreign[:3])}"
        return ""

    def _refused(self, name: str, file: str) -> str:
        """Why the revision's side cannot load the native library ``file`` as module
        ``name`` beside the working tree's; '' where it can: installed, a compiler's cached
        launcher, or a torch extension built here (load_inline, load) that registers no torch
        operator. torch names a rebuilt extension apart (``name_v1``), so each side keeps its
        own; an operator is registered process-wide under one name, and a second
        registration aborts the process."""
        path = Path(file).resolve()
        if any(path.is_relative_to(p) for p in self._known):
            return ""
        # Made by torch's JIT extension builder in this process: ``name``, or ``name_v<N>``
        # of one it versions.
        builder = sys.modules.get("torch.utils.cpp_extension")
        entries = getattr(getattr(builder, "JIT_EXTENSION_VERSIONER", None), "entries", {})
        stem, _, version = name.rpartition("_v")
        if name not in entries and not (version.isdigit() and stem in entries):
            return f"it loads a native extension ({name}), {ONCE}"
        try:
            # The constructor of torch::Library, which TORCH_LIBRARY and its kin call.
            registers = b"_ZN5torch7LibraryC" in path.read_bytes()
        except OSError:
            registers = True
        if registers:
            return f"its torch extension {name} registers torch operators, {ONCE}"
        return ""

    def _refuse(self, why: str) -> None:
        if why and why not in self.natives:
            self.natives.append(why)

    @contextlib.contextmanager
    def _loading_checked(self) -> Iterator[None]:
        """Each native module the revision's side imports meanwhile checked before it
        loads: one it cannot hold beside the working tree's raises ImportError and sends
        the test to duos, never loaded (a library loaded twice may abort the process)."""
        loader = importlib.machinery.ExtensionFileLoader
        create = loader.create_module
        two = self

        def checked(self: importlib.machinery.ExtensionFileLoader, spec: Any) -> Any:
            why = two._refused(spec.name, str(spec.origin))
            if why:
                two._refuse(why)
                raise ImportError(why)
            return create(self, spec)

        def operators(path: str) -> None:  # torch.ops.load_library: it exists to register them
            why = f"it loads a library of torch operators ({Path(path).name}), {ONCE}"
            two._refuse(why)
            raise ImportError(why)

        ops = getattr(sys.modules.get("torch"), "ops", None)
        loader.create_module = checked  # type: ignore[method-assign]
        if ops is not None:
            ops.load_library = operators
        try:
            yield
        finally:
            loader.create_module = create  # type: ignore[method-assign]
            if ops is not None:
                del ops.load_library  # the class's own again


def holding_code(
    values: Mapping[str, object], project: Callable[[object], bool], natives: bool = True
) -> str:
    """The name of the first fixture value in ``values`` that holds code of the project or
    (with ``natives``) a native module (a module, a function or class of the project, an
    instance of one of its classes), itself or up to ``HOLD_DEPTH`` levels into containers,
    partials, bound methods, namespaces and dataclasses (``functools.partial(mylib.spin)``, a
    namespace's ``fn``): the revision's test would call the working tree's; '' when none."""

    def code(value: object) -> bool:
        if isinstance(value, ModuleType):
            return project(value) or (natives and bool(_native_file(value)))
        if isinstance(value, FunctionType | type):
            return project(sys.modules.get(value.__module__))
        return project(sys.modules.get(type(value).__module__))

    for name, value in values.items():
        level: list[object] = [value]
        seen: set[int] = set()
        for _ in range(HOLD_DEPTH + 1):
            if any(code(v) for v in level):
                return name
            level = [v for held in level if id(held) not in seen for v in _held(held, seen)]
    return ""


# How deep and how wide holding_code looks into a fixture's value: bounded, as a value may be
# a large container of numbers.
HOLD_DEPTH = 3
HOLD_WIDTH = 64


def _held(value: object, seen: set[int]) -> list[object]:
    """What ``value`` holds that could be code (its first HOLD_WIDTH items or attributes)."""
    seen.add(id(value))
    if isinstance(value, functools.partial):
        inner: Iterable[object] = [value.func, *value.args, *value.keywords.values()]
    elif isinstance(value, MethodType):
        inner = [value.__func__, value.__self__]
    elif isinstance(value, list | tuple | set | frozenset):
        inner = value
    elif isinstance(value, dict):
        inner = value.values()
    elif isinstance(value, SimpleNamespace) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        inner = vars(value).values() if hasattr(value, "__dict__") else ()
    else:  # other objects' insides are theirs (pytest's request holds the test itself)
        inner = ()
    return list(itertools.islice(inner, HOLD_WIDTH))


class Apart(Exception):
    """Why a test must be timed in duos (one process cannot hold both sides of it)."""


def _native_file(module: ModuleType | None) -> str:
    """The file of ``module`` where it is native code (a compiled extension); '' else."""
    file = getattr(module, "__file__", None)
    return file if isinstance(file, str) and file.endswith(NATIVE_SUFFIXES) else ""


class Pairing:
    """The tests of this process judged on pairs made in lockstep: the first, and more while
    a verdict is unsure, from this process with the inputs placed anew (or from fresh
    processes doing the same: ``in_process`` False), each judged by versus/ab.py's rule with
    the lockstep prior (judge/pairs.py)."""

    def __init__(
        self,
        two: TwoSides,
        session: BenchSession,
        settings: Settings,
        launcher: Launcher | None,
        *,
        in_process: bool = True,
    ) -> None:
        self.two = two
        self.session = session
        self.settings = settings
        self.design = design_of(settings.pairs, settings.confirm > 0, lockstep=True)
        # A test whose more pairs come from fresh processes: a process each, fewer.
        self.fresh_design = design_of(settings.pairs, settings.confirm > 0, True, fresh=True)
        self.duo_design = design_of(settings.pairs, settings.confirm > 0, True, duos=True)
        # More pairs from this process (MORE_VARIABLE), their inputs placed anew; the pads'
        # sizes drawn afresh in each process: a stream seeded alike in every process put
        # the pairs of a test in the same places each time, and what a place did to a side
        # (+3% at one pair, -5% at the next) repeated in every process, the second's too.
        self.in_process = in_process
        self._draw = random.Random()
        self._fixtures: dict[tuple[str, str], object] = {}  # the revision's, by where, scope
        # The tests that took more pairs and how many, by where: for the run's summary.
        self.added = {"this process": [0, 0], "fresh processes": [0, 0]}
        # Set by the process that owns the run: time a test (and the later ones using the
        # fixture named, if any) in pairs of fresh processes, for the reason given.
        self.apart: Callable[[str, str, str], None] | None = None
        if launcher is not None:  # its fresh processes run both sides, in this checkout
            launcher = dataclasses.replace(launcher, env=(*launcher.env, two.environment()))
        self.launcher = launcher

    def holding_code(self, values: Mapping[str, object], natives: bool = True) -> str:
        """The fixture whose value cannot serve both sides (:func:`holding_code`); ''."""
        return holding_code(values, lambda m: self.two.owner(m) == "head", natives)

    def revision_fixture(
        self,
        name: str,
        fn: Callable[..., Any],
        key: tuple[str, str],
        args: Mapping[str, Any],
        unwrap: Callable[[Any], Callable[..., Any]],
    ) -> object:
        """The value the revision's fixture ``name`` gives (its function at the place of the
        working tree's ``fn``, called with ``args`` on its side), once per ``key`` (the
        fixture's place and scope); raises :class:`Apart` where it cannot be had. ``unwrap``: the
        function of what the revision's file holds (pytest's fixture definition)."""
        if key in self._fixtures:
            return self._fixtures[key]
        found = self.two.test_function(Path(inspect.getfile(fn)), fn.__module__, fn.__qualname__)
        if not callable(found):
            raise Apart(found or f"the revision has no fixture {name!r}")
        value, why = self._on_revision(lambda: unwrap(found)(**args), f"its fixture {name!r}")
        if why:
            raise Apart(self.two.native() or why)
        if inspect.isgenerator(value):
            value.close()
            raise Apart(f"its fixture {name!r} holds code of the working tree and yields it")
        if self.holding_code({name: value}, natives=False) or self.two.native():
            raise Apart(f"its fixture {name!r} holds code of the working tree on both sides")
        self._fixtures[key] = value
        return value

    def run_base(self, fn: Callable[..., Any], kwargs: Mapping[str, Any], lock: Lockstep) -> str:
        """Run the revision's test body ``fn`` with ``kwargs`` (its ``gpubench`` the
        revision's, holding its calls in ``lock``): why its test did not pass there (its held
        calls then dropped), '' when it did. A KeyboardInterrupt passes."""
        _, failed = self._on_revision(lambda: fn(**kwargs), "its test")
        lock.head = True
        lock.failed = failed
        if failed:
            lock.held.clear()
        return failed

    def _on_revision(self, call: Callable[[], Any], what: str) -> tuple[Any, str]:
        """``call()`` on the revision's side: its value and '', or None and why ``what`` (its
        test, its fixture) did not pass there. A KeyboardInterrupt or SystemExit passes."""
        with self.two.base():
            try:
                return call(), ""
            except Exception as exc:  # the revision's code: its failure is a fact, not ours
                return None, f"{what} failed on the revision's side ({error_line(exc)})"
            except BaseException as exc:  # pytest.skip and the like
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                return None, f"{what} did not pass on the revision's side ({error_line(exc)})"

    def finish_base(self, lock: Lockstep) -> None:
        """The revision's calls the working tree's body did not pair: timed alone."""
        for key, held in list(lock.held.items()):
            with self.two.base():
                lock.base[key] = self.session.measure(held.workload, held.call).measurement
            del lock.held[key]

    def verdicts(
        self,
        nodeid: str,
        head: Sequence[Measurement],
        base: Mapping[str, Measurement],
        measure: MeasureSettings,
        *,
        failed: str = "",
        inputs: Mapping[str, str] | None = None,
        replicate: bool = True,
        progress: Callable[[int, int], None] = lambda i, n: None,
        paired: Mapping[str, Pair],
        each_pair: Callable[[], contextlib.AbstractContextManager[object]] = contextlib.nullcontext,
        later: list[Pending] | None = None,
    ) -> tuple[Result, ...]:
        """The verdicts on the test ``nodeid`` from this process's pair of each key (``head``;
        ``base``, the revision's by key; ``failed``: why its test did not pass on the
        revision's side). While any is unsure and ``replicate``, more pairs follow up to the
        design's cap (``paired``'s calls, their inputs placed anew, or fresh processes), then
        a second process (:meth:`second_processes`; given ``later``, a test that needs one is
        appended to it, pending, for the caller to end). Each pair timed here runs inside
        ``each_pair()`` (the test's timeout); the first that raises ends the more pairs."""
        from ..timing.device import placeable

        pairs = Pairs()
        pairs.add({BASE: {} if failed else base, HEAD: {m.key: m for m in head}})
        if failed:
            pairs.failed[BASE].update((node_id(m.key), failed) for m in head)
        errors: list[str] = []
        spent_s = 0.0  # on more pairs
        here = self.in_process and bool(paired)
        launcher = self.launcher  # None in a fresh process: its pairs stay in it
        # A call that keeps its inputs where this process put them, on a device where that
        # moves its time (PLACED_KINDS): more pairs from here would repeat it.
        held = (
            here
            and launcher is not None
            and self.session.device.kind in PLACED_KINDS
            and not all(placeable(p.head) and placeable(p.base) for p in paired.values())
        )
        if held:
            assert launcher is not None
            here = False  # fresh processes, each one pair (not more of its own)
            launcher = dataclasses.replace(launcher, env=(*launcher.env, (MORE_VARIABLE, "fresh")))
        # More pairs from fresh processes, a process each: their design.
        design = self.fresh_design if launcher is not None and not here else self.design
        results = self._judged(pairs, lambda _: measure, design)
        placed: list[int] = []  # per pair added here, the calls whose inputs moved
        stopped = False  # a pair timed here raised: no more
        while replicate and not stopped and (here or launcher is not None):
            done = pairs.count
            unsure = any(
                r.verdict.judgement and r.verdict.judgement.needs_confirmation for r in results
            )
            count = design.next_batch(done) if unsure else 0
            if count == 0:
                break
            started = time.perf_counter()
            if here:
                for _ in range(count):
                    try:
                        with each_pair():
                            sides, moved = self._pair_again(paired, pairs.count % 2 == 1)
                    except Exception as exc:  # the test's code, on its inputs placed anew
                        errors.append(f"no more pairs in this process: {error_line(exc)}")
                        stopped = True
                        break
                    other = _another_call(pairs.runs, sides)
                    if other:  # not a pair of this call: left out
                        errors.append(f"no more pairs in this process: {other}")
                        stopped = True
                        break
                    pairs.add(sides)
                    placed.append(moved)
            else:  # fresh processes in lockstep: those that measured the working tree's side
                assert launcher is not None
                device = self.session.device_index
                for run in launcher.confirming([nodeid], count, device, progress, first=done):
                    errors += [run.error] if run.error else []
                    for sides in _sides_of(run)[0]:
                        if sides[HEAD]:
                            pairs.add(sides)
            spent_s += time.perf_counter() - started
            if pairs.count == done:
                break  # the batch measured nothing: another would not either
            results = self._judged(pairs, lambda _: measure, design)
        more = pairs.count - design.first  # beyond the first look's
        if held and pairs.count > 1:
            errors.insert(
                0,
                "its inputs are held where this process cannot place them anew (setup=, a global, "
                "a module's weights or an autograd graph): more pairs from fresh processes",
            )
        if more > 0:
            tally = self.added["this process" if here else "fresh processes"]
            tally[0], tally[1] = tally[0] + 1, tally[1] + more
        if placed:
            errors.append(
                f"{plural(len(placed), 'pair')} set up again in this process, inputs placed "
                f"anew for {min(placed)} of {plural(len(paired), 'call')}"
            )
        note = "; ".join(dict.fromkeys(errors))[:300]
        results = tuple(_with_cost(r, spent_s / max(1, len(results)), note) for r in results)
        pending = Pending(nodeid, results, measure, inputs or {})
        if not (replicate and here and not stopped) or not self.asks_second_process(pending):
            return ended(pending)
        if later is not None:
            later.append(pending)
            return results
        [results] = self.second_processes([pending], progress)
        return results

    def with_evidence(
        self, results: tuple[Result, ...], paired: Mapping[str, Pair], measure: MeasureSettings
    ) -> tuple[Result, ...]:
        """``results`` with a profiler trace of one call of each side, the working tree's
        as ``trace`` and the revision's as ``reference_trace`` (as fresh processes' pairs
        keep them, versus.ab), where the verdict fails or a second process may fail it
        (every one under --gpubench-profile): taken now, while ``paired``'s calls live; the
        final verdict's (BenchSession.kept_evidence) drops those that do not fail."""
        gate = Gate.of(self.settings, family=self.session.family)
        return tuple(
            self.session.traced(r, pair.head, pair.base)
            if (pair := paired.get(r.key)) is not None
            and (self.settings.profile or gate.fails(r.verdict) or _asked(r, measure, gate))
            else r
            for r in results
        )

    def asks_second_process(self, test: Pending) -> bool:
        """Whether :meth:`second_processes` would time the pending ``test`` again."""
        gate = Gate.of(self.settings, family=self.session.family)
        return (
            self.launcher is not None
            and self.settings.confirm > 0
            and any(_asked(r, test.measure, gate) for r in test.results)
        )

    def second_processes(
        self,
        tests: Sequence[Pending],
        progress: Callable[[int, int], None],
    ) -> list[tuple[Result, ...]]:
        """The ``tests``' pending results (:class:`Pending`), ended. Each failure of this
        process's pairs, and each unsure reading beyond the threshold (:func:`_unsure_beyond`),
        is timed again in one fresh process shared by all, the design's cap of pairs each (why:
        docs/verdict.md, "Lockstep pairs"). Without that process's verdict a result stands,
        its note saying why."""
        gate = Gate.of(self.settings, family=self.session.family)
        asked = [test.nodeid for test in tests if self.asks_second_process(test)]
        runs: list[ChildRun] = []
        share_s = 0.0
        if asked:
            assert self.launcher is not None
            started = time.perf_counter()
            runs = self.launcher.confirming(
                asked, 1, self.session.device_index, progress, pairs=self.design.cap
            )
            share_s = (time.perf_counter() - started) / len(asked)
        theirs = {
            r.measurement.key: r
            for run in runs
            for r, _ in run.results
            if not r.measurement.key.endswith(BASE_SUFFIX)
        }
        error = next((run.error for run in runs if run.error), "it measured nothing")
        missing = f"no second process: {error}"[:300]  # a result's note, where it has no verdict

        def says(r: Result, test: Pending) -> Result:
            why = _asked(r, test.measure, gate)
            said: Result | None = r
            if why == "flagged":
                said = _as_second_process_says(r, theirs.get(r.key), test.measure)
            elif why == "beyond":
                said = self._as_second_process_decides(r, theirs.get(r.key), test.measure, gate)
            costs = r.measurement.costs
            spent_s = (costs.confirm_s if costs else 0.0) + share_s / len(test.results)
            return _with_cost(said or r, spent_s, "" if said else missing)

        return [
            ended(test._replace(results=tuple(says(r, test) for r in test.results)))
            if test.nodeid in asked
            else ended(test)
            for test in tests
        ]

    def _as_second_process_decides(
        self,
        result: Result,
        theirs: Result | None,
        measure: MeasureSettings,
        gate: Gate,
    ) -> Result | None:
        """An unsure ``result`` whose change reads beyond the threshold (_unsure_beyond),
        given a second process's result: that process's pairs judged at this run's level
        (its own run judged one test), failing the test where they fail it on their own the
        same way, else ``result`` with what they read; None where it has no pairs."""
        if theirs is None or theirs.verdict.paired is None or not theirs.verdict.paired.pairs:
            return None
        m, ours = theirs.measurement, result.verdict
        # The binary facts the run's pairs found stay its own.
        verdict = rejudged(theirs.verdict.paired, m, ours, measure, gate, self.design)
        ratios = [j.ratio for j in (result.verdict.judgement, result.verdict.beside) if j]
        way = {r > 1 for r in ratios if r is not None and r != 1}
        slower = verdict.status is Status.REGRESSED
        if gate.fails(verdict) and verdict.status in MOVED and way == {slower}:
            reason = (
                f"{verdict.reason} (a second process's pairs, as this process's left it "
                f"unsure reading beyond the threshold: {ours.reason})"
            )
            return _restated(dataclasses.replace(result, verdict=verdict), reason)
        read = verdict.judgement and _change(verdict.judgement)
        pairs = verdict.history_sessions
        said = f"a second process's {pairs} pairs read {read}: {verdict.status.value}"
        return _restated(result, f"{result.verdict.reason}; {said}")

    def duo_verdicts(
        self,
        nodeids: Sequence[str],
        head: Launcher,
        base: Launcher,
        measure_of: Callable[[str], MeasureSettings],
        announce: Callable[[str], None],
    ) -> tuple[dict[str, Result], list[str], int]:
        """The tests ``nodeids``, which one process cannot hold, timed in duos (run/duo.py,
        docs/verdict.md, "Duos") of a fresh process per side (``head``, ``base``), each look
        of the duo design over the tests still unsure. Their results by key, what went wrong,
        and how many duos ran."""
        from ..run.children import run_duos

        pairs = Pairs()
        errors: list[str] = []
        inputs: dict[str, str] = {}  # how a call's inputs differ between the sides, by key
        results: dict[str, Result] = {}
        wanted = list(nodeids)
        duos = 0  # a test still wanted was in every duo so far
        while wanted and (count := self.duo_design.next_batch(duos)):
            numbers = range(duos + 1, duos + count + 1)
            tests = plural(len(wanted), "test")
            which = f"duo {duos + 1}" if count == 1 else f"duos {duos + 1}-{duos + count}"
            announce(
                f"{which}: both sides at once, {tests}, {DUO_PAIRS} pairs each, each side "
                "leading in turn (the working tree's the odd ones), set up together"
            )
            ran = run_duos(
                head,
                base,
                wanted,
                self.session.device_index,
                [(f"duo-{n}", n % 2 == 1) for n in numbers],
                DUO_PAIRS,
            )
            duos += count
            measured = False
            for n, (leader, follower) in zip(numbers, ran, strict=True):
                head_leads = n % 2 == 1
                theirs = follower if head_leads else leader
                if theirs.foreign:  # the revision's process timed the working tree's code
                    label = f"the revision {self.two.revision.ref}'s process"
                    raise imported_other_side(self.two.revision, label, theirs.foreign)
                errors += [r.error for r in (leader, follower) if r.error]
                pairs.uncollected.update((follower if head_leads else leader).uncollected)
                new, changed = _sides_of(leader, swapped=not head_leads)
                if head_leads:  # its leader says how the revision's inputs differ
                    inputs.update(changed)
                for sides in new:
                    pairs.add(sides, duo=n)
                measured = measured or any(sides[HEAD] or sides[BASE] for sides in new)
            if not measured:
                break  # this look's duos measured nothing: another would not either
            judged = self._judged(pairs, measure_of)
            results = {r.key: _other_inputs(r, inputs.get(r.key, "")) for r in judged}
            # A call whose inputs differ between the sides is never judged.
            wanted = unsure_tests(nodeids, {k: r for k, r in results.items() if k not in inputs})
        if not results:
            raise GpubenchError(
                f"--gpubench-against {self.two.revision.ref}: no duo measured anything "
                f"({errors[-1] if errors else 'no gpubench test ran'})"
            )

        def paid(costs: Costs | None) -> float:
            return costs.lock_wait_s + costs.timer_setup_s + costs.sampling_s if costs else 0.0

        for key, result in results.items():  # each with its other pairs' time (costs)
            spent = sum(paid(run[key].costs) for run in pairs.runs[HEAD] if key in run)
            results[key] = _with_cost(result, spent - paid(result.measurement.costs), "")
        return results, list(dict.fromkeys(errors)), duos

    def _pair_again(
        self, paired: Mapping[str, Pair], base_first: bool
    ) -> tuple[dict[str, dict[str, Measurement]], int]:
        """One more pair of each call of the test, timed in lockstep in this process, each
        side's inputs placed anew (timing.device.placed_anew), the revision's copied first
        where ``base_first``; and of how many calls both sides' inputs moved (a call given
        none, or given them by ``setup=`` or a global, is timed again as it was)."""
        from ..timing.device import placed_anew

        sides: dict[str, dict[str, Measurement]] = {BASE: {}, HEAD: {}}
        moved = 0
        for key, pair in paired.items():
            # The caching allocator gives a large copy the lowest free block of its size,
            # the pads notwithstanding: the side copied first would always get the same one
            # (and the side whose graph is captured first, the same memory for its outputs).
            order = [pair.base, pair.head] if base_first else [pair.head, pair.base]
            with placed_anew(order, self._draw) as (placed, copied):
                base, head = placed if base_first else placed[::-1]
                try:
                    judged, sides[BASE][key] = self.session.measure_sides(
                        head, base, pair.call, pair.base_untimed, again=True, base_first=base_first
                    )
                finally:
                    self.two.current(False)
                sides[HEAD][key] = judged.measurement
            moved += copied > 0
        return sides, moved

    def _judged(
        self,
        pairs: Pairs,
        measure_of: Callable[[str], MeasureSettings],
        design: PairDesign | None = None,
    ) -> tuple[Result, ...]:
        """Each key's verdict on its ``pairs`` so far (``measure_of`` a key's node id: its
        settings) by ``design`` (the lockstep one by default), those of duos by the duo one."""
        gate = Gate.of(self.settings, family=self.session.family)
        design = self.duo_design if pairs.duos else design or self.design
        fresh = design is self.fresh_design
        return tuple(
            paired_results(
                pairs, gate, measure_of, design, self.two.revision, lockstep=True, fresh=fresh
            ).values()
        )


# How far a pair set up again may read from the call's first pair, both sides alike, and
# still be the same call: a copy that changes what a call does (an autograd graph's tensor
# copied to a leaf read 40 times faster, h100-2026-12-07b) moves both sides by far more
# than where its buffers lie does (1.3% for a 16 MiB copy on an H100, placement_probe.py).
ANOTHER_CALL = 2.0


def _another_call(
    runs: Mapping[str, Sequence[Mapping[str, Measurement]]],
    again: Mapping[str, Mapping[str, Measurement]],
) -> str:
    """Why the pair ``again`` is not of the calls of the first pair of ``runs`` (its time on
    both sides ANOTHER_CALL times or more apart from theirs, the same way), or ''."""
    for key, head in again[HEAD].items():
        base = again[BASE].get(key)
        first = (runs[HEAD][0].get(key), runs[BASE][0].get(key))
        if base is None or first[0] is None or first[1] is None:
            continue
        ratios = (head.median_ms / first[0].median_ms, base.median_ms / first[1].median_ms)
        if all(r >= ANOTHER_CALL for r in ratios) or all(r <= 1 / ANOTHER_CALL for r in ratios):
            low, high = (f"{r:.2g}" for r in sorted(ratios))
            return (
                f"its inputs placed anew, {key.split('::')[-1]} read "
                f"{low if low == high else f'{low}-{high}'} times its first pair's time on "
                "both sides: another call "
                "than the test's (a copy changed what it does; pass what it must keep as it is "
                "through setup=)"
            )
    return ""


def _sides_of(
    run: ChildRun, swapped: bool = False
) -> tuple[list[dict[str, dict[str, Measurement]]], dict[str, str]]:
    """Each pair's sides in a fresh process's results of tests timed in lockstep (the other
    side's under BASE_SUFFIX; a duo's pairs after the first under AGAIN_SUFFIX and their
    number): its own of the tests that passed there. ``swapped``: its own side is the
    revision's (a duo the revision's process led). And how each call's inputs differ
    between the sides, by key (child_results: the first pair's other side's reason)."""
    pairs: list[dict[str, dict[str, Measurement]]] = []
    inputs: dict[str, str] = {}
    for result, passed in run.results:
        key = result.measurement.key
        other = key.endswith(BASE_SUFFIX)
        side = BASE if other != swapped else HEAD
        # Its pair's place: the number after AGAIN_SUFFIX, or 0 (the first's key has none).
        plain = key.removesuffix(BASE_SUFFIX)
        own, again, number = plain.rpartition(AGAIN_SUFFIX)
        own, i = (own, int(number)) if again and number.isdigit() else (plain, 0)
        while len(pairs) <= i:
            pairs.append({BASE: {}, HEAD: {}})
        if passed or other:
            pairs[i][side][own] = dataclasses.replace(result.measurement, key=own)
        if other and i == 0 and result.verdict.status is Status.CHANGED:
            inputs[own] = result.verdict.reason
    return pairs or [{BASE: {}, HEAD: {}}], inputs


def ended(test: Pending) -> tuple[Result, ...]:
    """A pending test's results as they stand, each of a call whose inputs differ between
    the sides (``test.inputs`` by key) said to be of other work."""
    return tuple(_other_inputs(r, test.inputs.get(r.key, "")) for r in test.results)


def _other_inputs(result: Result, changed: str) -> Result:
    """``result`` of a call whose inputs differ between the sides (``changed``): its times
    are of other work, so it is ``changed``, not regressed or improved; its reason says so."""
    verdict = result.verdict
    if not changed or verdict.judgement is None:
        return result
    reason = f"inputs changed ({changed}), not judged: {verdict.reason}"
    judgement = dataclasses.replace(
        verdict.judgement, status=Status.CHANGED, reason=reason, same_low=None, same_high=None
    )
    return dataclasses.replace(
        result,
        verdict=dataclasses.replace(
            verdict, status=Status.CHANGED, reason=reason, judgement=judgement
        ),
    )


def _unsure_beyond(verdict: Verdict, threshold: float) -> bool:
    """An unsure verdict on pairs at the design's cap (``changed``: other launches) whose
    time per call or kernel time reads a change beyond ``threshold``: a second process
    may decide it (a disturbed stretch of one process leaves a +5% copy there; unchanged
    code rarely reads so: docs/guide.md, "Both revisions in one process", item 4)."""
    judgement = verdict.judgement
    if verdict.status not in (Status.UNSURE, Status.CHANGED) or judgement is None:
        return False
    if verdict.status is Status.CHANGED and not verdict.kernel_changes:
        return False
    if judgement.needs_confirmation or verdict.paired is None:
        return False
    edge = math.log1p(threshold)
    return any(
        j.ratio is not None and j.ratio > 0 and abs(math.log(j.ratio)) >= edge
        for j in (judgement, verdict.beside)
        if j is not None
    )


def _asked(result: Result, measure: MeasureSettings, gate: Gate) -> str:
    """Why a second process times ``result``'s test again: "flagged" (it fails on this
    process's pairs), "beyond" (:func:`_unsure_beyond`), or "" (it does not)."""
    verdict = result.verdict
    if verdict.status in (Status.REGRESSED, Status.IMPROVED) and gate.fails(verdict):
        return "flagged"
    return "beyond" if _unsure_beyond(verdict, measure.threshold) else ""


def _change(judgement: Judgement) -> str:
    """A judgement's change, "+0.0%" for a change that rounds to nothing either way."""
    if judgement.ratio is None:
        return "nothing"
    return f"{judgement.ratio - 1:+.1%}".replace("-0.0%", "+0.0%")


def _as_second_process_says(
    result: Result, theirs: Result | None, measure: MeasureSettings
) -> Result | None:
    """A failing ``result`` of pairs from one process, given a second process's result on
    its own pairs: kept where that bears it out (judge.pairs.second_process_agrees), else
    ``unsure``; None where either has no judgement."""
    verdict = result.verdict
    judgement = verdict.judgement
    if theirs is None or theirs.verdict.judgement is None or judgement is None:
        return None
    # Each number that failed the test is asked of the second process's same number, by the
    # timer whose number it is: a call near the short-call edge may be timed by cupti-graph
    # (its kernel time) there and by cuda-graph (kernel time beside) here.
    failed = {}
    if not verdict.by_kernel_time:
        failed[result.measurement.timer] = judgement
    if verdict.beside is not None and verdict.beside.status is verdict.status:
        failed[KERNEL_TIME] = verdict.beside
    timer, other, beside = theirs.measurement.timer, theirs.verdict.judgement, theirs.verdict.beside
    # Its judged numbers by the timer whose number each is: its time per call's and the
    # kernel time taken beside it.
    numbers = {**({KERNEL_TIME: beside} if beside is not None else {}), timer: other}
    said = f"a second process's {other.current_sessions} pairs read {_change(other)} by {timer}"
    if KERNEL_TIME in failed and KERNEL_TIME in numbers and timer != KERNEL_TIME:
        said += f", kernel time {_change(numbers[KERNEL_TIME])}"
    # Where it has none of them, its own number is asked.
    asked = [(first, numbers[name], name) for name, first in failed.items() if name in numbers]
    asked = asked or [(first, other, timer) for first in failed.values()]
    base_ms = verdict.reference_ms or result.measurement.median_ms
    if any(
        second_process_agrees(
            first,
            second,
            threshold=measure.threshold,
            alpha=measure.alpha,
            process_sigma=lockstep_process_sigma(base_ms, number),
        )
        for first, second, number in asked
    ):
        return _restated(result, f"{verdict.reason}; {said}")
    # Said first: the process's own reason may end in other clauses (its kernel time).
    reason = (
        f"{said}, which does not bear out this process's pairs: a difference between "
        "this process's two sides, not a change (a failure in lockstep needs two processes); "
        f"this process's: {verdict.reason}"
    )
    return _restated(result, reason, Status.UNSURE)


def _restated(result: Result, reason: str, status: Status | None = None) -> Result:
    """``result`` with its verdict and judgement saying ``reason``; given ``status``, of
    that status, with no same's bounds and no more pairs asked."""
    v = result.verdict
    j = v.judgement and dataclasses.replace(v.judgement, reason=reason)
    if status is not None and j is not None:
        j = dataclasses.replace(
            j, status=status, same_low=None, same_high=None, needs_confirmation=False
        )
    verdict = dataclasses.replace(v, status=status or v.status, reason=reason, judgement=j)
    return dataclasses.replace(result, verdict=verdict)


def _with_cost(result: Result, confirm_s: float, note: str) -> Result:
    """``result`` with its share of the more pairs' time, and why they stopped noted."""
    m = result.measurement.noted(note)
    if m.costs is not None and confirm_s:
        m = dataclasses.replace(m, costs=dataclasses.replace(m.costs, confirm_s=confirm_s))
    return dataclasses.replace(result, measurement=m)


def child_results(
    head: Sequence[Result],
    base: Mapping[str, Measurement],
    more: Mapping[str, Sequence[tuple[Measurement, Measurement]]] | None = None,
    stopped: str = "",
    inputs: Mapping[str, str] | None = None,
) -> tuple[Result, ...]:
    """A fresh process's results of a test in lockstep: the working tree's, and the
    revision's measurements under their key and BASE_SUFFIX, for its parent to pair; a duo's
    ``more`` pairs of a key (run.fixture) under AGAIN_SUFFIX and their number; ``stopped``:
    why they ended early, noted on the working tree's; ``inputs``: how a key's inputs differ
    between the sides, as its revision's side's status (changed) and reason."""
    changed = inputs or {}

    def side(m: Measurement, key: str, own: str) -> Result:
        verdict = (
            Verdict(Status.CHANGED, reason=changed[own])
            if own in changed
            else Verdict(Status.NEW, reason="the revision's side of a pair")
        )
        return Result(dataclasses.replace(m, key=key), verdict)

    again = [
        side(m, f"{key}{AGAIN_SUFFIX}{i}{suffix}", "")
        for key, pairs in (more or {}).items()
        for i, pair in enumerate(pairs, 1)
        for m, suffix in zip(pair, ("", BASE_SUFFIX), strict=True)
    ]
    return (
        *(_with_cost(r, 0.0, stopped) for r in head),
        *(side(m, key + BASE_SUFFIX, key) for key, m in base.items()),
        *again,
    )
