#!/bin/bash
# bench/peers.sh (`make bench-peers`): planfarm against the peers themselves, in the same run, on
# the peers' own inputs. Nothing of the peers is in this repository: Piper's planner is compiled
# from ../shared/peers/piper into build/peers/, PipeDream's optimizer runs from
# ../shared/peers/pipedream, Calculon from ../shared/peers/calculon (through calculon_run.py
# beside it). Every number printed is measured here; see bench/RESULTS.md for what each column
# means and how the peers' problems map onto planfarm's.
#
# Environment: PF_PEERS (default ../shared/peers), PF_PEER_DATA (../shared/data), BUILD (build),
# PF_PEER_TIMEOUT_S (600: a peer run past it is killed and reported, not waited for),
# PF_PEER_ONLY (pipedream|piper|calculon: one part only), PF_PIPEDREAM_PROFILES, PF_PIPER_INPUTS
# (space-separated subsets, e.g. "alexnet vgg16" or "bert32a100:8 resnet:32"), PF_PEER_REPS (3:
# runs per side, the fastest counts). Calculon: PF_CALCULON_ROWS (MODEL:GPUS:BATCH ..., MODEL a
# file of calculon/models without .json), PF_PEERS_CALCULON_BIG=1 (adds GPT-3 175B on 64 A100 at
# batch 64: about an hour of Calculon), PF_CALCULON_TIMEOUT_S (7200 a search; 0 = none),
# PF_CALCULON_CPUS (Calculon's -c, default every core), PF_CALCULON_SEARCH=0 (no search: planfarm's
# plan priced by Calculon's llm only), PF_CALCULON_REUSE=1 (a row whose search
# result is in build/peers from an earlier run prints that run's search time, marked, instead of
# searching again).
# stamp and best_of assign through printf -v (SC2154); the *_once functions run through best_of
# (SC2317)
# shellcheck disable=SC2154,SC2317
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
peers=${PF_PEERS:-$root/../shared/peers}
data=${PF_PEER_DATA:-$root/../shared/data}
out=$root/${BUILD:-build}/peers
pf=$root/planfarm
timeout_s=${PF_PEER_TIMEOUT_S:-600}
only=${PF_PEER_ONLY:-}

skip() { echo "SKIP bench-peers: $*"; exit 0; }

if [ ! -d "$peers/piper" ] && [ ! -d "$peers/pipedream/optimizer" ] && [ ! -d "$peers/calculon" ]; then
    skip "no peers at $peers (set PF_PEERS to the directory holding piper/, pipedream/ and calculon/)"
fi
[ -x "$pf" ] || { echo "bench-peers: $pf not built (make planfarm)" >&2; exit 1; }

# What each part needs (scripts/packages.txt, group bench) and has (the peer, its reference data).
missing=""
command -v jq >/dev/null 2>&1 || missing="$missing jq"
command -v timeout >/dev/null 2>&1 || missing="$missing coreutils"
piper_ok=1 pipedream_ok=1 calculon_ok=1 absent=""
command -v g++ >/dev/null 2>&1 || { missing="$missing g++"; piper_ok=0; }
[ -f /usr/include/nlohmann/json.hpp ] || { missing="$missing nlohmann-json3-dev"; piper_ok=0; }
/usr/bin/python3 -c 'import graphviz' 2>/dev/null || { missing="$missing python3-graphviz"; pipedream_ok=0; }
/usr/bin/python3 -c 'import numpy' 2>/dev/null ||
    { missing="$missing python3-numpy"; pipedream_ok=0; calculon_ok=0; }
/usr/bin/python3 -c 'import psutil' 2>/dev/null || { missing="$missing python3-psutil"; calculon_ok=0; }
/usr/bin/python3 -c 'import pandas' 2>/dev/null || { missing="$missing python3-pandas"; calculon_ok=0; }
{ [ -d "$peers/piper" ] && [ -d "$data/piper" ]; } || { absent="$absent piper"; piper_ok=0; }
{ [ -d "$peers/pipedream/optimizer" ] && [ -d "$data/pipedream" ]; } || { absent="$absent pipedream"; pipedream_ok=0; }
{ [ -f "$peers/calculon_run.py" ] && [ -d "$peers/calculon/models" ]; } || { absent="$absent calculon"; calculon_ok=0; }
case $missing in *jq* | *coreutils*) skip "missing Debian packages:$missing (scripts/setup.sh bench)" ;; esac
[ -n "$missing" ] && echo "bench-peers: missing Debian packages:$missing (scripts/setup.sh bench); skipping what needs them"
[ -n "$absent" ] && echo "bench-peers: not at $peers (or no reference data at $data):$absent; skipping them"
mkdir -p "$out"

# stamp VAR: microseconds since the epoch into VAR, from bash itself (no process is started:
# a `date` between two stamps would be timed with what they bracket)
stamp() { printf -v "$1" '%s' "${EPOCHREALTIME/[.,]/}"; }
# seconds between two stamps
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", (b - a) / 1e6 }'; }
# the lesser of two times in seconds ("" counts as none yet)
least() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b + 0 < a + 0) print b; else print a }'; }
# Each side runs PF_PEER_REPS times (default 3) and its fastest run counts (this machine is shared
# and noisy; the least time is the one least disturbed); a run over 10 s is not repeated.
reps=${PF_PEER_REPS:-3}
# best_of VAR FN ARGS...: FN ARGS (which times itself into run_s) up to $reps times, VAR = the
# least run_s; stops at FN's first failure and returns its status
best_of() {
    local var=$1
    shift
    printf -v "$var" '%s' ""
    for _ in $(seq "$reps"); do
        "$@" || return
        printf -v "$var" '%s' "$(least "${!var}" "$run_s")"
        awk -v t="$run_s" 'BEGIN { exit !(t > 10) }' && break
    done
    return 0
}
ratio() { awk -v p="$1" -v q="$2" 'BEGIN { if (q > 0) printf "%.1f", p / q; else print "-" }'; }

echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(date +%Y-%m-%d)"
echo "times: wall seconds of whole processes (start-up, reading the input, solving), the fastest of $reps runs each"

# ---------------------------------------------------------------- PipeDream
# PipeDream's optimizer with --straight_pipeline (every stage on one worker: no replication), -n N
# workers, no memory constraint (its default), no activation compression (its default, under which
# its pipeline time is the slowest stage's compute alone: communication only enters through
# data-parallel replication, which a straight pipeline has none of).
# planfarm: the same problem is `partition --stages N --replicas 1` on a flat cluster of N
# devices at the same bandwidth, memory large enough never to bind (PipeDream checks none), on
# PipeDream's view of the profile (its main() zeroes and removes the Input sources: alexnet's
# input op alone is 600 ms) and with --flat-gbps so large that eq. 3's communication term
# vanishes: that is PipeDream's straight-pipeline objective, which the DP then minimises.
pipedream() {
    bw_gbps=10
    bw_bytes=10000000000
    echo
    echo "== PipeDream (optimizer_graph_hierarchical.py --straight_pipeline -b $bw_bytes) against planfarm partition --stages N --replicas 1"
    echo "   planfarm s = import + partition --flat-gbps 1e12 (PipeDream's objective); PipeDream s = the optimizer's process"
    echo "   'x' = PipeDream s / planfarm s; both on PipeDream's view of the profile (Input sources zeroed, as its main() does)"
    echo "   PD model: PipeDream's 'Time per stage in pipeline' (max stage forward + backward, Input ops zeroed), ms"
    echo "   pf model: planfarm's eq. 5 'full' objective from planfarm map at the real $bw_gbps GB/s (flat cluster, R = 1:"
    echo "   eq. 3, max over stages of compute + bytes crossing the stage boundary / $bw_gbps GB/s), ms"
    best_of py_s python_once
    echo "   (Python start-up with numpy and graphviz alone: $py_s s of every PipeDream run)"
    printf '%-15s %2s %9s %9s %7s | %10s %10s %8s | %10s %10s %8s\n' profile N "pf s" "PD s" x \
        "pf:PD" "PD:PD" "pf/PD" "pf:pf" "PD:pf" "pf/PD"
    for n in 4 8; do
        "$pf" cluster hier --machines 1 --gpus "$n" --intra-gbps "$bw_gbps" --mem-gb 4096 \
            --name "flat$n" -o "$out/flat$n.json" || return 1
    done
    profiles=${PF_PIPEDREAM_PROFILES:-alexnet vgg16 resnet18 resnet50 resnet101 resnext50 resnext101
        squeezenet1_0 inception_v3 densenet121 nasnetamobile nasnetalarge gnmt gnmt_large}
    for p in $profiles; do
        for n in 4 8; do
            pd_row "$p" "$n"
        done
    done
}

# PipeDream's stage assignment (its gpus=N.txt: "nodeK -- ... -- stage_id=S") as planfarm stage
# lists, put into planfarm's own plan for the same graph so that `planfarm map` prices it.
# Ops PipeDream drops (unused __getitem__ sinks) go to their producer's stage.
pd_plan() { # pd_graph_txt pf_graph pf_plan -> stdout
    awk '/^node[0-9]+ -- .* -- stage_id=[0-9]+$/ {
            split($1, a, "node"); n = split($0, f, "stage_id="); print a[2], f[n] }' "$1" >"$out/pd.stages"
    jq --slurpfile g "$2" --rawfile st "$out/pd.stages" '
        ($st | split("\n") | map(select(length > 0) | split(" ") | map(tonumber))
             | map({key: (.[0] | tostring), value: .[1]}) | from_entries) as $sid
        | ($g[0].edges | map({key: (.dst | tostring), value: .src}) | from_entries) as $prod
        | [$g[0].ops[].id | . as $id | {id: $id, s: ($sid[$id | tostring] // $sid[$prod[$id | tostring] | tostring])}] as $a
        | ($a | map(.s) | max + 1) as $S
        | .stages = $S
        | .stage_list = [range($S) as $s | {id: $s, ops: [$a[] | select(.s == $s) | .id], devices: [$s]}]' "$3"
}

pf_objective() { # graph cluster plan -> eq. 5 full objective (ms), or the error
    "$pf" map "$1" "$2" "$3" --instantiation full 2>"$out/map.err" | jq -r '.objective_ms' ||
        echo "map failed: $(head -c 200 "$out/map.err")"
}

python_once() {
    stamp t0
    /usr/bin/python3 -c 'import numpy, graphviz' || return
    stamp t1
    run_s=$(secs "$t0" "$t1")
}

# planfarm's side of pd_row: import, then partition; PipeDream's view of the profile (Input
# sources cost and carry nothing) is made between them and not timed
pd_planfarm_once() {
    stamp t0
    "$pf" import pipedream "$file" -o "$g.raw" 2>"$out/pf.err" || return
    stamp t1
    jq '([.ops[] | select((.name | test("^node[0-9]+\\.Input")) and .type == "input") | .id]) as $in
        | .ops |= map(if (.id | IN($in[])) then .fwd_ms = 0 | .bwd_ms = 0 | .param_bytes = 0
                       | .mem_fwd_bytes = 0 | .mem_bwd_bytes = 0 else . end)
        | .edges |= map(if (.src | IN($in[])) then .bytes = 0 else . end)' "$g.raw" >"$g" || return
    stamp t2
    "$pf" partition "$g" "$out/flat$n.json" --stages "$n" --replicas 1 --flat-gbps 1e12 \
        -o "$plan" 2>"$out/pf.err" || return
    stamp t3
    run_s=$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "%.4f", (b - a + d - c) / 1e6 }')
}

pd_pipedream_once() {
    stamp t0
    (cd "$peers/pipedream/optimizer" &&
        timeout "$timeout_s" /usr/bin/python3 optimizer_graph_hierarchical.py -f "$file" -n "$n" \
            -b "$bw_bytes" --straight_pipeline -o "$pdo") >"$pdo.log" 2>&1 || return
    stamp t1
    run_s=$(secs "$t0" "$t1")
}

pd_row() {
    p=$1 n=$2
    file=$data/pipedream/$p.txt
    g=$out/pd-$p.json plan=$out/pd-$p-$n.plan.json pdo=$out/pd-$p-$n
    rm -rf "$pdo" && mkdir -p "$pdo"
    best_of pf_s pd_planfarm_once ||
        { echo "$p $n: planfarm failed: $(cat "$out/pf.err")"; return; }
    best_of pd_s pd_pipedream_once
    rc=$?
    if [ $rc = 124 ]; then
        printf '%-15s %2s %9s %9s  PipeDream did not finish in %s s\n' "$p" "$n" "$pf_s" "-" "$timeout_s"
        return
    fi
    pd_ms=$(awk '/^Time per stage in pipeline:/ { printf "%.6f", $NF * 1000 }' "$pdo.log")
    if [ $rc != 0 ] || [ -z "$pd_ms" ]; then
        echo "$p $n: PipeDream failed (rc $rc): $(tail -n 2 "$pdo.log")"
        return
    fi
    # planfarm's plan under PipeDream's model: max over stages of forward + backward, Input ops zeroed
    pf_pd=$(jq -r --slurpfile g "$g" '
        ($g[0].ops | map({key: (.id | tostring), value: (if (.name | test("^node[0-9]+\\.Input")) then 0
                                                         else .fwd_ms + .bwd_ms end)}) | from_entries) as $c
        | [.stage_list[] | [.ops[] | $c[tostring]] | add] | max' "$plan")
    pd_plan "$pdo/gpus=$n.txt" "$g" "$plan" >"$pdo/pd.plan.json"
    pf_pf=$(pf_objective "$g" "$out/flat$n.json" "$plan")
    pd_pf=$(pf_objective "$g" "$out/flat$n.json" "$pdo/pd.plan.json")
    printf '%-15s %2s %9s %9s %7s | %10.3f %10.3f %8.4f | %10.3f %10.3f %8.4f\n' "$p" "$n" "$pf_s" "$pd_s" \
        "$(ratio "$pd_s" "$pf_s")" "$pf_pd" "$pd_ms" "$(awk -v a="$pf_pd" -v b="$pd_ms" 'BEGIN{print a/b}')" \
        "$pf_pf" "$pd_pf" "$(awk -v a="$pf_pf" -v b="$pd_pf" 'BEGIN{print a/b}')"
}

# ---------------------------------------------------------------- Piper
# Piper's driver (driver.cpp, unmodified), twice per input: `notp` keeps every node's 1-device
# configurations (plain and with activation recomputation), so Piper searches stages x per-stage
# data-parallel degree; without it Piper also picks, per node, one of the tensor-parallel
# configurations its input file lists (measured per layer and degree by Piper's own profiler).
# planfarm: `plan` (every S x R = D, constant R per stage, no recomputation) on a flat cluster of D
# devices at the file's bandwidth, 16 GiB each with no headroom (Piper keeps none), MB = D
# micro-batches in flight (so that stage s stashes S - s inputs, as Piper's 1F1B memory term does
# for a constant degree). The imported
# graph has no weight shapes (Piper's nodes are whole layers), so planfarm's TAP has nothing to
# split and planfarm plans with T = 1 in both rows: the `full` row shows what Piper gains from its
# per-layer configurations, on the same planfarm plan. planfarm's plan is priced under Piper's
# model by Piper's own getTPSForResult (bench/piper_eval.cpp).
piper_build() {
    for prog in piper_run piper_eval; do
        src=$peers/piper/driver.cpp
        [ $prog = piper_eval ] && src=$root/bench/piper_eval.cpp
        if [ ! -x "$out/$prog" ] || [ "$src" -nt "$out/$prog" ] || [ "$peers/piper/algo.cpp" -nt "$out/$prog" ]; then
            echo "   building $out/$prog (g++ -O3 -std=c++17)"
            g++ -O3 -std=c++17 -w -I"$peers/piper" "$src" -o "$out/$prog" || return 1
        fi
    done
}

piper() {
    echo
    echo "== Piper (driver.cpp FILE D 16 [notp]) against planfarm plan, D devices of 16 GiB"
    echo "   notp: Piper without tensor parallelism; full: Piper with its per-layer tensor-parallel configurations"
    echo "   Piper s = the driver's process (solve = CPU s of its runDP); planfarm s = import + plan (search = the"
    echo "   search's own wall s, no start-up or file reading); 'x' = Piper s / planfarm s, 'xs' = Piper solve / planfarm search"
    echo "   Piper model: time_per_sample of getTPSForResult (inf: a stage does not fit Piper's memory model)"
    echo "   pf model: planfarm's plan objective_ms (eq. 5 full); Piper's plan has per-stage degrees planfarm cannot express"
    piper_build || { echo "bench-peers: building Piper failed" >&2; return 1; }
    printf '%-11s %4s %4s %7s %7s %7s %7s %7s %6s | %12s %12s %8s | %9s  %s\n' input D mode "pf s" search \
        "Piper s" solve x xs "pf:Piper" "Piper:Piper" "pf/Piper" "pf:pf" "Piper's stages (d, or d x t, each)"
    inputs=${PF_PIPER_INPUTS:-bert32a100:8 resnet:8 gnmt:8 bert32a100:32 resnet:32 gnmt:32 bert32a100:512 resnet:512 gnmt:512}
    for in in $inputs; do
        piper_row "${in%%:*}" "${in##*:}"
    done
    echo
    echo "== planfarm's per-stage DPs against Piper in both modes, priced by Piper's getTPSForResult (bench/stagedeg_piper.sh)"
    make -s -C "$root" "${BUILD:-build}/pf_bench" >/dev/null &&
        BUILD=${BUILD:-build} PF_PEERS="$peers" PF_PEER_DATA="$data" \
            PF_PIPER_INPUTS="${PF_STAGEDEG_PIPER_INPUTS:-bert32a100:8 bert32a100:32 resnet:8 resnet:32 bert32a100:512 resnet:512}" \
            "$root/bench/stagedeg_piper.sh"
    echo
    echo "== planfarm plan --stage-degrees beside Piper's notp plan, both simulated by planfarm (bench/stagedeg_plan.sh)"
    BUILD=${BUILD:-build} PF_PEERS="$peers" PF_PEER_DATA="$data" "$root/bench/stagedeg_plan.sh"
}

# piper_once FILE D MODE: one run of Piper's driver; solve = the least CPU s of its runDP so far
piper_once() {
    stamp t0
    if [ "$3" = notp ]; then
        timeout "$timeout_s" "$out/piper_run" "$1" "$2" 16 notp >"$out/piper.out" 2>"$out/piper.err"
    else
        timeout "$timeout_s" "$out/piper_run" "$1" "$2" 16 >"$out/piper.out" 2>"$out/piper.err"
    fi || return
    stamp t1
    run_s=$(secs "$t0" "$t1")
    solve=$(least "$solve" "$(jq -r '.solve_s' "$out/piper.out")")
}

# piper_run FILE D MODE -> sets pi_rc pi_s solve tps stages (Piper's stages as "d" or "dxt")
piper_run() {
    solve='' tps=- stages=-
    best_of pi_s piper_once "$@"
    pi_rc=$?
    [ $pi_rc = 0 ] || { solve=-; return 0; }
    tps=$(jq -r '.time_per_sample' "$out/piper.out")
    stages=$(awk '/^formed a stage with nodes/ { d = ""; t = "";
                      for (i = 1; i <= NF; i++) { if ($i ~ /^d=/) d = substr($i, 3); if ($i ~ /^t=/) t = substr($i, 3) }
                      s = s (s ? "," : "") (t != "" && t != "1" ? d "x" t : d) }
                  END { print s }' "$out/piper.err")
}

# planfarm's side of piper_row; pf_search = the least of the plans' own search times so far
pf_piper_once() {
    stamp t0
    "$pf" import piper "$file" -o "$g" 2>"$out/pf.err" &&
        "$pf" plan "$g" "$cl" --microbatches "$d" --mem-headroom 0 --quiet -o "$plan" 2>"$out/pf.err" ||
        return
    stamp t1
    run_s=$(secs "$t0" "$t1")
    pf_search=$(least "$pf_search" "$(jq -r '.search.wall_s | . * 10000 | round / 10000' "$plan")")
}

piper_row() {
    m=$1 d=$2
    file=$data/piper/$m.json
    g=$out/piper-$m.json plan=$out/piper-$m-$d.plan.json
    gbps=$(jq -r '.bandwidth / 1e9' "$file")
    cl=$out/piper-flat$d.json
    "$pf" cluster hier --machines 1 --gpus "$d" --intra-gbps "$gbps" --mem-gb 16 --name "flat$d" -o "$cl" || return
    pf_search=
    best_of pf_s pf_piper_once
    rc=$?
    if [ $rc = 0 ]; then
        pf_pf=$(jq -r '.objective_ms * 1000 | round / 1000' "$plan")
        jq -r '.replicas as $r | .stage_list[] | "\($r) " + (.ops | map(tostring) | join(" "))' "$plan" >"$out/pf.stages"
        "$out/piper_eval" "$file" "$d" 16 notp "$out/pf.stages" >"$out/pf.piper" 2>/dev/null
        # Piper's function refuses some plans outright (it prints FAIL: ... into its JSON)
        pf_piper=$(jq -r '.time_per_sample' "$out/pf.piper" 2>/dev/null) || pf_piper=-
        [ "$pf_piper" = "1e+30" ] && pf_piper=inf
        [ "$pf_piper" = - ] &&
            echo "   (planfarm's plan for $m on $d: Piper's getTPSForResult refuses it: $(sed -n 's/.*FAIL: //p' "$out/pf.piper" | head -c 160))"
    else
        pf_pf="fail($rc)" pf_piper=- pf_s=- pf_search=-
    fi
    for mode in notp full; do
        piper_run "$file" "$d" "$mode"
        if [ $pi_rc = 124 ]; then
            printf '%-11s %4s %4s %7s %7s %7s   Piper did not finish in %s s: skipped\n' "$m" "$d" "$mode" \
                "$pf_s" "$pf_search" "> $timeout_s" "$timeout_s"
            continue
        elif [ $pi_rc != 0 ]; then
            printf '%-11s %4s %4s %7s %7s  Piper failed (rc %s): %s\n' "$m" "$d" "$mode" "$pf_s" "$pf_search" \
                "$pi_rc" "$(head -c 200 "$out/piper.out")"
            continue
        fi
        printf '%-11s %4s %4s %7s %7s %7s %7.3f %7s %6s | %12s %12s %8s | %9s  %s\n' "$m" "$d" "$mode" "$pf_s" \
            "$pf_search" "$pi_s" "$solve" "$(ratio "$pi_s" "$pf_s")" "$(ratio "$solve" "$pf_search")" \
            "$pf_piper" "$tps" \
            "$(awk -v a="$pf_piper" -v b="$tps" 'BEGIN{ if (a == "inf" || a == "-") print a; else printf "%.4f", a / b }')" \
            "$pf_pf" "$stages"
    done
}

# ---------------------------------------------------------------- Calculon
# Calculon's llm-optimal-execution (unmodified, through ../shared/peers/calculon_run.py): its
# exhaustive search over t, p, d, micro-batch, interleaving, recomputation, sequence parallelism,
# optimizer sharding, overlap and offload, on its own A100 80G system file, -m (its micro-batch
# early break, as the peers' README runs it). planfarm: `plan --block-search` with only the model,
# the cluster and the global batch given, on a graph of Calculon's model's shape
# (bench/calculon_model.py) and DGX A100 hosts of 8 at Calculon's effective figures (NVLink 300 GB/s
# x 0.65, InfiniBand 25 GB/s x 0.9 per GPU, its 10 / 20 us latencies). planfarm's plan is written
# as a Calculon execution (bench/calculon_exec.py) and priced by Calculon's own `llm`, so both
# step times come from one model: Calculon's.
calculon() {
    cal=$peers/calculon
    cal_cpus=${PF_CALCULON_CPUS:-$(nproc)}
    cal_timeout=${PF_CALCULON_TIMEOUT_S:-7200}
    echo
    echo "== Calculon (llm-optimal-execution MODEL GPUS BATCH float16 a100_80g.json -m -c $cal_cpus) against planfarm plan --block-search"
    echo "   search s: calculon = its search process; planfarm = model + plan processes (the plan's own search in"
    echo "   brackets); speed = calculon s / planfarm s. step by calculon: Calculon's total_time of planfarm's plan"
    echo "   (as a Calculon execution) and of Calculon's optimum; ratio = planfarm's / optimum's (targets: speed"
    echo "   >= 100, ratio <= 1.03). Knobs planfarm has no notion of are written as Calculon's example execution has"
    echo "   them: $(/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import calculon_exec as c
print(", ".join("%s %s" % (k, str(v).lower()) for k, v in c.FIXED.items()))' "$root/bench")"
    echo "   (data_par_overlap true: planfarm's step hides the data-parallel reduction behind the backward)"
    rows=${PF_CALCULON_ROWS:-gpt3-13B:8:64 gpt3-13B:32:64 megatron-22B:16:64 megatron-22B:64:64}
    [ "${PF_PEERS_CALCULON_BIG:-0}" = 1 ] && rows="$rows gpt3-175B:64:64"
    for r in $rows; do
        IFS=: read -r cm cn cb <<<"$r"
        calculon_row "$cm" "$cn" "$cb"
    done
}

# planfarm's side of calculon_row: the graph of Calculon's model's shape, then the free search
cal_planfarm_once() { # extra plan flags...
    stamp t0
    # shellcheck disable=SC2086
    "$pf" model gpt $cflags --microbatch 1 --device a100-80g --precision fp16 -o "$cg" 2>"$out/pf.err" &&
        "$pf" plan "$cg" "$ccl" --block-search --global-batch "$cb" --quiet "$@" -o "$cplan" 2>"$out/pf.err" ||
        return
    stamp t1
    run_s=$(secs "$t0" "$t1")
    pf_search=$(least "$pf_search" "$(jq -r '.search.wall_s | . * 10000 | round / 10000' "$cplan")")
}

cal_search_once() {
    local to=()
    [ "$cal_timeout" != 0 ] && to=(timeout "$cal_timeout")
    stamp t0
    "${to[@]}" /usr/bin/python3 "$peers/calculon_run.py" llm-optimal-execution "$cal/models/$cm.json" \
        "$cn" "$cb" float16 "$cal/systems/a100_80g.json" "$copt" -m -c "$cal_cpus" >"$copt.log" 2>&1 || return
    stamp t1
    run_s=$(secs "$t0" "$t1")
}

# cal_price PLAN -> Calculon's total_time (s) of the plan as an execution, or "refused: why"
# (Calculon reads and writes only files named *.json: PLAN.json -> PLAN.exe.json, PLAN.stats.json)
cal_price() {
    local b=${1%.json}
    rm -f "$b.stats.json"
    /usr/bin/python3 "$root/bench/calculon_exec.py" "$1" -o "$b.exe.json" 2>"$b.notes" ||
        { echo "refused: $(head -c 160 "$b.notes")"; return; }
    /usr/bin/python3 "$peers/calculon_run.py" llm "$cal/models/$cm.json" "$b.exe.json" \
        "$cal/systems/a100_80g.json" "$b.stats.json" >"$b.llm" 2>&1
    jq -r '.total_time' "$b.stats.json" 2>/dev/null ||
        echo "refused: $({ grep -o 'ERROR.*' "$b.llm" || tail -n 1 "$b.llm"; } | head -n 1 | head -c 160)"
}

# one execution in a few words: Calculon's own fields (planfarm's plan, converted, or the optimum)
cal_words() {
    jq -r '"t \(.tensor_par) p \(.pipeline_par) d \(.data_par) mbs \(.microbatch_size) v \(.pipeline_interleaving)"
        + " rec \(.activation_recompute) \(.tensor_par_comm_type)\(if .optimizer_sharding then " os" else "" end)"
        + "\(if .tensor_par_overlap != "none" then " tp-overlap " + .tensor_par_overlap else "" end)"
        + "\(if .data_par_overlap then " dp-overlap" else "" end)\(if .seq_par_ag_redo then " ag-redo" else "" end)"
        + "\(if .weight_offload then " w-offload" else "" end)\(if .activations_offload then " act-offload" else "" end)"
        + "\(if .optimizer_offload then " opt-offload" else "" end) nets \(.tensor_par_net)\(.pipeline_par_net)\(.data_par_net)"' "$1"
}

calculon_row() {
    cm=$1 cn=$2 cb=$3
    local tag=$cm-$cn-$cb
    cg=$out/cal-$cm.graph.json ccl=$out/cal-a100x$cn.json cplan=$out/cal-$tag.plan.json copt=$out/cal-$tag.opt.json
    cflags=$(/usr/bin/python3 "$root/bench/calculon_model.py" "$cal/models/$cm.json" 2>"$out/cal-$cm.notes") ||
        { echo "calculon: $cm: $(cat "$out/cal-$cm.notes")"; return; }
    "$pf" cluster dgx-a100 --machines $(((cn + 7) / 8)) --intra-gbps 195 --inter-gbps 22.5 \
        --latency-us 10 --inter-latency-us 20 --name "a100x$cn" -o "$ccl" || return
    pf_search=
    best_of pf_s cal_planfarm_once ||
        { echo "calculon: $cm $cn $cb: planfarm failed: $(head -c 300 "$out/pf.err")"; return; }
    # PF_CALCULON_SEARCH=0: planfarm's plan priced by Calculon's llm only (seconds, not hours)
    if [ "${PF_CALCULON_SEARCH:-1}" = 0 ]; then
        local st
        st=$(cal_price "$cplan")
        case $st in refused*) ;; *) st="$st s" ;; esac
        printf 'calculon: %s %s %s | planfarm %s s [%s] | step by calculon: %s (no search run)\n' \
            "$cm" "$cn" "$cb" "$pf_s" "$pf_search" "$st"
        echo "   planfarm:  $(cal_words "${cplan%.json}.exe.json" 2>/dev/null) (planfarm's own simulated step $(jq -r '.simulated_step_ms / 1000 | . * 1000 | round / 1000' "$cplan") s; ZeRO $(jq -r '.training.zero' "$cplan"))"
        sed 's/^calculon_exec: note: /   note: /' "${cplan%.json}.notes"
        local z
        for z in $(cal_zero_replans "$cplan"); do
            cplan=$out/cal-$tag.zero$z.plan.json
            if best_of pf1_s cal_planfarm_once --zero "$z"; then
                st=$(cal_price "$cplan")
                case $st in refused*) ;; *) st="$st s" ;; esac
                echo "calculon: $cm $cn $cb --zero $z | planfarm $pf1_s s | step by calculon: $st"
                echo "   planfarm:  $(cal_words "${cplan%.json}.exe.json" 2>/dev/null)"
                sed 's/^calculon_exec: note: /   note: /' "${cplan%.json}.notes"
            fi
        done
        return
    fi
    # a search's time and date beside its result: PF_CALCULON_REUSE=1 prints those of an earlier
    # run (marked) instead of searching again, for rows that take Calculon an hour
    # (or the newest record under bench/results/calculon-*/, when the build has none)
    local rec
    rec=$(find "$root/bench/results" -maxdepth 1 -type d -name "calculon-*" 2>/dev/null | sort | tail -n 1)
    rec=${rec:+$rec/}
    if [ "${PF_CALCULON_REUSE:-0}" = 1 ] && [ -n "$rec" ] && [ ! -s "$copt" ] && [ -s "$rec$tag.opt.json" ]; then
        cp "$rec$tag.opt.json" "$copt" && cp "$rec$tag.opt.json.wall" "$copt.wall"
    fi
    if [ "${PF_CALCULON_REUSE:-0}" = 1 ] && [ -s "$copt.wall" ] && [ -s "$copt" ]; then
        rc=0 cal_s="$(cut -d' ' -f1 "$copt.wall") (reused: $(cut -d' ' -f2- "$copt.wall"))"
    else
        best_of cal_s cal_search_once
        rc=$?
        [ $rc = 0 ] && echo "$cal_s $(date +%Y-%m-%d), load $(cut -d' ' -f1-3 /proc/loadavg)" >"$copt.wall"
    fi
    if [ $rc = 124 ]; then
        echo "calculon: $cm $cn $cb | Calculon's search did not finish in $cal_timeout s; planfarm $pf_s s"
        return
    elif [ $rc != 0 ] || ! jq -e '.["0"].stats.total_time' "$copt" >/dev/null 2>&1; then
        echo "calculon: $cm $cn $cb | Calculon's search failed (rc $rc): $(tail -n 2 "$copt.log" | head -c 300)"
        return
    fi
    opt_s=$(jq -r '.["0"].stats.total_time' "$copt")
    jq '.["0"].execution' "$copt" >"${copt%.json}.exe.json"
    pf_step=$(cal_price "$cplan")
    printf 'calculon: %s %s %s | search s calculon %s planfarm %s [%s] (speed %s x) | step by calculon: ' \
        "$cm" "$cn" "$cb" "$cal_s" "$pf_s" "$pf_search" "$(ratio "${cal_s%% *}" "$pf_s")"
    cal_step_words "$pf_step" "$opt_s"
    echo "   planfarm:  $(cal_words "${cplan%.json}.exe.json" 2>/dev/null) (planfarm's own simulated step $(jq -r '.simulated_step_ms / 1000 | . * 1000 | round / 1000' "$cplan") s; ZeRO $(jq -r '.training.zero' "$cplan"))"
    echo "   optimum:   $(cal_words "${copt%.json}.exe.json")"
    sed 's/^calculon_exec: note: /   note: /' "${cplan%.json}.notes"
    local free=$cplan z
    for z in $(cal_zero_replans "$cplan"); do
        cplan=$out/cal-$tag.zero$z.plan.json
        if best_of pf1_s cal_planfarm_once --zero "$z"; then
            printf 'calculon: %s %s %s --zero %s | planfarm %s s | step by calculon: ' "$cm" "$cn" "$cb" "$z" "$pf1_s"
            cal_step_words "$(cal_price "$cplan")" "$opt_s"
            echo "   planfarm:  $(cal_words "${cplan%.json}.exe.json" 2>/dev/null)"
        else
            echo "calculon: $cm $cn $cb --zero $z: planfarm failed: $(head -c 300 "$out/pf.err")"
        fi
    done
    cplan=$free
}

# The ZeRO stages to plan again within Calculon's space for a free plan (its optimizer sharding
# divides the optimizer state and the gradients, ZeRO 2's memory, not the weights): none when
# the free plan is in it (ZeRO 0-2); for ZeRO 3, the plans with ZeRO 2 and with ZeRO 1 fixed
# (both are Calculon executions; planfarm's own model picks between them otherwise)
cal_zero_replans() {
    [ "$(jq -r '.training.zero' "$1")" -ge 3 ] && echo "2 1"
}

cal_step_words() { # planfarm's step (or "refused: ...") and the optimum's, in seconds
    case $1 in
        refused*) printf "planfarm's plan %s, calculon's optimum %.4f s\n" "$1" "$2" ;;
        *) printf "planfarm's plan %.4f s, calculon's optimum %.4f s (ratio %.4f)\n" "$1" "$2" \
            "$(awk -v a="$1" -v b="$2" 'BEGIN { print a / b }')" ;;
    esac
}

status=0
wanted() { [ -z "$only" ] || [ "$only" = "$1" ]; }
if wanted pipedream; then
    if [ $pipedream_ok = 1 ]; then pipedream || status=1; else echo "SKIP PipeDream: missing packages or peer"; fi
fi
if wanted piper; then
    if [ $piper_ok = 1 ]; then piper || status=1; else echo "SKIP Piper: missing packages or peer"; fi
fi
if wanted calculon; then
    if [ $calculon_ok = 1 ]; then
        calculon || status=1
    else
        echo "SKIP Calculon: needs $peers/calculon_run.py and Debian's python3-psutil python3-numpy python3-pandas (scripts/setup.sh bench)"
    fi
fi
exit $status
