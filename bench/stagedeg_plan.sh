#!/bin/bash
# bench/stagedeg_plan.sh: `planfarm plan --stage-degrees` end to end (issue 24 item 3, priced by
# planfarm's simulator), beside Piper's own plan for the same input simulated the same way.
#
# For each Piper input and device count (Piper's `notp` problem: a data-parallel degree per
# stage): Piper's driver (unmodified, compiled from ../shared/peers as bench/stagedeg_piper.sh
# does) prints its stages ("formed a stage with nodes [...] using d=D and t=T"); they become a
# planfarm plan of the imported graph (`planfarm import piper`: op ids are Piper's node ids) with
# each stage's replicas and tp, which `planfarm map` places (map_stages) and `planfarm simulate`
# runs under 1F1B. planfarm's side is `planfarm plan --stage-degrees --global-batch B` with B
# = N x the graph's micro-batch, N Piper's mbsInBatch (its unit of work is one micro-batch), on
# the same cluster: one host per 8 GPUs at Piper's bandwidth (25 GB/s between any
# two GPUs, its file's `bandwidth`) and PF_STAGEDEG_MEM_GIB (16) GiB each. One line each:
#   simulated: INPUT DEVICES pf X ms/mb (DEGREES) piper Y ms/mb (DEGREES) pf/piper R
#              uniform U ms/mb, plan S s
# (ms/mb: each plan's simulated step / N, per micro-batch as Piper's time per sample is; uniform: the best plan with one degree for all
# stages, which --stage-degrees weighs the per-stage plans against; plan s: the whole
# `planfarm plan` process). Both plans are priced by the same simulator and memory model
# (planfarm's: 16 B per parameter with Adam, stashed inputs, relayed tensors), so a Piper plan
# that fits Piper's memory model can fail planfarm's: its line says "does not fit".
# Environment: PF_PEERS, PF_PEER_DATA, BUILD, PF_PIPER_INPUTS ("bert32a100:8 bert32a100:32
# resnet:8 resnet:32"), PF_STAGEDEG_MEM_GIB (16), PF_PEER_TIMEOUT_S (300).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${PF_PEERS:-$root/../shared/peers}
data=${PF_PEER_DATA:-$root/../shared/data}
out=$root/${BUILD:-build}/peers
pf=$root/planfarm
timeout_s=${PF_PEER_TIMEOUT_S:-300}
mem=${PF_STAGEDEG_MEM_GIB:-16}

if [ ! -d "$peers/piper" ] || [ ! -d "$data/piper" ]; then
    echo "SKIP stagedeg_plan: no Piper at $peers or data at $data"
    exit 0
fi
command -v jq >/dev/null 2>&1 || { echo "SKIP stagedeg_plan: jq missing"; exit 0; }
[ -x "$pf" ] || { echo "stagedeg_plan: $pf not built (make planfarm)" >&2; exit 1; }
mkdir -p "$out"
if [ ! -x "$out/piper_run" ] || [ "$peers/piper/algo.cpp" -nt "$out/piper_run" ]; then
    g++ -O3 -std=c++17 -w -I"$peers/piper" "$peers/piper/driver.cpp" -o "$out/piper_run" || exit 1
fi
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
now() { date +%s.%N; }

# Piper's stages (stderr of its driver) as a planfarm plan: stages in the order of their first
# node, each stage's ops, replicas and tp; the step's N micro-batches shared as plan.h says.
piper_plan() { # PIPER_ERR N DEVICES -> plan JSON on stdout
    grep 'formed a stage' "$1" |
        sed 's/.*nodes \[\([0-9 ]*\)\] using d=\([0-9]*\) and t=\([0-9]*\).*/\2 \3 \1/' |
        jq -R -s --argjson n "$2" --argjson D "$3" '
            [split("\n")[] | select(length > 0) | split(" ") | map(select(length > 0) | tonumber)
             | {replicas: .[0], tp: .[1], ops: .[2:]}]
            | {model: "piper", cluster: "c", devices: $D, stages: length,
               replicas: (map(.replicas) | max), tensor_parallel: (map(.tp) | max),
               microbatches: ($n / (map(.replicas) | max)), schedule: "1f1b",
               stage_list: (to_entries | map(.value + {id: .key}))}'
}

degrees_of() { jq -r '[.stage_list[] | "\(.replicas // 0)x\(.tp // 0)"] | join(",")' "$1"; }

row() { # INPUT DEVICES
    local m=$1 d=$2 tag=$1-$2 file=$data/piper/$1.json
    local n g=$out/sp-$m.graph.json c=$out/sp-c$2.json
    n=$(jq -r '.mbsInBatch' "$file")
    "$pf" import piper "$file" -o "$g" 2>/dev/null || { echo "simulated: $m $d: import failed"; return; }
    local gb=$((n * $(jq '.microbatch' "$g"))) # N of the graph's micro-batches (Piper's unit)
    "$pf" cluster nvswitch --machines $(((d + 7) / 8)) --intra-gbps 25 --inter-gbps 25 \
        --mem-gb "$mem" -o "$c" || return
    local t0 t1 pf_ms pf_deg uni piper_ms piper_deg
    t0=$(now)
    if ! "$pf" plan "$g" "$c" --global-batch "$gb" --stage-degrees --quiet -o "$out/sp-$tag.pf.json" \
        2>"$out/sp-$tag.pf.err"; then
        pf_ms="- ($(tail -c 200 "$out/sp-$tag.pf.err"))" pf_deg=- uni=-
    else
        pf_ms=$(jq '.simulated_step_ms / '"$n"' * 10000 | round / 10000' "$out/sp-$tag.pf.json")
        pf_deg=$(jq -r '.search.stage_degrees.degrees // "uniform"' "$out/sp-$tag.pf.json")
        [ "$(jq '.search.stage_degrees.chosen' "$out/sp-$tag.pf.json")" = true ] ||
            pf_deg="uniform; per-stage $pf_deg"
        uni=$(jq '.search.stage_degrees.uniform_ms_per_sample // "none fits" | if type == "number" then . * '"$((gb / n))"' * 10000 | round / 10000 else . end' "$out/sp-$tag.pf.json")
    fi
    t1=$(now)
    if ! timeout "$timeout_s" "$out/piper_run" "$file" "$d" "$mem" notp >"$out/sp-$tag.piper.out" \
        2>"$out/sp-$tag.piper.err"; then
        piper_ms="- (did not finish in $timeout_s s)" piper_deg=-
    else
        piper_plan "$out/sp-$tag.piper.err" "$n" "$d" >"$out/sp-$tag.piper.json"
        piper_deg=$(degrees_of "$out/sp-$tag.piper.json")
        if "$pf" map "$g" "$c" "$out/sp-$tag.piper.json" -o "$out/sp-$tag.piper.mapped.json" \
            2>"$out/sp-$tag.map.err" &&
            "$pf" simulate "$g" "$c" "$out/sp-$tag.piper.mapped.json" >"$out/sp-$tag.sim.txt" \
            2>&1; then
            piper_ms=$(sed -n 's/^step \([0-9.]*\) ms.*/\1/p' "$out/sp-$tag.sim.txt" |
                awk -v n="$n" '{ printf "%.4f", $1 / n }')
            local peak
            peak=$(awk '$NF == "GiB" && $(NF - 1) + 0 > p { p = $(NF - 1) + 0 } END { print p + 0 }' \
                "$out/sp-$tag.sim.txt")
            awk -v p="$peak" -v m="$mem" 'BEGIN { exit !(p > m) }' &&
                piper_ms="$piper_ms (does not fit: $peak GiB on a device of $mem)"
        else
            piper_ms="- ($(tail -c 160 "$out/sp-$tag.map.err" "$out/sp-$tag.sim.txt" 2>/dev/null | tr '\n' ' '))"
        fi
    fi
    printf 'simulated: %s %s pf %s ms/mb (%s) piper %s ms/mb (%s) pf/piper %s uniform %s ms/mb, plan %s s\n' \
        "$m" "$d" "$pf_ms" "$pf_deg" "$piper_ms" "$piper_deg" \
        "$(awk -v a="${pf_ms%% *}" -v b="${piper_ms%% *}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else print "-" }')" \
        "$uni" "$(secs "$t0" "$t1")"
}

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date +%Y-%m-%d)"
for r in ${PF_PIPER_INPUTS:-bert32a100:8 bert32a100:32 resnet:8 resnet:32}; do
    row "${r%%:*}" "${r##*:}"
done
