#!/usr/bin/env bash
# All GPU checks of issues 8 and 9 on a machine with two GPUs (device kind nvidia-h200-x2),
# both GPUs busy at once: the example suite on GPU 0, the user suite on GPU 1, and the
# xdist checks between them. It outlasts one device call, so it runs detached:
#   bash bench/device_plan.sh start [SECONDS] [PLAN]  install, then run PLAN in the
#                                              background (setsid), ending its loops after
#                                              SECONDS (default 1300); returns at once. PLAN:
#                                              all (default) or followup: what the campaign of
#                                              2026-11-22 left open (-n 2 on two GPUs with each
#                                              step's seconds; the 34 us copy 5% slower in
#                                              time: 6.5% more work, interpolated from +3.4% at
#                                              5% and +8.9% at 10%; one more 10% session; what
#                                              a confirmation's fresh processes cost); aa: a
#                                              fresh history per suite, then A/A sessions
#   bash bench/device_plan.sh poll SECONDS     wait up to SECONDS for the plan to end, print
#                                              its progress, copy what it has to $OUT
# Each step is a phase of bench/gpu_checks.sh; its printed lines are the progress.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
stage=/tmp/gpubench-stage
checks="$root/bench/gpu_checks.sh"
export LOGS=/tmp/gpubench-checks BASELINES=/tmp/gpubench-baselines
finish() { bash "$checks" pack; date -u; touch "$stage/done"; }  # what poll waits for

case "${1:-}" in
start)
  mkdir -p "$stage" && bash "$checks" install || exit 1
  STOP_AT=$(( $(date +%s) + ${2:-1300} )) setsid nohup bash "$0" "${3:-all}" > "$stage/plan.log" 2>&1 < /dev/null &
  echo "plan started"
  ;;
followup)
  export OUT=$stage
  date -u
  (export CUDA_VISIBLE_DEVICES=0; bash "$checks" setup; bash "$checks" history 5 0) &
  (export CUDA_VISIBLE_DEVICES=1; bash "$checks" history 5 1) &
  wait
  bash "$checks" multi 2
  (export CUDA_VISIBLE_DEVICES=0; bash "$checks" xdist 1; bash "$checks" childcost) &
  (export CUDA_VISIBLE_DEVICES=1; bash "$checks" detect 10 0.065 "copy_blocks and 16777216"
   bash "$checks" detect 1 0.10) &
  wait
  finish
  ;;
aa)
  # A fresh history per suite, then A/A sessions against it until SECONDS run out: false
  # alarms, and what confirming them in fresh processes started together does to them.
  export OUT=$stage
  date -u
  (export CUDA_VISIBLE_DEVICES=0; bash "$checks" history 5 0; bash "$checks" aa 100000 0 20) &
  (export CUDA_VISIBLE_DEVICES=1; bash "$checks" history 5 1; bash "$checks" aa 100000 1 20) &
  wait
  finish
  ;;
all)
  export OUT=$stage
  date -u
  # A: facts and unit tests, each suite against its committed baselines (another machine of
  # the same model), then a fresh 5-session history per suite (GPU 1 also shows a config
  # change, then starts the user suite's A/A sessions).
  (export CUDA_VISIBLE_DEVICES=0; bash "$checks" setup; bash "$checks" cross 0; bash "$checks" history 5 0) &
  (export CUDA_VISIBLE_DEVICES=1; bash "$checks" cross 1; bash "$checks" config; bash "$checks" history 5 1
   bash "$checks" aa 120 1 20) &
  wait
  # B: both GPUs: -n 2 against -n 0.
  bash "$checks" multi 2
  # C: GPU 0: -n 4 against -n 0 on one GPU, then the example suite's A/A sessions, then a
  # third work increase on the 34 us copy; GPU 1: the user suite's A/A sessions, then the
  # controlled slowdowns.
  (export CUDA_VISIBLE_DEVICES=0; bash "$checks" xdist 3; bash "$checks" aa 100000 0 20
   bash "$checks" detect 10 0.075 "copy_blocks and 16777216") &
  (export CUDA_VISIBLE_DEVICES=1; bash "$checks" aa 100000 1 20; bash "$checks" detect 10) &
  wait
  finish
  ;;
poll)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -e "$stage/done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
  mkdir -p "$OUT"
  (cd "$stage" && tar czf "$OUT/results.tgz" --exclude=logs.tgz --exclude=done . && cp plan.log "$OUT/" && { [ ! -e logs.tgz ] || cp logs.tgz "$OUT/"; })
  [ -e "$stage/done" ] && echo "plan done" || echo "plan still running"
  cat "$stage/plan.log"
  ;;
*)
  echo "usage: bash bench/device_plan.sh start [SECONDS] [all|followup|aa] | poll SECONDS" >&2; exit 2
  ;;
esac
