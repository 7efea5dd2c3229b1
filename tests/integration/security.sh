#!/bin/sh
# Security end to end (README "Security"), real processes on loopback with CurveZMQ keys:
#   - plain TCP off loopback is refused before anything binds or connects (broker, worker,
#     client, agent), and --insecure turns the refusal into a warning;
#   - a profiler agent with CURVE keys in --agents registers, a plain one does not;
#   - plain HTTP (--http) off loopback is refused too;
#   - a key in no allow-list gets nothing (the handshake fails: no reply, not even an error), but
#     the broker logs each refused handshake and counts it in /metrics;
#   - a key of the wrong role gets an ERROR saying so; a worker with a client key leaves (exit 1);
#   - --bind tcp://localhost:PORT binds 127.0.0.1;
#   - the status page answers 401 without a token; a client's token (list --http-token) shows
#     its own requests only (curl, and headless Chromium when installed), an admin's all;
#   - a client sees, and cancels, only its own requests; an admin key sees both clients';
#   - a worker that forges RESULTs and a FAILED for jobs it was not sent has them dropped and
#     counted (the broker's last line), may fetch the graph of its own job only, and the
#     requests still end with the plan an undisturbed embedded run finds;
#   - a worker that takes jobs and never answers (64 credits asked, --max-credits 2 given) has
#     its jobs moved on once their deadline (--dp-timeout, --probe-margin: small) passes;
#   - batch takes the keys, and exits 1 when the broker is gone with one plan of two written.
# Every process is started here and killed on exit.
#
# Needs PF_BIN (planfarm), PF_TESTTOOL (build/pf_testtool), PF_DATA (tests/data).
set -eu
BIN=${PF_BIN:-./planfarm}
TOOL=${PF_TESTTOOL:-build/pf_testtool}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_security.XXXXXX")
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
# expect_rc WANT LOG -- CMD...: runs CMD with its output in LOG; fails unless it exits WANT.
expect_rc() {
    want=$1 log=$2; shift 3
    rc=0
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want"
}

# ---- keys: one broker, two workers (one honest, one rogue), two clients, an admin, a stranger,
# a profiler agent
K=$TMP/keys
for name in broker worker rogue alice bob admin stranger agent; do
    "$BIN" keygen "$name" -d "$K" >/dev/null
done
mkdir -p "$K/clients" "$K/workers" "$K/admins" "$K/agents"
cp "$K/alice" "$K/bob" "$K/clients/"
cp "$K/worker" "$K/rogue" "$K/workers/"
cp "$K/admin" "$K/admins/"
cp "$K/agent" "$K/agents/"
[ "$(stat -c %a "$K/alice_secret")" = 600 ] || fail "keygen: a secret cert must be mode 600"
pass "keygen: 8 key pairs, secrets mode 600"

# ---- plain TCP off loopback: refused before bind or connect (192.0.2.1: TEST-NET-1, never
# bound here; a bind there would fail differently, with "cannot bind")
OFF=tcp://192.0.2.1:5799
expect_rc 2 "$TMP/refuse-broker.out" -- timeout 20 "$BIN" broker --journal none --bind "$OFF"
grep -q "plain TCP on $OFF is refused" "$TMP/refuse-broker.out" || fail "broker: no refusal message"
expect_rc 2 "$TMP/refuse-worker.out" -- timeout 20 "$BIN" worker --connect "$OFF"
grep -q "plain TCP on $OFF is refused" "$TMP/refuse-worker.out" || fail "worker: no refusal message"
expect_rc 2 "$TMP/refuse-client.out" -- "$BIN" list --broker "$OFF"
grep -q "plain TCP on $OFF is refused" "$TMP/refuse-client.out" || fail "client: no refusal message"
expect_rc 2 "$TMP/refuse-agent.out" -- timeout 20 "$BIN" agent --connect "$OFF" --no-cuda
grep -q "plain TCP on $OFF is refused" "$TMP/refuse-agent.out" || fail "agent: no refusal message"
expect_rc 124 "$TMP/agent-insecure.out" -- timeout 1 "$BIN" agent --connect "$OFF" --no-cuda --insecure
grep -q -- "--insecure: plain TCP on $OFF" "$TMP/agent-insecure.out" || fail "agent --insecure: no warning"
expect_rc 1 "$TMP/insecure.out" -- timeout 20 "$BIN" broker --journal none --bind "$OFF" --insecure
grep -q -- "--insecure: plain TCP on $OFF" "$TMP/insecure.out" || fail "--insecure: no warning"
grep -q "cannot bind" "$TMP/insecure.out" || fail "--insecure: the broker did not try to bind"
expect_rc 2 "$TMP/nocert.out" -- timeout 20 "$BIN" broker --journal none --clients "$K/clients"
grep -q -- "--clients needs --cert" "$TMP/nocert.out" || fail "--clients without --cert accepted"
cp "$K/bob_secret" "$K/clients/"
expect_rc 1 "$TMP/secret-in-list.out" -- timeout 20 "$BIN" broker --journal none --cert "$K/broker_secret" --clients "$K/clients"
grep -q "bob_secret is a secret cert" "$TMP/secret-in-list.out" || fail "a secret cert in an allow-list accepted"
rm "$K/clients/bob_secret"
expect_rc 2 "$TMP/http-any.out" -- timeout 20 "$BIN" broker --journal none --http :0
grep -q -- "--http :0: plain HTTP off loopback is refused" "$TMP/http-any.out" || fail "--http :0 not refused"
expect_rc 2 "$TMP/http-off.out" -- timeout 20 "$BIN" broker --journal none --http 192.0.2.1:9710
grep -q -- "--http 192.0.2.1:9710: plain HTTP off loopback is refused" "$TMP/http-off.out" ||
    fail "--http off loopback not refused"
expect_rc 1 "$TMP/http-insecure.out" -- timeout 20 "$BIN" broker --journal none --http 192.0.2.1:9710 --insecure
grep -q -- "--insecure: plain HTTP on 192.0.2.1:9710" "$TMP/http-insecure.out" || fail "--http --insecure: no warning"
pass "plain TCP off loopback refused (broker, worker, client, agent, --http); --insecure warns; bad key setups refused"

# ---- a CURVE broker with small deadlines and at most 2 credits a worker
"$BIN" broker --journal none --bind tcp://127.0.0.1:0 --heartbeat-ms 100 --cert "$K/broker_secret" \
    --clients "$K/clients" --workers "$K/workers" --admins "$K/admins" --agents "$K/agents" --max-credits 2 \
    --dp-timeout 2 --probe-margin 2 --max-attempts 10 --http 127.0.0.1:0 >"$TMP/broker.log" 2>&1 &
BROKER_PID=$!
PIDS="$PIDS $BROKER_PID"
EP=""
for _ in $(seq 1 100); do
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker.log" 2>/dev/null || true)
    [ -n "$EP" ] && break
    sleep 0.05
done
[ -n "$EP" ] || fail "broker did not start"
grep -q "CURVE" "$TMP/broker.log" || fail "broker is not serving CURVE"
URL=$(sed -n 's/.*status page and \/metrics on \(http[^ ]*\).*/\1/p' "$TMP/broker.log")
[ -n "$URL" ] || fail "broker: no status page"

as_key() { who=$1; shift; "$BIN" "$@" --broker "$EP" --cert "$K/${who}_secret" --broker-key "$K/broker"; }

# ---- an unknown key gets nothing
# Each waits 3 s: a client that gives up before its handshake has run (a slow start under
# ASan) leaves the broker nothing to refuse and log.
expect_rc 1 "$TMP/stranger.out" -- as_key stranger list --timeout 3
grep -q "timed out" "$TMP/stranger.out" || fail "a stranger's key got an answer"
expect_rc 1 "$TMP/plain.out" -- "$BIN" list --broker "$EP" --timeout 3
pass "an unknown key and a plain client get nothing"
# The broker learns of a refusal from libzmq's socket monitor, asynchronously: wait for both lines
# (up to 60 s on a loaded machine; the loop ends as soon as they are there). A client may retry its
# handshake before it gives up, so the count is any.
for _ in $(seq 1 1200); do
    grep -q "its key is in no allow-list" "$TMP/broker.log" &&
        grep -Eq "not a CURVE handshake with this broker's key|the peer hung up during the handshake" "$TMP/broker.log" && break
    sleep 0.05
done
grep -Eq "refused a CURVE handshake on tcp://127.0.0.1:[0-9]*: its key is in no allow-list \([0-9]+ refused so far\)" \
    "$TMP/broker.log" || fail "the stranger's refused handshake left no log line"
grep -Eq "refused a CURVE handshake on .*: (not a CURVE handshake with this broker's key|the peer hung up during the handshake)" \
    "$TMP/broker.log" || fail "the plain client's refused handshake left no log line"
pass "refused handshakes are logged"

# ---- a profiler agent with its keys registers; one without keys gets nothing
"$BIN" agent --connect "$EP" --no-cuda --host keyed --heartbeat-ms 100 --cert "$K/agent_secret" \
    --broker-key "$K/broker" >"$TMP/agent.log" 2>&1 &
PIDS="$PIDS $!"
"$BIN" agent --connect "$EP" --no-cuda --host plain --heartbeat-ms 100 >"$TMP/agent-plain.log" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 1 200); do
    grep -q "agent .* registered: host keyed" "$TMP/broker.log" && break
    sleep 0.05
done
grep -q "agent .* registered: host keyed" "$TMP/broker.log" || fail "the agent with keys did not register"
sleep 0.5
! grep -q "registered: host plain" "$TMP/broker.log" || fail "an agent without keys registered"
pass "an agent with CURVE keys registers; a plain one does not"

# ---- a key of the wrong role is told so (an ERROR), not left to time out
expect_rc 2 "$TMP/wrong-role.out" -- as_key worker list --timeout 5
grep -q "LIST refused: key .* is listed in --workers, not in --clients or --admins" \
    "$TMP/wrong-role.out" || fail "a worker key used by a client: $(cat "$TMP/wrong-role.out")"
expect_rc 1 "$TMP/client-worker.out" -- timeout 20 "$BIN" worker --connect "$EP" --heartbeat-ms 100 \
    --cert "$K/alice_secret" --broker-key "$K/broker"
grep -q "READY refused: key .* is listed in --clients, not in --workers (a key of the wrong role); leaving" \
    "$TMP/client-worker.out" || fail "a worker with a client key: $(cat "$TMP/client-worker.out")"
pass "a key of the wrong role gets an error: the client says it, the worker leaves (exit 1)"

# ---- --bind tcp://localhost:PORT (the README allows localhost): bound on 127.0.0.1
expect_rc 124 "$TMP/localhost.out" -- timeout 2 "$BIN" broker --journal none --bind tcp://localhost:0
grep -q "serving on tcp://127.0.0.1:" "$TMP/localhost.out" || fail "--bind tcp://localhost: $(cat "$TMP/localhost.out")"
pass "--bind tcp://localhost:0 binds 127.0.0.1"

# ---- ownership: alice's and bob's requests (no worker yet: they wait)
"$BIN" model bert --layers 4 -o "$TMP/bert.json"
"$BIN" cluster dgx1 --machines 1 -o "$TMP/dgx1.json"
A=$(as_key alice submit "$TMP/bert.json" "$TMP/dgx1.json") || fail "alice cannot submit"
B=$(as_key bob submit "$TMP/bert.json" "$TMP/dgx1.json") || fail "bob cannot submit"
expect_rc 2 "$TMP/bob-status.out" -- as_key bob status "$A"
grep -q "unknown request id" "$TMP/bob-status.out" || fail "bob saw alice's request"
expect_rc 2 "$TMP/bob-cancel.out" -- as_key bob cancel "$A"
expect_rc 2 "$TMP/bob-result.out" -- as_key bob result "$A"
as_key bob list >"$TMP/bob-list.out" || fail "bob cannot list"
grep -q "$B" "$TMP/bob-list.out" || fail "bob's list lacks his request"
! grep -q "$A" "$TMP/bob-list.out" || fail "bob's list shows alice's request"
[ "$(awk -v id="$B" '$1 == id { print $5 }' "$TMP/bob-list.out")" = "-" ] ||
    fail "a queued request's best objective is not '-': $(cat "$TMP/bob-list.out")"
as_key bob status "$B" | grep -qx "  best:     -" || fail "status of a queued request: no 'best: -'"
as_key alice list >"$TMP/alice-list.out" || fail "alice cannot list"
! grep -q "$B" "$TMP/alice-list.out" || fail "alice's list shows bob's request"
as_key alice status "$A" >/dev/null || fail "alice cannot see her request"
as_key admin list >"$TMP/admin-list.out" || fail "admin cannot list"
grep -q "$A" "$TMP/admin-list.out" || fail "admin does not see alice's request"
grep -q "$B" "$TMP/admin-list.out" || fail "admin does not see bob's request"
as_key admin status "$B" >/dev/null || fail "admin cannot see bob's request"
pass "clients see and cancel only their own requests; the admin sees both"

# ---- the status page: a token per key; a client sees its own requests only
TA=$(as_key alice list --http-token) || fail "alice's token"
TB=$(as_key bob list --http-token) || fail "bob's token"
TM=$(as_key admin list --http-token) || fail "the admin's token"
[ "${#TA}" = 32 ] && [ "$TA" != "$TB" ] || fail "tokens: '$TA' '$TB'"
expect_rc 2 "$TMP/token-plain.out" -- "$BIN" list --http-token
grep -q -- "--http-token needs --cert and --broker-key" "$TMP/token-plain.out" || fail "--http-token without keys"
code() { curl -s -o "$TMP/http.out" -w '%{http_code}' "$@"; }
for path in api/status metrics "api/status?token=0123" "api/plan/$A"; do
    [ "$(code "$URL$path")" = 401 ] || fail "/$path without a valid token: not 401"
done
grep -q "planfarm list --http-token" "$TMP/http.out" || fail "401 does not say where the token comes from"
for _ in $(seq 1 100); do
    [ "$(code -H "Authorization: Bearer $TM" "${URL}api/status")" = 200 ] &&
        grep -q "$A" "$TMP/http.out" && grep -q "$B" "$TMP/http.out" && break
    sleep 0.05
done
grep -q "$A" "$TMP/http.out" && grep -q "$B" "$TMP/http.out" || fail "the admin's /api/status: $(cat "$TMP/http.out")"
! grep -q '"owner"' "$TMP/http.out" || fail "/api/status shows the owners' keys"
[ "$(code "${URL}api/status?token=$TA")" = 200 ] || fail "alice's token refused"
grep -q "$A" "$TMP/http.out" || fail "alice's /api/status lacks her request"
! grep -q "$B" "$TMP/http.out" || fail "alice's /api/status shows bob's request"
[ "$(code -H "Authorization: Bearer $TB" "${URL}api/status")" = 200 ] || fail "bob's token refused"
grep -q "$B" "$TMP/http.out" && ! grep -q "$A" "$TMP/http.out" || fail "bob's /api/status: $(cat "$TMP/http.out")"
[ "$(code "${URL}metrics?token=$TA")" = 200 ] || fail "/metrics with alice's token"
n=$(sed -n 's/^planfarm_handshakes_refused_total //p' "$TMP/http.out")
[ "${n:-0}" -ge 2 ] || fail "/metrics: planfarm_handshakes_refused_total is '$n', expected at least 2"
if command -v chromium >/dev/null 2>&1; then
    mkdir "$TMP/chromium"
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=10000 --dump-dom "${URL}?token=$TA" >"$TMP/page.html" 2>"$TMP/chromium.log" ||
        fail "chromium could not load the status page: $(tail -5 "$TMP/chromium.log")"
    grep -q "<tr id=\"req-$A\">" "$TMP/page.html" || fail "alice's page lacks her row: $(head -c 2000 "$TMP/page.html")"
    ! grep -q "req-$B" "$TMP/page.html" || fail "alice's page shows bob's request"
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=10000 --dump-dom "$URL" >"$TMP/page-none.html" 2>>"$TMP/chromium.log" ||
        fail "chromium could not load the status page without a token"
    ! grep -q "<tr id=\"req-" "$TMP/page-none.html" || fail "the page without a token shows requests"
    grep -q "HTTP 401" "$TMP/page-none.html" || fail "the page without a token does not say 401"
    pass "status page: 401 without a token; each client's token shows its own requests (curl and headless Chromium), the admin's all; refused handshakes in /metrics"
else
    pass "status page: 401 without a token; each client's token shows its own requests, the admin's all (no chromium: browser part not run)"
fi

# ---- a forging worker: its answers for jobs it was not sent are dropped and counted
"$TOOL" rogue "$EP" "$K/rogue_secret" "$K/broker" forge >"$TMP/forge.log" 2>&1 ||
    fail "rogue forge: fetches not as they must be ($(cat "$TMP/forge.log"))"
grep -q "own job's graph: served; from a connection without that job: refused" "$TMP/forge.log" ||
    fail "rogue forge: fetch results"
pass "a worker fetches the graph of its own job only"

# ---- a blackholing worker: asks 64 credits, gets 2, holds 2 jobs and never answers
"$TOOL" rogue "$EP" "$K/rogue_secret" "$K/broker" blackhole >"$TMP/blackhole.log" 2>&1 &
PIDS="$PIDS $!"
for _ in $(seq 1 200); do
    grep -q "took 2 jobs" "$TMP/blackhole.log" && break
    sleep 0.05
done
grep -q "took 2 jobs" "$TMP/blackhole.log" || fail "the blackhole took no jobs"
grep -q "asked for 64 credits: given 2" "$TMP/broker.log" || fail "credits not clamped"
"$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms 100 --name honest \
    --cert "$K/worker_secret" --broker-key "$K/broker" >"$TMP/worker.log" 2>&1 &
PIDS="$PIDS $!"
for id in "$A" "$B"; do
    for _ in $(seq 1 1200); do
        s=$(as_key admin status "$id" 2>/dev/null | sed -n '1s/.*: //p')
        [ "$s" = "done" ] && break
        case "$s" in failed|cancelled) fail "request $id $s" ;; esac
        sleep 0.1
    done
    [ "$s" = "done" ] || fail "request $id did not finish (state '$s')"
done
grep -q "passed its" "$TMP/broker.log" || fail "no deadline passed: the blackhole's jobs did not move on"
pass "a blackholing worker's jobs moved on after their deadline; both requests done"

# ---- the forged answers changed nothing: alice's plan is the embedded run's
"$BIN" plan "$TMP/bert.json" "$TMP/dgx1.json" -o "$TMP/ref.json" --quiet || fail "embedded plan"
as_key alice result "$A" -o "$TMP/alice.json" --quiet || fail "alice cannot fetch her plan"
"$TOOL" compare "$TMP/ref.json" "$TMP/alice.json" 0.001 || fail "alice's plan differs from the embedded one"
pass "alice's plan agrees with the embedded run"

kill "$BROKER_PID"
wait "$BROKER_PID" 2>/dev/null || true
n=$(sed -n 's/.*malformed, \([0-9]*\) answers from workers that did not hold the job.*/\1/p' "$TMP/broker.log")
[ -n "$n" ] || fail "the broker's last line does not count foreign answers"
[ "$n" -ge 17 ] || fail "forged answers counted: $n, expected at least 17"
pass "$n answers from workers that did not hold the job: dropped and counted"

# ---- a second CURVE broker (every key of the first), for batch: it takes the keys, and a
# broker gone for good with a plan missing is a failure (exit 1, "1 of 2"), never success
"$BIN" broker --journal none --bind tcp://127.0.0.1:0 --heartbeat-ms 100 --cert "$K/broker_secret" \
    --clients "$K/clients" --workers "$K/workers" --admins "$K/admins" >"$TMP/broker2.log" 2>&1 &
BROKER2_PID=$!
PIDS="$PIDS $BROKER2_PID"
EP=""
for _ in $(seq 1 100); do
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker2.log" 2>/dev/null || true)
    [ -n "$EP" ] && break
    sleep 0.05
done
[ -n "$EP" ] || fail "broker 2 did not start"
"$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms 100 --name honest2 \
    --cert "$K/worker_secret" --broker-key "$K/broker" >"$TMP/worker2.log" 2>&1 &
WORKER2_PID=$!
PIDS="$PIDS $WORKER2_PID"
printf '%s %s\n' "$TMP/bert.json" "$TMP/dgx1.json" >"$TMP/one.list"
printf '%s %s\n%s %s --microbatches 4\n' "$TMP/bert.json" "$TMP/dgx1.json" "$TMP/bert.json" \
    "$TMP/dgx1.json" >"$TMP/two.list"
mkdir "$TMP/b1" "$TMP/b2"
as_key alice batch "$TMP/one.list" -o "$TMP/b1" --quiet || fail "batch with keys"
[ -s "$TMP/b1/bert-on-dgx1-L1.plan.json" ] || fail "batch with keys wrote no plan"
expect_rc 2 "$TMP/batch-nodir.out" -- as_key alice batch "$TMP/one.list" -o "$TMP/nodir"
grep -q -- "-o $TMP/nodir: No such file or directory (create the directory first)" \
    "$TMP/batch-nodir.out" || fail "batch -o on a missing directory: $(cat "$TMP/batch-nodir.out")"
pass "batch takes --cert and --broker-key; -o on a missing directory says so"
kill -9 "$WORKER2_PID"
# line 1 is finished at the broker (its plan comes back at once), line 2 waits for a worker
as_key alice batch "$TMP/two.list" -o "$TMP/b2" --timeout 0.5 --patience 2 \
    >"$TMP/batch-gone.out" 2>&1 &
BATCH_PID=$!
for _ in $(seq 1 200); do
    [ -s "$TMP/b2/bert-on-dgx1-L1.plan.json" ] && break
    sleep 0.05
done
[ -s "$TMP/b2/bert-on-dgx1-L1.plan.json" ] || fail "batch: the finished line's plan not written"
kill -9 "$BROKER2_PID"
rc=0
wait "$BATCH_PID" || rc=$?
[ "$rc" = 1 ] || fail "batch with a plan missing exited $rc, expected 1 ($(cat "$TMP/batch-gone.out"))"
grep -q "no broker at" "$TMP/batch-gone.out" || fail "batch: the broker's absence not reported"
pass "batch: the broker gone with one plan of two written exits 1"
