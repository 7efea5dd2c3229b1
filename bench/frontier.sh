#!/usr/bin/env bash
# Frontier scale (issue 23): cluster generation, `planfarm check` and `planfarm plan` wall time and
# peak resident memory (GNU time) from 1,536 to 131,072 GPUs. Models and (t, p) from Megatron-LM's
# weak-scaling table (../shared/data/megatron/narayanan2021_table1.json) and Llama 3 405B
# (../shared/data/megatron/llama3_405b.json): S and T fixed as the papers ran them.
# usage: bench/frontier.sh [PLANFARM] [DIR] [PLAN_TIMEOUT_S]; prints one line per measurement.
# FRONTIER_16K=1 adds Llama 3 405B on 16,384 H100 and the 1T GPT on 131,072; FRONTIER_GROWTH=1
# plans the 1T GPT (PP 64 x TP 8, 64 micro-batches per replica) on 1,024 to 131,072 H100 and
# fits the growth exponents of wall time and peak memory (least squares on log-log).
# FRONTIER_ROWS="gpt1t-3072 llama405b-16384" plans only the plan rows of those labels (and skips
# the matrix clusters unless a label asks for one); each row also prints the mapping search's
# nodes and seconds (the plan's "search" object).
set -u
pf=${1:-./planfarm}
dir=${2:-build/frontier}
limit=${3:-600}
mkdir -p "$dir"

# "<wall s> <peak RSS MB> <exit status> <CPU s>" of a command, its output into $dir/last.log
measure() {
    /usr/bin/time -f "%e %M %U %S" -o "$dir/time.txt" timeout "$limit" "$@" >"$dir/last.log" 2>&1
    local rc=$? wall=0 kb=0 user=0 sys=0
    # the numbers are the last line (a killed command's status line comes first)
    read -r wall kb user sys < <(tail -n 1 "$dir/time.txt")
    echo "$wall $((kb / 1024)) $rc $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')"
}

# whether plan row LABEL is selected (FRONTIER_ROWS unset: every row)
selected() {
    [ -z "${FRONTIER_ROWS:-}" ] && return 0
    case " $FRONTIER_ROWS " in *" $1 "*) return 0 ;; esac
    return 1
}

cluster_row() { # KIND MACHINES [--matrix]
    local f="$dir/$1x$2${3:+-matrix}.json"
    if [ -n "${3:-}" ] && [ -n "${FRONTIER_ROWS:-}" ]; then
        case "$FRONTIER_ROWS" in *matrix*) ;; *) return 0 ;; esac
    fi
    local gen chk flags=()
    [ -n "${3:-}" ] && flags=("$3")
    gen=$(measure "$pf" cluster "$1" --machines "$2" "${flags[@]}" -o "$f")
    chk=$(measure "$pf" check "$f")
    printf 'cluster %-8s x %5d %-8s gpus %6d  file %10d B  generate %s  check %s\n' "$1" "$2" \
        "${3:-}" $(($2 * 8)) "$(stat -c %s "$f" 2>/dev/null || echo 0)" "$gen" "$chk"
}

plan_row() { # LABEL GRAPH CLUSTER FLAGS...
    local label=$1 g=$2 c=$3
    shift 3
    selected "$label" || return 0
    local r
    r=$(measure "$pf" plan "$g" "$c" -o "$dir/$label.plan.json" "$@")
    local warn
    warn=$(grep -c -E '^W:|warning' "$dir/last.log")
    printf 'plan %-28s wall_s peak_MB rc cpu_s: %s  warnings %s\n' "$label" "$r" "$warn"
    grep -E '^plan for|search:' "$dir/last.log" | sed 's/^/    /'
    [ "$(tail -c 300 "$dir/last.log" | grep -c 'planfarm plan:')" -gt 0 ] && tail -2 "$dir/last.log" | sed 's/^/    /'
}

"$pf" model gpt --layers 80 --hidden 12288 --heads 96 --seq 2048 --vocab 51200 --microbatch 1 \
    -o "$dir/gpt145b.json" >/dev/null
"$pf" model gpt --layers 128 --hidden 25600 --heads 160 --seq 2048 --vocab 51200 --microbatch 1 \
    -o "$dir/gpt1t.json" >/dev/null
"$pf" model llama --preset 405b --seq 8192 -o "$dir/llama405b.json" >/dev/null

cluster_row dgx-a100 192 --matrix
cluster_row dgx-a100 192
cluster_row dgx-a100 384 --matrix
cluster_row dgx-a100 384
cluster_row dgx-h100 2048
cluster_row dgx-h100 16384

plan_row gpt145b-1536-matrix "$dir/gpt145b.json" "$dir/dgx-a100x192-matrix.json" \
    --stages 8 --tp 8 --global-batch 2304 --recompute full --layer-aligned
plan_row gpt145b-1536 "$dir/gpt145b.json" "$dir/dgx-a100x192.json" \
    --stages 8 --tp 8 --global-batch 2304 --recompute full --layer-aligned
plan_row gpt1t-3072-matrix "$dir/gpt1t.json" "$dir/dgx-a100x384-matrix.json" \
    --stages 64 --tp 8 --global-batch 3072 --recompute full --layer-aligned
plan_row gpt1t-3072 "$dir/gpt1t.json" "$dir/dgx-a100x384.json" \
    --stages 64 --tp 8 --global-batch 3072 --recompute full --layer-aligned
if [ "${FRONTIER_16K:-0}" = 1 ]; then
    plan_row llama405b-16384 "$dir/llama405b.json" "$dir/dgx-h100x2048.json" \
        --stages 16 --tp 8 --global-batch 2048 --recompute full --layer-aligned
fi
if [ "${FRONTIER_16K:-0}" = 1 ]; then
    plan_row gpt1t-131072 "$dir/gpt1t.json" "$dir/dgx-h100x16384.json" \
        --stages 64 --tp 8 --global-batch 16384 --recompute full --layer-aligned
fi

if [ "${FRONTIER_GROWTH:-0}" = 1 ]; then
    : >"$dir/growth.txt"
    for m in 128 256 512 2048 16384; do
        [ -f "$dir/dgx-h100x$m.json" ] || "$pf" cluster dgx-h100 --machines "$m" \
            -o "$dir/dgx-h100x$m.json" >/dev/null
        r=$(measure "$pf" plan "$dir/gpt1t.json" "$dir/dgx-h100x$m.json" -o "$dir/growth.plan.json" \
            --stages 64 --tp 8 --global-batch $((m)) --recompute full --layer-aligned)
        printf 'growth gpt1t gpus %6d  wall_s peak_MB rc cpu_s: %s\n' $((m * 8)) "$r"
        echo "$((m * 8)) $r" >>"$dir/growth.txt"
    done
    # slope of log(y) on log(gpus): time and memory exponents
    awk '{ x = log($1); n++; sx += x; sxx += x * x; st += log($2); sxt += x * log($2);
           sm += log($3); sxm += x * log($3) }
         END { d = n * sxx - sx * sx;
               printf "growth exponent 1,024 -> 131,072 GPUs: time %.3f, memory %.3f\n",
                      (n * sxt - sx * st) / d, (n * sxm - sx * sm) / d }' "$dir/growth.txt"
fi
