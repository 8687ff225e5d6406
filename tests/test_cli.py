"""The ``gpubench`` command: compare, show and plot, their errors and their entry points."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import itertools
import json
import math
import subprocess
import sys
import types
from fnmatch import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from support import BENCH, NO_CONFIRM

import pytest_gpubench.report
from pytest_gpubench import cli
from pytest_gpubench.core.baseline import BaselineEntry, Update
from pytest_gpubench.core.kernels import Launch, fingerprint, launch_count
from pytest_gpubench.core.records import (
    Context,
    Floors,
    Measurement,
    Result,
    SessionInfo,
    SessionRecord,
    SessionSummary,
    Status,
    Verdict,
)
from pytest_gpubench.core.samples import time_unit
from pytest_gpubench.report import baselines
from pytest_gpubench.report import changes as history_changes
from pytest_gpubench.report import summary as report
from pytest_gpubench.store import baseline as store

DEVICE = {"name": "NVIDIA H100 80GB HBM3", "peak_copy_gbs": 3000.0}
# Deterministic within-session noise of about 0.3% (log scale) around the median.
SPREAD = [(-1) ** i * 0.002 * (i % 5) for i in range(30)]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
COPY = Launch("void copy_kernel<float>(float*, float const*)", share=1.0)
OTHER = Launch("void other_kernel<float>(float*)", share=1.0)


def make_result(
    test: str,
    median_ms: float,
    *,
    timer: str = "cuda-graph",
    samples: int = len(SPREAD),
    kernels: tuple[Launch, ...] = (),
    sessions: int = 1,
) -> Result:
    """A result of ``sessions`` sessions: the first of ``samples`` samples, then confirmations
    0.2% apart (a BASE of three is a history the rule gates; one tells no spread)."""
    confirmations = tuple(
        SessionRecord(f"c{i}", median_ms * (1 + 0.002 * (-1) ** i), samples, 0.001)
        for i in range(1, sessions)
    )
    measurement = Measurement(
        key=f"tests/test_k.py::{test}",
        test=test,
        timer=timer,
        samples_ms=tuple(median_ms * math.exp(s) for s in SPREAD[:samples]),
        warmup=3,
        calls_per_sample=1,
        threshold=0.05,
        session="20260101T000000Z-000001",
        kernels=kernels,
        confirmations=confirmations,
    )
    return Result(measurement, Verdict(Status.NEW))


def write_results(path: Path, *results: Result, device: dict[str, Any] = DEVICE) -> str:
    document = report.json_document(
        list(results), device, {"threshold": 0.05, "alpha": 0.01}, {"id": "s"}
    )
    path.write_text(report.json_text(document), encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def row(out: str, test: str) -> str:
    [line] = [line for line in out.splitlines() if line.startswith(test + " ")]
    return line


# --- compare --------------------------------------------------------------------------------


def test_compare_known_regression_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(
        tmp_path / "base.json", make_result("a", 1.0, sessions=3), make_result("b", 1.0, sessions=3)
    )
    head = write_results(tmp_path / "head.json", make_result("a", 1.2), make_result("b", 1.0))
    code, out, err = run(capsys, "compare", base, head)
    assert code == 1, out + err
    assert "regressed" in row(out, "a") and "+20.0%" in row(out, "a")
    assert "ok" in row(out, "b").split()  # "ok (gate > 5%)": three sessions gate about 17%
    assert out.splitlines()[-1] == (
        "gpubench: 1 regressed, 1 ok (threshold 5%, alpha 0.01 over 2 measurements)"
    )
    assert "a: regressed: slower by 20.0%" in out


def test_compare_judges_nothing_timed_on_a_loaded_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A BASE timed on a loaded host (its process kept waiting for a CPU) holds no time to
    judge HEAD against: HEAD is new and says why; a HEAD timed so is unmeasurable, failing
    nothing, however slow it reads."""

    def loaded(result: Result) -> Result:  # as its run wrote it
        m = dataclasses.replace(result.measurement, context=Context(cpu_wait=0.6))
        return Result(m, Verdict(Status.UNMEASURABLE))

    calm, slow = make_result("a", 1.0, sessions=3), make_result("a", 3.0, sessions=3)
    code, out, err = run(
        capsys,
        "compare",
        write_results(tmp_path / "base.json", loaded(calm)),
        write_results(tmp_path / "head.json", slow),
    )
    assert code == 0, out + err
    assert "new" in row(out, "a") and "a: new: unmeasurable in " in out
    assert "the times of a loaded host, none to compare with" in out
    code, out, err = run(
        capsys,
        "compare",
        write_results(tmp_path / "calm.json", calm),
        write_results(tmp_path / "slow.json", loaded(slow)),
    )
    assert code == 0 and "unmeasurable" in row(out, "a"), out + err


def test_compare_says_why_an_ab_runs_base_was_unmeasurable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In an A/B run's file (pytest --gpubench-against), unmeasurable says that a side
    could not measure the test (the revision's process died in it): compare says what the
    file says, not "a loaded host"."""
    died = "the revision main (0123abcd)'s process died in a, killed by SIGABRT"
    base = make_result("a", 1.0, sessions=3)
    base = Result(base.measurement, Verdict(Status.UNMEASURABLE, reason=died))
    code, out, err = run(
        capsys,
        "compare",
        write_results(tmp_path / "ab.json", base),
        write_results(tmp_path / "head.json", make_result("a", 1.0)),
    )
    assert code == 0, out + err
    assert "new" in row(out, "a")
    assert f"a: new: unmeasurable in {tmp_path / 'ab.json'}: {died}, none to compare with" in out
    assert "loaded host" not in out


def test_compare_judges_the_physical_floor_and_never_against_an_impossible_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18: a BASE measurement that was impossible is no time of its work (a fix of the
    skipped work is not a regression of it); a HEAD measurement that is impossible fails;
    one whose file lacks the cache's copy rate (written before it was measured) is not held
    to the memory's rate alone."""

    def declared(result: Result, bytes: float, cached: float | None = 9000.0) -> Result:
        floors = Floors(bytes, peak_gbs=3000.0, cached_gbs=cached)
        m = dataclasses.replace(result.measurement, floors=floors)
        return dataclasses.replace(result, measurement=m)

    skipped = declared(make_result("a", 0.001, sessions=3), 1e9)  # 1e6 GB/s
    fixed = declared(make_result("a", 1.0), 1e9)
    old = declared(make_result("b", 0.001, sessions=3), 1e7, cached=None)  # 1e4 GB/s: L2
    base = write_results(
        tmp_path / "base.json",
        dataclasses.replace(skipped, verdict=Verdict(Status.IMPOSSIBLE)),
        old,
    )
    head = write_results(tmp_path / "head.json", fixed, old)
    code, out, err = run(capsys, "compare", base, head)
    assert code == 0, out + err
    assert "new" in row(out, "a") and "a: new: impossible in" in out
    assert "impossible" not in row(out, "b")
    code, out, err = run(capsys, "compare", head, write_results(tmp_path / "h2.json", skipped, old))
    assert code == 1 and "impossible" in row(out, "a"), out + err


def test_compare_refuses_a_work_field_that_is_not_a_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_results(tmp_path / "r.json", make_result("a", 1.0))
    text = Path(path).read_text().replace('"cache_bytes": null', '"cache_bytes": "x"')
    Path(path).write_text(text)
    line = one_line_error(capsys, "compare", path, path)
    assert "has a 'cache_bytes' of 'x', not a positive number" in line


def test_compare_unchanged_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(
        tmp_path / "base.json", make_result("a", 1.0, sessions=3), make_result("b", 1.0, sessions=3)
    )
    head = write_results(tmp_path / "head.json", make_result("a", 1.01), make_result("b", 0.99))
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 0
    assert out.splitlines()[-1].startswith("gpubench: 2 ok (threshold 5%")


def test_compare_improvement_fails_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    base = write_results(tmp_path / "base.json", make_result("a", 1.0, sessions=3))
    head = write_results(tmp_path / "head.json", make_result("a", 0.8))
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 0 and "improved" in row(out, "a")
    code, out, _ = run(capsys, "compare", "--fail-on-improvement", base, head)
    assert code == 1 and "improved" in row(out, "a")


def test_compare_threshold_and_alpha_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(tmp_path / "base.json", make_result("a", 1.0))
    head = write_results(tmp_path / "head.json", make_result("a", 1.2))
    code, out, _ = run(capsys, "compare", "--threshold", "50%", "--alpha", "0.001", base, head)
    assert code == 0
    assert "threshold 50%, alpha 0.001 over 1 measurement)" in out


def test_compare_incomparable(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(tmp_path / "base.json", make_result("a", 1.0, kernels=(COPY,)))
    head = write_results(
        tmp_path / "head.json", make_result("a", 1.0, kernels=(COPY,), timer="cuda-event")
    )
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 1
    assert "incomparable" in row(out, "a")
    assert "baseline timed by cuda-graph, now by cuda-event" in out
    code, _, _ = run(capsys, "compare", "--allow-incomparable", base, head)
    assert code == 0


@pytest.mark.parametrize(
    "launches",
    [(OTHER,), (dataclasses.replace(COPY, grid=(64, 1, 1), registers=32),)],
    ids=["kernel", "config"],
)
def test_compare_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], launches: tuple[Launch, ...]
):
    """Another binary in HEAD: other kernels are changed and fail by default, their time for
    information only; another configuration of the same ones (a pick) is judged on time, less
    what a pick alone explains (from one saved session, nothing under 50%: not gated).
    --changed=fail fails both as changed; warn and --allow-incomparable judge both on time."""
    compiled = dataclasses.replace(COPY, grid=(64, 1, 1), registers=16)
    base = write_results(tmp_path / "base.json", make_result("a", 1.0, kernels=(compiled,)))
    head = write_results(tmp_path / "head.json", make_result("a", 1.3, kernels=launches))
    pick = launches[0].name == COPY.name
    code, out, _ = run(capsys, "compare", base, head)
    cells = row(out, "a").split()
    if pick:
        assert code == 0 and "not gated (another pick)" in row(out, "a") and "+30.0%" in cells
        assert "a: not gated: slower by 30.0% vs history of 1 session; another pick" in out
        assert out.splitlines()[-1].startswith("gpubench: 1 not gated (")
    else:
        assert code == 1
        assert "changed" in cells and "(+30.0%)" in cells  # for information, not a verdict
        assert "a: changed: another binary than the baseline's" in out
        assert "+30.0% against that binary's history, for information only" in out
        assert out.splitlines()[-1].startswith("gpubench: 1 changed (")
    for option in ("--changed=warn", "--allow-incomparable"):
        code, out, _ = run(capsys, "compare", option, base, head)
        what = "(another pick)" if pick else "(other kernels)"
        assert code == 0 and what in row(out, "a")
    code, out, _ = run(capsys, "compare", "--changed=fail", base, head)
    assert code == 1 and "changed" in row(out, "a").split()


def test_compare_too_few_samples_is_unstable(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(tmp_path / "base.json", make_result("a", 1.0))
    head = write_results(tmp_path / "head.json", make_result("a", 2.0, samples=2))
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 0 and "unstable" in row(out, "a")


def test_compare_added_and_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(tmp_path / "base.json", make_result("a", 1.0), make_result("gone", 1.0))
    made = make_result("fresh", 1.0)
    # its run's family: not this comparison's
    fresh = dataclasses.replace(made, verdict=dataclasses.replace(made.verdict, family=54))
    head = write_results(tmp_path / "head.json", make_result("a", 1.0), fresh)
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 0
    assert "new" in row(out, "fresh")
    assert "added (in HEAD only): fresh" in out
    assert "removed (in BASE only): gone" in out
    assert out.splitlines()[-1].endswith("over 1 measurement in both files); 1 removed")


def test_compare_markdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = write_results(
        tmp_path / "base.json", make_result("a", 1.0, sessions=3), make_result("gone", 1.0)
    )
    head = write_results(tmp_path / "head.json", make_result("a", 1.3))
    code, out, _ = run(capsys, "compare", "--markdown", base, head)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "### gpubench: NVIDIA H100 80GB HBM3"
    assert any(line.startswith("| a | cuda-graph |") and "regressed" in line for line in lines)
    assert "- removed (in BASE only): gone" in lines
    # one count line, the comparison's (it names the thresholds and what was removed)
    [counts] = [line for line in lines if "1 regressed" in line]
    assert counts.startswith("gpubench: 1 regressed") and counts.endswith("1 removed")


def test_compare_judges_confirmations_as_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    first = make_result("a", 1.0).measurement
    confirmed = dataclasses.replace(
        first,
        confirmations=(
            SessionRecord("c1", 1.002, 30, 0.001),
            SessionRecord("c2", 0.998, 30, 0.001),
        ),
    )
    base_result = Result(confirmed, Verdict(Status.NEW))
    base = write_results(tmp_path / "base.json", base_result)
    head = write_results(tmp_path / "head.json", make_result("a", 1.0))
    code, out, _ = run(capsys, "compare", base, head)
    assert code == 0
    assert row(out, "a").split()[8] == "3"  # sessions: BASE's three (after two "1.00 ms")


def test_compare_of_plugin_result_files(
    fake: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """Result files as the plugin writes them hold one session of each test it did not
    confirm, and one BASE session tells no spread between sessions: it gates only a change
    of 50% or more, on the timer's prior. A true A/A and a 30% slowdown pass, saying how many
    BASE sessions would gate the threshold; a 60% slowdown fails (issue 45: it passed)."""
    fake.makepyfile(test_bench=BENCH)
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=base.json").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SEED", "2")
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=same.json").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SCALE", "1.3")
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=slow.json").assert_outcomes(passed=2)
    monkeypatch.setenv("FAKE_SCALE", "1.6")
    fake.runpytest("--gpubench", NO_CONFIRM, "--gpubench-json=slower.json")
    assert cli.main(["compare", "base.json", "same.json"]) == 0
    capsys.readouterr()
    assert cli.main(["compare", "base.json", "slow.json"]) == 0
    out = capsys.readouterr().out
    assert "+30.0%" in row(out, "test_sum") and "ok (gate > 5%)" in row(out, "test_sum")
    [why] = [line for line in out.splitlines() if line.startswith("test_sum: ")]
    assert fnmatch(
        why,
        "test_sum: ok: slower by 30.0% vs history of 1 session; gate 50.0% (over the 5% "
        "threshold): 1 session tells no spread between sessions; 3 sessions like these would "
        "gate 5%",
    )
    assert cli.main(["compare", "base.json", "slower.json"]) == 1
    assert "regressed" in row(capsys.readouterr().out, "test_sum")


# --- show -----------------------------------------------------------------------------------


def make_baseline(directory: Path, device: dict[str, Any] = DEVICE, tests: int = 0) -> Path:
    """A baseline of 8 sessions: a quiet copy kernel with its bytes (history 8, anchor 5),
    a noisy wall-clock test of three sessions (one would tell no spread: not gated), and
    ``tests`` more quiet ones."""
    path = directory / "sm90-nvidia-h100-80gb-hbm3.json"
    sessions = {
        f"2026010{i}T000000Z-00000{i}": SessionInfo(f"2026-01-0{i}T00:00:00+00:00", "abc", "GPU-1")
        for i in range(1, 9)
    }
    ids = sorted(sessions)
    quiet = tuple(
        SessionRecord(s, 1.0 * (1 + 0.002 * (-1) ** i), 30, 0.001) for i, s in enumerate(ids)
    )

    def update(key: str, records: tuple[SessionRecord, ...], **fields: Any) -> Update:
        latest = BaselineEntry(**{"timer": "cuda-graph", **fields}, epoch="", anchor=(), history=())
        return Update(key, records, True, latest)

    updates = [
        update("tests/test_k.py::test_copy", quiet, kernels=(COPY,), group="copy", bytes=2.4e9),
        update(
            "tests/test_k.py::test_host",
            tuple(SessionRecord(s, 0.05, 30, 0.01) for s in ids[-3:]),
            timer="wall",
        ),
    ]
    updates += [update(f"tests/test_k.py::test_more_{i:02}", quiet) for i in range(tests)]
    assert store.save(store.Baseline(path), device, sessions, updates)
    return path


def test_show_lists_history_spread_and_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    make_baseline(tmp_path / ".gpubench")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "show")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "== .gpubench/sm90-nvidia-h100-80gb-hbm3.json: NVIDIA H100 80GB HBM3: 8 sessions on "
        "GPU-1, 2026-01-01 to 2026-01-08, 2 tests"
    )
    # The GPUs its sessions name: the gate holds on them (the note says what elsewhere).
    infos = {"a": SessionInfo("2026-01-01", "", "GPU-1"), "b": SessionInfo("2026-01-02", "", "")}
    two = types.SimpleNamespace(device={}, entries={}, sessions=infos)
    assert (
        baselines.file_header(two)
        == "unknown device: 2 sessions on GPU-1, 2026-01-01 to 2026-01-02, 0 tests"
    )
    infos["b"] = SessionInfo("2026-01-02", "", "GPU-2")
    assert " 2 sessions on 2 GPUs, " in baselines.file_header(two)
    assert "another GPU of the model" in out
    assert lines[1].split() == list(baselines.SHOW_COLUMNS)
    copy = row(out, "tests/test_k.py::test_copy").split()
    assert copy[1:5] == ["cuda-graph", "8", "5", "1.00"]
    assert copy[7] == "5.0%"  # a quiet 1 ms kernel gates the threshold
    host = row(out, "tests/test_k.py::test_host").split()
    assert host[1:4] == ["wall", "3", "3"] and host[-3:] == ["gate", ">", "5%"]
    assert float(host[-4].rstrip("%")) > 5
    assert "binaries (what one call launches), the latest saved first:" in lines
    assert (
        f"  tests/test_k.py::test_copy  {fingerprint((COPY,))}, 8 sessions, 1.00 ms: "
        "1 launch (copy_kernel 100%)"
    ) in lines


def test_show_lists_the_binaries_of_a_test_the_latest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """Two machines of one model that compile differently: one history each, both listed
    with what they launch."""
    path = make_baseline(tmp_path)
    wide = Launch("k", grid=(32768, 1, 1), block=(256, 1, 1), registers=16, share=1.0)
    narrow = Launch("k", grid=(16384, 1, 1), block=(128, 1, 1), registers=26, share=1.0)
    sessions = {s: SessionInfo(f"2026-02-0{i}T00:00:00+00:00") for i, s in enumerate("ab", 1)}
    updates = [
        Update(
            "tests/test_k.py::test_gelu",
            (SessionRecord(session, median, 30, 0.001),),
            False,
            BaselineEntry("cuda-graph", "", (), (), kernels=(launch,)),
        )
        for session, median, launch in (("a", 1.0, wide), ("b", 1.12, narrow))
    ]
    for update in updates:  # one save each, as two machines would
        assert store.save(store.load(path), DEVICE, sessions, [update])
    code, out, _ = run(capsys, "show", str(path))
    assert code == 0
    gelu = out.splitlines().index(
        f"  tests/test_k.py::test_gelu  {fingerprint((narrow,))}, 1 session, 1.12 ms: "
        "k grid (16384,1,1) block (128,1,1) 26 registers"
    )
    assert out.splitlines()[gelu + 1] == (
        f"  {' ' * len('tests/test_k.py::test_gelu')}  {fingerprint((wide,))}, 1 session, "
        "1.00 ms: k grid (32768,1,1) block (256,1,1) 16 registers"
    )
    assert row(out, "tests/test_k.py::test_gelu").split()[1:5] == [
        "cuda-graph",
        "1",
        "1",
        "1.12",
    ]  # the table is of the latest binary


def test_show_threshold_changes_the_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = make_baseline(tmp_path)
    code, out, _ = run(capsys, "show", "--threshold", "20%", str(path))
    assert code == 0
    assert row(out, "tests/test_k.py::test_copy").split()[7] == "20.0%"


# --- show: creeps, binaries and damage ------------------------------------------------------


def creeping_baseline(directory: Path) -> Path:
    """make_baseline's file with 30 more tests, a creep and a test whose launches are
    recorded."""
    path = make_baseline(directory, tests=30)
    base = store.load(path)
    ids = sorted(base.sessions)
    creep = tuple(SessionRecord(s, 1.01**i, 30, 0.001) for i, s in enumerate(ids))
    latest = BaselineEntry(timer="cuda-graph", epoch="", anchor=(), history=())
    updates = [
        Update("tests/test_k.py::test_zz_creep", creep, True, latest),
        Update(
            "tests/test_k.py::test_zz_other",
            creep[:4],
            True,
            dataclasses.replace(latest, kernels=(OTHER,)),
        ),
    ]
    assert store.save(base, DEVICE, base.sessions, updates)
    return path


def test_show_names_a_creep_and_a_binary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(creeping_baseline(tmp_path))
    code, out, err = run(capsys, "show", "--threshold", "4%", path, path)
    assert code == 0 and err == ""
    assert "  tests/test_k.py::test_zz_creep: creep: +1.0%/session" in out
    assert "  tests/test_k.py::test_zz_other  " in out
    assert out.count("== ") == 2


@pytest.mark.parametrize("damage", ["median", "key twice", "test twice"])
def test_show_of_a_damaged_file_says_what_is_wrong_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    """A median that is no time, a key twice in one object, a test twice in the file: one
    line naming it, exit 2."""
    path = creeping_baseline(tmp_path)
    document = json.loads(path.read_text(encoding="utf-8"))
    entries = document["benchmarks"]
    if damage == "median":
        entries["tests/test_k.py::test_zz_creep"]["history"][2]["median_ms"] = -1.0
    text = json.dumps(document, indent=1)
    creep = text.index('"tests/test_k.py::test_zz_creep"')
    if damage == "key twice":
        at = text.index('"epoch"', creep)
        text = text[:at] + '"epoch": "x", ' + text[at:]
    elif damage == "test twice":
        first = json.dumps(entries["tests/test_k.py::test_copy"])
        text = text[:creep] + f'"tests/test_k.py::test_copy": {first}, ' + text[creep:]
    path.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "show", str(path))
    assert code == 2 and err.count("\n") == 1, (out, err)
    assert {"median": "median of -1.0", "key twice": "'epoch'", "test twice": "test_copy"}[
        damage
    ] in err


# --- plot -----------------------------------------------------------------------------------


class Page(HTMLParser):
    """Counts the elements of a page, and what it would load from elsewhere; its ids and the
    links within it."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: dict[str, int] = {}
        self.cells: list[str] = []
        self.external: list[str] = []
        self.ids: list[str] = []
        self.links: list[str] = []
        self.meta: list[dict[str, str | None]] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self._in_cell = self._in_cell if tag == "a" else tag in ("td", "th")
        if tag == "meta":
            self.meta.append(dict(attrs))
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)
            elif name == "href" and value:
                self.links.append(value[1:])
            elif name == "id" and value:
                self.ids.append(value)

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self.cells.append(data)
            self._in_cell = False


def test_plot_writes_png_images_and_a_self_contained_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    make_baseline(tmp_path / "baselines")
    out, page = tmp_path / "plots", tmp_path / "page.html"
    code, stdout, err = run(
        capsys, "plot", str(tmp_path / "baselines"), "--out", str(out), "--html", str(page)
    )
    assert code == 0, err
    images = sorted(p.name for p in out.iterdir())
    assert images == [
        "sm90-nvidia-h100-80gb-hbm3-history.png",
        "sm90-nvidia-h100-80gb-hbm3-peak.png",
    ]
    for name in images:
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE
        assert f"wrote {out / name}" in stdout
    assert f"wrote {page}" in stdout
    parser = Page()
    parser.feed(page.read_text(encoding="utf-8"))
    assert parser.tags["table"] == 1 and parser.tags["tr"] == 3
    assert parser.tags["svg"] == 2  # the history and the % of peak
    assert "tests/test_k.py::test_copy" in parser.cells
    assert parser.external == [] and "img" not in parser.tags and "script" not in parser.tags
    # A phone lays it out at its own width (without this, at 980 pixels, shrunk to a third).
    assert {"name": "viewport", "content": "width=device-width, initial-scale=1"} in parser.meta
    # Each test links to the figure that draws it; the file's line links to every figure.
    assert parser.links == [
        "file-1-figure-1",  # Figures: history,
        "file-1-figure-2",  # % of peak
        "file-1-figure-1",  # test_copy
        "file-1-figure-1",  # test_host
    ]
    assert set(parser.links) <= set(parser.ids)


def test_plot_page_of_two_files_links_each_and_each_test_to_its_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    """On a browser, the page of a 96-test file was a table of 96 rows, then 9 figures,
    with no way from a row to its panel but scrolling."""
    pytest.importorskip("matplotlib")
    from pytest_gpubench.report import plots

    make_baseline(tmp_path / "a", tests=12)  # 14 tests: history 1 and 2, % of peak
    make_baseline(tmp_path / "b", device={"name": "NVIDIA H100 80GB HBM3"})  # history only
    page = tmp_path / "page.html"
    code, _, err = run(
        capsys, "plot", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(page)
    )
    assert code == 0, err
    parser = Page()
    parser.feed(page.read_text(encoding="utf-8"))
    assert parser.links[:2] == ["file-1", "file-2"]
    links = parser.links[2:]
    assert links[:3] == ["file-1-figure-1", "file-1-figure-2", "file-1-figure-3"]
    rows = links[3:17]
    assert rows == ["file-1-figure-1"] * plots.PANELS + ["file-1-figure-2"] * 2
    assert links[17:] == ["file-2-figure-1"] * 3  # its figure, then its 2 tests
    assert set(parser.links) <= set(parser.ids)


def test_plot_svg_many_tests_and_no_peak(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = make_baseline(tmp_path, device={"name": "NVIDIA H100 80GB HBM3"}, tests=12)
    code, stdout, _ = run(
        capsys, "plot", str(path), "--out", str(tmp_path / "out"), "--format", "svg"
    )
    assert code == 0
    images = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in images] == [
        "sm90-nvidia-h100-80gb-hbm3-history-1.svg",  # 12 panels
        "sm90-nvidia-h100-80gb-hbm3-history-2.svg",  # the other 2
    ]
    assert all("<svg" in p.read_text(encoding="utf-8") for p in images)
    assert f"no % of peak chart for {path}: its device's peak copy bandwidth" in stdout


def test_plot_without_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    path = make_baseline(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises
    monkeypatch.delitem(sys.modules, "pytest_gpubench.report.plots", raising=False)
    monkeypatch.delattr(pytest_gpubench.report, "plots", raising=False)
    code, _, err = run(capsys, "plot", str(path), "--out", str(tmp_path / "out"))
    assert code == 2
    assert err == (
        "gpubench: error: gpubench plot needs matplotlib: pip install 'pytest-gpubench[plot]'\n"
    )


# --- errors ---------------------------------------------------------------------------------


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = run(capsys, *args)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("gpubench: error: "), err
    return err


def test_errors_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    monkeypatch.chdir(tmp_path)
    good = write_results(tmp_path / "good.json", make_result("a", 1.0))
    baseline = str(make_baseline(tmp_path / "b"))
    (tmp_path / "damaged.json").write_text("{", encoding="utf-8")
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    document = json.loads((tmp_path / "good.json").read_text(encoding="utf-8"))
    document["results"][0]["samples_ms"] = "fast"
    (tmp_path / "bad-entry.json").write_text(json.dumps(document), encoding="utf-8")

    assert "no result file missing.json" in one_line_error(capsys, "compare", "missing.json", good)
    assert "is not valid JSON" in one_line_error(capsys, "compare", good, "damaged.json")
    assert "list.json is not a result file" in one_line_error(capsys, "compare", good, "list.json")
    assert "has a results[0] that has no 'samples_ms'" in one_line_error(
        capsys, "compare", good, "bad-entry.json"
    )
    assert "is a baseline file, not a result file" in one_line_error(
        capsys, "compare", baseline, good
    )
    assert "no baseline directory .gpubench here" in one_line_error(capsys, "show")
    assert "no such baseline file or directory: nowhere" in one_line_error(
        capsys, "show", "nowhere"
    )
    assert "baseline file damaged.json is not valid JSON" in one_line_error(
        capsys, "show", "damaged.json"
    )
    assert "good.json is a result file" in one_line_error(capsys, "show", "good.json")
    assert "give --out DIR, --html PAGE.html or both" in one_line_error(capsys, "plot", baseline)


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compare", "--threshold", "abc", "a.json", "b.json"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        "gpubench compare: error: argument --threshold: expected a percentage such as 5%, "
        "got 'abc' (see gpubench compare --help)\n"
    )


# --- entry points ---------------------------------------------------------------------------


@pytest.mark.slow
def test_python_dash_m_runs_the_command(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpubench", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: gpubench ")
    assert all(command in done.stdout for command in ("compare", "show", "plot"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest_gpubench", "compare", "a.json", "b.json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("gpubench: error: no result file a.json")
    assert done.stderr.count("\n") == 1


def test_console_script_is_installed():
    [script] = importlib.metadata.entry_points(group="console_scripts", name="gpubench")
    assert script.value == "pytest_gpubench.cli:main"
    assert script.load() is cli.main


@pytest.mark.slow
def test_plugin_imports_neither_the_command_nor_matplotlib():
    code = (
        "import sys, pytest_gpubench.plugin; "
        "print(sorted(m for m in ('pytest_gpubench.cli', 'matplotlib') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_plot_draws_a_ratio_to_its_reference_without_a_unit_of_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = tmp_path / "sm90-nvidia-h100-80gb-hbm3.json"
    sessions = {
        f"2026010{i}T000000Z-00000{i}": SessionInfo(f"2026-01-0{i}T00:00:00+00:00", "abc", "GPU-1")
        for i in range(1, 6)
    }
    ratios = tuple(SessionRecord(s, 0.83 + 0.001 * i, 30, 0.001) for i, s in enumerate(sessions))
    latest = BaselineEntry(timer="cuda-graph:ratio", epoch="", anchor=(), history=())
    key = "tests/test_k.py::test_gelu#vs-reference"
    assert store.save(store.Baseline(path), DEVICE, sessions, [Update(key, ratios, True, latest)])
    code, _, err = run(capsys, "plot", str(path), "--out", str(tmp_path / "out"), "--format", "svg")
    assert code == 0, err
    [image] = (tmp_path / "out").iterdir()
    svg = image.read_text(encoding="utf-8")
    assert "to the reference" in svg and "(ms)" not in svg and "µs)" not in svg


def test_plot_panels_show_the_band_edges_dates_and_commits_and_count_what_they_draw(
    tmp_path: Path,
):
    """Release 0.2 cut the y axis at the data (the band's edges never showed), labelled the
    x axis with a bare session index, and counted sessions of the file the panels did not
    draw in the title."""
    matplotlib = pytest.importorskip("matplotlib")
    from pytest_gpubench.report import plots

    base = store.load(make_baseline(tmp_path))
    base.sessions["20251231T000000Z-000000"] = SessionInfo("2025-12-31T00:00:00+00:00", "old")
    views = baselines.survey(base, 0.05, 0.01)
    with matplotlib.rc_context(plots.STYLE):
        [figure] = plots.history_figures(plots.Section(base, views, baselines.file_header(base)))
    # Fixed margins: a layout engine measured every label again per image format (slow).
    assert figure.get_layout_engine() is None
    title = figure.get_suptitle()
    assert "HBM3: 8 sessions drawn on GPU-1, 2026-01-01 to 2026-01-08, 2 tests" in title
    copy, host = figure.axes[:2]
    for ax, view in ((copy, views[0]), (host, views[1])):
        _, size = time_unit(view.entry.median_ms)
        low, high = (edge / size for edge in view.band)
        bottom, top = ax.get_ylim()
        margin = 0.05 * (high - low)
        assert bottom < low - margin and top > high + margin, (view.key, ax.get_ylim())
    labels = [t.get_text() for t in copy.get_xticklabels()]
    assert labels == [
        "01-01 00:00\nabc",
        "01-03 00:00\nabc",
        "01-06 00:00\nabc",
        "01-08 00:00\nabc",
    ]
    assert [t.get_text() for t in host.get_xticklabels()][0] == "01-06 00:00\nabc"
    # Each band edge says how far it is from the reference (rarely the table's gate).
    bar = views[0].judgement.bar
    assert bar is not None
    edges = {t.get_text() for t in copy.texts}
    assert edges == {f"+{bar:.1%}", f"\N{MINUS SIGN}{1 - 1 / (1 + bar):.1%}"}


def test_plot_history_figures_keep_their_title_and_legend_clear_of_the_panels(
    tmp_path: Path,
):
    """Seen in a browser: a last figure of one panel was one panel wide and cut its title
    ("0 sessions drawn, ..., 13 tests: session"); the legend, 6 points inside the first
    panel, hid its upper left; 6 sessions labelled their 3rd and 4th, which ran together."""
    matplotlib = pytest.importorskip("matplotlib")
    from pytest_gpubench.report import plots

    base = store.load(make_baseline(tmp_path, tests=11))  # 13 tests: 12 panels, then 1
    views = baselines.survey(base, 0.05, 0.01)
    with matplotlib.rc_context(plots.STYLE):
        figures = plots.history_figures(plots.Section(base, views, baselines.file_header(base)))
        for figure, panels in zip(figures, (12, 1), strict=True):
            assert len(figure.axes) == panels
            assert figure.get_figwidth() == plots.PANEL_WIDTH * plots.COLUMNS
            [title] = (t for t in figure.texts if t.get_text() == figure.get_suptitle())
            box = title.get_window_extent()
            assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1, title.get_text()
            [legend] = figure.legends
            assert [t.get_text() for t in legend.get_texts()] == [
                "first look's band",
                "reference",
                "session median",
                "anchor",
            ]
            assert all(ax.get_legend() is None for ax in figure.axes)
            panel_titles = [ax.title.get_window_extent() for ax in figure.axes]
            under = legend.get_window_extent().y0
            assert all(b.y1 < under for b in panel_titles)
    for count in range(1, 41):
        labelled = plots._labelled(count)
        assert labelled[0] == 0 and labelled[-1] == count - 1
        assert len(labelled) <= plots.X_LABELS
        if count > plots.X_LABELS:
            assert min(b - a for a, b in itertools.pairwise(labelled)) >= 2, count


def test_show_judges_every_test_of_a_file_in_one_pass_per_history_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Release 0.2 ran the rule once per test: `gpubench show` of 10^5 tests took hours on a
    CPU. The rule's arrays are row-wise: one pass per shape gives each test the verdict it
    gets alone."""
    from pytest_gpubench.judge import rule

    base = store.load(make_baseline(tmp_path, tests=30))
    calls = []
    decide = rule.decide
    monkeypatch.setattr(rule, "decide", lambda *a, **k: calls.append(len(a[0])) or decide(*a, **k))
    views = baselines.survey(base, 0.05, 0.01)
    assert calls == [31, 1]  # 31 tests of 8 sessions, the wall test of 3
    for view in views:
        entry = view.entry
        latest = entry.history[-1]
        alone = rule.judge(
            [r.summary for r in entry.history],
            [SessionSummary(entry.median_ms, latest.n, latest.summary.se_log)],
            threshold=0.05,
            alpha=0.01,
            family=len(views),
            timer=entry.timer,
            launches=launch_count(entry.kernels),
        )
        assert view.judgement == alone, view.key


def test_show_looks_for_creep_only_in_histories_whose_p_values_could_flag_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The permutation p-values of every history of one length come in one pass; only a
    history under the level goes on to the full search (one search per test had taken
    minutes for 10^5 tests)."""
    base = store.load(make_baseline(tmp_path, tests=30))
    searched = []
    detect = history_changes.detect
    monkeypatch.setattr(
        history_changes, "detect", lambda x, **k: searched.append(len(x)) or detect(x, **k)
    )
    assert history_changes.flagged_of(base, 0.05) == []
    assert searched == []  # 31 steady histories, and one too short to tell a change


def test_show_flags_creep(tmp_path: Path) -> None:
    """``gpubench show`` flags a creep in a saved history, under its heading."""
    path = make_baseline(tmp_path, tests=3)
    ids = sorted(store.load(path).sessions)
    creep = tuple(SessionRecord(s, 1.01**i, 30, 0.001) for i, s in enumerate(ids))
    latest = BaselineEntry(timer="cuda-graph", epoch="", anchor=(), history=())
    update = Update("tests/test_k.py::test_creep", creep, True, latest)
    base = store.load(path)
    assert store.save(base, DEVICE, base.sessions, [update])
    base = store.load(path)
    lines = history_changes.flagged_of(base, 0.05)
    assert lines[0].startswith("tests/test_k.py::test_creep: creep: +1.0%/session")
    assert history_changes.headed(lines) == [history_changes.SHOW_HEADING, f"  {lines[0]}"]


# --- issue 46: long histories, and what no terminal writes ----------------------------------


def test_show_of_a_history_longer_than_a_save_keeps_says_so_once_and_shows_the_latest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_baseline(tmp_path)
    data = json.loads(path.read_text())
    entry = data["benchmarks"]["tests/test_k.py::test_copy"]
    entry["history"] *= 30  # 240 records, as a merge or a hand edit can leave
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "show", str(path))
    assert code == 0, err
    assert row(out, "tests/test_k.py::test_copy").split()[2:4] == ["20", "5"]
    [line] = err.splitlines()
    assert line.startswith(f"gpubench: baseline file {path}: 'tests/test_k.py::test_copy' kept")
    assert "(240 in its history): read as the latest 20" in line


def test_show_plot_and_compare_escape_a_lone_surrogate_in_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_baseline(tmp_path)
    text = path.read_text().replace("test_copy", "test_\\ud800")
    path.write_text(text.replace(DEVICE["name"], "GPU \\udcff"))
    code, out, err = run(capsys, "show", str(path))
    assert code == 0, err
    assert row(out, "tests/test_k.py::test_\\ud800").split()[1:3] == ["cuda-graph", "8"]
    assert "GPU \\udcff: 8 sessions" in out.splitlines()[0]
    page = tmp_path / "page.html"
    code, out, err = run(
        capsys, "plot", str(path), "--out", str(tmp_path / "o"), "--html", str(page)
    )
    assert code == 0, err
    assert "test_\\ud800" in page.read_text(encoding="utf-8")
    base = write_results(tmp_path / "base.json", make_result("test_\ud800", 1.0))
    head = write_results(tmp_path / "head.json", make_result("test_\ud800", 1.0))
    code, out, err = run(capsys, "compare", base, head)
    assert code == 0, err
    assert "test_\\ud800" in out
