#!/bin/sh
# The plan summary a person reads (issue 25 finding 8, issue 22 item 1): without --global-batch
# it says that each candidate's global batch followed its replica count; with one it does not;
# the block search prints every choice it made (micro-batch, virtual stages, sequence, context
# and expert parallelism, recomputation, ZeRO, TP overlap).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
PF_BIN=${PF_BIN:-$top/planfarm}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
PF_BIN=$PF_BIN "$top/examples/make-examples.sh" "$tmp/ex" >/dev/null 2>&1
pass=0
"$PF_BIN" plan "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" --tp 2 --stages 4 \
    -o "$tmp/free.json" 2>"$tmp/free.err" || { echo "FAIL: plan without --global-batch"; exit 1; }
grep -q "^  note: no --global-batch, so every candidate ran 4 micro-batches per replica" \
    "$tmp/free.err" || { cat "$tmp/free.err"; echo "FAIL: no note without --global-batch"; exit 1; }
echo "ok: without --global-batch the summary says the global batch followed R"
pass=$((pass + 1))
"$PF_BIN" plan "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" --block-search \
    --global-batch 64 -o "$tmp/blocks.json" 2>"$tmp/blocks.err" ||
    { echo "FAIL: plan --block-search --global-batch 64"; exit 1; }
if grep -q "note: no --global-batch" "$tmp/blocks.err"; then
    echo "FAIL: the note with --global-batch"; exit 1
fi
for w in "block search: micro-batch" "virtual stages" "sequence parallel" "context parallel" \
    "expert parallel" "recomputation" "ZeRO" "TP communication overlap"; do
    grep -q "$w" "$tmp/blocks.err" || { cat "$tmp/blocks.err"; echo "FAIL: no '$w'"; exit 1; }
done
echo "ok: with --global-batch no note, and the block search's choices are all printed"
pass=$((pass + 1))
echo "summary: $pass passed, 0 failed"
