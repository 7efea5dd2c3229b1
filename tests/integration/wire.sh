#!/bin/sh
# The distributed spine end to end, on loopback only: a broker and worker processes plan a
# generated BERT and an imported ResNet-50 and must agree with the embedded `planfarm plan`;
# faults: a worker killed with SIGKILL mid-search, a worker frozen with SIGSTOP (silent, then
# back), a job that hangs past its deadline (--test-hang-kind, a hidden test-only worker flag:
# the worker), and a hostile client. Every process is started here and killed on exit. The
# searches take tens of milliseconds, so the fault runs slow every job down by 40 ms
# (--test-delay-ms, the other hidden test hook) to have a middle to kill a worker in.
#
# Needs PF_BIN (planfarm), PF_TESTTOOL (build/pf_testtool), PF_DATA (tests/data).
set -eu
BIN=${PF_BIN:-./planfarm}
TOOL=${PF_TESTTOOL:-build/pf_testtool}
DATA=${PF_DATA:-tests/data}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_wire.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

HB=100       # heartbeat ms, broker and workers alike: a silent worker is dead after 0.5 s
LIVENESS=5
EPS=0.001    # the binary search's default relative epsilon
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

# start_broker NAME [flags]: a broker on a port the kernel picks; sets EP.
start_broker() {
    name=$1; shift
    : >"$TMP/$name.log"
    "$BIN" broker --bind tcp://127.0.0.1:0 --journal none --heartbeat-ms $HB --liveness $LIVENESS "$@" \
        >"$TMP/$name.log" 2>&1 &
    PIDS="$PIDS $!"
    BROKER_PID=$!
    wait_log "$TMP/$name.log" "serving on" || fail "broker $name did not start"
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/$name.log" 2>/dev/null || true)
}

# start_worker NAME [flags]: sets WORKER_PID. WORKER_TEST: hidden test-hook flags for it.
WORKER_TEST=""
start_worker() {
    name=$1; shift
    "$BIN" worker $WORKER_TEST --connect "$EP" --threads 1 --heartbeat-ms $HB --liveness $LIVENESS \
        --name "$name" "$@" >"$TMP/$name.log" 2>&1 &
    WORKER_PID=$!
    PIDS="$PIDS $WORKER_PID"
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# Waits below are for events (a log line, a state), bounded by 30 s only to end a failing run:
# nothing here depends on how fast a loaded machine gets there.
# wait_log FILE PATTERN [COUNT]: until PATTERN occurs COUNT (default 1) times in FILE; 1 if never.
wait_log() {
    for _ in $(seq 1 600); do
        [ "$(grep -c "$2" "$1")" -ge "${3:-1}" ] && return 0
        sleep 0.05
    done
    return 1
}

# wait_finished ID: until the request is done or failed (60 s: a search, not a message).
wait_finished() {
    for _ in $(seq 1 1200); do
        s=$(state "$1"); [ "$s" = done ] || [ "$s" = failed ] && return 0
        sleep 0.05
    done
    return 1
}

# state ID: the request's state word (running, done, ...).
state() { "$BIN" status "$1" --broker "$EP" 2>/dev/null | sed -n '1s/.*: //p'; }

# wait_answered ID N: until N jobs of the request are answered (or 30 s).
wait_answered() {
    for _ in $(seq 1 600); do
        n=$("$BIN" status "$1" --broker "$EP" 2>/dev/null | sed -n 's/.*issued: \([0-9]*\) answered.*/\1/p')
        [ -n "$n" ] && [ "$n" -ge "$2" ] && return 0
        sleep 0.05
    done
    fail "request $1 never reached $2 answered jobs"
}

# ---- inputs ----
"$BIN" model bert --layers 4 -o "$TMP/bert.json"
"$BIN" import pipedream "$DATA/pipedream/resnet50.txt" -o "$TMP/resnet50.json"
"$BIN" cluster dgx1 --machines 1 -o "$TMP/dgx1.json"

# ---- embedded references ----
"$BIN" plan "$TMP/bert.json" "$TMP/dgx1.json" -o "$TMP/bert.embedded.json" --quiet ||
    fail "embedded plan of BERT"
"$BIN" plan "$TMP/resnet50.json" "$TMP/dgx1.json" -o "$TMP/resnet.embedded.json" --quiet ||
    fail "embedded plan of ResNet-50"
"$BIN" plan "$TMP/bert.json" "$TMP/dgx1.json" --tp 2 -o "$TMP/bert-tp.embedded.json" --quiet ||
    fail "embedded plan of BERT with tensor parallelism 2"
pass "embedded plans"

# ---- one broker, three workers, both models ----
start_broker farm --max-msg-mb 8
WORKER_TEST="--test-delay-ms 40"
start_worker w1; W1=$WORKER_PID
start_worker w2; W2=$WORKER_PID
start_worker w3; W3=$WORKER_PID
WORKER_TEST=""
"$BIN" submit "$TMP/bert.json" "$TMP/dgx1.json" --broker "$EP" --wait --quiet \
    -o "$TMP/bert.farm.json" || fail "submit --wait of BERT"
"$TOOL" compare "$TMP/bert.embedded.json" "$TMP/bert.farm.json" $EPS || fail "BERT plans differ"
# tensor parallelism: TAP_ENUM jobs on the workers give the embedded plan
"$BIN" submit "$TMP/bert.json" "$TMP/dgx1.json" --tp 2 --broker "$EP" --wait --quiet \
    -o "$TMP/bert-tp.farm.json" || fail "submit --wait of BERT with --tp 2"
"$TOOL" compare "$TMP/bert-tp.embedded.json" "$TMP/bert-tp.farm.json" $EPS ||
    fail "BERT plans with tensor parallelism differ"
grep -q '"tensor_parallel": 2' "$TMP/bert-tp.farm.json" || fail "the farm's plan is not TP 2"
ID=$("$BIN" submit "$TMP/resnet50.json" "$TMP/dgx1.json" --broker "$EP") || fail "submit ResNet"
echo "$ID" | grep -Eq '^r[0-9a-f]{32}$' || fail "request id '$ID'"
wait_finished "$ID" || fail "ResNet-50 request $ID did not finish"
"$BIN" result "$ID" --broker "$EP" -o "$TMP/resnet.farm.json" --quiet || fail "result of $ID"
"$TOOL" compare "$TMP/resnet.embedded.json" "$TMP/resnet.farm.json" $EPS ||
    fail "ResNet-50 plans differ"
"$BIN" list --broker "$EP" | grep -q "$ID" || fail "list does not show $ID"
pass "broker + 3 workers match the embedded plans"

# ---- exit statuses of the client commands ----
rc=0; "$BIN" result rdeadbeef --broker "$EP" 2>/dev/null || rc=$?
[ $rc -eq 2 ] || fail "result of an unknown id exited $rc, expected 2"
"$BIN" cluster dgx1 --machines 1 --mem-gb 0.001 -o "$TMP/tiny.json"
rc=0; "$BIN" submit "$TMP/bert.json" "$TMP/tiny.json" --broker "$EP" --wait --quiet \
    -o "$TMP/none.json" 2>"$TMP/infeasible.err" || rc=$?
[ $rc -eq 3 ] || fail "an infeasible request exited $rc, expected 3"
grep -q "needs" "$TMP/infeasible.err" || fail "the infeasibility message does not say what"
rc=0; "$BIN" status rdeadbeef --broker tcp://127.0.0.1:1 --timeout 0.3 2>"$TMP/nobroker.err" || rc=$?
[ $rc -eq 1 ] && grep -q "no broker at tcp://127.0.0.1:1: timed out after 0.3 s" "$TMP/nobroker.err" ||
    fail "no-broker message or status ($rc)"
pass "exit statuses"

# ---- a worker killed with SIGKILL in the middle of a search ----
ID=$("$BIN" submit "$TMP/bert.json" "$TMP/dgx1.json" --broker "$EP")
wait_answered "$ID" 1
kill -9 "$W1"
wait_finished "$ID" || fail "request $ID did not finish after SIGKILL"
"$BIN" result "$ID" --broker "$EP" -o "$TMP/bert.kill.json" --quiet || fail "search after SIGKILL"
"$TOOL" compare "$TMP/bert.embedded.json" "$TMP/bert.kill.json" $EPS || fail "plan after SIGKILL"
wait_log "$TMP/farm.log" "worker w1 is" || fail "the broker did not notice w1's death"
pass "SIGKILL of a worker mid-search"

# ---- a worker frozen with SIGSTOP: declared dead, then back under a new identity ----
ID=$("$BIN" submit "$TMP/resnet50.json" "$TMP/dgx1.json" --broker "$EP")
wait_answered "$ID" 1
kill -STOP "$W2"
# frozen until the broker has declared it dead (LIVENESS of the broker's heartbeat ticks), however
# long a loaded machine takes to get there
wait_log "$TMP/farm.log" "w2 is silent" || fail "the broker did not notice w2's silence"
kill -CONT "$W2"
wait_finished "$ID" || fail "request $ID did not finish after SIGSTOP"
"$BIN" result "$ID" --broker "$EP" -o "$TMP/resnet.stop.json" --quiet || fail "search after SIGSTOP"
"$TOOL" compare "$TMP/resnet.embedded.json" "$TMP/resnet.stop.json" $EPS || fail "plan after SIGSTOP"
wait_log "$TMP/farm.log" "worker w2 ready" 2 || fail "w2 did not register again"
pass "SIGSTOP / SIGCONT of a worker"

# ---- a hostile client; a normal request still completes ----
"$TOOL" hostile "$EP" 16 >/dev/null || fail "hostile client"
"$BIN" submit "$TMP/bert.json" "$TMP/dgx1.json" --broker "$EP" --wait --quiet \
    -o "$TMP/bert.after.json" || fail "a request after the hostile client"
"$TOOL" compare "$TMP/bert.embedded.json" "$TMP/bert.after.json" $EPS || fail "plan after hostility"
grep -q "dropped a message" "$TMP/farm.log" || fail "the broker did not log the malformed input"
kill -0 "$BROKER_PID" || fail "the broker died"
pass "hostile client"
stop "$W2"; stop "$W3"; stop "$BROKER_PID"
grep -q "interrupted, shutting down" "$TMP/farm.log" || fail "the broker did not shut down cleanly"

# ---- a job that hangs past its deadline is sent again ----
# probes get a 1 s budget + 3 s margin; the first probe on the "hang" worker never returns by
# itself, so it passes its 4 s deadline, is cancelled there and re-sent to the other worker. A
# probe that runs (at most its 1 s budget) answers well inside the margin even on a loaded
# machine. One probe in flight per binary search: the search cannot finish without the hung
# answer.
start_broker hangfarm --probe-margin 3
WORKER_TEST="--test-hang-kind map_probe"
start_worker hang
WORKER_TEST=""
start_worker ok
"$BIN" submit "$TMP/bert.json" "$TMP/dgx1.json" --broker "$EP" --wait --quiet --probe-seconds 1 \
    --probes-in-flight 1 \
    -o "$TMP/bert.hang.json" || fail "search with a hanging job"
grep -q "deadline" "$TMP/hangfarm.log" || fail "no deadline re-send in the broker log"
"$TOOL" compare "$TMP/bert.embedded.json" "$TMP/bert.hang.json" $EPS || fail "plan after a hang"
pass "deadline re-send of a hung job"
echo "wire: all passed"
