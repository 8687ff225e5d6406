"""The codec of the records files hold (core/codec.py): written by their fields, read
tolerantly, a wrong value refused in one line that names the field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from pytest_gpubench.core.codec import Coded, empty, spec
from pytest_gpubench.core.jsondata import Json
from pytest_gpubench.core.records import COUNT, NO_EXTRA, Status, no_extra


@dataclass(frozen=True)
class Inner(Coded):
    n: int = field(metadata=spec(check=COUNT))

    WHAT = "an 'inner'"


@dataclass(frozen=True)
class Outer(Coded):
    name: str
    status: Status = field(metadata=spec(missing=Status.NEW))
    ratio: float | None = field(default=None, metadata=spec(form=lambda r: round(r, 2)))
    tags: tuple[str, ...] = field(default=(), metadata=spec(omit=empty))
    inner: Inner | None = field(default=None, metadata=spec(key="nested"))
    note: str = field(default="", metadata=spec(lenient=True))
    extra: Mapping[str, Json] = field(default_factory=no_extra)


def test_a_record_is_written_by_its_fields_and_read_back() -> None:
    record = Outer("a", Status.OK, 0.123, ("x",), Inner(2), "n")
    data = record.to_json()
    assert data == {
        "name": "a",
        "status": "ok",
        "ratio": 0.12,
        "tags": ["x"],
        "nested": {"n": 2},
        "note": "n",
    }
    assert Outer.from_json(data) == Outer("a", Status.OK, 0.12, ("x",), Inner(2), "n")
    assert "tags" not in Outer("a", Status.OK).to_json()  # an omitted value is not written


def test_a_read_defaults_what_is_missing_and_keeps_what_it_does_not_know() -> None:
    record = Outer.from_json({"name": "a", "ratio": None, "newer": [1]})
    assert record == Outer("a", Status.NEW, extra={"newer": [1]})
    assert record.to_json()["newer"] == [1]  # written back
    assert Outer.from_json({"name": "a"}).extra is NO_EXTRA
    assert Outer.from_json({"name": "a", "note": 5}).note == ""  # lenient: the default


@pytest.mark.parametrize(
    "data, problem",
    [
        ([], "is not an object"),
        ({}, "has no 'name'"),
        ({"name": 5}, "has a 'name' of 5, not a string"),
        ({"name": "a", "status": "maybe"}, "has a 'status' of 'maybe', not a status"),
        ({"name": "a", "ratio": True}, "has a 'ratio' of True, not a number"),
        ({"name": "a", "tags": "x"}, "has a 'tags' of 'x', not a list, each a string"),
        ({"name": "a", "tags": ["x", 1]}, "has a 'tags' of ['x', 1], not a list, each a string"),
        ({"name": "a", "nested": 3}, "has a 'nested' of 3, not an object"),
        ({"name": "a", "nested": {}}, "has an 'inner' with no 'n'"),
        ({"name": "a", "nested": {"n": 0}}, "has an 'inner' 'n' of 0, not a count"),
    ],
)
def test_a_wrong_value_is_refused_naming_its_field(data: Json, problem: str) -> None:
    with pytest.raises(ValueError) as info:
        Outer.from_json(data)
    assert str(info.value) == problem
