#!/usr/bin/env bash
# One device call: install, accuracy against CUPTI, the GPU tests, and the example suite's
# save / A-A / slowdown cycle. Logs go to $OUT (or ./device-out); a short table is printed last.
set -u
out=${OUT:-device-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install --no-build-isolation --no-deps -e . -q > "$out/install.log" 2>&1 || { cat "$out/install.log"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$out/gpu.txt" 2>&1
python3 bench/accuracy.py --out "$out/accuracy.json" > "$out/accuracy.txt" 2>&1
python3 -m pytest -q -m gpu tests > "$out/gpu_tests.txt" 2>&1
(
  cd example_suite || exit 1
  rm -rf .gpubench
  python3 -m pytest -q --gpubench-save > "$out/example_save.txt" 2>&1
  python3 -m pytest -q --gpubench > "$out/example_aa.txt" 2>&1
  GPUBENCH_EXAMPLE_SLOWDOWN=gelu_triton python3 -m pytest -q --gpubench > "$out/example_slow.txt" 2>&1
  cp .gpubench/*.json "$out/" 2>/dev/null
)
cat "$out/gpu.txt"; date -u
tail -n 4 "$out/gpu_tests.txt"
echo "--- save"; tail -n 30 "$out/example_save.txt"
echo "--- A/A"; tail -n 6 "$out/example_aa.txt"
echo "--- slowdown"; grep -E "regressed|passed|failed" "$out/example_slow.txt" | tail -n 8
echo "--- accuracy"; cat "$out/accuracy.txt"
