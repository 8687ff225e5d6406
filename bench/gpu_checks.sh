#!/usr/bin/env bash
# GPU checks behind issues 8 and 9, in phases (one device call can run several; bench/
# device_plan.sh runs them all on two GPUs at once). Suites: 0 example, 1 user.
#   bash bench/gpu_checks.sh install           install the project
#   bash bench/gpu_checks.sh setup             GPU facts; GPU unit tests; user suite plain
#   bash bench/gpu_checks.sh cross I           suite I against its committed baselines (taken
#                                              on another machine of the same GPU model)
#   bash bench/gpu_checks.sh history K [I]     rebuild the baselines of both suites (or suite
#                                              I) from K sessions each
#   bash bench/gpu_checks.sh aa SECONDS [I] [MAX]  A/A sessions of both suites (or suite I),
#                                              for SECONDS or MAX sessions each (needs a history)
#   bash bench/gpu_checks.sh detect N [LEVELS] [FILTER]  N more sessions of the user suite's
#                                              copy kernels per level of extra work (default
#                                              "0.05 0.10": more blocks, same block shape)
#   bash bench/gpu_checks.sh config            a Triton block size change between save and check
#   bash bench/gpu_checks.sh xdist R           R runs each of -n 4 and -n 0 (example suite)
#   bash bench/gpu_checks.sh multi R           R runs each of -n 2 and -n 0 on all visible GPUs
#                                              ($XDIST_ARGS: more options of the -n W runs,
#                                              e.g. "--dist loadfile")
#   bash bench/gpu_checks.sh childcost         where a confirmation's fresh process spends its
#                                              time (bench/child_cost.py, example suite)
#   bash bench/gpu_checks.sh pack              logs into $OUT/logs.tgz
# Reports go to $LOGS (default /tmp/gpubench-checks); summaries to $OUT (or ./device-out),
# made by bench/sessions_summary.py. Baselines live in $BASELINES/<suite> (default
# /tmp/gpubench-baselines), outside the checkout, so consecutive calls on one machine share
# them; each phase that writes them copies them to $OUT. $STOP_AT (epoch seconds), when set,
# ends the loops of aa and detect there.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-checks}
baselines=${BASELINES:-/tmp/gpubench-baselines}
stop_at=${STOP_AT:-9999999999}
mkdir -p "$out" "$logs" "$baselines/example" "$baselines/user"
export PYTHONUNBUFFERED=1 PYTHONPATH="$root/bench${PYTHONPATH:+:$PYTHONPATH}"
suites=("$root/example_suite" "$root/bench/user_suite")
names=(example user)
pt() { python3 -m pytest -q -p no:cacheprovider -p phase_clock "$@"; }
# Time a suite against its baselines: bt SUITE_INDEX ARGS...
bt() { local i=$1; shift; (cd "${suites[$i]}" && pt --gpubench-dir="$baselines/${names[$i]}" "$@"); }
keep() { for i in "$@"; do cp "$baselines/${names[$i]}"/*.json "$out/${names[$i]}-baseline.json" 2>/dev/null; done; }
summarize() { # summarize NAME REPORT...: a table of many sessions into $OUT/NAME.md
  local name=$1; shift
  python3 "$root/bench/sessions_summary.py" --json "$out/$name.json" "$@" > "$out/$name.md"
  echo "--- $name: $(head -n 1 "$out/$name.md")"
}
in_time() { [ "$(date +%s)" -lt "$stop_at" ]; }
gpu() { echo "GPU ${CUDA_VISIBLE_DEVICES:-all}"; }

phase=${1:-setup}
case "$phase" in
install)
  python3 -m pip install --no-build-isolation --no-deps -e "$root" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
  ;;
setup)
  nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.txt"
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/gpu.txt"
  (cd "$root" && pt tests -m gpu) > "$logs/gpu_tests.txt" 2>&1; echo "GPU unit tests: $(tail -n 1 "$logs/gpu_tests.txt")"
  (cd "${suites[1]}" && pt) > "$logs/user_plain.txt" 2>&1; echo "user suite without --gpubench: $(tail -n 1 "$logs/user_plain.txt")"
  ;;
cross)
  i=${2:-0}
  (cd "${suites[$i]}" && pt --gpubench --gpubench-json="$logs/cross-${names[$i]}.json") > "$logs/cross-${names[$i]}.txt" 2>&1
  summarize "cross-${names[$i]}" "$logs/cross-${names[$i]}.json"
  ;;
history)
  k=${2:-5}
  for i in ${3:-0 1}; do
    rm -f "$baselines/${names[$i]}"/*.json; SECONDS=0
    bt "$i" --gpubench-save --gpubench-sessions "$k" > "$logs/${names[$i]}_history.txt" 2>&1
    echo "$(gpu): ${names[$i]} suite: $k sessions in $SECONDS s: $(grep -E 'passed|failed' "$logs/${names[$i]}_history.txt" | tail -n 1)"
    keep "$i"
  done
  ;;
aa)
  budget=${2:-300}; start=$(date +%s); max=${4:-1000000}
  for i in ${3:-0 1}; do
    [ -e "$logs/aa-${names[$i]}-1.json" ] || rm -f "$logs"/aa-"${names[$i]}"-*.txt
  done
  while [ $(( $(date +%s) - start )) -lt "$budget" ] && in_time; do
    ran=0
    for i in ${3:-0 1}; do
      n=$(( $(ls "$logs"/aa-"${names[$i]}"-*.txt 2>/dev/null | wc -l) + 1 ))
      [ "$n" -gt "$max" ] && continue
      ran=1
      bt "$i" --gpubench --gpubench-json="$logs/aa-${names[$i]}-$n.json" > "$logs/aa-${names[$i]}-$n.txt" 2>&1
      echo "$(gpu): A/A ${names[$i]} $n: $(tail -n 1 "$logs/aa-${names[$i]}-$n.txt")"
    done
    [ "$ran" = 1 ] || break
  done
  for i in ${3:-0 1}; do
    summarize "aa-${names[$i]}" "$logs"/aa-"${names[$i]}"-*.json
  done
  ;;
detect)
  n=${2:-10}; filter=${4:-copy_blocks}
  for slow in ${3:-0.05 0.10}; do
    done_before=$(ls "$logs"/detect-"$slow"-*.txt 2>/dev/null | wc -l)  # a re-run adds sessions
    for i in $(seq $((done_before + 1)) $((done_before + n))); do
      in_time || break
      GPUBENCH_USER_SLOWDOWN=$slow bt 1 -k "$filter" --gpubench --gpubench-json="$logs/detect-$slow-$i.json" > "$logs/detect-$slow-$i.txt" 2>&1
      echo "$(gpu): $slow more work, session $i: $(tail -n 1 "$logs/detect-$slow-$i.txt")"
    done
    summarize "detect-$slow" "$logs"/detect-"$slow"-*.json
  done
  ;;
config)
  # Save with 1024 elements per program, check with 128: the same kernel, another grid.
  # Its own baseline directory: the user suite's history stays as it is.
  (cd "${suites[1]}" && pt --gpubench-dir="$baselines/config" -k block_size_config --gpubench-save --gpubench-sessions 3 > "$logs/config_save.txt" 2>&1
   GPUBENCH_USER_BLOCK=128 pt --gpubench-dir="$baselines/config" -k block_size_config --gpubench > "$logs/config_check.txt" 2>&1)
  grep -E "regressed|incomparable|kernels:|grid|passed|failed" "$logs/config_check.txt" | head -n 16 > "$out/config.txt"
  echo "$(gpu): config change: $(tail -n 1 "$logs/config_check.txt")"
  ;;
xdist|multi)
  r=${2:-3}; workers=4; [ "$phase" = multi ] && workers=2
  for i in $(seq "$r"); do
    for n in "$workers" 0; do
      SECONDS=0
      extra=(); [ "$n" = 0 ] || read -r -a extra <<< "${XDIST_ARGS:-}"
      GPUBENCH_PHASE_CLOCK="$logs/$phase-n$n-$i.clock" bt 0 -n "$n" "${extra[@]}" --gpubench --gpubench-json="$logs/$phase-n$n-$i.json" > "$logs/$phase-n$n-$i.txt" 2>&1
      echo "$(gpu): -n $n run $i: $SECONDS s, $(tail -n 1 "$logs/$phase-n$n-$i.txt")"
    done
  done
  python3 "$root/bench/xdist_compare.py" "$logs" "$phase" "$workers" "$r" | tee "$out/$phase.txt"
  ;;
childcost)
  # Caches warm first, as when a run confirms what it flagged; then children as the plugin
  # starts them (GPUBENCH_CHILD_PROFILE=1 in the environment adds profiles to childclock.tgz).
  bt 0 --gpubench > "$logs/childcost-warm.txt" 2>&1
  ids=("test_add.py::test_add_torch[4096]" "test_gelu.py::test_gelu_compiled[1048576]")
  args=(-q -p no:cacheprovider -p phase_clock --gpubench-dir="$baselines/example" --gpubench)
  (cd "${suites[0]}" && GPUBENCH_CHILD_CLOCK_DIR="$logs/childclock" \
     python3 "$root/bench/child_cost.py" . "${ids[@]}" -- "${args[@]}") > "$logs/childcost.txt" 2>&1
  grep -v '^{' "$logs/childcost.txt" | tee "$out/childcost.txt"
  (cd "$logs" && tar czf "$out/childclock.tgz" childclock)
  ;;
pack)
  (cd "$logs" && tar czf "$out/logs.tgz" --exclude='*.tgz' . 2>/dev/null)
  ;;
esac
