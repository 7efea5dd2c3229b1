#!/bin/sh
# --layer-aligned holds or the plan fails (issue 25 finding 4): a 6-layer GPT on two 4-GPU hosts,
# 2 stages. At 0.36 GiB per GPU whole layers do not fit while a cut inside layers.2 does; the
# partition's retry on single ops used to return that cut and `export megatron` then refused it
# ("stage 1 cuts block layers.2"). Now: exit 3 naming the constraint and no plan file. At 0.40 GiB
# the plan holds whole layers and exports.
#
# Needs PF_BIN (planfarm).
set -eu
BIN=${PF_BIN:-./planfarm}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_aligned.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; cat "$TMP/err" >&2 2>/dev/null || true; exit 1; }
pass() { echo "ok: $*"; }

"$BIN" model gpt --layers 6 --hidden 512 --heads 8 --seq 512 --vocab 1024 --microbatch 2 \
    -o "$TMP/gpt.json" 2>/dev/null
OPTS="--tp 1 --stages 2 --layer-aligned --quiet"

"$BIN" cluster hier --machines 2 --mem-gb 0.36 -o "$TMP/tight.json"
rc=0
# shellcheck disable=SC2086
"$BIN" plan "$TMP/gpt.json" "$TMP/tight.json" $OPTS -o "$TMP/tight-plan.json" 2>"$TMP/err" || rc=$?
[ "$rc" -eq 3 ] || fail "tight memory: exit $rc, want 3"
grep -q -- "--layer-aligned: no plan with whole layers per stage fits in memory; no partition into 2 stages of whole groups fits" "$TMP/err" ||
    fail "tight memory: the message does not name --layer-aligned"
[ ! -e "$TMP/tight-plan.json" ] || fail "tight memory: a plan file was written"
pass "no layer-aligned plan fits: exit 3 naming --layer-aligned"

"$BIN" cluster hier --machines 2 --mem-gb 0.40 -o "$TMP/roomy.json"
# shellcheck disable=SC2086
"$BIN" plan "$TMP/gpt.json" "$TMP/roomy.json" $OPTS -o "$TMP/plan.json" 2>"$TMP/err" ||
    fail "roomy memory: plan"
grep -q cut_blocks "$TMP/plan.json" && fail "roomy memory: the plan cuts a block"
"$BIN" export megatron "$TMP/gpt.json" "$TMP/roomy.json" "$TMP/plan.json" -o "$TMP/meg" \
    2>"$TMP/err" || fail "roomy memory: export refused the layer-aligned plan"
pass "a layer-aligned plan exports"
