/* export: a mapped plan as the settings a training framework runs: Megatron-LM
 * arguments, a DeepSpeed config, and for every framework the rank order, hostfile and per-host
 * torchrun layout that put each process on the device the plan chose.
 *
 * Devices of a plan. Stage s, data-parallel replica r and tensor-parallel rank k (T =
 * plan->tensor_parallel) run on stage_list[s].devices[r * T + k]: each replica's T devices are
 * consecutive (DESIGN.md "Plan": a list of T devices per replica), so T = 1 is today's one
 * device per replica. pf_export_device() is the one place that knows this.
 *
 * Rank order. Megatron-LM (and DeepSpeed's PipeModelDataParallelTopology, axes pipe, data,
 * model) number ranks tensor-parallel fastest, then data-parallel, then pipeline:
 *     rank = s x (R x T) + r x T + k
 * so ranks [s R T, (s + 1) R T) are stage s, world = S x R x T.
 *
 * Layers. A plan is layer-aligned when every repeated block (the ops whose names share a prefix
 * up to a numeric part, "layers.7" of "layers.7.mlp.fc1": pf_training_block_len) lies wholly in
 * one stage, stages hold consecutive blocks (blocks ordered by their first op in topological
 * order), every stage holds at least one block, and ops outside blocks (embedding, final norm,
 * head) sit in the first or the last stage. Only such plans are exported: the frameworks split
 * a model into stages by whole layers.
 *
 * Launch layout. torchrun gives node n one contiguous block of global ranks [first, first +
 * nproc) in node-rank order, and local rank l uses the l-th device of CUDA_VISIBLE_DEVICES. The
 * plan is realised exactly when the ranks of every host form one contiguous block: nodes are
 * then ordered by their first rank and CUDA_VISIBLE_DEVICES lists, for local rank l, the local
 * GPU of the device of rank first + l. Otherwise the layout keeps the hosts' rank counts and that
 * node order, keeps every rank whose planned device is on its node, gives the node's other
 * planned devices to its remaining ranks in rank order, and says why it is not exact. A device's
 * local GPU index is K of a name "<host>/gpuK" when the host's devices are all named so with
 * distinct K, else its position among its host's devices in cluster order; a host's name is the
 * prefix before '/' (letters, digits, '.', '_', '-'), else "host<H>". */
#ifndef PF_EXPORT_H
#define PF_EXPORT_H

#include "planner/ir/cluster.h"
#include "planner/ir/graph.h"
#include "planner/ir/plan.h"

#include <stddef.h>
#include <stdio.h>

typedef enum { PF_EXPORT_MEGATRON, PF_EXPORT_DEEPSPEED, PF_EXPORT_TORCHRUN } pf_export_kind_t;

/* "megatron", "deepspeed", "torchrun": PF_OK or PF_EINPUT. */
int pf_export_parse_kind(const char *s, pf_export_kind_t *kind);
const char *pf_export_kind_name(pf_export_kind_t kind);

/* The device of (stage s, replica r, tensor-parallel rank k): devices[r * T + k]; -1 unmapped. */
int pf_export_device(const pf_plan_t *p, int s, int r, int k);
/* Megatron-LM's global rank of (s, r, k): s x (R x T) + r x T + k. */
int pf_export_rank(const pf_plan_t *p, int s, int r, int k);

typedef struct {
    int host;        /* cluster host index */
    char name[64];   /* hostname for the hostfile and launch script */
    int node_rank;   /* torchrun --node-rank */
    int first_rank;  /* global ranks first_rank .. first_rank + nproc - 1 */
    int nproc;       /* torchrun --nproc-per-node; hostfile slots */
    int *gpus;       /* nproc local GPU indices: CUDA_VISIBLE_DEVICES in local-rank order */
} pf_export_node_t;

typedef struct pf_export pf_export_t;

/* Checks the plan (pf_plan_validate, every (s, r, k) mapped to a distinct device, tensor
 * parallel >= 1), that it is layer-aligned, and builds the launch layout. NULL with the reason:
 * "stage 2 cuts block layers.13: ops layers.13.mlp.fc1 .. in stage 2, layers.13.ln1 .. in
 * stage 1" (PF_EINPUT in *rc when rc != NULL; PF_ERR when out of memory). A plan whose stages
 * differ in data- or tensor-parallel degree (pf_plan_degrees_mixed) is PF_EINFEASIBLE: "stage 0
 * runs 2 x 1 devices, stage 1 runs 1 x 2: Megatron-LM and DeepSpeed run one data- and
 * tensor-parallel degree for every stage; this plan needs a runtime with heterogeneous stages
 * such as PipeDream's or Piper's" (every run of stages alike named: "stages 1-3 run 1 x 2"). The plan, graph and
 * cluster must outlive the export. */
pf_export_t *pf_export_new(const pf_plan_t *p, const pf_graph_t *g, const pf_cluster_t *c,
                           int *rc, char *err, size_t errlen);
void pf_export_destroy(pf_export_t **x);

const pf_plan_t *pf_export_plan(const pf_export_t *x);
int pf_export_layers(const pf_export_t *x);                   /* blocks in the model */
int pf_export_stage_layers(const pf_export_t *x, int s);      /* blocks stage s holds */
int pf_export_stage_first_layer(const pf_export_t *x, int s); /* index of its first block */
int pf_export_world(const pf_export_t *x);                    /* S x R x T */
int pf_export_global_batch(const pf_export_t *x);             /* microbatch x MB x R / C */
/* The plan's context parallelism C (its R replicas are d x C) and expert parallelism E; 1: none */
int pf_export_context_parallel(const pf_export_t *x);
int pf_export_expert_parallel(const pf_export_t *x);
/* The plan's choices (plan.h "blocks", the block search) when it has them, else the graph's
 * micro-batch, 1 virtual stage, and sequence parallelism whenever T > 1 (Megatron-LM's advice).
 * Sequence parallelism is 0 at T = 1. */
int pf_export_microbatch(const pf_export_t *x);
int pf_export_virtual_stages(const pf_export_t *x);
int pf_export_sequence_parallel(const pf_export_t *x);
/* Device the plan chose for global rank g, and the device the layout runs it on (the same for
 * every rank when the layout is exact). */
int pf_export_plan_rank_device(const pf_export_t *x, int g);
int pf_export_layout_rank_device(const pf_export_t *x, int g);
int pf_export_nnodes(const pf_export_t *x);
const pf_export_node_t *pf_export_node(const pf_export_t *x, int n); /* in node-rank order */
/* 1 when the layout realises the plan; else 0 and reason() says why (empty when exact). */
int pf_export_exact(const pf_export_t *x);
const char *pf_export_reason(const pf_export_t *x);

/* Megatron-LM arguments as a bash array MEGATRON_PARALLEL_ARGS, with a comment per choice.
 * PF_EINPUT when the layer split cannot be written with --decoder-first/last-pipeline-num-layers
 * (Megatron-LM splits the middle stages evenly). PF_ERR on a write error. */
int pf_export_write_megatron(const pf_export_t *x, FILE *f, char *err, size_t errlen);
/* A DeepSpeed config (ds_config.json, one JSON document) with only keys DeepSpeed reads:
 * train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
 * zero_optimization.stage, bf16 (2-byte precision), and with recomputation
 * activation_checkpointing and pipeline.activation_checkpoint_interval 1 (DeepSpeed checkpoints
 * whole layers: selective is written as full, and export_warnings.h says so). PF_EINPUT for ZeRO
 * 2 or 3 with more than one stage (DeepSpeed's pipeline engine refuses them). */
int pf_export_write_deepspeed(const pf_export_t *x, FILE *f, char *err, size_t errlen);
/* pipeline_module.py: PipelineModule's constructor arguments (stage count, a
 * PipeModelDataParallelTopology in the plan's rank order, partition_method "type:" + the block
 * class, activation_checkpoint_interval) as a Python function pipeline_module(layers,
 * block_type, loss_fn=None). Same refusals as the config. */
int pf_export_write_deepspeed_pipe(const pf_export_t *x, FILE *f, char *err, size_t errlen);
/* "HOST slots=N", one line per node in node-rank order. */
int pf_export_write_hostfile(const pf_export_t *x, FILE *f, char *err, size_t errlen);
/* A POSIX sh script `launch.sh HOST TRAIN_SCRIPT [ARGS...]`: the rank table as comments, then
 * per host CUDA_VISIBLE_DEVICES and torchrun --nnodes/--nproc-per-node/--node-rank. */
int pf_export_write_launch(const pf_export_t *x, FILE *f, char *err, size_t errlen);

#endif
