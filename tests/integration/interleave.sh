#!/bin/sh
# Interleaved 1F1B end to end: llama-7b on two DGX-H100 hosts, t 2, p 4, 32 micro-batches, planned
# with 1, 2 and 4 virtual stages by the block search. The search simulates each candidate with its
# chunks (planner/sim/chunks.h, through the SIMULATE job's wire plan), so the plan's own step falls
# as the bubble (p - 1)/(v m) shrinks, and `planfarm simulate` of the saved plan gives the same
# step to the 0.01 ms it prints (the plan file keeps virtual_stages and sequence_parallel).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
PF_BIN=${PF_BIN:-$top/planfarm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
PF_BIN=$PF_BIN "$top/examples/make-examples.sh" "$tmp/ex" >/dev/null 2>&1
step_of() { # plan file -> its simulated_step_ms
    sed -n 's/.*"simulated_step_ms": *\([0-9.e+-]*\).*/\1/p' "$1" | head -n 1
}
prev=""
for v in 1 2 4; do
    "$PF_BIN" plan "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" --block-search \
        --global-batch 64 --tp 2 --stages 4 --virtual-stages "$v" --sequence-parallel on \
        -o "$tmp/v$v.json" >/dev/null 2>&1 || { echo "FAIL: plan --virtual-stages $v"; exit 1; }
    grep -q "\"virtual_stages\": $v" "$tmp/v$v.json" ||
        { echo "FAIL: the v $v plan does not say virtual_stages $v"; exit 1; }
    step=$(step_of "$tmp/v$v.json")
    sim=$("$PF_BIN" simulate "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" "$tmp/v$v.json" |
          sed -n 's/^step \([0-9.]*\) ms.*/\1/p')
    awk -v a="$step" -v b="$sim" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01) }' ||
        { echo "FAIL: v $v: the plan's step $step, planfarm simulate's $sim"; exit 1; }
    if [ -n "$prev" ]; then
        awk -v a="$step" -v b="$prev" 'BEGIN { exit !(a < b) }' ||
            { echo "FAIL: v $v: step $step not below $prev"; exit 1; }
    fi
    echo "ok: v $v: step $step ms (planfarm simulate: $sim)"
    prev=$step
done
echo "interleave: 3 passed, 0 failed"
