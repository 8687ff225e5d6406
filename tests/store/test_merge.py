"""Merging two saves of one baseline file (store/merge.py, ``gpubench merge-baselines``): the
result is what the two saves one after the other would have written, and anything a save
does not do is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_gpubench import cli
from pytest_gpubench.core.baseline import BaselineEntry, Update
from pytest_gpubench.core.errors import BaselineError
from pytest_gpubench.core.kernels import Launch
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.store.baseline import load, save
from pytest_gpubench.store.merge import merge, merge_files, updates_between

KEY = "t.py::test_a"


def update(session: str, key: str = KEY, *, new_epoch: bool = False, kernel: str = "k") -> Update:
    latest = BaselineEntry(
        timer="cuda-graph",
        epoch="",
        anchor=(),
        history=(),
        samples_ms=(1.0, 1.0),
        kernels=(Launch(kernel),),
    )
    return Update(key, (SessionRecord(session, 1.0, 20, 0.001, 1),), new_epoch, latest)


def saving(path: Path, *updates: Update, device: str = "Fake") -> Path:
    """``path`` after a save of ``updates`` (each its own session)."""
    infos = {u.records[0].session: SessionInfo("2026-11-27T00:00:00+00:00") for u in updates}
    assert save(load(path), {"name": device}, infos, list(updates))
    return path


def copy(path: Path, name: str) -> Path:
    target = path.parent / name
    shutil.copyfile(path, target)
    return target


@pytest.fixture
def ancestor(tmp_path: Path) -> Path:
    path = tmp_path / "ancestor" / "cpu-fake.json"
    return saving(path, update("s00"), update("s00", "t.py::test_b"))


def sides(ancestor: Path) -> tuple[Path, Path]:
    return copy(ancestor, "current.json"), copy(ancestor, "other.json")


def history(path: Path, key: str = KEY) -> list[str]:
    return [r.session for r in load(path).entries[key].history]


def test_a_merge_is_the_two_saves_one_after_the_other(ancestor: Path) -> None:
    current, other = sides(ancestor)
    saving(current, update("s01"))
    saving(other, update("s02"), update("s02", "t.py::test_new"), device="Other")
    sequential = saving(
        copy(current, "sequential.json"),
        update("s02"),
        update("s02", "t.py::test_new"),
        device="Other",
    )
    text = merge(load(ancestor), load(current), load(other))
    assert text == sequential.read_text(encoding="utf-8")
    merge_files(ancestor, current, other)
    assert history(current) == ["s00", "s01", "s02"]
    assert history(current, "t.py::test_b") == ["s00"]
    assert history(current, "t.py::test_new") == ["s02"]
    assert load(current).device == {"name": "Other"}  # the latest save's


def test_an_accepted_change_on_the_other_side_starts_its_epoch_over(ancestor: Path) -> None:
    current, other = sides(ancestor)
    saving(current, update("s01"))
    saving(other, update("s02", new_epoch=True))
    updates, new = updates_between(load(ancestor), load(other))
    assert [(u.key, u.new_epoch) for u in updates] == [(KEY, True)] and list(new) == ["s02"]
    merge_files(ancestor, current, other)
    assert history(current) == ["s02"]
    assert load(current).entries[KEY].epoch == "s02"


def test_another_binary_saved_on_the_other_side_is_added_beside(ancestor: Path) -> None:
    current, other = sides(ancestor)
    saving(current, update("s01"))
    saving(other, update("s02", kernel="k2"))
    merge_files(ancestor, current, other)
    entry = load(current).entries[KEY]
    assert [b.kernels[0].name for b in entry.binaries] == ["k2", "k"]
    assert [r.session for r in entry.others[0].history] == ["s00", "s01"]


def test_an_empty_ancestor_is_a_file_of_no_entries(tmp_path: Path) -> None:
    """Both sides added the file (two first saves): git gives the merge an empty ancestor."""
    empty = tmp_path / "ancestor.json"
    empty.write_text("", encoding="utf-8")
    current = saving(tmp_path / "current.json", update("s01"))
    other = saving(tmp_path / "other.json", update("s02", "t.py::test_b"))
    merge_files(empty, current, other)
    assert history(current) == ["s01"] and history(current, "t.py::test_b") == ["s02"]


def hand_edited(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.mark.parametrize(
    "edit",
    [
        ('"median_ms": 1.0', '"median_ms": 2.0'),  # a record changed, no new session
        ('"t.py::test_b"', '"t.py::test_c"'),  # an entry renamed: one removed, one without
    ],
    ids=["a record changed", "an entry renamed"],
)
def test_what_a_save_does_not_do_is_refused_and_nothing_written(
    ancestor: Path, edit: tuple[str, str]
) -> None:
    current, other = sides(ancestor)
    saving(current, update("s01"))
    saving(other, update("s02"))
    hand_edited(other, *edit)
    before = current.read_bytes()
    with pytest.raises(BaselineError, match="merge it by hand"):
        merge_files(ancestor, current, other)
    assert current.read_bytes() == before


def test_the_command_merges_or_refuses_in_one_line(
    ancestor: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    current, other = sides(ancestor)
    saving(current, update("s01"))
    saving(other, update("s02"))
    assert cli.main(["merge-baselines", str(ancestor), str(current), str(other)]) == 0
    assert history(current) == ["s00", "s01", "s02"]
    hand_edited(other, '"median_ms": 1.0', '"median_ms": 2.0')
    assert cli.main(["merge-baselines", str(ancestor), str(current), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpubench: error: baseline file ") and err.count("\n") == 1
    assert "merge it by hand" in err
