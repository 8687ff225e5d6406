"""Unit tests of the fresh processes (run/children.py): their command line and environment,
what they hand back, and the folder they share with their parent. How they behave under
signals and pytest's options, end to end: tests/plugin/test_lifecycle.py."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from support import TESTS_DIR, running

from pytest_gpubench.core.records import Measurement, Result, SessionInfo, Status, Verdict
from pytest_gpubench.plugin.child import Child
from pytest_gpubench.plugin.collect import Collected
from pytest_gpubench.run import children, owner, processes
from pytest_gpubench.run.children import (
    EVERY_BENCHMARK,
    STALE_AFTER_S,
    Launcher,
    Request,
    child_args,
    child_document,
    collection_errors,
    folder_prefix,
    read_request,
    sweep_folders,
    write_request,
)
from pytest_gpubench.run.processes import FOLDER_PREFIX

PLUGINS = frozenset({"cacheprovider", "junitxml", "rerunfailures"})


def launcher(tmp_path: Path, **kw: Any) -> Launcher:
    values: dict[str, Any] = dict(
        invocation=("t.py::test_a",), cwd=tmp_path, confirm=2, writes=PLUGINS
    )
    return Launcher(**(values | kw))


def test_a_confirmation_runs_the_users_selection_without_what_would_skip_tests() -> None:
    invocation = [
        "--gpubench",
        "-k",
        "sum",
        "tests/test_a.py",
        "--gpubench-threshold=3%",
        "--gpubench-confirm",
        "3",
        "--gpubench-json=out.json",
        "--lf",
        "-x",
        "--maxfail",
        "2",
        "--junitxml=report.xml",
        "--basetemp",
        "/tmp/mine",
        "--reruns=2",
        "--pdb",
    ]
    args = child_args(invocation, save=False, confirm=0, single=True)
    assert args == [
        "-o",
        "addopts=",  # the ini file's addopts, filtered the same way (here: none)
        "--gpubench",
        "-k",
        "sum",
        "tests/test_a.py",  # the selection stays: the request file names the tests to run
        "--gpubench-threshold=3%",
        "--gpubench-json=out.json",  # kept: a child writes no report of the user's
        "-n",
        "0",  # a few tests, no workers
        "--gpubench-confirm",
        "0",
        "--gpubench-sessions",
        "1",
    ]


def test_a_recorded_session_runs_the_users_selection_and_saves() -> None:
    invocation = ["--gpubench-save", "--gpubench-sessions=5", "-n", "4", "tests", "--gpubench"]
    args = child_args(invocation, save=True, confirm=2, single=False)
    assert args == [
        "-o",
        "addopts=",
        "-n",
        "4",
        "tests",
        "--gpubench",
        "--gpubench-confirm",
        "2",
        "--gpubench-sessions",
        "1",
        "--gpubench-save",
    ]


def test_an_option_value_equal_to_the_selection_is_kept() -> None:
    args = child_args(["-m", "gpu", "gpu"], save=False, confirm=0, single=False)
    assert args[2:5] == ["-m", "gpu", "gpu"]


def test_the_users_addopts_reach_a_child_filtered_in_the_order_pytest_reads_them() -> None:
    """``-x``, ``--pdb``, ``--sw`` or ``--lf`` in an ini file's addopts or in PYTEST_ADDOPTS
    would make a child stop early, wait for a debugger on no terminal, or skip the tests."""
    args = child_args(
        ["t.py", "--trace"],
        save=False,
        confirm=0,
        single=False,
        addopts=("-x", "--pdb", "-p", "xdist", "--sw", "--timeout=9", "--junitxml", "j.xml"),
        env_addopts="--lf -v --maxfail 3 --basetemp='/tmp/a b'",
    )
    assert args[:2] == ["-o", "addopts=-p xdist --timeout=9"]
    assert args[2:4] == ["-v", "t.py"]


def test_a_child_gets_its_parents_rootdir_and_ini_file(tmp_path: Path) -> None:
    """Found by pytest before it knows our options, they could differ in a child (a path
    that exists once the parent saved); given, they cannot, and neither can the keys."""
    ini = tmp_path / "pytest.ini"
    found = launcher(tmp_path, rootdir=tmp_path, inifile=ini, writes=frozenset())
    args = found.overrides(tmp_path / "f", "child-1")
    assert args[1:4] == [f"--rootdir={tmp_path}", "-c", str(ini)]


def test_a_child_writes_its_own_files_inside_its_folder(tmp_path: Path) -> None:
    """Last on its command line, these win over the user's ini and addopts: the child never
    deletes the parent's --basetemp, never overwrites its cache (--lf) or JUnit file, never
    reruns or stops early."""
    folder = tmp_path / "f"
    args = launcher(tmp_path).overrides(folder, "child-1")
    assert args == [
        f"--basetemp={folder / 'child-1-tmp'}",
        "-o",
        f"cache_dir={folder / 'child-1-cache'}",
        f"--junitxml={folder / 'child-1-junit.xml'}",
        "--maxfail=0",
        "--reruns=0",
    ]
    others = frozenset({"pytest_reportlog", "html", "pytest_cov", "log_file", "debug"})
    more = launcher(tmp_path, writes=others).overrides(folder, "session-2")
    assert more == [
        f"--basetemp={folder / 'session-2-tmp'}",
        "--maxfail=0",
        f"--report-log={folder / 'session-2-log.jsonl'}",
        f"--html={folder / 'session-2.html'}",
        "--no-cov",
        f"--log-file={folder / 'session-2-pytest.log'}",
        f"--debug={folder / 'session-2-debug.log'}",
    ]


def test_a_request_names_the_tests_a_child_runs(tmp_path: Path) -> None:
    out = tmp_path / "child.json"
    assert read_request(out) is None  # no request: the whole selection
    write_request(out, Request(("t.py::test_a", "t.py::test_b[1]")))
    assert read_request(out) == Request(("t.py::test_a", "t.py::test_b[1]"))
    # A side of a comparison measures the rates declared bytes and flops are held to.
    sided = dataclasses.replace(EVERY_BENCHMARK, excluded=("t.py::test_x",), floors=True)
    write_request(out, sided)
    assert read_request(out) == sided
    write_request(out, EVERY_BENCHMARK)
    request = read_request(out)
    assert request == EVERY_BENCHMARK and request.nodeids is None and not request.floors
    assert request.keeps("t.py::test_c", ["gpubench", "tmp_path"])
    assert not request.keeps("t.py::test_d", ["tmp_path"])
    out.write_text("{not json", encoding="utf-8")
    assert read_request(out) is None


def measured(key: str = "t.py::test_a", session: str = "child-session") -> Result:
    info = SessionInfo("2026-01-01T00:00:00+00:00", "abc", "host-x", {"torch": "2.13.0"})
    m = Measurement(
        key=key,
        test=key.split("::")[-1],
        timer="cuda-graph",
        samples_ms=(1.0, 1.1, 0.9),
        warmup=0,
        calls_per_sample=1,
        threshold=0.05,
        session=session,
        session_infos={session: info},
    )
    return Result(m, Verdict(Status.OK))


class FakePopen:
    """Stands in for subprocess.Popen: records the command, writes ``document`` where the
    child would, prints ``output`` to the child's log, and ends with ``returncode`` (or
    never, with ``hangs``)."""

    def __init__(
        self, document: dict[str, object] | None, returncode: int, output: str, hangs: bool = False
    ):
        self.document, self.returncode, self.output = document, returncode, output
        self.hangs = hangs
        self.calls: list[dict[str, Any]] = []
        self.killed = 0

    def __call__(self, command: list[str], **kwargs: Any) -> FakePopen:
        self.calls.append({"command": command, **kwargs})
        if self.document is not None:
            Path(kwargs["env"]["PYTEST_GPUBENCH_CHILD"]).write_text(json.dumps(self.document))
        kwargs["stdout"].write(self.output.encode())
        return self

    def wait(self, timeout: float | None = None) -> int:
        if self.hangs and not self.killed:
            time.sleep(min(timeout or 0.0, 0.01))
            raise subprocess.TimeoutExpired("pytest", timeout or 0.0)
        return self.returncode

    def poll(self) -> int | None:
        return None if self.hangs and not self.killed else self.returncode

    def kill(self) -> None:
        self.killed += 1


def test_a_child_hands_back_its_results_with_whether_their_tests_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = measured(), measured("t.py::test_b")
    fake_run = FakePopen(child_document([(a, True), (b, False)]), 0, "")
    monkeypatch.setattr(subprocess, "Popen", fake_run)
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST"):
        monkeypatch.setenv(name, "gw1")
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    [run] = launcher(tmp_path).confirming(["t.py::test_a"], 1, 1, lambda i, n: None)
    assert run.error == ""
    assert [(r.key, passed) for r, passed in run.results] == [(a.key, True), (b.key, False)]
    back = run.results[0][0].measurement
    assert (back.samples_ms, back.session, back.session_infos) == (
        a.measurement.samples_ms,
        "child-session",
        a.measurement.session_infos,
    )
    call = fake_run.calls[0]
    assert call["command"][1:6] == ["-m", "pytest", "-o", "addopts=", "t.py::test_a"]
    assert call["cwd"] == tmp_path
    # not an xdist worker, on the parent's device, knowing its parent
    env = call["env"]
    assert "PYTEST_XDIST_WORKER" not in env and "PYTEST_CURRENT_TEST" not in env
    assert env["PYTEST_GPUBENCH_DEVICE"] == "1"
    assert env["PYTEST_GPUBENCH_PARENT"] == str(os.getpid())
    out = Path(env["PYTEST_GPUBENCH_CHILD"])  # not an argument: see run/children.py
    assert out.parent.name.startswith(folder_prefix())  # the host's and this process's
    assert out.name == "child-0.json"
    assert f"--basetemp={out.parent / 'child-0-tmp'}" in call["command"]  # its own, in its folder
    # it loads what its parent compiled: no pool of compile workers to wait for at its exit
    assert env["TORCHINDUCTOR_COMPILE_THREADS"] == "1"
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "8")  # unless the user chose
    launcher(tmp_path).recording(None, 2)
    assert fake_run.calls[-1]["env"]["TORCHINDUCTOR_COMPILE_THREADS"] == "8"
    assert "PYTEST_GPUBENCH_DEVICE" not in fake_run.calls[-1]["env"]
    assert not out.parent.exists()  # the folder goes with the run


def test_a_child_that_measured_nothing_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subprocess, "Popen", FakePopen(None, 4, "collected 0\nERROR: not found"))
    run = launcher(tmp_path).recording(None, 2)
    assert run.results == ()
    assert run.error == (
        "a fresh process measured nothing (exit code 4: usage error): ERROR: not found"
    )


def test_a_child_that_hangs_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "CHILD_TIMEOUT_S", 0.2)
    hung = FakePopen(None, -9, "", hangs=True)
    monkeypatch.setattr(subprocess, "Popen", hung)
    run = launcher(tmp_path).recording(None, 2)
    stopped = (
        "a fresh process showed no progress for 0.2 s (no file collected, no test started or "
        "ended) and was stopped"
    )
    assert (run.results, run.error, hung.killed) == ((), stopped, 1)


def test_a_child_that_makes_progress_runs_past_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A whole selection of a large suite may take longer than one test ever should: the
    limit counts from the child's last sign (a test started or ended), not its start."""
    monkeypatch.setattr(children, "CHILD_TIMEOUT_S", 0.3)
    monkeypatch.setattr(children, "BEAT_POLL_S", 0.05)

    class Busy(FakePopen):
        """Touches its beat file as it is looked at, every 0.05 s (as the child role does per
        test), and ends after 1 s, three limits."""

        def __call__(self, command: list[str], **kwargs: Any) -> FakePopen:
            self.out = Path(kwargs["env"]["PYTEST_GPUBENCH_CHILD"])
            self.ends = time.monotonic() + 1.0
            return super().__call__(command, **kwargs)

        def wait(self, timeout: float | None = None) -> int:
            while self.poll() is None:
                time.sleep(0.05)
            return self.returncode

        def poll(self) -> int | None:
            if time.monotonic() >= self.ends:
                return self.returncode
            children.beat_of(self.out).touch()
            return None

    busy = Busy(child_document([(measured(), True)]), 0, "")
    monkeypatch.setattr(subprocess, "Popen", busy)
    run = launcher(tmp_path).recording(None, 2)
    assert run.error == "" and len(run.results) == 1 and busy.killed == 0


def test_a_child_signs_its_progress_as_tests_start_and_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "child-0.json"
    role = Child(out, None, Collected(), parent=None, hold_device=False)
    for hook in (
        lambda: role.pytest_runtest_logstart("t.py::test_a", None),
        lambda: role.pytest_runtest_logfinish("t.py::test_a", None),
    ):
        children.beat_of(out).unlink(missing_ok=True)
        hook()
        assert children.beat_of(out).exists()
    children.beat(tmp_path / "gone" / "child-0.json")  # a folder removed under it: no error


def test_confirming_children_start_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Confirming children start at once (each holds the device from its first test on)."""
    events: list[str] = []

    class Child:
        def __init__(self, command: list[str], **kwargs: Any) -> None:
            self.name = Path(kwargs["env"]["PYTEST_GPUBENCH_CHILD"]).stem
            events.append(f"start {self.name}")
            self.returncode = 0

        def wait(self, timeout: float | None = None) -> int:
            return self.poll()

        def poll(self) -> int:
            if f"end {self.name}" not in events:
                events.append(f"end {self.name}")
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    runs = launcher(tmp_path).confirming(["t.py::test_a"], 2, None, lambda i, n: None)
    assert events == ["start child-0", "start child-1", "end child-0", "end child-1"]
    assert all("measured nothing" in run.error for run in runs)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_children_are_killed_and_reaped_though_an_interrupt_left_popens_lock_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Ctrl-C that lands inside Popen.wait(timeout) between its lock's acquire and its
    try leaves the lock taken (a CI run hung there): the kill still ends and reaps."""
    monkeypatch.setattr(processes, "KILLED_WAIT_S", 0.5)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert proc._waitpid_lock.acquire(False)  # as the interrupted wait left it
    started = time.monotonic()
    processes.kill_all([proc])
    assert time.monotonic() - started < 30
    assert proc.returncode == -9  # killed, and Popen knows it
    with pytest.raises(ProcessLookupError):  # reaped: no zombie left under its pid
        os.kill(proc.pid, 0)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "waitid"), reason="emulates its absence on Linux")
def test_a_group_whose_leader_ended_is_killed_where_there_is_no_waitid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without os.waitid (macOS) a look at a child reaps it: the kill must not look first,
    or what its group left running (a wrapper's child) outlives us."""
    waitid = os.waitid
    pid_file = tmp_path / "left.pid"
    proc = processes.start(
        ["sh", "-c", f"sleep 60 & echo $! > {pid_file}"],
        tmp_path,
        os.environ,
        tmp_path / "log",
        lifeline=False,
    )
    while waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT) is None:  # ended, unreaped
        time.sleep(0.01)
    left = int(pid_file.read_text())
    monkeypatch.delattr(os, "waitid")
    processes.kill_all([proc])

    def alive(pid: int) -> bool:  # a zombie is dead: its reaper may be slow to come
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 10
    while alive(left) and time.monotonic() < deadline:
        time.sleep(0.01)
    if alive(left):
        os.kill(left, signal.SIGKILL)
        pytest.fail("the sleep its group left outlived kill_all")


def test_an_interrupted_parent_kills_the_children_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[FakePopen] = []
    landed: list[bool] = []

    class Interrupted(FakePopen):
        """A child that runs on; the Ctrl-C lands as the parent first looks at one."""

        def poll(self) -> int | None:
            if not landed:
                landed.append(True)
                raise KeyboardInterrupt
            return super().poll()

    def start(command: list[str], **kwargs: Any) -> FakePopen:
        child = Interrupted(None, -9, "", hangs=True)
        started.append(child)
        return child(command, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", start)
    with pytest.raises(KeyboardInterrupt):
        launcher(tmp_path).confirming(["t.py::test_a"], 2, None, lambda i, n: None)
    assert [child.killed for child in started] == [1, 1]


@pytest.mark.slow
def test_old_folders_of_gone_parents_on_this_host_are_swept_and_others_kept(
    tmp_path: Path,
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    here = f"{FOLDER_PREFIX}{owner.identity()}-"
    dead = tmp_path / f"{here}{int(gone.stdout)}-abc"
    young = tmp_path / f"{here}{int(gone.stdout)}-young"
    alive = tmp_path / f"{here}{os.getpid()}-abc"
    elsewhere = tmp_path / f"{FOLDER_PREFIX}another-host-{int(gone.stdout)}-abc"
    # the same host name, another machine, boot or pid namespace (a shared TMPDIR)
    name = owner.identity().split("-")[0]
    namesake = tmp_path / f"{FOLDER_PREFIX}{name}-0123456789ab-{int(gone.stdout)}-abc"
    unrelated = tmp_path / "gpubench-child-notapid"
    for folder in (dead, young, alive, elsewhere, namesake, unrelated):
        (folder / "child-0.log").parent.mkdir()
        (folder / "child-0.log").write_text("x")
        if folder is not young:
            old = time.time() - STALE_AFTER_S - 60
            os.utime(folder, (old, old))
    sweep_folders(tmp_path)
    assert not dead.exists()
    # a parent that is gone here may be alive in another PID namespace: only old folders go
    assert young.exists() and alive.exists() and elsewhere.exists() and unrelated.exists()
    assert namesake.exists() or owner.identity() == name  # a system with no ids: the name


@pytest.mark.slow
def test_a_child_removes_only_a_folder_of_ours_when_its_parent_is_gone(tmp_path: Path) -> None:
    """A lifeline started from a leaked environment must not delete the user's folders."""
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious.txt").write_text("mine")
    ours = tmp_path / f"{FOLDER_PREFIX}x"
    ours.mkdir()
    code = (
        "import sys, time; from pathlib import Path; "
        "from pytest_gpubench.run.processes import watch_parent; "
        "watch_parent(int(sys.argv[1]), Path(sys.argv[2]), interval_s=0.05); time.sleep(30)"
    )
    for folder in (keep, ours):
        child = subprocess.run(
            [sys.executable, "-c", code, "1", str(folder)], timeout=60, capture_output=True
        )  # its parent is not pid 1: the lifeline ends it at once
        assert child.returncode == processes.ORPHANED
    assert (keep / "precious.txt").read_text() == "mine" and not ours.exists()


@pytest.mark.slow
def test_a_child_under_a_wrapper_ends_with_the_wrapper_or_with_the_plugins_process(
    tmp_path: Path,
) -> None:
    """Under Nsight Compute the child's parent process is ncu, which outlives the plugin's
    process that started it: the child watches both."""
    code = (
        "import sys, time; from pathlib import Path; "
        "from pytest_gpubench.run.processes import watch_parent; "
        "watch_parent(int(sys.argv[1]), Path(sys.argv[2]), interval_s=0.05, wrapped=True); "
        "time.sleep(0.5); print('alive'); sys.stdout.flush(); time.sleep(30)"
    )
    folder = tmp_path / f"{FOLDER_PREFIX}w"
    folder.mkdir()
    # The plugin's process alive (this one), the wrapper alive (a shell waiting for it).
    wrapper = subprocess.Popen(
        ["sh", "-c", '"$0" -c "$1" "$2" "$3"; echo "ended $?"', sys.executable, code,
         str(os.getpid()), str(folder)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert wrapper.stdout is not None
    assert wrapper.stdout.readline().strip() == "alive"
    # The plugin's process gone (a pid that is no process): it ends at once.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    started = time.monotonic()
    ended = subprocess.run(
        ["sh", "-c", '"$0" -c "$1" "$2" "$3"; echo "ended $?"', sys.executable, code,
         gone.stdout.strip(), str(folder)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert ended.stdout.strip() == f"ended {processes.ORPHANED}"
    assert time.monotonic() - started < 20 and not folder.exists()
    # The wrapper killed: its child ends too.
    folder.mkdir()
    wrapper.kill()
    wrapper.wait()
    wrapper.stdout.close()
    deadline = time.monotonic() + 20
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()


# Stands in for Nsight Compute: starts the child, as ncu does, in a process that is not yet
# the child's pytest (so no plugin of it watches anything yet), then ends as told.
FAKE_WRAPPER = """#!/bin/sh
echo $$ > "$FAKE_WRAPPER_DIR/wrapper.pid"
sh -c 'echo $$ > "$0/child.pid"; sleep 60; exec "$@"' "$FAKE_WRAPPER_DIR" "$@" &
while [ ! -s "$FAKE_WRAPPER_DIR/child.pid" ]; do sleep 0.01; done
case "$FAKE_WRAPPER_END" in
    exits) exit 0 ;;
    dies) kill -9 $$ ;;
    hangs) sleep 60 ;;
esac
"""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("end", ["exits", "dies", "hangs"])
def test_a_wrapper_that_ends_before_its_child_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: str
) -> None:
    """A wrapped child starts in a process group of its own, which its parent ends whole:
    a wrapper (ncu) that exits, or dies, before its child's plugin could watch anything, or
    hangs until the parent stops waiting, leaves nothing of ours running."""
    script = tmp_path / "fake-ncu"
    script.write_text(FAKE_WRAPPER)
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_WRAPPER_DIR", str(tmp_path))
    monkeypatch.setenv("FAKE_WRAPPER_END", end)
    monkeypatch.setattr(children, "CHILD_TIMEOUT_S", 1.0)  # the hanging one: stuck
    started = time.monotonic()
    [run] = launcher(tmp_path, wrapper=(str(script),)).profiling(["t.py::test_a"], None)
    assert time.monotonic() - started < 30
    assert run.results == () and run.error
    wrapper = int((tmp_path / "wrapper.pid").read_text())
    child = int((tmp_path / "child.pid").read_text())
    assert wrapper != child
    deadline = time.monotonic() + 10  # SIGKILL is sent; a loaded machine may end it later
    while _left(wrapper, child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _left(wrapper, child) == []


def _left(wrapper: int, child: int) -> list[int]:
    """The processes of the wrapper's group (the child, its sleep) that still run."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            group = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2])
        except (OSError, ValueError, IndexError):
            continue
        if (group == wrapper or int(proc.name) in (wrapper, child)) and running(int(proc.name)):
            found.append(int(proc.name))
    return found


def test_the_folder_is_in_the_temporary_directory_and_named_after_its_owner() -> None:
    assert processes.FOLDER_PREFIX == "gpubench-child-"
    with tempfile.TemporaryDirectory(prefix=folder_prefix()) as name:
        sweep_folders(min_age_s=0)  # its owner is alive: kept
        assert Path(name).exists()


def test_why_a_child_measured_nothing_is_its_telling_line() -> None:
    crashed = "collected 0\nE   RuntimeError: no GPU here\n=== 1 error in 0.1s ==="
    assert children.reason_in(crashed) == "E   RuntimeError: no GPU here"
    traceback = "Traceback (most recent call last):\n  File x\nImportError: no module y\n"
    assert children.reason_in(traceback) == "ImportError: no module y"
    assert children.reason_in("=== 2 passed in 2.19s ===") == "=== 2 passed in 2.19s ==="
    assert children.reason_in("") == ""


# What a child that aborted in a test leaves in its log: pytest's header (a plugin's line of
# any shape among it), the progress line it died on, then faulthandler's dump.
ABORTED = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0
benchmark: 5.2.3 (defaults: timer=time.perf_counter disable_gc=False min_rounds=5)
rootdir: /tmp/gpubench-ref-7mzomjt8/tree
plugins: hypothesis-6.155.2, gpubench-0.2.0, xdist-3.8.0
collected 2 items

test_bench.py {said}Fatal Python error: Aborted

Thread 0x00007f8247fff6c0 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007f824cdbc6c0 (most recent call first):
  File "/tmp/gpubench-ref-7mzomjt8/tree/kernels.py", line 6 in work
  File "/tmp/gpubench-ref-7mzomjt8/tree/test_bench.py", line 5 in test_sum
  <no Python frame>

Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)
"""


def test_a_dead_childs_telling_line_is_its_last_words_not_its_header_nor_its_stacks() -> None:
    # pytest's capture keeps what the test wrote: where the process died is what is left.
    assert children.reason_in(ABORTED.format(said="")) == "at kernels.py, line 6, in work"
    # Under -s what it wrote before it died follows its progress line.
    said = "CUDA error: an illegal memory access was encountered\n"
    assert children.reason_in(ABORTED.format(said=said)) == said.strip()
    assert children.reason_in(ABORTED.format(said=".F ")) == "at kernels.py, line 6, in work"
    # Killed outright: neither words nor stacks.
    assert children.reason_in(ABORTED.split("test_bench.py")[0] + "test_bench.py .") == ""
    assert children.reason_in("foo.py:12: UserWarning: slow") == "foo.py:12: UserWarning: slow"


def test_the_document_is_json_of_the_results_files_fields() -> None:
    data = json.loads(json.dumps(child_document([(measured(), False)])))
    [entry] = data["results"]
    assert (entry["key"], entry["passed"], entry["status"]) == ("t.py::test_a", False, "ok")


# --- the sequential confirmation (run/session.py): batch after batch -------------------------


class ScriptedLauncher:
    """A launcher whose fresh processes each measure one session at ``median_ms`` (or, for
    the batches in ``failing``, nothing), recording each batch as (first child, count)."""

    def __init__(self, median_ms: float = 1.06, failing: tuple[int, ...] = ()) -> None:
        self.batches: list[tuple[int, int]] = []
        self.median_ms = median_ms
        self.failing = failing

    def confirming(
        self, nodeids: Any, count: int, device_index: Any, progress: Any, first: int = 0
    ) -> list[children.ChildRun]:
        self.batches.append((first, count))
        if len(self.batches) in self.failing:
            return [children.ChildRun(error="exit 1: no GPU here")] * count
        measured = [session_of(f"child-{first + i}", self.median_ms) for i in range(count)]
        return [children.ChildRun(((Result(m, Verdict(Status.NEW)), True),)) for m in measured]


def session_of(name: str, median_ms: float) -> Measurement:
    return Measurement(
        key="t.py::test_a",
        test="test_a",
        timer="cuda-graph",
        samples_ms=(median_ms,) * 20,
        warmup=0,
        calls_per_sample=1,
        threshold=0.05,
        session=name,
    )


def confirmed(
    tmp_path: Path, launcher: ScriptedLauncher | None, wants: int, confirm: int = 6
) -> Result:
    """The result of a first session confirmed by ``launcher``, whose verdict asks for more
    sessions until it has ``wants`` (a borderline test; the rule's own decision is tested in
    tests/judge/test_rule.py)."""
    from pytest_gpubench.core.records import Judgement
    from pytest_gpubench.core.settings import MeasureSettings, Settings
    from pytest_gpubench.run.session import BenchSession

    settings = Settings.resolve({"enabled": True, "confirm": confirm}, {}, tmp_path)
    session = BenchSession(
        settings,
        tmp_path,
        lambda *a: None,  # type: ignore[arg-type,return-value]
        lambda: False,
        launcher,  # type: ignore[arg-type]
    )

    def judge(measurement: Measurement, _: object) -> Result:
        more = len(measurement.sessions) < wants
        judgement = Judgement(Status.OK, 1.06, needs_confirmation=more)
        return Result(measurement, Verdict(Status.OK, judgement, reason="borderline"))

    session.judge = judge  # type: ignore[method-assign]
    first = judge(session_of("c0", 1.06), None)
    [(result,)] = session.confirm(
        [("t.py::test_a", (first,), MeasureSettings())], progress=lambda i, n: None
    )
    return result


@pytest.mark.parametrize(
    "wants, confirm, batches",
    [
        (3, 6, [(0, 2)]),  # decided after the first pair
        (5, 6, [(0, 2), (2, 2)]),  # borderline once: a second pair, named on from child-2
        (99, 6, [(0, 2), (2, 2), (4, 2)]),  # never decided: stops at the cap of 6
        (99, 3, [(0, 2), (2, 1)]),  # a cap of 3: the last batch is cut to what is left
    ],
)
def test_a_confirmation_adds_batches_while_the_gate_wants_more_up_to_its_cap(
    tmp_path: Path, wants: int, confirm: int, batches: list[tuple[int, int]]
) -> None:
    launcher = ScriptedLauncher()
    result = confirmed(tmp_path, launcher, wants, confirm)
    assert launcher.batches == batches
    assert len(result.measurement.sessions) == 1 + sum(n for _, n in batches)
    assert [s.session for s in result.measurement.confirmations] == [
        f"child-{i}" for i in range(sum(n for _, n in batches))
    ]


def test_a_first_batch_that_measured_nothing_leaves_the_verdict_unconfirmed_once(
    tmp_path: Path,
) -> None:
    launcher = ScriptedLauncher(failing=(1,))
    result = confirmed(tmp_path, launcher, wants=5)
    assert launcher.batches == [(0, 2)]  # another batch would not do better
    assert result.status is Status.UNCONFIRMED
    assert result.verdict.reason == (
        "not confirmed: exit 1: no GPU here; its first session: borderline"
    )


def test_a_later_batch_that_measured_nothing_leaves_the_last_looks_verdict(
    tmp_path: Path,
) -> None:
    launcher = ScriptedLauncher(failing=(2,))
    result = confirmed(tmp_path, launcher, wants=5)
    assert launcher.batches == [(0, 2), (2, 2)]
    assert (result.status, len(result.measurement.sessions)) == (Status.OK, 3)
    assert result.verdict.reason == "borderline"


def test_without_a_launcher_a_flagged_verdict_is_unconfirmed(tmp_path: Path) -> None:
    result = confirmed(tmp_path, None, wants=5)
    assert result.status is Status.UNCONFIRMED
    assert result.verdict.reason.startswith("not confirmed: no fresh process can be started")


def test_a_collection_error_of_a_child_is_told_in_one_line() -> None:
    out = (
        "______ ERROR collecting test_ext.py ______\n"
        "ImportError while importing test module '/x/test_ext.py'.\n"
        "E   ModuleNotFoundError: No module named 'built'\n"
    )
    assert collection_errors(out) == (
        ("test_ext.py", "ModuleNotFoundError: No module named 'built'"),
    )
    assert collection_errors("E   AssertionError: a failed test, not a collection") == ()


def test_a_child_names_the_test_it_runs(tmp_path: Path) -> None:
    out = tmp_path / "child.json"
    assert children.running_test(out) == ""
    children.beat(out, "t.py::test_a")
    assert children.running_test(out) == "t.py::test_a"
    children.beat(out)  # a file collected: the test running stays named
    assert children.running_test(out) == "t.py::test_a"
    children.beat(out, "")
    assert children.running_test(out) == ""


def test_how_a_process_ended_is_said_one_way() -> None:
    assert processes.died(-6) == "killed by SIGABRT"
    assert processes.died(-9) == "killed by SIGKILL"
    assert processes.died(-11) == "killed by SIGSEGV"
    assert processes.died(3) == "exit code 3"
    assert processes.died(0) == "exit code 0"
    assert processes.died(-200) == "killed by signal 200"


def test_a_child_names_a_test_whose_id_holds_a_lone_surrogate(tmp_path: Path) -> None:
    # pytest keeps such an id under its ini option that disables the escaping of ids (issue
    # 46): the child's beat raised, and the confirmation measured nothing.
    out = tmp_path / "child.json"
    children.beat(out, "t.py::test_a[\udc80]")
    assert children.running_test(out) == "t.py::test_a[\udc80]"


@pytest.mark.parametrize("said", [False, True])
def test_a_child_says_the_tests_it_is_to_run_whatever_their_ids_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: bool
) -> None:
    # Its parent reads them if it dies (a side given up: which tests it never timed).
    ids = ["t.py::test_a", "t.py::test_b[\udc80]", "t.py::test_c[a\nb]"]
    session: Any = SimpleNamespace(items=[SimpleNamespace(nodeid=i) for i in ids])

    class Dies(FakePopen):
        """The child role, until it dies in a test: having said its plan, or not."""

        def __call__(self, command: list[str], **kwargs: Any) -> FakePopen:
            out = Path(kwargs["env"]["PYTEST_GPUBENCH_CHILD"])
            role = Child(out, None, Collected(), parent=None, hold_device=False)
            if said:
                role.pytest_collection_finish(session)
            role.pytest_runtest_logstart(ids[1], None)
            return super().__call__(command, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", Dies(None, -9, ""))
    [run] = launcher(tmp_path).confirming(ids, 1, 1, lambda i, n: None)
    assert run.crashed == ((ids[1], "killed by SIGKILL"),)
    assert run.planned == (tuple(ids) if said else None)  # None: not known, never said


def test_foreign_imports_names_modules_of_the_other_sides_tree_not_what_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(children.FOREIGN_VARIABLE, str(TESTS_DIR))
    assert f"support ({TESTS_DIR / 'support.py'})" in children.foreign_imports()
    # A virtual environment inside the tree: its packages are installed, not the tree's code.
    purelib = Path(sysconfig.get_paths()["purelib"]).resolve()
    monkeypatch.setenv(children.FOREIGN_VARIABLE, str(purelib.parent))
    assert not [m for m in children.foreign_imports() if m.startswith("pytest ")]
    monkeypatch.delenv(children.FOREIGN_VARIABLE)
    assert children.foreign_imports() == ()


def test_a_child_hands_back_the_modules_it_imported_from_the_other_sides_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    document = child_document([(measured(), True)], ["kernels (/repo/lib/kernels.py)"])
    monkeypatch.setattr(subprocess, "Popen", FakePopen(document, 0, ""))
    [run] = launcher(tmp_path).confirming(["t.py::test_a"], 1, 1, lambda i, n: None)
    assert run.foreign == ("kernels (/repo/lib/kernels.py)",) and len(run.results) == 1


def test_the_revisions_side_gets_the_rootdir_and_ini_file_at_their_places_in_its_checkout(
    tmp_path: Path,
) -> None:
    from pytest_gpubench.versus import ab
    from pytest_gpubench.versus.revision import Revision

    repo, root = tmp_path / "repo", tmp_path / "checkout"
    for top in (repo, root):
        (top / "suite").mkdir(parents=True)
        (top / "suite" / "pytest.ini").write_text("[pytest]\n")
    (repo / "tox.ini").write_text("[pytest]\n")  # added since the revision
    rev = Revision("HEAD", "0" * 40, repo, root)
    head = launcher(repo / "suite", rootdir=repo / "suite", inifile=repo / "suite" / "pytest.ini")
    sides = ab.sides(head, rev, tmp_path / "ab", tmp_path / "plugin", tmp_path / "baselines")
    assert (sides.base.rootdir, sides.base.inifile) == (
        root / "suite",
        root / "suite" / "pytest.ini",
    )
    assert (sides.head.rootdir, sides.head.inifile) == (head.rootdir, head.inifile)
    other = dataclasses.replace(head, rootdir=repo, inifile=repo / "tox.ini")
    moved = ab.sides(other, rev, tmp_path / "ab", tmp_path / "plugin", tmp_path / "baselines")
    assert (moved.base.rootdir, moved.base.inifile) == (root, None)


def test_an_owner_is_its_machine_boot_and_pid_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines of one host name (a TMPDIR shared over NFS) or one machine after a
    reboot never look alike: a pid read on one means nothing on the other."""
    machine, boot = tmp_path / "machine-id", tmp_path / "boot_id"
    monkeypatch.setattr(owner, "_SOURCES", (machine, boot))
    monkeypatch.setattr(owner.socket, "gethostname", lambda: "gpu.node_1")
    machine.write_text("a1\n")
    boot.write_text("b1\n")
    first = owner.identity()
    assert first.startswith("gpu-node-1-") and first == owner.identity()
    boot.write_text("b2\n")
    rebooted = owner.identity()
    machine.write_text("a2\n")
    assert len({first, rebooted, owner.identity()}) == 3
    assert all(c.isalnum() or c == "-" for c in first)


@pytest.mark.slow
def test_a_real_child_touches_its_beat_file(tmp_path: Path) -> None:
    """The child role signs its progress in a real process (the variable naming its file is
    taken out of its environment at start, so the role itself must know the file)."""
    (tmp_path / "test_x.py").write_text("def test_x():\n    assert True\n")
    out = tmp_path / "child-0.json"
    env = {**os.environ, "PYTEST_GPUBENCH_CHILD": str(out)}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.exists() and children.beat_of(out).exists()


@pytest.mark.slow
@pytest.mark.parametrize("wrapped", [False, True])
def test_a_real_child_ends_once_pytest_is_done(tmp_path: Path, wrapped: bool) -> None:
    """A process we started ends at pytest's unconfigure, with pytest's exit status and its
    results written: the interpreter's teardown (exit handlers, here a conftest's) is not
    waited for. Under a wrapper (Nsight Compute reads its target's end) it ends as usual."""
    (tmp_path / "conftest.py").write_text(
        "import atexit, pathlib\natexit.register(pathlib.Path('exit-handler-ran').touch)\n"
    )
    (tmp_path / "test_x.py").write_text(
        "def test_x():\n    assert True\n\ndef test_y():\n    assert False\n"
    )
    out = tmp_path / "child-0.json"
    env = {
        **os.environ,
        children.CHILD_VARIABLE: str(out),
        children.PARENT_VARIABLE: str(os.getpid()),
    }
    env.pop("PYTEST_ADDOPTS", None)
    if wrapped:
        env[processes.WRAPPED_VARIABLE] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr  # pytest's: a test failed
    assert "1 failed, 1 passed" in done.stdout  # its output flushed before it ended
    assert [e["passed"] for e in json.loads(out.read_text())["results"]] == []  # no gpubench
    assert (tmp_path / "exit-handler-ran").exists() == wrapped


@pytest.mark.slow
@pytest.mark.parametrize(
    ("conftest", "tests", "code", "says"),
    [
        # A plugin's terminal summary (after our results are written) that crashes.
        (
            "def pytest_terminal_summary():\n    raise RuntimeError('summary crashed')\n",
            "def test_x():\n    pass\n",
            1,
            "RuntimeError: summary crashed",
        ),
        # A plugin that sets the session's exit status (pytest-custom_exit_code's way).
        (
            "def pytest_sessionfinish(session, exitstatus):\n"
            "    if exitstatus == 5:\n        session.exitstatus = 0\n",
            "x = 1\n",
            0,
            "",
        ),
        # pytest.exit in a plugin's sessionfinish.
        (
            "import pytest\n\ndef pytest_sessionfinish():\n    pytest.exit('stop', returncode=3)\n",
            "def test_x():\n    pass\n",
            3,
            "Exit: stop",
        ),
    ],
    ids=["summary-crashes", "exit-status-set", "pytest-exit"],
)
def test_a_real_child_ends_as_pytest_would_after_a_later_sessionfinish(
    tmp_path: Path, conftest: str, tests: str, code: int, says: str
) -> None:
    """A process we started that ends at pytest's unconfigure ends as pytest would have
    where a plugin's sessionfinish after ours crashes, exits or sets the session's exit
    status: its traceback or message in its output, and that exit status (it had ended
    with sessionfinish's argument, 0, its traceback unwritten)."""
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_x.py").write_text(tests)
    out = tmp_path / "child-0.json"
    env = {
        **os.environ,
        children.CHILD_VARIABLE: str(out),
        children.PARENT_VARIABLE: str(os.getpid()),
    }
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == code, done.stdout + done.stderr
    assert says in done.stdout + done.stderr
    assert json.loads(out.read_text())["results"] == []  # written before, as always
