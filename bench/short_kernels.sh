#!/usr/bin/env bash
# Fresh sessions of bench/short_kernels.py one after the other, then their summary (issue 16).
#   bash bench/short_kernels.sh OUT [N] [MODE]
# N sessions per mode (default 10). MODE: plain (the profiler first runs after all graph
# timings), primed (it runs once before them, as the plugin does) or both (default;
# alternated, the first of each pair changing). New sessions stop starting after $BUDGET_S
# seconds (default 390), so one command fits a device call. Writes OUT/short-kernels.md and
# OUT/short-kernels-sessions.tgz (the sessions' JSON and logs); prints the table last.
set -u
out=${1:?usage: bash bench/short_kernels.sh OUT [N] [plain|primed|both]}
n=${2:-10}
mode=${3:-both}
budget=${BUDGET_S:-390}
root=$(cd "$(dirname "$0")/.." && pwd)
script="$root/bench/short_kernels.py"
case $mode in
plain | primed) modes=("$mode") ;;
both) modes=(plain primed) ;;
*) echo "invalid MODE '$mode': expected plain, primed or both" >&2 && exit 2 ;;
esac
mkdir -p "$out/sessions"
start=$SECONDS
for ((k = 1; k <= n; k++)); do
    order=("${modes[@]}")
    if ((${#modes[@]} == 2 && k % 2 == 0)); then order=(primed plain); fi
    for m in "${order[@]}"; do
        if ((SECONDS - start > budget)); then
            echo "budget of ${budget}s reached: no more sessions" >&2
            break 2
        fi
        flag=()
        [[ $m == primed ]] && flag=(--prime-profiler)
        name="session-$k-$m"
        echo "$name ($((SECONDS - start))s)" >&2
        if ! timeout 120 python3 "$script" session ${flag[@]+"${flag[@]}"} --out "$out/sessions/$name.json" \
            >"$out/sessions/$name.log" 2>&1; then
            echo "$name failed; the end of its log:" >&2
            tail -n 5 "$out/sessions/$name.log" >&2
        fi
    done
done
python3 "$script" summarize "$out"/sessions/*.json --markdown >"$out/short-kernels.md"
tar -czf "$out/short-kernels-sessions.tgz" -C "$out" sessions
cat "$out/short-kernels.md"
