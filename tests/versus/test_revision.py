"""Unit tests of the base side of --gpubench-against (versus/revision.py), on git repositories
generated here: what a revision resolves to, what its checkout holds and builds, and that
nothing of it is left afterwards, whatever ends it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest
from support import git

from pytest_gpubench.run.owner import identity
from pytest_gpubench.versus.revision import BuildFailed, RevisionError, checkout, resolve

# Every test here runs git or a build in a real process: the slow selection.
pytestmark = pytest.mark.slow

if shutil.which("git") is None:
    pytest.skip("git is not on PATH", allow_module_level=True)


def commit(cwd: Path, message: str, files: dict[str, str]) -> str:
    """Write ``files`` (path: content), commit them all; the new commit's sha."""
    for name, content in files.items():
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(content)
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "-m", message)
    return git(cwd, "rev-parse", "HEAD")


@dataclass(frozen=True)
class Repo:
    path: Path
    first: str  # a.txt "one", pkg/sub/x.txt; tagged v1
    second: str  # on main: a.txt "two", b.txt added
    feature: str  # on the branch feature, from first: f.txt added


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No git configuration of the machine's (signing, hooks, templates), no repository
    above tmp_path, and a temporary directory of the test's own, to see what is left."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    first = commit(path, "first", {"a.txt": "one", "pkg/sub/x.txt": "x"})
    git(path, "tag", "v1")
    git(path, "checkout", "-q", "-b", "feature")
    feature = commit(path, "feature", {"f.txt": "f"})
    git(path, "checkout", "-q", "main")
    second = commit(path, "second", {"a.txt": "two", "b.txt": "b"})
    return Repo(path.resolve(), first, second, feature)


def add_submodule(repo: Repo, tmp_path: Path) -> Path:
    """Commit a second generated repository into ``repo`` as the submodule ``sub``."""
    library = tmp_path / "library"
    library.mkdir()
    git(library, "init", "-q", "-b", "main")
    commit(library, "library", {"lib.txt": "lib"})
    allow = ["-c", "protocol.file.allow=always"]  # a local path: refused by default
    git(repo.path, *allow, "submodule", "add", "-q", str(library), "sub")
    git(repo.path, "commit", "-q", "-m", "submodule")
    return library


def left(repo: Repo) -> tuple[list[str], list[str]]:
    """What a checkout could leave: the checkouts git records, folders in the temporary
    directory."""
    listed = git(repo.path, "worktree", "list", "--porcelain").splitlines()
    trees = [line for line in listed if line.startswith("worktree ")]
    return trees, os.listdir(tempfile.gettempdir())


def nothing_left(repo: Repo) -> bool:
    return left(repo) == ([f"worktree {repo.path}"], [])


# --- resolve ------------------------------------------------------------------------------


def test_resolve_names_a_commit_in_any_way_git_does(repo: Repo) -> None:
    for ref, sha in [
        ("HEAD", repo.second),
        ("main", repo.second),
        ("feature", repo.feature),
        ("v1", repo.first),
        (repo.first[:8], repo.first),
        ("HEAD~1", repo.first),
    ]:
        assert resolve(ref, repo.path) == (repo.path, sha), ref


def test_resolve_from_a_subdirectory_gives_the_top_level(repo: Repo) -> None:
    assert resolve("HEAD", repo.path / "pkg" / "sub") == (repo.path, repo.second)


@pytest.mark.parametrize("ref", ["nosuchbranch", "-h", "", "v1:a.txt"])
def test_an_unknown_revision_is_named_in_one_line(repo: Repo, ref: str) -> None:
    with pytest.raises(RevisionError) as info:
        resolve(ref, repo.path)
    message = str(info.value)
    assert message == (
        f"--gpubench-against {ref!r}: not a revision of the repository at {repo.path} "
        "(git: unknown revision); name a branch, tag or commit"
    )


def test_outside_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(RevisionError, match="is not in a git repository") as info:
        resolve("HEAD", plain)
    assert str(plain) in str(info.value) and "\n" not in str(info.value)


def test_without_git(repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RevisionError, match="^--gpubench-against needs git on PATH$"):
        resolve("HEAD", repo.path)


# --- checkout --------------------------------------------------------------------------------


def test_checkout_holds_the_revision_and_leaves_the_dirty_tree_alone(repo: Repo) -> None:
    (repo.path / "a.txt").write_text("changed, not staged")
    (repo.path / "staged.txt").write_text("staged")
    git(repo.path, "add", "staged.txt")
    (repo.path / "untracked.txt").write_text("untracked")
    status, staged = git(repo.path, "status", "--porcelain"), git(repo.path, "diff", "--cached")

    with checkout("HEAD~1", repo.path) as revision:
        assert (revision.ref, revision.commit, revision.repo) == ("HEAD~1", repo.first, repo.path)
        assert not revision.root.is_relative_to(repo.path)
        assert (revision.root / "a.txt").read_text() == "one"  # changed later
        assert not (revision.root / "b.txt").exists()  # added later
        assert not (revision.root / "staged.txt").exists()
        assert not (revision.root / "untracked.txt").exists()
        assert git(revision.root, "rev-parse", "HEAD") == repo.first

    assert git(repo.path, "status", "--porcelain") == status
    assert git(repo.path, "diff", "--cached") == staged
    assert (repo.path / "a.txt").read_text() == "changed, not staged"
    assert git(repo.path, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert nothing_left(repo)


def test_checkout_ignores_variables_that_point_git_at_the_users_index(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when pytest runs from a git hook: git would check out into the user's index."""
    (repo.path / "a.txt").write_text("changed")
    git(repo.path, "add", "a.txt")
    status = git(repo.path, "status", "--porcelain")
    monkeypatch.setenv("GIT_DIR", str(repo.path / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo.path / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo.path))
    with checkout("v1", repo.path) as revision:
        assert (revision.root / "a.txt").read_text() == "one"
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"):
        monkeypatch.delenv(name)
    assert git(repo.path, "status", "--porcelain") == status
    assert nothing_left(repo)


def test_checkout_runs_no_hook_of_the_users(repo: Repo, tmp_path: Path) -> None:
    ran = tmp_path / "hook-ran"
    hook = repo.path / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {ran}\n")
    hook.chmod(0o755)
    git(repo.path, "checkout", "-q", "v1")  # the hook works
    assert ran.exists()
    ran.unlink()
    git(repo.path, "checkout", "-q", "main")
    ran.unlink()
    with checkout("v1", repo.path):
        pass
    assert not ran.exists()


def test_counterpart(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    with checkout("v1", repo.path) as revision:
        there = revision.counterpart(repo.path / "pkg" / "sub")
        assert there == revision.root / "pkg" / "sub"
        assert (there / "x.txt").read_text() == "x"
        assert revision.counterpart(repo.path) == revision.root
        monkeypatch.chdir(repo.path / "pkg")
        assert revision.counterpart(Path("sub")) == revision.root / "pkg" / "sub"
        with pytest.raises(RevisionError, match="is outside the repository at"):
            revision.counterpart(repo.path.parent)


@pytest.mark.parametrize("error", [None, RuntimeError, KeyboardInterrupt])
def test_nothing_is_left_whatever_ends_the_body(
    repo: Repo, error: type[BaseException] | None
) -> None:
    roots: list[Path] = []
    with pytest.raises(error) if error else contextlib.nullcontext():
        with checkout("HEAD~1", repo.path) as revision:
            roots.append(revision.root)
            assert revision.root.is_dir()
            assert len(left(repo)[0]) == 2
            if error:
                raise error
    assert not roots[0].parent.exists()
    assert nothing_left(repo)


def test_a_build_runs_in_the_checkout(repo: Repo, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    build = "cat a.txt > built.txt && echo done"
    with checkout("v1", repo.path, build=build, log=log) as revision:
        assert (revision.root / "built.txt").read_text() == "one"
    assert log.read_text() == "done\n"
    assert not (repo.path / "built.txt").exists()
    assert nothing_left(repo)


def test_a_failed_build_is_named_with_its_last_words(repo: Repo, tmp_path: Path) -> None:
    log = tmp_path / "build.log"
    build = "echo compiling; echo 'error: the last words' >&2; echo; exit 3"
    with pytest.raises(BuildFailed) as info:  # bisect skips such a commit
        with checkout("HEAD~1", repo.path, build=build, log=log):
            pytest.fail("the body runs only once the build succeeded")
    assert str(info.value) == (
        f"--gpubench-build {build!r} failed in HEAD~1 ({repo.first[:7]}): exit code 3: "
        f"error: the last words; its output: {log}"
    )
    assert "compiling" in log.read_text()  # the caller's log stays
    assert nothing_left(repo)


def test_a_failed_builds_colours_and_control_characters_stay_in_its_log(
    repo: Repo, tmp_path: Path
) -> None:
    log = tmp_path / "build.log"
    build = "printf '\\033[1;31merror:\\033[0m no\\033[2J\\r\\007 such file\\n'; exit 1"
    with pytest.raises(BuildFailed) as info:
        with checkout("v1", repo.path, build=build, log=log):
            pass
    assert ": exit code 1: error: no such file; its output: " in str(info.value)
    assert "\x1b" in log.read_text()  # the log keeps what the build wrote


def test_a_failed_build_without_a_log_of_the_callers(repo: Repo) -> None:
    with pytest.raises(RevisionError) as info:
        with checkout("main", repo.path, build="false"):
            pass
    assert str(info.value).endswith(f"({repo.second[:7]}): exit code 1: no output")
    assert nothing_left(repo)


def test_a_build_over_time_is_killed_with_its_children(repo: Repo, tmp_path: Path) -> None:
    pid_file = tmp_path / "background.pid"
    build = f"sh -c 'echo $$ > {pid_file}; exec sleep 30' & sleep 30"
    start = time.monotonic()
    with pytest.raises(
        RevisionError, match=r"ran over 1 s in v1 \(\w{7}\) and was stopped"
    ) as info:
        with checkout("v1", repo.path, build=build, timeout_s=1):
            pass
    assert not isinstance(info.value, BuildFailed)  # not a commit that does not build
    assert time.monotonic() - start < 10
    assert _gone(int(pid_file.read_text()))
    assert nothing_left(repo)


def test_an_interrupted_build_is_killed_and_removed(repo: Repo, tmp_path: Path) -> None:
    pid_file = tmp_path / "build.pid"

    def interrupt(signum: int, frame: FrameType | None) -> None:
        # Ctrl-C once the build runs: its pid written a while ago (the shell may write it
        # before Popen returns, and a Ctrl-C inside Popen is not this case)
        if pid_file.exists() and time.time() - pid_file.stat().st_mtime > 0.5:
            raise KeyboardInterrupt
        signal.setitimer(signal.ITIMER_REAL, 0.1)

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.1)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            with checkout("v1", repo.path, build=f"echo $$ > {pid_file}; sleep 30; true"):
                pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - start < 10
    assert _gone(int(pid_file.read_text()))
    assert nothing_left(repo)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a lifeline of Linux's")
def test_a_build_of_a_run_killed_outright_ends_with_its_children(
    repo: Repo, tmp_path: Path
) -> None:
    """SIGKILL lets us end nothing: the kernel tells the build's shell, which ends its
    group (a compiler it started, a job it left in the background)."""
    shell, background = tmp_path / "shell.pid", tmp_path / "background.pid"
    build = f"echo $$ > {shell}; sh -c 'echo $$ > {background}; exec sleep 60' & sleep 60"
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pytest_gpubench.versus.revision import checkout\n"
        "with checkout('v1', Path(sys.argv[1]), build=sys.argv[2]):\n"
        "    pass\n"
    )
    run = subprocess.Popen([sys.executable, "-c", script, str(repo.path), build])
    try:
        deadline = time.monotonic() + 30
        while not (background.exists() and background.read_text().strip()):
            assert time.monotonic() < deadline and run.poll() is None, "no build started"
            time.sleep(0.05)
    finally:
        run.kill()
        run.wait()
    assert _gone(int(shell.read_text())) and _gone(int(background.read_text()))


def test_a_build_killed_by_a_signal_says_which(repo: Repo) -> None:
    with pytest.raises(RevisionError, match=r"failed in v1 \(\w{7}\): killed by SIGKILL"):
        with checkout("v1", repo.path, build="kill -9 $$"):
            pass
    assert nothing_left(repo)


def test_a_build_keeps_sigint(repo: Repo, tmp_path: Path) -> None:
    """A build step that stops its own processes with SIGINT still can (a shell's
    background job would have SIGINT ignored)."""
    seen = tmp_path / "sigint.txt"
    code = f"import signal; open({str(seen)!r}, 'w').write(str(signal.getsignal(signal.SIGINT)))"
    with checkout("v1", repo.path, build=f'{sys.executable} -c "{code}"'):
        pass
    assert seen.read_text() not in ("Handlers.SIG_IGN", "1")


def test_a_checkout_has_its_submodules(repo: Repo, tmp_path: Path) -> None:
    add_submodule(repo, tmp_path)
    with checkout("HEAD", repo.path) as revision:
        assert (revision.root / "sub" / "lib.txt").read_text() == "lib"
    assert nothing_left(repo)


def test_a_submodule_out_of_reach_is_named(repo: Repo, tmp_path: Path) -> None:
    library = add_submodule(repo, tmp_path)
    shutil.rmtree(library)
    with pytest.raises(RevisionError, match="git submodule update failed in the checkout of HEAD"):
        with checkout("HEAD", repo.path):
            pass
    assert nothing_left(repo)


def test_a_temporary_directory_inside_the_repository_is_refused(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = repo.path / "tmp"
    inside.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(inside))
    with pytest.raises(RevisionError, match="set TMPDIR to a folder outside it"):
        with checkout("HEAD", repo.path):
            pass
    assert os.listdir(inside) == []


# --- helpers ---------------------------------------------------------------------------------


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """Whether the process ``pid`` ended (a zombie its new parent has yet to reap counts)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def test_a_checkout_of_a_killed_run_is_removed_by_the_next(repo: Repo, tmp_path: Path) -> None:
    """SIGKILL leaves its checkout (nothing of ours runs then): the next run removes the
    folders whose owner process is gone, and their records in the repository; a live run's
    folder, another host's, and one without an owner file stay."""
    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from pytest_gpubench.versus.revision import checkout\n"
        "with checkout('HEAD', Path(sys.argv[1])) as r:\n"
        "    print(r.root, flush=True)\n"
        "    time.sleep(60)\n"
    )
    env = {**os.environ, "TMPDIR": tempfile.gettempdir()}
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(repo.path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None
    left = Path(child.stdout.readline().strip())
    assert left.is_dir()
    temp = Path(tempfile.gettempdir())
    others = {
        "live": f"{identity()} {os.getpid()}\n",  # this process: alive
        "elsewhere": "another-host 1\n",
        # the same host name on another machine or boot (a shared TMPDIR): its pid means
        # nothing here
        "namesake": f"{identity().split('-')[0]}-0123456789ab {child.pid}\n",
        "unowned": None,
    }
    for name, owner in others.items():
        (temp / f"gpubench-ref-{name}").mkdir()
        if owner is not None:
            (temp / f"gpubench-ref-{name}" / "owner").write_text(owner)
    child.kill()
    child.wait()
    child.stdout.close()
    assert left.is_dir() and str(left) in git(repo.path, "worktree", "list")

    with checkout("HEAD", repo.path) as revision:
        assert revision.root != left
    assert not left.parent.exists()
    assert str(left) not in git(repo.path, "worktree", "list")
    assert sorted(p.name for p in temp.iterdir()) == [f"gpubench-ref-{n}" for n in sorted(others)]
