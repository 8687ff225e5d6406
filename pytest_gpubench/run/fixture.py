"""The object behind the ``gpubench`` fixture."""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.errors import GpubenchError
from ..core.records import RATIO_KEY, Result
from ..core.settings import MarkerSpec, check_work
from ..store.files import plain_data_problem
from ..timing.device import inputs_of, kept_apart, placed_anew
from ..timing.engine import Workload
from .call import Call
from .sides import (
    DuoError,
    Held,
    Lockstep,
    Pair,
    RemoteCallError,
    inputs_changed,
)

if TYPE_CHECKING:  # the session imports the statistics: a run without --gpubench never does
    from ..core.records import Measurement
    from .session import BenchSession


@dataclass(frozen=True)
class TestContext:
    """What the fixture knows of its test: set by the plugin from the item and its marker."""

    nodeid: str
    name: str
    spec: MarkerSpec  # the test's measurement settings and annotations, from its markers


@dataclass
class GpuBench:
    """Times a function inside a test: ``y = gpubench(fn, *args, **kwargs)``.

    Without ``--gpubench`` the function runs once, untimed, and its result is returned. With
    it, the first call (compilation, autotuning, lazy loading) is still untimed and provides
    the result; then the function is timed and judged against this GPU's baseline.
    """

    context: TestContext
    session: BenchSession | None = None  # when timing, else None
    device_probe: Callable[[], bool] = lambda: False
    extra_info: dict[str, Any] = field(default_factory=dict)
    # Against a revision in this process: the test's two sides (run/sides.py).
    lockstep: Lockstep | None = None
    _judged: list[Result] = field(default_factory=list)
    _names: list[str | None] = field(default_factory=list)

    @property
    def results(self) -> tuple[Measurement, ...]:
        """The measurements this test took so far (none without ``--gpubench``)."""
        return tuple(r.measurement for r in self._judged)

    @property
    def enabled(self) -> bool:
        """Whether this run times (``--gpubench``) or only runs each function once."""
        return self.session is not None

    @property
    def device(self) -> str:
        """``"cuda"`` when a CUDA GPU is usable, else ``"cpu"``."""
        if self.session is not None:
            return str(self.session.device.kind)
        return "cuda" if self.device_probe() else "cpu"

    def __call__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        bytes: float | None = None,
        flops: float | None = None,
        reference: Callable[..., Any] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Time ``fn(*args, **kwargs)`` and return its result.

        ``name`` records one of several measurements in a test; ``bytes`` and ``flops``
        declare the work of one call, for GB/s, TFLOP/s and the share of peak bandwidth;
        ``reference`` is a function timed alternately with ``fn`` on the same arguments,
        whose ratio ``fn`` / ``reference`` is recorded and judged as a measurement of its own
        (``<key>#vs-reference``). These four keywords are the fixture's: they never reach
        ``fn``.
        """
        return self._run(Workload(fn, args, kwargs), name, bytes, flops, None, None, reference)

    def pedantic(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        setup: Callable[[], Any] | None = None,
        warmup: int | None = None,
        rounds: int | None = None,
        *,
        warmup_rounds: int | None = None,
        iterations: int = 1,
        name: str | None = None,
        bytes: float | None = None,
        flops: float | None = None,
        reference: Callable[..., Any] | None = None,
    ) -> Any:
        """Full control: ``setup()`` runs untimed before every sample and may return
        ``(args, kwargs)`` for fresh inputs; ``warmup`` and ``rounds`` fix the number of
        warmup samples and of timed samples instead of the adaptive rules (pairs of samples
        with a ``reference``). ``kwargs`` reaches ``fn`` whole, the fixture's own keywords
        included; ``warmup_rounds`` and ``iterations`` are pytest-benchmark's, the latter
        checked and not used (docs/guide.md, "The fixture")."""
        if warmup_rounds is not None:
            if warmup is not None:
                raise GpubenchError(
                    f"gpubench.pedantic got warmup={warmup!r} and warmup_rounds="
                    f"{warmup_rounds!r}, two names of one count: give one of the two"
                )
            warmup = warmup_rounds
        warmup_name = "warmup" if warmup_rounds is None else "warmup_rounds"  # as it was given
        counts = ((warmup_name, warmup, 0), ("rounds", rounds, 2), ("iterations", iterations, 1))
        for label, value, least in counts:
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < least
            ):
                raise GpubenchError(
                    f"invalid gpubench.pedantic {label}={value!r}: expected a whole number "
                    f"of at least {least}"
                )
        if setup is not None and not callable(setup):
            raise TypeError(f"gpubench.pedantic setup must be callable, got {setup!r}")
        if iterations > 1 and setup is not None:
            raise GpubenchError(
                f"gpubench.pedantic iterations={iterations} with setup: setup gives each call "
                "fresh arguments, so a round holds one call; leave iterations out"
            )
        workload = Workload(fn, tuple(args), dict(kwargs or {}), setup)
        return self._run(workload, name, bytes, flops, warmup, rounds, reference)

    def _run(
        self,
        workload: Workload,
        name: str | None,
        bytes: float | None,
        flops: float | None,
        warmup: int | None,
        rounds: int | None,
        reference: Callable[..., Any] | None = None,
    ) -> Any:
        if not callable(workload.fn):
            raise TypeError(
                f"gpubench expects a function to time as its first argument, got "
                f"{type(workload.fn).__name__} {workload.fn!r:.60}"
            )
        if reference is not None and not callable(reference):
            raise GpubenchError(
                f"invalid gpubench reference={reference!r:.60} in {self.context.name}: "
                f"expected a function, called with the same arguments as the one timed, "
                f"e.g. reference=torch.nn.functional.gelu"
            )
        self._claim(name)
        where = f"gpubench(..., {{}}=...) in {self.context.name}"
        bytes = check_work("bytes", bytes, where.format("bytes"))
        flops = check_work("flops", flops, where.format("flops"))
        if self.session is None or self.session.untimed(self.context.nodeid):
            # Not timed here: without --gpubench, or judged against a revision, whose
            # fresh processes timed both sides before the tests ran (versus/ab.py). A
            # reference is only timed: correctness runs stay as fast as without one.
            return workload.prepare()()
        # Untimed: compiles, warms caches, gives the result; its duration (a second call's
        # where it was slow, made once the result is kept apart) tells the timers whether the
        # function is slow for its budget, at every look of its pairs.
        result, first_call_s = self.session.first_call(workload)
        _refuse_unstarted(result, self.context.name)
        result = kept_apart(result, workload)  # the timed calls may write into its arguments
        budget_s = self.context.spec.measure.budget_s
        suffix = f"#{name}" if name is not None else ""
        call = Call(
            key=self.context.nodeid + suffix,
            test=self.context.name + suffix,
            spec=self.context.spec,
            bytes=bytes,
            flops=flops,
            warmup=warmup,
            rounds=rounds,
            untimed=self.session.call_durations(workload, first_call_s, budget_s),
        )
        if self.session.ncu_ranges:  # under Nsight Compute: its call, nothing timed
            self.session.profile_call(workload, call.key)
            return result
        lock = self.lockstep
        if lock is not None and not lock.head:  # the revision's body: held for its pair
            lock.held[call.key] = Held(workload, call)
            return result
        if lock is not None and lock.remote is not None and call.key in lock.remote_untimed:
            self._judged.append(self._in_duo(lock, workload, call))
            return result
        held = lock.held.pop(call.key, None) if lock is not None else None
        if lock is not None and held is not None:  # the same call of both sides, alternately
            changed = inputs_changed(inputs_of(held.workload), inputs_of(workload))
            if changed:
                lock.inputs[call.key] = changed
            sides = lock.two.on_side(False, workload), lock.two.on_side(True, held.workload)
            try:
                measured, base = self.session.measure_sides(*sides, call, held.call.untimed)
            except Exception as exc:  # the revision's: your call timed alone, unmeasurable
                why = lock.two.revision_error(exc)
                if why is None:
                    raise
                lock.failed = lock.failed or f"its call failed on the revision's side ({why})"
                lock.two.current(False)
                self._judged.append(self.session.measure(workload, call))
                return result
            finally:
                lock.two.current(False)  # your test's body goes on with your modules
            self._judged.append(measured)
            lock.base[call.key] = base
            if lock.keep:
                lock.paired[call.key] = Pair(*sides, call, held.call.untimed)
            return result
        if reference is not None:
            against = replace(workload, fn=reference)
            try:
                _, first_s = self.session.first_call(against)
                reference_untimed = self.session.call_durations(against, first_s, budget_s)
            except Exception as exc:  # say whose error it is: the test named one function
                note = (
                    f"in the reference= function of gpubench in {self.context.name}, called "
                    "with the timed function's arguments"
                )
                if hasattr(exc, "add_note"):  # Python 3.11+; 3.10 shows the error alone
                    exc.add_note(note)
                raise
            measured, ratio = self.session.measure_pair(workload, against, call, reference_untimed)
            self._judged += [measured] if ratio is None else [measured, ratio]
            return result
        self._judged.append(self.session.measure(workload, call))
        return result

    def _in_duo(self, lock: Lockstep, workload: Workload, call: Call) -> Result:
        """The working tree's call ``workload`` paired with the revision's in the other
        process of a duo (run/duo.py), as many times as ``lock.pairs`` asks: the pairs after
        the first set up again, each side's inputs placed anew (the other's by that
        process); the first that raises ends this call's, saying why. The working tree's
        measurement of the first pair."""
        remote, session = lock.remote, self.session
        assert remote is not None and session is not None
        untimed = lock.remote_untimed.pop(call.key)
        given = lock.remote_inputs.pop(call.key, None)
        changed = inputs_changed(given, inputs_of(workload)) if given is not None else ""
        if changed:
            lock.inputs[call.key] = changed
        theirs = functools.partial(remote, call.key)
        pairs = [session.measure_sides(workload, theirs, call, untimed)]
        while len(pairs) < lock.pairs:
            try:
                with placed_anew([workload], lock.draw) as ((mine,), _):
                    pair = session.measure_sides(mine, theirs, call, untimed, again=True)
            except RemoteCallError as exc:  # its call, on its inputs placed anew
                error: Exception = exc
            except DuoError:
                raise  # the duo is over: no later pair either
            except Exception as exc:  # the test's code, on its inputs placed anew
                error = exc
            else:
                pairs.append(pair)
                continue
            # This call's more pairs end here, and why is said (the first such).
            said = f"no more pairs in this duo: {type(error).__name__}: {error}"[:200]
            lock.stopped = lock.stopped or said
            break
        lock.base[call.key] = pairs[0][1]
        if len(pairs) > 1:
            lock.more[call.key] = [(head.measurement, base) for head, base in pairs[1:]]
        return pairs[0][0]

    def finish(self) -> tuple[str, tuple[Result, ...]]:
        """At the end of the test's call: '' and the judged measurements with ``extra_info``
        attached, or one line saying why it cannot be stored and the judged measurements
        without it."""
        info = self.extra_info
        problem = (
            plain_data_problem(info, "gpubench.extra_info")
            if isinstance(info, dict)
            else f"gpubench.extra_info is a {type(info).__name__}, not a dict"
        )
        if problem:
            return f"{self.context.name}: {problem}", tuple(self._judged)
        stored = json.loads(json.dumps(info))  # a copy, as a file will hold it
        return "", tuple(
            Result(replace(r.measurement, extra_info=stored), r.verdict) for r in self._judged
        )

    def _claim(self, name: str | None) -> None:
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise GpubenchError(f"invalid gpubench name {name!r}: expected a non-empty string")
        # The key of a ratio to a reference is its measurement's key and RATIO_KEY.
        reserved = RATIO_KEY.removeprefix("#")
        if name is not None and (name == reserved or name.endswith(RATIO_KEY)):
            raise GpubenchError(
                f"gpubench measurement name {name!r} in {self.context.name} is reserved for "
                f"the ratio to a reference function; choose another name"
            )
        if None in self._names or (name is None and self._names):
            raise GpubenchError(
                f"gpubench was called more than once in {self.context.name}; give each "
                f"measurement its own name, e.g. gpubench(fn, x, name='fp16')"
            )
        if name in self._names:
            raise GpubenchError(
                f"gpubench measurement name {name!r} is used twice in {self.context.name}; "
                f"names must be unique within a test"
            )
        self._names.append(name)


def _refuse_unstarted(result: object, test: str) -> None:
    """A call that returned a generator or a coroutine did none of its work: timing it
    would time its creation (and pass as fast as it ever was)."""
    if inspect.isgenerator(result):
        kind, remedy = "a generator", "gpubench(lambda *a: list(fn(*a)), ...)"
        result.close()
    elif inspect.iscoroutine(result):
        kind, remedy = "a coroutine", "gpubench(lambda *a: asyncio.run(fn(*a)), ...)"
        result.close()  # an unawaited coroutine warns when collected
    elif inspect.isasyncgen(result):
        kind = "an async generator"
        remedy = "gpubench(lambda *a: asyncio.run(collect(fn(*a))), ...), collect an async def "
        remedy += "returning [v async for v in it]"
    else:
        return
    raise GpubenchError(
        f"{test}: the function given to gpubench returned {kind}, so a call only creates it "
        f"and does none of its work; time a function that runs it, e.g. {remedy}"
    )
