#!/bin/sh
# The command line's option handling, as users see it: for bad flags, missing operands and
# values out of range, every sub-command's message on stderr and its exit status (2 for bad
# usage), and a checksum of every sub-command's --help. The expected text is fixed below, so a
# change in any message, range, alias or help line fails here first.
#
# Needs PF_BIN (planfarm). `sh cli_options.sh --print` prints what the binary says instead of
# comparing it (to review a deliberate change before the expected text is updated).
set -eu
BIN=${PF_BIN:-./planfarm}
case "$BIN" in /*) ;; *) BIN="$(pwd)/$BIN" ;; esac
TMP=$(mktemp -d "${TMPDIR:-/tmp}/pf_cliopt.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM
cd "$TMP"
# The paths in messages are relative to $TMP, so the text does not depend on where it runs.
: >empty.list
printf 'g.json c.json --stages 0\n' >zero.list
printf '# comment\n\ng.json c.json --bogus 3\n' >bogus.list
printf 'g.json c.json --stages\n' >incomplete.list
printf 'g.json c.json --stages 2 extra\n' >extra.list
printf 'g.json\n' >short.list
printf 'g.json c.json --schedule signal\n' >signal.list

# One case a line: the arguments after `planfarm`, split on blanks ('' is an empty argument).
cases() {
    cat <<'CASES'
bogus
check --bogus x
check --max-downsets 0 x
check --max-downsets abc x
check --max-downsets
check
check a b
cluster
cluster hier mesh2d
cluster foo
cluster --bogus hier
cluster --machines 0 hier
cluster --machines x mesh2d
cluster --gpus 3 dgx1
cluster --dims 4 mesh2d
cluster --dims 4x0 mesh2d
cluster --dims 4xa mesh2d
cluster --dims 4x4 mesh3d
cluster --inter-latency-us 1 --dims 2x2 uniform
cluster --mem-gb 0 hier
cluster --mem-gb -1 hier
cluster --tflops abc hier
cluster --latency-us 1e10 hier
cluster --seed -1 uniform
cluster --devices 5000 uniform
cluster --name '' hier
model
model foo
model gpt bert
model --bogus gpt
model --layers 0 gpt
model gpt --layers abc --hidden 0
model --efficiency 2 gpt
model --hbm-gbps -1 gpt
model --precision fp8 gpt
model --name '' gpt
model --experts 4 gpt
model --depth 50 gpt
model --preset 999b llama
model --heads 7 gpt
import
import foo x
import --microbatch 0 pipedream x
import --bogus pipedream x
partition a
partition a b
partition --bogus a b
partition -s 0 a b
partition --stages x a b
partition -s 2 -r 0 a b
partition -s 2 -m 0 a b
partition -s 2 -k -2 a b
partition -s 2 --alpha -1 a b
partition -s 2 --flat-gbps 0 a b
partition -s 2 --max-downsets 0 a b
partition -s 2 -t 0 a b
partition -s
map a b
map - - c
map --bogus a b c
map --instantiation foo a b c
map --probe-seconds -1 a b c
map --eps 2 a b c
map --batch 0 a b c
map --threads 0 a b c
map --seed -1 a b c
simulate a b
simulate - - c
simulate --bogus a b c
simulate --schedule foo a b c
simulate --microbatches 0 a b c
simulate --buckets x a b c
simulate --timeline - a b c
draw a
draw - b
draw --bogus a b
draw -o /nonexistent/x.svg a b
export a b c
export foo a b c
export megatron - - c
export --bogus megatron a b c
plan a
plan --bogus a b
plan --stages
plan --s 1 a b
plan --stages 0 a b
plan --stages x a b
plan --replicas 0 a b
plan --microbatches 0 a b
plan --coarsen -2 a b
plan --max-downsets 0 a b
plan --flat-gbps 0 a b
plan --candidates 0 a b
plan --probes-in-flight 65 a b
plan --eps 0 a b
plan --probe-seconds 0 a b
plan --instantiation x a b
plan --seed 0 a b
plan --max-stages 0 a b
plan --tp 0 a b
plan --max-tp 0 a b
plan --block-search --no-block-search a b
plan --recompute auto --no-block-search a b
plan --no-block-search --zero auto a b
plan --no-block-search --sequence-parallel auto a b
plan --recompute auto --recompute none --no-block-search a b
plan --precision fp8 a b
plan --optimizer x a b
plan --zero 4 a b
plan --recompute x a b
plan --schedule signal a b
plan --global-batch 0 a b
plan --mem-headroom 1 a b
plan --probe-timeouts -1 a b
plan --workers 0 a b
plan --threads 0 a b
plan --timeout 0 a b
plan --broker foo a b
plan -o /nonexistent/dir/x a b
submit a
submit --stages 0 a b
submit --priority x a b
submit --priority 1000001 a b
submit --timeout 0 a b
submit -o x a b
submit --broker foo a b
batch
batch --bogus x
batch --patience -1 x
batch --timeout 0 x
batch --priority 2000000 x
batch --broker foo x
batch -o /nonexistent x
batch missing.list
batch empty.list
batch zero.list
batch bogus.list
batch incomplete.list
batch extra.list
batch short.list
batch signal.list
broker extra
broker --bogus
broker --bind foo
broker --max-attempts 0
broker --dp-timeout 0
broker --probe-margin -1
broker --max-requests 0
broker --expire-days -1
broker --client-requests 0
broker --client-jobs 0
broker --test-prep-delay-ms -1
broker --max-credits 1001
broker --heartbeat-ms 1
broker --liveness 0
broker --max-msg-mb 0
broker --clients d
broker --admins d
broker --compact --journal none
broker --bind tcp://10.1.2.3:5 --journal none
worker
worker extra
worker --bogus
worker --connect foo
worker --threads 0 --connect tcp://127.0.0.1:1
worker --credits 0
worker --cache-mb 0
worker --test-delay-ms -1
worker --heartbeat-ms 5
worker --max-msg-mb x
agent
agent x
agent --bogus
agent --connect foo
agent --heartbeat-ms 5
agent --liveness 0
agent --reconnect-max-ms 1
keygen
keygen a b
keygen .x
keygen --bogus
status
status --bogus x
status --timeout 0 x
cancel
list x
list --timeout abc
result
result --timeout 0 x
profile
profile --bogus
profile -q x
profile --local --broker tcp://127.0.0.1:1
profile --broker tcp://127.0.0.1:1 --graph g
profile --broker foo
profile --local --cluster-out x
profile --timeout 0 --local
profile --stream-mb 0
profile --device -1
profile --reps 0
profile --sizes 4
profile --sizes 4,x
profile --sizes 4,2G
profile --dtype fp8
profile --local --soak-ms 5
profile --local --sweep --soak-ms -1
calibrate
calibrate a b
calibrate --bogus x
calibrate --base nope x
calibrate missing.json
devices x
devices --bogus
model --device nope gpt
broker --h
worker --c x
submit --p 1 a b
status --b x
cluster --in 1 hier
model --l 2 gpt
partition --st 2 a
plan --no 1 a b
CASES
}

run_case() {
    # shellcheck disable=SC2086
    eval "set -- $1"
    rc=0
    "$BIN" "$@" >out.txt 2>err.txt </dev/null || rc=$?
    echo "\$ planfarm $*"
    cat out.txt err.txt
    echo "[exit $rc]"
}

actual() {
    cases | while IFS= read -r line; do run_case "$line"; done
    for c in check cluster model import partition map simulate draw export plan broker worker \
             agent submit batch status result cancel list keygen profile calibrate devices; do
        echo "help $c: $("$BIN" "$c" --help | cksum)"
    done
    echo "help: $("$BIN" --help | cksum)"
}

if [ "${1:-}" = --print ]; then
    actual
    exit 0
fi

actual >actual.txt
cat >expected.txt <<'EXPECTED'
$ planfarm bogus
planfarm: 'bogus' is not a command

usage: planfarm <command> [options]

Plans how to train a large model on a GPU cluster: pipeline stages, replicas,
and the GPU of every stage replica.

commands:
  check      validate a graph or cluster file and print a summary
  cluster    generate a cluster file (DGX-1, hierarchy, mesh, torus, random)
  model      generate a GPT, BERT, Llama, MoE, ViT, ResNet or U-Net graph
  import     convert a PipeDream or Piper profile into a graph file
  partition  cut a graph into S pipeline stages (coarsen, DP, refine)
  map        map a partition's stage replicas onto devices (Parmesan V)
  simulate   simulate one training step of a mapped plan (timeline as SVG)
  draw       draw a mapped plan on its cluster as SVG
  export     a plan as Megatron-LM flags, a DeepSpeed config, torchrun layout
  plan       the whole search: stages, replicas, devices (embedded or --broker)
  broker     serve plan requests to clients and their jobs to workers
  worker     run partition and mapping jobs for a broker
  agent      profile this host's GPUs (or CPU) and network for a broker
  submit     send a plan request to a broker (prints its id; --wait)
  batch      submit a list of requests, follow them, write every plan
  status     state, jobs and best objective of a request
  result     write the plan of a finished request
  cancel     stop a request
  list       every request a broker remembers
  keygen     make a CurveZMQ key pair (NAME, NAME_secret) for broker, workers, clients
  profile    measure this host's GPUs (or CPU) into a cluster file; --graph
  calibrate  fit a device model to a GPU's measured sweep
  devices    list the device model presets (v100 .. b200)

'planfarm <command> --help' describes one command.
Exit status: 0 done, 1 run-time failure, 2 bad usage or input, 3 no feasible plan.
[exit 2]
$ planfarm check --bogus x
planfarm check: unrecognized option '--bogus'
planfarm check: unknown option
(see 'planfarm check --help')
[exit 2]
$ planfarm check --max-downsets 0 x
planfarm check: --max-downsets: 0 is outside [1, 1099511627776]
[exit 2]
$ planfarm check --max-downsets abc x
planfarm check: --max-downsets: 'abc' is not an integer
[exit 2]
$ planfarm check --max-downsets
planfarm check: option '--max-downsets' requires an argument
planfarm check: unknown option
(see 'planfarm check --help')
[exit 2]
$ planfarm check
planfarm check: expected one FILE
(see 'planfarm check --help')
[exit 2]
$ planfarm check a b
planfarm check: expected one FILE
(see 'planfarm check --help')
[exit 2]
$ planfarm cluster
planfarm cluster: expected a KIND
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster hier mesh2d
planfarm cluster: expected one KIND
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster foo
planfarm cluster: unknown kind 'foo' (expected hier, dgx1, nvswitch, mesh2d, torus2d, mesh3d, torus3d, random-blk1, random-blk2, uniform, dgx-a100 or dgx-h100)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --bogus hier
planfarm cluster: unrecognized option '--bogus'
planfarm cluster: unknown option
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --machines 0 hier
planfarm cluster: --machines: 0 is outside [1, 16384]
[exit 2]
$ planfarm cluster --machines x mesh2d
planfarm cluster: --machines does not apply to mesh2d (only to hier, dgx1, nvswitch, dgx-a100 and dgx-h100)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --gpus 3 dgx1
planfarm cluster: --gpus does not apply to dgx1 (only to hier and nvswitch; a DGX has 8)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --dims 4 mesh2d
planfarm cluster: --dims: '4' has 1 dimension, mesh2d needs 2 (XxY)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --dims 4x0 mesh2d
planfarm cluster: --dims: '4x0': dimension 2 is 0, must be in [1, 4096]
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --dims 4xa mesh2d
planfarm cluster: --dims: '4xa' is not of the form XxY
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --dims 4x4 mesh3d
planfarm cluster: --dims: '4x4' has 2 dimensions, mesh3d needs 3 (XxYxZ)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --inter-latency-us 1 --dims 2x2 uniform
planfarm cluster: --inter-latency-us does not apply to uniform (only to hier, dgx1, nvswitch, dgx-a100 and dgx-h100)
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --mem-gb 0 hier
planfarm cluster: --mem-gb: must be positive
(see 'planfarm cluster --help')
[exit 2]
$ planfarm cluster --mem-gb -1 hier
planfarm cluster: --mem-gb: -1 is outside [0, 1e+09]
[exit 2]
$ planfarm cluster --tflops abc hier
planfarm cluster: --tflops: 'abc' is not a number
[exit 2]
$ planfarm cluster --latency-us 1e10 hier
planfarm cluster: --latency-us: 1e+10 is outside [0, 1e+09]
[exit 2]
$ planfarm cluster --seed -1 uniform
planfarm cluster: --seed: -1 is outside [0, 9223372036854775807]
[exit 2]
$ planfarm cluster --devices 5000 uniform
planfarm cluster: --devices: 5000 is outside [1, 4096]
[exit 2]
$ planfarm cluster --name  hier
planfarm cluster: --name: empty
(see 'planfarm cluster --help')
[exit 2]
$ planfarm model
planfarm model: expected one model kind: gpt, bert, llama, moe, vit, resnet or unet
(see 'planfarm model --help')
[exit 2]
$ planfarm model foo
planfarm model: 'foo' is not a model kind (gpt, bert, llama, moe, vit, resnet, unet)
(see 'planfarm model --help')
[exit 2]
$ planfarm model gpt bert
planfarm model: expected one model kind: gpt, bert, llama, moe, vit, resnet or unet
(see 'planfarm model --help')
[exit 2]
$ planfarm model --bogus gpt
planfarm model: unrecognized option '--bogus'
planfarm model: unknown option
(see 'planfarm model --help')
[exit 2]
$ planfarm model --layers 0 gpt
planfarm model: --layers: 0 is outside [1, 2147483647]
[exit 2]
$ planfarm model gpt --layers abc --hidden 0
planfarm model: --layers: 'abc' is not an integer
[exit 2]
$ planfarm model --efficiency 2 gpt
planfarm model: --efficiency: 2 is outside [0, 1]
[exit 2]
$ planfarm model --hbm-gbps -1 gpt
planfarm model: --hbm-gbps: -1 is outside [0, 1e+12]
[exit 2]
$ planfarm model --precision fp8 gpt
planfarm model: --precision: 'fp8' is not fp16, bf16 or fp32
(see 'planfarm model --help')
[exit 2]
$ planfarm model --name  gpt
planfarm model: --name: empty
(see 'planfarm model --help')
[exit 2]
$ planfarm model --experts 4 gpt
planfarm model: --experts does not apply to gpt
(see 'planfarm model --help')
[exit 2]
$ planfarm model --depth 50 gpt
planfarm model: --depth does not apply to gpt
(see 'planfarm model --help')
[exit 2]
$ planfarm model --preset 999b llama
planfarm model: --preset: '999b' is not a llama preset (7b, 13b, 70b, 405b)
(see 'planfarm model --help')
[exit 2]
$ planfarm model --heads 7 gpt
planfarm model: --heads: hidden 1600 is not divisible by 7 heads (give --head-dim)
[exit 2]
$ planfarm import
planfarm import: expected a format (pipedream or piper) and one FILE
(see 'planfarm import --help')
[exit 2]
$ planfarm import foo x
planfarm import: unknown format 'foo' (pipedream or piper)
(see 'planfarm import --help')
[exit 2]
$ planfarm import --microbatch 0 pipedream x
planfarm import: --microbatch: 0 is outside [1, 1073741824]
[exit 2]
$ planfarm import --bogus pipedream x
planfarm import: unrecognized option '--bogus'
planfarm import: unknown option
(see 'planfarm import --help')
[exit 2]
$ planfarm partition a
planfarm partition: expected GRAPH and CLUSTER
(see 'planfarm partition --help')
[exit 2]
$ planfarm partition a b
planfarm partition: --stages S is required
(see 'planfarm partition --help')
[exit 2]
$ planfarm partition --bogus a b
planfarm partition: unrecognized option '--bogus'
planfarm partition: unknown option
(see 'planfarm partition --help')
[exit 2]
$ planfarm partition -s 0 a b
planfarm partition: --stages: 0 is outside [1, 1048576]
[exit 2]
$ planfarm partition --stages x a b
planfarm partition: --stages: 'x' is not an integer
[exit 2]
$ planfarm partition -s 2 -r 0 a b
planfarm partition: --replicas: 0 is outside [1, 1048576]
[exit 2]
$ planfarm partition -s 2 -m 0 a b
planfarm partition: --microbatches: 0 is outside [1, 1048576]
[exit 2]
$ planfarm partition -s 2 -k -2 a b
planfarm partition: --coarsen: -2 is outside [-1, 1073741824]
[exit 2]
$ planfarm partition -s 2 --alpha -1 a b
planfarm partition: --alpha: -1 is outside [0, 1e+300]
[exit 2]
$ planfarm partition -s 2 --flat-gbps 0 a b
planfarm partition: --flat-gbps: 0 is outside [1e-09, 1e+300]
[exit 2]
$ planfarm partition -s 2 --max-downsets 0 a b
planfarm partition: --max-downsets: 0 is outside [1, 1099511627776]
[exit 2]
$ planfarm partition -s 2 -t 0 a b
planfarm partition: --threads: 0 is outside [1, 4096]
[exit 2]
$ planfarm partition -s
planfarm partition: option requires an argument -- 's'
planfarm partition: unknown option
(see 'planfarm partition --help')
[exit 2]
$ planfarm map a b
planfarm map: expected GRAPH CLUSTER PLAN
(see 'planfarm map --help')
[exit 2]
$ planfarm map - - c
planfarm map: only one of GRAPH, CLUSTER, PLAN can be - (stdin)
(see 'planfarm map --help')
[exit 2]
$ planfarm map --bogus a b c
planfarm map: unrecognized option '--bogus'
planfarm map: unknown option
(see 'planfarm map --help')
[exit 2]
$ planfarm map --instantiation foo a b c
planfarm map: --instantiation: 'foo' is not m, ar, full or auto
(see 'planfarm map --help')
[exit 2]
$ planfarm map --probe-seconds -1 a b c
planfarm map: --probe-seconds: -1 is outside [0, 1e+09]
[exit 2]
$ planfarm map --eps 2 a b c
planfarm map: --eps: 2 is outside [0, 1]
[exit 2]
$ planfarm map --batch 0 a b c
planfarm map: --batch: 0 is outside [1, 1024]
[exit 2]
$ planfarm map --threads 0 a b c
planfarm map: --threads: 0 is outside [1, 4096]
[exit 2]
$ planfarm map --seed -1 a b c
planfarm map: --seed: -1 is outside [0, 4611686018427387904]
[exit 2]
$ planfarm simulate a b
planfarm simulate: expected GRAPH CLUSTER PLAN
(see 'planfarm simulate --help')
[exit 2]
$ planfarm simulate - - c
planfarm simulate: only one of GRAPH, CLUSTER, PLAN can be - (stdin)
(see 'planfarm simulate --help')
[exit 2]
$ planfarm simulate --bogus a b c
planfarm simulate: unrecognized option '--bogus'
planfarm simulate: unknown option
(see 'planfarm simulate --help')
[exit 2]
$ planfarm simulate --schedule foo a b c
planfarm simulate: --schedule: 'foo' is not gpipe, 1f1b, eager-1f1b or signal
(see 'planfarm simulate --help')
[exit 2]
$ planfarm simulate --microbatches 0 a b c
planfarm simulate: --microbatches: 0 is outside [1, 65536]
[exit 2]
$ planfarm simulate --buckets x a b c
planfarm simulate: --buckets: 'x' is not an integer
[exit 2]
$ planfarm simulate --timeline - a b c
planfarm simulate: --timeline: give a file name, not -
(see 'planfarm simulate --help')
[exit 2]
$ planfarm draw a
planfarm draw: expected PLAN CLUSTER [GRAPH]
(see 'planfarm draw --help')
[exit 2]
$ planfarm draw - b
planfarm draw: PLAN, CLUSTER and GRAPH must be files
(see 'planfarm draw --help')
[exit 2]
$ planfarm draw --bogus a b
planfarm draw: unrecognized option '--bogus'
planfarm draw: unknown option
(see 'planfarm draw --help')
[exit 2]
$ planfarm draw -o /nonexistent/x.svg a b
planfarm draw: -o /nonexistent/x.svg: cannot write in /nonexistent: No such file or directory
[exit 2]
$ planfarm export a b c
planfarm export: expected KIND GRAPH CLUSTER PLAN (see --help)
(see 'planfarm export --help')
[exit 2]
$ planfarm export foo a b c
planfarm export: 'foo' is not megatron, deepspeed or torchrun
(see 'planfarm export --help')
[exit 2]
$ planfarm export megatron - - c
planfarm export: only one of GRAPH, CLUSTER, PLAN can be - (stdin)
(see 'planfarm export --help')
[exit 2]
$ planfarm export --bogus megatron a b c
planfarm export: unrecognized option '--bogus'
planfarm export: unknown option
(see 'planfarm export --help')
[exit 2]
$ planfarm plan a
planfarm plan: expected GRAPH and CLUSTER
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --bogus a b
planfarm plan: unrecognized option '--bogus'
planfarm plan: unknown option
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --stages
planfarm plan: option '--stages' requires an argument
planfarm plan: unknown option
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --s 1 a b
planfarm plan: option '--s' is ambiguous; possibilities: '--stages' '--seed' '--sequence-parallel' '--schedule' '--stage-degrees'
planfarm plan: unknown option
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --stages 0 a b
planfarm plan: --stages: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --stages x a b
planfarm plan: --stages: 'x' is not an integer
[exit 2]
$ planfarm plan --replicas 0 a b
planfarm plan: --replicas: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --microbatches 0 a b
planfarm plan: --microbatches: 0 is outside [1, 1048576]
[exit 2]
$ planfarm plan --coarsen -2 a b
planfarm plan: --coarsen: -2 is outside [-1, 16777216]
[exit 2]
$ planfarm plan --max-downsets 0 a b
planfarm plan: --max-downsets: 0 is outside [1, 1099511627776]
[exit 2]
$ planfarm plan --flat-gbps 0 a b
planfarm plan: --flat-gbps: 0 is outside [1e-09, 1e+09]
[exit 2]
$ planfarm plan --candidates 0 a b
planfarm plan: --candidates: 0 is outside [1, 64]
[exit 2]
$ planfarm plan --probes-in-flight 65 a b
planfarm plan: --probes-in-flight: 65 is outside [1, 64]
[exit 2]
$ planfarm plan --eps 0 a b
planfarm plan: --eps: 0 is outside [1e-12, 0.5]
[exit 2]
$ planfarm plan --probe-seconds 0 a b
planfarm plan: --probe-seconds: 0 is outside [0.001, 86400]
[exit 2]
$ planfarm plan --instantiation x a b
planfarm plan: --instantiation: 'x' is not m, ar, full or auto
[exit 2]
$ planfarm plan --seed 0 a b
planfarm plan: --seed: 0 is outside [1, 4611686018427387904]
[exit 2]
$ planfarm plan --max-stages 0 a b
planfarm plan: --max-stages: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --tp 0 a b
planfarm plan: --tp: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --max-tp 0 a b
planfarm plan: --max-tp: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --block-search --no-block-search a b
planfarm plan: --no-block-search: --block-search asked for the block search
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --recompute auto --no-block-search a b
planfarm plan: --no-block-search: --recompute auto asked for the block search
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --no-block-search --zero auto a b
planfarm plan: --zero auto asks for the block search, which --no-block-search turns off
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --no-block-search --sequence-parallel auto a b
planfarm plan: --sequence-parallel auto asks for the block search, which --no-block-search turns off
(see 'planfarm plan --help')
[exit 2]
$ planfarm plan --recompute auto --recompute none --no-block-search a b
planfarm plan: a: No such file or directory
[exit 2]
$ planfarm plan --precision fp8 a b
planfarm plan: --precision: 'fp8' is not bf16, fp16 or fp32
[exit 2]
$ planfarm plan --optimizer x a b
planfarm plan: --optimizer: 'x' is not adam or sgd
[exit 2]
$ planfarm plan --zero 4 a b
planfarm plan: --zero: 4 is outside [0, 3]
[exit 2]
$ planfarm plan --recompute x a b
planfarm plan: --recompute: 'x' is not none, selective, full or auto
[exit 2]
$ planfarm plan --schedule signal a b
planfarm plan: --schedule: 'signal' is not 1f1b, gpipe or eager-1f1b
[exit 2]
$ planfarm plan --global-batch 0 a b
planfarm plan: --global-batch: 0 is outside [1, 1099511627776]
[exit 2]
$ planfarm plan --mem-headroom 1 a b
planfarm plan: --mem-headroom: 1 is outside [0, 0.99]
[exit 2]
$ planfarm plan --probe-timeouts -1 a b
planfarm plan: --probe-timeouts: -1 is outside [0, 1000000]
[exit 2]
$ planfarm plan --workers 0 a b
planfarm plan: --workers: 0 is outside [1, 256]
[exit 2]
$ planfarm plan --threads 0 a b
planfarm plan: --threads: 0 is outside [1, 4096]
[exit 2]
$ planfarm plan --timeout 0 a b
planfarm plan: --timeout: 0 is outside [0.01, 86400]
[exit 2]
$ planfarm plan --broker foo a b
planfarm plan: --broker: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm plan -o /nonexistent/dir/x a b
planfarm plan: -o /nonexistent/dir/x: cannot write in /nonexistent/dir: No such file or directory
[exit 2]
$ planfarm submit a
planfarm submit: expected GRAPH and CLUSTER
(see 'planfarm submit --help')
[exit 2]
$ planfarm submit --stages 0 a b
planfarm submit: --stages: 0 is outside [1, 4096]
[exit 2]
$ planfarm submit --priority x a b
planfarm submit: --priority: 'x' is not an integer
[exit 2]
$ planfarm submit --priority 1000001 a b
planfarm submit: --priority: 1000001 is outside [-1000000, 1000000]
[exit 2]
$ planfarm submit --timeout 0 a b
planfarm submit: --timeout: 0 is outside [0.01, 86400]
[exit 2]
$ planfarm submit -o x a b
planfarm submit: -o needs --wait (or use `planfarm result ID -o PLAN`)
(see 'planfarm submit --help')
[exit 2]
$ planfarm submit --broker foo a b
planfarm submit: --broker: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm batch
planfarm batch: expected LIST files (or --list LIST)
(see 'planfarm batch --help')
[exit 2]
$ planfarm batch --bogus x
planfarm batch: unrecognized option '--bogus'
planfarm batch: unknown option
(see 'planfarm batch --help')
[exit 2]
$ planfarm batch --patience -1 x
planfarm batch: --patience: -1 is outside [0, 1e+07]
[exit 2]
$ planfarm batch --timeout 0 x
planfarm batch: --timeout: 0 is outside [0.01, 86400]
[exit 2]
$ planfarm batch --priority 2000000 x
planfarm batch: --priority: 2000000 is outside [-1000000, 1000000]
[exit 2]
$ planfarm batch --broker foo x
planfarm batch: --broker: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm batch -o /nonexistent x
planfarm batch: -o /nonexistent: No such file or directory (create the directory first)
(see 'planfarm batch --help')
[exit 2]
$ planfarm batch missing.list
planfarm batch: missing.list: No such file or directory
[exit 2]
$ planfarm batch empty.list
planfarm batch: no request in the lists
(see 'planfarm batch --help')
[exit 2]
$ planfarm batch zero.list
planfarm batch: --stages: 0 is outside [1, 4096]
planfarm batch: (at zero.list:1)
[exit 2]
$ planfarm batch bogus.list
planfarm batch: bogus.list:3: unknown or incomplete option '--bogus'
[exit 2]
$ planfarm batch incomplete.list
planfarm batch: incomplete.list:1: unknown or incomplete option '--stages'
[exit 2]
$ planfarm batch extra.list
planfarm batch: extra.list:1: unexpected 'extra' after the options
[exit 2]
$ planfarm batch short.list
planfarm batch: short.list:1: expected GRAPH CLUSTER [plan options]
[exit 2]
$ planfarm batch signal.list
planfarm batch: --schedule: 'signal' is not 1f1b, gpipe or eager-1f1b
planfarm batch: (at signal.list:1)
[exit 2]
$ planfarm broker extra
planfarm broker: unexpected argument 'extra'
(see 'planfarm broker --help')
[exit 2]
$ planfarm broker --bogus
planfarm broker: unrecognized option '--bogus'
planfarm broker: unknown option
(see 'planfarm broker --help')
[exit 2]
$ planfarm broker --bind foo
planfarm broker: --bind: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm broker --max-attempts 0
planfarm broker: --max-attempts: 0 is outside [1, 1000]
[exit 2]
$ planfarm broker --dp-timeout 0
planfarm broker: --dp-timeout: 0 is outside [0.01, 1e+07]
[exit 2]
$ planfarm broker --probe-margin -1
planfarm broker: --probe-margin: -1 is outside [0, 1e+07]
[exit 2]
$ planfarm broker --max-requests 0
planfarm broker: --max-requests: 0 is outside [1, 1000000]
[exit 2]
$ planfarm broker --expire-days -1
planfarm broker: --expire-days: -1 is outside [0, 1e+06]
[exit 2]
$ planfarm broker --client-requests 0
planfarm broker: --client-requests: 0 is outside [1, 1000000]
[exit 2]
$ planfarm broker --client-jobs 0
planfarm broker: --client-jobs: 0 is outside [1, 100000000]
[exit 2]
$ planfarm broker --test-prep-delay-ms -1
planfarm broker: --test-prep-delay-ms: -1 is outside [0, 3600000]
[exit 2]
$ planfarm broker --max-credits 1001
planfarm broker: --max-credits: 1001 is outside [1, 1000]
[exit 2]
$ planfarm broker --heartbeat-ms 1
planfarm broker: --heartbeat-ms: 1 is outside [10, 3600000]
[exit 2]
$ planfarm broker --liveness 0
planfarm broker: --liveness: 0 is outside [1, 1000]
[exit 2]
$ planfarm broker --max-msg-mb 0
planfarm broker: --max-msg-mb: 0 is outside [1, 1048576]
[exit 2]
$ planfarm broker --clients d
planfarm broker: --clients needs --cert (the broker's secret cert)
(see 'planfarm broker --help')
[exit 2]
$ planfarm broker --admins d
planfarm broker: --admins needs --cert (the broker's secret cert)
(see 'planfarm broker --help')
[exit 2]
$ planfarm broker --compact --journal none
planfarm broker: --compact needs a journal
(see 'planfarm broker --help')
[exit 2]
$ planfarm broker --bind tcp://10.1.2.3:5 --journal none
planfarm broker: broker: plain TCP on tcp://10.1.2.3:5 is refused: anyone on the network could read and send requests and jobs. Give CurveZMQ keys (--cert, and --broker-key for clients and workers; `planfarm keygen` makes them), use a loopback or ipc:// endpoint, or pass --insecure on a network you trust
[exit 2]
$ planfarm worker
planfarm worker: --connect ENDPOINT is required
(see 'planfarm worker --help')
[exit 2]
$ planfarm worker extra
planfarm worker: unexpected argument 'extra'
(see 'planfarm worker --help')
[exit 2]
$ planfarm worker --bogus
planfarm worker: unrecognized option '--bogus'
planfarm worker: unknown option
(see 'planfarm worker --help')
[exit 2]
$ planfarm worker --connect foo
planfarm worker: --connect: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm worker --threads 0 --connect tcp://127.0.0.1:1
planfarm worker: --threads: 0 is outside [1, 4096]
[exit 2]
$ planfarm worker --credits 0
planfarm worker: --credits: 0 is outside [1, 1000]
[exit 2]
$ planfarm worker --cache-mb 0
planfarm worker: --cache-mb: 0 is outside [1, 16777216]
[exit 2]
$ planfarm worker --test-delay-ms -1
planfarm worker: --test-delay-ms: -1 is outside [0, 3600000]
[exit 2]
$ planfarm worker --heartbeat-ms 5
planfarm worker: --heartbeat-ms: 5 is outside [10, 3600000]
[exit 2]
$ planfarm worker --max-msg-mb x
planfarm worker: --max-msg-mb: 'x' is not an integer
[exit 2]
$ planfarm agent
planfarm agent: --connect ENDPOINT is required
(see 'planfarm agent --help')
[exit 2]
$ planfarm agent x
planfarm agent: unexpected argument 'x'
(see 'planfarm agent --help')
[exit 2]
$ planfarm agent --bogus
planfarm agent: unrecognized option '--bogus'
planfarm agent: unknown option
(see 'planfarm agent --help')
[exit 2]
$ planfarm agent --connect foo
planfarm agent: --connect: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm agent --heartbeat-ms 5
planfarm agent: --heartbeat-ms: 5 is outside [10, 3600000]
[exit 2]
$ planfarm agent --liveness 0
planfarm agent: --liveness: 0 is outside [1, 1000]
[exit 2]
$ planfarm agent --reconnect-max-ms 1
planfarm agent: --reconnect-max-ms: 1 is outside [10, 3600000]
[exit 2]
$ planfarm keygen
planfarm keygen: expected one NAME
(see 'planfarm keygen --help')
[exit 2]
$ planfarm keygen a b
planfarm keygen: expected one NAME
(see 'planfarm keygen --help')
[exit 2]
$ planfarm keygen .x
planfarm keygen: NAME '.x': a file name, without '/' or a leading '.'
(see 'planfarm keygen --help')
[exit 2]
$ planfarm keygen --bogus
planfarm keygen: unrecognized option '--bogus'
planfarm keygen: unknown option
(see 'planfarm keygen --help')
[exit 2]
$ planfarm status
planfarm status: expected one request ID
(see 'planfarm status --help')
[exit 2]
$ planfarm status --bogus x
planfarm status: unrecognized option '--bogus'
planfarm status: unknown option
(see 'planfarm status --help')
[exit 2]
$ planfarm status --timeout 0 x
planfarm status: --timeout: 0 is outside [0.01, 86400]
[exit 2]
$ planfarm cancel
planfarm cancel: expected one request ID
(see 'planfarm cancel --help')
[exit 2]
$ planfarm list x
planfarm list: expected no argument
(see 'planfarm list --help')
[exit 2]
$ planfarm list --timeout abc
planfarm list: --timeout: 'abc' is not a number
[exit 2]
$ planfarm result
planfarm result: expected one request ID
(see 'planfarm result --help')
[exit 2]
$ planfarm result --timeout 0 x
planfarm result: --timeout: 0 is outside [0.01, 86400]
[exit 2]
$ planfarm profile
planfarm profile: one of --local and --broker ENDPOINT is required
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --bogus
planfarm profile: unrecognized option '--bogus'
planfarm profile: unknown option (see --help)
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile -q x
planfarm profile: unexpected argument 'x'
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --local --broker tcp://127.0.0.1:1
planfarm profile: one of --local and --broker ENDPOINT is required
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --broker tcp://127.0.0.1:1 --graph g
planfarm profile: --graph, --cluster-out, --peer-off, --sweep (--quick, --soak-ms) and --matrix go with --local
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --broker foo
planfarm profile: --broker: 'foo' is not an endpoint (tcp://HOST:PORT, ipc://PATH or inproc://NAME)
[exit 2]
$ planfarm profile --local --cluster-out x
planfarm profile: --cluster-out goes with --graph (else use -o)
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --timeout 0 --local
planfarm profile: --timeout: 0 is outside [1, 86400]
[exit 2]
$ planfarm profile --stream-mb 0
planfarm profile: --stream-mb: 0 is outside [1, 16384]
[exit 2]
$ planfarm profile --device -1
planfarm profile: --device: -1 is outside [0, 1023]
[exit 2]
$ planfarm profile --reps 0
planfarm profile: --reps: 0 is outside [1, 10000]
[exit 2]
$ planfarm profile --sizes 4
planfarm profile: --sizes: '4': at least 2 sizes for a fit
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --sizes 4,x
planfarm profile: --sizes: '4,x': expected positive sizes like 4,64K,1M
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --sizes 4,2G
planfarm profile: --sizes: '4,2G': at most 40 sizes of at most 1G, comma-separated
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --dtype fp8
planfarm profile: --dtype: 'fp8': bf16, fp16 or fp32
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --local --soak-ms 5
planfarm profile: --soak-ms goes with --sweep
(see 'planfarm profile --help')
[exit 2]
$ planfarm profile --local --sweep --soak-ms -1
planfarm profile: --soak-ms: -1 is outside [0, 60000]
[exit 2]
$ planfarm calibrate
planfarm calibrate: expected one sweep file (planfarm profile --local --sweep)
(see 'planfarm calibrate --help')
[exit 2]
$ planfarm calibrate a b
planfarm calibrate: expected one sweep file (planfarm profile --local --sweep)
(see 'planfarm calibrate --help')
[exit 2]
$ planfarm calibrate --bogus x
planfarm calibrate: unrecognized option '--bogus'
planfarm calibrate: unknown option
(see 'planfarm calibrate --help')
[exit 2]
$ planfarm calibrate --base nope x
planfarm calibrate: --base: 'nope' is neither a device preset (v100, a100-40g, a100-80g, h100-sxm, h200, b200) nor a readable file
[exit 2]
$ planfarm calibrate missing.json
planfarm calibrate: missing.json: No such file or directory
[exit 2]
$ planfarm devices x
planfarm devices: takes no operand
(see 'planfarm devices --help')
[exit 2]
$ planfarm devices --bogus
planfarm devices: unrecognized option '--bogus'
planfarm devices: unknown option
(see 'planfarm devices --help')
[exit 2]
$ planfarm model --device nope gpt
planfarm model: --device: 'nope' is neither a device preset (v100, a100-40g, a100-80g, h100-sxm, h200, b200) nor a readable file
[exit 2]
$ planfarm broker --h
planfarm broker: option '--h' is ambiguous; possibilities: '--http' '--heartbeat-ms' '--help'
planfarm broker: unknown option
(see 'planfarm broker --help')
[exit 2]
$ planfarm worker --c x
planfarm worker: option '--c' is ambiguous; possibilities: '--connect' '--credits' '--cache-mb' '--cert'
planfarm worker: unknown option
(see 'planfarm worker --help')
[exit 2]
$ planfarm submit --p 1 a b
planfarm submit: option '--p' is ambiguous; possibilities: '--priority' '--probes-in-flight' '--probe-seconds' '--precision' '--probe-timeouts'
planfarm submit: unknown option
(see 'planfarm submit --help')
[exit 2]
$ planfarm status --b x
planfarm status: option '--b' is ambiguous; possibilities: '--broker' '--broker-key'
planfarm status: unknown option
(see 'planfarm status --help')
[exit 2]
$ planfarm cluster --in 1 hier
planfarm cluster: option '--in' is ambiguous; possibilities: '--intra-gbps' '--inter-gbps' '--inter-latency-us'
planfarm cluster: unknown option
(see 'planfarm cluster --help')
[exit 2]
$ planfarm model --l 2 gpt
planfarm model: option '--l' is ambiguous; possibilities: '--layers' '--levels'
planfarm model: unknown option
(see 'planfarm model --help')
[exit 2]
$ planfarm partition --st 2 a
planfarm partition: expected GRAPH and CLUSTER
(see 'planfarm partition --help')
[exit 2]
$ planfarm plan --no 1 a b
planfarm plan: option '--no' is ambiguous; possibilities: '--no-refine' '--no-symmetry' '--no-block-search'
planfarm plan: unknown option
(see 'planfarm plan --help')
[exit 2]
help check: 350063101 334
help cluster: 857414402 4357
help model: 3172463367 3321
help import: 569495115 693
help partition: 4063264872 1654
help map: 1185299956 2029
help simulate: 3983068841 1066
help draw: 1025757025 508
help export: 419677516 2134
help plan: 3125882707 6605
help broker: 547526744 3162
help worker: 3015310655 1520
help agent: 3155974298 1572
help submit: 1603182166 6414
help batch: 2781364441 1727
help status: 979815886 725
help result: 773170951 804
help cancel: 3739333781 715
help list: 2550677265 892
help keygen: 3068494888 374
help profile: 3929266055 4409
help calibrate: 2570741372 1274
help devices: 3212416660 317
help: 1742133860 1809
EXPECTED
if ! diff -u expected.txt actual.txt >diff.txt; then
    cat diff.txt >&2
    echo "FAIL: cli_options: the command line says something else than expected (diff above)" >&2
    exit 1
fi
n=$(cases | wc -l)
echo "cli_options: $n bad-usage cases and 22 --help texts as expected"
