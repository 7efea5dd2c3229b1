#!/bin/sh
# The layer check (README "Architecture"): computes the include graph of every .c and .h under
# planner/ proto/ broker/ worker/ profiler/ cli/ and fails on any arrow that points up or
# sideways between peers. Ranks: planner 0 < proto 1 < broker, worker, profiler 2 < cli 3;
# broker, worker and profiler are peers and include none of each other. The planner also
# includes no socket, protobuf, database or HTTP header.
# Usage: scripts/check-layers.sh [ROOT]   (default: the repository this script is in)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
files=$(find planner proto broker worker profiler cli -name '*.[ch]' 2>/dev/null | sort)
[ -n "$files" ] || { echo "check-layers: no sources under $(pwd)" >&2; exit 2; }
# One line per include: "<file> <line> <quoted|system> <target>"
# shellcheck disable=SC2086
awk '
    /^[ \t]*#[ \t]*include[ \t]*[<"]/ {
        s = $0; sub(/^[ \t]*#[ \t]*include[ \t]*/, "", s)
        kind = substr(s, 1, 1) == "<" ? "system" : "quoted"
        t = substr(s, 2); sub(/[>"].*$/, "", t)
        print FILENAME, FNR, kind, t
    }' $files | awk '
    function layer(path,   d) {
        d = path; sub(/\/.*$/, "", d)
        if (d == "planner") return 0
        if (d == "proto") return 1
        if (d == "broker" || d == "worker" || d == "profiler") return 2
        if (d == "cli") return 3
        return -1
    }
    function dir(path,   d) { d = path; sub(/\/.*$/, "", d); return d }
    {
        file = $1; line = $2; kind = $3; target = $4
        from = layer(file)
        if (kind == "system") {
            if (from == 0 && target ~ /^(zmq|czmq|protobuf-c\/|sqlite3|microhttpd)/) {
                printf "%s:%d: the planner includes <%s> (no sockets, protobuf, database or HTTP below proto/)\n", file, line, target
                bad++
            }
            next
        }
        to = layer(target)
        if (to < 0) next   # same-directory or generated names resolve below
        if (to > from) {
            printf "%s:%d: includes \"%s\": %s/ (layer %d) may not include %s/ (layer %d)\n", file, line, target, dir(file), from, dir(target), to
            bad++
        } else if (to == from && from == 2 && dir(file) != dir(target)) {
            printf "%s:%d: includes \"%s\": %s/ and %s/ are peers and include none of each other\n", file, line, target, dir(file), dir(target)
            bad++
        }
        n++
    }
    END {
        if (bad) { printf "check-layers: %d arrow(s) point the wrong way\n", bad > "/dev/stderr"; exit 1 }
        printf "check-layers: %d includes, every arrow points down\n", n
    }'
