#!/bin/bash
# bench/stagedeg_pipedream.sh: planfarm's per-stage DP (planner/partition/stagedeg.h, `pf_bench
# stagedeg_pd`) against PipeDream's optimizer with its per-stage replication (-n N, no
# --straight_pipeline), on PipeDream's profiles, both under PipeDream's model (stagedeg.h's
# allreduce_per_microbatch; bench/bench_stagedeg_pd.c says which options make it PipeDream's).
# PipeDream's optimizer runs from ../shared/peers/pipedream as bench/peers.sh runs it; nothing of
# it is kept here. One line per profile and N:
#   quality: PROFILE N replicated pf/pd RATIO speed pd/pf RATIO
# quality: planfarm's optimum over PipeDream's "Time per stage in pipeline" (both seconds per
# sample at -b BW); speed: PipeDream's process wall seconds over pf_bench's (import + downsets +
# DP + start-up; both whole processes, one run each). The line also gives PipeDream's own plan
# priced by planfarm's model (pd_plan): equal to PipeDream's time when the two models agree.
# A profile with more than PF_STAGEDEG_MAX_DOWNSETS (65536) downsets runs on the prefixes of one
# topological order (a heuristic; the line says which family ran).
# Environment as bench/peers.sh: PF_PEERS, PF_PEER_DATA, BUILD, PF_PEER_TIMEOUT_S (600),
# PF_PIPEDREAM_PROFILES (default "vgg16 resnet50 alexnet gnmt resnext50"), PF_STAGEDEG_DEVICES
# ("4 8"), PF_PIPEDREAM_BW_BYTES (10000000000: PipeDream's -b, bytes/s; peers.sh's).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
peers=${PF_PEERS:-$root/../shared/peers}
data=${PF_PEER_DATA:-$root/../shared/data}
out=$root/${BUILD:-build}/peers
timeout_s=${PF_PEER_TIMEOUT_S:-600}
bench=$root/${BUILD:-build}/pf_bench
bw=${PF_PIPEDREAM_BW_BYTES:-10000000000}

if [ ! -d "$peers/pipedream/optimizer" ] || [ ! -d "$data/pipedream" ]; then
    echo "SKIP stagedeg_pipedream: no PipeDream at $peers or profiles at $data"
    exit 0
fi
/usr/bin/python3 -c 'import numpy, graphviz' 2>/dev/null ||
    { echo "SKIP stagedeg_pipedream: python3-numpy or python3-graphviz missing (scripts/setup.sh bench)"; exit 0; }
[ -x "$bench" ] || { echo "stagedeg_pipedream: $bench not built (make ${BUILD:-build}/pf_bench)" >&2; exit 1; }
mkdir -p "$out"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date +%Y-%m-%d)"
now() { echo "${EPOCHREALTIME/[.,]/}"; }

row() { # PROFILE N
    local p=$1 n=$2 pdo=$out/pdrep-$1-$2 t0 t1 t2 pd_s pd pf_line
    rm -rf "$pdo" && mkdir -p "$pdo"
    t0=$(now)
    (cd "$peers/pipedream/optimizer" &&
        timeout "$timeout_s" /usr/bin/python3 optimizer_graph_hierarchical.py -f "$data/pipedream/$p.txt" \
            -n "$n" -b "$bw" -o "$pdo") >"$pdo.log" 2>&1
    local rc=$?
    t1=$(now)
    pd=$(awk '/^Time per stage in pipeline:/ { print $NF }' "$pdo.log")
    # PipeDream's plan for pf_bench to price: its degrees (the "(start, end) time r" lines under
    # "replication factor per stage", in stage order) and every node's stage_id
    {
        awk '/replication factor per stage:/ { on = 1; printf "degrees"; next }
             on && /^\(/ { printf " %s", $NF } on && /^$/ && n++ { exit } END { print "" }' "$pdo.log"
        awk '/^node[0-9]+ -- .* -- stage_id=[0-9]+$/ {
                 sub("node", "", $1); k = split($0, f, "stage_id="); print $1, f[k] }' "$pdo/gpus=$n.txt" 2>/dev/null
    } >"$out/pd-$p-$n.stages"
    t1b=$(now)
    pf_line=$(PF_PIPEDREAM_PROFILES=$p PF_STAGEDEG_DEVICES=$n PF_PEER_DATA="$data" PF_PIPEDREAM_BW_BYTES="$bw" PF_STAGEDEG_PD_PLANS="$out" \
        "$bench" stagedeg_pd | awk -v p="$p" '$1 == p')
    t2=$(now)
    if [ $rc = 124 ]; then
        echo "quality: $p $n replicated pf/pd - speed pd/pf - (PipeDream did not finish in $timeout_s s$(grep -m1 'Total number of states' "$pdo.log" | sed 's/Total number of/, its/'); planfarm: $pf_line)"
        return
    fi
    if [ $rc != 0 ] || [ -z "$pd" ]; then
        echo "quality: $p $n replicated pf/pd - speed pd/pf - (PipeDream rc $rc: $(tail -n 1 "$pdo.log"); planfarm: $pf_line)"
        return
    fi
    pd_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e6 }')
    echo "$pf_line" | awk -v p="$p" -v n="$n" -v pd="$pd" -v pds="$pd_s" -v pfs="$(awk -v a="$t1b" -v b="$t2" 'BEGIN { print (b - a) / 1e6 }')" '
        { pf = $5; deg = $7; plan = ($8 == "pd_plan") ? $9 : "-"
          fam = ($3 ~ /p$/) ? "the " substr($3, 1, length($3) - 1) " topological prefixes" : "all " $3 " downsets" }
        END { if (pf == "") { printf "quality: %s %s replicated pf/pd - speed pd/pf - (planfarm failed)\n", p, n; exit }
              printf "quality: %s %s replicated pf/pd %.9f speed pd/pf %.1f  (pf %.12g s/sample in %.3f s over %s, degrees %s; PipeDream %.12g in %s s; its plan under pf: %s)\n",
                     p, n, pf / pd, pds / pfs, pf, pfs, fam, deg, pd, pds, plan }'
    # PipeDream's degrees, for the record
    echo "   PipeDream's degrees: $(head -n 1 "$out/pd-$p-$n.stages" | cut -d' ' -f2- | tr ' ' ,)"
}

for p in ${PF_PIPEDREAM_PROFILES:-vgg16 resnet50 alexnet gnmt resnext50}; do
    for n in ${PF_STAGEDEG_DEVICES:-4 8}; do
        row "$p" "$n"
    done
done
