#!/bin/sh
# The circle check (docs/DESIGN.md "Conventions"): no include circle and no call circle between
# files of the product. A module is a .c with its .h; module A depends on B when A's .c or .h
# includes B's header, or when A's object file uses a symbol B's object file defines. Either
# graph must be acyclic, so that every file can be read knowing only the files below it.
# Usage: scripts/check-cycles.sh [BUILD [ROOT]]   (BUILD: the folder of the objects, default
#        build, relative to ROOT; without objects only the include graph is checked)
set -eu
cd "${2:-$(dirname "$0")/..}"
build=${1:-build}
dirs="planner proto broker worker profiler client cli"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Prints the modules of one loop that tsort found in the edge list $1, and fails.
acyclic() { # edges-file what
    if tsort "$1" > /dev/null 2> "$tmp/loop"; then
        return 0
    fi
    echo "check-cycles: $2 circles between files (each loop's files, in order):" >&2
    awk '/input contains a loop/ { if (line != "") print "  " line; line = ""; next }
         { sub(/^tsort: /, ""); line = line (line == "" ? "" : " -> ") $0 }
         END { if (line != "") print "  " line }' "$tmp/loop" >&2
    return 1
}

# shellcheck disable=SC2086
find $dirs -name '*.[ch]' | sort > "$tmp/files"
# "from to" for each quoted include of another module's header
# shellcheck disable=SC2046
awk '/^[ \t]*#[ \t]*include[ \t]*"/ {
        t = $0; sub(/^[^"]*"/, "", t); sub(/".*$/, "", t)
        from = FILENAME; sub(/\.[ch]$/, "", from); to = t; sub(/\.h$/, "", to)
        if (from != to) print from, to
    }' $(cat "$tmp/files") | while read -r from to; do
        [ -f "$to.h" ] && echo "$from $to"
    done | sort -u > "$tmp/includes"
status=0
acyclic "$tmp/includes" include || status=1
n_inc=$(wc -l < "$tmp/includes")

objs=$(for d in $dirs; do [ -d "$build/$d" ] && find "$build/$d" -name '*.o' ! -name '*.pb-c.o'; done |
           while read -r o; do s=${o#"$build"/}; [ -f "${s%.o}.c" ] && echo "$o"; done | sort)
if [ -z "$objs" ]; then
    [ $status = 0 ] && echo "check-cycles: $n_inc include arrows, no circle (no objects under $build/: calls not checked)"
    exit $status
fi
# symbol -> defining module, then "caller callee" for every undefined symbol another module defines
for o in $objs; do
    m=${o#"$build"/}; m=${m%.o}
    nm -g --defined-only "$o" | awk -v m="$m" 'NF == 3 { print "D", $3, m }'
    nm -u "$o" | awk -v m="$m" '{ print "U", $NF, m }'
done | awk '$1 == "D" { def[$2] = $3; next }
            { use[NR] = $2; user[NR] = $3 }
            END { for (i in use) if ((use[i] in def) && def[use[i]] != user[i]) print user[i], def[use[i]] }' |
    sort -u > "$tmp/calls"
acyclic "$tmp/calls" call || status=1
n_calls=$(wc -l < "$tmp/calls")
[ $status = 0 ] && echo "check-cycles: $n_inc include arrows and $n_calls call arrows between files, no circle"
exit $status
