"""Two processes timing a test's calls in lockstep: issue 44's second structure, a duo
(versus.lockstep.Pairing.duo_verdicts starts them: run.children.run_duos).

A process of each side runs the same tests at once: the follower holds its calls, the leader
pairs each of its calls with the follower's of the same key (:func:`timing.engine.collect_pair`,
:meth:`Leader.sampler`), and only one touches the GPU at a time (docs/verdict.md, "Duos";
docs/guide.md, "Both revisions in one process (lockstep)"). The leader reports both sides
as a lockstep child does (versus.lockstep.child_results). Messages are tuples over one
:mod:`multiprocessing.connection` under an authkey the parent draws; every wait is bounded,
and a peer gone or silent is a :class:`DuoError` that says which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener
from typing import TYPE_CHECKING, Any

from ..timing.device import inputs_of, placed_anew
from ..timing.engine import Again, Sampler, Workload
from .call import Call, Untimed
from .sides import DuoError, Held, Lockstep, RemoteCallError, error_line

if TYPE_CHECKING:
    from .session import BenchSession

# How long a process waits for its peer's next message by default: a test body's first calls
# (compiles, autotuning) run between two messages.
WAIT_S = 600.0


@dataclass(frozen=True)
class Offer:
    """A test as the follower ran it: the calls it holds (keys), why its body did not pass
    ('' when it did), and by key's place the durations of the calls' untimed calls
    (run.call.Untimed) and what each was given (timing.device.inputs_of)."""

    nodeid: str
    keys: tuple[str, ...]
    failed: str = ""
    untimed: tuple[Untimed, ...] = ()
    inputs: tuple[tuple[str, ...], ...] = ()


class _Peer:
    def __init__(self, conn: Connection, who: str, wait_s: float) -> None:
        self.conn = conn
        self.who = who
        self.wait_s = wait_s

    def send(self, *message: object) -> None:
        try:
            self.conn.send(message)
        except (OSError, EOFError) as exc:
            raise DuoError(f"{self.who} ended ({type(exc).__name__})") from None

    def receive(self) -> tuple[Any, ...]:
        try:
            if not self.conn.poll(self.wait_s):
                raise DuoError(f"{self.who} sent nothing for {self.wait_s:.0f} s")
            message = self.conn.recv()
        except (OSError, EOFError) as exc:
            raise DuoError(f"{self.who} ended ({type(exc).__name__})") from None
        if not isinstance(message, tuple) or not message:
            raise DuoError(f"{self.who} sent {message!r}, no message of ours")
        return message


class Follower(_Peer):
    """The process that does not time: offers each test's held calls, then samples them as asked."""

    def __init__(
        self, conn: Connection, wait_s: float = WAIT_S, who: str = "the working tree's process"
    ) -> None:
        super().__init__(conn, who, wait_s)

    def serve(self, offer: Offer, sampler_of: Callable[[str, str], Sampler]) -> set[str]:
        """Offer a test's held calls and sample them as the leader asks until it is done with
        the test (or skips it): the keys it timed. ``sampler_of(key, timer)``: a sampler of the
        held call ``key`` by the timer named (the leader's)."""
        self.send("test", offer.nodeid, offer.keys, offer.failed, offer.untimed, offer.inputs)
        timed: set[str] = set()
        sampler: Sampler | None = None
        try:
            while True:
                kind, *args = self.receive()
                if kind in ("done", "skip"):
                    return timed
                if kind == "sampler":
                    key, timer = args
                    if sampler is not None:
                        sampler.close()
                        sampler = None
                    try:
                        sampler = sampler_of(key, timer)
                    except Exception as exc:
                        self.send("error", error_line(exc))
                        continue
                    timed.add(key)
                    self.send(
                        "meta",
                        sampler.timer,
                        sampler.calls_per_sample,
                        sampler.note,
                        sampler.profile,
                        tuple(sampler.taken),
                    )
                elif kind == "take" and sampler is not None:
                    try:
                        self.send("sample", float(sampler.sample()))
                    except DuoError:
                        raise
                    except Exception as exc:
                        self.send("error", error_line(exc))
                elif kind == "caveat" and sampler is not None:
                    self.send("caveat", sampler.caveat())
                elif kind == "close" and sampler is not None:
                    sampler.close()
                    sampler = None
                else:
                    raise DuoError(f"{self.who} sent {kind!r} out of turn")
        finally:
            if sampler is not None:
                sampler.close()

    def end(self) -> None:
        """No more tests on this side."""
        self.send("end")

    def begin(self) -> None:
        """Wait until the leader holds the device (:meth:`Leader.begin`): before it, this
        process's tests (their fixtures, first calls) would run beside another duo's
        measurements."""
        kind, *_ = self.receive()
        if kind != "go":
            raise DuoError(f"{self.who} sent {kind!r} where 'go' was due")

    def lockstep(self, nodeid: str) -> Lockstep:
        """The test's calls held for the leader, its pads drawn apart from the leader's."""
        return Lockstep(Same(), draw=random.Random())

    def after(self, nodeid: str, lock: Lockstep, failed: str, session: BenchSession) -> None:
        """Offer the test's held calls (``failed``: why its body did not pass) and sample
        them as the leader asks."""
        held = dict(lock.held)
        lock.held.clear()
        for one in held.values():
            # A timer that cannot be made is said when the leader asks for its sampler.
            with contextlib.suppress(Exception):
                session.timer_ready(one.call)
        untimed = tuple(h.call.untimed for h in held.values())
        inputs = tuple(inputs_of(h.workload) for h in held.values())
        self.serve(
            Offer(nodeid, tuple(held), failed, untimed, inputs),
            held_samplers(held, session.remote_sampler, lock.draw),
        )


class Leader(_Peer):
    """The process that times: finds the follower's run of each of its tests and times the
    follower's calls through it. ``order``: the node ids of the tests both run, in the
    leader's order (a test the follower offers that is not among them is skipped);
    ``pairs``: how many pairs of each call it takes (the others than the first set up
    again)."""

    def __init__(
        self,
        conn: Connection,
        order: Sequence[str],
        pairs: int = 1,
        wait_s: float = WAIT_S,
        who: str = "the revision's process",
    ) -> None:
        super().__init__(conn, who, wait_s)
        self.order = {nodeid: i for i, nodeid in enumerate(order)}
        self.pairs = pairs
        self._next: Offer | None = None  # an offer of a later test, kept for it
        self._ended = False

    def offer(self, nodeid: str) -> Offer | None:
        """The follower's run of the test ``nodeid``: None where it has none (its side has no
        such test: the follower offered a later one, or ended). Offers of tests the leader
        does not run, or ran without the follower, are skipped."""
        mine = self.order.get(nodeid, -1)
        while True:
            if self._next is None:
                if self._ended:
                    return None
                kind, *args = self.receive()
                if kind == "end":
                    self._ended = True
                    return None
                if kind != "test":
                    raise DuoError(f"{self.who} sent {kind!r} where a test was due")
                named, keys, failed, untimed, inputs = args
                self._next = Offer(
                    named, tuple(keys), failed, tuple(untimed), tuple(map(tuple, inputs))
                )
            theirs = self.order.get(self._next.nodeid, -1)
            if self._next.nodeid == nodeid:
                found, self._next = self._next, None
                return found
            if theirs > mine:
                return None  # the follower is on a later test: this one is ours alone
            self.send("skip", self._next.nodeid)
            self._next = None

    def sampler(self, key: str, timer: str) -> Sampler:
        """The follower's held call ``key`` as a sampler of this process, by the timer named:
        each sample asked of the follower, which alone touches the GPU meanwhile."""
        self.send("sampler", key, timer)
        name, calls, note, profile, taken = self._answer("meta")
        return Sampler(
            timer=name,
            sample=lambda: float(self._ask("take", "sample")[0]),
            calls_per_sample=int(calls),
            note=str(note),
            close=lambda: self.send("close"),
            profile=profile,
            taken=tuple(taken),
            caveat=lambda: str(self._ask("caveat", "caveat")[0]),
            # The follower's memory and energy are not this process's to read.
            peak_bytes=lambda: None,
            energy=lambda per_call_s: None,
        )

    def begin(self) -> None:
        """This process holds the device: the follower may run its tests."""
        self.send("go")

    def end(self) -> None:
        """No more tests: the follower says so, not the leader."""

    def lockstep(self, nodeid: str) -> Lockstep | None:
        """The test's calls paired with the follower's; None where it has no such test."""
        offer = self.offer(nodeid)
        if offer is None:
            return None
        return Lockstep(
            Same(),
            head=True,
            remote_untimed=dict(zip(offer.keys, offer.untimed, strict=False)),
            remote_inputs=dict(zip(offer.keys, offer.inputs, strict=False)),
            remote=self.sampler,
            pairs=self.pairs,
        )

    def after(self, nodeid: str, lock: Lockstep, failed: str, session: BenchSession) -> None:
        lock.held.clear()
        self.done(nodeid)

    def done(self, nodeid: str) -> None:
        """Done with the test ``nodeid``: the follower drops its held calls."""
        self.send("done", nodeid)

    def _ask(self, kind: str, answer: str) -> tuple[Any, ...]:
        self.send(kind)
        return self._answer(answer)

    def _answer(self, kind: str) -> tuple[Any, ...]:
        got, *args = self.receive()
        if got == "error":
            raise RemoteCallError(f"{self.who} could not time its call: {args[0]}")
        if got != kind:
            raise DuoError(f"{self.who} sent {got!r} where {kind!r} was due")
        return tuple(args)


def joined(spec: str, order: Sequence[str], wait_s: float = WAIT_S) -> Leader | Follower:
    """This process's end of its duo, from run.children.DUO_VARIABLE's value ``spec``: the
    leader listens on the socket (``order``: the node ids of its tests, in order) and the
    follower connects, until ``wait_s`` has passed."""
    role, side, key, pairs, address = spec.split(" ", 4)
    authkey = bytes.fromhex(key)
    other = "the revision's process" if side == "head" else "the working tree's process"
    if role == "leader":
        with Listener(address, family="AF_UNIX", authkey=authkey) as listener:
            return Leader(listener.accept(), order, int(pairs), wait_s, other)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Follower(Client(address, family="AF_UNIX", authkey=authkey), wait_s, other)
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise DuoError(f"the leading process never listened on {address}") from None
            time.sleep(0.05)


def held_samplers(
    held: Mapping[str, Held],
    make: Callable[[Workload, Call, str, Again | None], Sampler],
    draw: random.Random,
) -> Callable[[str, str], Sampler]:
    """The follower's samplers of its ``held`` calls, by key and timer name
    (:meth:`Follower.serve`; ``make``: BenchSession.remote_sampler): a call's first on its
    inputs as the test gave them, each later one (a pair set up again) on its inputs placed
    anew until it closes (timing.device.placed_anew), made as the first was where that works."""
    asked: dict[str, Again | None] = {}

    def sampler_of(key: str, timer: str) -> Sampler:
        one = held[key]
        if key not in asked:
            made = make(one.workload, one.call, timer, None)
            asked[key] = made.again
            return made
        with contextlib.ExitStack() as stack:  # its inputs placed until it closes
            (workload,), _ = stack.enter_context(placed_anew([one.workload], draw))
            made = make(workload, one.call, timer, asked[key])
            stack.callback(made.close)
            return dataclasses.replace(made, close=stack.pop_all().close)

    return sampler_of


class Same:
    """The sides of a duo process's lockstep (run.sides.Sides): one each, so a call finds
    its own modules as they are."""

    def on_side(self, base: bool, workload: Any) -> Any:
        return workload

    def current(self, base: bool) -> None:
        pass  # (one side here: its modules are current)

    def revision_error(self, exc: BaseException) -> str | None:
        return None  # (no revision's call here: the other process times it)
