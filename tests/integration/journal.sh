#!/bin/sh
# The journal end to end, on loopback only (the zguide's Titanic promise: what a broker said yes
# to survives it). 50 small requests (GPT with 1 to 5 layers, 10 seeds each, on one DGX-1) are
# planned by `planfarm batch` four times:
#   reference   an undisturbed broker
#   kill -9     the broker killed once while all 50 are queued or running, restarted on the same
#               journal: every id it acknowledged is known again, all 50 finish
#   kill loop   the broker killed 10 times during one batch
#   again       the batch run once more: nothing is planned twice
# Every plan must match the reference (stages, op lists, objective within the binary search's
# epsilon: pf_testtool compare). Then fairness: a one-job request submitted behind a large one is
# dispatched before the large one's queue drains (dispatch order, not wall time). Every process
# is started here and killed on exit.
#
# Needs PF_BIN (planfarm), PF_TESTTOOL (build/pf_testtool).
set -eu
BIN=${PF_BIN:-./planfarm}
TOOL=${PF_TESTTOOL:-build/pf_testtool}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_journal.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

HB=100
EPS=0.001
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

# start_broker NAME JOURNAL [ENDPOINT]: sets EP and BROKER_PID (log appended: restarts add up).
start_broker() {
    name=$1; journal=$2; bind=${3:-tcp://127.0.0.1:0}
    touch "$TMP/$name.log"
    before=$(grep -c "serving on" "$TMP/$name.log" || true)
    "$BIN" broker --bind "$bind" --journal "$journal" --heartbeat-ms $HB >>"$TMP/$name.log" 2>&1 &
    BROKER_PID=$!
    PIDS="$PIDS $BROKER_PID"
    for _ in $(seq 1 200); do
        [ "$(grep -c "serving on" "$TMP/$name.log" || true)" -gt "$before" ] && break
        sleep 0.05
    done
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/$name.log" 2>/dev/null | tail -n 1)
    [ -n "$EP" ] || fail "broker $name did not start"
}

start_workers() {
    for w in 1 2; do
        "$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms $HB --name "w$w" \
            >>"$TMP/worker$w.log" 2>&1 &
        PIDS="$PIDS $!"
    done
}

stop_all() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=""
}

# compare_dir DIR: every plan in DIR matches the reference plan of the same name.
compare_dir() {
    n=0
    for f in "$TMP"/ref/*.plan.json; do
        b=$(basename "$f")
        [ -f "$1/$b" ] || fail "$1/$b is missing"
        "$TOOL" compare "$f" "$1/$b" $EPS >/dev/null 2>"$TMP/compare.err" ||
            fail "$1/$b differs from the reference: $(cat "$TMP/compare.err")"
        n=$((n + 1))
    done
    [ "$n" -eq 50 ] || fail "$n reference plans, expected 50"
}

# state ID: the request's state word (running, done, ...).
state() { "$BIN" status "$1" --broker "$EP" 2>/dev/null | sed -n '1s/.*: //p'; }

# requests EP: how many requests the broker lists.
requests() { "$BIN" list --broker "$1" --timeout 2 | tail -n +2 | wc -l; }

# ---- inputs: 50 requests ----
"$BIN" cluster dgx1 --machines 1 -o "$TMP/dgx1.json" 2>/dev/null
: >"$TMP/list.txt"
for l in 1 2 3 4 5; do
    "$BIN" model gpt --layers $l -o "$TMP/gpt$l.json" 2>/dev/null
    for s in 1 2 3 4 5 6 7 8 9 10; do
        echo "gpt$l.json dgx1.json --seed $s" >>"$TMP/list.txt"
    done
done
mkdir "$TMP/ref" "$TMP/kill" "$TMP/loop"

# ---- reference ----
start_broker ref "$TMP/ref.db"
start_workers
"$BIN" batch "$TMP/list.txt" --broker "$EP" -o "$TMP/ref" --quiet || fail "reference batch"
[ "$(requests "$EP")" -eq 50 ] || fail "the reference broker lists $(requests "$EP") requests"
# ---- again: the same batch plans nothing new ----
"$BIN" batch "$TMP/list.txt" --broker "$EP" -o "$TMP/ref" --quiet || fail "the batch again"
[ "$(requests "$EP")" -eq 50 ] || fail "the batch run again made new requests"
[ "$(grep -c "again (same inputs and options)" "$TMP/ref.log")" -eq 50 ] ||
    fail "the batch run again was not answered from the finished requests"
stop_all
pass "reference batch of 50; run again, nothing planned twice"

# ---- kill -9 once while all 50 are queued or running ----
start_broker kill "$TMP/kill.db"
PORT_EP=$EP
"$BIN" batch "$TMP/list.txt" --broker "$EP" -o "$TMP/kill" --quiet --timeout 1 --patience 60 \
    >"$TMP/batch-kill.log" 2>&1 &
BATCH=$!
PIDS="$PIDS $BATCH"
for _ in $(seq 1 400); do
    [ "$(grep -c "preparing" "$TMP/kill.log")" -ge 50 ] && break
    sleep 0.05
done
[ "$(grep -c "preparing" "$TMP/kill.log")" -ge 50 ] || fail "the batch did not submit 50 requests"
"$BIN" list --broker "$EP" | tail -n +2 | awk '{print $1}' >"$TMP/acked.txt"
kill -9 "$BROKER_PID"
wait "$BROKER_PID" 2>/dev/null || true
start_broker kill "$TMP/kill.db" "$PORT_EP"
grep -q "50 unfinished requests restored" "$TMP/kill.log" || fail "the restart did not restore 50"
while read -r id; do
    "$BIN" status "$id" --broker "$EP" >/dev/null || fail "request $id was lost"
done <"$TMP/acked.txt"
start_workers
wait "$BATCH" || fail "the batch across a kill -9 failed: $(tail -n 3 "$TMP/batch-kill.log")"
compare_dir "$TMP/kill"
[ "$(requests "$EP")" -eq 50 ] || fail "after the restart the broker lists $(requests "$EP")"
stop_all
pass "kill -9 with 50 requests queued: none lost, all 50 plans as undisturbed"

# ---- kill -9 ten times during one batch ----
start_broker loop "$TMP/loop.db"
PORT_EP=$EP
start_workers
"$BIN" batch "$TMP/list.txt" --broker "$EP" -o "$TMP/loop" --quiet --timeout 1 --patience 60 \
    >"$TMP/batch-loop.log" 2>&1 &
BATCH=$!
kills=0
while [ $kills -lt 10 ] && kill -0 "$BATCH" 2>/dev/null; do
    sleep 0.3
    kill -9 "$BROKER_PID"
    wait "$BROKER_PID" 2>/dev/null || true
    kills=$((kills + 1))
    start_broker loop "$TMP/loop.db" "$PORT_EP"
done
wait "$BATCH" || fail "the batch across $kills kills failed: $(tail -n 3 "$TMP/batch-loop.log")"
[ $kills -ge 3 ] || fail "only $kills kills happened before the batch ended"
compare_dir "$TMP/loop"
[ "$(requests "$EP")" -eq 50 ] || fail "after $kills kills the broker lists $(requests "$EP")"
grep -q "journaled answers replayed" "$TMP/loop.log" || fail "no restart replayed answers"
stop_all
pass "kill -9 $kills times during one batch: all 50 plans as undisturbed"

# ---- fairness: a small request behind a large one ----
# One worker holding one job at a time, every job slowed by 100 ms (--test-delay-ms, a hidden
# test hook), both without tensor parallelism (--tp 1). The large request queues 15 partition jobs (S in 1..16, three alphas each:
# --coarsen 16); the small one, from another client, 5 at most. Counted in jobs, not seconds:
# while the small one runs, the large one may finish at most as many jobs as the small one
# issued, plus 2 (the job on the worker when it came, and one poll's lag). First come, first
# served would first run the large one's whole queue (checked to be longer than that bound).
"$BIN" model gpt --layers 12 -o "$TMP/big.json" 2>/dev/null
"$BIN" cluster dgx1 --machines 2 -o "$TMP/dgx1x2.json" 2>/dev/null
start_broker fair none
"$BIN" worker --connect "$EP" --threads 1 --credits 1 --heartbeat-ms $HB --test-delay-ms 100 \
    --name slow >>"$TMP/slow.log" 2>&1 &
PIDS="$PIDS $!"
# jobs ID WHAT: issued, answered or queued jobs of a request.
jobs() {
    "$BIN" status "$1" --broker "$EP" |
        sed -n "s/.*jobs: *\([0-9]*\) issued: \([0-9]*\) answered.*(\([0-9]*\) queued).*/\1 \2 \3/p" |
        { read -r i a q; case $2 in issued) echo "$i";; answered) echo "$a";; *) echo "$q";; esac; }
}
LARGE=$("$BIN" submit "$TMP/big.json" "$TMP/dgx1x2.json" --broker "$EP" --coarsen 16 --tp 1)
for _ in $(seq 1 200); do [ "$(jobs "$LARGE" issued)" -ge 15 ] && break; sleep 0.05; done
SMALL=$("$BIN" submit "$TMP/gpt1.json" "$TMP/dgx1.json" --broker "$EP" --stages 1 --tp 1)
A0=$(jobs "$LARGE" answered)
Q0=$(jobs "$LARGE" queued)
for _ in $(seq 1 600); do [ "$(state "$SMALL")" = "done" ] && break; sleep 0.02; done
A1=$(jobs "$LARGE" answered)
[ "$(state "$SMALL")" = "done" ] || fail "the small request did not finish"
NS=$(jobs "$SMALL" issued)
[ "$Q0" -gt $((NS + 2)) ] || fail "the large request queued only $Q0 jobs: no test of fairness"
[ $((A1 - A0)) -le $((NS + 2)) ] ||
    fail "the large request finished $((A1 - A0)) jobs while the small one ($NS jobs) ran"
stop_all
pass "fairness: $((A1 - A0)) large jobs ran beside the small request's $NS (FIFO: $Q0 first)"

# ---- compact ----
"$BIN" broker --journal "$TMP/loop.db" --compact --expire-days 0 >"$TMP/compact.out" ||
    fail "broker --compact"
grep -q "50 finished requests older than 0 days removed" "$TMP/compact.out" ||
    fail "compact: $(cat "$TMP/compact.out")"
pass "broker --compact --expire-days 0 empties a finished journal"
echo "journal: all passed"
