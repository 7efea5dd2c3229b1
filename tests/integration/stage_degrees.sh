#!/bin/sh
# Stages that differ (issue 24): `planfarm plan --stage-degrees` on PipeDream's VGG-16 profile and
# one host of 8 GPUs (Parmesan's hier kind) chooses a plan whose stages run on different numbers of
# replicas, as PipeDream's optimizer does for VGG (the convolutions replicated, the classifier
# less): it is simulated faster per sample than the best uniform plan, and that uniform plan is
# what `plan` without the flag writes. The plan file carries each stage's replicas and tp, uses at
# most the 8 GPUs, simulates again to the same step, draws a timeline with each stage's rows, and
# export refuses it (exit 3) naming the stages. Without --global-batch the flag is bad usage.
#
# Needs PF_BIN (planfarm) and jq.
set -eu
BIN=${PF_BIN:-./planfarm}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v jq >/dev/null 2>&1 || { echo "FAIL: stage_degrees: jq missing (scripts/setup.sh test)" >&2; exit 1; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_stagedeg.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: stage_degrees: $*" >&2; exit 1; }

"$BIN" import pipedream "$ROOT/tests/data/pipedream/vgg16.txt" -o "$TMP/vgg.json" 2>/dev/null ||
    fail "cannot import tests/data/pipedream/vgg16.txt"
"$BIN" cluster hier --machines 1 --gpus 8 -o "$TMP/c.json"
"$BIN" plan "$TMP/vgg.json" "$TMP/c.json" --global-batch 4096 --stage-degrees --workers 1 \
    -o "$TMP/deg.json" 2>"$TMP/deg.err"
"$BIN" plan "$TMP/vgg.json" "$TMP/c.json" --global-batch 4096 --workers 1 --quiet \
    -o "$TMP/uni.json"

rec='.search.stage_degrees'
[ "$(jq "$rec.chosen" "$TMP/deg.json")" = true ] ||
    fail "the per-stage plan was not chosen: $(jq -c "$rec" "$TMP/deg.json")"
grep -q "per-stage degrees: chosen" "$TMP/deg.err" || fail "summary: $(cat "$TMP/deg.err")"
mixed=$(jq '[.stage_list[].replicas] | unique | length' "$TMP/deg.json")
[ "$mixed" -gt 1 ] || fail "every stage has the same replicas: $(jq -c '[.stage_list[].replicas]' "$TMP/deg.json")"
used=$(jq '[.stage_list[] | .replicas * .tp] | add' "$TMP/deg.json")
[ "$used" -le 8 ] || fail "the stages use $used GPUs of 8"
n=$(jq '.microbatches * .replicas' "$TMP/deg.json")
[ "$n" -eq 32 ] || fail "$n micro-batches per step, 4096 / 128 = 32 expected"
jq -e '[.stage_list[] | (.devices | length) == .replicas] | all' "$TMP/deg.json" >/dev/null ||
    fail "a stage's devices do not match its replicas"
# faster per sample than the uniform plan, whose figure is the plain search's plan
awk -v a="$(jq "$rec.per_stage_ms_per_sample" "$TMP/deg.json")" \
    -v b="$(jq "$rec.uniform_ms_per_sample" "$TMP/deg.json")" 'BEGIN { exit !(a < b) }' ||
    fail "per stage $(jq "$rec.per_stage_ms_per_sample" "$TMP/deg.json") ms per sample, not below uniform"
awk -v a="$(jq "$rec.uniform_ms_per_sample" "$TMP/deg.json")" \
    -v s="$(jq '.simulated_step_ms' "$TMP/uni.json")" -v n="$(jq '.global_batch' "$TMP/uni.json")" \
    'BEGIN { d = a - s / n; exit !(d < 1e-9 * a && d > -1e-9 * a) }' ||
    fail "the recorded uniform figure is not the plain plan's ($(jq '.simulated_step_ms' "$TMP/uni.json") ms)"
# simulate again: the same step; the timeline's rows name each stage as often as it has devices
"$BIN" simulate "$TMP/vgg.json" "$TMP/c.json" "$TMP/deg.json" --timeline "$TMP/t.svg" >"$TMP/sim.txt"
step=$(sed -n 's/^step \([0-9.]*\) ms.*/\1/p' "$TMP/sim.txt")
awk -v a="$step" -v b="$(jq '.simulated_step_ms' "$TMP/deg.json")" \
    'BEGIN { exit !(a - b < 0.01 && b - a < 0.01) }' || fail "simulate says $step ms"
for s in $(jq '.stage_list[].id' "$TMP/deg.json"); do
    want=$(jq ".stage_list[$s].replicas * .stage_list[$s].tp" "$TMP/deg.json")
    got=$(grep -o "(stage $s)" "$TMP/t.svg" | wc -l)
    [ "$got" -eq "$want" ] || fail "timeline: $got rows of stage $s, $want devices"
done
# export: no Megatron-LM form
if "$BIN" export megatron "$TMP/vgg.json" "$TMP/c.json" "$TMP/deg.json" -o "$TMP/x.sh" 2>"$TMP/x.err"; then
    fail "export accepted a plan whose stages differ"
else
    rc=$?
fi
[ "$rc" -eq 3 ] || fail "export exit $rc, expected 3"
grep -q "heterogeneous stages" "$TMP/x.err" || fail "export said: $(cat "$TMP/x.err")"
# the flag needs a global batch
if "$BIN" plan "$TMP/vgg.json" "$TMP/c.json" --stage-degrees --quiet -o "$TMP/no.json" 2>"$TMP/no.err"; then
    fail "--stage-degrees without --global-batch was accepted"
else
    rc=$?
fi
[ "$rc" -eq 2 ] && grep -q "stage_degrees: needs global_batch" "$TMP/no.err" ||
    fail "without --global-batch: exit $rc, $(cat "$TMP/no.err")"
# Piper's BERT-32 on 8 GPUs of 16 GiB at Piper's 25 GB/s: no uniform partition fits (15.1 GiB on
# the largest stage), so the per-stage plans alone are simulated; the plan comes from them, some
# stages recomputing in full (their memory), and says no uniform plan fits
"$BIN" import piper "$ROOT/tests/data/piper/bert32a100.json" -o "$TMP/bert.json" 2>/dev/null
"$BIN" cluster nvswitch --machines 1 --intra-gbps 25 --inter-gbps 25 --mem-gb 16 -o "$TMP/b8.json"
"$BIN" plan "$TMP/bert.json" "$TMP/b8.json" --global-batch 1920 --workers 1 --quiet -o "$TMP/bu.json" \
    2>"$TMP/bu.err" && fail "a uniform BERT-32 plan now fits 8 x 16 GiB: pick another case"
grep -q "no partition into 8 stages fits" "$TMP/bu.err" || fail "uniform BERT-32: $(cat "$TMP/bu.err")"
"$BIN" plan "$TMP/bert.json" "$TMP/b8.json" --global-batch 1920 --stage-degrees --workers 1 \
    --quiet -o "$TMP/bd.json" 2>"$TMP/bd.err" || fail "BERT-32 per stage: $(cat "$TMP/bd.err")"
[ "$(jq -r "$rec.why" "$TMP/bd.json")" = "no uniform partition fits memory" ] ||
    fail "BERT-32 record: $(jq -c "$rec" "$TMP/bd.json")"
jq -e '([.stage_list[].recompute] | index("full") != null) or .training.recompute == "full"' \
    "$TMP/bd.json" >/dev/null ||
    fail "no BERT-32 stage recomputes: $(jq -c '[.stage_list[].recompute]' "$TMP/bd.json")"
used=$(jq '[.stage_list[] | .replicas * .tp] | add' "$TMP/bd.json")
[ "$used" -le 8 ] || fail "BERT-32: the stages use $used GPUs of 8"
echo "ok: vgg16 on 8 GPUs: stages $(jq -r "$rec.degrees" "$TMP/deg.json"), $(jq "$rec.per_stage_ms_per_sample * 1000 | round / 1000" "$TMP/deg.json") ms per sample against $(jq "$rec.uniform_ms_per_sample * 1000 | round / 1000" "$TMP/deg.json") uniform"
echo "stage_degrees: 1 passed, 0 failed"
