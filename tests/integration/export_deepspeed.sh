#!/bin/sh
# `planfarm export deepspeed` as DeepSpeed reads it: a pipelined (2 stages), tensor-parallel
# (TP 2), selectively recomputing plan exported to stdout must be one JSON document (python's
# json parses all of it) whose keys are DeepSpeed config keys only and whose numbers are the
# plan's (train_batch_size = micro-batch x micro-batches x replicas = the plan's global batch);
# stderr must carry one warning per property DeepSpeed cannot express (selective recomputation,
# TP > 1); -o DIR writes pipeline_module.py, which run against a stub of deepspeed.pipe with
# PipelineModule's and PipeModelDataParallelTopology's signatures (DeepSpeed master,
# deepspeed/runtime/pipe/module.py and topology.py) must pass the plan's stage count, topology
# and checkpoint interval by those names.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
PF_BIN=${PF_BIN:-$top/planfarm}
py=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }
PF_BIN=$PF_BIN "$top/examples/make-examples.sh" "$tmp/ex" >/dev/null 2>&1
g=$tmp/ex/llama-7b.json c=$tmp/ex/dgx-h100x2.json
"$PF_BIN" plan "$g" "$c" --layer-aligned --tp 2 --stages 2 --recompute selective \
    -o "$tmp/plan.json" >/dev/null 2>&1 || fail "plan"
"$PF_BIN" export deepspeed "$g" "$c" "$tmp/plan.json" >"$tmp/ds.json" 2>"$tmp/ds.err" ||
    fail "export deepspeed: $(cat "$tmp/ds.err")"
"$py" - "$tmp/ds.json" "$tmp/plan.json" <<'PY' || fail "ds_config.json"
import json, sys
ds = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))
known = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
         "zero_optimization", "bf16", "fp16", "activation_checkpointing", "pipeline"}
assert set(ds) <= known, f"keys DeepSpeed does not read: {set(ds) - known}"
assert plan["stages"] == 2 and plan["tensor_parallel"] == 2, plan
assert ds["train_batch_size"] == plan["global_batch"], (ds, plan["global_batch"])
assert ds["gradient_accumulation_steps"] == plan["microbatches"]
assert (ds["train_micro_batch_size_per_gpu"] * plan["microbatches"] * plan["replicas"]
        == plan["global_batch"])
assert ds["zero_optimization"] == {"stage": plan["training"]["zero"]}, ds["zero_optimization"]
assert set(ds["pipeline"]) == {"activation_checkpoint_interval"}, ds["pipeline"]
assert ds["pipeline"]["activation_checkpoint_interval"] == 1
assert set(ds["activation_checkpointing"]) <= {"partition_activations", "cpu_checkpointing",
    "contiguous_memory_optimization", "number_checkpoints", "synchronize_checkpoint_boundary",
    "profile"}, ds["activation_checkpointing"]
PY
echo "ok: stdout is one JSON document of DeepSpeed keys with the plan's numbers"
grep -q "^planfarm export: warning: deepspeed: selective recomputation" "$tmp/ds.err" ||
    fail "no warning for selective recomputation: $(cat "$tmp/ds.err")"
grep -q "^planfarm export: warning: deepspeed: tensor parallelism 2" "$tmp/ds.err" ||
    fail "no warning for TP 2: $(cat "$tmp/ds.err")"
echo "ok: selective recomputation and TP 2 warned on stderr"
"$PF_BIN" export deepspeed "$g" "$c" "$tmp/plan.json" -o "$tmp/out" 2>/dev/null || fail "-o"
for f in ds_config.json pipeline_module.py hostfile launch.sh; do
    [ -s "$tmp/out/$f" ] || fail "-o wrote no $f"
done
cmp -s "$tmp/out/ds_config.json" "$tmp/ds.json" || fail "ds_config.json differs from stdout"
mkdir -p "$tmp/stub/deepspeed/pipe" "$tmp/stub/deepspeed/runtime/pipe"
: >"$tmp/stub/deepspeed/__init__.py"
: >"$tmp/stub/deepspeed/runtime/__init__.py"
cat >"$tmp/stub/deepspeed/pipe/__init__.py" <<'PY'
got = {}
class PipelineModule:
    def __init__(self, layers, num_stages=None, topology=None, loss_fn=None, seed_layers=False,
                 seed_fn=None, base_seed=1234, partition_method='parameters',
                 activation_checkpoint_interval=0, activation_checkpoint_func=None,
                 checkpointable_layers=None):
        got.update(num_stages=num_stages, topology=topology, partition_method=partition_method,
                   interval=activation_checkpoint_interval, layers=len(layers))
PY
cat >"$tmp/stub/deepspeed/runtime/pipe/__init__.py" <<'PY'
PY
cat >"$tmp/stub/deepspeed/runtime/pipe/topology.py" <<'PY'
class PipeModelDataParallelTopology:
    def __init__(self, num_pp, num_mp, num_dp):
        self.dims = {"pipe": num_pp, "data": num_dp, "model": num_mp}
PY
PYTHONPATH=$tmp/stub "$py" - "$tmp/out/pipeline_module.py" "$tmp/plan.json" <<'PY' || fail "pipeline_module.py"
import json, runpy, sys
import deepspeed.pipe as pipe
plan = json.load(open(sys.argv[2]))
mod = runpy.run_path(sys.argv[1])
mod["pipeline_module"]([object()] * 34, "LlamaDecoderLayer")
got = pipe.got
assert got["topology"].dims == {"pipe": plan["stages"], "data": plan["replicas"],
                                "model": plan["tensor_parallel"]}, got["topology"].dims
assert got["partition_method"] == "type:LlamaDecoderLayer", got
assert got["interval"] == 1, got
assert sum(mod["LAYERS_PER_STAGE"]) == 32 and len(mod["LAYERS_PER_STAGE"]) == 2
PY
echo "ok: pipeline_module.py builds PipelineModule with the plan's topology and checkpointing"
echo "export_deepspeed: 3 passed, 0 failed"
