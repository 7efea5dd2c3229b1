#!/bin/sh
# Generates the model and cluster files that examples/batch.txt and the README use, with
# ./planfarm (build it first: make). Nothing generated is kept in git.
#
#   examples/make-examples.sh [DIR]        (default build/examples, from the repository root)
set -eu
cd "$(dirname "$0")/.."
PF=${PF_BIN:-./planfarm}
DIR=${1:-build/examples}
[ -x "$PF" ] || { echo "make-examples: $PF is not built (run make)" >&2; exit 1; }
mkdir -p "$DIR"

gen() {  # gen OUT planfarm-args...: one file, with planfarm's own message on failure
    out=$1
    shift
    "$PF" "$@" -o "$DIR/$out"
}

# BERT-Large on 4 x DGX-1 (V100): the README's first example.
gen bert-large.json model bert
gen dgx1x4.json cluster dgx1 --machines 4
# GPT-2 XL and ResNet-50 on the same machines, for the batch list.
gen gpt2-xl.json model gpt
gen resnet50.json model resnet
# GPT-2 XL priced for H100s on 2 x 8 H100 with NVSwitch.
gen gpt2-xl-h100.json model gpt --tflops 989 --hbm-gbps 3350
gen nvswitch2.json cluster nvswitch --machines 2

# Llama-7B (Llama 2 shapes, bf16, H100 costs) on 2 x DGX-H100 (NVSwitch inside, InfiniBand
# between).
gen llama-7b.json model llama --preset 7b --precision bf16 --tflops 989 --hbm-gbps 3350
gen dgx-h100x2.json cluster dgx-h100 --machines 2
echo "make-examples: wrote bert-large, gpt2-xl, gpt2-xl-h100, resnet50, llama-7b, dgx1x4, nvswitch2, dgx-h100x2 to $DIR" >&2
