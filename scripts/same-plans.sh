#!/bin/sh
# Proves that a change of structure changed no plan: runs two planfarm binaries (a reference, e.g.
# built from an earlier commit, and this tree's) over the examples/ models and the bench inputs
# (PipeDream's and Piper's profiles), through every command that writes a plan or derives a file
# from one (plan, partition, map, simulate, draw, export), and compares what they write byte for
# byte. Left out: the search's own clock readings (`*_s` keys of the plan's "search" object, the
# mapping's "seconds", "N s wall" in summaries) and its job count (how many mapping probes are
# issued before one answers depends on timing) and the mapping probes' "symmetric_pruned" count
# (how many branches the probe threads pruned before one of them found a mapping); the plan
# itself is compared whole.
#
# Usage: scripts/same-plans.sh REF_BINARY NEW_BINARY [WORKDIR]
#        scripts/same-plans.sh --ref COMMIT            (builds COMMIT in a temporary worktree)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --ref ]; then
    [ $# = 2 ] || { echo "usage: $0 --ref COMMIT" >&2; exit 2; }
    wt=$(mktemp -d)
    trap 'git -C "$top" worktree remove --force "$wt" >/dev/null 2>&1 || rm -rf "$wt"' EXIT INT TERM
    git -C "$top" worktree add -q --detach "$wt" "$2"
    echo "same-plans: building $2 in $wt" >&2
    make -s -C "$wt" planfarm >/dev/null
    make -s -C "$top" planfarm >/dev/null
    sh "$0" "$wt/planfarm" "$top/planfarm"
    exit
fi
[ $# -ge 2 ] || { echo "usage: $0 REF_BINARY NEW_BINARY [WORKDIR] | --ref COMMIT" >&2; exit 2; }
ref=$1 new=$2
work=${3:-$(mktemp -d)}
[ $# -ge 3 ] || trap 'rm -rf "$work"' EXIT INT TERM
ex=$work/inputs
mkdir -p "$ex" "$work/ref" "$work/new"
PF_BIN=$ref "$top/examples/make-examples.sh" "$ex" >/dev/null
data=$top/tests/data
for m in gnmt vgg16 resnet50 alexnet; do
    "$ref" import pipedream "$data/pipedream/$m.txt" -o "$ex/pd-$m.json"
done
for m in bert32a100 gnmt resnet; do
    "$ref" import piper "$data/piper/$m.json" -o "$ex/piper-$m.json"
done
"$ref" cluster hier --machines 2 --gpus 4 -o "$ex/hier8.json"
"$ref" cluster dgx1 --machines 2 -o "$ex/dgx1x2.json"
"$ref" cluster torus2d --dims 4x4 -o "$ex/torus16.json" 2>/dev/null ||
    "$ref" cluster mesh2d --machines 4 --gpus 4 -o "$ex/torus16.json"
"$ref" cluster dgx-a100 --machines 2 -o "$ex/a100x2.json"

# name graph cluster [plan options]
cases='
bert   bert-large.json dgx1x4.json
llama  llama-7b.json   dgx-h100x2.json
gpt2   gpt2-xl.json    nvswitch2.json
gpt2h  gpt2-xl-h100.json dgx-h100x2.json --layer-aligned
res50  resnet50.json   dgx1x4.json
pdgnmt pd-gnmt.json    hier8.json
pdvgg  pd-vgg16.json   dgx1x2.json
pdres  pd-resnet50.json torus16.json
pdalex pd-alexnet.json a100x2.json --stages 2
pibert piper-bert32a100.json hier8.json
pignmt piper-gnmt.json torus16.json
pires  piper-resnet.json dgx1x2.json --recompute full
'
strip() { # the comparable part of an output: no clock readings, the two output folders as one
    grep -v '^ *"[a-z_]*_s": \|^ *"seconds": \|^ *"jobs": \|^ *"symmetric_pruned": \| s wall\|wall_s' "$1" |
        sed "s|$work/ref/|OUT/|g; s|$work/new/|OUT/|g" > "$1.cmp" || true
}
run_both() { # name, then the command's arguments with @OUT@ for the output path
    name=$1; shift
    for side in ref new; do
        bin=$ref; [ $side = new ] && bin=$new
        args=$(printf '%s\n' "$@" | sed "s|@OUT@|$work/$side/$name|g")
        # shellcheck disable=SC2086
        (IFS='
'; set -f; "$bin" $args) >"$work/$side/$name.stdout" 2>"$work/$side/$name.stderr" ||
            echo "exit $?" >>"$work/$side/$name.stdout"
    done
}
echo "$cases" | while read -r name g c opts; do
    [ -n "$name" ] || continue
    # shellcheck disable=SC2086
    run_both "$name.plan.json" plan "$ex/$g" "$ex/$c" -o @OUT@ $opts
    p=$work/ref/$name.plan.json
    [ -s "$p" ] || continue
    run_both "$name.sim.txt" simulate "$ex/$g" "$ex/$c" "$p" --timeline @OUT@.svg
    run_both "$name.draw.svg" draw "$p" "$ex/$c" "$ex/$g" -o @OUT@
    run_both "$name.part.json" partition "$ex/$g" "$ex/$c" --stages 2 -o @OUT@
    run_both "$name.map.json" map "$ex/$g" "$ex/$c" "$work/ref/$name.part.json" -o @OUT@
done
for kind in megatron deepspeed torchrun; do
    run_both "llama.$kind" export "$kind" "$ex/gpt2-xl-h100.json" "$ex/dgx-h100x2.json" \
        "$work/ref/gpt2h.plan.json" -o @OUT@.d
done
n=0 bad=0
for side in ref new; do
    find "$work/$side" -type f ! -name '*.cmp' | while read -r f; do strip "$f"; done
done
for f in $(cd "$work/ref" && find . -name '*.cmp' | sort); do
    n=$((n + 1))
    if ! cmp -s "$work/ref/$f" "$work/new/$f"; then
        echo "DIFFERS: ${f%.cmp}"; diff "$work/ref/$f" "$work/new/$f" 2>&1 | head -10; bad=$((bad + 1))
    fi
done
plans=$(find "$work/ref" -name '*.plan.json' -size +0 | wc -l)
echo "same-plans: $n outputs (stdout, stderr and files) of $plans plans compared, $bad differ"
[ "$bad" = 0 ]
