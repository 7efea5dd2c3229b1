#!/bin/sh
# Profiler agents end to end, on loopback only: a broker and two agents that stand for two hosts
# (--host hosta / hostb, CPU probes only) run a profiling round through
# `planfarm profile --broker`: the cluster has both devices, the measured network link between
# them and its provenance, checks, and plans a small GPT. Then the broker is stopped and started
# again on the same endpoint: the agents register again by themselves and a second round works.
# Every process is started here and killed on exit. Waits are bounded by counts of short sleeps
# and by the broker's own --timeout, never by how long a probe took last time.
#
# Needs PF_BIN (planfarm).
set -eu
BIN=${PF_BIN:-./planfarm}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_agent.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

HB=100       # heartbeat ms, broker and agents alike
LIVENESS=5
ROUND_S=60   # the round's limit (profile --timeout); a probe task gets a tenth of it
SWEEP="--sizes 4K,64K,256K,1M,4M --reps 7 --stream-mb 8"
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }

# wait_for FILE PATTERN COUNT: until FILE has COUNT lines matching PATTERN (10 s at most).
wait_for() {
    for _ in $(seq 1 200); do
        n=$(grep -c "$2" "$1" 2>/dev/null || true)
        [ "${n:-0}" -ge "$3" ] && return 0
        sleep 0.05
    done
    return 1
}

# start_broker NAME BIND: sets EP (the port the kernel picked when BIND ends in :0).
start_broker() {
    "$BIN" broker --journal none --bind "$2" --heartbeat-ms $HB --liveness $LIVENESS >"$TMP/$1.log" 2>&1 &
    BROKER_PID=$!
    PIDS="$PIDS $BROKER_PID"
    wait_for "$TMP/$1.log" "serving on" 1 || fail "broker $1 did not start"
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/$1.log" 2>/dev/null || true)
}

start_agent() { # NAME HOST
    "$BIN" agent --connect "$EP" --name "$1" --host "$2" --no-cuda \
        --echo-bind 'tcp://127.0.0.1:*' --advertise 127.0.0.1 --heartbeat-ms $HB \
        --liveness $LIVENESS --reconnect-max-ms 400 >"$TMP/$1.log" 2>&1 &
    PIDS="$PIDS $!"
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# check_cluster FILE: two cpu devices on two hosts, one measured link between them.
check_cluster() {
    "$BIN" check "$1" >"$TMP/check.out" 2>&1 || fail "planfarm check $1: $(cat "$TMP/check.out")"
    grep -q "2 devices on 2 hosts" "$TMP/check.out" || fail "$1: not 2 devices on 2 hosts"
    n=$(grep -c '"method": "zmq_tcp_pingpong"' "$1" || true)
    [ "$n" = 1 ] || fail "$1: $n ping-pong link records, expected 1"
    grep -q '"src_host": "hostb"' "$1" || fail "$1: the link is not from hostb"
    grep -q '"dst_host": "hosta"' "$1" || fail "$1: the link is not to hosta"
    grep -q '"source": "gpu"' "$1" && fail "$1: a record says gpu"
    n=$(grep -c '"source": "cpu"' "$1" || true)
    [ "$n" = 3 ] || fail "$1: $n records say cpu, expected 3 (2 devices, 1 link)"
    grep -q '"measured_by": "a"' "$1" || fail "$1: provenance does not name agent a"
    grep -q '"measured_by": "b"' "$1" || fail "$1: provenance does not name agent b"
    # two equal hosts fit a hierarchy (assemble.h): its network level is the fitted link
    grep -q "(format 2)" "$TMP/check.out" || fail "$1: two equal hosts not written as a hierarchy"
    gbps=$(sed -n 's/.*"gbps": \([0-9.e+-]*\).*/\1/p' "$1" | head -n 1)
    bw=$(sed -n 's/.*"name": "network", "count": 0, "bw_gbps": \([0-9.e+-]*\).*/\1/p' "$1")
    awk -v a="$gbps" -v b="$bw" 'BEGIN { exit !(a > 0 && a == b) }' ||
        fail "$1: the network level's $bw GB/s is not the fitted link's $gbps"
}

start_broker broker tcp://127.0.0.1:0
# no agent yet: the round is refused with a reason
# shellcheck disable=SC2086 # SWEEP is several flags
if "$BIN" profile --broker "$EP" $SWEEP --timeout $ROUND_S -o "$TMP/none.json" \
    >"$TMP/none.log" 2>&1; then fail "a round without agents succeeded"; fi
grep -q "no profiler agent" "$TMP/none.log" || fail "no reason given: $(cat "$TMP/none.log")"
[ ! -e "$TMP/none.json" ] || fail "a refused round wrote a file"
pass "a round without agents is refused"

start_agent a hosta
A_PID=$!
start_agent b hostb
B_PID=$!
wait_for "$TMP/broker.log" "agent .* registered" 2 || fail "the agents did not register"
# shellcheck disable=SC2086 # SWEEP is several flags
"$BIN" profile --broker "$EP" $SWEEP --timeout $ROUND_S --name loopback -o "$TMP/c.json" \
    2>"$TMP/profile.log" || fail "profile --broker: $(cat "$TMP/profile.log")"
check_cluster "$TMP/c.json"
pass "broker + 2 agents: 2 cpu devices, a measured link, provenance"

"$BIN" model gpt --layers 2 --hidden 256 --heads 4 --seq 128 --vocab 1000 --microbatch 1 \
    -o "$TMP/g.json" 2>/dev/null || fail "model gpt"
"$BIN" plan "$TMP/g.json" "$TMP/c.json" --workers 1 --threads 1 -o "$TMP/p.json" \
    2>"$TMP/plan.log" || fail "plan on the profiled cluster: $(cat "$TMP/plan.log")"
grep -q '"stages"' "$TMP/p.json" || fail "no plan written"
pass "planfarm plan accepts the profiled cluster"

# broker restart on the same endpoint: the agents register again by themselves
stop "$BROKER_PID"
start_broker broker2 "$EP"
wait_for "$TMP/broker2.log" "agent .* registered" 2 || fail "the agents did not come back"
kill -0 "$A_PID" 2>/dev/null || fail "agent a died"
kill -0 "$B_PID" 2>/dev/null || fail "agent b died"
# shellcheck disable=SC2086
"$BIN" profile --broker "$EP" $SWEEP --timeout $ROUND_S -o "$TMP/c2.json" \
    2>"$TMP/profile2.log" || fail "profile after the restart: $(cat "$TMP/profile2.log")"
check_cluster "$TMP/c2.json"
pass "the agents survive a broker restart"

stop "$A_PID"
stop "$B_PID"
stop "$BROKER_PID"
echo "agent: 4 passed, 0 failed"
