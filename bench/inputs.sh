#!/bin/sh
# Big inputs (issue 26 item 7): generates the chain (1 MiB of activations per op: no plan fits
# 8 V100 and the search must say so fast; 64 KiB: one that plans), wide and long-name graphs with
# bench/inputs_gen.sh and prints wall s, user CPU s (the figure to compare on a shared machine)
# and max RSS (/usr/bin/time) of check and plan on each.
# Usage: sh bench/inputs.sh [PLANFARM] [DIR]   (defaults ./planfarm, /tmp/pf-bench-inputs)
set -eu
pf=${1:-./planfarm} dir=${2:-/tmp/pf-bench-inputs}
here=$(dirname "$0")
mkdir -p "$dir"
sh "$here/inputs_gen.sh" chain 200000 "$dir/chain200k.json"
sh "$here/inputs_gen.sh" chain 50000 "$dir/chain50k.json"
sh "$here/inputs_gen.sh" chain 50000 "$dir/chain50k-fits.json" 65536
sh "$here/inputs_gen.sh" wide 2002 "$dir/wide2002.json"
sh "$here/inputs_gen.sh" longname 50000000 "$dir/longname.json"
"$pf" cluster dgx1 --machines 1 -o "$dir/dgx1.json"
run() { printf '%-40s ' "$*"; /usr/bin/time -f "%e s wall %U s user %M KB exit %x" "$@" >/dev/null 2>"$dir/err" || true; tail -1 "$dir/err"; }
run "$pf" check "$dir/chain200k.json"
run "$pf" plan "$dir/chain50k.json" "$dir/dgx1.json" -o "$dir/p.json"
run "$pf" plan "$dir/chain50k-fits.json" "$dir/dgx1.json" -o "$dir/p.json"
run "$pf" plan "$dir/wide2002.json" "$dir/dgx1.json" -o "$dir/p.json"
run "$pf" check "$dir/longname.json"
run "$pf" plan "$dir/longname.json" "$dir/dgx1.json" -o "$dir/p.json"
