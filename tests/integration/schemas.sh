#!/bin/sh
# docs/schema/*.schema.json against every file planfarm writes and every example: `make run`'s
# examples (build/examples when there, and a fresh set), tests/data's graph, the GPU results'
# graphs and clusters, `planfarm model` of every kind, `planfarm import` of every shipped
# profile, `planfarm cluster` of every kind (the hierarchies, --matrix, mixed GPU kinds,
# latencies) and `planfarm plan`/`partition`/`map` plans
# with the block search, interleaving, sequence parallelism, --layer-aligned and a mixed cluster.
# Graphs and plans planfarm writes must carry their "version". The schemas must also reject
# broken files (a missing required key, a wrong type, a negative bandwidth, a misspelt key, both
# cluster formats at once), and planfarm must refuse a plan of a newer version. The validator is
# Debian's python3-jsonschema (scripts/packages.txt, group test).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
PF_BIN=${PF_BIN:-$top/planfarm}
schema=$top/docs/schema
py=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import jsonschema; jsonschema.Draft202012Validator' >/dev/null 2>&1; then
        py=$p
        break
    fi
done
if [ -z "$py" ]; then
    echo "SKIP schemas: no python3 imports jsonschema >= 4 (Debian: apt-get install python3-jsonschema)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
pass=0

# validate KIND WANT FILE...: each FILE against docs/schema/KIND.schema.json; WANT ok or bad
cat > "$tmp/validate.py" <<'PY'
import json, sys
import jsonschema
schema_dir, kind, want = sys.argv[1:4]
with open(f"{schema_dir}/{kind}.schema.json") as f:
    schema = json.load(f)
jsonschema.Draft202012Validator.check_schema(schema)
v = jsonschema.Draft202012Validator(schema)
failed = 0
for path in sys.argv[4:]:
    with open(path) as f:
        doc = json.load(f)
    errs = sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if want == "ok" and errs:
        failed += 1
        for e in errs[:3]:
            where = "/".join(str(p) for p in e.absolute_path)
            print(f"FAIL: {path}: {kind} schema: /{where}: {e.message[:300]}")
    elif want == "bad" and not errs:
        failed += 1
        print(f"FAIL: {path}: the {kind} schema accepts it")
    elif want == "bad":
        print(f"  rejected {path.rsplit('/', 1)[-1]}: {errs[0].message[:120]}")
sys.exit(1 if failed else 0)
PY
validate() {
    kind=$1 want=$2
    shift 2
    "$py" "$tmp/validate.py" "$schema" "$kind" "$want" "$@"
}
# has_version FILE...: the file's top level names its version
has_version() {
    for f in "$@"; do
        "$py" -c 'import json, sys; sys.exit(0 if isinstance(json.load(open(sys.argv[1])).get("version"), int) else 1)' "$f" ||
            { echo "FAIL: $f carries no version"; exit 1; }
    done
}
run() {  # run planfarm quietly; its message on failure
    "$PF_BIN" "$@" 2>"$tmp/err" || { echo "FAIL: planfarm $*"; cat "$tmp/err"; exit 1; }
}

# ---- examples and data ----
PF_BIN=$PF_BIN "$top/examples/make-examples.sh" "$tmp/ex" >/dev/null 2>&1
graphs="$tmp/ex/bert-large.json $tmp/ex/gpt2-xl.json $tmp/ex/gpt2-xl-h100.json $tmp/ex/resnet50.json $tmp/ex/llama-7b.json"
clusters="$tmp/ex/dgx1x4.json $tmp/ex/nvswitch2.json $tmp/ex/dgx-h100x2.json"
# shellcheck disable=SC2086
validate graph ok $graphs "$top/tests/data/graph-v1.json" "$top"/bench/results/*/*.measured.json
# shellcheck disable=SC2086
validate cluster ok $clusters "$top"/bench/results/*/*-cluster.json
# shellcheck disable=SC2086
has_version $graphs
if [ -d "$top/build/examples" ]; then
    for f in "$top"/build/examples/*.json; do
        case $(basename "$f") in
            dgx*|nvswitch*) validate cluster ok "$f" ;;
            *) validate graph ok "$f" ;;
        esac
    done
fi
echo "ok: examples, tests/data and bench/results files match the graph and cluster schemas"
pass=$((pass + 1))

# ---- every model kind ----
for kind in gpt bert llama moe vit resnet unet; do
    run model "$kind" -o "$tmp/model-$kind.json"
done
run model llama --preset 70b --layers 4 -o "$tmp/model-llama-gqa.json"
for f in "$top"/tests/data/pipedream/*.txt; do
    [ "$(basename "$f")" = LICENSE.txt ] && continue
    run import pipedream "$f" -o "$tmp/import-pipedream-$(basename "$f" .txt).json"
done
for f in "$top"/tests/data/piper/*.json; do
    run import piper "$f" -o "$tmp/import-piper-$(basename "$f")"
done
validate graph ok "$tmp"/import-*.json
has_version "$tmp"/import-*.json
run model gpt --layers 2 --device h100-sxm --precision bf16 -o "$tmp/model-gpt-dev.json"
run model gpt --layers 2 --hidden 1004 --heads 8 --head-dim 128 -o "$tmp/model-gpt-headdim.json"
run calibrate "$top/tests/data/devices/h200-sweep.json" --base h100-sxm -q -o "$tmp/mine.json"
run model gpt --layers 2 --device "$tmp/mine.json" -o "$tmp/model-gpt-carried.json"
grep -q '"device": {' "$tmp/model-gpt-carried.json" || { echo "FAIL: no carried model"; exit 1; }
validate graph ok "$tmp"/model-*.json
has_version "$tmp"/model-*.json
"$py" - "$tmp/model-llama-gqa.json" "$tmp/model-resnet.json" <<'PY' || { echo "FAIL: the model object"; exit 1; }
import json, sys
m = json.load(open(sys.argv[1]))["model"]
assert (m["kind"], m["layers"], m["hidden"], m["heads"], m["kv_heads"], m["ffn_hidden"]) == \
    ("llama", 4, 8192, 64, 8, 28672), m
assert (m["activation"], m["norm"], m["positions"], m["bias"]) == ("swiglu", "rmsnorm", "rope", False), m
assert "model" not in json.load(open(sys.argv[2]))
PY
echo "ok: planfarm model of every kind and planfarm import of every shipped profile match the graph schema and carry version 2"
pass=$((pass + 1))

# ---- every cluster kind ----
for kind in hier dgx1 nvswitch dgx-a100 dgx-h100 mesh2d torus2d mesh3d torus3d random-blk1 \
            random-blk2 uniform; do
    run cluster "$kind" -o "$tmp/cluster-$kind.json"
done
run cluster dgx-h100 --machines 2 --matrix -o "$tmp/cluster-matrix.json"
run cluster nvswitch --machines 3 --matrix --latency-us 2 --inter-latency-us 6 -o "$tmp/cluster-lat.json"
run cluster dgx-h100 --machines 4 --models a100-80g,h100-sxm -o "$tmp/cluster-mixed.json"
run cluster dgx-a100 --machines 64 --hosts-per-leaf 8 --oversubscription 2 -o "$tmp/cluster-big.json"
run cluster dgx-h100 --machines 2 -o "$tmp/cluster-h2.json"
run cluster hier --machines 2 --gpus 4 -o "$tmp/cluster-hier8.json"
validate cluster ok "$tmp"/cluster-*.json
if ! grep -q '"format": 2' "$tmp/cluster-dgx-h100.json" || grep -q '"format"' "$tmp/cluster-matrix.json"; then
    echo "FAIL: expected a hierarchy and a matrix"; exit 1
fi
echo "ok: planfarm cluster of every kind (hierarchies, --matrix, mixed GPUs) matches the cluster schema"
pass=$((pass + 1))

# ---- plans ----
run model gpt --layers 8 --hidden 1024 --heads 16 --seq 512 --vocab 8000 -o "$tmp/g8.json"
run model llama --layers 4 --hidden 1024 --heads 16 --kv-heads 4 --seq 512 --vocab 8000 \
    --ffn 2816 -o "$tmp/l4.json"
run plan "$tmp/g8.json" "$tmp/cluster-h2.json" --quiet -o "$tmp/plan-default.json"
run plan "$tmp/g8.json" "$tmp/cluster-h2.json" --quiet --block-search --global-batch 64 \
    -o "$tmp/plan-blocks.json"
run plan "$tmp/g8.json" "$tmp/cluster-h2.json" --quiet --global-batch 64 --virtual-stages 2 \
    --stages 2 -o "$tmp/plan-virtual.json"
run plan "$tmp/l4.json" "$tmp/cluster-h2.json" --quiet --global-batch 32 --tp 2 \
    --sequence-parallel on -o "$tmp/plan-seqpar.json"
run plan "$tmp/l4.json" "$tmp/cluster-h2.json" --quiet --layer-aligned --tp 4 \
    --recompute selective --zero 1 -o "$tmp/plan-aligned.json"
run plan "$tmp/g8.json" "$tmp/cluster-mixed.json" --quiet --layer-aligned -o "$tmp/plan-mixed.json"
run plan "$tmp/g8.json" "$tmp/cluster-hier8.json" --quiet --schedule gpipe -o "$tmp/plan-gpipe.json"
run partition "$tmp/g8.json" "$tmp/cluster-hier8.json" --stages 2 -o "$tmp/plan-partition.json"
run map "$tmp/g8.json" "$tmp/cluster-hier8.json" "$tmp/plan-partition.json" -o "$tmp/plan-map.json"
validate plan ok "$tmp"/plan-*.json
has_version "$tmp"/plan-*.json
need() { grep -q "$2" "$1" || { echo "FAIL: $1 lacks $2"; exit 1; }; }
need "$tmp/plan-virtual.json" '"virtual_stages": 2'
need "$tmp/plan-seqpar.json" '"sequence_parallel": true'
need "$tmp/plan-aligned.json" '"weights": {'

echo "ok: plan, partition and map outputs (block search, interleaving, sequence parallelism, TP, mixed GPUs) match the plan schema and carry version 1"
pass=$((pass + 1))

# ---- broken files: the schemas reject them ----
mkdir "$tmp/bad"
"$py" - "$tmp" <<'PY'
import copy, json, sys
tmp = sys.argv[1]
def load(name):
    return json.load(open(f"{tmp}/{name}"))
def put(name, doc):
    json.dump(doc, open(f"{tmp}/bad/{name}", "w"))
g = load("model-gpt.json")
d = copy.deepcopy(g); del d["edges"]; put("graph-no-edges.json", d)
d = copy.deepcopy(g); del d["ops"][0]["fwd_ms"]; put("graph-op-no-fwd.json", d)
d = copy.deepcopy(g); d["ops"][1]["fwd_ms"] = "0.5"; put("graph-fwd-string.json", d)
d = copy.deepcopy(g); d["ops"][1]["bwd_ms"] = -1; put("graph-negative-ms.json", d)
d = copy.deepcopy(g); d["ops"][2]["fwd_msec"] = 1; put("graph-typo.json", d)
d = copy.deepcopy(g); d["ops"][2]["gemm"].pop("batch"); put("graph-gemm-3.json", d)
d = copy.deepcopy(g); d["version"] = 3; put("graph-version-3.json", d)
d = copy.deepcopy(g); d["model"]["norm"] = "batchnorm"; put("graph-model-norm.json", d)
d = copy.deepcopy(g); del d["model"]["kind"]; put("graph-model-no-kind.json", d)
d = copy.deepcopy(g); d["model"]["layers"] = 0; put("graph-model-zero.json", d)
c = load("cluster-dgx1.json")
d = copy.deepcopy(c); d["bandwidth_gbps"][0][1] = -43.2; put("cluster-negative-bw.json", d)
d = copy.deepcopy(c); del d["bandwidth_gbps"]; put("cluster-no-matrix.json", d)
d = copy.deepcopy(c); d["devices"][0]["mem_bytes"] = "16G"; put("cluster-mem-string.json", d)
d = copy.deepcopy(c); del d["devices"][3]["mem_bytes"]; put("cluster-no-mem.json", d)
h = load("cluster-dgx-h100.json")
d = copy.deepcopy(h); d["devices"] = c["devices"]; put("cluster-both-formats.json", d)
d = copy.deepcopy(h); d["hierarchy"]["levels"][1]["bw_gbps"] = -50; put("cluster-level-negative.json", d)
d = copy.deepcopy(h); d["hierarchy"]["host_kinds"] = []; put("cluster-no-kinds.json", d)
d = copy.deepcopy(h); d["format"] = 1; put("cluster-format-1-hier.json", d)
d = copy.deepcopy(h); d["hierarchy"]["exceptions"] = [{"host": 1}]; put("cluster-empty-exception.json", d)
p = load("plan-aligned.json")
d = copy.deepcopy(p); del d["stages"]; put("plan-no-stages.json", d)
d = copy.deepcopy(p); d["replicas"] = "2"; put("plan-replicas-string.json", d)
d = copy.deepcopy(p); d["training"]["zero"] = 4; put("plan-zero-4.json", d)
d = copy.deepcopy(p); d["stage_list"][0]["devices"] = [-1]; put("plan-device-negative.json", d)
d = copy.deepcopy(p); d["objective_ms"] = None; put("plan-null.json", d)
d = copy.deepcopy(p); d["version"] = 2; put("plan-version-2.json", d)
d = copy.deepcopy(p); d["stage_list"][0]["recompute"] = "partial"; put("plan-stage-recompute.json", d)
PY
validate graph bad "$tmp"/bad/graph-*.json
validate cluster bad "$tmp"/bad/cluster-*.json
validate plan bad "$tmp"/bad/plan-*.json
echo "ok: $(find "$tmp/bad" -name '*.json' | wc -l) broken files are rejected by their schema"
pass=$((pass + 1))

# ---- planfarm agrees: a negative bandwidth and a newer plan version are refused ----
if "$PF_BIN" check "$tmp/bad/cluster-negative-bw.json" >"$tmp/out" 2>&1; then
    echo "FAIL: planfarm check accepts a negative bandwidth"; exit 1
fi
cp "$tmp/bad/plan-version-2.json" "$tmp/plan-v2.json"
if "$PF_BIN" simulate "$tmp/l4.json" "$tmp/cluster-h2.json" "$tmp/plan-v2.json" >"$tmp/out" 2>&1; then
    echo "FAIL: planfarm simulate accepts a plan of version 2"; exit 1
fi
grep -q 'plan.version: 2 is newer than this planfarm reads (1 to 1)' "$tmp/out" ||
    { echo "FAIL: plan version 2 refused without saying why:"; cat "$tmp/out"; exit 1; }
run simulate "$tmp/l4.json" "$tmp/cluster-h2.json" "$tmp/plan-aligned.json" >/dev/null
echo "ok: planfarm refuses the negative bandwidth and a plan of version 2, reads version 1"
pass=$((pass + 1))
echo "schemas: $pass passed, 0 failed"
