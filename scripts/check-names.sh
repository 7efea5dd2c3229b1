#!/bin/sh
# The name check (docs/DESIGN.md "Conventions"): every function a product file exports is named
# for the file, pf_<file>_* (or pf_<file> itself), so that a call says where its callee lives.
# Read from the object files' symbols. planner/core/util.c is the planner's one unprefixed base
# (pf_fail, pf_grow, pf_strdup, ...); cli/ has its own cli_ and cmd_ names and is not checked.
# Usage: scripts/check-names.sh [BUILD [ROOT]]   (BUILD relative to ROOT, default build)
set -eu
cd "${2:-$(dirname "$0")/..}"
build=${1:-build}
objs=$(for d in planner proto broker worker profiler client; do
           [ -d "$build/$d" ] && find "$build/$d" -name '*.o' ! -name '*.pb-c.o'; done | sort)
[ -n "$objs" ] || { echo "check-names: no objects under $build/ (build first)" >&2; exit 2; }
bad=0 n=0
for o in $objs; do
    src=${o#"$build"/}; src=${src%.o}.c
    [ -f "$src" ] || continue   # an object left from a file since removed
    [ "$src" = planner/core/util.c ] && continue
    m=$(basename "$src" .c)
    for sym in $(nm -g --defined-only "$o" | awk '$2 == "T" { print $3 }'); do
        n=$((n + 1))
        case $sym in
            "pf_$m"|"pf_${m}_"*) ;;
            *) echo "$src: exports $sym, not pf_${m}_*"; bad=$((bad + 1)) ;;
        esac
    done
done
[ $bad = 0 ] || { echo "check-names: $bad function(s) not named for their file" >&2; exit 1; }
echo "check-names: $n exported functions, each named for its file"
