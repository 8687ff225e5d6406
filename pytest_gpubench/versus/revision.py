"""The base side of ``--gpubench-against REF``: a checkout of a git revision outside the
user's tree, optionally built, removed afterwards whatever ends its use.

The checkout is a linked worktree (``git worktree add --detach``): it shares the user's
objects, so it is quick and needs no network, and it leaves the user's working tree, index
and branches as they are, committed or not (the head side is the working tree). What
``git worktree add`` records in the repository goes with the checkout.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import GpubenchError
from ..run import processes
from ..run.owner import alive, identity

# git's quick calls (rev-parse, merge-base, the cleanup): longer than this, git hangs.
GIT_TIMEOUT_S = 120.0
FOLDER_PREFIX = "gpubench-ref-"
# In each checkout's folder: "<owner.identity()> <pid>" of the run that made it (a later run
# of the same machine, boot and pid namespace removes the folders of runs killed outright).
OWNER = "owner"
# The user's build command runs under a Python process that takes its process group down
# with it on SIGTERM or SIGHUP (its lifeline, run.processes.start, sends SIGTERM when we are
# killed outright, and then nobody can kill the group): SIGTERM to a shell alone would leave
# the compilers. The command keeps SIGINT (a shell's background job would not); killed by a
# signal, the runner dies by it too, so that its caller says which.
BUILD_RUNNER = """
import os, signal, subprocess, sys
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda *_: os.killpg(0, signal.SIGKILL))
# SIGINT's default, even where ours is ignored (a background job's): the command's own.
code = subprocess.call(
    sys.argv[1], shell=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)
)
if code < 0:
    if -code != signal.SIGKILL:
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""
# Variables that point git at a repository, index or work tree (set when pytest runs from a
# git hook): with them, `git -C <checkout>` would act on the user's repository and index.
LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_IMPLICIT_WORK_TREE",
)
# Hooks of the user's (post-checkout, or any a global core.hooksPath names) could write
# anywhere: the checkout's git calls run none.
NO_HOOKS = f"core.hooksPath={os.devnull}"


class RevisionError(GpubenchError):
    """A revision that cannot be resolved, checked out or built."""


class BuildFailed(RevisionError):
    """The build command ran and exited with an error: the revision does not build (one
    that ran over its time or could not start is a RevisionError)."""


@dataclass(frozen=True)
class Revision:
    """A checkout of ``ref`` (as the user named it) at ``commit``: ``root`` is its top level,
    the counterpart of ``repo``, the top level of the user's repository."""

    ref: str
    commit: str
    repo: Path
    root: Path

    def moved(self, path: Path) -> Path | None:
        """The same place in the checkout as the absolute ``path`` where it lies in the
        user's repository (as the user spelled it, or resolved); None elsewhere."""
        for candidate in (path, path.resolve()) if path.is_absolute() else ():
            if candidate.is_relative_to(self.repo):
                return self.root / candidate.relative_to(self.repo)
        return None

    def counterpart(self, path: Path) -> Path:
        """The same place in the checkout as ``path`` in the user's repository."""
        there = self.moved(path.absolute())
        if there is not None:
            return there
        raise RevisionError(
            f"--gpubench-against: {path} is outside the repository at {self.repo}; "
            "run pytest on paths inside the repository whose history to compare with"
        )


def code_paths(rev: Revision, folder: Path, plugin: Path, roots: Iterable[Path]) -> list[str]:
    """The PYTHONPATH of a process that runs the revision's code: the checkout's top level
    (and its ``src``), the checkout's places of ``roots`` (:func:`import_roots`), then this
    process's PYTHONPATH, moved where it lies in the repository. ``plugin``: the running
    pytest_gpubench package, first (through a link in ``folder``) where it lives in the
    repository, so that the revision's copy of it is not."""
    paths: list[str] = []
    if plugin.resolve().is_relative_to(rev.repo):
        entry = folder / "plugin"
        entry.mkdir(parents=True, exist_ok=True)
        link = entry / plugin.name
        if not link.exists():
            link.symlink_to(plugin.resolve(), target_is_directory=True)
        paths.append(str(entry))
    paths.append(str(rev.root))
    if (rev.root / "src").is_dir():
        paths.append(str(rev.root / "src"))
    for root in roots:
        there = rev.moved(root)
        if there is not None and there.is_dir():
            paths.append(str(there))
    for text in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if text:
            paths.append(str(rev.moved(Path(text)) or text))
    return list(dict.fromkeys(paths))


def import_roots() -> list[Path]:
    """The folders this process finds code in: its path, and those holding the top-level
    modules it loaded (an editable install's import hook maps a package to its folder
    without putting the folder on the path)."""
    roots = [Path(p) for p in sys.path if p]
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if "." in name or not isinstance(file, str):
            continue
        path = Path(file)
        roots.append(path.parent.parent if path.stem == "__init__" else path.parent)
    return list(dict.fromkeys(roots))


def resolve(ref: str, cwd: Path) -> tuple[Path, str]:
    """The top level of the repository ``cwd`` is in, and the full sha of the commit ``ref``
    names there."""
    top = git(cwd, ["rev-parse", "--show-toplevel"])
    if top.returncode != 0:
        if "not a git repository" in top.stderr.lower():
            raise RevisionError(
                f"--gpubench-against: {cwd} is not in a git repository; "
                "run pytest inside the repository whose history to compare with"
            )
        raise RevisionError(
            f"--gpubench-against: git cannot use the repository at {cwd} "
            f"(git: {last_line(top.stderr)}); fix what git names, then run again"
        )
    repo = Path(top.stdout.strip()).resolve()
    found = commit_of(ref, cwd)
    if not found:
        raise RevisionError(
            f"--gpubench-against {ref!r}: not a revision of the repository at {repo} "
            "(git: unknown revision); name a branch, tag or commit"
        )
    return repo, found


@contextlib.contextmanager
def checkout(
    ref: str,
    cwd: Path,
    *,
    build: str | None = None,
    log: Path | None = None,
    timeout_s: float = 3600.0,
) -> Iterator[Revision]:
    """A checkout of ``ref`` (with its submodules) in a new temporary folder, built by the
    shell command ``build`` (run in its top level, its output to a file in the folder, moved
    to ``log`` once the build ended), each step within ``timeout_s``. On exit, whatever the
    cause (Ctrl-C included), the checkout, its record in the repository and the folder are
    removed; a ``log`` of the caller's stays."""
    repo, commit = resolve(ref, cwd)
    folder = _new_folder(repo)
    tree = folder / "tree"
    try:
        revision = Revision(ref, commit, repo, tree)
        args = ["worktree", "add", "--detach", str(tree), commit]
        added = git(repo, args, NO_HOOKS, timeout_s=timeout_s)
        if added.returncode != 0:
            raise RevisionError(
                f"--gpubench-against {ref!r}: git worktree add failed in {repo} "
                f"(git: {last_line(added.stderr)}); fix what git names, then run again"
            )
        if (tree / ".gitmodules").exists():
            _submodules(revision, timeout_s)
        if build is not None:
            _build(revision, build, folder / "build.log", log, timeout_s)
        yield revision
    finally:
        _remove(repo, folder, tree)


def commit_of(ref: str, cwd: Path, who: str = "--gpubench-against") -> str:
    """The full sha of the commit ``ref`` names in ``cwd``'s repository; '' where none."""
    if ref.startswith("-") or not ref.strip():  # git would read it as an option
        return ""
    found = git(cwd, ["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], who=who)
    return found.stdout.strip() if found.returncode == 0 else ""


def _new_folder(repo: Path) -> Path:
    base = Path(tempfile.gettempdir()).resolve()
    if base.is_relative_to(repo):  # a checkout there would show up in the user's tree
        raise RevisionError(
            f"--gpubench-against: the temporary directory {base} is inside the repository "
            f"at {repo}; set TMPDIR to a folder outside it"
        )
    sweep(base, FOLDER_PREFIX, repo)
    try:
        folder = own(Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir=base)))
    except OSError as exc:
        raise RevisionError(
            f"--gpubench-against: cannot create a folder in {base} ({exc.strerror or exc}); "
            "set TMPDIR to a writable folder"
        ) from None
    return folder


def own(folder: Path) -> Path:
    """``folder``, marked as this process's: :func:`sweep` removes it once we are gone."""
    (folder / OWNER).write_text(f"{identity()} {os.getpid()}\n")
    return folder


def sweep(base: Path, prefix: str, repo: Path | None = None) -> None:
    """Remove the folders ``prefix*`` in ``base`` of runs killed outright (SIGKILL, the OOM
    killer), whose owner (:func:`own`) of this machine, boot and pid namespace is gone, and
    their checkouts' records in ``repo``. Another identity's (a shared TMPDIR, a reboot, a
    container), a live run's and one without an owner file stay. Never raises."""
    host = identity()
    gone: list[Path] = []
    for folder in base.glob(prefix + "*"):
        try:
            owner_host, pid = (folder / OWNER).read_text().split()
            if owner_host != host or alive(int(pid)):
                continue
        except (OSError, ValueError):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        gone.append(folder / "tree")
    if not gone or repo is None:
        return
    listed = _quietly(repo, ["worktree", "list", "--porcelain"])
    if listed is not None and any(f"worktree {tree}\n" in listed.stdout for tree in gone):
        _quietly(repo, ["worktree", "prune"])  # their records, in this repository


def _submodules(revision: Revision, timeout_s: float) -> None:
    # protocol.file: submodules at local paths, refused by default since git 2.38.1.
    config = (NO_HOOKS, "protocol.file.allow=always")
    args = ["submodule", "update", "--init", "--recursive"]
    done = git(revision.root, args, *config, timeout_s=timeout_s)
    if done.returncode != 0:
        raise RevisionError(
            f"--gpubench-against {revision.ref!r}: git submodule update failed in the checkout "
            f"of {_where(revision)} (git: {last_line(done.stderr or done.stdout)}); make the "
            "submodules of that revision reachable (their URLs in .gitmodules) or name another"
        )


def _build(
    revision: Revision, command: str, log: Path, kept: Path | None, timeout_s: float
) -> None:
    """Run ``command`` in the checkout, its output to ``log`` in the run's folder (a run
    killed outright leaves it there, and the next run's :func:`sweep` removes it), moved to
    ``kept`` (the caller's) once it ended."""
    try:
        args = [sys.executable, "-c", BUILD_RUNNER, command]
        code = run_group(args, revision.root, environment(), log, timeout_s)
    except OSError as exc:
        raise RevisionError(
            f"--gpubench-build {command!r}: cannot run it in {_where(revision)} "
            f"({exc.strerror or exc}); check the command, and TMPDIR ({log.parent.parent})"
        ) from None
    if kept is not None:
        try:
            shutil.move(log, kept)
            log = kept
        except OSError:  # it goes with the folder: named nowhere
            kept = None
    if code == 0:
        return
    if code is None:
        what = f"ran over {timeout_s:g} s in {_where(revision)} and was stopped"
    else:
        what = f"failed in {_where(revision)}: {processes.died(code)}"
    output = f"; its output: {log}" if kept is not None else ""  # ours goes with the folder
    failed = RevisionError if code is None else BuildFailed
    raise failed(f"--gpubench-build {command!r} {what}: {_tail(log)}{output}")


def run_group(
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    output: Path,
    timeout_s: float | None,
    grace_s: float = 0.0,
) -> int | None:
    """Run ``args`` in ``cwd`` in a process group of its own (run.processes.start), its
    output to ``output``: its exit status, None when it ran over ``timeout_s``. Whatever
    ends the wait, the group is ended then (SIGTERM first, SIGKILL after ``grace_s``), also
    once the process succeeded: a background job or compile server it left would outlive
    us, writing into a checkout we remove."""
    proc = processes.start(args, cwd, env, output)
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return None
    finally:
        processes.end(proc, grace_s)


def _remove(repo: Path, folder: Path, tree: Path) -> None:
    """Never raises: at worst, a folder stays in the temporary directory."""
    # --force twice: also a checkout left locked by a `worktree add` cut short.
    _quietly(repo, ["worktree", "remove", "--force", "--force", str(tree)])
    shutil.rmtree(folder, ignore_errors=True)
    # prune drops the records of all checkouts whose folders are gone, the user's own
    # (on a drive not mounted now) too: only when ours is still recorded.
    listed = _quietly(repo, ["worktree", "list", "--porcelain"])
    if listed is None or f"worktree {tree}\n" in listed.stdout:
        _quietly(repo, ["worktree", "prune"])


def _quietly(cwd: Path, args: Sequence[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return git(cwd, args)
    except (GpubenchError, OSError, subprocess.SubprocessError):
        return None


def git(
    cwd: Path,
    args: Sequence[str],
    *config: str,
    timeout_s: float = GIT_TIMEOUT_S,
    who: str = "--gpubench-against",
) -> subprocess.CompletedProcess[str]:
    """``git -C cwd [-c config]... args``, its output captured, without git's location
    variables; ``who`` names the caller in the error of a missing or hung git."""
    options = [item for setting in config for item in ("-c", setting)]
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *options, *args],
            env=environment(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError:
        raise RevisionError(f"{who} needs git on PATH") from None
    except subprocess.TimeoutExpired:
        raise RevisionError(
            f"{who}: git {args[0]} ran over {timeout_s:g} s in {cwd}; "
            "check that git works there, then run again"
        ) from None


def environment() -> dict[str, str]:
    """This process's environment without git's location variables (git's, a build's)."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATION_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"  # no one answers a password prompt
    return env


def _where(revision: Revision) -> str:
    return f"{revision.ref} ({revision.commit[:7]})"


# A terminal's escape sequences (a compiler's colours) and other control characters: a
# message quoting them would act on the user's terminal.
CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")


def last_line(text: str) -> str:
    """The last line of ``text`` with words, without control characters, in 300 at most."""
    lines = [line.strip() for line in CONTROL.sub("", text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def _tail(log: Path) -> str:
    try:
        with open(log, "rb") as file:
            file.seek(max(0, file.seek(0, os.SEEK_END) - 65536))
            return last_line(file.read().decode(errors="replace"))
    except OSError:
        return "no output"
