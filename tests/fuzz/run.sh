#!/bin/sh
# The fuzz targets (make fuzz, make fuzz-replay). Usage:
#   run.sh fuzz BUILD SECONDS   seed, then fuzz each target SECONDS; new inputs go to BUILD/corpus
#                               (FUZZ_ONLY="gen_files wire_peer": only those targets)
#   run.sh replay BUILD         run every file of tests/fuzz/corpus/<target> once, no fuzzing
#   run.sh merge BUILD          rebuild tests/fuzz/corpus/<target> as the smallest set of
#                               committed + found inputs with the same coverage
# A crash leaves crash-* / leak-* / timeout-* in BUILD/artifacts and fails the run.
set -eu
mode=$1 build=$2
cd "$(dirname "$0")/../.."
targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c | sed 's/^fuzz_//'; done)
if [ -n "${FUZZ_ONLY:-}" ]; then
    for t in $FUZZ_ONLY; do
        [ -f "tests/fuzz/fuzz_$t.c" ] || { echo "run.sh: no target $t (tests/fuzz/fuzz_$t.c)" >&2; exit 2; }
    done
    targets=$FUZZ_ONLY
fi
mkdir -p "$build/artifacts"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

seed() {
    rm -rf "$build/seeds"
    build/pf_fuzz_seeds "$build/seeds"
    mkdir -p "$build/seeds/pipedream" "$build/seeds/piper"
    for f in alexnet vgg16 resnet18 gnmt; do cp tests/data/pipedream/$f.txt "$build/seeds/pipedream/"; done
    for f in gnmt resnet; do cp tests/data/piper/$f.json "$build/seeds/piper/"; done
    cp tests/data/piper/resnet.json "$build/seeds/graph_json/piper_resnet.json" 2>/dev/null || true
}

case $mode in
fuzz)
    seconds=$3
    seed
    for t in $targets; do
        mkdir -p "$build/corpus/$t" "tests/fuzz/corpus/$t" "$build/seeds/$t"
        echo "== fuzz_$t: $seconds s"
        "$build/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
            "$build/corpus/$t" "tests/fuzz/corpus/$t" "$build/seeds/$t" 2>&1 |
            grep -E '^(INFO: seed|#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss|==[0-9]+==ERROR|SUMMARY|.*runtime error)' || true
        if ls "$build/artifacts/$t-"* >/dev/null 2>&1; then
            echo "fuzz_$t: crash, see $build/artifacts/" >&2
            exit 1
        fi
    done ;;
replay)
    for t in $targets; do
        files=$(find "tests/fuzz/corpus/$t" -type f 2>/dev/null | sort)
        [ -n "$files" ] || { echo "fuzz_$t: no corpus in tests/fuzz/corpus/$t" >&2; exit 1; }
        # shellcheck disable=SC2086
        "$build/fuzz_$t" -timeout=10 -rss_limit_mb=2048 $files >"$build/replay-$t.log" 2>&1 ||
            { tail -40 "$build/replay-$t.log" >&2; echo "fuzz_$t: replay failed" >&2; exit 1; }
        echo "fuzz_$t: $(echo "$files" | wc -l) inputs replayed"
    done ;;
merge)
    for t in $targets; do
        rm -rf "$build/merged/$t" && mkdir -p "$build/merged/$t" "tests/fuzz/corpus/$t" "$build/corpus/$t"
        "$build/fuzz_$t" -merge=1 -max_len=65536 "$build/merged/$t" "tests/fuzz/corpus/$t" \
            "$build/seeds/$t" "$build/corpus/$t" >/dev/null 2>&1
        rm -rf "tests/fuzz/corpus/$t" && mkdir -p "tests/fuzz/corpus/$t"
        # the committed corpus stays small (< 2 MB in all): inputs over 16 kB stay local
        find "$build/merged/$t" -type f -size -16k -exec cp {} "tests/fuzz/corpus/$t/" \;
        echo "fuzz_$t: $(ls "tests/fuzz/corpus/$t" | wc -l) inputs, $(du -sk "tests/fuzz/corpus/$t" | cut -f1) kB"
    done ;;
*) echo "usage: run.sh fuzz|replay|merge BUILD [SECONDS]" >&2; exit 2 ;;
esac
