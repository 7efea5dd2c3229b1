#!/bin/sh
# sanitize.sh ASAN_BIN TESTTOOL SCRIPT=LEAKS...: run tests/integration/SCRIPT.sh with PF_BIN set to
# an ASan/UBSan build of planfarm (make sanitize). Every planfarm process a script starts, in the
# foreground or not, writes its sanitizer report to a file of its own (log_path), so a report from a
# broker or a worker whose exit status the script never reads still fails the run. LEAKS 1 turns
# LeakSanitizer on for that script (Makefile SAN_SCRIPTS says which and why). Prints each script's
# wall time.
set -eu
bin=$1 tool=$2
shift 2
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT INT TERM
failed=
for spec in "$@"; do
    t=${spec%=*} leaks=${spec#*=}
    mkdir -p "$logs/$t"
    echo "== tests/integration/$t.sh under ASan/UBSan (detect_leaks=$leaks)"
    t0=$(date +%s)
    rc=0
    ASAN_OPTIONS="detect_leaks=$leaks:log_path=$logs/$t/asan:abort_on_error=0" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$logs/$t/ubsan" \
    LSAN_OPTIONS="log_path=$logs/$t/lsan" \
    PF_BIN="$bin" PF_TESTTOOL="$tool" PF_DATA="$PWD/tests/data" \
        sh "tests/integration/$t.sh" || rc=$?
    t1=$(date +%s)
    reports=$(find "$logs/$t" -type f | sort)
    if [ -n "$reports" ]; then
        for f in $reports; do echo "--- $f"; head -60 "$f"; done
        echo "FAIL $t.sh: sanitizer reports above ($((t1 - t0)) s)"
        failed="$failed $t"
    elif [ $rc -ne 0 ]; then
        echo "FAIL $t.sh: exit $rc ($((t1 - t0)) s)"
        failed="$failed $t"
    else
        echo "ok $t.sh: $((t1 - t0)) s"
    fi
done
[ -z "$failed" ] || { echo "sanitize: failed:$failed"; exit 1; }
