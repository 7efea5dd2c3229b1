#!/bin/sh
# The size check (docs/DESIGN.md "Conventions"): no product function over 120 lines or over
# cyclomatic complexity 30 (pmccabe's first column: a switch counts once, each case is a table
# row rather than a decision the reader must hold), and no product .c over 900 lines. A function
# that is better left whole is listed in scripts/function-limits.txt with its reason, and is held
# to the figures written there, so it cannot grow unnoticed.
# Usage: scripts/check-functions.sh [ROOT]   (default: the repository this script is in)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
max_lines=120 max_ccn=30 max_file=900
command -v pmccabe >/dev/null || { echo "check-functions: pmccabe is not installed (scripts/setup.sh test)" >&2; exit 2; }
src=$(find planner proto broker worker profiler client cli -name '*.c' 2>/dev/null | sort)
[ -n "$src" ] || { echo "check-functions: no sources under $(pwd)" >&2; exit 2; }
allow=scripts/function-limits.txt
[ -f "$allow" ] || allow=/dev/null
bad=0
# shellcheck disable=SC2086
for f in $src; do
    n=$(wc -l < "$f")
    if [ "$n" -gt $max_file ]; then
        echo "$f:1: $n lines (at most $max_file in one product file)"; bad=$((bad + 1))
    fi
done
# pmccabe: ccn ccn_traditional statements first_line lines file(line): name
# shellcheck disable=SC2086
out=$(pmccabe $src 2>/dev/null | awk -v ml=$max_lines -v mc=$max_ccn '
    FILENAME != "-" { if ($0 !~ /^[ \t]*(#|$)/) { lim_ccn[$1] = $2; lim_lines[$1] = $3 } next }
    {
        loc = $6; name = $7; sub(/\(.*$/, "", loc)
        key = loc ":" name
        ccn = $1; lines = $5
        mc_here = (key in lim_ccn) ? lim_ccn[key] : mc
        ml_here = (key in lim_lines) ? lim_lines[key] : ml
        if (ccn > mc_here || lines > ml_here) {
            line = $6; sub(/^[^(]*\(/, "", line); sub(/\).*$/, "", line)
            printf "%s:%s: %s: %d lines, complexity %d (at most %d and %d%s)\n", loc, line, name, lines, ccn, ml_here, mc_here, (key in lim_ccn) ? ", as scripts/function-limits.txt allows it" : ""
        }
    }' "$allow" -) || true
if [ -n "$out" ]; then
    echo "$out"
    bad=$((bad + $(echo "$out" | wc -l)))
fi
if [ $bad -gt 0 ]; then
    echo "check-functions: $bad function(s) or file(s) over the limits" >&2
    exit 1
fi
echo "check-functions: every product function within $max_lines lines and complexity $max_ccn (or its listed limit), every file within $max_file lines"
