#!/usr/bin/env bash
# The fitted verdict at steady state on a GPU (issue 16): record a history of N sessions of a
# suite, each a fresh process, then run unchanged A/A sessions against it, each a fresh pytest
# as CI runs it (flagged tests confirmed in fresh processes). Phases, several per device call;
# the machine keeps $LOGS between calls while it is warm:
#   bash bench/steady_state.sh install history:example:20
#   bash bench/steady_state.sh aa:example:10:540 summary pack
# history:SUITE:N appends N sessions to $LOGS/SUITE-baselines (N-1 in fresh processes);
# aa:SUITE:N[:BUDGET_S] runs up to N A/A sessions, starting none after BUDGET_S seconds;
# summary prints per suite the A/A verdicts, false failures, and per duration class the gates
# and the tests not gated; pack puts logs, reports and baselines in $OUT/steady-state.tgz.
# SUITE is example (example_suite) or user (bench/user_suite: code this project did not write).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-steady}
mkdir -p "$out" "$logs"
export PYTHONUNBUFFERED=1
pt() { python3 -m pytest -p no:cacheprovider -q "$@"; }
last() { grep -E "passed|failed|error|skipped|no tests ran" "$1" | tail -n 1; }
suite_dir() { if [ "$1" = example ]; then echo "$root/example_suite"; else echo "$root/bench/user_suite"; fi; }

for phase in "$@"; do
  SECONDS=0
  IFS=: read -r name suite count budget <<< "$phase"
  case "$name" in
  install)
    python3 -m pip install --no-build-isolation --no-deps -e "$root" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
    nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
    date -u +%FT%TZ | tee -a "$logs/gpu.txt"
    ;;
  history)
    cd "$(suite_dir "$suite")" || exit 1
    pt --gpubench-save --gpubench-sessions "$count" --gpubench-dir="$logs/$suite-baselines" \
      > "$logs/$suite-history-$(date +%s).txt" 2>&1
    echo "$suite: $count sessions recorded ($SECONDS s): $(python3 - "$logs/$suite-baselines" <<'EOF'
import glob, json, sys, collections
d = json.load(open(glob.glob(sys.argv[1] + "/*.json")[0]))
def history(e):
    return e["history"] if "history" in e else next(iter(e["binaries"].values()))["history"]
n = collections.Counter(len(history(e)) for e in d["benchmarks"].values())
print("history lengths", dict(n))
EOF
)"
    cd "$root" || exit 1
    ;;
  aa)
    cd "$(suite_dir "$suite")" || exit 1
    # numbered after the sessions of earlier calls: a report is never overwritten
    done_before=$(find "$logs" -maxdepth 1 -name "$suite-aa-*.txt" | wc -l)
    for i in $(seq $((done_before + 1)) $((done_before + count))); do
      if [ -n "$budget" ] && [ "$SECONDS" -ge "$budget" ]; then echo "$suite: budget spent after $((i - 1 - done_before)) A/A sessions"; break; fi
      pt --gpubench --gpubench-dir="$logs/$suite-baselines" --gpubench-json="$logs/$suite-aa-$i.json" \
        > "$logs/$suite-aa-$i.txt" 2>&1
      echo "$suite A/A $i ($SECONDS s): $(last "$logs/$suite-aa-$i.txt")"
    done
    cd "$root" || exit 1
    ;;
  summary)
    python3 - "$logs" <<'EOF'
import collections, glob, json, math, sys
logs = sys.argv[1]
classes = ((0, 3), (3, 20), (20, 100), (100, math.inf))
for suite in ("example", "user"):
    reports = sorted(glob.glob(f"{logs}/{suite}-aa-*.json"), key=lambda p: int(p.rsplit("-", 1)[1][:-5]))
    if not reports:
        continue
    statuses, failing, gates, confirmed = collections.Counter(), 0, {}, 0
    for path in reports:
        results = json.load(open(path))["results"]
        statuses.update(r["status"] for r in results)
        failing += any(not r.get("passed", True) for r in results)
        confirmed += sum(len(r.get("confirmations") or []) for r in results)
        for r in results:
            j = r.get("judgement") or {}
            gates.setdefault(r["key"], []).append(
                (r["median_ms"] * 1000, j.get("gateable"), r["status"], r["timer"])
            )
    print(f"{suite}: {len(reports)} A/A sessions, {failing} with a failing test; verdicts {dict(statuses)}; {confirmed} fresh-process sessions")
    print("| time per call | tests | of them cupti-graph | gate <= 5% | gate 5-50% (noisy) | not gated |")
    print("|---|---|---|---|---|---|")
    for lo, hi in classes:
        rows = [v[-1] for v in gates.values() if lo <= v[-1][0] < hi]
        if not rows:
            continue
        kt = sum(1 for *_, t in rows if t == "cupti-graph")
        ok = sum(1 for _, g, s, _ in rows if g is not None and g <= 0.05)
        noisy = sum(1 for _, g, s, _ in rows if g is not None and g > 0.05)
        ng = sum(1 for _, g, s, _ in rows if s == "not gated")
        label = f"{lo}-{hi} us" if hi != math.inf else f">= {lo} us"
        print(f"| {label} | {len(rows)} | {kt} | {ok} | {noisy} | {ng} |")
    worst = sorted((v[-1][1] or 0, k) for k, v in gates.items() if v[-1][0] >= 20)[-4:]
    print("largest gates from 20 us:", [(k.split("::")[-1], f"{g:.1%}") for g, k in worst])
EOF
    ;;
  pack)
    tar -czf "$out/steady-state.tgz" -C "$logs" . && echo "logs: $out/steady-state.tgz"
    ;;
  *)
    echo "unknown phase $phase"; exit 2
    ;;
  esac
done
