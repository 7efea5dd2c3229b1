#!/bin/sh
# A calibrated GPU's model from the sweep to the plan: `planfarm calibrate` names its model after
# its base preset, so a graph priced on it must carry the model itself (graph key "device"), and
# the block search, which re-prices the graph at each micro-batch and split, must price on that
# model in process and on a remote worker alike. The calibrated model here is the H200's sweep
# fitted under the base h100-sxm: its table is not the preset's, its name is.
#
# Needs PF_BIN (planfarm) and PF_DATA (tests/data).
set -eu
BIN=${PF_BIN:-./planfarm}
DATA=${PF_DATA:-tests/data}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_calibrate.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log "$TMP/err"; do [ -f "$f" ] && tail -n 20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

# analytic FILE: the block search's analytic step of a plan file
analytic() { sed -n 's/.*"analytic_step_ms": \([0-9.e+-]*\).*/\1/p' "$1" | head -n 1; }

"$BIN" calibrate "$DATA/devices/h200-sweep.json" --base h100-sxm -o "$TMP/mine.json" -q 2>"$TMP/err" ||
    fail "calibrate"
grep -q '"name": "h100-sxm"' "$TMP/mine.json" || fail "the calibrated model is not named after its base"
SHAPE="--layers 4 --hidden 1024 --heads 16 --seq 1024 --vocab 1000 --microbatch 1"
# shellcheck disable=SC2086
"$BIN" model gpt $SHAPE --device "$TMP/mine.json" -o "$TMP/mine-gpt.json" 2>"$TMP/err" ||
    fail "model --device FILE"
# shellcheck disable=SC2086
"$BIN" model gpt $SHAPE --device h100-sxm -o "$TMP/preset-gpt.json" 2>"$TMP/err" ||
    fail "model --device h100-sxm"
"$BIN" check "$TMP/mine-gpt.json" >"$TMP/check" 2>"$TMP/err" || fail "check"
grep -q "priced on:    h100-sxm (a model of its own under that name, in the file)" "$TMP/check" ||
    fail "check does not say the graph carries its own model"
"$BIN" check "$TMP/preset-gpt.json" | grep -q "priced on:    h100-sxm (the preset)" ||
    fail "check does not say the preset"
grep -q '"device": {' "$TMP/preset-gpt.json" && fail "a preset's graph carries a model"
pass "the calibrated model travels in the graph file; the preset by name"

"$BIN" cluster dgx-h100 --machines 2 -o "$TMP/c.json"
PLAN="--global-batch 32 --block-search --quiet"
# shellcheck disable=SC2086
"$BIN" plan "$TMP/mine-gpt.json" "$TMP/c.json" $PLAN -o "$TMP/mine-plan.json" 2>"$TMP/err" ||
    fail "plan (embedded)"
# shellcheck disable=SC2086
"$BIN" plan "$TMP/preset-gpt.json" "$TMP/c.json" $PLAN -o "$TMP/preset-plan.json" 2>"$TMP/err" ||
    fail "plan (preset)"
a_mine=$(analytic "$TMP/mine-plan.json")
a_preset=$(analytic "$TMP/preset-plan.json")
if [ -z "$a_mine" ] || [ -z "$a_preset" ]; then fail "no analytic step in the plans"; fi
[ "$a_mine" != "$a_preset" ] || fail "the block search priced the calibrated graph as the preset ($a_mine ms)"
pass "the block search prices on the carried model ($a_mine ms; the preset's graph $a_preset ms)"

: >"$TMP/broker.log"
"$BIN" broker --bind tcp://127.0.0.1:0 --journal none >"$TMP/broker.log" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 1 600); do grep -q "serving on" "$TMP/broker.log" && break; sleep 0.05; done
EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker.log")
[ -n "$EP" ] || fail "broker did not start"
"$BIN" worker --connect "$EP" --threads 1 --name w1 >"$TMP/worker.log" 2>&1 &
PIDS="$PIDS $!"
# shellcheck disable=SC2086
"$BIN" plan "$TMP/mine-gpt.json" "$TMP/c.json" $PLAN --broker "$EP" -o "$TMP/remote-plan.json" \
    2>"$TMP/err" || fail "plan through the broker"
a_remote=$(analytic "$TMP/remote-plan.json")
[ "$a_remote" = "$a_mine" ] || fail "through the broker $a_remote ms, in process $a_mine ms"
pass "a remote worker prices on the same carried model ($a_remote ms)"
