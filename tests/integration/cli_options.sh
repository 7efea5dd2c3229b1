#!/bin/sh
# The command line's option handling, as users see it: for bad flags, missing operands and
# values out of range, every sub-command's message on stderr and its exit status (2 for bad
# usage), and a checksum of every sub-command's --help. The expected text is fixed below, so a
# change in any message, range, alias or help line fails here first.
#
# Needs PF_BIN (planfarm). `sh cli_options.sh --print` prints what the binary says instead of
# comparing it (to review a deliberate change before the expected text is updated).
set -eu
BIN=${PF_BIN:-./planfarm}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_cliopt.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
cd "$TMP"
# The paths in messages are relative to $TMP, so the text does not depend on where it runs.
: >empty.list
printf 'g.json c.json --stages 0\n' >zero.list
printf '# comment\n\ng.json c.json --bogus 3\n' >bogus.list
printf 'g.json c.json --stages\n' >incomplete.list
printf 'g.json c.json --stages 2 extra\n' >extra.list
printf 'g.json\n' >short.list
printf 'g.json c.json --schedule signal\n' >signal.list

# One case a line: the arguments after `planfarm`, split on blanks ('' is an empty argument).
cases() {
    cat <<'CASES'
bogus
check --bogus x
check --max-downsets 0 x
check --max-downsets abc x
check --max-downsets
check
check a b
cluster
cluster hier mesh2d
cluster foo
cluster --bogus hier
cluster --machines 0 hier
cluster --machines x mesh2d
cluster --gpus 3 dgx1
cluster --dims 4 mesh2d
cluster --dims 4x0 mesh2d
cluster --dims 4xa mesh2d
cluster --dims 4x4 mesh3d
cluster --inter-latency-us 1 --dims 2x2 uniform
cluster --mem-gb 0 hier
cluster --mem-gb -1 hier
cluster --tflops abc hier
cluster --latency-us 1e10 hier
cluster --seed -1 uniform
cluster --devices 5000 uniform
cluster --name '' hier
model
model foo
model gpt bert
model --bogus gpt
model --layers 0 gpt
model gpt --layers abc --hidden 0
model --efficiency 2 gpt
model --hbm-gbps -1 gpt
model --precision fp8 gpt
model --name '' gpt
model --experts 4 gpt
model --depth 50 gpt
model --preset 999b llama
model --heads 7 gpt
import
import foo x
import --microbatch 0 pipedream x
import --bogus pipedream x
partition a
partition a b
partition --bogus a b
partition -s 0 a b
partition --stages x a b
partition -s 2 -r 0 a b
partition -s 2 -m 0 a b
partition -s 2 -k -2 a b
partition -s 2 --alpha -1 a b
partition -s 2 --flat-gbps 0 a b
partition -s 2 --max-downsets 0 a b
partition -s 2 -t 0 a b
partition -s
map a b
map - - c
map --bogus a b c
map --instantiation foo a b c
map --probe-seconds -1 a b c
map --eps 2 a b c
map --batch 0 a b c
map --threads 0 a b c
map --seed -1 a b c
simulate a b
simulate - - c
simulate --bogus a b c
simulate --schedule foo a b c
simulate --microbatches 0 a b c
simulate --buckets x a b c
simulate --timeline - a b c
draw a
draw - b
draw --bogus a b
draw -o /nonexistent/x.svg a b
export a b c
export foo a b c
export megatron - - c
export --bogus megatron a b c
plan a
plan --bogus a b
plan --stages
plan --s 1 a b
plan --stages 0 a b
plan --stages x a b
plan --replicas 0 a b
plan --microbatches 0 a b
plan --coarsen -2 a b
plan --max-downsets 0 a b
plan --flat-gbps 0 a b
plan --candidates 0 a b
plan --probes-in-flight 65 a b
plan --eps 0 a b
plan --probe-seconds 0 a b
plan --instantiation x a b
plan --seed 0 a b
plan --max-stages 0 a b
plan --tp 0 a b
plan --max-tp 0 a b
plan --precision fp8 a b
plan --optimizer x a b
plan --zero 4 a b
plan --recompute x a b
plan --schedule signal a b
plan --global-batch 0 a b
plan --mem-headroom 1 a b
plan --probe-timeouts -1 a b
plan --workers 0 a b
plan --threads 0 a b
plan --timeout 0 a b
plan --broker foo a b
plan -o /nonexistent/dir/x a b
submit a
submit --stages 0 a b
submit --priority x a b
submit --priority 1000001 a b
submit --timeout 0 a b
submit -o x a b
submit --broker foo a b
batch
batch --bogus x
batch --patience -1 x
batch --timeout 0 x
batch --priority 2000000 x
batch --broker foo x
batch -o /nonexistent x
batch missing.list
batch empty.list
batch zero.list
batch bogus.list
batch incomplete.list
batch extra.list
batch short.list
batch signal.list
broker extra
broker --bogus
broker --bind foo
broker --max-attempts 0
broker --dp-timeout 0
broker --probe-margin -1
broker --max-requests 0
broker --expire-days -1
broker --client-requests 0
broker --client-jobs 0
broker --test-prep-delay-ms -1
broker --max-credits 1001
broker --heartbeat-ms 1
broker --liveness 0
broker --max-msg-mb 0
broker --clients d
broker --admins d
broker --compact --journal none
broker --bind tcp://10.1.2.3:5 --journal none
worker
worker extra
worker --bogus
worker --connect foo
worker --threads 0 --connect tcp://127.0.0.1:1
worker --credits 0
worker --cache-mb 0
worker --test-delay-ms -1
worker --heartbeat-ms 5
worker --max-msg-mb x
agent
agent x
agent --bogus
agent --connect foo
agent --heartbeat-ms 5
agent --liveness 0
agent --reconnect-max-ms 1
keygen
keygen a b
keygen .x
keygen --bogus
status
status --bogus x
status --timeout 0 x
cancel
list x
list --timeout abc
result
result --timeout 0 x
profile
profile --bogus
profile -q x
profile --local --broker tcp://127.0.0.1:1
profile --broker tcp://127.0.0.1:1 --graph g
profile --broker foo
profile --local --cluster-out x
profile --timeout 0 --local
profile --stream-mb 0
profile --device -1
profile --reps 0
profile --sizes 4
profile --sizes 4,x
profile --sizes 4,2G
profile --dtype fp8
broker --h
worker --c x
submit --p 1 a b
status --b x
cluster --in 1 hier
model --l 2 gpt
partition --st 2 a
plan --no 1 a b
CASES
}

run_case() {
    # shellcheck disable=SC2086
    eval "set -- $1"
    rc=0
    "$BIN" "$@" >out.txt 2>err.txt </dev/null || rc=$?
    echo "\$ planfarm $*"
    cat out.txt err.txt
    echo "[exit $rc]"
}

actual() {
    cases | while IFS= read -r line; do run_case "$line"; done
    for c in check cluster model import partition map simulate draw export plan broker worker \
             agent submit batch status result cancel list keygen profile; do
        echo "help $c: $("$BIN" "$c" --help | cksum)"
    done
    echo "help: $("$BIN" --help | cksum)"
}

if [ "${1:-}" = --print ]; then
    actual
    exit 0
fi

actual >actual.txt
cat >expected.txt <<'EXPECTED'
@EXPECTED@
EXPECTED
if ! diff -u expected.txt actual.txt >diff.txt; then
    cat diff.txt >&2
    echo "FAIL: cli_options: the command line says something else than expected (diff above)" >&2
    exit 1
fi
n=$(cases | wc -l)
echo "cli_options: $n bad-usage cases and 22 --help texts as expected"
