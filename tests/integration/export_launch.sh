#!/bin/sh
# `planfarm export torchrun`'s launch.sh run as written on every host of a TP 4 plan, with a stub
# torchrun first on PATH that parses its arguments with the argument parser of the torchrun that
# Debian ships (torch.distributed.run, torch 1.13: it refuses --nproc-per-node) and prints what it
# parsed and the CUDA environment; each host must get its node rank, its GPUs, one CUDA connection
# per device (Megatron-LM's validate_args wants it with TP > 1) and the script with its arguments.
# First, without torch: a block-search plan (micro-batch 2 of a graph made at 1, TP 2, sequence
# parallelism, 2 virtual stages) exported for Megatron-LM writes only flags of Megatron-LM's
# megatron/training/arguments.py (tests/data/megatron_args.txt, which names where each is
# defined), with the plan's micro-batch, interleaving and sequence parallelism, and the model's
# shape and block flags from the graph's "model" object (a graph without one: a comment instead).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
PF_BIN=${PF_BIN:-$top/planfarm}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
PF_BIN=$PF_BIN "$top/examples/make-examples.sh" "$tmp/ex" >/dev/null 2>&1
"$PF_BIN" plan "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" --block-search --global-batch 64 \
    --microbatch-size 2 --tp 2 --sequence-parallel on --virtual-stages 2 -o "$tmp/bplan.json" \
    2>/dev/null
"$PF_BIN" export megatron "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" "$tmp/bplan.json" \
    -o "$tmp/brun" 2>/dev/null
flags=$(sed -n 's/^    \(--[a-z0-9-]*\).*/\1/p' "$tmp/brun/megatron_args.sh")
for f in $flags; do
    grep -qx -- "$f" "$top/tests/data/megatron_args.txt" ||
        { echo "FAIL: export megatron wrote $f, not in tests/data/megatron_args.txt"; exit 1; }
done
for want in "--micro-batch-size 2" "--global-batch-size 64" "--sequence-parallel" \
            "--num-layers-per-virtual-pipeline-stage [0-9]*" "--num-layers 32" "--hidden-size 4096" \
            "--ffn-hidden-size 11008" "--num-attention-heads 32" "--seq-length 4096" \
            "--max-position-embeddings 4096" "--swiglu" "--normalization RMSNorm" \
            "--position-embedding-type rope" "--untie-embeddings-and-output-weights" \
            "--disable-bias-linear"; do
    grep -q -- "^    $want\$" "$tmp/brun/megatron_args.sh" ||
        { echo "FAIL: export megatron did not write '$want'"; exit 1; }
done
# Megatron-LM's checks (validate_args, TransformerConfig): heads divisible by t, layers by p
val() { sed -n "s/^    $1 \([0-9]*\)\$/\1/p" "$tmp/brun/megatron_args.sh"; }
t=$(val --tensor-model-parallel-size) p=$(val --pipeline-model-parallel-size)
if [ $(($(val --num-attention-heads) % t)) != 0 ] || [ $(($(val --num-layers) % p)) != 0 ]; then
    echo "FAIL: heads or layers not divisible by t = $t, p = $p"; exit 1
fi
bash -c ". '$tmp/brun/megatron_args.sh' && [ \${#MEGATRON_ARGS[@]} -gt 20 ]" ||
    { echo "FAIL: megatron_args.sh does not define MEGATRON_ARGS in bash"; exit 1; }
echo "ok: export megatron of a block-search plan: $(echo $flags | wc -w) flags, all Megatron-LM's"
# A graph without the "model" object (imported, traced): no model flags, a comment naming them
grep -v '^  "model": ' "$tmp/ex/llama-7b.json" > "$tmp/bare.json"
"$PF_BIN" export megatron "$tmp/bare.json" "$tmp/ex/dgx-h100x2.json" "$tmp/bplan.json" \
    -o "$tmp/bare" 2>/dev/null
if ! grep -q '^# Add its flags yourself: --hidden-size' "$tmp/bare/megatron_args.sh" ||
    grep -q -- '--hidden-size [0-9]' "$tmp/bare/megatron_args.sh"; then
    echo "FAIL: export of a graph without a model object"; exit 1
fi
echo "ok: a graph without a model object gets the flags to add as a comment"
if ! "$py" -c 'import torch.distributed.run' >/dev/null 2>&1; then
    echo "SKIP export_launch (launch.sh): $py cannot import torch.distributed.run (Debian: python3-torch)"
    echo "export_launch: 2 passed, 0 failed"
    exit 0
fi
"$PF_BIN" plan "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" --layer-aligned --tp 4 \
    -o "$tmp/plan.json" 2>/dev/null
"$PF_BIN" export torchrun "$tmp/ex/llama-7b.json" "$tmp/ex/dgx-h100x2.json" "$tmp/plan.json" \
    -o "$tmp/run" 2>/dev/null
mkdir "$tmp/bin"
cat > "$tmp/bin/torchrun" <<STUB
#!$py
import os, sys
from torch.distributed.run import get_args_parser
a = get_args_parser().parse_args(sys.argv[1:])
print(a.nnodes, a.nproc_per_node, a.node_rank, a.master_addr, a.master_port,
      os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"),
      a.training_script, " ".join(a.training_script_args))
STUB
chmod +x "$tmp/bin/torchrun"
n=0
hosts=$(awk '{ print $1 }' "$tmp/run/hostfile")
for host in $hosts; do
    got=$(PATH="$tmp/bin:$PATH" sh "$tmp/run/launch.sh" "$host" pretrain_gpt.py --seq-length 4096)
    gpus=$(sed -n "s/^$host) node_rank=[0-9]*; nproc=8; gpus=\([0-9,]*\) ;;\$/\1/p" "$tmp/run/launch.sh")
    rank=$(sed -n "s/^$host) node_rank=\([0-9]*\);.*/\1/p" "$tmp/run/launch.sh")
    first=$(awk 'NR == 1 { print $1 }' "$tmp/run/hostfile")
    want="2 8 $rank $first 29500 $gpus 1 pretrain_gpt.py --seq-length 4096"
    [ "$got" = "$want" ] || { echo "FAIL: launch.sh $host ran torchrun with: $got (want: $want)"; exit 1; }
    echo "ok: launch.sh $host: $got"
    n=$((n + 1))
done
[ $n = 2 ] || { echo "FAIL: $n hosts in the hostfile, want 2"; exit 1; }
if PATH="$tmp/bin:$PATH" sh "$tmp/run/launch.sh" nohost x.py 2>/dev/null; then
    echo "FAIL: launch.sh ran for a host not in the plan"; exit 1
fi
echo "ok: an unknown host is refused"
echo "export_launch: 5 passed, 0 failed"
