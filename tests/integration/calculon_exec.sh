#!/bin/sh
# bench/calculon_exec.py (planfarm plan -> Calculon execution JSON, for `make bench-peers`) on
# hand-written plan files: every field maps as the script's docstring says, the network of each
# dimension follows where the plan placed its groups (one host or several), a product that does
# not divide the host moves to network 1, and a plan it cannot write is refused with a reason.
# And bench/calculon_model.py, Calculon's model file as planfarm's model flags.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
conv=$top/bench/calculon_exec.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0

# same FILE 'JSON': FILE holds exactly the object JSON (key order aside)
same() {
    python3 -c 'import json, sys
a = json.load(open(sys.argv[1])); b = json.loads(sys.argv[2])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k): print("  %s: got %r, want %r" % (k, a.get(k), b.get(k)))
    sys.exit(1)' "$1" "$2"
}

# the fixed knobs every execution carries (planfarm does not model them)
fixed='"fused_activation": true, "attention_type": "multihead", "tensor_par_overlap": "none",
       "seq_par_ag_redo": false, "weight_offload": false, "activations_offload": false,
       "optimizer_offload": false, "training": true, "datatype": "float16"'

# 1. t 2, p 4, d 2 on two hosts of 8: stages 0-1 on host 0, 2-3 on host 1. Tensor and data groups
# stay in a host (network 0, 2 x 2 = 4 divides 8), pipeline groups cross (network 1).
cat >"$tmp/a.plan" <<'EOF'
{ "devices": 16, "stages": 4, "replicas": 2, "tensor_parallel": 2, "microbatches": 16,
  "global_batch": 64, "microbatch_size": 2, "virtual_stages": 3, "sequence_parallel": true,
  "training": { "precision": "bf16", "optimizer": "adam", "zero": 2, "recompute": "selective" },
  "stage_list": [ { "id": 0, "devices": [[0, 1], [2, 3]] }, { "id": 1, "devices": [[4, 5], [6, 7]] },
                  { "id": 2, "devices": [[8, 9], [10, 11]] }, { "id": 3, "devices": [[12, 13], [14, 15]] } ] }
EOF
python3 "$conv" "$tmp/a.plan" -o "$tmp/a.exe" 2>"$tmp/a.err"
same "$tmp/a.exe" "{ \"num_procs\": 16, \"tensor_par\": 2, \"pipeline_par\": 4, \"data_par\": 2,
    \"tensor_par_net\": 0, \"pipeline_par_net\": 1, \"data_par_net\": 0, \"batch_size\": 64,
    \"microbatch_size\": 2, \"activation_recompute\": \"attn_only\", \"pipeline_interleaving\": 3,
    \"optimizer_sharding\": true, \"tensor_par_comm_type\": \"rs_ag\", \"data_par_overlap\": true,
    $fixed }" || { echo "FAIL: t2 p4 d2 plan"; exit 1; }
[ ! -s "$tmp/a.err" ] || { echo "FAIL: notes on an exact plan: $(cat "$tmp/a.err")"; exit 1; }
# ZeRO 1 is the same execution, noted: Calculon's optimizer sharding shards the gradients too
sed 's/"zero": 2/"zero": 1/' "$tmp/a.plan" >"$tmp/a1.plan"
python3 "$conv" "$tmp/a1.plan" -o "$tmp/a1.exe" 2>"$tmp/a1.err"
cmp -s "$tmp/a.exe" "$tmp/a1.exe" || { echo "FAIL: ZeRO 1 and 2 give different executions"; exit 1; }
grep -q "prices with the gradients sharded too" "$tmp/a1.err" ||
    { echo "FAIL: ZeRO 1 not noted: $(cat "$tmp/a1.err")"; exit 1; }
echo "ok: t 2 p 4 d 2, interleaved, sequence parallel, selective, ZeRO 2 (ZeRO 1 the same, noted)"
pass=$((pass + 1))
# the same plan with Megatron-LM's TP overlap: Calculon's ring overlap, nothing else changes
sed 's/"sequence_parallel": true,/"sequence_parallel": true, "tp_comm_overlap": true,/' \
    "$tmp/a.plan" >"$tmp/a2.plan"
python3 "$conv" "$tmp/a2.plan" -o "$tmp/a2.exe" 2>"$tmp/a2.err"
python3 -c 'import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
d = {k for k in a if a[k] != b.get(k)}
sys.exit(0 if d == {"tensor_par_overlap"} and b["tensor_par_overlap"] == "ring" else 1)' \
    "$tmp/a.exe" "$tmp/a2.exe" || { echo "FAIL: tp_comm_overlap is not Calculon's ring overlap"; exit 1; }
echo "ok: tp_comm_overlap -> tensor_par_overlap ring"
pass=$((pass + 1))

# 2. data parallel over 16 devices of two hosts (plain device numbers, no tensor parallelism),
# ZeRO 3, full recomputation, no global_batch: batch = 4 x 2 x 16; ZeRO 3 is noted.
cat >"$tmp/b.plan" <<'EOF'
{ "devices": 16, "stages": 1, "replicas": 16, "tensor_parallel": 1, "microbatches": 2,
  "microbatch_size": 4, "sequence_parallel": false,
  "training": { "zero": 3, "recompute": "full" },
  "stage_list": [ { "id": 0, "devices": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] } ] }
EOF
python3 "$conv" "$tmp/b.plan" -o "$tmp/b.exe" 2>"$tmp/b.err"
same "$tmp/b.exe" "{ \"num_procs\": 16, \"tensor_par\": 1, \"pipeline_par\": 1, \"data_par\": 16,
    \"tensor_par_net\": 0, \"pipeline_par_net\": 0, \"data_par_net\": 1, \"batch_size\": 128,
    \"microbatch_size\": 4, \"activation_recompute\": \"full\", \"pipeline_interleaving\": 1,
    \"optimizer_sharding\": true, \"tensor_par_comm_type\": \"ar\", \"data_par_overlap\": true,
    $fixed }" || { echo "FAIL: d16 plan"; exit 1; }
grep -q "ZeRO 3 written as optimizer_sharding" "$tmp/b.err" ||
    { echo "FAIL: ZeRO 3 not noted: $(cat "$tmp/b.err")"; exit 1; }
echo "ok: d 16 across hosts, ZeRO 3 (noted), full recomputation, batch from micro-batches"
pass=$((pass + 1))

# 3. t 2 x d 3 inside one host of 8: 6 does not divide 8, so Calculon could not fill network 0;
# data parallelism moves to network 1 (noted). No ZeRO, no recomputation; the execution on stdout.
cat >"$tmp/c.plan" <<'EOF'
{ "devices": 6, "stages": 1, "replicas": 3, "tensor_parallel": 2, "global_batch": 12,
  "microbatch_size": 1, "sequence_parallel": false, "training": { "zero": 0, "recompute": "none" },
  "stage_list": [ { "id": 0, "devices": [[0, 1], [2, 3], [4, 5]] } ] }
EOF
python3 "$conv" "$tmp/c.plan" >"$tmp/c.exe" 2>"$tmp/c.err"
same "$tmp/c.exe" "{ \"num_procs\": 6, \"tensor_par\": 2, \"pipeline_par\": 1, \"data_par\": 3,
    \"tensor_par_net\": 0, \"pipeline_par_net\": 0, \"data_par_net\": 1, \"batch_size\": 12,
    \"microbatch_size\": 1, \"activation_recompute\": \"none\", \"pipeline_interleaving\": 1,
    \"optimizer_sharding\": false, \"tensor_par_comm_type\": \"ar\", \"data_par_overlap\": true,
    $fixed }" || { echo "FAIL: t2 d3 plan"; exit 1; }
grep -q "d moved to network 1" "$tmp/c.err" || { echo "FAIL: move not noted: $(cat "$tmp/c.err")"; exit 1; }
echo "ok: t 2 x d 3 in one host of 8: data parallelism on network 1"
pass=$((pass + 1))

# 4. refusals: a recomputation Calculon has no name for, a plan without stages, not JSON
printf '{ "stages": 1, "replicas": 1, "global_batch": 8, "training": { "recompute": "auto" } }\n' >"$tmp/d.plan"
printf '{ "replicas": 1 }\n' >"$tmp/e.plan"
printf 'not json\n' >"$tmp/f.plan"
for c in "d:recompute 'auto' has no Calculon counterpart" "e:plan has no 'stages'" "f:Expecting value"; do
    f=${c%%:*} want=${c#*:}
    if python3 "$conv" "$tmp/$f.plan" -o "$tmp/$f.exe" 2>"$tmp/$f.err"; then
        echo "FAIL: $f.plan converted"; exit 1
    fi
    grep -q "$want" "$tmp/$f.err" || { echo "FAIL: $f.plan: '$want' not in: $(cat "$tmp/$f.err")"; exit 1; }
    [ ! -e "$tmp/$f.exe" ] || { echo "FAIL: $f.plan left an execution file"; exit 1; }
done
echo "ok: refusals (auto recomputation, no stages, not JSON)"
pass=$((pass + 1))

# 4b. interleaving over uneven first/last stages (40 layers on p 2, v 21: 20 + 20, the embedding
# and the head counted as layers): Calculon splits 20 per stage evenly, so v 21 is written as 20,
# the largest v <= 21 dividing 20, and noted; an even split keeps its v (20 per stage, v 4).
cat >"$tmp/u.plan" <<'EOF'
{ "devices": 8, "stages": 2, "replicas": 4, "tensor_parallel": 1, "microbatches": 16,
  "global_batch": 64, "virtual_stages": 21,
  "training": { "zero": 1, "recompute": "selective" },
  "block_search": { "layers_first": 20, "layers_middle": 0, "layers_last": 20 },
  "stage_list": [ { "id": 0, "devices": [0, 1, 2, 3] }, { "id": 1, "devices": [4, 5, 6, 7] } ] }
EOF
python3 "$conv" "$tmp/u.plan" -o "$tmp/u.exe" 2>"$tmp/u.err"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pipeline_interleaving"])' "$tmp/u.exe")" = 20 ] ||
    { echo "FAIL: uneven v 21 not written as 20"; exit 1; }
grep -q "interleaving 21 over uneven first/last stages (20, 20 of 40 layers) written as 20" "$tmp/u.err" ||
    { echo "FAIL: uneven interleaving not noted: $(cat "$tmp/u.err")"; exit 1; }
sed 's/"virtual_stages": 21/"virtual_stages": 4/' "$tmp/u.plan" >"$tmp/e.plan"
python3 "$conv" "$tmp/e.plan" -o "$tmp/e.exe" 2>"$tmp/e.err"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pipeline_interleaving"])' "$tmp/e.exe")" = 4 ] ||
    { echo "FAIL: even v 4 changed"; exit 1; }
echo "ok: interleaving over uneven ends written as the largest even v (noted); an even one kept"
pass=$((pass + 1))

# 5. bench/calculon_model.py: Calculon's model file as `planfarm model gpt` flags. GPT-3 13B's file
# has 40 heads of 128 on a hidden size of 5140: --head-dim 128 (noted); a consistent file gives
# no head size. The flags build graphs planfarm accepts.
model=$top/bench/calculon_model.py
printf '{ "hidden": 5140, "feedforward": 20560, "seq_size": 2048, "attn_heads": 40, "attn_size": 128, "num_blocks": 40 }\n' >"$tmp/m13.json"
printf '{ "hidden": 512, "feedforward": 2048, "seq_size": 256, "attn_heads": 8, "attn_size": 64, "num_blocks": 3 }\n' >"$tmp/m1.json"
got=$(python3 "$model" "$tmp/m13.json" 2>"$tmp/m13.err")
[ "$got" = "--layers 40 --hidden 5140 --heads 40 --head-dim 128 --ffn 20560 --seq 2048 --vocab 51200" ] ||
    { echo "FAIL: 13B flags: $got"; exit 1; }
grep -q "head-dim 128" "$tmp/m13.err" || { echo "FAIL: head size not noted: $(cat "$tmp/m13.err")"; exit 1; }
if [ -x "${PF_BIN:-}" ]; then
    # shellcheck disable=SC2086
    "$PF_BIN" model gpt $got --layers 1 -o "$tmp/m13.graph" 2>/dev/null ||
        { echo "FAIL: planfarm model gpt $got"; exit 1; }
fi
got=$(python3 "$model" "$tmp/m1.json" 2>/dev/null)
[ "$got" = "--layers 3 --hidden 512 --heads 8 --ffn 2048 --seq 256 --vocab 51200" ] ||
    { echo "FAIL: small flags: $got"; exit 1; }
if [ -x "${PF_BIN:-}" ]; then
    # shellcheck disable=SC2086
    "$PF_BIN" model gpt $got -o "$tmp/m1.graph" 2>/dev/null || { echo "FAIL: planfarm model gpt $got"; exit 1; }
fi
printf '{ "hidden": 512 }\n' >"$tmp/m2.json"
if python3 "$model" "$tmp/m2.json" >/dev/null 2>"$tmp/m2.err"; then echo "FAIL: a model without heads"; exit 1; fi
grep -q "attn_heads" "$tmp/m2.err" || { echo "FAIL: m2: $(cat "$tmp/m2.err")"; exit 1; }
echo "ok: Calculon model files as planfarm model gpt flags"
pass=$((pass + 1))
echo "calculon_exec: $pass passed, 0 failed"
