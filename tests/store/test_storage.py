"""Unit tests of store/files.py: bounded reads, strict JSON, atomic writes, the lock."""

from __future__ import annotations

import collections
import json
import os
import random
import threading
from pathlib import Path

import pytest

from pytest_gpubench.core.errors import GpubenchError, StorageError
from pytest_gpubench.store import files as storage

WHAT = "test file"


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- reading --------------------------------------------------------------------------------


def test_read_text_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert storage.read_text(tmp_path / "none.json", WHAT, 100) is None


def test_read_text_reads_a_regular_file_and_follows_links(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("héllo", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    assert storage.read_text(tmp_path / "link.json", WHAT, 100) == "héllo"


@pytest.mark.parametrize(
    "make, problem",
    [
        (lambda p: os.mkfifo(p), "is a named pipe (FIFO), not a regular file"),
        (lambda p: p.symlink_to("/dev/zero"), "is a character device, not a regular file"),
        (lambda p: p.mkdir(), "is a directory, not a regular file"),
    ],
    ids=["fifo", "dev-zero", "directory"],
)
def test_read_text_refuses_what_is_not_a_regular_file(
    tmp_path: Path, make: object, problem: str
) -> None:
    path = tmp_path / "x.json"
    make(path)  # type: ignore[operator]
    with pytest.raises(StorageError) as info:
        storage.read_text(path, WHAT, 100)
    assert str(info.value) == f"{WHAT} {path} {problem}; move it away or choose another path"


def test_read_text_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"x" * 101)
    with pytest.raises(StorageError, match=r"is 101 bytes, over the limit of 100 bytes for a"):
        storage.read_text(path, WHAT, 100)
    path.write_bytes(b"x" * 100)
    assert storage.read_text(path, WHAT, 100) == "x" * 100


def test_read_text_refuses_what_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(b"ok\xff")
    with pytest.raises(StorageError, match=r"is not UTF-8 text \(byte 2: invalid start byte\)"):
        storage.read_text(path, WHAT, 100)


def test_read_text_under_a_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    with pytest.raises(StorageError, match=r"plain is a file, not a directory$"):
        storage.read_text(tmp_path / "plain" / "x.json", WHAT, 100)


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{", "is not valid JSON (Expecting property name enclosed in double quotes at line 1)"),
        ("[NaN]", "is not valid JSON (NaN is not a JSON number)"),
        ('{"a": -Infinity}', "is not valid JSON (-Infinity is not a JSON number)"),
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply to be read as JSON"),
        ("[" * 65 + "]" * 65, "is nested deeper than 64 levels"),
        ('{"a": {"b": 1, "b": 2}}', "is not valid JSON (the key 'b' appears twice in one object)"),
        (
            '{"a": 1, "b": 2, "b": 3, "a": 4}',
            "is not valid JSON (the key 'b' appears twice in one object)",
        ),
        # The deepest level an object of plain values (a session record): counted all the same.
        ("[" * 64 + '{"a": 1}' + "]" * 64, "is nested deeper than 64 levels"),
    ],
)
def test_parse_json_is_strict_and_one_line(text: str, problem: str) -> None:
    with pytest.raises(StorageError) as info:
        storage.parse_json(text, "the file")
    assert str(info.value) == f"the file {problem}"


def test_parse_json_accepts_the_deepest_allowed_nesting() -> None:
    assert storage.parse_json("[" * 64 + "]" * 64, "x") is not None
    assert storage.parse_json("[" * 62 + '{"a": [], "b": 1}' + "]" * 62, "x") is not None
    assert storage.parse_json('[1, {"a": ' * 32 + "2" + "}]" * 32, "x") is not None


@pytest.mark.parametrize(
    "text, value", [("5", 5), ("null", None), ('"\\ud83d\\ude00"', "\U0001f600")]
)
def test_parse_json_reads_bare_values_and_paired_surrogates(text: str, value: object) -> None:
    """A bare value is JSON (its reader says it is not the document it wants); a surrogate
    pair is one character."""
    assert storage.parse_json(text, "x") == value


PLAIN_WORDS = ["a", "b", "a:b", ":", "é", "\U0001f600", "", " ", "{}", "[", ","]
ESCAPED_WORDS = ['x"y', "back\\slash", "n\nl"]


def json_text(rng: random.Random, words: list[str], depth: int = 0) -> str:
    """A JSON text whose objects may hold a key twice: keys of a few, colons and brackets in
    strings and keys, nested objects, arrays of objects, empty ones, unicode; quotes and
    backslashes (escaped) where ``words`` have them."""
    ascii_only = ESCAPED_WORDS[0] in words and rng.random() < 0.3  # unicode escaped
    roll = rng.random()
    if depth > 3 or roll < 0.3:
        value = rng.choice([0, -1.5, 1e300, True, False, None, *words])
        return json.dumps(value, ensure_ascii=ascii_only)
    if roll < 0.6:
        items = [json_text(rng, words, depth + 1) for _ in range(rng.randint(0, 4))]
        return "[" + ", ".join(items) + "]"
    pairs = [
        json.dumps(rng.choice(words), ensure_ascii=ascii_only)
        + rng.choice([":", " : "])
        + json_text(rng, words, depth + 1)
        for _ in range(rng.randint(0, 4))
    ]
    return "{" + ",".join(pairs) + "}"


def twice_in_an_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) < len(keys):
        raise KeyError("twice")
    return dict(pairs)


@pytest.mark.parametrize("seed", range(8))
def test_a_key_twice_in_any_object_is_refused_and_the_rest_read_as_json_reads_it(
    seed: int,
) -> None:
    """Random texts, keys with colons, brackets, quotes and backslashes, nested objects, a
    key twice here and there: refused naming the key where an object holds one twice (and
    where something else is wrong after it), else read as ``json.loads`` reads them."""
    rng = random.Random(seed)
    refused = collections.Counter()
    for _ in range(400):
        words = PLAIN_WORDS + (ESCAPED_WORDS if rng.random() < 0.2 else [])
        text = json_text(rng, words)
        if rng.random() < 0.1:  # a key twice, then something else wrong: the key is told
            text = '[{"k": 1, "k": 2}, ' + rng.choice(["NaN]", "1 2]", "[" * 200_000]) + "]"
        try:
            expected: object = json.loads(text, object_pairs_hook=twice_in_an_object)
        except KeyError:
            expected = "appears twice in one object"
        except (ValueError, RecursionError):
            expected = "not valid JSON"
        try:
            found: object = storage.parse_json(text, "x")
        except StorageError as exc:
            assert isinstance(expected, str) and expected in str(exc), (text[:200], exc)
            refused[expected] += 1
        else:
            assert found == expected
    assert refused["appears twice in one object"] > 10


# --- writing --------------------------------------------------------------------------------


def test_write_atomic_writes_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    storage.write_atomic(tmp_path / "a.json", "new\n", WHAT)
    assert (tmp_path / "a.json").read_text() == "new\n"
    assert names(tmp_path) == ["a.json"]


def test_write_atomic_through_a_link_writes_its_target(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "a.json"
    target.write_text("old")
    link = tmp_path / "a.json"
    link.symlink_to(target)
    storage.write_atomic(link, "new", WHAT)
    assert link.is_symlink() and target.read_text() == "new"
    assert names(tmp_path / "real") == ["a.json"]


def test_a_link_to_nothing_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    """A baseline file that is a dangling link: the lock library would create the target's
    directories and the save would write there, outside the project (issue 19)."""
    link = tmp_path / "a.json"
    link.symlink_to(tmp_path / "outside" / "deep" / "target.json")
    message = "it is a link to .*target.json, which does not exist; remove the link"
    with pytest.raises(StorageError, match=message):
        with storage.lock(link, WHAT, 1.0):
            pass
    with pytest.raises(StorageError, match=message):
        storage.write_atomic(link, "new", WHAT)
    assert not (tmp_path / "outside").exists() and names(tmp_path) == ["a.json"]


def test_write_atomic_creates_no_directory(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "a.json"
    with pytest.raises(StorageError) as info:
        storage.write_atomic(path, "x", WHAT)
    assert str(info.value) == (
        f"cannot write {WHAT} {path}: directory {path.parent} does not exist; create it or "
        "choose another path"
    )
    assert not path.parent.exists()


def test_write_atomic_refuses_a_directory_and_a_fifo(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match=r": it is a directory; name a file in it$"):
        storage.write_atomic(tmp_path, "x", WHAT)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(StorageError, match=r"is a named pipe \(FIFO\), not a regular file"):
        storage.write_atomic(tmp_path / "fifo", "x", WHAT)


def test_write_atomic_interrupted_keeps_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.json"
    path.write_text("old")

    def interrupted(src: object, dst: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        storage.write_atomic(path, "new", WHAT)
    assert path.read_text() == "old"
    assert names(tmp_path) == ["a.json"]


def test_temporary_files_match_the_documented_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.json"
    seen: list[str] = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: seen.append(src) or real(src, dst))
    storage.write_atomic(path, "x", WHAT)
    [temporary] = seen
    assert Path(temporary).match("a.json.*.tmp")


def test_remove_stale_temporaries_removes_only_ours(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    ours = ["a.json.x1.tmp", ".a.json.x2.tmp"]
    theirs = ["b.json.x3.tmp", "a.json", "notes.tmp", "a.jsonx.tmp"]
    for name in ours + theirs:
        (tmp_path / name).write_text("")
    storage.remove_stale_temporaries(path)
    assert names(tmp_path) == sorted(theirs)


# --- the lock -------------------------------------------------------------------------------


def test_lock_times_out_with_one_line_naming_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    held, release = threading.Event(), threading.Event()

    def holder() -> None:  # another holder of the lock file (flock: another descriptor)
        with storage.lock(path, WHAT, timeout_s=5):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(StorageError) as info, storage.lock(path, WHAT, timeout_s=0.1):
            pass
    finally:
        release.set()
        thread.join()
    assert str(info.value) == (
        f"cannot lock {WHAT} {path}: another process has held {path}.lock for over 0.1 s; "
        "let the other run finish, then re-run"
    )
    with storage.lock(path, WHAT, timeout_s=0.1):  # free again
        pass


def test_lock_in_a_directory_that_cannot_hold_it_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("")
    path = tmp_path / "plain" / "a.json"
    with pytest.raises(GpubenchError, match=r"^cannot write test file .*: cannot create its lock"):
        with storage.lock(path, WHAT, timeout_s=0.1):
            pass


def test_nesting_is_counted_in_every_branch() -> None:
    data = {"x": [[{"a": 1}, {"b": 2}], [[1]]], "y": "z"}
    assert storage._depth(data) == 4
    deep: list[object] = []
    data["x"].append(deep)
    for _ in range(70):
        deep.append([])
        deep = deep[0]  # type: ignore[assignment]
    with pytest.raises(StorageError, match="is nested deeper than 64 levels"):
        storage.parse_json(json.dumps(data), "the file")


def test_a_baseline_file_nested_too_deep_beside_usual_records_is_refused(tmp_path: Path) -> None:
    """A value nested too deep beside the usual records is refused; one level less is read."""
    from pytest_gpubench.core.baseline import BaselineEntry
    from pytest_gpubench.core.errors import BaselineError
    from pytest_gpubench.core.records import SessionInfo, SessionRecord
    from pytest_gpubench.store import baseline

    record = SessionRecord("s", 1.0, 20, 0.001)
    entry = BaselineEntry("wall", "s", (record,), (record,), (1.0, 1.0))
    info = SessionInfo("2026-01-01T00:00:00+00:00", None, None, {})
    doc = baseline.document({}, {"s": info}, {"t.py::test_a": entry})
    doc["benchmarks"]["t.py::test_a"]["future"] = json.loads("[" * 62 + "]" * 62)
    path = tmp_path / "a.json"
    path.write_text(baseline.dumps(doc), encoding="utf-8")
    with pytest.raises(BaselineError, match="is nested deeper than 64 levels"):
        baseline.load(path)
    doc["benchmarks"]["t.py::test_a"]["future"] = json.loads("[" * 61 + "]" * 61)
    path.write_text(baseline.dumps(doc), encoding="utf-8")
    assert baseline.load(path).entries["t.py::test_a"].history == (record,)


def test_a_file_nested_too_deep_anywhere_is_refused(tmp_path: Path) -> None:
    """In the device or in an entry: refused in one line; a shallow value is read."""
    from pytest_gpubench.core.baseline import BaselineEntry
    from pytest_gpubench.core.errors import BaselineError
    from pytest_gpubench.core.records import SessionInfo, SessionRecord
    from pytest_gpubench.store import baseline

    record = SessionRecord("s", 1.0, 20, 0.001)
    entry = BaselineEntry("wall", "s", (record,), (record,), (1.0, 1.0))
    info = SessionInfo("2026-01-01T00:00:00+00:00", None, None, {})
    path = tmp_path / "a.json"
    for where in ("device", "note"):
        doc = baseline.document({}, {"s": info}, {"t.py::test_a": entry, "t.py::test_b": entry})
        doc["benchmarks"]["t.py::test_b"].pop("note", None)
        deep = json.loads("[" * 70 + "]" * 70)
        if where == "device":
            doc["device"]["x"] = deep
        else:
            doc["benchmarks"]["t.py::test_b"]["note"] = deep
        path.write_text(baseline.dumps(doc), encoding="utf-8")
        with pytest.raises(BaselineError, match="is nested deeper than 64 levels"):
            baseline.load(path)
    doc["benchmarks"]["t.py::test_b"]["note"] = "shallow"
    path.write_text(baseline.dumps(doc), encoding="utf-8")
    assert baseline.load(path).entries["t.py::test_b"].note == "shallow"
