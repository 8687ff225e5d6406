"""The GitHub Actions workflow users copy (docs/ci/gpubench.yml): valid for GitHub's schema,
least privilege per job, an environment of its own, one job at a time on the GPU, accepts
only on purpose, and a commit of the baselines that survives a main that moved. Its shell
steps are run here, as written in the file, on generated git repositories."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from support import ROOT

from pytest_gpubench.core.baseline import BaselineEntry, Update
from pytest_gpubench.core.records import SessionInfo, SessionRecord
from pytest_gpubench.store.baseline import load, save

WORKFLOW = ROOT / "docs" / "ci" / "gpubench.yml"
# The shell GitHub runs a step's `run` with (jobs.<id>.defaults.run.shell: bash).
BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]


def workflow(path: Path = WORKFLOW) -> dict[str, Any]:
    data = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def step(job: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in job["steps"] if s.get("name", "").startswith(name))


def gpu_jobs(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The jobs that run on the GPU runner: the ones that run the project's code."""
    return {k: j for k, j in data["jobs"].items() if "self-hosted" in j["runs-on"]}


# --- GitHub's schema ------------------------------------------------------------------------


def check_jsonschema(path: Path) -> subprocess.CompletedProcess[str]:
    # The schema is vendored in check-jsonschema: no network.
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema"]
        + ["--builtin-schema", "vendor.github-workflows", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_workflow_is_valid_for_githubs_schema() -> None:
    result = check_jsonschema(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "old, new",
    [
        ("    runs-on: [self-hosted, linux, gpu]", "    runs_on: [self-hosted, linux, gpu]"),
        ("      queue: max", "      queue: all"),
        ("      contents: read", "      contents: readonly"),
    ],
    ids=["a key misspelt", "a value not allowed", "a permission not allowed"],
)
def test_the_schema_check_refuses_a_broken_workflow(tmp_path: Path, old: str, new: str) -> None:
    """The check can fail: a key or value GitHub does not know is refused."""
    text = WORKFLOW.read_text(encoding="utf-8")
    assert old in text
    broken = tmp_path / "gpubench.yml"
    broken.write_text(text.replace(old, new, 1), encoding="utf-8")
    result = check_jsonschema(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Schema validation errors" in result.stdout + result.stderr


# --- least privilege --------------------------------------------------------------------------


def test_no_permission_is_granted_to_the_whole_workflow() -> None:
    assert workflow()["permissions"] == {}


def test_each_job_asks_for_its_own_permissions_and_only_main_may_push() -> None:
    jobs = workflow()["jobs"]
    assert all("permissions" in job for job in jobs.values())
    writers = {name for name, job in jobs.items() if "write" in (job["permissions"] or {}).values()}
    assert writers == {"comment", "history"}
    assert jobs["gate"]["permissions"] == {"contents": "read"}
    assert jobs["history"]["permissions"] == {"contents": "write"}
    # The comment's token never meets the pull request's code: no checkout, no GPU runner.
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert jobs["comment"]["runs-on"] == "ubuntu-latest"
    assert all("checkout" not in s.get("uses", "") for s in jobs["comment"]["steps"])


def test_the_pull_requests_code_runs_without_the_token_in_its_checkout() -> None:
    checkout = workflow()["jobs"]["gate"]["steps"][0]
    assert checkout["uses"].startswith("actions/checkout@")
    assert checkout["with"]["persist-credentials"] is False


def test_the_history_job_runs_on_main_only() -> None:
    """A manual run on another branch neither saves nor pushes there."""
    history = workflow()["jobs"]["history"]
    assert "github.ref == 'refs/heads/main'" in history["if"]
    assert "github.event_name != 'pull_request'" in history["if"]
    commit = step(history, "Commit the baselines")["run"]
    assert "git push origin HEAD:main" in commit
    assert "GITHUB_REF_NAME" not in commit


# --- an environment of its own ----------------------------------------------------------------


def test_every_gpu_job_installs_into_a_fresh_virtual_environment() -> None:
    """Never into the runner's Python: PEP 668 refuses it on Debian 12 and Ubuntu 24.04,
    and a self-hosted runner keeps it between jobs."""
    for name, job in gpu_jobs(workflow()).items():
        install = step(job, "Install")["run"]
        assert 'python3 -m venv --clear --system-site-packages "$RUNNER_TEMP/venv"' in install
        assert 'echo "$RUNNER_TEMP/venv/bin" >> "$GITHUB_PATH"' in install
        for line in install.splitlines():
            if "pip install" in line:
                assert line.strip().startswith('"$RUNNER_TEMP/venv/bin/python" -m pip'), name
        pips = [s for s in job["steps"] if "pip install" in s.get("run", "")]
        assert pips == [step(job, "Install")], name


# --- one job at a time on the GPU -------------------------------------------------------------


def test_the_gpu_jobs_share_one_concurrency_group_that_cancels_and_drops_nothing() -> None:
    """Keyed by the runner's label, not by the ref: a pull request's gate and main's save
    never time on one GPU at once; a running session is never cancelled, and a waiting
    one never replaced."""
    data = workflow()
    assert "concurrency" not in data  # a workflow-level group would be per run, not per GPU
    groups = set()
    for name, job in gpu_jobs(data).items():
        concurrency = job["concurrency"]
        assert concurrency["cancel-in-progress"] is False, name
        assert concurrency["queue"] == "max", name
        assert "${{" not in concurrency["group"], name  # the same group whatever the ref
        groups.add(concurrency["group"])
    assert groups == {"gpubench-gpu"}
    assert set(gpu_jobs(data)) == {"gate", "history"}


# --- a regression on main is visible, and accepted only on purpose ----------------------------


def test_a_regression_on_main_fails_the_history_job() -> None:
    """Nothing in the history job masks the save's exit status."""
    history = workflow()["jobs"]["history"]
    assert "continue-on-error" not in history
    assert all("continue-on-error" not in s for s in history["steps"])
    save_step = step(history, "Add this session")["run"]
    assert save_step.startswith("python -m pytest --gpubench-save ")
    assert "||" not in save_step and "set +e" not in save_step
    assert "head_commit" not in WORKFLOW.read_text(encoding="utf-8")


def git(cwd: Path, *args: str, check: bool = True) -> str:
    identity = ["-c", "user.name=dev", "-c", "user.email=dev@example.com"]
    result = subprocess.run(
        ["git", *identity, *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    if check and result.returncode:
        raise AssertionError(f"git {' '.join(args)}: {result.stdout}{result.stderr}")
    return result.stdout.strip()


def git_environment(tmp_path: Path) -> dict[str, str]:
    """Git that reads no user or system configuration (the step sets its own identity), and
    our package on PYTHONPATH for the `python` the workflow calls."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]]),
    )
    return env


def run_step(
    script: str, cwd: Path, env: dict[str, str], **extra: str
) -> subprocess.CompletedProcess[str]:
    """A step's `run` as GitHub runs it: in bash -eo pipefail, with its env."""
    return subprocess.run(
        [*BASH, "-c", script],
        cwd=cwd,
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    environment = git_environment(tmp_path)
    for key in ("HOME", "GIT_CONFIG_NOSYSTEM"):
        monkeypatch.setenv(key, environment[key])  # our own git calls too
    return environment


def decides(tmp_path: Path, env: dict[str, str], message: str, accept_input: str) -> str:
    """What the history job's decision step writes to GITHUB_ENV for a commit with this
    message and this manual input ('' on a push)."""
    repo = tmp_path / "decide"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    github_env = tmp_path / "github_env"
    github_env.write_text("", encoding="utf-8")
    decide = step(workflow()["jobs"]["history"], "Decide whether this run accepts")
    assert decide["env"] == {"ACCEPT_INPUT": "${{ inputs.accept }}"}
    result = run_step(
        decide["run"], repo, env, ACCEPT_INPUT=accept_input, GITHUB_ENV=str(github_env)
    )
    assert result.returncode == 0, result.stderr
    return github_env.read_text(encoding="utf-8")


ACCEPTS = "GPUBENCH_ACCEPT=--gpubench-accept\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "message, accept_input, expected",
    [
        ("Faster softmax (#12)", "", ""),
        ("Faster softmax (#12)", "false", ""),
        ("Faster softmax (#12)", "true", ACCEPTS),  # a manual run with "accept"
        ("Slower but exact softmax [gpubench accept] (#12)", "", ACCEPTS),
        # a squash merge's body lists the squashed commits' messages: not on purpose
        ("Faster softmax (#12)\n\n* docs: how [gpubench accept] works", "", ""),
    ],
    ids=["a push", "a manual run", "a manual run that accepts", "the title", "the body"],
)
def test_the_history_job_accepts_only_on_purpose(
    tmp_path: Path, env: dict[str, str], message: str, accept_input: str, expected: str
) -> None:
    assert decides(tmp_path, env, message, accept_input) == expected
    save_step = step(workflow()["jobs"]["history"], "Add this session")["run"]
    assert "$GPUBENCH_ACCEPT" in save_step


# --- the commit of the baselines, on a main that moved ----------------------------------------

KEY = "t.py::test_a"
DEVICE = {"name": "Fake"}


def saved(directory: Path, session: str, key: str = KEY, new_epoch: bool = False) -> None:
    """Save one session of ``key`` to the baseline in ``directory/.gpubench``."""
    path = directory / ".gpubench" / "cpu-fake.json"
    latest = BaselineEntry(timer="wall", epoch="", anchor=(), history=(), samples_ms=(1.0, 1.0))
    update = Update(key, (SessionRecord(session, 1.0, 20, 0.001, 1),), new_epoch, latest)
    info = {session: SessionInfo("2026-11-27T00:00:00+00:00", commit=session)}
    assert save(load(path), DEVICE, info, [update])


def sessions_of(directory: Path, key: str = KEY) -> list[str]:
    entry = load(directory / ".gpubench" / "cpu-fake.json").entries[key]
    return [r.session for r in entry.history]


@pytest.fixture
def main_repo(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path, Path]:
    """A bare origin whose main has a baseline of one session, and two clones of it: the
    job's checkout and another machine's."""
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    git(tmp_path, "clone", "-q", str(origin), str(seed))
    saved(seed, "s00")
    git(seed, "add", ".gpubench")
    git(seed, "commit", "-q", "-m", "baselines")
    git(seed, "push", "-q", "origin", "HEAD:main")
    job, other = tmp_path / "job", tmp_path / "other"
    for clone in (job, other):
        git(tmp_path, "clone", "-q", str(origin), str(clone))
    return origin, job, other


def commit_step(
    job: Path, env: dict[str, str], accept: str = ""
) -> subprocess.CompletedProcess[str]:
    history = workflow()["jobs"]["history"]
    commit = step(history, "Commit the baselines")
    assert commit["if"] == "${{ !cancelled() }}"  # after a failed save too
    sha = git(job, "rev-parse", "HEAD")
    script = commit["run"].replace("sleep ", "true ")  # retries without waiting
    return run_step(
        script, job, env, GITHUB_SHA=sha, GITHUB_REF_NAME="main", GPUBENCH_ACCEPT=accept
    )


def origin_main(tmp_path: Path, origin: Path) -> Path:
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(origin), str(check))
    return check


@pytest.mark.slow
@pytest.mark.parametrize("accept", ["", "--gpubench-accept"])
def test_the_commit_step_pushes_the_session_and_says_when_it_accepted(
    tmp_path: Path, env: dict[str, str], main_repo: tuple[Path, Path, Path], accept: str
) -> None:
    origin, job, _ = main_repo
    sha = git(job, "rev-parse", "HEAD")
    saved(job, "s01")
    result = commit_step(job, env, accept)
    assert result.returncode == 0, result.stdout + result.stderr
    check = origin_main(tmp_path, origin)
    assert sessions_of(check) == ["s00", "s01"]
    title = git(check, "log", "-1", "--format=%s")
    accepted = ", changes accepted" if accept else ""
    assert title == f"gpubench: baseline session of {sha[:8]}{accepted} [skip ci]"
    assert git(check, "log", "-1", "--format=%an") == "gpubench-bot"


@pytest.mark.slow
def test_the_commit_step_keeps_both_sessions_when_main_saved_one_since(
    tmp_path: Path, env: dict[str, str], main_repo: tuple[Path, Path, Path]
) -> None:
    """Another machine saved a session of the same test and pushed first: the job's commit
    is rebased onto it, the file merged by its sessions, and both are kept."""
    origin, job, other = main_repo
    saved(other, "s01")
    saved(other, "s01b", key="t.py::test_b")
    git(other, "add", ".gpubench")
    git(other, "commit", "-q", "-m", "a session of another machine")
    git(other, "push", "-q", "origin", "HEAD:main")
    saved(job, "s02")
    result = commit_step(job, env)
    assert result.returncode == 0, result.stdout + result.stderr
    check = origin_main(tmp_path, origin)
    assert sessions_of(check) == ["s00", "s01", "s02"]
    assert sessions_of(check, "t.py::test_b") == ["s01b"]
    assert git(check, "rev-list", "--merges", "HEAD") == ""  # rebased, not merged


@pytest.mark.slow
def test_the_commit_step_fails_and_keeps_the_session_when_the_files_cannot_be_merged(
    tmp_path: Path, env: dict[str, str], main_repo: tuple[Path, Path, Path]
) -> None:
    """A baseline on main that this version cannot read is never merged by guess: the step
    fails (the job is red), main is left as it was, and the session stays in the checkout
    for the artifact."""
    origin, job, other = main_repo
    path = other / ".gpubench" / "cpu-fake.json"
    path.write_text(path.read_text(encoding="utf-8").replace("gpubench/2", "gpubench/9"), "utf-8")
    git(other, "commit", "-q", "-am", "by hand")
    git(other, "push", "-q", "origin", "HEAD:main")
    saved(job, "s02")
    result = commit_step(job, env)
    assert result.returncode == 1
    assert "::error::could not merge the baselines with main's" in result.stdout
    assert sessions_of(job) == ["s00", "s02"]
    assert git(origin, "log", "-1", "--format=%s", "main") == "by hand"


# --- docs/ci.md shows what the file does ------------------------------------------------------

CI_MD = ROOT / "docs" / "ci.md"


def test_every_yaml_snippet_of_ci_md_is_a_verbatim_part_of_the_workflow() -> None:
    """A reader who copies a snippet gets what the workflow runs (its comments included)."""
    lines = WORKFLOW.read_text(encoding="utf-8").splitlines()
    snippets = re.findall(r"```yaml\n(.*?)```", CI_MD.read_text(encoding="utf-8"), re.S)
    assert len(snippets) >= 4
    for snippet in snippets:
        wanted = textwrap.dedent(snippet).splitlines()
        windows = (lines[i : i + len(wanted)] for i in range(len(lines) - len(wanted) + 1))
        assert any(textwrap.dedent("\n".join(w)).splitlines() == wanted for w in windows), snippet


def test_ci_md_shows_the_whole_commit_step_and_the_install() -> None:
    text = CI_MD.read_text(encoding="utf-8")
    jobs = workflow()["jobs"]
    for script in (
        step(jobs["history"], "Commit the baselines")["run"],  # its git config lines too
        step(jobs["history"], "Decide whether this run accepts")["run"],
        step(jobs["gate"], "Install")["run"],
    ):
        assert textwrap.indent(script, "    ").rstrip() in text
