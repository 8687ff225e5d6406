"""One codec for the records that cross a process or live in a file: a frozen dataclass
is written as a JSON object by its fields and their type hints (an enum as its value, a
tuple as a list, a record as its own JSON), and read back tolerantly, as the files always
were: keys it does not know left out (kept in a field ``extra``, where the record has one,
and written back), a missing key or a null the field's default, a value of another type
a ValueError naming the field (``has a 'group' of 5, not a string``; a nested record names
itself by its class's ``WHAT``), which the file's reader prefixes with the file and entry.
A field's metadata (``spec``) says where its file differs. A record whose reads must say
more (a baseline's session records, launches) keeps its own reader, called where it is a
field of another.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from .jsondata import Json

T = TypeVar("T")
R = TypeVar("R", bound="Coded")
_ABSENT: Any = object()


class Spec(NamedTuple):
    """A field's metadata (``field(metadata=spec(...))``): ``key`` its name in the file;
    ``form`` how a value (not None) is written; ``omit`` which values are left out
    (``absent``, ``empty``); ``check`` what a value read must pass and what it should be;
    ``lenient`` a value of another type read as the default; ``missing`` what a required
    field reads as where the file lacks it; ``flat`` a record held in its parent's object."""

    key: str | None = None
    form: Callable[[Any], Json] | None = None
    omit: Callable[[Any], bool] | None = None
    check: tuple[Callable[[Any], bool], str] | None = None
    lenient: bool = False
    missing: Any = _ABSENT
    flat: bool = False


def spec(**how: Any) -> dict[str, Spec]:
    """A field's metadata: a name Spec lacks fails at import, where its record is made."""
    return {"codec": Spec(**how)}


def absent(value: object) -> bool:
    return value is None


def empty(value: object) -> bool:
    return not value


class _Wrong(Exception):
    """A value read that is not of its field's type."""


class _Field(NamedTuple):
    name: str
    key: str
    write: Callable[[Any], Json]
    read: Callable[[Json], Any]
    expected: str  # what a value read should be
    spec: Spec
    required: bool


class Coded:
    """A record written and read by the codec alone."""

    __slots__ = ()

    def to_json(self) -> dict[str, Json]:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], data: Json) -> R:
        """Raises ValueError saying what is wrong."""
        return decode(cls, data)


def encode(record: Any) -> dict[str, Json]:
    """``record`` as a JSON object."""
    data: dict[str, Json] = {}
    for f in _plan(cast(Any, type(record))).fields:
        value = getattr(record, f.name)
        if f.spec.flat:
            data.update(f.write(value))
        elif f.spec.omit is None or not f.spec.omit(value):
            data[f.key] = None if value is None else f.write(value)
    extra = getattr(record, "extra", None)
    return {**extra, **data} if extra else data


def decode(cls: type[T], data: Json) -> T:
    """The record of ``cls`` in ``data``; ValueError saying what is wrong."""
    what, plan, values = getattr(cls, "WHAT", ""), _plan(cast(Any, cls)), {}
    if not isinstance(data, dict):
        raise ValueError(f"has {what} that is not an object" if what else "is not an object")
    for f in plan.fields:
        raw = data if f.spec.flat else data.get(f.key)
        if raw is None:
            if f.spec.missing is not _ABSENT:
                values[f.name] = f.spec.missing
            elif f.required:
                raise ValueError(f"has {what} with no {f.key!r}" if what else f"has no {f.key!r}")
            continue
        try:
            value = f.read(raw)
            if f.spec.check is not None and not f.spec.check[0](raw):
                raise _Wrong
            values[f.name] = value
        except _Wrong:
            if not f.spec.lenient:
                what = what or "a"
                raise ValueError(f"has {what} {f.key!r} of {raw!r:.40}, not {f.expected}") from None
    if plan.extra and not data.keys() <= plan.keys:
        values["extra"] = types.MappingProxyType(
            {k: v for k, v in data.items() if k not in plan.keys}
        )
    return cls(**values)


def _names_of(cls: Any) -> dict[str, Any]:
    """The names ``cls``'s annotations are written in: its module's, found by the module's
    functions where the module is gone from sys.modules (pytester's in-process runs take out
    what they imported while a class of theirs lives on), and this module's."""
    module = sys.modules.get(cls.__module__)
    names = vars(module) if module is not None else getattr(cls.__init__, "__globals__", {})
    return {**globals(), **names}


class _Plan(NamedTuple):
    fields: tuple[_Field, ...]
    keys: frozenset[str]
    extra: bool  # whether the record keeps the keys it does not know


@functools.cache
def _plan(cls: Any) -> _Plan:
    hints, plan = get_type_hints(cls, globalns=_names_of(cls)), []
    for f in dataclasses.fields(cls):
        s = f.metadata.get("codec", Spec())
        write, read, expected = _io(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        expected = s.check[1] if s.check else expected
        plan.append(_Field(f.name, s.key or f.name, s.form or write, read, expected, s, required))
    coded = tuple(f for f in plan if f.name != "extra")
    keys = [_plan(hints[f.name]).keys if f.spec.flat else {f.key} for f in coded]
    return _Plan(coded, frozenset[str]().union(*keys), len(coded) < len(plan))


def _same(value: Any) -> Any:
    return value


def _io(hint: Any) -> tuple[Callable[[Any], Json], Callable[[Json], Any], str]:
    """How a value of ``hint`` is written, how it is read (raising _Wrong), and what a
    value read should be."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return _same, _same, "a value"
    if origin in (Union, types.UnionType):  # X | None: None is read and written apart
        return _io(next(a for a in args if a is not type(None)))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return (lambda v: v.value), _member(hint), f"a {hint.__name__.lower()}"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        write = getattr(hint, "to_json", None) or getattr(hint, "to_dict", None) or encode
        read = getattr(hint, "from_json", None) or getattr(hint, "from_dict", None)
        read = read or functools.partial(decode, hint)
        return write, lambda v: read(_object(v)), "an object"
    if origin is tuple and args[-1] is Ellipsis:
        write, read, item = _io(args[0])
        each = f"a list, each {item}"
        return (lambda v: list(map(write, v))), (lambda v: tuple(map(read, _list(v)))), each
    if origin is tuple:  # of a fixed length: one hint per item
        parts = [_io(a) for a in args]
        return (
            lambda v: [p[0](x) for p, x in zip(parts, v, strict=True)],
            lambda v: tuple(p[1](x) for p, x in zip(parts, _list(v, len(parts)), strict=True)),
            "a list",
        )
    if origin in (Mapping, dict):
        item_write, item_read, _ = _io(args[1])
        return (
            lambda v: {k: item_write(x) for k, x in v.items()},
            lambda v: {k: item_read(x) for k, x in _object(v).items()},
            "an object",
        )
    kinds = (int, float) if hint is float else (hint,)

    def scalar(v: Json) -> Any:
        if not isinstance(v, kinds) or (hint is not bool and isinstance(v, bool)):
            raise _Wrong
        return v

    return _same, scalar, _EXPECTED[hint]


_EXPECTED = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def _member(hint: type[enum.Enum]) -> Callable[[Json], Any]:
    def read(value: Json) -> Any:
        try:
            return hint(value)
        except ValueError:
            raise _Wrong from None

    return read


def _list(value: Json, length: int | None = None) -> list[Json]:
    if not isinstance(value, list) or len(value) != (length or len(value)):
        raise _Wrong
    return value


def _object(value: Json) -> dict[str, Json]:
    if not isinstance(value, dict):
        raise _Wrong
    return value
