"""Issue 18's GPU checks on bench/evidence_suite, each run a fresh pytest:

    python bench/evidence_checks.py OUT [--runs 10] [--steps STEP,...]

- history: 3 sessions recorded in fresh processes (--gpubench-sessions 3) into OUT/baselines;
- aa: RUNS unchanged runs against it, energy on (--gpubench-energy): no failure, memory
  included; the matmul's energy per call against the power sampled during its window;
- temp: RUNS runs of the call that also holds a 64 MiB temporary: `more memory` each time;
- blocks: one run of the kernel launching twice the blocks against the stored history, with
  --gpubench-changed=fail (by default another binary than the history's is reported and
  passes: its time is not judged across binaries): it fails, with the per-kernel table in its
  failure and its trace in the evidence directory;
- blocks-ab: the same change made in the working tree of a git copy of the suite, judged
  against HEAD (--gpubench-against, no stored history): `regressed`;
- cached: one run of the function returning a cached output: `impossible`;
- cached-ab: that function made to cache its output in the working tree of a git copy,
  judged against HEAD: `impossible` (the floors against a revision);
- fixed-ab: the copy's HEAD caches its output and the working tree does the work: `not
  gated` (the revision's calls are the impossible ones), no regression;
- blocks-ncu, blocks-ab-ncu: blocks and blocks-ab with --gpubench-ncu: Nsight Compute's
  metrics of one call in the failure (of each side against HEAD), its report kept.

Steps (default all, in this order): history,aa,temp,blocks,blocks-ab,cached. Each run's
report is OUT/NN-STEP.json, its output .txt; the table printed last is what
``python bench/evidence_checks.py --summary OUT`` prints from them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parent / "evidence_suite"
KNOBS = {"temp": ("TEMP", "test_temporary"), "blocks": ("BLOCKS", "test_blocks")}
KNOBS["cached"] = ("CACHED", "test_cached")
KNOBS["blocks-ab"] = KNOBS["blocks-ncu"] = KNOBS["blocks-ab-ncu"] = KNOBS["blocks"]
KNOBS["cached-ab"] = KNOBS["fixed-ab"] = KNOBS["cached"]
# The A/B steps: their test, and the edit of the copy's committed tree and of its working tree.
BLOCKS_EDIT = ('factor = int(knob("BLOCKS") or 1)', "factor = 2")
CACHED_EDIT = ('if knob("CACHED") and "y" in CACHE:', 'if "y" in CACHE:')
AB_STEPS = {
    "blocks-ab": ("test_blocks", None, BLOCKS_EDIT),
    "cached-ab": ("test_cached", None, CACHED_EDIT),
    "fixed-ab": ("test_cached", CACHED_EDIT, None),
}
KNOB_VALUES = {"temp": "1", "blocks": "2", "blocks-ncu": "2", "cached": "1"}


def run(out: Path, name: str, args: list[str], env: dict[str, str], cwd: Path = SUITE) -> None:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=900,
    )
    (out / f"{name}.txt").write_text(done.stdout + done.stderr)
    seconds = time.monotonic() - started
    print(f"{name}: exit {done.returncode}, {seconds:.0f} s", flush=True)


def plan(out: Path, runs: int, steps: list[str]) -> None:
    base = [f"--gpubench-dir={out / 'baselines'}", f"--gpubench-evidence={out / 'evidence'}"]
    n = len(list(out.glob("*.txt")))
    for step in steps:
        if step == "history":
            n += 1
            run(out, f"{n:02d}-history", ["--gpubench-save", "--gpubench-sessions=3", *base], {})
            continue
        count = runs if step in ("aa", "temp") else 1
        for _ in range(count):
            n += 1
            name = f"{n:02d}-{step}"
            args = ["--gpubench", *base, f"--gpubench-json={out / (name + '.json')}"]
            env: dict[str, str] = {}
            if step.endswith("-ncu"):
                args.append("--gpubench-ncu")
            if step == "aa":
                args.append("--gpubench-energy")
            elif step.removesuffix("-ncu") in AB_STEPS:
                test, committed, working = AB_STEPS[step.removesuffix("-ncu")]
                args = [*args, "--gpubench-against=HEAD", "-k", test]
                run(out, name, args, {}, cwd=changed_copy(out, committed, working))
                continue
            else:
                knob, test = KNOBS[step]
                env[f"GPUBENCH_CHECK_{knob}"] = KNOB_VALUES[step]
                args += ["-k", test]
                if step.startswith("blocks"):
                    args.append("--gpubench-changed=fail")
            run(out, name, args, env)


def changed_copy(
    out: Path, committed: tuple[str, str] | None, working: tuple[str, str] | None
) -> Path:
    """A git repository of the suite, its test file edited by ``committed`` (old, new) in
    its commit and by ``working`` in its working tree."""
    repo = out / "ab-repo"
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(SUITE, repo, ignore=shutil.ignore_patterns("__pycache__", ".gpubench"))
    test = repo / "test_evidence.py"

    def edit(change: tuple[str, str] | None) -> None:
        if change is not None:
            text = test.read_text()
            if change[0] not in text:
                raise SystemExit(f"{test}: no {change[0]!r} to edit")
            test.write_text(text.replace(*change))

    edit(committed)
    who = ["-c", "user.name=gpubench", "-c", "user.email=gpubench@localhost"]
    for command in (["init", "-q"], ["add", "-A"], [*who, "commit", "-qm", "the suite"]):
        subprocess.run(["git", *command], cwd=repo, check=True, timeout=60)
    if committed is not None and working is None:
        test.write_text(test.read_text().replace(committed[1], committed[0]))
    edit(working)
    return repo


def summary(out: Path) -> list[str]:
    """One row per run: each test's status, and what the check looks for."""
    lines = ["| run | verdicts | failed | what the check looks for |", "|---|---|---|---|"]
    for report in sorted(out.glob("*.json")):
        document: dict[str, Any] = json.loads(report.read_text())
        results = document.get("results", [])
        step = report.stem.split("-", 1)[1]
        statuses = ", ".join(f"{r['test']} {r['status']}" for r in results)
        failed = sum(1 for r in results if not r.get("passed", True))
        text = report.with_suffix(".txt").read_text() if report.with_suffix(".txt").exists() else ""
        lines.append(f"| {report.stem} | {statuses} | {failed} | {look(step, results, text)} |")
    return lines


def look(step: str, results: list[dict[str, Any]], text: str) -> str:
    by_test = {r["test"]: r for r in results}
    if step == "aa":
        found = []
        for r in results:
            e = r.get("energy")
            if e and e.get("sampled_watts"):
                agree = e["watts"] / e["sampled_watts"]
                found.append(
                    f"{r['test']}: {e['joules_per_call'] * 1e3:.3g} mJ/call, {e['watts']:.0f} W "
                    f"counter vs {e['sampled_watts']:.0f} W {e['power_source']} ({agree:.3f})"
                )
        return "; ".join(found) or "no energy"
    r = by_test.get(KNOBS[step][1], {})
    if step == "temp":
        return f"peak {r.get('peak_bytes')} B; {r.get('reason', '')}"[:200]
    if step.startswith("blocks"):
        trace = r.get("trace")
        kept = trace is not None and Path(trace).exists()
        table = "kernel table in the failure" if "per kernel (time per call" in text else "no table"
        ncu = "; ".join(
            f"ncu {side} {len(e['kernels'])} kernels, "
            f"report {'kept' if Path(e['report']).exists() else 'gone'}"
            for side, e in (("base", r.get("reference_ncu")), ("head", r.get("ncu")))
            if e
        )
        shown = "ncu in the failure" if "evidence: Nsight Compute" in text else ""
        kept_text = f"trace {'kept' if kept else 'none'}"
        found = [kept_text, table, ncu, shown, str(r.get("reason", ""))[:120]]
        return "; ".join(x for x in found if x)[:300]
    return str(r.get("reason", ""))[:200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", default="history,aa,temp,blocks,blocks-ab,cached")
    parser.add_argument("--summary", action="store_true", help="only print the table")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summary:
        plan(args.out, args.runs, args.steps.split(","))
    print("\n".join(summary(args.out)))


if __name__ == "__main__":
    main()
