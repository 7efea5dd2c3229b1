#!/bin/sh
# The broker's HTTP face end to end, on loopback only: a broker with --http and one worker plan a
# small BERT; then /metrics must pass `promtool check metrics` and count the request and its
# jobs, /api/status must list the request as done with a link to its plan and mapping picture,
# both must be served, and the status page, loaded in headless Chromium, must show the request
# (its script fills the table from /api/status, so this checks the script too).
# promtool (Debian prometheus) and chromium are skipped with a SKIP line when missing; CI
# installs them (scripts/packages.txt, group test). curl is required.
#
# Needs PF_BIN (planfarm). Every process is started here and killed on exit.
set -eu
BIN=${PF_BIN:-./planfarm}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_metrics.XXXXXX")
PIDS=""
cleanup() {
    for p in $PIDS; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

HB=100
fail() { echo "FAIL: $*" >&2; for f in "$TMP"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done; exit 1; }
pass() { echo "ok: $*"; }
skip() { echo "SKIP: $*"; }

command -v curl >/dev/null 2>&1 || fail "curl is not installed (Debian package curl)"
fetch() { curl -sS --max-time 10 "$@"; }

# ---- a broker with --http, one worker ----
"$BIN" broker --journal none --bind tcp://127.0.0.1:0 --http 127.0.0.1:0 --heartbeat-ms $HB >"$TMP/broker.log" 2>&1 &
PIDS="$PIDS $!"
EP="" URL=""
for _ in $(seq 1 100); do
    EP=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$TMP/broker.log" 2>/dev/null || true)
    URL=$(sed -n 's/.*metrics on \(http:[^ ]*\)$/\1/p' "$TMP/broker.log")
    [ -n "$EP" ] && [ -n "$URL" ] && break
    sleep 0.05
done
if [ -z "$EP" ] || [ -z "$URL" ]; then fail "broker did not start with --http"; fi
URL=${URL%/}
"$BIN" worker --connect "$EP" --threads 1 --heartbeat-ms $HB --name w1 >"$TMP/worker.log" 2>&1 &
PIDS="$PIDS $!"

# A taken port is refused with the reason, before the broker starts serving.
port=${URL##*:}
rc=0; "$BIN" broker --journal none --bind tcp://127.0.0.1:0 --http "127.0.0.1:$port" >"$TMP/second.log" 2>&1 || rc=$?
if [ $rc -eq 0 ] || ! grep -q "cannot listen there" "$TMP/second.log"; then
    fail "a second broker on the same --http port was not refused (rc $rc)"
fi
pass "a taken --http port is refused"

# ---- plan something small through it ----
"$BIN" model bert --layers 4 -o "$TMP/bert.json"
"$BIN" cluster dgx1 --machines 1 -o "$TMP/dgx1.json"
"$BIN" plan "$TMP/bert.json" "$TMP/dgx1.json" --broker "$EP" -o "$TMP/plan.json" --quiet ||
    fail "plan through the broker"

# The loop publishes once per heartbeat: wait for the finished request to show.
ID=""
for _ in $(seq 1 100); do
    fetch "$URL/api/status" >"$TMP/status.json" 2>/dev/null || true
    ID=$(sed -n 's/.*"id":"\([a-z0-9]*\)".*"state":"done".*/\1/p' "$TMP/status.json")
    [ -n "$ID" ] && break
    sleep 0.05
done
[ -n "$ID" ] || fail "/api/status never listed a done request: $(cat "$TMP/status.json")"
grep -q "\"plan\":\"/api/plan/$ID\"" "$TMP/status.json" || fail "/api/status: no plan link for $ID"
grep -q "\"mapping_svg\":\"/api/plan/$ID/mapping.svg\"" "$TMP/status.json" ||
    fail "/api/status: no mapping picture link for $ID"
pass "/api/status lists $ID as done with its links"

# ---- /metrics ----
fetch "$URL/metrics" >"$TMP/metrics.txt" || fail "GET /metrics"
grep -qx 'planfarm_requests{state="done"} 1' "$TMP/metrics.txt" || fail "/metrics: not 1 done request: $(grep planfarm_requests "$TMP/metrics.txt")"
grep -qx 'planfarm_requests_submitted_total 1' "$TMP/metrics.txt" || fail "/metrics: submitted"
grep -qx 'planfarm_workers 1' "$TMP/metrics.txt" || fail "/metrics: not 1 worker"
answered=$(sed -n 's/^planfarm_jobs_answered_total{kind="dp_partition"} //p' "$TMP/metrics.txt")
timed=$(sed -n 's/^planfarm_job_latency_seconds_count{kind="dp_partition"} //p' "$TMP/metrics.txt")
[ "${answered:-0}" -gt 0 ] || fail "/metrics: no dp_partition job answered"
[ "$timed" = "$answered" ] || fail "/metrics: $answered dp_partition answers but $timed timed"
pass "/metrics counts the request, the worker and $answered timed dp_partition answers"
if command -v promtool >/dev/null 2>&1; then
    promtool check metrics <"$TMP/metrics.txt" >"$TMP/promtool.log" 2>&1 ||
        fail "promtool check metrics: $(cat "$TMP/promtool.log")"
    pass "promtool check metrics"
else
    skip "promtool check metrics: promtool not installed (Debian package prometheus)"
fi

# ---- the plan and its picture ----
fetch "$URL/api/plan/$ID" >"$TMP/served.json" || fail "GET /api/plan/$ID"
cmp -s "$TMP/served.json" "$TMP/plan.json" || fail "/api/plan/$ID differs from the plan the client got"
fetch "$URL/api/plan/$ID/mapping.svg" >"$TMP/mapping.svg" || fail "GET mapping.svg"
grep -q '<svg ' "$TMP/mapping.svg" || fail "mapping.svg is not SVG"
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/plan/rnothere")
[ "$code" = 404 ] || fail "an unknown plan gave $code, not 404"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/metrics")
[ "$code" = 405 ] || fail "POST /metrics gave $code, not 405"
pass "the plan (as the client got it), its mapping picture, 404 and 405"

# ---- the status page in a browser ----
if command -v chromium >/dev/null 2>&1; then
    mkdir "$TMP/chromium"
    # --virtual-time-budget: the page's fetch of /api/status runs before the DOM is dumped.
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking \
        --disable-component-update --disable-sync --no-first-run --user-data-dir="$TMP/chromium" \
        --virtual-time-budget=10000 --dump-dom "$URL" >"$TMP/page.html" 2>"$TMP/chromium.log" ||
        fail "chromium could not load $URL: $(tail -5 "$TMP/chromium.log")"
    grep -q "<tr id=\"req-$ID\">" "$TMP/page.html" ||
        fail "the status page shows no row for $ID: $(head -c 2000 "$TMP/page.html")"
    grep -q "<td class=\"done\">done</td>" "$TMP/page.html" || fail "the status page: $ID is not done"
    grep -q "href=\"/api/plan/$ID/mapping.svg\"" "$TMP/page.html" ||
        fail "the status page does not link the mapping picture"
    pass "the status page in headless Chromium lists $ID as done"
else
    skip "status page in a browser: chromium not installed (Debian package chromium)"
fi
