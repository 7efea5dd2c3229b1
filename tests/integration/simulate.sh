#!/bin/sh
# Phase 4 through the farm, on loopback only: a broker and one worker plan BERT-4 with tensor
# parallelism 2 on two DGX-1s; the search's RESHARD jobs (cross-stage transfers between 1 x 2
# meshes) and SIMULATE jobs (every candidate under 1f1b, gpipe and eager-1f1b) run on the worker,
# and the plan must equal the embedded one. `planfarm simulate` on that plan alone (TAP rebuilt
# in-process) prints the step time the plan carries, and --schedule gpipe restricts the choice.
#
# Needs PF_BIN (planfarm), PF_TESTTOOL (build/pf_testtool).
set -eu
BIN=${PF_BIN:-./planfarm}
TOOL=${PF_TESTTOOL:-build/pf_testtool}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_sim.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

"$BIN" model bert --layers 4 -o "$TMP/bert.json" >/dev/null
"$BIN" cluster dgx1 --machines 2 -o "$TMP/dgx.json" >/dev/null
OPTS="--tp 2 --stages 2 --candidates 1"
# shellcheck disable=SC2086
"$BIN" plan "$TMP/bert.json" "$TMP/dgx.json" $OPTS -o "$TMP/embedded.json" --quiet ||
    fail "embedded plan"

"$BIN" broker --journal none --bind tcp://127.0.0.1:0 --heartbeat-ms 100 >"$TMP/broker.log" 2>&1 &
PIDS="$PIDS $!"
EP=""
for _ in $(seq 1 100); do
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker.log" 2>/dev/null || true)
    [ -n "$EP" ] && break
    sleep 0.05
done
[ -n "$EP" ] || fail "the broker did not start"
"$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms 100 --name w1 --verbose \
    >"$TMP/worker.log" 2>&1 &
PIDS="$PIDS $!"

# shellcheck disable=SC2086
"$BIN" submit "$TMP/bert.json" "$TMP/dgx.json" $OPTS --broker "$EP" --wait --quiet \
    -o "$TMP/farm.json" || fail "submit --wait"
"$TOOL" compare "$TMP/embedded.json" "$TMP/farm.json" 0.001 || fail "farm and embedded plans differ"
# S = 2, R = 4: one RESHARD job per distinct transfer of a stage boundary (the 4 replicas'
# transfers have one key, planner/sim/replica_groups.h: 1 job); 3 schedules, one candidate, and
# the winner's two baselines (CS map, p2p map) are SIMULATE jobs too
n=$(grep -c "(reshard) done" "$TMP/worker.log" || true)
[ "$n" -eq 1 ] || fail "$n RESHARD jobs answered by the worker, expected 1"
n=$(grep -c "(simulate) done" "$TMP/worker.log" || true)
[ "$n" -eq 5 ] || fail "$n SIMULATE jobs answered by the worker, expected 5"
pass "RESHARD and SIMULATE jobs through the broker; the plan matches the embedded one"

grep -q '"tensor_parallel": 2' "$TMP/farm.json" || fail "not a TP plan"
step=$(sed -n 's/^  "simulated_step_ms": \([0-9.]*\).*/\1/p' "$TMP/farm.json")
sched=$(sed -n 's/^  "schedule": "\([a-z0-9-]*\)".*/\1/p' "$TMP/farm.json")
"$BIN" simulate "$TMP/bert.json" "$TMP/dgx.json" "$TMP/farm.json" >"$TMP/sim.out" ||
    fail "planfarm simulate on the TP plan"
first=$(head -n 1 "$TMP/sim.out")
want=$(printf 'step %.2f ms (%s, 4 micro-batches,' "$step" "$sched")
case "$first" in "$want"*) ;; *) fail "simulate says '$first', the plan '$want'" ;; esac
pass "planfarm simulate re-simulates the TP plan: $first"

# shellcheck disable=SC2086
"$BIN" plan "$TMP/bert.json" "$TMP/dgx.json" $OPTS --schedule gpipe -o "$TMP/gpipe.json" --quiet ||
    fail "plan --schedule gpipe"
grep -q '"schedule": "gpipe"' "$TMP/gpipe.json" || fail "--schedule gpipe did not fix the schedule"
pass "--schedule restricts the choice"
