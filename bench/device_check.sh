#!/usr/bin/env bash
# One device call: install, the whole test suite (GPU tests included), the example suite's
# save / A-A / slowdown cycle (bench/quality.py measures accuracy and detection). Logs go to $OUT (or ./device-out);
# a short summary is printed last. Usage: bash bench/device_check.sh
set -u
out=${OUT:-device-out}; mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install --no-build-isolation --no-deps -e . -q > /tmp/install.log 2>&1 || { cat /tmp/install.log; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$out/gpu.txt" 2>&1
python3 -m pytest -q tests > "$out/tests.txt" 2>&1
(
  cd example_suite || exit 1
  rm -rf .gpubench
  python3 -m pytest -q --gpubench-save > "$out/example_save.txt" 2>&1
  python3 -m pytest -q --gpubench --gpubench-json=/tmp/aa.json > "$out/example_aa.txt" 2>&1
  python3 -c "
import json; d = json.load(open('/tmp/aa.json'))
print('fingerprint:', {k: d['device'].get(k) for k in ('name', 'driver', 'max_sm_clock_mhz', 'peak_copy_gbs')})
print('SM clocks before/after (MHz), first 3:', [r['clocks_mhz'] for r in d['results'][:3]],
      'throttled:', sum(bool(r['throttled']) for r in d['results']), 'of', len(d['results']))
print('timers:', sorted({r['timer'] for r in d['results']}), 'notes:', sorted({r['note'] for r in d['results'] if r['note']}))
" >> "$out/example_aa.txt" 2>&1
  GPUBENCH_EXAMPLE_SLOWDOWN=gelu_triton python3 -m pytest -q --gpubench > "$out/example_slow.txt" 2>&1
  cp .gpubench/*.json "$out/" 2>/dev/null
)
cat "$out/gpu.txt"; date -u
tail -n 2 "$out/tests.txt"
echo "--- save"; grep -E "gpubench:|passed|failed|skipped" "$out/example_save.txt"
echo "--- A/A"; tail -n 6 "$out/example_aa.txt"
echo "--- slowdown"; grep -E "^FAILED|passed|failed" "$out/example_slow.txt" | tail -n 8
