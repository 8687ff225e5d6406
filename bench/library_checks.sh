#!/usr/bin/env bash
# GPU checks on code this project did not write: bench/library_suite (Liger-Kernel's Triton
# kernels) in fresh processes, in both orders. On the device, liger-kernel travels as a wheel:
#   here:   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#             -d .whl liger-kernel==0.8.5
#   there:  bash bench/library_checks.sh history 3    install; the suite without timing; a
#                                                     history of 3 sessions (orders alternate)
#           bash bench/library_checks.sh runs 3       3 runs judged against it (orders alternate)
#           bash bench/library_checks.sh summary      sessions_summary.py of the judged runs
# Reports and baselines in $LOGS (default /tmp/gpubench-library); what to keep in $OUT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-out}
logs=${LOGS:-/tmp/gpubench-library}
mkdir -p "$out" "$logs/baselines"
export PYTHONUNBUFFERED=1 PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"  # the wheels
suite="$root/bench/library_suite"
pt() { (cd "$suite" && python3 -m pytest -q -p no:cacheprovider "$@"); }
order() { if [ $(( $1 % 2 )) -eq 0 ]; then echo 1; else echo 0; fi; }  # the 2nd, 4th...: reversed

case "${1:-}" in
history)
  if [ -d "$root/.whl" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target /tmp/site "$root"/.whl/*.whl > "$logs/install.txt" 2>&1 || { cat "$logs/install.txt"; exit 1; }
  fi
  python3 -m pip install -q --no-build-isolation --no-deps -e "$root" >> "$logs/install.txt" 2>&1 \
    || { cat "$logs/install.txt"; exit 1; }
  python3 -c "import liger_kernel, torch, triton; print('liger-kernel', __import__('importlib.metadata').metadata.version('liger-kernel'), 'torch', torch.__version__, 'triton', triton.__version__)" | tee "$out/versions.txt"
  nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader | tee -a "$out/versions.txt"
  pt > "$logs/plain.txt" 2>&1; echo "without --gpubench: $(tail -n 1 "$logs/plain.txt")"
  rm -f "$logs"/baselines/*.json
  for k in $(seq 1 "${2:-3}"); do
    SECONDS=0
    LIBRARY_SUITE_REVERSE=$(order "$k") pt --gpubench --gpubench-save --gpubench-dir="$logs/baselines" \
      --gpubench-json="$logs/session-$k.json" > "$logs/session-$k.txt" 2>&1
    echo "session $k (reversed: $(order "$k")), $SECONDS s: $(tail -n 1 "$logs/session-$k.txt")"
  done
  cp "$logs"/baselines/*.json "$out/" 2>/dev/null
  ;;
runs)
  for k in $(seq 1 "${2:-3}"); do
    SECONDS=0
    LIBRARY_SUITE_REVERSE=$(order "$k") pt --gpubench --gpubench-dir="$logs/baselines" \
      --gpubench-json="$logs/run-$k.json" > "$logs/run-$k.txt" 2>&1
    echo "run $k (reversed: $(order "$k")), $SECONDS s: $(tail -n 1 "$logs/run-$k.txt")"
  done
  ;;
summary)
  python3 "$root/bench/sessions_summary.py" --json "$out/runs.json" "$logs"/run-*.json > "$out/runs.md"
  (cd "$logs" && tar czf "$out/logs.tgz" ./*.txt ./*.json)
  cat "$out/runs.md"
  ;;
*)
  echo "usage: bash bench/library_checks.sh history [K] | runs [K] | summary" >&2
  exit 2
  ;;
esac
