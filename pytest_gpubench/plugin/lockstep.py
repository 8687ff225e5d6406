"""Against a revision in this process: what a test item tells versus/lockstep.py.

The pytest side of the lockstep structure: where a test's function lives (its file, the name
pytest imported it under, its qualified name), its fixture values, and the revision's body
run with them before the working tree's (plugin/measuring.py calls :func:`base_side`).
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..run.fixture import GpuBench
    from ..run.sides import Lockstep
    from ..versus.lockstep import Pairing, TwoSides


def _where(item: pytest.Item) -> tuple[Any, str, str] | None:
    """The test's file, the module name pytest imported it as, its function's qualified
    name; None for an item that is no Python function (a doctest, a plugin's item)."""
    if not isinstance(item, pytest.Function) or item.module is None:
        return None
    function = getattr(item, "function", None)
    qualname = getattr(function, "__qualname__", item.originalname)
    return item.path, item.module.__name__, qualname


def lockstep_refusal(item: pytest.Item, two: TwoSides) -> str:
    """Why the test cannot run both sides in this process, as far as its files tell before
    it runs ('' when they do not: its fixture values are asked when it runs)."""
    where = _where(item)
    if where is None:
        return "it is not a Python test function"
    found = two.test_function(*where)
    return found if isinstance(found, str) else two.native()


def _revision_values(
    item: pytest.Item, pairing: Pairing, values: dict[str, object]
) -> dict[str, object]:
    """``values`` with each fixture value that holds the working tree's code replaced by
    the value the revision's fixture gives (the fixtures it asks for likewise): a fixture
    handing a test its module or a built extension serves each side its own. Raises
    :class:`Apart` where one cannot be had (a fixture that asks for ``request``, one not
    the project's)."""
    from ..versus.lockstep import Apart

    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", None) or {}
    made: dict[str, object] = {}

    def value(name: str) -> object:
        if name not in made:
            made[name] = values[name]
            if pairing.holding_code({name: values[name]}):
                made[name] = remade(name)
        return made[name]

    def remade(name: str) -> object:
        held = f"its fixture {name!r} holds code of the working tree"
        found = defs.get(name)
        fixture = found[-1] if found else None
        if fixture is None or any(a == "request" or a not in values for a in fixture.argnames):
            raise Apart(held)
        anchor = {"session": "", "package": str(item.path.parent), "module": str(item.path)}
        where = f"{inspect.getfile(fixture.func)}:{fixture.func.__qualname__}"
        key = (where, anchor.get(str(fixture.scope), item.nodeid))
        args = {a: value(a) for a in fixture.argnames}
        return pairing.revision_fixture(name, fixture.func, key, args, _unwrapped)

    return {name: value(name) for name in values}


def _unwrapped(found: Any) -> Any:
    """The function of a fixture definition (pytest wraps it: 8.4 and later in an object of
    its own, earlier in a function that refuses a direct call)."""
    get = getattr(found, "_get_wrapped_function", None)
    if get is not None:
        return get()
    return getattr(getattr(found, "__pytest_wrapped__", None), "obj", found)


# BaseSide.fixture of a culprit that holds for every later test (a library loaded for good).
EVERY = "*"


@dataclass(frozen=True)
class BaseSide:
    """What running the revision's body found: the test's lockstep (None where the revision
    has no such test, or where one process cannot hold both sides), why its test did not
    pass there, and why it must be timed apart (the culprit fixture's name, if one)."""

    lock: Lockstep | None = None
    failed: str = ""
    apart: str = ""
    fixture: str = ""


def base_side(item: pytest.Item, pairing: Pairing, bench: GpuBench) -> BaseSide:
    """Run the revision's body of the test ``item`` with its fixture values, unless one
    process cannot hold both sides."""
    from ..run.sides import Lockstep
    from ..versus.lockstep import Apart

    where = _where(item)
    found = pairing.two.test_function(*where) if where is not None else None
    if isinstance(found, str):
        return BaseSide(apart=found)
    loaded = pairing.two.native()  # loaded for good by an earlier test: this one goes too
    if loaded:
        return BaseSide(apart=loaded, fixture=EVERY)
    if found is None:
        return BaseSide()
    assert isinstance(item, pytest.Function)
    values = {k: v for k, v in item.funcargs.items() if v is not bench}
    holder = pairing.holding_code(values)
    if holder:
        try:
            values = _revision_values(item, pairing, values)
        except Apart as why:
            return BaseSide(apart=str(why), fixture=holder)
    try:
        wanted = list(inspect.signature(found).parameters)
    except (TypeError, ValueError):
        wanted = list(item.funcargs)
    missing = [name for name in wanted if name not in item.funcargs]
    if missing:
        return BaseSide(
            apart="the revision's test asks for fixtures the working tree's does not "
            f"({', '.join(missing[:3])})"
        )
    lock = Lockstep(pairing.two, keep=pairing.in_process)
    # The revision's gpubench: the test's, holding its calls for the working tree's.
    twin = dataclasses.replace(bench, lockstep=lock, extra_info={}, _judged=[], _names=[])
    args = {k: twin if item.funcargs[k] is bench else values[k] for k in wanted}
    failed = pairing.run_base(found, args, lock)
    problem = pairing.two.native()
    # Loaded into this process for good: every later test too.
    return BaseSide(apart=problem, fixture=EVERY) if problem else BaseSide(lock, failed)
