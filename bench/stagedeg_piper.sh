#!/bin/bash
# bench/stagedeg_piper.sh: planfarm's per-stage DPs (`pf_bench stagedeg`: planner/partition/
# stagedeg.h for Piper's `notp` problem, stagedeg_tp.h for its `full` one, a tensor-parallel
# degree and every node's configurations per stage) against Piper's planner in the same mode, on
# Piper's inputs, both priced by Piper's own getTPSForResult (bench/piper_eval.cpp). Piper is
# compiled from ../shared/peers as bench/peers.sh does; nothing of it is kept here. One line per
# input, device count and mode:
#   quality: INPUT DEVICES MODE pf/piper RATIO speed piper/pf RATIO
# (speed: Piper's runDP CPU seconds over the DP's CPU seconds for downsets + DP, both clock(); the
# DP runs on PF_STAGEDEG_THREADS OpenMP threads, default 1 as Piper's single thread: on a loaded
# machine a team's waits count as CPU and wall time alike).
# Environment as bench/peers.sh: PF_PEERS, PF_PEER_DATA, BUILD, PF_PEER_TIMEOUT_S (300),
# PF_PIPER_INPUTS (default "bert32a100:8 bert32a100:32 resnet:8 resnet:32"), PF_STAGEDEG_MODES
# (default "notp full"), PF_STAGEDEG_MEM_GIB (16: each device's memory, both planners).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${PF_PEERS:-$root/../shared/peers}
data=${PF_PEER_DATA:-$root/../shared/data}
out=$root/${BUILD:-build}/peers
timeout_s=${PF_PEER_TIMEOUT_S:-300}
bench=$root/${BUILD:-build}/pf_bench

if [ ! -d "$peers/piper" ] || [ ! -d "$data/piper" ]; then
    echo "SKIP stagedeg_piper: no Piper at $peers or data at $data"
    exit 0
fi
[ -f /usr/include/nlohmann/json.hpp ] || { echo "SKIP stagedeg_piper: nlohmann-json3-dev missing (scripts/setup.sh bench)"; exit 0; }
command -v jq >/dev/null 2>&1 || { echo "SKIP stagedeg_piper: jq missing"; exit 0; }
[ -x "$bench" ] || { echo "stagedeg_piper: $bench not built (make $BUILD/pf_bench)" >&2; exit 1; }
mkdir -p "$out"
for prog in piper_run piper_eval; do
    src=$peers/piper/driver.cpp
    [ $prog = piper_eval ] && src=$root/bench/piper_eval.cpp
    if [ ! -x "$out/$prog" ] || [ "$src" -nt "$out/$prog" ] || [ "$peers/piper/algo.cpp" -nt "$out/$prog" ]; then
        g++ -O3 -std=c++17 -w -I"$peers/piper" "$src" -o "$out/$prog" || exit 1
    fi
done

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date +%Y-%m-%d)"
run_mode() { # INPUT DEVICES MODE
    local m=$1 d=$2 mode=$3 file=$data/piper/$1.json
    local row pf_s degrees pf_tps pi_tps pi_s pi_deg piper_arg=
    [ "$mode" = notp ] && piper_arg=notp
    local mem=${PF_STAGEDEG_MEM_GIB:-16}
    row=$(PF_STAGEDEG_MEM_GIB=$mem OMP_NUM_THREADS=${PF_STAGEDEG_THREADS:-1} PF_STAGEDEG_MODE=$mode PF_PIPER_INPUTS="$m:$d" PF_PEER_DATA="$data" PF_STAGEDEG_OUT="$out" "$bench" stagedeg | awk -v m="$m" '$1 == m')
    pf_s=$(echo "$row" | awk '{ print $5 }')
    degrees=$(echo "$row" | awk '{ print $8 }')
    pf_tps=$(jq -r '.time_per_sample' < <("$out/piper_eval" "$file" "$d" "$mem" "$mode" "$out/stagedeg-$m-$d-$mode.stages" 2>/dev/null)) || pf_tps=-
    if ! timeout "$timeout_s" "$out/piper_run" "$file" "$d" "$mem" $piper_arg >"$out/piper.out" 2>"$out/piper.err"; then
        echo "quality: $m $d $mode pf/piper - speed piper/pf - (Piper did not finish in $timeout_s s; planfarm $pf_tps in $pf_s s, degrees $degrees)"
        return
    fi
    pi_tps=$(jq -r '.time_per_sample' "$out/piper.out")
    if [ "$(jq -r '.stages' "$out/piper.out")" = 0 ]; then # Piper found no plan that fits
        echo "quality: $m $d $mode pf/piper - speed piper/pf - (Piper: no plan fits, in $(jq -r '.solve_s' "$out/piper.out") s; planfarm $pf_tps in $pf_s s${degrees:+, degrees $degrees})"
        return
    fi
    pi_s=$(jq -r '.solve_s' "$out/piper.out")
    pi_deg=$(grep 'formed a stage' "$out/piper.err" | sed 's/.*using d=\([0-9]*\) and t=\([0-9]*\).*/\1x\2/; s/x1$//' | paste -sd, -)
    awk -v m="$m" -v d="$d" -v mode="$mode" -v a="$pf_tps" -v b="$pi_tps" -v ps="$pf_s" -v qs="$pi_s" -v pd="$degrees" -v qd="$pi_deg" \
        'BEGIN { printf "quality: %s %s %s pf/piper %.5f speed piper/pf %.2f  (pf %.9g in %s s, degrees %s; Piper %s in %s s, degrees %s)\n",
                 m, d, mode, a / b, qs / ps, a, ps, pd, b, qs, qd }'
}

for in in ${PF_PIPER_INPUTS:-bert32a100:8 bert32a100:32 resnet:8 resnet:32}; do
    for mode in ${PF_STAGEDEG_MODES:-notp full}; do
        run_mode "${in%%:*}" "${in##*:}" "$mode"
    done
done
