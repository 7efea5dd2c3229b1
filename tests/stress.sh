#!/bin/sh
# stress.sh [N] [SANITIZE_N]: `make test` N times (default 20), then `make sanitize` SANITIZE_N
# times (default 5), while two CPU hogs per core run, so that a test depending on the machine's
# load fails here rather than now and then elsewhere. Prints each run's verdict and the count of
# failures; exits 1 if any run failed. The hogs are always killed (trap), and each one ends by
# itself after an hour in any case.
N=${1:-20}
SANITIZE_N=${2:-5}
MAKE=${MAKE:-make}
LOG=${STRESS_LOG:-build/stress}
mkdir -p "$LOG"

cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
HOGS=""
stop_hogs() {
    for pid in $HOGS; do kill "$pid" 2>/dev/null; done
    for pid in $HOGS; do wait "$pid" 2>/dev/null; done
    HOGS=""
}
trap stop_hogs EXIT
trap 'stop_hogs; exit 130' INT TERM
i=0
while [ $i -lt $((2 * cores)) ]; do
    timeout 3600 sh -c 'while :; do :; done' &
    HOGS="$HOGS $!"
    i=$((i + 1))
done
echo "stress: $((2 * cores)) CPU hogs on $cores cores; logs in $LOG"

fails=0
run() { # run NAME TARGET
    if $MAKE "$2" >"$LOG/$1.log" 2>&1; then
        echo "  $1: ok"
    else
        echo "  $1: FAILED (see $LOG/$1.log)"
        fails=$((fails + 1))
    fi
}
k=1
while [ $k -le "$N" ]; do run "test-$k" test; k=$((k + 1)); done
k=1
while [ $k -le "$SANITIZE_N" ]; do run "sanitize-$k" sanitize; k=$((k + 1)); done
echo "stress: $fails of $((N + SANITIZE_N)) runs failed"
[ $fails -eq 0 ]
