"""One codec for the records that cross a process or live in a file: a frozen dataclass
becomes a JSON object by its fields and their type hints, and back.

Written: each field under its name, its value by its type (an enum its value, a tuple a
list, a record its own JSON, a mapping an object). A field's metadata (``spec``) says where
the file differs: another key, a form (rounding), a value left out. A record with a field
``extra`` writes back the keys of a newer version it read.

Read tolerantly, as the files always were: keys it does not know are left out (kept in
``extra`` where the record has one); a missing key or a null takes the field's default; a
value of another type, or one that fails the field's check, raises ValueError naming the
field and what it should be (``has a 'group' of 5, not a string``), which the file's reader
prefixes with the file and the entry; a ``lenient`` field (an informational value) takes
its default instead. A nested record's message names it by its class's ``WHAT``
(``has a 'versus' 'fn_ms' of -1, not a time in ms``).

A record whose reads must say more (a baseline's session records and launches, read by the
million) keeps its own ``to_json``/``from_json`` (or ``to_dict``/``from_dict``), which the
codec calls where such a record is a field of another.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar, Union, get_args, get_origin, get_type_hints

from .jsondata import Json

T = TypeVar("T")
R = TypeVar("R", bound="Coded")
_ABSENT: Any = object()


class Spec(NamedTuple):
    key: str | None
    form: Callable[[Any], Json] | None
    omit: Callable[[Any], bool] | None
    check: tuple[Callable[[Any], bool], str] | None
    lenient: bool
    missing: Any


def spec(
    key: str | None = None,
    form: Callable[[Any], Json] | None = None,
    omit: Callable[[Any], bool] | None = None,
    check: tuple[Callable[[Any], bool], str] | None = None,
    lenient: bool = False,
    missing: Any = _ABSENT,
) -> dict[str, Spec]:
    """A field's metadata (``dataclasses.field(metadata=spec(...))``): ``key`` its name in
    the file; ``form`` how a value (not None) is written; ``omit`` which values are not
    written at all (``absent``, ``empty``); ``check`` what a value read must pass and what
    it should be; ``lenient`` a value of another type read as the default; ``missing``
    what a required field reads as when the file lacks it."""
    return {"codec": Spec(key, form, omit, check, lenient, missing)}


def absent(value: object) -> bool:
    """None: a value a file leaves out."""
    return value is None


def empty(value: object) -> bool:
    """None, empty, zero or false: a value a file leaves out."""
    return not value


class _Wrong(Exception):
    """A value read that is not of its field's type."""


class _Field(NamedTuple):
    name: str
    key: str
    write: Callable[[Any], Json]
    read: Callable[[Json], Any]
    expected: str
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


def encode(record: object) -> dict[str, Json]:
    """``record`` as a JSON object."""
    data: dict[str, Json] = {}
    for f in _plan(type(record)).fields:
        value = getattr(record, f.name)
        if f.spec.omit is not None and f.spec.omit(value):
            continue
        data[f.key] = None if value is None else f.write(value)
    extra = getattr(record, "extra", None)
    return {**extra, **data} if extra else data


def decode(cls: type[T], data: Json) -> T:
    """The record of ``cls`` in ``data``; ValueError saying what is wrong."""
    what = getattr(cls, "WHAT", "")
    if not isinstance(data, dict):
        raise ValueError(f"has {what} that is not an object" if what else "is not an object")
    plan = _plan(cls)
    values: dict[str, Any] = {}
    for f in plan.fields:
        raw = data.get(f.key)
        if raw is None:
            if f.spec.missing is not _ABSENT:
                values[f.name] = f.spec.missing
            elif f.required:
                raise ValueError(f"has {what} with no {f.key!r}" if what else f"has no {f.key!r}")
            continue
        try:
            values[f.name] = f.read(raw)
            if f.spec.check is not None and not f.spec.check[0](raw):
                raise _Wrong
        except _Wrong:
            if f.spec.lenient:
                values.pop(f.name, None)
                continue
            raise ValueError(
                f"has {what or 'a'} {f.key!r} of {raw!r:.40}, not {f.expected}"
            ) from None
    if plan.extra and not data.keys() <= plan.keys:
        values["extra"] = types.MappingProxyType(
            {k: v for k, v in data.items() if k not in plan.keys}
        )
    return cls(**values)


class _Plan(NamedTuple):
    fields: tuple[_Field, ...]
    keys: frozenset[str]
    extra: bool  # whether the record keeps the keys it does not know


_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    if cls not in _PLANS:
        _PLANS[cls] = _planned(cls)
    return _PLANS[cls]


def _planned(cls: type) -> _Plan:
    hints = get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        s = f.metadata.get("codec") or Spec(None, None, None, None, False, _ABSENT)
        write, read, expected = _io(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        form = s.form or write
        expected = s.check[1] if s.check else expected
        plan.append(_Field(f.name, s.key or f.name, form, read, expected, s, required))
    names = {f.name for f in dataclasses.fields(cls)}
    return _Plan(tuple(plan), frozenset(f.key for f in plan), "extra" in names)


def _same(value: Any) -> Any:
    return value


def _io(hint: Any) -> tuple[Callable[[Any], Json], Callable[[Json], Any], str]:
    """How a value of ``hint`` is written, how it is read (raising _Wrong), and what a
    value read should be."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return _same, _same, "a value"
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, hint
        return _io(inner[0])
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return (lambda v: v.value), _member(hint), f"a {hint.__name__.lower()}"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        write = getattr(hint, "to_json", None) or getattr(hint, "to_dict", None) or encode
        read = getattr(hint, "from_json", None) or getattr(hint, "from_dict", None)
        return write, _nested(read or functools.partial(decode, hint)), "an object"
    if origin is tuple and args[-1] is Ellipsis:
        item_write, item_read, item = _io(args[0])
        plain = item_write is _same
        return (
            (list if plain else lambda v: [item_write(x) for x in v]),
            lambda v: tuple(map(item_read, _listed(v))),
            f"a list, each {item}",
        )
    if origin is tuple:
        parts = [_io(a) for a in args]
        return (
            lambda v: [w(x) for (w, _, _), x in zip(parts, v, strict=True)],
            lambda v: tuple(
                r(x) for (_, r, _), x in zip(parts, _listed(v, len(args)), strict=True)
            ),
            f"a list of {len(parts)}",
        )
    if origin in (Mapping, dict):
        item_write, item_read, _ = _io(args[1])
        return (
            lambda v: {k: item_write(x) for k, x in v.items()},
            lambda v: {k: item_read(x) for k, x in _object(v).items()},
            "an object",
        )
    return _same, _scalar(hint), _EXPECTED[hint]


_EXPECTED = {str: "a string", int: "a whole number", float: "a number", bool: "true or false"}


def _scalar(hint: type) -> Callable[[Json], Any]:
    kinds = (int, float) if hint is float else (hint,)

    def read(value: Json) -> Any:
        if not isinstance(value, kinds) or (hint is not bool and isinstance(value, bool)):
            raise _Wrong
        return value

    return read


def _member(hint: type[enum.Enum]) -> Callable[[Json], Any]:
    def read(value: Json) -> Any:
        try:
            return hint(value)
        except ValueError:
            raise _Wrong from None

    return read


def _nested(read: Callable[[Json], Any]) -> Callable[[Json], Any]:
    return lambda value: read(_object(value))


def _listed(value: Json, length: int | None = None) -> list[Json]:
    if not isinstance(value, list) or (length is not None and len(value) != length):
        raise _Wrong
    return value


def _object(value: Json) -> dict[str, Json]:
    if not isinstance(value, dict):
        raise _Wrong
    return value
