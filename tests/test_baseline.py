"""Unit tests of pytest_gpubench.baseline: damaged files, atomic merging writes, stable output."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from pytest_gpubench import baseline as store
from pytest_gpubench.baseline import REMEDY, SCHEMA, Baseline, dumps, load, path_for, save
from pytest_gpubench.errors import BaselineError, GpubenchError

FINGERPRINT = {"name": "Fake GPU", "torch": "2.13.0", "python": "3.11.0"}


def entry(*samples: float, timer: str = "fake") -> dict[str, Any]:
    return {"timer": timer, "samples_ms": list(samples or (1.0, 1.1, 0.9)), "median_ms": 1.0}


def document(**entries: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, "device": FINGERPRINT, "benchmarks": entries}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / ".gpubench" / "cpu-fake.json"


def write(path: Path, content: str | bytes) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode() if isinstance(content, str) else content
    path.write_bytes(data)
    return data


def files_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- file names -----------------------------------------------------------------------------


def test_path_for_is_inside_the_directory(tmp_path: Path) -> None:
    assert path_for(tmp_path, "sm90-nvidia-h100-80gb-hbm3") == (
        tmp_path / "sm90-nvidia-h100-80gb-hbm3.json"
    )


@pytest.mark.parametrize("key", ["", "../x", "a/b", "-a", "Upper", "a.b", "a b", "/etc/passwd"])
def test_path_for_refuses_keys_that_could_escape_or_surprise(tmp_path: Path, key: str) -> None:
    with pytest.raises(ValueError, match="unsafe device key"):
        path_for(tmp_path, key)


# --- loading --------------------------------------------------------------------------------


def test_a_missing_file_is_an_empty_baseline(path: Path) -> None:
    base = load(path)
    assert base == Baseline(path)
    assert (base.exists, base.entries, base.fingerprint) == (False, {}, {})
    assert not path.parent.exists()


def test_a_valid_file_loads(path: Path) -> None:
    write(path, dumps(document(**{"t.py::test_a": entry(), "t.py::test_b#x": entry(2.0, 2.1)})))
    base = load(path)
    assert base.exists
    assert base.fingerprint == FINGERPRINT
    assert sorted(base.entries) == ["t.py::test_a", "t.py::test_b#x"]
    assert base.entries["t.py::test_b#x"]["samples_ms"] == [2.0, 2.1]


def test_a_file_without_device_loads_with_an_empty_fingerprint(path: Path) -> None:
    write(path, json.dumps({"schema": SCHEMA, "benchmarks": {}}))
    assert load(path).fingerprint == {}


VALID = dumps(document(**{"t.py::test_a": entry()}))
DAMAGED = [
    ("{", "is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
    ("", "is not valid JSON (Expecting value at line 1)"),
    (VALID[: len(VALID) // 2], "is not valid JSON"),
    ("not json at all\n", "is not valid JSON (Expecting value at line 1)"),
    (
        json.dumps({"machine_info": {}, "benchmarks": []}),
        f"has schema None, expected {SCHEMA!r}",
    ),
    (
        json.dumps({"schema": "pytest-gpubench/2", "benchmarks": {}}),
        f"has schema 'pytest-gpubench/2', expected {SCHEMA!r}",
    ),
    ("[1, 2]", f"has schema 'list', expected {SCHEMA!r}"),
    (json.dumps({"schema": SCHEMA}), "lacks a 'benchmarks' object"),
    (json.dumps({"schema": SCHEMA, "benchmarks": []}), "has a 'benchmarks' that is not an object"),
    (
        json.dumps({"schema": SCHEMA, "device": "x", "benchmarks": {}}),
        "has a 'device' that is not an object",
    ),
    (
        json.dumps({"schema": SCHEMA, "device": None, "benchmarks": {}}),
        "has a 'device' that is not an object",
    ),
    (json.dumps(document(t=[1.0, 2.0])), "has an entry 't' that is not an object"),
    (json.dumps(document(t={"samples_ms": [1.0, 2.0]})), "entry 't' that has no timer name"),
    (json.dumps(document(t={"timer": 3, "samples_ms": [1, 2]})), "that has no timer name"),
    (json.dumps(document(t={"timer": "wall"})), "entry 't' that has no 'samples_ms'"),
    (json.dumps(document(t=entry(1.0) | {"samples_ms": [1.0]})), "has fewer than 2 samples"),
    (
        json.dumps(document(t=entry() | {"samples_ms": "1,2,3"})),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, "2"]})),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, True]})),
        "entry 't' that has a 'samples_ms' that is not a list of numbers",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, -1.0]})),
        "entry 't' that has a sample of -1.0 ms, not a time between 1e-09 and 1e+06 ms",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, 0]})),
        "entry 't' that has a sample of 0 ms, not a time between 1e-09 and 1e+06 ms",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, 5e-324]})),
        "entry 't' that has a sample of 5e-324 ms, not a time between",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, 1e308]})),
        "entry 't' that has a sample of 1e+308 ms, not a time between",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, float("nan")]})),
        "is not valid JSON (NaN is not a JSON number)",
    ),
    (
        json.dumps(document(t=entry() | {"samples_ms": [1.0, float("inf")]})),
        "is not valid JSON (Infinity is not a JSON number)",
    ),
    (json.dumps(document(t=entry() | {"median_ms": "abc"})), "has a 'median_ms' of 'abc', not"),
    (json.dumps(document(t=entry() | {"median_ms": [1]})), "has a 'median_ms' of [1], not a time"),
    (json.dumps(document(t=entry() | {"median_ms": -1})), "has a 'median_ms' of -1, not a time"),
    (json.dumps(document(t=entry() | {"median_ms": 1e308})), "has a 'median_ms' of 1e+308"),
    (json.dumps(document(t=entry() | {"bytes": 0})), "has a 'bytes' of 0, not a positive number"),
    (json.dumps(document(t=entry() | {"group": 5})), "has a 'group' of 5, not a string"),
    ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be read as JSON"),
    ("[" * 100 + "]" * 100, "is nested deeper than 64 levels"),
]


@pytest.mark.parametrize("content, problem", DAMAGED)
def test_a_damaged_file_raises_and_is_left_byte_identical(
    path: Path, content: str, problem: str
) -> None:
    before = write(path, content)
    with pytest.raises(BaselineError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"baseline file {path}")
    assert problem in message
    assert message.endswith(f"; {REMEDY}")
    assert "\n" not in message
    assert path.read_bytes() == before
    assert files_in(path.parent) == [path.name]


def test_an_unreadable_file_raises_with_the_reason(path: Path) -> None:
    before = write(path, b"\xff\xfe\x00garbage")
    with pytest.raises(BaselineError) as info:
        load(path)
    assert str(info.value).startswith(f"baseline file {path} is not UTF-8 text (byte 0: ")
    assert str(info.value).endswith(REMEDY)
    assert path.read_bytes() == before


def test_a_directory_in_place_of_the_file_raises(path: Path) -> None:
    path.mkdir(parents=True)
    with pytest.raises(BaselineError, match="is a directory, not a regular file"):
        load(path)


def test_baseline_errors_are_gpubench_errors() -> None:
    assert issubclass(BaselineError, GpubenchError)


# --- saving ---------------------------------------------------------------------------------


def test_save_creates_the_file_and_its_directory(path: Path) -> None:
    base = load(path)
    assert save(base, FINGERPRINT, {"t.py::test_a": entry()}) is True
    assert load(path).entries == {"t.py::test_a": entry()}
    assert load(path).fingerprint == FINGERPRINT
    assert (base.exists, base.entries, base.fingerprint) == (
        True,
        {"t.py::test_a": entry()},
        FINGERPRINT,
    )
    # no temporary file left behind; the lock file stays (a flock lives on its inode), and a
    # directory of its own gets a .gitignore for both
    assert files_in(path.parent) == [".gitignore", path.name, f"{path.name}.lock"]
    assert (path.parent / ".gitignore").read_text() == store.GITIGNORE


def test_save_merges_and_keeps_the_entries_of_tests_that_did_not_run(path: Path) -> None:
    write(path, dumps(document(**{"t.py::test_a": entry(1.0, 1.1), "t.py::test_b": entry()})))
    base = load(path)
    updates = {"t.py::test_a": entry(3.0, 3.1), "t.py::test_c": entry(5.0, 5.1)}
    assert save(base, FINGERPRINT, updates) is True
    entries = load(path).entries
    assert entries == {
        "t.py::test_a": entry(3.0, 3.1),
        "t.py::test_b": entry(),
        "t.py::test_c": entry(5.0, 5.1),
    }


def test_save_without_changes_writes_nothing(path: Path) -> None:
    before = write(path, dumps(document(**{"t.py::test_a": entry()})))
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    base = load(path)
    assert save(base, FINGERPRINT, {}) is False
    assert save(base, FINGERPRINT, {"t.py::test_a": entry()}) is False
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == 1_000_000_000


def test_save_of_nothing_creates_no_file(path: Path) -> None:
    assert save(load(path), FINGERPRINT, {}) is False
    assert not path.parent.exists()


def test_save_records_a_changed_fingerprint_with_new_entries(path: Path) -> None:
    write(path, dumps(document(**{"t.py::test_a": entry()})))
    newer = FINGERPRINT | {"torch": "2.14.0"}
    assert save(load(path), newer, {"t.py::test_a": entry(2.0, 2.1)}) is True
    assert load(path).fingerprint == newer


def test_save_without_updates_never_rewrites_the_file(path: Path) -> None:
    before = write(path, dumps(document(**{"t.py::test_a": entry()})))
    newer = FINGERPRINT | {"torch": "2.14.0"}
    assert save(load(path), newer, {}) is False
    assert path.read_bytes() == before


def test_save_is_atomic_when_the_rename_fails(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = write(path, dumps(document(**{"t.py::test_a": entry()})))
    base = load(path)

    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(GpubenchError, match=f"^cannot write baseline file {path}: disk on fire$"):
        save(base, FINGERPRINT, {"t.py::test_b": entry()})
    assert path.read_bytes() == before
    assert files_in(path.parent) == [path.name, f"{path.name}.lock"]


def test_save_writes_through_a_temporary_file_then_renames(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((str(src), str(dst)))
        if dst == str(path):
            assert Path(src).read_text(encoding="utf-8").endswith("}\n")  # complete first
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    save(load(path), FINGERPRINT, {"t.py::test_a": entry()})
    [(src, dst)] = [(src, dst) for src, dst in renames if dst == str(path)]
    # <name>.<random>.tmp: caught by the *.tmp of the .gitignore, visible to `ls`
    assert Path(src).parent == path.parent
    assert Path(src).name.startswith(f"{path.name}.") and src.endswith(".tmp")


def test_saved_files_get_the_usual_permissions(path: Path) -> None:
    old = os.umask(0o022)
    try:
        save(load(path), FINGERPRINT, {"t.py::test_a": entry()})
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# --- output format --------------------------------------------------------------------------


def test_dumps_sorts_keys_indents_and_puts_sample_arrays_on_one_line() -> None:
    doc = {
        "schema": SCHEMA,
        "device": {"name": "Fake", "clocks": [1980, 2619]},
        "benchmarks": {
            "t.py::test_b": {"timer": "fake", "samples_ms": [1.5, 0.25, 1e-05, 12.0]},
            "t.py::test_a": {"timer": "fake", "samples_ms": [2.0, 3.0], "median_ms": 2.5},
        },
    }
    text = dumps(doc)
    assert text == (
        "{\n"
        '  "benchmarks": {\n'
        '    "t.py::test_a": {\n'
        '      "median_ms": 2.5,\n'
        '      "samples_ms": [2.0, 3.0],\n'
        '      "timer": "fake"\n'
        "    },\n"
        '    "t.py::test_b": {\n'
        '      "samples_ms": [1.5, 0.25, 1e-05, 12.0],\n'
        '      "timer": "fake"\n'
        "    }\n"
        "  },\n"
        '  "device": {\n'
        '    "clocks": [1980, 2619],\n'
        '    "name": "Fake"\n'
        "  },\n"
        f'  "schema": "{SCHEMA}"\n'
        "}\n"
    )
    assert json.loads(text) == doc


def test_dumps_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError):
        dumps({"samples_ms": [1.0, float("nan")]})


def test_dumps_round_trips_keys_that_look_like_arrays() -> None:
    doc = document(**{"t.py::test_x[4096,4096]": entry(), "t.py::test_y[ 1]": entry()})
    assert json.loads(dumps(doc)) == doc


# --- any string, any size, any order of savers (issue 7) --------------------------------------

ODD_STRINGS = [
    "",
    "\x00",
    "\x000\x00",
    "\x001\x00",
    '"',
    '\\"',
    "\\",
    "\\u0000",
    "\n\r\t\x0b\x0c",
    "µs ∑ 日本 🚀",
    "\ud800",  # a lone surrogate, as surrogateescape makes of undecodable bytes
    "\udcff",
    '{"samples_ms": [1, 2]}',
    "[1, 2]",
    "x" * 100_000,
]


@pytest.mark.parametrize("text", ODD_STRINGS, ids=range(len(ODD_STRINGS)))
def test_any_string_in_a_key_a_name_or_extra_info_round_trips(path: Path, text: str) -> None:
    key = f"t.py::test_{text}#{text}"
    stored = entry() | {"group": text, "note": text, "extra_info": {text: [text, {text: text}]}}
    assert save(load(path), FINGERPRINT | {"name": text}, {key: stored}) is True
    base = load(path)
    assert base.entries == {key: stored}
    assert base.fingerprint["name"] == text


def test_dumps_output_parses_back_for_nested_lists_and_empty_containers() -> None:
    doc = {"a": [], "b": {}, "c": [[1, 2], {"d": [3]}], "e": [{"f": []}], "g": [1, "x", None]}
    text = dumps(doc)
    assert json.loads(text) == doc
    assert '"g": [1, "x", null]' in text  # plain lists stay on one line


def test_dumps_refuses_keys_that_are_not_strings() -> None:
    with pytest.raises(TypeError, match=r"JSON object keys must be strings, got \(1, 2\)"):
        dumps({(1, 2): 1})


def test_forty_thousand_entries_save_and_load(path: Path) -> None:
    # Linear time: the former text substitution took minutes for this many entries.
    updates = {f"t.py::test_{i}[{i}]": entry(1.0 + i % 7, 2.0, 3.0) for i in range(40_000)}
    assert save(load(path), FINGERPRINT, updates) is True
    assert load(path).entries == updates


def test_save_merges_with_what_another_process_saved_since_this_one_read(path: Path) -> None:
    mine, theirs = load(path), load(path)  # two sessions read the same (missing) file
    assert save(theirs, FINGERPRINT, {"t.py::test_theirs": entry(2.0, 2.1)}) is True
    assert save(mine, FINGERPRINT, {"t.py::test_mine": entry()}) is True
    assert sorted(load(path).entries) == ["t.py::test_mine", "t.py::test_theirs"]
    assert sorted(mine.entries) == ["t.py::test_mine", "t.py::test_theirs"]


def test_save_refuses_to_overwrite_a_file_damaged_since_it_was_read(path: Path) -> None:
    base = load(path)
    before = write(path, "{")
    with pytest.raises(BaselineError, match="is not valid JSON"):
        save(base, FINGERPRINT, {"t.py::test_a": entry()})
    assert path.read_bytes() == before


def test_the_baseline_directory_may_be_created_but_not_over_a_file(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b" / "cpu-fake.json"
    assert save(load(deep), FINGERPRINT, {"t.py::test_a": entry()}) is True
    (tmp_path / "file").write_text("")
    in_file = tmp_path / "file" / "cpu-fake.json"
    for action in (lambda: load(in_file), lambda: save(Baseline(in_file), {}, {"k": entry()})):
        with pytest.raises(BaselineError) as info:
            action()
        assert str(info.value) == (
            f"baseline directory {tmp_path / 'file'} is a file, not a directory; point "
            "--gpubench-dir (or ini gpubench_dir) at a directory"
        )


def test_entry_problem_accepts_what_a_result_writes() -> None:
    written = entry() | {
        "mean_ms": 1.0,
        "min_ms": 0.9,
        "iqr_ms": 0.0,
        "noise": 0.0,
        "warmup": 0,
        "calls_per_sample": 1,
        "date": "2026-11-21T22:29:29+00:00",
        "git_commit": None,
        "group": "g",
        "bytes": 1e9,
        "flops": 2,
        "extra_info": {"a": [1]},
        "note": "n",
    }
    assert store.entry_problem(written) == ""
