#!/bin/sh
# Two hosts, 8 A100 beside 8 H100 (issue 24 item 2): `planfarm cluster dgx-h100 --models
# a100-80g,h100-sxm` names each host's device model, the ops are priced on each device's kind,
# and a two-stage plan with T = 8 gives the H100 host's stage more of a 24-layer GPT than the A100
# host's; the same plan on 16 H100 splits the layers evenly (within one), and the mixed cluster's
# step is slower than the all-H100 one and faster than an all-A100 one (a uniform cluster takes
# the graph's times as they are, devkinds.h: the all-A100 plan gets a graph priced on the A100).
# The op-level search's partition (--no-block-search): the block search would give the last stage
# a layer fewer for the head on any cluster.
#
# Needs PF_BIN (planfarm) and jq.
set -eu
BIN=${PF_BIN:-./planfarm}
command -v jq >/dev/null 2>&1 || { echo "FAIL: mixed_gpus: jq missing (scripts/setup.sh test)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_mixed.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: mixed_gpus: $*" >&2; exit 1; }

"$BIN" model gpt --layers 24 --hidden 4096 --heads 32 --seq 2048 --microbatch 1 \
    --device h100-sxm -o "$TMP/h100-sxm,h100-sxm.g.json" 2>/dev/null
cp "$TMP/h100-sxm,h100-sxm.g.json" "$TMP/a100-80g,h100-sxm.g.json"
"$BIN" model gpt --layers 24 --hidden 4096 --heads 32 --seq 2048 --microbatch 1 \
    --device a100-80g -o "$TMP/a100-80g,a100-80g.g.json" 2>/dev/null
for kind in a100-80g,h100-sxm h100-sxm,h100-sxm a100-80g,a100-80g; do
    "$BIN" cluster dgx-h100 --machines 2 --models "$kind" -o "$TMP/$kind.json"
    "$BIN" plan "$TMP/$kind.g.json" "$TMP/$kind.json" --global-batch 512 --stages 2 --tp 8 \
        --no-block-search --quiet -o "$TMP/$kind.plan.json"
done

# layers of stage s: its ops named layers.N.mlp.residual (one per layer, its end); the host of its
# first device
layers() { jq --argjson s "$2" '[.stage_list[$s].op_names[] | select(endswith(".mlp.residual"))] | length' "$1"; }
host_of_stage() { jq ".stage_list[$2].devices[0][0] / 8 | floor" "$1"; }
step() { jq '.simulated_step_ms' "$1"; }

mix=$TMP/a100-80g,h100-sxm.plan.json
hh=$TMP/h100-sxm,h100-sxm.plan.json
aa=$TMP/a100-80g,a100-80g.plan.json
l0=$(layers "$mix" 0) l1=$(layers "$mix" 1)
[ $((l0 + l1)) -eq 24 ] || fail "the mixed plan holds $l0 + $l1 layers, not 24"
# host 1 is the H100 host (--models: consecutive blocks, the first A100)
if [ "$(host_of_stage "$mix" 0)" = 1 ]; then fast=$l0 slow=$l1; else fast=$l1 slow=$l0; fi
[ "$fast" -gt "$slow" ] || fail "the H100 stage holds $fast layers, the A100 stage $slow"
h0=$(layers "$hh" 0) h1=$(layers "$hh" 1)
if [ $((h0 - h1)) -gt 1 ] || [ $((h1 - h0)) -gt 1 ]; then fail "16 H100: $h0 and $h1 layers"; fi
awk -v a="$(step "$aa")" -v m="$(step "$mix")" -v h="$(step "$hh")" \
    'BEGIN { exit !(h < m && m < a) }' ||
    fail "steps: all H100 $(step "$hh"), mixed $(step "$mix"), all A100 $(step "$aa") ms"
echo "ok: 8 A100 + 8 H100: the H100 stage holds $fast of 24 layers (16 H100: $h0 + $h1);" \
    "steps all-H100 < mixed < all-A100"
echo "mixed_gpus: 1 passed, 0 failed"
