#!/bin/sh
# The layer check passes on the tree and fails on each kind of wrong arrow (so it can fail).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
check="$top/scripts/check-layers.sh"
"$check" "$top"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
expect_fail() { # name, file, include line
    rm -rf "$tmp/t" && mkdir -p "$tmp/t/planner/core" "$tmp/t/planner/ir" "$tmp/t/proto" "$tmp/t/broker" "$tmp/t/worker" "$tmp/t/cli"
    echo '#include "planner/core/util.h"' > "$tmp/t/planner/core/a.c"
    printf '%s\n' "$3" > "$tmp/t/$2"
    if out=$("$check" "$tmp/t" 2>&1); then
        echo "FAIL: layer check passed with $1"; exit 1
    fi
    echo "$out" | grep -q "$2:1:" || { echo "FAIL: $1: no location in: $out"; exit 1; }
    echo "ok: $1 refused"
}
expect_fail "planner including proto" planner/ir/b.c '#include "proto/codec.h"'
expect_fail "planner including a socket header" planner/core/b.h '#include <czmq.h>'
expect_fail "proto including the broker" proto/b.c '#  include "broker/broker.h"'
expect_fail "broker including the worker" broker/b.c '#include "worker/worker.h"'
expect_fail "worker including the cli" worker/b.c '#include "cli/cli.h"'
expect_fail "a planner folder including a later one" planner/ir/b.c '#include "planner/map/mapping.h"'
expect_fail "a planner file outside the sub-folders" planner/b.c '#include "planner/core/util.h"'
echo "layers: 7 passed, 0 failed"
