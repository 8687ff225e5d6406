#!/usr/bin/env bash
# GPU checks of the reshaped core (issue 15): the GPU test module, then the suites as users
# run them (save several sessions in fresh processes, A/A, a slowdown confirmed in fresh
# processes), then the fresh processes' lifecycle tests on a GPU machine (the children hold
# the device lock there). Phases, several per device call:
#   bash bench/layout_checks.sh install gpu example user lifecycle
# Logs under $LOGS (default /tmp/gpubench-layout); one line per phase on stdout; `pack` puts
# the logs and reports in $OUT/layout-logs.tgz.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-layout}
mkdir -p "$out" "$logs"
export PYTHONUNBUFFERED=1
pt() { python3 -m pytest -p no:cacheprovider "$@"; }
last() { grep -E "passed|failed|error|skipped|no tests ran" "$1" | tail -n 1; }
verdicts() { # verdict counts of a JSON report
  python3 -c "import json,collections,sys; r=json.load(open(sys.argv[1]))['results']; print(dict(collections.Counter(x['status'] for x in r)), 'timers', dict(collections.Counter(x['timer'] for x in r)))" "$1"
}

for phase in "$@"; do
  SECONDS=0
  case "$phase" in
  install)
    python3 -m pip install --no-build-isolation --no-deps -e "$root" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
    nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$logs/gpu.txt"
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$logs/gpu.txt"
    ;;
  gpu)
    (cd "$root" && pt tests -m gpu -v -rA) > "$logs/gpu_tests.txt" 2>&1
    grep -E "^tests/test_gpu.py::.* (PASSED|FAILED|ERROR|SKIPPED)" "$logs/gpu_tests.txt"
    echo "gpu tests ($SECONDS s): $(last "$logs/gpu_tests.txt")"
    ;;
  example)
    dir=$logs/example-baselines; rm -rf "$dir"
    cd "$root/example_suite" || exit 1
    pt -q > "$logs/example_plain.txt" 2>&1
    echo "example suite, correctness: $(last "$logs/example_plain.txt")"
    pt -q --gpubench-save --gpubench-sessions 3 --gpubench-dir="$dir" > "$logs/example_save.txt" 2>&1
    echo "example suite, 3 sessions saved ($SECONDS s): $(last "$logs/example_save.txt"); $(grep -c 'gpubench: session' "$logs/example_save.txt") fresh sessions; $(python3 -c "import json,glob; d=json.load(open(glob.glob('$dir/*.json')[0])); print(len(d['sessions']), 'sessions in the file')")"
    pt -q --gpubench --gpubench-dir="$dir" --gpubench-json="$logs/example_aa.json" > "$logs/example_aa.txt" 2>&1
    echo "example suite, A/A: $(last "$logs/example_aa.txt"); $(verdicts "$logs/example_aa.json")"
    GPUBENCH_EXAMPLE_SLOWDOWN=gelu_triton pt -q --gpubench --gpubench-dir="$dir" --gpubench-json="$logs/example_slow.json" > "$logs/example_slow.txt" 2>&1
    echo "example suite, gelu_triton slowed: $(last "$logs/example_slow.txt"); $(verdicts "$logs/example_slow.json")"
    grep -E "^FAILED|confirming" "$logs/example_slow.txt" | head -n 8
    cd "$root" || exit 1
    ;;
  user)
    dir=$logs/user-baselines; rm -rf "$dir"
    cd "$root/bench/user_suite" || exit 1
    pt -q --gpubench-save --gpubench-sessions 2 --gpubench-dir="$dir" --gpubench-json="$logs/user_save.json" > "$logs/user_save.txt" 2>&1
    echo "user suite, 2 sessions saved ($SECONDS s): $(last "$logs/user_save.txt"); $(verdicts "$logs/user_save.json")"
    pt -q --gpubench --gpubench-dir="$dir" --gpubench-json="$logs/user_aa.json" -W error > "$logs/user_aa.txt" 2>&1
    echo "user suite, A/A under -W error: $(last "$logs/user_aa.txt"); $(verdicts "$logs/user_aa.json")"
    grep -E "timed by (cupti|wall)" "$logs/user_aa.txt" | cut -c1-150
    cd "$root" || exit 1
    ;;
  lifecycle)
    (cd "$root" && pt tests/plugin/test_lifecycle.py tests/run/test_children.py -m "slow or not slow" -rA) > "$logs/lifecycle.txt" 2>&1
    grep -E "^(PASSED|FAILED|ERROR|SKIPPED)" "$logs/lifecycle.txt" | cut -c1-150
    echo "lifecycle tests on this GPU machine ($SECONDS s): $(last "$logs/lifecycle.txt")"
    ;;
  pack)
    tar -czf "$out/layout-logs.tgz" -C "$logs" . && echo "logs: $out/layout-logs.tgz"
    ;;
  *)
    echo "unknown phase $phase"; exit 2
    ;;
  esac
done
