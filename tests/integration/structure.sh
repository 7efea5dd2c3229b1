#!/bin/sh
# The circle, name and size checks (scripts/check-cycles.sh, check-names.sh, check-functions.sh) pass on the tree's
# sources and fail, naming the place, on a tree made to break each rule (so they can fail).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$top/scripts/check-cycles.sh" /nonexistent "$top"
"$top/scripts/check-functions.sh" "$top"
expect_fail() { # name, checker, pattern its output must hold
    # shellcheck disable=SC2086
    if out=$($2 2>&1); then echo "FAIL: $1 passed: $out"; exit 1; fi
    echo "$out" | grep -q "$3" || { echo "FAIL: $1: '$3' not in: $out"; exit 1; }
    echo "ok: $1 refused"
}
mk() { rm -rf "$tmp/t" && mkdir -p "$tmp/t/planner/ir" "$tmp/t/scripts" "$tmp/t/build/planner/ir"; }

mk
printf '#include "planner/ir/b.h"\n' > "$tmp/t/planner/ir/a.h"
printf '#include "planner/ir/a.h"\n' > "$tmp/t/planner/ir/b.h"
expect_fail "an include circle" "$top/scripts/check-cycles.sh /nonexistent $tmp/t" "planner/ir/a -> planner/ir/b"

mk
printf 'void pf_b_g(void);\nvoid pf_a_f(void) { pf_b_g(); }\n' > "$tmp/t/planner/ir/a.c"
printf 'void pf_a_f(void);\nvoid pf_b_g(void) { pf_a_f(); }\n' > "$tmp/t/planner/ir/b.c"
for m in a b; do cc -c "$tmp/t/planner/ir/$m.c" -o "$tmp/t/build/planner/ir/$m.o"; done
expect_fail "a call circle" "$top/scripts/check-cycles.sh build $tmp/t" "call circles"

mk
printf 'void pf_elsewhere_f(void) { }\n' > "$tmp/t/planner/ir/a.c"
cc -c "$tmp/t/planner/ir/a.c" -o "$tmp/t/build/planner/ir/a.o"
expect_fail "a function not named for its file" "$top/scripts/check-names.sh build $tmp/t" "planner/ir/a.c: exports pf_elsewhere_f, not pf_a_"

mk
{ echo 'int pf_a_long(int x) {'; i=0; while [ $i -lt 125 ]; do echo "    x += $i;"; i=$((i + 1)); done
  echo '    return x; }'; } > "$tmp/t/planner/ir/a.c"
expect_fail "a function over 120 lines" "$top/scripts/check-functions.sh $tmp/t" "a.c:1: pf_a_long: 127 lines"

mk
{ echo 'int pf_a_branchy(int x) {'; i=0; while [ $i -lt 31 ]; do echo "    if (x == $i) x++;"; i=$((i + 1)); done
  echo '    return x; }'; } > "$tmp/t/planner/ir/a.c"
expect_fail "a function over complexity 30" "$top/scripts/check-functions.sh $tmp/t" "pf_a_branchy: 33 lines, complexity 32"
echo "planner/ir/a.c:pf_a_branchy 32 33  # the test's allowance" > "$tmp/t/scripts/function-limits.txt"
"$top/scripts/check-functions.sh" "$tmp/t" > /dev/null && echo "ok: an allowance in function-limits.txt is honoured"

mk
i=0; while [ $i -lt 901 ]; do echo "int v$i;"; i=$((i + 1)); done > "$tmp/t/planner/ir/a.c"
expect_fail "a file over 900 lines" "$top/scripts/check-functions.sh $tmp/t" "a.c:1: 901 lines"
echo "structure: 7 passed, 0 failed"
