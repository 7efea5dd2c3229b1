#!/bin/sh
# The farm over a bad network: the broker in one network namespace, two workers in
# another, joined by a veth pair whose both ends delay every packet 50 ms and drop 5% (netem),
# and a 10 s partition (loss 100% both ways, a silent black hole rather than a link down the
# kernel would report) in the middle of the run. On a kernel without netem (CONFIG_NET_SCH_NETEM
# off, as in some VM kernels) nftables drops the packets instead, on arrival (silent to the
# sender, as a lossy wire is), and nothing delays them: the test says so on a "note:" line.
# Six small requests, two submitted before the cut and four during it (from the broker's
# namespace, where the broker stays reachable), must all finish with the plan of an embedded
# `planfarm plan` of the same request.
#
# Heartbeats of 500 ms and a liveness of 4 make the partition long enough for both sides to
# notice it (the broker requeues the workers' jobs, the workers reconnect on new sockets with
# their back-off), and short enough a setting for the recovery to start within seconds of the
# link coming back; --max-attempts 10 keeps a job that meets the partition twice from failing
# its request. Every job sleeps 100 ms first (--test-delay-ms, a hidden test-only worker flag)
# so that the first requests are surely still running when the link is cut.
#
# Addresses are 10.231.0.1/30 and .2, private to the two namespaces made here (their names and
# the veth's carry this shell's PID): no packet leaves the machine. Needs root (CAP_NET_ADMIN,
# CAP_SYS_ADMIN for `ip netns exec`), iproute2, and netem or nftables; without them it prints
# a SKIP line and passes, unless PF_NETFAULT_REQUIRED=1 (then it fails). Every process,
# namespace and veth made here is removed on exit, failure or not.
#
# Needs PF_BIN (planfarm), PF_TESTTOOL (build/pf_testtool).
set -eu
BIN=${PF_BIN:-./planfarm}
TOOL=${PF_TESTTOOL:-build/pf_testtool}

NS_BROKER=pf_netfault_b_$$
NS_WORKERS=pf_netfault_w_$$
VETH_BROKER=pfnfb$$          # interface names: 15 characters at most
VETH_WORKERS=pfnfw$$
ADDR_BROKER=10.231.0.1
ADDR_WORKERS=10.231.0.2
HB=500                       # heartbeat ms, broker and workers alike
LIVENESS=4                   # a peer silent for 2 s is given up
PARTITION_S=10
DEADLINE_S=120               # the whole run, setup to the last plan
EPS=0.001                    # the binary search's default relative epsilon
DELAY_MS=50
LOSS_PCT=5

TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_netfault.XXXXXX")
PIDS=""
MADE_NS=""

cleanup() {
    rc=$?
    for p in $PIDS; do kill -9 "$p" 2>/dev/null || true; done
    # anything else still inside our namespaces (a namespace outlives its deletion while a
    # process is in it)
    for ns in $MADE_NS; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    done
    wait 2>/dev/null || true
    # deleting a namespace deletes the veth end in it, and with it the peer
    for ns in $MADE_NS; do ip netns delete "$ns" 2>/dev/null || true; done
    ip link delete "$VETH_BROKER" 2>/dev/null || true
    rm -rf "$TMP"
    left=$(ip netns list 2>/dev/null | grep -E "^($NS_BROKER|$NS_WORKERS)( |\$)" || true)
    if [ -n "$left" ]; then
        echo "FAIL: namespace left behind: $left" >&2
        rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    echo "FAIL: $*" >&2
    for f in "$TMP"/*.log; do [ -f "$f" ] || continue; echo "--- $f" >&2; tail -n 25 "$f" >&2; done
    echo "netfault: $PASSED passed, 1 failed"
    exit 1
}
skip() {
    if [ "${PF_NETFAULT_REQUIRED:-0}" = 1 ]; then
        fail "network namespaces are required (PF_NETFAULT_REQUIRED=1): $*"
    fi
    echo "SKIP netfault: $* (needs root, iproute2, and netem or nftables; CI runs it as root)"
    exit 0
}
PASSED=0
pass() { PASSED=$((PASSED + 1)); echo "ok: $*"; }

START=$(date +%s)
past_deadline() { [ $(($(date +%s) - START)) -ge $DEADLINE_S ]; }

# ---- the network: two namespaces, one veth, impaired at both ends ----
command -v ip >/dev/null 2>&1 || skip "no ip command (iproute2: scripts/packages.txt)"
command -v tc >/dev/null 2>&1 || skip "no tc command (iproute2: scripts/packages.txt)"
MADE_NS="$NS_BROKER $NS_WORKERS"
for ns in $MADE_NS; do
    ip netns add "$ns" 2>"$TMP/ns.err" ||
        skip "cannot create a network namespace ($(cat "$TMP/ns.err"))"
done
ip netns exec "$NS_BROKER" true 2>"$TMP/ns.err" ||
    skip "cannot enter a network namespace ($(cat "$TMP/ns.err"))"
in_broker_ns() { ip netns exec "$NS_BROKER" "$@"; }
in_workers_ns() { ip netns exec "$NS_WORKERS" "$@"; }

ip link add "$VETH_BROKER" type veth peer name "$VETH_WORKERS" 2>"$TMP/ns.err" ||
    skip "cannot create a veth pair ($(cat "$TMP/ns.err"))"
ip link set "$VETH_BROKER" netns "$NS_BROKER" || fail "moving $VETH_BROKER into $NS_BROKER"
ip link set "$VETH_WORKERS" netns "$NS_WORKERS" || fail "moving $VETH_WORKERS into $NS_WORKERS"
# lo too: clients in the broker's namespace reach the broker's veth address through it
in_broker_ns ip link set lo up
in_workers_ns ip link set lo up
in_broker_ns ip addr add "$ADDR_BROKER/30" dev "$VETH_BROKER"
in_workers_ns ip addr add "$ADDR_WORKERS/30" dev "$VETH_WORKERS"
in_broker_ns ip link set "$VETH_BROKER" up
in_workers_ns ip link set "$VETH_WORKERS" up
# impair_end NS VETH LOSS_PERCENT: what arrives on (nft) or leaves by (netem) VETH loses
# LOSS_PERCENT of its packets; 100 is the partition.
impair_end() {
    case $IMPAIR in
    netem)
        ip netns exec "$1" tc qdisc replace dev "$2" root netem delay "${DELAY_MS}ms" loss "$3%"
        ;;
    nft)
        ip netns exec "$1" nft flush chain inet pf_netfault arrive &&
            if [ "$3" -ge 100 ]; then
                ip netns exec "$1" nft add rule inet pf_netfault arrive iifname "$2" counter drop
            else
                ip netns exec "$1" nft add rule inet pf_netfault arrive iifname "$2" \
                    numgen random mod 100 "<" "$3" counter drop
            fi
        ;;
    esac
}
# dropped_end NS VETH: packets dropped there (netem: since the qdisc was made; nft: since the
# last impair_end, which makes the rule anew).
dropped_end() {
    case $IMPAIR in
    netem)
        ip netns exec "$1" tc -s qdisc show dev "$2" | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' ;;
    nft)
        ip netns exec "$1" nft list chain inet pf_netfault arrive |
            sed -n 's/.*counter packets \([0-9]*\) .*/\1/p' ;;
    esac
}
dropped() {
    at_broker=$(dropped_end "$NS_BROKER" "$VETH_BROKER")
    at_workers=$(dropped_end "$NS_WORKERS" "$VETH_WORKERS")
    echo $((${at_broker:-0} + ${at_workers:-0}))
}
# impair LOSS_PERCENT: both ends, so both directions.
impair() {
    impair_end "$NS_BROKER" "$VETH_BROKER" "$1" || fail "impairing $VETH_BROKER ($IMPAIR)"
    impair_end "$NS_WORKERS" "$VETH_WORKERS" "$1" || fail "impairing $VETH_WORKERS ($IMPAIR)"
}
# netem where the kernel has it (sch_netem); else nftables drops on arrival (silent to the
# sender, as a lossy wire is) but cannot delay: the test says so and goes on without delay.
if in_broker_ns tc qdisc add dev "$VETH_BROKER" root netem delay "${DELAY_MS}ms" 2>"$TMP/ns.err"
then
    IMPAIR=netem
    HOW="netem: ${DELAY_MS} ms delay, ${LOSS_PCT}% loss each way"
elif command -v nft >/dev/null 2>&1; then
    echo "note: no netem in this kernel ($(cat "$TMP/ns.err")):" \
        "nftables drops packets, nothing delays them"
    IMPAIR=nft
    HOW="nftables: ${LOSS_PCT}% loss each way, no delay (no netem)"
    for ns in "$NS_BROKER" "$NS_WORKERS"; do
        { ip netns exec "$ns" nft add table inet pf_netfault &&
            ip netns exec "$ns" nft add chain inet pf_netfault arrive \
                "{ type filter hook prerouting priority -300; }"; } 2>"$TMP/ns.err" ||
            skip "no netem qdisc in this kernel, and nftables refused a table in $ns" \
                "($(cat "$TMP/ns.err"))"
    done
else
    skip "no netem qdisc in this kernel ($(cat "$TMP/ns.err")) and no nft command"
fi
impair "$LOSS_PCT"
pass "namespaces $NS_BROKER and $NS_WORKERS joined by a veth ($HOW)"

# The security work makes plain TCP off loopback need --insecure: pass it where a command has it.
insecure_flag() {
    if "$BIN" "$1" --help 2>&1 | grep -q -- '--insecure'; then echo --insecure; fi
}
INSECURE_BROKER=$(insecure_flag broker)
INSECURE_WORKER=$(insecure_flag worker)
INSECURE_CLIENT=$(insecure_flag submit)

# ---- the requests and their embedded plans ----
"$BIN" model gpt --layers 2 -o "$TMP/gpt.json" 2>/dev/null
"$BIN" model bert --layers 2 -o "$TMP/bert.json" 2>/dev/null
"$BIN" cluster dgx1 --machines 1 -o "$TMP/dgx1.json" 2>/dev/null
# name|model|search options: one pipeline depth each keeps every request under a second
REQUESTS="gpt-s2|gpt|--tp 1 --stages 2
bert-s2|bert|--tp 1 --stages 2
gpt-s4|gpt|--tp 1 --stages 4
bert-s4|bert|--tp 1 --stages 4
gpt-s2-mb8|gpt|--tp 1 --stages 2 --microbatches 8
bert-s2-mb8|bert|--tp 1 --stages 2 --microbatches 8"
N_REQUESTS=$(echo "$REQUESTS" | wc -l)
echo "$REQUESTS" | while IFS='|' read -r name model opts; do
    # shellcheck disable=SC2086 # opts is a list of flags
    "$BIN" plan "$TMP/$model.json" "$TMP/dgx1.json" $opts --quiet -o "$TMP/$name.embedded.json" ||
        { echo "embedded plan of $name failed" >"$TMP/embedded.log"; exit 1; }
done || fail "embedded plans"
pass "$N_REQUESTS embedded plans"

# ---- the broker in its namespace, two workers in theirs ----
# `ip netns exec` execs the command: $! is the broker's pid (not so through a shell function).
# shellcheck disable=SC2086 # INSECURE_* are empty or one flag
ip netns exec "$NS_BROKER" "$BIN" broker --journal none --bind "tcp://$ADDR_BROKER:0" --heartbeat-ms $HB \
    --liveness $LIVENESS --max-attempts 10 $INSECURE_BROKER >"$TMP/broker.log" 2>&1 &
PIDS="$PIDS $!"
EP=""
for _ in $(seq 1 100); do
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker.log" 2>/dev/null || true)
    [ -n "$EP" ] && break
    sleep 0.05
done
[ -n "$EP" ] || fail "the broker did not start on $ADDR_BROKER"
for w in w1 w2; do
    # shellcheck disable=SC2086
    ip netns exec "$NS_WORKERS" "$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms $HB \
        --liveness $LIVENESS --name "$w" --test-delay-ms 100 $INSECURE_WORKER >"$TMP/$w.log" 2>&1 &
    PIDS="$PIDS $!"
done
# wait_log ERE COUNT SECONDS [AFTER_LINE]: until the broker's log has COUNT lines matching ERE
# (past line AFTER_LINE).
wait_log() {
    for _ in $(seq 1 $(($3 * 10))); do
        n=$(tail -n +$((${4:-0} + 1)) "$TMP/broker.log" | grep -cE "$1" || true)
        [ "$n" -ge "$2" ] && return 0
        sleep 0.1
    done
    return 1
}
wait_log 'worker w[12] ready' 2 20 || fail "the workers did not register across the veth"
pass "broker on $EP, 2 workers in the other namespace"

# submit NAME: submits a request from the broker's namespace; appends "NAME ID" to ids.
submit() {
    line=$(echo "$REQUESTS" | grep "^$1|")
    model=$(echo "$line" | cut -d'|' -f2)
    opts=$(echo "$line" | cut -d'|' -f3)
    # shellcheck disable=SC2086
    id=$(in_broker_ns "$BIN" submit "$TMP/$model.json" "$TMP/dgx1.json" $opts --broker "$EP" \
        $INSECURE_CLIENT 2>>"$TMP/client.log") || fail "submit $1"
    echo "$1 $id" >>"$TMP/ids"
}
# state ID: the request's state word (queued, running, done, failed, ...).
state() {
    # shellcheck disable=SC2086
    in_broker_ns "$BIN" status "$1" --broker "$EP" $INSECURE_CLIENT 2>/dev/null |
        sed -n '1s/.*: //p'
}
answered() {
    # shellcheck disable=SC2086
    in_broker_ns "$BIN" status "$1" --broker "$EP" $INSECURE_CLIENT 2>/dev/null |
        sed -n 's/.*issued: \([0-9]*\) answered.*/\1/p'
}

# ---- two requests, then the partition while they run, four more during it ----
: >"$TMP/ids"
submit gpt-s2
submit bert-s2
FIRST=$(sed -n '1s/.* //p' "$TMP/ids")
for _ in $(seq 1 200); do
    n=$(answered "$FIRST")
    [ "${n:-0}" -ge 1 ] && break
    sleep 0.1
done
[ "${n:-0}" -ge 1 ] || fail "no job of $FIRST was answered across the lossy link"
BEFORE_CUT=$(dropped)
CUT_LINE=$(wc -l <"$TMP/broker.log")
impair 100
CUT=$(date +%s)
s=$(state "$FIRST")
[ "$s" != "done" ] || fail "$FIRST finished before the partition: nothing was cut off"
submit gpt-s4
submit bert-s4
submit gpt-s2-mb8
submit bert-s2-mb8
# the broker notices: both workers are silent past their liveness (a 5% loss alone may have
# made one look so before; only what the log says after the cut counts)
for w in w1 w2; do
    wait_log "worker $w is (silent|unreachable)" 1 $((PARTITION_S - 2)) "$CUT_LINE" ||
        fail "the broker did not notice the partition within $((PARTITION_S - 2)) s"
done
while read -r name id <&3; do
    s=$(state "$id")
    [ "$s" != "done" ] || fail "$name ($id) finished without workers, during the partition"
done 3<"$TMP/ids"
left_s=$((PARTITION_S - ($(date +%s) - CUT)))
[ $left_s -le 0 ] || sleep $left_s
[ "$IMPAIR" = netem ] || BEFORE_CUT=0 # the nft rule was made anew at the cut
CUT_DROPS=$(($(dropped) - BEFORE_CUT))
[ "$CUT_DROPS" -gt 0 ] || fail "the partition dropped no packet"
impair "$LOSS_PCT"
pass "a ${PARTITION_S} s partition ($CUT_DROPS packets dropped) with $N_REQUESTS requests" \
    "unfinished; both workers declared silent"

# ---- every request finishes, with the embedded plan ----
while read -r name id <&3; do
    while :; do
        s=$(state "$id")
        [ "$s" = "done" ] && break
        case $s in failed | cancelled) fail "$name ($id) $s" ;; esac
        past_deadline && fail "$name ($id) unfinished ($s) after $DEADLINE_S s"
        sleep 0.2
    done
    # shellcheck disable=SC2086
    in_broker_ns "$BIN" result "$id" --broker "$EP" $INSECURE_CLIENT --quiet \
        -o "$TMP/$name.farm.json" 2>>"$TMP/client.log" || fail "result of $name ($id)"
    "$TOOL" compare "$TMP/$name.embedded.json" "$TMP/$name.farm.json" $EPS ||
        fail "$name: the farm's plan differs from the embedded one"
done 3<"$TMP/ids"
pass "all $N_REQUESTS requests done $(($(date +%s) - CUT)) s after the cut," \
    "plans equal to the embedded ones"
for w in w1 w2; do
    wait_log "worker $w ready" 1 10 "$CUT_LINE" ||
        fail "$w did not register again after the partition"
done
pass "both workers reconnected"
if [ "$IMPAIR" = netem ]; then since="in all"; else since="since the partition"; fi
echo "note: $(dropped) packets dropped by the link $since"

for p in $PIDS; do kill -TERM "$p" 2>/dev/null || true; done
for p in $PIDS; do wait "$p" 2>/dev/null || true; done
for ns in $MADE_NS; do
    left=$(ip netns pids "$ns" | tr '\n' ' ')
    [ -z "$left" ] || fail "processes left in $ns after SIGTERM: $left"
done
PIDS=""
echo "netfault: $PASSED passed, 0 failed ($(($(date +%s) - START)) s)"
