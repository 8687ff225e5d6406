#!/usr/bin/env bash
# GPU checks behind issues 8 and 9, in phases (one device call can run several):
#   bash bench/gpu_checks.sh setup             install; GPU unit tests; user suite plain
#   bash bench/gpu_checks.sh history K [I]     rebuild the baselines of both suites (or suite
#                                              I: 0 example, 1 user) from K sessions each
#   bash bench/gpu_checks.sh aa SECONDS        A/A sessions of both suites, alternating, for
#                                              SECONDS (needs a history)
#   bash bench/gpu_checks.sh detect N          N sessions with the copy kernels 5% slower, N
#                                              10% slower (more blocks, same block shape)
#   bash bench/gpu_checks.sh config            a Triton block size change between save and check
#   bash bench/gpu_checks.sh xdist R           R runs each of -n 4 and -n 0 (example suite)
#   bash bench/gpu_checks.sh multi R           R runs each of -n 2 and -n 0 on all visible GPUs
# Reports go to $LOGS (default /tmp/gpubench-checks); summaries to $OUT (or ./device-out),
# made by bench/sessions_summary.py. Baselines live in $BASELINES/<suite> (default
# /tmp/gpubench-baselines), outside the checkout, so consecutive calls on one machine share
# them; each phase copies them to $OUT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-checks}
baselines=${BASELINES:-/tmp/gpubench-baselines}
mkdir -p "$out" "$logs" "$baselines/example" "$baselines/user"
export PYTHONUNBUFFERED=1
suites=("$root/example_suite" "$root/bench/user_suite")
names=(example user)
pt() { python3 -m pytest -q -p no:cacheprovider "$@"; }
# Time a suite against its baselines: bt SUITE_INDEX ARGS...
bt() { local i=$1; shift; (cd "${suites[$i]}" && pt --gpubench-dir "$baselines/${names[$i]}" "$@"); }
keep() { for name in "${names[@]}"; do cp "$baselines/$name"/*.json "$out/$name-baseline.json" 2>/dev/null; done; }

phase=${1:-setup}
case "$phase" in
install)
  python3 -m pip install --no-build-isolation --no-deps -e "$root" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
  ;;
setup)
  python3 -m pip install --no-build-isolation --no-deps -e "$root" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
  (cd "$root" && pt tests -m gpu) > "$logs/gpu_tests.txt" 2>&1; tail -n 1 "$logs/gpu_tests.txt"
  (cd "${suites[1]}" && pt) > "$logs/user_plain.txt" 2>&1; echo "user suite without --gpubench: $(tail -n 1 "$logs/user_plain.txt")"
  ;;
history)
  k=${2:-5}
  for i in ${3:-0 1}; do
    rm -f "$baselines/${names[$i]}"/*.json; SECONDS=0
    bt "$i" --gpubench-save --gpubench-sessions "$k" > "$logs/${names[$i]}_history.txt" 2>&1
    echo "${names[$i]} suite: $k sessions in $SECONDS s: $(grep -E 'session [0-9]/|passed|failed' "$logs/${names[$i]}_history.txt" | tr '\n' ' ')"
  done
  keep
  ;;
aa)
  budget=${2:-300}; start=$(date +%s); n=$(ls "$logs"/aa-user-*.json 2>/dev/null | wc -l)
  while [ $(( $(date +%s) - start )) -lt "$budget" ]; do
    n=$((n + 1))
    for i in 0 1; do
      bt "$i" --gpubench --gpubench-json "$logs/aa-${names[$i]}-$n.json" > "$logs/aa-${names[$i]}-$n.txt" 2>&1
    done
    echo "A/A $n: example $(tail -n 1 "$logs/aa-example-$n.txt") | user $(tail -n 1 "$logs/aa-user-$n.txt")"
  done
  for name in "${names[@]}"; do
    python3 "$root/bench/sessions_summary.py" --json "$out/aa-$name.json" "$logs"/aa-"$name"-*.json > "$out/aa-$name.md"
    echo "--- A/A $name"; head -n 1 "$out/aa-$name.md"
  done
  ;;
detect)
  n=${2:-10}
  for slow in 0.05 0.10; do
    for i in $(seq "$n"); do
      GPUBENCH_USER_SLOWDOWN=$slow bt 1 -k copy_blocks --gpubench --gpubench-json "$logs/detect-$slow-$i.json" > "$logs/detect-$slow-$i.txt" 2>&1
      echo "slower by $slow, session $i: $(tail -n 1 "$logs/detect-$slow-$i.txt")"
    done
    python3 "$root/bench/sessions_summary.py" --json "$out/detect-$slow.json" "$logs"/detect-"$slow"-*.json > "$out/detect-$slow.md"
  done
  ;;
config)
  # Save with 1024 elements per program, check with 128: the same kernel, another grid.
  # Its own baseline directory: the user suite's history stays as it is.
  (cd "${suites[1]}" && pt --gpubench-dir "$baselines/config" -k block_size_config --gpubench-save --gpubench-sessions 3 > "$logs/config_save.txt" 2>&1
   GPUBENCH_USER_BLOCK=128 pt --gpubench-dir "$baselines/config" -k block_size_config --gpubench > "$logs/config_check.txt" 2>&1)
  grep -E "regressed|kernels:|ok|passed|failed" "$logs/config_check.txt" | head -n 12 | tee "$out/config.txt"
  ;;
xdist|multi)
  r=${2:-3}; workers=4; [ "$phase" = multi ] && workers=2
  for i in $(seq "$r"); do
    for n in "$workers" 0; do
      SECONDS=0; bt 0 -n "$n" --gpubench --gpubench-json "$logs/$phase-n$n-$i.json" > "$logs/$phase-n$n-$i.txt" 2>&1
      echo "-n $n run $i: $SECONDS s, $(tail -n 1 "$logs/$phase-n$n-$i.txt")"
    done
  done
  python3 - "$logs" "$phase" "$workers" "$r" <<'EOF' | tee "$out/$phase.txt"
import json, sys
from pathlib import Path
logs, phase, workers, runs = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
def verdicts(n, i):
    data = json.loads((logs / f"{phase}-n{n}-{i}.json").read_text())
    return {r["test"]: (r["status"], r.get("gpu")) for r in data["results"]}
for i in range(1, runs + 1):
    a, b = verdicts(workers, i), verdicts(0, i)
    differ = sorted(t for t in a if a[t][0] != b.get(t, (None,))[0])
    gpus = sorted({g for _, g in a.values() if g})
    print(f"run {i}: -n {workers} vs -n 0: {len(a)} results, verdicts differ on {len(differ)} {differ[:5]}; GPUs used by -n {workers}: {gpus}")
EOF
  ;;
esac
(cd "$logs" && tar czf "$out/logs.tgz" --exclude='*.tgz' . 2>/dev/null)
