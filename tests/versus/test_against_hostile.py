"""``--gpubench-against REF`` as users really run it: selections, layouts, options, signals and
what a run leaves behind, on generated git repositories with the fake timer.

A test that shows a bug is written as the run should behave and marked
``xfail(strict=True)`` with the bug in one line: the suite stays green, the bug recorded."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support import (
    IGNORED,
    KERNELS,
    TESTS,
    USAGE_ERROR,
    commit,
    failing_on,
    git,
    output,
    running,
    slower,
)

from pytest_gpubench import cli
from pytest_gpubench.versus import revision

if shutil.which("git") is None:
    pytest.skip("git is not on PATH", allow_module_level=True)

pytest_plugins = ["pytester"]

# The structure these tests were written for (lockstep has its own: test_lockstep.py).
pytestmark = pytest.mark.usefixtures("processes_pairing")

# One pair where only the plumbing matters (a single pair judges nothing: unsure), two
# where a verdict does (a +50% slowdown over 2 pairs is "regressed").
ONE = ("--gpubench-pairs=1", "--gpubench-confirm=0")
TWO = ("--gpubench-pairs=2", "--gpubench-confirm=0")
LOCKSTEP_ONE = ("--gpubench-pairing=lockstep", "--gpubench-confirm=0")


def worktrees(repo: Path) -> list[str]:
    listed = git(repo, "worktree", "list", "--porcelain")
    return [line for line in listed.splitlines() if line.startswith("worktree ")]


def table_rows(text: str, name: str) -> list[str]:
    """The rows of the gpubench table for the test ``name`` (its first column)."""
    return [line for line in text.splitlines() if line.split()[:2] == [name, "cuda-graph"]]


@pytest.fixture
def temp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary directory of this test's own, outside the repository: what a run leaves
    there is this run's."""
    folder = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(folder))  # a run in a process of its own
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # one in this process
    return folder


def run_until(
    repo: pytest.Pytester, args: list[str], ready: Path, sig: int
) -> tuple[subprocess.Popen[str], str]:
    """Start pytest in ``repo`` as a user would (a process of its own), send it ``sig`` once
    the file ``ready`` has content (what the run is to be cut in has begun) and return it
    with its output."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args],
        cwd=repo.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (ready.exists() and ready.read_text().strip()):
            assert time.monotonic() < deadline and proc.poll() is None, "never got there"
            time.sleep(0.2)
        time.sleep(1.0)
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, out


def gone(pids: Path, out: str) -> list[int]:
    """The processes whose ids the file ``pids`` lists, once none of them runs (within 15 s
    of asking: a child notices its parent gone within a second)."""
    children = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 15
    while any(running(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(running(pid) for pid in children), out
    return children


def left_in(temp: Path) -> list[Path]:
    """What a run left in the temporary directory ``temp``, but the device locks (shared by
    every run on the machine, kept on purpose)."""
    return [p for p in temp.iterdir() if p.name != "pytest-gpubench-locks"]


def remove_checkouts(repo: Path, temp: Path) -> None:
    """The checkouts a killed run left in ``temp``, and their records in ``repo``."""
    for left in temp.glob("gpubench-ref-*"):
        tree = str(left / "tree")
        subprocess.run(
            ["git", "-C", str(repo), "worktree", "remove", "--force", "--force", tree],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(left, ignore_errors=True)
    git(repo, "worktree", "prune")


# --- what behaves as it should -----------------------------------------------------------


@pytest.mark.slow
def test_a_node_id_selects_the_same_test_on_both_sides(repo: pytest.Pytester) -> None:
    slower(repo)
    result = repo.runpytest("test_bench.py::test_sum", "--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1)
    text = output(result)
    assert "slower by 50.0% than HEAD" in text
    assert not table_rows(text, "test_join")  # the revision's side ran the selection only


@pytest.mark.slow
def test_minus_k_selects_the_same_tests_on_both_sides(repo: pytest.Pytester) -> None:
    slower(repo)
    result = repo.runpytest("-k", "sum", "--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, deselected=1)
    text = output(result)
    assert "slower by 50.0% than HEAD" in text and not table_rows(text, "test_join")


@pytest.mark.slow
def test_an_absolute_path_argument_is_moved_into_the_checkout(repo: pytest.Pytester) -> None:
    slower(repo)
    path = str(repo.path / "test_bench.py")
    result = repo.runpytest(path, "--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, passed=1)
    assert "slower by 50.0% than HEAD" in output(result)


@pytest.mark.slow
def test_run_from_a_subdirectory_of_the_repository(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.makeini("[pytest]\n")  # the rootdir (and the fake timer's conftest) at the top
    sub = repo.path / "sub"
    sub.mkdir()
    (repo.path / "test_bench.py").rename(sub / "test_bench.py")
    (sub / "__init__.py").write_text("")
    commit(repo.path, "tests in a subdirectory")
    slower(repo)
    monkeypatch.chdir(sub)
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, passed=1)
    text = output(result)
    assert "slower by 50.0% than HEAD" in text
    assert table_rows(text, "test_join")[0].split()[-3] == "same"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["pytest.ini", "pyproject.toml"])
def test_an_ini_revision_does_not_recurse_in_the_children(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    if where == "pytest.ini":
        repo.path.joinpath(where).write_text("[pytest]\ngpubench_against = HEAD\n")
    else:
        repo.makepyprojecttoml('[tool.pytest.ini_options]\ngpubench_against = "HEAD"\n')
    commit(repo.path, "the revision to compare with, in the ini file")
    slower(repo)
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    result = repo.runpytest(*TWO)
    result.assert_outcomes(failed=1, passed=1)
    assert "slower by 50.0% than HEAD" in output(result)
    # 2 pairs: 4 fresh processes, and one more of each side for the failing test's evidence,
    # none of which started a comparison of its own
    assert len(pids.read_text().split()) == 6


@pytest.mark.slow
def test_a_src_layout_installed_nowhere_times_each_sides_code(repo: pytest.Pytester) -> None:
    package = repo.path / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (repo.path / "kernels.py").rename(package / "kernels.py")
    repo.makepyfile(test_bench=TESTS.replace("from kernels", "from pkg.kernels"))
    repo.makeini("[pytest]\npythonpath = src\n")
    commit(repo.path, "a src layout")
    slower(repo, where="src/pkg/kernels")
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, passed=1)
    assert "slower by 50.0% than HEAD" in output(result)


@pytest.mark.slow
def test_an_untracked_test_file_is_new_without_the_cache_plugin(repo: pytest.Pytester) -> None:
    repo.makepyfile(test_extra="def test_extra(gpubench):\n    assert gpubench(abs, -2) == 2\n")
    result = repo.runpytest("-p", "no:cacheprovider", "--gpubench-against=HEAD", *ONE)
    result.assert_outcomes(passed=3)
    text = output(result)
    assert table_rows(text, "test_extra")[0].split()[-3] == "new"
    assert not (repo.path / ".pytest_cache").exists()


@pytest.mark.slow
def test_named_and_parametrized_measurements_are_judged_each(repo: pytest.Pytester) -> None:
    repo.makepyfile(
        test_named="""
import pytest
from kernels import work


def fast(n):
    return n


def test_two(gpubench):
    assert gpubench(work, 100, name="a") == 4950
    assert gpubench(fast, 3, name="b") == 3


@pytest.mark.parametrize("tag", ["x", "C#"])
def test_param(gpubench, tag):
    assert gpubench(work, 10) == 45
"""
    )
    commit(repo.path, "named and parametrized")
    slower(repo)
    result = repo.runpytest("test_named.py", "--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=3)
    text = output(result)
    for name in ("test_two#a", "test_param[x]", "test_param[C#]"):
        assert table_rows(text, name)[0].split()[-3] == "regressed", name
    assert table_rows(text, "test_two#b")[0].split()[-3] == "same"


@pytest.mark.slow
def test_the_reports_carry_both_medians_and_the_pairs(repo: pytest.Pytester) -> None:
    slower(repo)
    result = repo.runpytest(
        "--gpubench-against=HEAD", *TWO, "--gpubench-json=r.json", "--gpubench-markdown=r.md"
    )
    result.assert_outcomes(failed=1, passed=1)
    document = json.loads((repo.path / "r.json").read_text())
    assert document["settings"]["against"] == "HEAD"
    by_key = {r["key"]: r for r in document["results"]}
    summed = by_key["test_bench.py::test_sum"]
    assert summed["status"] == "regressed" and summed["judgement"]["against"] == "revision"
    assert summed["reference_ms"] == pytest.approx(1.0, rel=1e-3)  # the revision's median
    assert summed["median_ms"] == pytest.approx(1.5, rel=1e-3)  # the working tree's
    assert summed["history_sessions"] == 2  # the pairs
    assert summed["judgement"]["ratio_low"] < 1.5 < summed["judgement"]["ratio_high"]
    # every session of both sides says where and when it ran (one GPU per test's pairs)
    against = summed["against"]
    sessions = [r["session"] for r in against["base_sessions"] + against["head_sessions"]]
    assert len(set(sessions)) == 4 and set(sessions) <= set(summed["session_infos"])
    markdown = (repo.path / "r.md").read_text()
    assert "| test_sum | cuda-graph | 1.00 ms | 1.50 ms |" in markdown  # base, then head


@pytest.mark.slow
def test_one_pair_of_processes_shows_no_interval_and_says_why(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One pair of fresh processes has half a degree of freedom: its interval at the run's
    level ran from -100.0% to +1.8e7%, which says nothing. It is absent, in the table, the
    JSON report and ``gpubench compare``, and the reason says why."""
    slower(repo, 1.01)
    result = repo.runpytest("--gpubench-against=HEAD", *ONE, "--gpubench-json=ab.json")
    result.assert_outcomes(passed=2)
    text = output(result)
    why = "1 pair cannot bound the change at alpha 0.01 over 2 tests"
    assert "[-100.0%" not in text and "test_sum: unsure: slower by 1.0%" in text, text
    assert why in text, text
    [summed] = [
        r
        for r in json.loads((repo.path / "ab.json").read_text())["results"]
        if r["test"] == "test_sum"
    ]
    assert summed["judgement"]["ratio_low"] is None is summed["judgement"]["ratio_high"]
    assert summed["against"]["ratio_high"] is None and why in summed["reason"], summed
    monkeypatch.chdir(repo.path)
    capsys.readouterr()
    assert cli.main(["compare", "ab.json"]) == 0
    shown = capsys.readouterr().out
    assert "[-100.0%" not in shown and why in shown, shown


@pytest.mark.slow
def test_minus_x_stops_at_a_regression_and_lf_reruns_it(repo: pytest.Pytester) -> None:
    slower(repo)
    first = repo.runpytest("-x", "--gpubench-against=HEAD", *TWO)
    first.assert_outcomes(failed=1)
    assert "stopping after 1 failures" in output(first)
    again = repo.runpytest("--lf", "--gpubench-against=HEAD", *TWO)
    again.assert_outcomes(failed=1)
    assert "rerun previous 1 failure" in output(again)
    assert "test_sum regressed" in output(again)


@pytest.mark.slow
def test_collect_only_makes_no_checkout(repo: pytest.Pytester, temp: Path) -> None:
    result = repo.runpytest("--collect-only", "-q", "--gpubench-against=HEAD", *ONE)
    assert result.ret == pytest.ExitCode.OK
    text = output(result)
    assert "2 tests collected" in text and "pair 1/" not in text
    assert left_in(temp) == [] and len(worktrees(repo.path)) == 1


@pytest.mark.slow
def test_no_gpubench_test_makes_no_checkout(repo: pytest.Pytester, temp: Path) -> None:
    repo.makepyfile(test_bench="def test_plain():\n    assert True\n")
    result = repo.runpytest("--gpubench-against=HEAD", *ONE)
    result.assert_outcomes(passed=1)
    assert "pair 1/" not in output(result)
    assert left_in(temp) == []


@pytest.mark.slow
def test_outside_a_git_repository_is_one_line(fake: pytest.Pytester) -> None:
    fake.makepyfile(kernels=KERNELS.format(factor=1.0), test_bench=TESTS)
    result = fake.runpytest("--gpubench-against=HEAD", *ONE)
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert "is not in a git repository" in text
    assert "Traceback" not in text and "INTERNALERROR" not in text


@pytest.mark.slow
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_a_run_leaves_nothing_behind(
    repo: pytest.Pytester, temp: Path, xdist: tuple[str, ...]
) -> None:
    args = [*xdist, "--gpubench-against=HEAD", "--gpubench-build=true", *ONE]
    result = repo.runpytest_subprocess(*args) if xdist else repo.runpytest(*args)
    result.assert_outcomes(passed=2)
    assert left_in(temp) == []  # no checkout, no caches, no build log, no children
    assert len(worktrees(repo.path)) == 1


@pytest.mark.slow
def test_a_failed_build_leaves_its_log_only(repo: pytest.Pytester, temp: Path) -> None:
    result = repo.runpytest("--gpubench-against=HEAD", "--gpubench-build=echo no; exit 3", *ONE)
    assert result.ret == USAGE_ERROR
    text = output(result)
    assert "failed in HEAD" in text and ": exit code 3: no; its output: " in text
    [log] = left_in(temp)
    assert log.name.startswith("gpubench-build-") and log.read_text() == "no\n"
    assert len(worktrees(repo.path)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_ctrl_c_during_the_pairs_stops_and_cleans_up(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, xdist: tuple[str, ...]
) -> None:
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")  # a child that takes its time
    args = [*xdist, "--gpubench-against=HEAD", *TWO]
    proc, out = run_until(repo, args, pids, signal.SIGINT)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out and "passed" not in out
    assert left_in(temp) == []
    assert len(worktrees(repo.path)) == 1
    started = [int(p) for p in pids.read_text().split()]
    assert started and not any(running(p) for p in started)


@pytest.mark.slow
def test_under_xdist_a_killed_controllers_folder_is_removed_by_the_next_run(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL leaves the controller's folder for its workers (nothing of ours runs then):
    the next controller removes it; a live controller's stays."""
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")
    args = ["-n", "2", "--gpubench-against=HEAD", *ONE]
    run_until(repo, args, pids, signal.SIGKILL)
    [killed] = temp.glob("gpubench-xdist-*")
    live = temp / "gpubench-xdist-live"
    live.mkdir()
    revision.own(live)  # this process's: alive
    monkeypatch.delenv("FAKE_CHILD_START_S")
    result = repo.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
    assert not killed.exists()
    assert left_in(temp) == [live]  # and the killed run's checkout is gone too
    assert len(worktrees(repo.path)) == 1


@pytest.mark.slow
def test_a_run_killed_in_its_build_leaves_a_log_the_next_run_removes(
    repo: pytest.Pytester, temp: Path
) -> None:
    """kill -9 while the revision builds: nothing of ours runs then, and the build's output
    is in the run's folder, which the next run removes with the checkout (a log left in the
    temporary directory stayed there for good)."""
    pid_file = temp.parent / f"{temp.name}-build.pid"
    build = f"--gpubench-build=echo $$ > {pid_file}; echo building; sleep 60"
    run_until(repo, ["--gpubench-against=HEAD", build, *ONE], pid_file, signal.SIGKILL)
    build_pid = int(pid_file.read_text())
    try:
        # Its lifeline ends the build (run.processes); the killed run's folders stay.
        deadline = time.monotonic() + 15
        while running(build_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(build_pid)
        assert sorted(p.name[:12] for p in left_in(temp)) == ["gpubench-ab-", "gpubench-ref"]
        result = repo.runpytest_subprocess("--gpubench-against=HEAD", *ONE)
        result.assert_outcomes(passed=2)
        assert left_in(temp) == []
        assert len(worktrees(repo.path)) == 1
    finally:
        if running(build_pid):
            os.kill(build_pid, signal.SIGKILL)
        remove_checkouts(repo.path, temp)


# --- bugs ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_absolute_pythonpath_into_the_tree_still_times_the_revision(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A common layout: the package in python/ or lib/, found by PYTHONPATH=$PWD/lib.
    lib = repo.path / "lib"
    lib.mkdir()
    (repo.path / "kernels.py").rename(lib / "kernels.py")
    commit(repo.path, "the kernels in lib/")
    slower(repo, where="lib/kernels")
    inherited = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(lib), *filter(None, [inherited])]))
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, passed=1)
    assert "slower by 50.0% than HEAD" in output(result)


@pytest.mark.slow
def test_a_revision_before_the_tests_reports_them_new(repo: pytest.Pytester) -> None:
    tests = repo.path / "test_bench.py"
    kept = tests.read_text()
    tests.unlink()
    commit(repo.path, "the tests not yet written")
    tests.write_text(kept)
    commit(repo.path, "the tests")
    result = repo.runpytest("--gpubench-against=HEAD~1", *ONE)
    result.assert_outcomes(passed=2)
    text = output(result)
    assert table_rows(text, "test_sum")[0].split()[-3] == "new"


@pytest.mark.slow
def test_a_new_test_file_named_on_the_command_line_is_new(repo: pytest.Pytester) -> None:
    repo.makepyfile(test_new="def test_fresh(gpubench):\n    assert gpubench(abs, -1) == 1\n")
    result = repo.runpytest("test_new.py", "--gpubench-against=HEAD", *ONE)
    result.assert_outcomes(passed=1)
    assert table_rows(output(result), "test_fresh")[0].split()[-3] == "new"


@pytest.mark.slow
def test_a_collection_error_on_the_revision_side_judges_the_others(
    repo: pytest.Pytester,
) -> None:
    # A module the build makes (ignored by git): in the working tree, not in the checkout.
    repo.path.joinpath(".gitignore").write_text(IGNORED + "built.py\n")
    repo.makepyfile(
        test_ext="from built import ext\n\n\ndef test_ext(gpubench):\n    gpubench(ext, 1)\n"
    )
    commit(repo.path, "a test of a built module")
    repo.makepyfile(built="def ext(n):\n    return n\n")
    slower(repo)
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    result.assert_outcomes(failed=1, passed=2)
    text = output(result)
    assert "slower by 50.0% than HEAD" in text
    assert table_rows(text, "test_join")[0].split()[-3] == "same"


@pytest.mark.slow
def test_a_collection_error_on_the_revision_side_is_not_new(repo: pytest.Pytester) -> None:
    # The revision's tests import what only its build makes (--gpubench-build forgotten):
    # "new" would let any slowdown of these tests pass unseen.
    repo.makepyfile(test_bench=TESTS.replace("from kernels import work", "from gone import work"))
    commit(repo.path, "a revision whose tests cannot be imported without its build")
    repo.makepyfile(test_bench=TESTS)
    slower(repo)
    result = repo.runpytest("--gpubench-against=HEAD", *ONE)
    text = output(result)
    assert table_rows(text, "test_sum")[0].split()[-3] != "new"
    assert "No module named 'gone'" in text  # the line says only "ERROR test_bench.py"


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["test_bench", "kernels"])
def test_a_revision_that_cannot_be_collected_judges_nothing_and_says_so(
    repo: pytest.Pytester, broken: str
) -> None:
    # A SyntaxError in the revision's test file, or in a module it imports: no test can be
    # measured there; "unsure" and a passing run would read as a gate that held.
    kept = (repo.path / f"{broken}.py").read_text()
    (repo.path / f"{broken}.py").write_text(kept + "\ndef broken(:\n")
    commit(repo.path, "a revision that does not parse")
    (repo.path / f"{broken}.py").write_text(kept)
    slower(repo)
    result = repo.runpytest("--gpubench-against=HEAD", *ONE)
    text = output(result)
    assert result.ret == USAGE_ERROR, text
    for name in ("test_sum", "test_join"):
        assert table_rows(text, name)[0].split()[-3] == "unmeasurable", text
    assert "could not be collected on HEAD (" in text and "SyntaxError" in text
    assert "name a revision whose tests can be collected" in text
    assert "ERROR: --gpubench-against HEAD: nothing is judged, 2 tests unmeasurable" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    ("crash", "said"),
    [
        # pytest's capture keeps what the test wrote: where it died is what is left
        ("os.abort()", "killed by SIGABRT: at kernels.py, line 5, in work"),
        ("os.kill(os.getpid(), 9)", "killed by SIGKILL"),  # no words, no stacks
    ],
    ids=["abort", "SIGKILL"],
)
def test_a_process_dying_in_one_test_leaves_the_others_judged(
    repo: pytest.Pytester, crash: str, said: str
) -> None:
    repo.makepyfile(kernels=f"import os\n\n\ndef work(n):\n    {crash}\n")
    commit(repo.path, "a kernel that ends its process")
    repo.makepyfile(kernels=KERNELS.format(factor=1.0))
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    text = output(result)
    assert result.ret == pytest.ExitCode.OK, text
    assert "INTERNALERROR" not in text
    assert table_rows(text, "test_join")[0].split()[-3] == "same", text
    assert table_rows(text, "test_sum")[0].split()[-3] == "unmeasurable", text
    [line] = [line for line in text.splitlines() if line.startswith("test_sum: unmeasurable: ")]
    assert line.startswith("test_sum: unmeasurable: HEAD (") and line.endswith(
        f"'s process died in test_sum, {said}"
    ), line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("crash", "said"),
    [
        ("import os; os.abort()", "killed by SIGABRT: at kernels.py, line 15, in work"),
        ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV: at "),
        ("import os; os._exit(3)", "exit code 3"),
    ],
    ids=["abort", "segfault", "exit"],
)
def test_a_working_tree_process_dying_in_a_test_fails_it_as_crashed(
    repo: pytest.Pytester, crash: str, said: str
) -> None:
    """The working tree's process dies in test_sum (on its second call: the run's own
    untimed call is its first): its code's fault, not the revision's, so the test fails,
    in one line saying so, how and the child's last words; the other is judged."""
    repo.makepyfile(kernels=failing_on(2, crash))
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    text = output(result)
    result.assert_outcomes(passed=1, errors=1)
    assert "INTERNALERROR" not in text
    assert table_rows(text, "test_join")[0].split()[-3] == "same", text
    assert table_rows(text, "test_sum")[0].split()[-3] == "crashed", text
    [line] = [line for line in text.splitlines() if line.startswith("test_sum crashed: ")]
    assert line.startswith(f"test_sum crashed: the working tree's process died in test_sum, {said}")
    assert "1 crashed, 1 same" in text
    assert "evidence" not in text  # a call that ends its process leaves no trace


@pytest.mark.slow
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_a_test_no_side_measured_fails_with_a_line_saying_why(
    repo: pytest.Pytester, xdist: tuple[str, ...]
) -> None:
    """test_sum's process dies on both sides (on its second call: the run's own untimed
    call is its first): nothing of it is judged, so it fails, with a line under the table
    saying so and why; it passed in silence."""
    repo.makepyfile(kernels=failing_on(2, "import os; os.abort()"))
    commit(repo.path, "a kernel that ends its process")
    repo.makepyfile(kernels=failing_on(2, "import os; os._exit(3)"))
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *xdist, *TWO)
    text = output(result)
    result.assert_outcomes(passed=1, errors=1)
    assert "ERROR test_bench.py::test_sum" in text
    assert not table_rows(text, "test_sum") and table_rows(text, "test_join")
    [line] = [line for line in text.splitlines() if line.startswith("gpubench: test_sum: ")]
    assert line.startswith(
        "gpubench: test_sum: not judged, measured on neither side: the working tree's process "
        "died in test_sum, exit code 3; the revision HEAD ("
    ), line
    assert "'s process died in test_sum, killed by SIGABRT: at kernels.py, line 15, in work" in line


@pytest.mark.slow
@pytest.mark.parametrize(
    ("revision_dies", "xdist"),
    [(False, ()), (True, ()), (False, ("-n", "2"))],
    ids=["revision-fine", "both-die", "xdist"],
)
def test_a_working_tree_crashing_on_every_call_never_runs_in_the_run_itself(
    repo: pytest.Pytester, revision_dies: bool, xdist: tuple[str, ...]
) -> None:
    """The working tree's kernel aborts on every call, its run's own untimed call too:
    test_sum fails as crashed (or not judged, where the revision's process dies in it too)
    before its body runs in the run's process, which would abort with it (no summary)."""
    aborts = "import os\n\n\ndef work(n):\n    os.abort()\n"
    if revision_dies:
        repo.makepyfile(kernels=aborts)
        commit(repo.path, "a kernel that ends its process")
    repo.makepyfile(kernels=aborts)
    result = repo.runpytest_subprocess("--gpubench-against=HEAD", *xdist, *ONE)
    text = output(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(passed=1, errors=1)
    said = "the working tree's process died in test_sum, killed by SIGABRT"
    if revision_dies:
        assert f"test_sum: not judged, measured on neither side: {said}" in text
    else:
        assert f"test_sum crashed: {said}" in text
        assert "1 crashed" in text


@pytest.mark.slow
@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_a_crashed_tests_fixtures_are_not_set_up_in_the_run_itself(
    repo: pytest.Pytester, xdist: tuple[str, ...]
) -> None:
    """test_sum's fixture calls the working tree's kernel, which aborts: its process dies
    in test_sum, which errors as crashed at its setup, its fixture never set up in the run's
    own process (which it would abort, with no summary); the other test is judged, -x stops
    at the crashed one and --lf runs it again, and JUnit holds it as an error."""
    repo.makepyfile(
        test_bench=TESTS.replace("def test_sum(gpubench):", "def test_sum(gpubench, data):")
        + "\n\nimport pytest\n\n\n@pytest.fixture\ndef data():\n    return work(3)\n"
    )
    commit(repo.path, "a fixture of the kernel")
    repo.makepyfile(kernels="import os\n\n\ndef work(n):\n    os.abort()\n")
    args = ("--gpubench-against=HEAD", *xdist, *ONE)
    result = repo.runpytest_subprocess(*args, "--junitxml=j.xml")
    text = output(result)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, text
    result.assert_outcomes(passed=1, errors=1)
    assert "test_sum crashed: the working tree's process died in test_sum, killed by" in text
    assert "1 crashed" in text and table_rows(text, "test_sum")[0].split()[-3] == "crashed"
    assert 'errors="1"' in (repo.path / "j.xml").read_text()
    if not xdist:
        stopped = repo.runpytest_subprocess(*args, "-x", "-p", "no:randomly")
        stopped.assert_outcomes(errors=1)
        again = repo.runpytest_subprocess(*args, "--lf")
        again.assert_outcomes(errors=1)
        assert "rerun previous 1 failure" in output(again)


@pytest.mark.slow
@pytest.mark.parametrize(
    "write, options",
    [
        ("os.write(2, b'CUDA error: an illegal memory access was encountered\\n')", ()),
        ("sys.stderr.write('CUDA error: an illegal memory access was encountered\\n')", ("-s",)),
    ],
    ids=["native", "python-under-s"],
)
def test_a_dead_processs_reason_is_what_it_wrote_before_it_died(
    repo: pytest.Pytester, write: str, options: tuple[str, ...]
) -> None:
    """What native code writes to file descriptor 2 before it aborts (CUDA's error, a
    failed assert in C) is the reason under pytest's default capture too: the processes of
    a side capture what Python writes only; under -s what Python wrote too. Not pytest's
    session header nor the stacks faulthandler dumps."""
    repo.makepyfile(kernels=f"import os, sys\n\n\ndef work(n):\n    {write}\n    os.abort()\n")
    commit(repo.path, "a kernel that says why it aborts")
    repo.makepyfile(kernels=KERNELS.format(factor=1.0))
    result = repo.runpytest("--gpubench-against=HEAD", *options, *ONE)
    text = output(result)
    [line] = [line for line in text.splitlines() if line.startswith("test_sum: unmeasurable: ")]
    assert line.endswith(
        "'s process died in test_sum, killed by SIGABRT: "
        "CUDA error: an illegal memory access was encountered"
    ), line
    # Said where the process's death is, nowhere else (no child's output leaks through).
    assert all("process died in" in t for t in text.splitlines() if "CUDA error" in t), text


# Tests of the working tree that take SLOW_S each in a fresh process (not in the run's own):
# a process of its side that times them makes progress between them, slowly.
SLOW_TESTS = """
import sys, time

import pytest


@pytest.mark.parametrize("k", range(4))
def test_slow(gpubench, k):
    if "gpubench-child-" in " ".join(sys.argv):  # its --basetemp is in the child's folder
        time.sleep({slow_s})
    assert gpubench(abs, -1) == 1
"""


@pytest.mark.slow
def test_a_rest_timed_again_waits_for_a_slow_next_leg_without_being_stopped(
    repo: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The revision's process dies in test_sum while the working tree's next process waits
    for the device behind it; the fresh process that times the revision's rest then waits
    behind that one, whose tests take 4 x 3 s, longer than the limit on a quiet process (8
    s here): the next leg's progress is its wait's, so it is not stopped as stuck."""
    from pytest_gpubench.run import children

    repo.makepyfile(kernels=failing_on(2, "import os, time; time.sleep(2); os.abort()"))
    commit(repo.path, "a kernel that ends its process")
    repo.makepyfile(kernels=KERNELS.format(factor=1.0), test_slow=SLOW_TESTS.format(slow_s=3))
    monkeypatch.setattr(children, "CHILD_TIMEOUT_S", 8.0)
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    text = output(result)
    assert "showed no progress" not in text, text
    assert "pair 1/2: the revision HEAD (" in text and "died in test_bench.py::test_sum" in text
    assert table_rows(text, "test_join")[0].split()[-4] == "2", text  # both pairs judged it
    assert table_rows(text, "test_sum")[0].split()[-3] == "unmeasurable", text


# Five tests whose function, where it {dies}, ends its process on its second call there: the
# run's own untimed call is its first, a fresh process's first timed call its second.
DYING = """
import os
from collections import Counter

import pytest

calls = Counter()


def dies_on_its_second_call(k):
    calls[k] += 1
    if calls[k] == 2 and {dies}:
        os.abort()
    return k


@pytest.mark.parametrize("k", range(5))
def test_dies(gpubench, k):
    assert gpubench(dies_on_its_second_call, k) == k
"""


@pytest.mark.slow
def test_a_side_whose_process_dies_in_every_test_is_given_up_after_three_deaths(
    repo: pytest.Pytester,
) -> None:
    """The working tree's process dies in each of five tests: a fresh one times the rest
    after the first and the second death, none after the third; the tests it died in and
    those it never timed are crashed, each saying which, with a line under the table."""
    repo.makepyfile(test_dies=DYING.format(dies=False))
    commit(repo.path, "five tests")
    repo.makepyfile(test_dies=DYING.format(dies=True))
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_dies", *ONE)
    text = output(result)
    result.assert_outcomes(errors=5, deselected=2)
    assert text.count("the rest again") == 2 and text.count("the rest given up") == 1, text
    for k in range(3):
        assert (
            f"test_dies[{k}] crashed: the working tree's process died in test_dies[{k}], "
            "killed by SIGABRT"
        ) in text
    died = "died 3 times (in test_dies[0], test_dies[1], test_dies[2]) and was not started again"
    for k in (3, 4):
        assert f"test_dies[{k}] crashed: the working tree's process {died}" in text
    assert (
        "gpubench: the working tree, pair 1: its process died 3 times (in "
        "test_dies.py::test_dies[0], test_dies.py::test_dies[1], test_dies.py::test_dies[2]): "
        "the rest of its tests were not timed"
    ) in text


@pytest.mark.slow
def test_a_revision_whose_process_dies_in_every_test_is_given_up_after_three_deaths(
    repo: pytest.Pytester,
) -> None:
    """The revision's process dies in each of five tests: after its third death none of
    the rest is timed, and a run whose revision measured nothing judges nothing, saying
    why in one line."""
    repo.makepyfile(test_dies=DYING.format(dies=True))
    commit(repo.path, "five tests that end their process")
    repo.makepyfile(test_dies=DYING.format(dies=False))
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_dies", *ONE)
    text = output(result)
    assert result.ret == USAGE_ERROR, text
    assert text.count("the rest again") == 2 and text.count("the rest given up") == 1, text
    assert "the revision's side measured nothing (the revision HEAD (" in text
    assert "pair 1: its process died 3 times (in test_dies.py::test_dies[0], " in text


@pytest.mark.slow
def test_a_test_the_revision_lacks_is_new_after_the_revision_was_given_up(
    repo: pytest.Pytester,
) -> None:
    """The revision's process dies in three tests of five, so its first pair's rest is
    given up; a test the working tree added is new there whatever the revision's processes
    did, not unmeasurable: the revision never had it."""
    repo.makepyfile(test_dies=DYING.format(dies="k < 3"))
    commit(repo.path, "five tests, three of which end their process")
    added = "\n\ndef test_dies_added(gpubench):\n    assert gpubench(abs, -1) == 1\n"
    repo.makepyfile(test_dies=DYING.format(dies=False) + added)
    result = repo.runpytest("--gpubench-against=HEAD", "-k", "test_dies", *TWO)
    text = output(result)
    assert text.count("the rest given up") == 1, text
    assert table_rows(text, "test_dies_added")[0].split()[-3] == "new", text
    assert "unsure" in table_rows(text, "test_dies[3]")[0].split(), text  # one pair
    assert table_rows(text, "test_dies[0]")[0].split()[-3] == "unmeasurable", text


@pytest.mark.slow
def test_a_test_failing_on_the_revision_side_only_says_so(repo: pytest.Pytester) -> None:
    repo.makepyfile(kernels=KERNELS.format(factor=1.0).replace("range(n))", "range(n)) + 1"))
    commit(repo.path, "a wrong sum")
    slower(repo)  # the fix, slower
    result = repo.runpytest("--gpubench-against=HEAD", *TWO)
    text = output(result)
    assert table_rows(text, "test_sum")[0].split()[-3] != "new"
    assert any("test_sum" in line and "fail" in line for line in text.splitlines())


@pytest.mark.slow
def test_lf_times_and_reports_only_the_tests_it_reruns(repo: pytest.Pytester) -> None:
    cache = repo.path / ".pytest_cache" / "v" / "cache"
    cache.mkdir(parents=True)
    (cache / "lastfailed").write_text(json.dumps({"test_bench.py::test_sum": True}))
    result = repo.runpytest("--lf", "--gpubench-against=HEAD", *ONE)
    result.assert_outcomes(passed=1)
    assert not table_rows(output(result), "test_join")


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig",
    [
        signal.SIGTERM,  # a CI job cancelled
        signal.SIGHUP,  # the terminal closed, the ssh connection dropped
    ],
    ids=["SIGTERM", "SIGHUP"],
)
def test_a_signal_during_the_build_ends_the_build(
    repo: pytest.Pytester, temp: Path, sig: signal.Signals
) -> None:
    pid_file = temp.parent / f"{temp.name}-build.pid"
    build = f"--gpubench-build=echo $$ > {pid_file}; sleep 60"
    args = ["--gpubench-against=HEAD", build, *ONE]
    proc, out = run_until(repo, args, pid_file, sig)
    build_pid = int(pid_file.read_text())
    try:
        time.sleep(1.0)
        assert not running(build_pid), out
        assert list(temp.glob("gpubench-ref-*")) == []
    finally:
        if running(build_pid):
            os.kill(build_pid, signal.SIGKILL)
        remove_checkouts(repo.path, temp)


@pytest.mark.slow
def test_sigterm_during_the_pairs_leaves_no_checkout(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")
    proc, out = run_until(repo, ["--gpubench-against=HEAD", *TWO], pids, signal.SIGTERM)
    try:
        assert list(temp.glob("gpubench-ref-*")) == [], out
        assert len(worktrees(repo.path)) == 1
    finally:
        remove_checkouts(repo.path, temp)


@pytest.mark.slow
def test_a_built_revision_that_measures_nothing_leaves_no_log(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CHILD_CRASH", "1")  # every fresh process fails at start
    result = repo.runpytest("--gpubench-against=HEAD", "--gpubench-build=true", *ONE)
    assert result.ret == USAGE_ERROR
    assert "no process of either side measured anything" in output(result)
    assert left_in(temp) == []


@pytest.mark.slow
def test_one_pair_reads_in_the_singular_with_a_sane_gate(repo: pytest.Pytester) -> None:
    result = repo.runpytest("-k", "sum", "--gpubench-against=HEAD", *ONE)
    text = output(result)
    assert "1 tests" not in text and "1 pairs" not in text
    assert "1 test," in text and "1 pair of fresh processes" in text
    # a gate of thousands of percent is no gate: say "not gated" or what gates, not a number
    gates = re.compile(r"gate \d{3,}")  # "gate 100.0%" or more
    assert not any(line.endswith("00.0%") or gates.search(line) for line in text.splitlines())


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["Ctrl-C", "SIGTERM", "kill -9"]
)
def test_a_signal_while_a_duo_runs_leaves_no_process(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """A test whose fixture yields code is timed in duos (a fresh process per side at once):
    Ctrl-C, SIGTERM or kill -9 of the run while they are starting leaves none behind."""
    repo.makepyfile(
        test_fixture="""
import pytest

import kernels


@pytest.fixture
def module():
    yield kernels


def test_module(gpubench, module):
    assert gpubench(module.work, 10) == 45
"""
    )
    commit(repo.path, "a fixture that yields a module")
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")
    args = ["--gpubench-against=HEAD", "-k", "module", *LOCKSTEP_ONE]
    proc, out = run_until(repo, args, pids, sig)
    try:
        # The first look's duos, all four processes started together: those that had
        # started by the signal (each writes its pid as it imports) are all gone.
        assert len(gone(pids, out)) >= 2, out
        if sig != signal.SIGKILL:  # SIGTERM ends the run as Ctrl-C does
            assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
            assert "Traceback" not in out and "INTERNALERROR" not in out
            assert list(temp.glob("gpubench-ref-*")) == [], out
    finally:
        remove_checkouts(repo.path, temp)


@pytest.mark.slow
def test_ctrl_c_while_more_pairs_are_timed_here(repo: pytest.Pytester, temp: Path) -> None:
    """Ctrl-C while an unsure test's more pairs are timed in its own process (the default):
    the run stops after that test, its verdict unconfirmed (it fails nothing), and the
    checkout is removed."""
    ready = repo.path / "in-more-pairs.txt"
    repo.makepyfile(kernels=failing_on(38, f"open({str(ready)!r}, 'w').write('x'); time.sleep(60)"))
    commit(repo.path, "a kernel 6% slower, slow in its second more pair")
    args = ["--gpubench-against=HEAD~1", "--gpubench-pairing=lockstep", "--gpubench-alpha=0.0001"]
    try:
        proc, out = run_until(repo, args, ready, signal.SIGINT)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        assert "Traceback" not in out and "INTERNALERROR" not in out
        assert "not confirmed: interrupted" in out
        assert list(temp.glob("gpubench-ref-*")) == [], out
        assert len(worktrees(repo.path)) == 1
    finally:
        remove_checkouts(repo.path, temp)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["Ctrl-C", "kill -9"])
def test_a_signal_while_lockstep_pairs_are_added_leaves_no_process(
    repo: pytest.Pytester, temp: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """Against a revision in lockstep, a test unsure on its pair gets more from fresh
    processes (GPUBENCH_LOCKSTEP_MORE=fresh): Ctrl-C ends them and removes the checkout;
    kill -9 of the run leaves them to notice their parent is gone, and the next run sweeps
    the checkout."""
    slower(repo, 1.06)
    commit(repo.path, "a kernel 6% slower")
    monkeypatch.setenv("GPUBENCH_LOCKSTEP_MORE", "fresh")
    pids = repo.path / "child-pids.txt"
    monkeypatch.setenv("FAKE_CHILD_PIDS", str(pids))
    monkeypatch.setenv("FAKE_CHILD_START_S", "30")
    args = ["--gpubench-against=HEAD~1", "--gpubench-pairing=lockstep", "--gpubench-alpha=0.0001"]
    proc, out = run_until(repo, args, pids, sig)
    try:
        gone(pids, out)
        if sig == signal.SIGINT:
            assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
            assert "Traceback" not in out and "INTERNALERROR" not in out
            assert "not confirmed: interrupted" in out
        else:
            # The next run against a revision sweeps what the killed one left.
            swept = subprocess.run(
                [sys.executable, "-m", "pytest", "--gpubench-against=HEAD", *LOCKSTEP_ONE],
                cwd=repo.path,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert swept.returncode == 0, swept.stdout
        assert list(temp.glob("gpubench-ref-*")) == [], out
        assert len(worktrees(repo.path)) == 1
    finally:
        remove_checkouts(repo.path, temp)
