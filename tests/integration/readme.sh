#!/bin/sh
# readme.sh: every command README.md and docs/CLI.md show, run as written.
#
# A command is every line of a ```sh block and every "$ " line of a ```console block (with its
# "\" continuation lines); plain ``` blocks are output and are not run. The commands run in
# order, each with `sh -c` and stdin from /dev/null, in a scratch directory that stands in for
# the repository root: ./planfarm and `planfarm` (on PATH) are $PF_BIN, tests/data is $PF_DATA,
# examples/ and tools/ are the repository's, build/examples/ is written by
# examples/make-examples.sh, and docs/ is empty (the simulate example writes its pictures
# there). HOME and XDG_STATE_HOME point inside it, so the broker's journal starts empty.
#
# Each command must exit 0, or the status the docs give for it (expect_for below). A command
# ending in "&" starts in the background and stays up until a later block starts another broker
# (the README's farm examples span two blocks) or the script ends; the script waits for a
# broker's "serving on" and a worker's "connected" line before the next command. A request id
# (r + 32 hex digits) in a command stands for the last id `submit` printed, and before `result`
# the script waits for that request to finish, as a reader who ran `status` first would.
#
# The brokers bind the documented fixed ports (5710, 9710), so the script re-runs itself in a
# private network namespace (unshare -rn) and never meets another broker on this machine;
# where that is not permitted the commands that talk to a broker are checked for syntax only.
#
# Not run here, each for its reason (reason_for below), but checked for syntax:
# `planfarm <cmd> --help` exits 0 for every sub-command they name, `make -n` knows the target,
# Python parses the tool. `make run` and `make test` are not run from inside `make test`
# (recursion): the prelude replays what `make run` does after its build (make-examples, check,
# the two example plans) instead. PF_README_SLOW=1 also runs the slow GPT-3 plans.
#
# Usage: PF_BIN=./planfarm PF_DATA=tests/data sh tests/integration/readme.sh  (make integration)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
PF=${PF_BIN:-$root/planfarm}
DATA=${PF_DATA:-$root/tests/data}
case $PF in /*) ;; *) PF=$(pwd)/$PF ;; esac
case $DATA in /*) ;; *) DATA=$(pwd)/$DATA ;; esac
slow=${PF_README_SLOW:-0}
[ -x "$PF" ] || { echo "readme.sh: $PF is not built" >&2; exit 1; }

# ---- a private loopback for the fixed ports ----
if [ -z "${PF_README_NETNS:-}" ]; then
    if command -v unshare >/dev/null 2>&1 && command -v ip >/dev/null 2>&1 &&
        unshare -rn sh -c 'ip link set lo up' 2>/dev/null; then
        PF_README_NETNS=1 PF_BIN=$PF PF_DATA=$DATA exec unshare -rn sh "$0" "$@"
    fi
    PF_README_NETNS=none
fi
[ "$PF_README_NETNS" = none ] || ip link set lo up

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pf-readme.XXXXXX")
work=$tmp/root
bg_pids=""
stop_background() {
    for p in $bg_pids; do kill "$p" 2>/dev/null || true; done
    for p in $bg_pids; do wait "$p" 2>/dev/null || true; done
    bg_pids=""
}
cleanup() {
    stop_background
    if [ -n "${PF_README_KEEP:-}" ]; then echo "readme.sh: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$work/tests" "$work/docs" "$work/build" "$tmp/bin" "$tmp/home" "$tmp/state" "$tmp/log"
ln -s "$PF" "$work/planfarm"
ln -s "$PF" "$tmp/bin/planfarm"
ln -s "$DATA" "$work/tests/data"
ln -s "$root/examples" "$work/examples"
ln -s "$root/tools" "$work/tools"
export HOME="$tmp/home" XDG_STATE_HOME="$tmp/state" PATH="$tmp/bin:$PATH" PF_BIN="$PF"

# The README's PyTorch block traces the reader's own model, mymodel.py:build. Where Debian's torch
# is installed the block runs as written on GPT-2 small's shape at the README's sequence 4096 (the
# nanoGPT of tests/tools/test_torch2planfarm.py); elsewhere it is checked for syntax only.
have_torch=0
if /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
    have_torch=1
    cat >"$work/mymodel.py" <<EOF_MODEL
import sys
sys.path.insert(0, "$root/tests/tools")
from test_torch2planfarm import NanoGPT


def build():
    return NanoGPT(vocab_size=50257, block_size=4096, n_layer=12, n_head=12, n_embd=768)
EOF_MODEL
fi

# ---- what `make run` does once planfarm is built ----
cd "$work"
{
    examples/make-examples.sh build/examples &&
        ./planfarm check build/examples/bert-large.json &&
        ./planfarm check build/examples/dgx1x4.json &&
        ./planfarm plan build/examples/bert-large.json build/examples/dgx1x4.json -o build/plan.json &&
        ./planfarm plan build/examples/llama-7b.json build/examples/dgx-h100x2.json -o build/llama-plan.json
} >"$tmp/log/make-run" 2>&1 || {
    echo "readme.sh: FAIL: the commands of make run" >&2
    tail -20 "$tmp/log/make-run" >&2
    exit 1
}
echo "ok    make run's commands (examples, check, the two example plans)"

# ---- the commands: "FILE:LINE<tab>BLOCK" at each block, "FILE:LINE<tab>CMD<tab>command" ----
extract() {
    awk -v tab="	" '
        function emit(c) { sub(/[ \t]+$/, "", c); print where tab "CMD" tab c }
        /^```/ {
            if (fence) { fence = 0; kind = ""; next }
            fence = 1; kind = substr($0, 4)
            if (kind == "sh" || kind == "console") print FILENAME ":" FNR tab "BLOCK"
            next
        }
        !fence || (kind != "sh" && kind != "console") { next }
        cont {
            line = $0; sub(/^[ \t]+/, "", line)
            if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = cmd line; next }
            cont = 0; emit(cmd line); next
        }
        {
            line = $0
            if (kind == "console") { if (line !~ /^\$ /) next; line = substr(line, 3) }
            else if (line ~ /^[ \t]*(#|$)/) next
            where = FILENAME ":" FNR
            if (line ~ /\\$/) { sub(/\\$/, "", line); cmd = line; cont = 1; next }
            emit(line)
        }' "$@"
}

# Why a command cannot run here (nothing when it can).
reason_for() {
    case $1 in
        "make run"* | "make test"*)
            echo "make test runs this script (recursion); the prelude replays make run" ;;
        *torch2planfarm.py*)
            [ "$have_torch" = 1 ] || echo "needs torch (Debian: python3-torch) for the reader's model" ;;
        *" model.json "*)
            [ "$have_torch" = 1 ] || echo "needs model.json, written by torch2planfarm.py" ;;
        *"export megatron gpt.json cluster.json plan.json"* | *"export deepspeed gpt.json cluster.json plan.json"*)
            echo "placeholders for a layer-aligned plan of the reader's own model" ;;
        ". run/megatron_args.sh"* | "run/launch.sh "*)
            echo "runs Megatron-LM through torchrun on GPU hosts" ;;
        *"tcp://broker:5710"* | *"/etc/planfarm"* | *"~/.planfarm"* | *" cluster.json"*)
            echo "a set-up over several hosts (the host name broker, keys in /etc/planfarm)" ;;
        "planfarm broker --bind tcp://0.0.0.0:5710 &")
            echo "a set-up over several hosts (agents on every host)" ;;
        *"gpt3.json h100x64.json"*)
            [ "$slow" = 1 ] || echo "slow (tens of seconds on 2 cores): PF_README_SLOW=1 runs it" ;;
        *planfarm\ broker* | *planfarm\ worker* | *planfarm\ submit* | *planfarm\ status* | \
            *planfarm\ result* | *planfarm\ list* | *planfarm\ cancel* | *planfarm\ batch* | curl\ *)
            [ "$PF_README_NETNS" != none ] ||
                echo "no private network namespace here for the fixed ports 5710 and 9710" ;;
    esac
}

# The exit status the docs give for a command.
expect_for() {
    case $1 in
        "planfarm broker --bind tcp://0.0.0.0:5710") echo 2 ;; # plain TCP off loopback: refused
        *) echo 0 ;;
    esac
}

# A command that cannot run: what it names must exist.
check_syntax() {
    case $1 in
        "make "*)
            make -C "$root" -n "$(echo "$1" | awk '{print $2}')" >/dev/null 2>&1 || return 1
            return 0 ;;
    esac
    case $1 in
        *torch2planfarm.py*)
            python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' \
                "$root/tools/torch2planfarm.py" || return 1 ;;
    esac
    for sub in $(printf '%s\n' "$1" | grep -o '\(^\|[ |&;(]\)\(\./\)\?planfarm [a-z]*' |
        awk '{print $NF}'); do
        "$PF" "$sub" --help >/dev/null 2>&1 || { echo "planfarm $sub --help fails"; return 1; }
    done
}

wait_for_line() { # LOG TEXT: up to 30 s
    i=0
    while ! grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -le 300 ] || return 1
        sleep 0.1
    done
}

wait_finished() { # ID: until the request is no longer preparing or running
    i=0
    while "$PF" status "$1" </dev/null 2>/dev/null | head -1 | grep -q ': \(preparing\|running\|queued\)'; do
        i=$((i + 1))
        [ $i -le 600 ] || return 1
        sleep 0.2
    done
}

ran=0
checked=0
failed=0
last_id=""
n=0
list=$tmp/commands
extract "$root/README.md" "$root/docs/CLI.md" | sed "s|$root/||" >"$list"
tab=$(printf '\t')
while IFS="$tab" read -r where what cmd; do
    [ "$what" = CMD ] || continue
    n=$((n + 1))
    cmd_run=$(printf '%s\n' "$cmd" | sed 's/[[:space:]][[:space:]]*#[[:space:]].*$//; s/[[:space:]]*$//')
    reason=$(reason_for "$cmd_run")
    if [ -n "$reason" ]; then
        if out=$(check_syntax "$cmd_run" 2>&1 </dev/null); then
            checked=$((checked + 1))
            echo "help  $where  $cmd_run  ($reason)"
        else
            failed=$((failed + 1))
            echo "FAIL  $where  $cmd_run: not runnable here ($reason), and its syntax check failed: $out"
        fi
        continue
    fi
    if [ -n "$last_id" ]; then
        cmd_run=$(printf '%s\n' "$cmd_run" | sed "s/\\br[0-9a-f]\\{32\\}\\b/$last_id/g")
    fi
    log=$tmp/log/$n
    case $cmd_run in
        *"&")
            c=${cmd_run%&}
            case $c in *planfarm\ broker*) stop_background ;; esac
            sh -c "exec $c" >"$log" 2>&1 </dev/null &
            bg_pids="$bg_pids $!"
            ok=0
            case $c in
                *planfarm\ broker*) wait_for_line "$log" "serving on" && ok=1 ;;
                *planfarm\ worker*) wait_for_line "$log" "connected" && ok=1 ;;
                *) sleep 0.5; ok=1 ;;
            esac
            if [ $ok = 1 ] && kill -0 "$!" 2>/dev/null; then
                ran=$((ran + 1))
                echo "bg    $where  $cmd_run"
            else
                failed=$((failed + 1))
                echo "FAIL  $where  $cmd_run: did not come up"
                tail -5 "$log" | sed 's/^/      /'
            fi
            continue
            ;;
        *planfarm\ result\ r*)
            wait_finished "$last_id" || echo "      (request $last_id still running after 120 s)" ;;
    esac
    want=$(expect_for "$cmd_run")
    t0=$(date +%s)
    set +e
    sh -c "$cmd_run" >"$log" 2>&1 </dev/null
    rc=$?
    set -e
    t1=$(date +%s)
    bad=""
    [ "$rc" = "$want" ] || bad="exit status $rc, expected $want"
    case $cmd_run in # the documented "; echo $?" prints the status the docs show
        *'tiny.json; echo $?') [ "$(tail -1 "$log")" = 3 ] || bad="printed $(tail -1 "$log"), expected 3" ;;
    esac
    case $cmd_run in
        *planfarm\ submit*)
            id=$(grep -o 'r[0-9a-f]\{32\}' "$log" | head -1 || true)
            [ -z "$id" ] || last_id=$id ;;
    esac
    if [ -n "$bad" ]; then
        failed=$((failed + 1))
        echo "FAIL  $where  $cmd_run: $bad"
        tail -8 "$log" | sed 's/^/      /'
    else
        ran=$((ran + 1))
        echo "ok    $where  $cmd_run  ($((t1 - t0)) s)"
    fi
done <"$list"

[ "$n" -gt 0 ] || { echo "readme.sh: no commands found in README.md and docs/CLI.md" >&2; exit 1; }
echo "readme.sh: $ran commands ran, $checked checked for syntax only, $failed failed"
[ "$failed" = 0 ]
