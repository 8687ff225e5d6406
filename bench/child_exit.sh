#!/usr/bin/env bash
# What a confirmation costs, this tree against another (issue 20: a fresh process that ends at
# pytest's unconfigure, plugin/child.py): bench/child_cost.py on the example suite's
# test_add_torch[4096] and test_gelu_compiled[1048576], each tree in turn, ROUNDS times.
#   bash bench/child_exit.sh OTHER_TREE [ROUNDS]
# OTHER_TREE: this repository at the commit to compare (`git worktree add DIR COMMIT`). Each
# tree runs from PYTHONPATH, ahead of an installed copy; the compile caches are warmed first
# (a plain run, every test new). Tables in $OUT/child-exit-*.txt, logs in $LOGS.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
other=$(cd "$1" && pwd)
rounds=${2:-2}
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-child-exit}
mkdir -p "$out" "$logs"
export PYTHONUNBUFFERED=1
ids=("test_add.py::test_add_torch[4096]" "test_gelu.py::test_gelu_compiled[1048576]")
args=(-q -p no:cacheprovider -p phase_clock --gpubench-dir="$logs/baselines" --gpubench)
cd "$root/example_suite" || exit 1
PYTHONPATH="$root/bench:$root" python3 -m pytest "${args[@]}" > "$logs/warm.txt" 2>&1
for round in $(seq 1 "$rounds"); do
  for tree in "$root" "$other"; do
    name=$([ "$tree" = "$root" ] && echo this || echo other)-$round
    where=$(PYTHONPATH="$tree" python3 -c "import pytest_gpubench; print(pytest_gpubench.__file__)")
    echo "$(date -u +%T) $name: $where"
    GPUBENCH_CHILD_CLOCK_DIR="$logs/clock-$name" PYTHONPATH="$tree/bench:$tree" \
      python3 "$tree/bench/child_cost.py" . "${ids[@]}" -- "${args[@]}" > "$logs/$name.txt" 2>&1
    grep -v '^{' "$logs/$name.txt" > "$out/child-exit-$name.txt"
    tail -n 2 "$out/child-exit-$name.txt"
  done
done
(cd "$logs" && tar czf "$out/child-exit-logs.tgz" .)
