#!/usr/bin/env bash
# Does load on the host's CPUs slow a run's timing? (issue 20: under -n 2 a GPU's sampling
# took up to 32% longer per measurement than a serial run's, with the same samples; the other
# worker's compiles and first calls run outside the device lock.) The example suite, serial,
# compile caches warm, no confirmations, alone and beside BUSY processes that spin on a CPU
# each, in turn, ROUNDS times; prints each run's timing per measurement.
#   bash bench/host_load.sh [BUSY] [ROUNDS]      # logs under $OUT (or /tmp/host-load)
set -u
busy=${1:-16}
rounds=${2:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/host-load}
mkdir -p "$out"
cd "$root/example_suite" || exit 1
run() {
  python3 -m pytest -q -p no:cacheprovider --gpubench --gpubench-confirm=0 \
    --gpubench-dir="$out/baselines" --gpubench-json="$out/$1.json" > "$out/$1.txt" 2>&1
}
run warm
for r in $(seq 1 "$rounds"); do
  run "alone-$r"
  pids=()
  for _ in $(seq 1 "$busy"); do python3 -c "while True: pass" & pids+=($!); done
  run "busy-$r"
  kill "${pids[@]}" 2> /dev/null
  wait "${pids[@]}" 2> /dev/null
done
python3 - "$out" "$busy" <<'PY'
import json
import sys
from pathlib import Path

out, busy = Path(sys.argv[1]), sys.argv[2]
print(f"| run ({busy} spinning processes beside 'busy') | measurements | sampling per measurement | set-up per measurement | first calls |")
print("|---|---|---|---|---|")
for path in sorted(out.glob("*-*.json")):
    results = json.loads(path.read_text())["results"]
    costs = [r.get("costs") or {} for r in results]
    n = len(costs)
    total = {k: sum(c.get(k, 0.0) for c in costs) for k in ("sampling_s", "timer_setup_s", "first_call_s")}
    print(f"| {path.stem} | {n} | {total['sampling_s'] / n:.4f} s | {total['timer_setup_s'] / n:.4f} s | {total['first_call_s']:.2f} s |")
PY
