/* training: how the model is trained, as far as memory and time per micro-batch care
 * (DESIGN.md "Memory per device"): precision, optimizer, ZeRO stage, activation recomputation
 * and the pipeline schedule's micro-batches in flight.
 *
 * Parameter state per parameter (bytes):
 *   weights  p          (p = 2 for bf16/fp16, 4 for fp32: the element size of param_bytes)
 *   grads    p
 *   master   4 when p < 4 (mixed precision keeps an fp32 copy), else 0
 *   moments  8 (Adam: two fp32 moments) or 4 (SGD: one fp32 momentum)
 * so mixed-precision Adam holds 2 + 2 + 4 + 8 = 16 B and fp32 Adam 4 + 4 + 8 = 16 B per parameter.
 * ZeRO over the R data-parallel replicas (Rajbhandari et al. 2020): stage 1 divides master +
 * moments by R, stage 2 also the gradients, stage 3 also the weights.
 *
 * Activation recomputation (Korthikanti et al. 2022) is a view of the graph: the ops it
 * recomputes store nothing for backward and run their forward again inside backward.
 *   selective  ops of type "attention" (a fused attention core), "softmax", and "dropout" ops
 *              fed by a softmax: the s x s parts of self-attention (5as^2b per layer)
 *   full       every op inside a repeated block (a dotted name with a numeric part, such as
 *              layers.7.mlp.fc1, is in block "layers.7"): it stores only what enters its block
 *              from outside (the layer input, 2sbh per layer), and backward rematerialises one
 *              block at a time, so one block's activations are reserved on top. */
#ifndef PF_TRAINING_H
#define PF_TRAINING_H

#include "planner/ir/graph.h"

#include <stddef.h>

typedef enum { PF_OPTIMIZER_ADAM, PF_OPTIMIZER_SGD } pf_training_optimizer_t;
typedef enum {
    PF_RECOMPUTE_NONE,
    PF_RECOMPUTE_SELECTIVE,
    PF_RECOMPUTE_FULL
} pf_training_recompute_t;
/* Pipeline schedules (the simulator runs them; memory counts their micro-batches in flight). */
typedef enum {
    PF_SCHEDULE_1F1B,       /* S - s - 1 warm-up forwards on stage s, then one forward, one
                               backward (PipeDream-flush) */
    PF_SCHEDULE_GPIPE,      /* all forwards, then all backwards (newest micro-batch first) */
    PF_SCHEDULE_EAGER_1F1B, /* [CrossMesh] Sec. 4: 2 (S - s - 1) warm-up forwards, so that a transfer
                               overlaps the next forward instead of stalling its consumer */
    PF_SCHEDULE_SIGNAL      /* [CrossMesh] "Signal Send/Recv": communication free, data dependencies
                               kept; the best of the three orders above, a lower bound on each
                               (a bound to compare with, not a schedule to run) */
} pf_training_schedule_t;
#define PF_SCHEDULE_COUNT 4

typedef struct {
    int precision_bytes;      /* 2 (bf16, fp16) or 4 (fp32); default 2 */
    pf_training_optimizer_t optimizer; /* default Adam */
    int zero;                 /* ZeRO stage 0..3; default 0 */
    pf_training_recompute_t recompute; /* default none */
    pf_training_schedule_t schedule;   /* default 1F1B */
    int sequence_parallel;    /* 1: with T > 1, the ops tensor parallelism leaves replicated store
                                 1/T of their activations (planner/tp/seqpar.h); default 0 */
} pf_training_t;

void pf_training_init(pf_training_t *t);
/* PF_OK, or PF_EINPUT naming the field (precision, zero). */
int pf_training_check(const pf_training_t *t, char *err, size_t errlen);

const char *pf_training_precision_name(int precision_bytes); /* "bf16" for 2, "fp32" for 4 */
const char *pf_training_optimizer_name(pf_training_optimizer_t o);
const char *pf_training_recompute_name(pf_training_recompute_t r);
/* Per-stage recomputation in runs, "selective x3+none x1", or one name when every stage of n
 * agrees; level(ctx, s) gives stage s's. */
void pf_training_recompute_runs(int n, pf_training_recompute_t (*level)(const void *ctx, int s),
                                const void *ctx, char *buf, size_t len);
const char *
pf_training_schedule_name(pf_training_schedule_t s); /* "1f1b", "gpipe", "eager-1f1b", "signal" */
/* Parse names as printed; -1 when unknown ("fp16" parses to 2). */
int pf_training_precision_parse(const char *s);
int pf_training_optimizer_parse(const char *s);
int pf_training_recompute_parse(const char *s);
int pf_training_schedule_parse(const char *s);

/* Parameter state, per byte of parameters (param_bytes), on one device of a stage whose
 * data-parallel group has `replicas` members. */
typedef struct {
    double weights, grads, master, moments;
} pf_training_state_split_t;
void pf_training_state_split(const pf_training_t *t, int replicas, pf_training_state_split_t *out);
/* weights + grads + master + moments of the split. */
double pf_training_state_factor(const pf_training_t *t, int replicas);

/* Micro-batches whose activations stage s (0-based) of S holds at its peak: min(MB, S - s)
 * under 1F1B (it starts S - s forwards before its first backward), min(MB, 2 (S - s) - 1) under
 * eager-1F1B, MB under GPipe; the signal bound counts as 1F1B. */
int pf_training_inflight(const pf_training_t *t, int stages, int microbatches, int s);

/* Megatron-LM's gradient buckets: max(40e6, 1e6 x R) parameters of precision_bytes each per
 * bucket (its DDP default), so ceil(rank_bytes / that) buckets, at least 1, at most 1 << 16. */
int pf_training_grad_buckets(double rank_bytes, int replicas, int precision_bytes);

/* ZeRO-3 [ZeRO]: every micro-batch gathers a stage's parameters (over its data-parallel group)
 * before its forward and again before its backward; prefetched layer by layer, a gather hides
 * behind that micro-batch's compute (forward + recomputation + backward), and what does not hide,
 * max(0, 2 gather - compute), is exposed. The gradients' reduce-scatter is the usual reduction
 * (an all-reduce's volume). The simulator and the block search's analytic model both use it. */
double pf_training_zero3_exposed_ms(double gather_ms, double compute_ms);

/* Tensor-parallel communication overlap (Megatron-LM's --tp-comm-overlap, with sequence
 * parallelism; [Wang23]): each all-gather before a column-parallel GEMM and each reduce-scatter
 * after a row-parallel one (forward, and their mirrors in backward) is decomposed along the
 * ring: the GEMM runs as t chunks of G / t and the collective as t - 1 transfers of C / (t - 1),
 * each transfer beside one chunk. One chunk has no transfer beside it (an all-gather's first
 * chunk is the device's own, a reduce-scatter's first partial has nothing to send yet), so a
 * pair takes G / t + (t - 1) max(G / t, C / (t - 1)) and the collective adds
 *   exposed = max(0, C - (t - 1)/t x G)
 * to the GEMM: nothing while each transfer is shorter than a chunk. comm_ms and gemm_ms may be
 * the sums over a layer's pairs (exact while every pair is hidden, as in the transformer layers
 * planfarm generates at t <= 8 on NVLink; otherwise a lower bound, the max being convex). The
 * chunked GEMMs' own efficiency is not re-priced. t <= 1: comm_ms. */
double pf_training_tp_overlap_exposed_ms(double comm_ms, double gemm_ms, int t);

/* Is op v one selective recomputation drops and recomputes (the rule above)? */
int pf_training_selective_op(const pf_graph_t *g, int v);

/* The op's block: length of the prefix of `name` up to its first numeric component ("layers.7"
 * of "layers.7.mlp.fc1"), 0 when the name has none. */
size_t pf_training_block_len(const char *name);
/* qsort_r's comparison of op indices (ints) by the name of their block, graph the pf_graph_t:
 * ops of one block compare equal. */
int pf_training_cmp_block_name(const void *a, const void *b, void *graph);

/* The graph as training runs it under t's recomputation: same ops, ids, names and edges;
 * mem_fwd_bytes = what each op stores for backward per micro-batch, bwd_ms += the forward it
 * recomputes. *reserve_bytes gets the transient that recomputation adds to every stage (full:
 * the largest block's activations; 0 otherwise). With recompute none, a plain copy. */
pf_graph_t *pf_training_view(const pf_graph_t *g, const pf_training_t *t, double *reserve_bytes,
                             char *err, size_t errlen);

#endif
