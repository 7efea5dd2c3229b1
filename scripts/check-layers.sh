#!/bin/sh
# The layer check (README "Architecture"): computes the include graph of every .c and .h under
# planner/ proto/ broker/ worker/ profiler/ client/ cli/ and fails on any arrow that points up or
# sideways between peers. Ranks: planner 0 < proto 1 < broker, worker, profiler, client 2 < cli 3;
# broker, worker, profiler and client (the client library) are peers and include none of each other. The planner also
# includes no socket, protobuf, database or HTTP header.
# Inside planner/ the sub-folders are ranked in data-flow order (docs/DESIGN.md "Inside the
# planner"): core 0 < ir 1 < inputs 2 < tp 3 < partition 4 < map 5 < sim 6 < export 7 < search 8;
# a planner file includes only its own folder and lower ones, and every planner file lives in one.
# Usage: scripts/check-layers.sh [ROOT]   (default: the repository this script is in)
set -eu
root=${1:-$(dirname "$0")/..}
cd "$root"
files=$(find planner proto broker worker profiler client cli -name '*.[ch]' 2>/dev/null | sort)
[ -n "$files" ] || { echo "check-layers: no sources under $(pwd)" >&2; exit 2; }
# One line per include: "<file> <line> <quoted|system> <target>"
for f in $files; do
    case $f in
        planner/core/*|planner/ir/*|planner/inputs/*|planner/tp/*|planner/partition/*|planner/map/*) ;;
        planner/sim/*|planner/export/*|planner/search/*) ;;
        planner/*) echo "$f:1: a planner file outside the ranked sub-folders (core ir inputs tp partition map sim export search)"
                   outside=$((${outside:-0} + 1)) ;;
    esac
done
[ -z "${outside:-}" ] || { echo "check-layers: $outside planner file(s) outside the sub-folders" >&2; exit 1; }
# shellcheck disable=SC2086
awk '
    /^[ \t]*#[ \t]*include[ \t]*[<"]/ {
        s = $0; sub(/^[ \t]*#[ \t]*include[ \t]*/, "", s)
        kind = substr(s, 1, 1) == "<" ? "system" : "quoted"
        t = substr(s, 2); sub(/[>"].*$/, "", t)
        print FILENAME, FNR, kind, t
    }' $files | awk '
    BEGIN { split("core ir inputs tp partition map sim export search", names, " ")
            for (i = 1; i in names; i++) rank[names[i]] = i - 1 }
    function layer(path,   d) {
        d = path; sub(/\/.*$/, "", d)
        if (d == "planner") return 0
        if (d == "proto") return 1
        if (d == "broker" || d == "worker" || d == "profiler" || d == "client") return 2
        if (d == "cli") return 3
        return -1
    }
    function dir(path,   d) { d = path; sub(/\/.*$/, "", d); return d }
    function sub_rank(path,   n, p) {   # planner/<folder>/x.h -> the folder rank, -1 if none
        n = split(path, p, "/")
        return (n == 3 && p[1] == "planner" && (p[2] in rank)) ? rank[p[2]] : -1
    }
    function sub_dir(path,   p) { split(path, p, "/"); return p[2] }
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
        } else if (to == 0 && from == 0 && sub_rank(target) > sub_rank(file)) {
            printf "%s:%d: includes \"%s\": planner/%s/ (rank %d) may not include planner/%s/ (rank %d)\n", file, line, target, sub_dir(file), sub_rank(file), sub_dir(target), sub_rank(target)
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
