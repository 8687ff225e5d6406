"""Against a revision in this process: what a test item tells versus/lockstep.py.

The pytest side of the lockstep structure: where a test's function lives (its file, the name
pytest imported it under, its qualified name), its fixture values, and the revision's body
run with them before the working tree's (plugin/measuring.py calls :func:`base_side`).
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..run.fixture import GpuBench
    from ..run.sides import Lockstep
    from ..versus.lockstep import Pairing, TwoSides
    from ..versus.revision import Revision


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


def only_in_revision(session: pytest.Session, rev: Revision) -> list[str]:
    """The tests asking for gpubench that the revision has and the working tree lacks, as
    node ids: lockstep runs the working tree's tests, so these are not run (in processes
    they are timed as `removed`). Those of the collected files' revision copies, and of the
    revision's test files, under the run's paths, that the working tree lacks; read from
    the files' source (importing a file the working tree dropped could fail or do anything)."""
    modules = {m.path: m for i in session.items if (m := i.getparent(pytest.Module))}
    root = session.config.rootpath
    found: list[str] = []
    for path, module in modules.items():
        there = rev.moved(path)
        if there is not None and there.is_file():
            mine = set(_benchmarks(path, module))
            found += [
                f"{_node(path, root)}::{t}" for t in _benchmarks(there, module) if t not in mine
            ]
    if not modules:
        return found
    collector = next(iter(modules.values()))  # its name filters are the config's
    for there in _test_files(session, rev):
        here = rev.repo / there.relative_to(rev.root)
        if not here.exists():
            found += [f"{_node(here, root)}::{t}" for t in _benchmarks(there, collector)]
    return found


def _node(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _benchmarks(file: Path, module: pytest.Module) -> Iterator[str]:
    """The test functions (``Class::name`` in a test class) of ``file`` that ask for
    gpubench, by the names pytest collects (the module's filters); none where it does not
    parse."""
    try:
        tree = ast.parse(file.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and module.classnamefilter(node.name):
            yield from (f"{node.name}::{t}" for t in _asking(node.body, module))
        yield from _asking([node], module)


def _asking(body: list[ast.stmt], module: pytest.Module) -> Iterator[str]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = [
                a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)
            ]
            if "gpubench" in names and module.funcnamefilter(node.name):
                yield node.name


def _test_files(session: pytest.Session, rev: Revision) -> Iterator[Path]:
    """The revision's test files (the config's ``python_files``) under the run's paths,
    its folders that ``norecursedirs`` names left out."""
    config = session.config
    patterns = config.getini("python_files")
    skipped = config.getini("norecursedirs")
    for arg in config.args:
        start = rev.moved((config.invocation_params.dir / arg.split("::")[0]).absolute())
        if start is None or not start.is_dir():
            continue
        for there in sorted(start.rglob("*.py")):
            folders = there.relative_to(start).parts[:-1]
            if any(fnmatch.fnmatch(f, p) for f in folders for p in skipped):
                continue
            if any(fnmatch.fnmatch(there.name, p) for p in patterns):
                yield there


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
