#!/usr/bin/env bash
# GPU checks of the verdict against a revision (issue 17): A/A runs against HEAD, controlled
# slowdowns planted in the working tree (the head side) of the user suite's copy kernels, and
# plain runs against the committed baselines (another machine's history; the cost of the
# stored gate). Runs outlast a device call, so a plan runs detached and calls poll it:
#   bash bench/ab_checks.sh start SECONDS STEP...  install, make HEAD the tree as it is (a commit
#                                              on the device's copy: A/A compares it with itself),
#                                              then run the steps in the background until
#                                              SECONDS have passed (a started run finishes)
#   bash bench/ab_checks.sh poll SECONDS       wait up to SECONDS, print progress and the
#                                              summary, copy logs to $OUT
# Steps: aa:SUITE (one run against HEAD), slow:SUITE:FRACTION:THRESHOLD (the copies' work grows
# by FRACTION in whole blocks in the working tree only, judged at THRESHOLD),
# slowtime:SUITE:TARGET:THRESHOLD (as slow, each copy's fraction sized so that its time grows
# by TARGET: bench/calibrate_slowdown.py, its ratios in NN-STEP.calibration.json; for the fla
# suite a spin after each test's call, sized by bench/fla_plant.py; sized once per plan
# for each SUITE:TARGET, later steps reuse it),
# slowplain:SUITE:TARGET:THRESHOLD (as slowtime, judged by a plain run against the suite's
# committed baselines: another machine's history, issue 45), plain:SUITE (one
# plain --gpubench run against the suite's committed baselines), fresh:SUITE (a plain run
# with no baseline: nothing to confirm; an A/B run's cost is measured against it),
# sessions:SUITE:N (N sessions,
# fresh processes, recorded into $LOGS/SUITE-baselines: the spread between sessions of times
# and of ratios to a reference), bisect:COMMITS:SLOW_AT:FRACTION (a generated repository of
# the user suite with COMMITS commits after its first, the SLOW_AT-th making the copies'
# work grow by FRACTION; gpubench bisect over them, its copy tests, with AB_ARGS's pairing
# and threshold). SUITE: example, user or
# fla (bench/fla_suite, a kernel library's Triton kernels: its wheels in the tree's .whl/,
# fetched as the device README says: fla-core==0.6.0 einops, installed by start) or resetup
# (bench/resetup_suite: tiny kernels set up again and again in one process,
# bench/resetup_spread.py).
# aa:SUITE::THRESHOLD judges the A/A run at THRESHOLD (over AB_ARGS's).
# With two GPUs (issue 20): aa:SUITE:WORKERS is the A/A run under pytest-xdist -n WORKERS;
# xdist:SUITE:WORKERS:CACHE a plain --gpubench run with -n WORKERS (0: none) against the
# sessions a sessions:SUITE:N step recorded, its test phase clocked (bench/phase_clock.py),
# CACHE warm (the user's compile caches) or cold (empty ones of its own); bench/two_gpus.py
# compares them. pyc writes bytecode caches (bytecode, below). busy:N[:SECONDS] and idle:N
# start and end a load on GPU N (neighbour, below). after:N:SECONDS waits (at most SECONDS)
# for the plan of GPU N to end (GPU=N), and for a side job that marks its end the same way
# ($logs-gpuN/stage/done).
# more:process and more:fresh set where the later lockstep runs take an unsure test's more
# pairs (GPUBENCH_LOCKSTEP_MORE: its own process, inputs placed anew, the default, or fresh
# processes); a run after more:fresh is named -fresh (before 2026-11-29e the default was
# fresh processes, and a run after more:process was named -here).
# AB_ARGS (start): options every run of the plan gets before its step's own, e.g.
# AB_ARGS="--gpubench-pairing=lockstep --gpubench-threshold=2%" (issue 44: both sides in one
# process); a run with --gpubench-pairing=lockstep is named -lockstep. AB_SELECT (start): a
# pytest -k expression every run of the plan gets (AB_ARGS splits on spaces). AB_PROFILE=1
# (start): each run under cProfile, its profile NN-STEP.prof beside its report (where a
# run's time goes outside its measurements: `python -m pstats NN-STEP.prof`).
# Each run's report is $LOGS/NN-STEP.json, its output .txt; runs.tsv lists them with seconds.
# GPU=N (start and poll) runs a plan on GPU N only, beside other plans on other GPUs of the
# host: its own logs, tree copy and bisect repository, the installed package the first plan's
# (the trees are the same).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
sfx=${GPU:+-gpu$GPU}
[ -z "${GPU:-}" ] || export CUDA_VISIBLE_DEVICES=$GPU
logs=${LOGS:-/tmp/gpubench-ab$sfx}
stage=$logs/stage
mkdir -p "$logs" "$stage"
export PYTHONUNBUFFERED=1
suite_dir() { case $1 in example) echo "$root/example_suite" ;; user) echo "$root/bench/user_suite" ;; fla) echo "$root/bench/fla_suite" ;; resetup) echo "$root/bench/resetup_suite" ;; esac; }
beside=  # "-beside-gpuN" while a busy:N load runs

run_step() {
  local step=$1 n kind suite frac thr dir args=() started rc knob=bench/user_suite/test_user.py
  IFS=: read -r kind suite frac thr <<< "$step"
  if [ "$kind" = after ]; then
    local until=$(( $(date +%s) + frac ))
    while [ ! -e "/tmp/gpubench-ab-gpu$suite/stage/done" ] && [ "$(date +%s)" -lt "$until" ]; do sleep 5; done
    echo "$(date -u +%T) after GPU $suite's plan: $([ -e "/tmp/gpubench-ab-gpu$suite/stage/done" ] && echo ended || echo "still running")"
    return
  fi
  if [ "$kind" = busy ] || [ "$kind" = idle ]; then neighbour "$kind" "$suite" "${frac:-20}"; return; fi
  if [ "$kind" = pyc ]; then bytecode; return; fi
  if [ "$kind" = more ]; then  # more:process|fresh: where later lockstep runs take more pairs
    export GPUBENCH_LOCKSTEP_MORE=$suite; echo "$(date -u +%T) more pairs from: $suite"; return
  fi
  n=$(printf %02d $(( $(cat "$logs/runs.tsv" 2>/dev/null | wc -l) + 1 )))
  dir=$(suite_dir "$suite")
  local name="$n-$kind-$suite${frac:+-$frac}${thr:+-${thr%\%}}"
  case $thr in *%) name+=pct ;; esac
  name+=$beside  # a run beside a load on another GPU says so
  [ "${GPUBENCH_LOCKSTEP_MORE:-}" = fresh ] && name+=-fresh  # more pairs from fresh processes
  case "$kind: ${AB_ARGS:-} " in aa:*" --gpubench-pairing=lockstep "* | slow:*" --gpubench-pairing=lockstep "* | slowtime:*" --gpubench-pairing=lockstep "*) name+=-lockstep ;; esac
  case $kind in
    aa)
      args=(--gpubench-against HEAD); [ -z "$frac" ] || args+=(-n "$frac")
      [ -z "$thr" ] || args+=(--gpubench-threshold "$thr") ;;  # after AB_ARGS: it wins
    xdist)
      # A plain run against the suite's recorded sessions, -n $frac, the test phase clocked;
      # cold: in compile caches of its own, empty (the workers share them, as by default).
      args=(--gpubench-dir="$logs/$suite-baselines" -n "$frac" -p phase_clock)
      export GPUBENCH_PHASE_CLOCK="$logs/$name.clock" PYTHONPATH="$root/bench"
      if [ "$thr" = cold ]; then
        export TRITON_CACHE_DIR="$logs/$name.caches/triton" TORCHINDUCTOR_CACHE_DIR="$logs/$name.caches/inductor"
      fi ;;
    slow)
      sed -i "s/knob(\"SLOWDOWN\", 0.0)/knob(\"SLOWDOWN\", $frac)/" "$root/$knob"
      args=(--gpubench-against HEAD --gpubench-threshold "$thr") ;;
    slowtime | slowplain)
      # The user suite's copies grow by fractions of blocks; the fla suite's calls are
      # followed by a spin of some cycles (a library's kernels are not ours to slow).
      local planted calibrate=calibrate_slowdown.py held='int, float' first='[0-9]'
      [ "$suite" = fla ] && { knob=bench/fla_suite/test_fla.py calibrate=fla_plant.py held='str, int' first="'"; }
      # Sized once per plan for each suite and target (two fresh processes on the fla suite,
      # about a minute): later steps plant the same, their calibration a copy of the first's.
      local sized="$stage/sized-$suite-$frac"
      if [ -s "$sized.planted" ]; then
        planted=$(cat "$sized.planted"); cp "$sized.json" "$logs/$name.calibration.json"
        cp "$sized.txt" "$logs/$name.calibration.txt"
      else
        planted=$(cd "$root" && python3 "bench/$calibrate" "$frac" --json "$logs/$name.calibration.json" 2> "$logs/$name.calibration.txt")
      fi
      echo "$(date -u +%T) $name: planted $planted"
      sed -i "s/^PLANTED: dict\[$held\] = {}/PLANTED: dict[$held] = $planted/" "$root/$knob"
      if [ -z "$planted" ] || ! grep -q "^PLANTED: dict\[$held\] = {$first" "$root/$knob"; then
        # Nothing planted: a row that says so (no report), never a run of an unplanted copy.
        (cd "$root" && git checkout -q -- "$knob")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$suite" "$frac" "$thr" 0 calibration-failed >> "$logs/runs.tsv"
        echo "$(date -u +%T) $name: calibration failed: $(tail -n 3 "$logs/$name.calibration.txt")"
        return
      fi
      [ -s "$sized.planted" ] || { echo "$planted" > "$sized.planted"; cp "$logs/$name.calibration.json" "$sized.json"; cp "$logs/$name.calibration.txt" "$sized.txt"; }
      args=(--gpubench-threshold "$thr")
      [ "$kind" = slowplain ] || args+=(--gpubench-against HEAD) ;;
    plain) args=() ;;
    fresh) args=(--gpubench-dir="$logs/$name-baselines") ;;
    sessions) args=(--gpubench-save --gpubench-sessions "$frac" --gpubench-dir="$logs/$suite-baselines") ;;
    bisect) dir=$(bisect_repo "$suite" "$frac" "$thr") ;;
  esac
  started=$(date +%s)
  if [ "$kind" = bisect ]; then
    # AB_ARGS's pairing and threshold hold for a bisect's steps too.
    local how=() word
    for word in ${AB_ARGS:-}; do
      case $word in --gpubench-threshold=*) how+=(--threshold "${word#*=}") ;; esac
    done
    how+=(--json "$logs/$name.json" "HEAD~$suite" HEAD -- -p no:cacheprovider -k test_copy_blocks)
    case " ${AB_ARGS:-} " in *" --gpubench-pairing=lockstep "*) how+=(--gpubench-pairing=lockstep) ;; esac
    (cd "$dir" && python3 -m pytest_gpubench bisect "${how[@]}") > "$logs/$name.txt" 2>&1
  else
    # shellcheck disable=SC2086  # AB_ARGS: one option per word
    [ -z "${AB_SELECT:-}" ] || args+=(-k "$AB_SELECT")
    local python=(python3)
    [ -z "${AB_PROFILE:-}" ] || python+=(-m cProfile -o "$logs/$name.prof")
    (cd "$dir" && "${python[@]}" -m pytest -q -p no:cacheprovider --gpubench ${AB_ARGS:-} "${args[@]}" \
       --gpubench-json="$logs/$name.json") > "$logs/$name.txt" 2>&1
  fi
  rc=$?
  case $kind in slow*) (cd "$root" && git checkout -q -- "$knob") ;; esac
  unset GPUBENCH_PHASE_CLOCK TRITON_CACHE_DIR TORCHINDUCTOR_CACHE_DIR
  rm -rf "$logs/$name.caches"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$suite" "${frac:-0}" "${thr:-}" "$(( $(date +%s) - started ))" "$rc" >> "$logs/runs.tsv"
  echo "$(date -u +%T) $name: $(( $(date +%s) - started )) s, exit $rc: $(tail -n 1 "$logs/$name.txt")"
}

# pyc writes the bytecode caches of the packages a run imports and of the project, where the
# machine lacks them (pip leaves them on a user's machine; a fresh process of a confirmation
# spent 4.4 s compiling Python source on an H200 host without them, bench/results/h200x2-2026-11-22b),
# so that later steps' processes, the fresh ones included, read them.
bytecode() {
  local started dirs rc
  started=$(date +%s)
  dirs=$(python3 -c 'import importlib.util as u, os
for name in ("torch", "triton", "sympy", "numpy", "scipy", "_pytest", "pluggy", "xdist", "execnet", "filelock", "jinja2", "networkx", "pytest_gpubench"):
    spec = u.find_spec(name)
    if spec is not None and spec.submodule_search_locations:
        print(*spec.submodule_search_locations)
print(os.path.dirname(os.__file__))')
  # shellcheck disable=SC2086  # one directory per word
  python3 -m compileall -q -j 0 $dirs > "$logs/pyc.txt" 2>&1
  rc=$?  # not 0 where any file does not compile (some packages ship tests that must not)
  echo "$(date -u +%T) pyc: $(( $(date +%s) - started )) s, exit $rc: $(echo $dirs | wc -w) directories"
}

# busy:N[:SECONDS] starts the example suite's --gpubench runs, one after another, on GPU N in
# the background (its own compile caches warm, its own baselines: a second xdist worker's
# load on its own GPU, without xdist), then waits SECONDS (default 20: past its first run's
# start-up and compiles; 0: its first run starts with the next step's, as two xdist workers
# start together); idle:N ends them. The runs' outputs: $logs/busy-gpuN.txt.
neighbour() {
  local pidfile="$stage/busy-gpu$2.pid"
  if [ "$1" = busy ]; then
    CUDA_VISIBLE_DEVICES=$2 setsid bash -c 'cd "$1/example_suite" && while true; do
        python3 -m pytest -q -p no:cacheprovider --gpubench --gpubench-dir="$2"; done' \
      _ "$root" "$logs/busy-gpu$2-baselines" >> "$logs/busy-gpu$2.txt" 2>&1 < /dev/null &
    echo $! > "$pidfile"
    beside="-beside-gpu$2"
    sleep "$3"
  elif [ -e "$pidfile" ]; then
    kill -- -"$(cat "$pidfile")" 2> /dev/null; rm -f "$pidfile"; sleep 2
    beside=
  fi
  echo "$(date -u +%T) $1:$2 ($(grep -c passed "$logs/busy-gpu$2.txt" 2>/dev/null) runs of GPU $2 ended so far)"
}

# A git repository of the user suite: a first commit, then $1 commits each adding a file, the
# $2-th also making the copies' work grow by $3 (the knob's default). Prints its path.
bisect_repo() {
  local repo=/tmp/gpubench-bisect-repo$sfx i g=(-c user.name=gpubench -c user.email=gpubench@localhost)
  rm -rf "$repo" && cp -a "$root/bench/user_suite" "$repo" && rm -rf "$repo/.gpubench"
  (cd "$repo" && git init -q -b main && git add -A && git "${g[@]}" commit -qm "the suite"
   for i in $(seq 1 "$1"); do
     echo "$i" > "note$i.txt"
     [ "$i" = "$2" ] && sed -i "s/knob(\"SLOWDOWN\", 0.0)/knob(\"SLOWDOWN\", $3)/" test_user.py
     git add -A && git "${g[@]}" commit -qm "change $i"
   done) > /dev/null
  echo "$repo"
}

case "${1:-}" in
start)
  # Every device call copies the working tree over the last one: the plan runs from a copy
  # of it, made here, as it is (the device's .git may hold an older HEAD than the files: its
  # uncommitted changes are the tree's own), committed there (A/A compares HEAD with itself).
  seconds=$2; shift 2
  copy=/tmp/gpubench-ab-tree$sfx
  if [ -z "${GPU:-}" ]; then pkill -f "ab_checks.sh run"; pkill -f "pytest -q -p no:cacheprovider"; else pkill -f "$copy/bench/ab_checks.sh run"; fi
  sleep 1; rm -rf "$copy" "$stage"; mkdir -p "$stage"
  cp -a "$root" "$copy" && cp "$root"/bench/{ab_checks.sh,ab_summary.py,two_gpus.py,xdist_compare.py} "$stage"/
  cd "$copy" || exit 1
  mkdir -p .git/info && echo /.whl/ >> .git/info/exclude  # wheels travel, uncommitted
  git add -A && git -c user.name=gpubench -c user.email=gpubench@localhost \
     commit -qm "the plan's tree" --no-verify > /dev/null 2>&1
  installed=$(cd / && python3 -c "import pytest_gpubench; print(pytest_gpubench.__file__)" 2> /dev/null)
  if [ -n "${GPU:-}" ] && [[ $installed == /tmp/gpubench-ab-tree-gpu* ]]; then
    echo "installed by another plan: $installed" > "$logs/install.txt"
  else
    python3 -m pip install --no-build-isolation --no-deps -e "$copy" -q > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
  fi
  if compgen -G "$root/.whl/*.whl" > /dev/null; then  # a kernel library for bench/fla_suite
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/gpubench-site "$root"/.whl/*.whl >> "$logs/install.txt" 2>&1 || exit 1
    export PYTHONPATH=/tmp/gpubench-site
  fi
  nvidia-smi ${GPU:+-i "$GPU"} --query-gpu=name,uuid,driver_version --format=csv,noheader > "$logs/gpu.txt"
  echo "GPU: $(cat "$logs/gpu.txt"); $(git log -2 --format=%h) changes: $(git status --porcelain | wc -l)"
  AB_ARGS=${AB_ARGS:-} GPUBENCH_ROOT=$copy STOP_AT=$(( $(date +%s) + seconds )) setsid nohup bash "$copy/bench/ab_checks.sh" run "$@" > "$stage/plan.log" 2>&1 < /dev/null &
  echo "plan started"
  ;;
run)
  shift
  for step in "$@"; do
    [ "$(date +%s)" -lt "$STOP_AT" ] || { echo "stopped before $step: time is up"; break; }
    run_step "$step"
  done
  for pidfile in "$stage"/busy-gpu*.pid; do  # a load the steps left running ends with them
    [ -e "$pidfile" ] && neighbour idle "$(basename "$pidfile" .pid | sed 's/busy-gpu//')"
  done
  touch "$stage/done"
  ;;
poll)
  end=$(( $(date +%s) + ${2:-500} ))
  while [ ! -e "$stage/done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
  mkdir -p "${OUT:-$root/device-out}"
  cat "$stage/plan.log"
  python3 "$stage/ab_summary.py" "$logs" > "$logs/summary.md" 2>&1
  if cut -f2 "$logs/runs.tsv" 2>/dev/null | grep -qx xdist; then  # issue 20's runs
    python3 "$stage/two_gpus.py" "$logs" >> "$logs/summary.md" 2>&1
  fi
  (cd "$logs" && tar czf "${OUT:-$root/device-out}/ab-logs$sfx.tgz" --exclude=stage ./*.json ./*.txt ./*.tsv ./*.md ./*.clock ./*-baselines 2>/dev/null)
  [ -e "$stage/done" ] && echo "plan done" || echo "plan still running"
  cat "$logs/summary.md"
  ;;
*)
  echo "usage: bash bench/ab_checks.sh start SECONDS STEP... | poll SECONDS" >&2; exit 2 ;;
esac
