/* blockcost: the analytic step time and memory of one Megatron-LM style configuration of a
 * graph made of repeated blocks (blocks.h), in the terms of Narayanan et al. 2021
 * ([Narayanan21]) and Korthikanti et al. 2022 ([Korthikanti22]).
 *
 * A candidate is (t, p, d, micro-batch size b, virtual stages v, recompute none | selective |
 * full, sequence parallelism, tensor-parallel communication overlap, ZeRO 0..3, layers of the
 * first, middle and last stages). Ranks are
 * laid out as Megatron-LM does: t innermost (t consecutive devices of one host), then d, then p,
 * so a data-parallel group strides by t and pipeline neighbours are t x d devices apart.
 *
 * Per part (prologue, one block, epilogue) at (t, b, sp, recompute), per micro-batch of b samples:
 *   GEMMs at the graph's shapes scaled to b samples, split by t as blocks.h says: forward
 *     gemm(m, n, k), backward gemm(m, k, n) + gemm(k, n, m) (data and weight gradients);
 *   memory-bound ops: bytes scaled to b, / t when split (every one of them under sequence
 *     parallelism, [Korthikanti22] §4), backward = 2 x forward (the generators' rule);
 *   tensor-parallel collectives (t > 1): the part's forward all-reduces (after row-parallel
 *     linears: 2 per transformer layer) and backward ones (before column-parallel linears: 2),
 *     each of b s h elements; under sequence parallelism each becomes a reduce-scatter + an
 *     all-gather of the same tensor ([Korthikanti22] §4, sequence parallelism);
 *   recomputation adds forward work to backward: full = the part's forward with its
 *     collectives, selective = its attention core ([Korthikanti22] §5);
 *   stored activations: whole tensors / (sp ? t : 1) + split ones / t (+ the core / t without
 *     recomputation): s b h (34 + 5 a s / h) at t = 1, s b h (10 + 24/t + 5 a s/(h t)) with t,
 *     s b h (34/t + 5 a s/(h t)) with sp ([Korthikanti22] Table 2); full recomputation keeps the
 *     part's input (2 s b h, / t with sp) and reserves one part's working set once per stage;
 *   parameters per GPU: whole ones + split ones / t.
 *   with tensor-parallel communication overlap (tpo, under sequence parallelism), the forward
 *     collectives take pf_training_tp_overlap_exposed_ms of the column- and row-parallel GEMMs'
 *     forward, the backward ones of their backward ([Wang23]); recomputation's are not hidden.
 * A stage's time per micro-batch: its layers' forward + backward + recomputation + collectives,
 * the prologue on the first and the epilogue on the last, and with p > 1 two p2p transfers
 * (activation forward, its gradient backward) of the block's output, / t with sp (Narayanan
 * et al.'s scatter/gather optimisation, [Narayanan21] §4); with v virtual stages 2 v of them,
 * each overlapped with a chunk's compute as Megatron-LM's interleaved schedule runs them
 * (overlap_p2p_comm): only what a chunk's forward (backward) of 1/v of the stage does not
 * cover adds to the stage.
 * Step (m = global batch / (d b) micro-batches): (m + (p - 1) / v) x max stage time
 * ([Narayanan21] §2.2: bubble (p - 1) / m under 1F1B, (p - 1) / (v m) interleaved), plus the
 * data-parallel gradient reduction (ZeRO 0: an all-reduce; >= 1: reduce-scatter + all-gather
 * of the weights, [ZeRO]) less what the last micro-batch's backward on the stage hides, plus
 * ZeRO-3's per-micro-batch weight all-gathers (forward and backward) not hidden by the stage's
 * compute, plus the optimizer step (memory-bound: gradients read, master and moments read and
 * written, weights written, on 1/d of them with ZeRO >= 1).
 * Memory of a stage: parameter state (training.h, ZeRO over d) + micro-batches in flight x
 * stored activations + the recomputation reserve. In flight on stage s: min(m, p - s) under
 * 1F1B; interleaved, Megatron-LM's warm-up holds (p - s - 1) x 2 + (v - 1) x p + 1 model chunks
 * of L / (p v) layers on stage s, which on stage 0 is L (1 + (p - 1)/(p v)) layers' worth
 * ([Korthikanti22] §4, pipeline parallelism). */
#ifndef PF_BLOCKCOST_H
#define PF_BLOCKCOST_H

#include "planner/ir/cluster.h"
#include "planner/ir/collective.h"
#include "planner/ir/devmodel.h"
#include "planner/ir/training.h"
#include "planner/partition/blocks.h"

#include <stdint.h>

/* Devices first, first + stride, ..., first + (size - 1) x stride. */
typedef struct {
    int first, size, stride;
} pf_blockcost_group_t;

/* Every device and network price the model needs, behind one interface, so that a device
 * model (GEMM efficiency by shape) and a collective model (ring, tree, NVLS, hierarchical)
 * can replace the roofline below without touching the model. Collectives take the bytes of
 * the whole tensor each rank holds (an all-reduce's buffer, an all-gather's output). */
typedef struct {
    void *ctx;
    double (*gemm_ms)(void *ctx, int64_t m, int64_t n, int64_t k, int64_t batch);
    double (*memory_ms)(void *ctx, double bytes);
    double (*allreduce_ms)(void *ctx, pf_blockcost_group_t g, double bytes);
    double (*reduce_scatter_ms)(void *ctx, pf_blockcost_group_t g, double bytes);
    double (*all_gather_ms)(void *ctx, pf_blockcost_group_t g, double bytes);
    double (*p2p_ms)(void *ctx, int src, int dst, double bytes);
} pf_blockcost_env_t;

/* The collective model's group (collective.h) of each pf_blockcost_group_t priced, cached:
 * both price sets below price collectives on it, and hold it as their first member (blockcost.c's
 * collective prices read it through env->ctx). */
#define PF_BLOCKCOST_CACHE 64
typedef struct {
    const pf_cluster_t *cluster;
    pf_collective_algo_t algo; /* ring for the roofline, the cheapest for the measured prices */
    struct {
        pf_blockcost_group_t key;
        pf_collective_group_t g;
    } cache[PF_BLOCKCOST_CACHE];
    int ncache, next;
} pf_blockcost_groups_t;

/* The default prices: a roofline at fixed efficiency from the cluster's device 0 (tflops, and
 * an HBM bandwidth), ring collectives (collective.h's ring over the group's hosts and links;
 * [DistPar] A.3: all-reduce 2 (n - 1)/n |T| / bw, reduce-scatter and all-gather
 * (n - 1)/n |T| / bw, plus one latency per step), p2p by the postal model. */
#define PF_BLOCKCOST_GEMM_EFFICIENCY 0.7
#define PF_BLOCKCOST_HBM_GBPS 1555.0 /* A100 40GB's HBM2 (NVIDIA datasheet) */
typedef struct {
    pf_blockcost_groups_t groups;
    double tflops, efficiency, hbm_gbps;
} pf_blockcost_roofline_t;

/* Fills r and env (env->ctx = r; r must outlive env; one per thread: the cache is not
 * shared). tflops 0 on device 0 falls back to 125. */
void pf_blockcost_roofline_init(pf_blockcost_roofline_t *r, const pf_cluster_t *c,
                                pf_blockcost_env_t *env);

/* The measured prices: GEMMs and memory-bound ops by a device model (devmodel.h: the GEMM
 * efficiency table at each shape, the achievable HBM bandwidth and a kernel's launch cost),
 * collectives by the collective model (collective.h: the cheapest of ring, tree, NVLS and
 * hierarchical, as NCCL's tuner picks, over the group's hosts and links from the cluster; no
 * NVLS, as the search's other phases assume), p2p by the postal model. */
typedef struct {
    pf_blockcost_groups_t groups;
    const pf_devmodel_t *dm;
    pf_prec_t prec;
} pf_blockcost_priced_t;

/* As the roofline's init; precision_bytes 2 prices bf16, 4 fp32. */
void pf_blockcost_priced_init(pf_blockcost_priced_t *r, const pf_cluster_t *c,
                              const pf_devmodel_t *dm, int precision_bytes,
                              pf_blockcost_env_t *env);

/* The most micro-batches per step a candidate may run: the later phases' (search_partition.c),
 * so a candidate they could not plan is never ranked, and a step's count fits an int. */
#define PF_BLOCKCOST_MAX_MICROBATCHES (1 << 20)

struct pf_blockcost_cand;
struct pf_blockcost_part;
struct pf_blockcpep;

typedef struct pf_blockcost_problem {
    const pf_blocks_t *blocks;
    const pf_blockcost_env_t *env;
    pf_training_t training; /* precision and optimizer; zero, recompute, schedule unused */
    int64_t global_batch;   /* samples per step */
    int ngpus, gpus_per_host;
    double mem_bytes; /* per device */
    /* context and expert parallelism (blockcpep.h sets them; NULL: none): part's hook rewrites
     * what pf_blockcost_part priced, check's refuses a candidate (not PF_OK) */
    struct pf_blockcpep *cpep;
    void (*cpep_part)(const struct pf_blockcost_problem *pr, const pf_blocks_part_t *part, int t,
                      int b, int sp, pf_training_recompute_t rc, struct pf_blockcost_part *out);
    int (*cpep_check)(const struct pf_blockcpep *x, const struct pf_blockcost_cand *c);
    /* blockenum: a candidate whose step is at or above it is of no use to the caller (a better
     * pool of another (C, E) holds k faster: blockcpep.c), so it is neither kept nor looked
     * for; 0: none */
    double step_cap_ms;
} pf_blockcost_problem_t;

typedef struct pf_blockcost_cand {
    int t, p, d, b, v, sp, zero;
    int tpo; /* tensor-parallel communication overlap (needs sp and t > 1; training.h) */
    pf_training_recompute_t recompute; /* rc_auto: the heaviest of its stages' */
    /* --recompute auto (pf_blockcost_split_auto): each stage the lightest recomputation whose
     * memory fits; stage 0 rc_first, stage p - 1 rc_last, middle stage s (1..p-2) full for
     * s <= rc_mid_full, selective for s <= rc_mid_full + rc_mid_selective, else none (a middle
     * stage holds fewer micro-batches in flight the later it is) */
    int rc_auto;
    pf_training_recompute_t rc_first, rc_last;
    int rc_mid_full, rc_mid_selective;
    int first_layers, mid_layers, last_layers; /* v > 1: pf_blockcost_interleave_split */
    int cp, ep; /* context and expert parallelism (blockcpep.h); 0 or 1: none */
} pf_blockcost_cand_t;

/* One part priced at (t, b, sp, recompute), per micro-batch. */
typedef struct pf_blockcost_part {
    double fwd_ms, bwd_ms, recompute_ms, tp_fwd_ms, tp_bwd_ms;
    double act_bytes, reserve_bytes; /* stored per micro-batch; full recomputation's reserve */
    double param_bytes;              /* per GPU */
    double p2p_bytes;                /* its output, per micro-batch, as sent */
    /* the column- and row-parallel GEMMs (forward; backward) the collectives pair with */
    double tp_gemm_fwd_ms, tp_gemm_bwd_ms;
} pf_blockcost_part_t;

typedef struct {
    int microbatches;
    double stage_ms[3]; /* first, middle, last stage per micro-batch */
    double stage_max_ms, pipeline_ms, dp_exposed_ms, zero3_exposed_ms, optimizer_ms, step_ms;
    double mem_bytes[3], mem_max_bytes;
    pf_training_recompute_t recompute[3]; /* of the first, middle and last stage */
    int fits;
    /* pf_blockcost_split only: memory did not change the layer counts (the fastest counts
     * fit), so a candidate that only trades time for memory cannot beat this one */
    int unconstrained;
} pf_blockcost_eval_t;

/* the 3 parts: 0 prologue, 1 block, 2 epilogue */
void pf_blockcost_part(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                       int b, int sp, pf_training_recompute_t rc, pf_blockcost_part_t *out);
void pf_blockcost_parts(const pf_blockcost_problem_t *pr, int t, int b, int sp,
                        pf_training_recompute_t rc, pf_blockcost_part_t out[3]);
/* A candidate whose layer counts are set. PF_OK, or PF_EINPUT when it is not well formed
 * (t p d != GPUs, b does not divide the replica's batch, layers do not add up to L, v > 1
 * without an interleaved split (pf_blockcost_interleave_split) or with m % p). */
int pf_blockcost_eval(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                      const pf_blockcost_part_t parts[3], pf_blockcost_eval_t *ev);
/* --recompute auto. set[r] = pf_blockcost_parts at recomputation r (none, selective, full). */
void pf_blockcost_parts_all(const pf_blockcost_problem_t *pr, int t, int b, int sp,
                            pf_blockcost_part_t set[3][3]);
/* As pf_blockcost_eval, each stage at the lightest recomputation whose memory fits (the one of
 * least memory when none does): ev->recompute says which; the step is the slowest stage's as
 * ever. c->rc_auto is not read. */
int pf_blockcost_eval_auto(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                           const pf_blockcost_part_t set[3][3], pf_blockcost_eval_t *ev);
/* As pf_blockcost_split with pf_blockcost_eval_auto; sets c->rc_auto = 1, rc_first, rc_last,
 * the middle stages' (rc_mid_full, rc_mid_selective) and c->recompute (the heaviest). */
int pf_blockcost_split_auto(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                            const pf_blockcost_part_t set[3][3], pf_blockcost_eval_t *ev);
/* Stage s's recomputation (0 <= s < c->p): c->recompute unless c->rc_auto. */
pf_training_recompute_t pf_blockcost_stage_recompute(const pf_blockcost_cand_t *c, int s);
/* The memory of stage s (0..p-1) of c, its layers `layers`, its parts at one recomputation: parameter state + in
 * flight x activations + reserve (the model above; for the tests' brute force). */
double pf_blockcost_stage_mem_bytes(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                                    const pf_blockcost_part_t parts[3], int s, int layers);
/* Its time per micro-batch (the model above). */
double pf_blockcost_stage_ms(const pf_blockcost_problem_t *pr, const pf_blockcost_cand_t *c,
                             const pf_blockcost_part_t parts[3], int s, int layers);

/* Interleaving's layer counts (v >= 2 model chunks per stage, p >= 2): 0 when L % (p v) = 0
 * (every stage L / p, every chunk L / (p v)); 1 when instead (L + 2) % (p v) = 0: the embedding
 * and the output head count as one layer each, as Llama 3 ran 126 layers on p 16 ([Llama3]
 * 3.3.2; Megatron-LM's --account-for-embedding-in-pipeline-split and
 * --account-for-loss-in-pipeline-split): every chunk holds (L + 2) / (p v) places, the first
 * chunk of stage 0 and the last chunk of stage p - 1 one layer fewer, so the first and the last
 * stage hold (L + 2) / p - 1 layers and the middle ones (L + 2) / p; -1 when neither divides. */
int pf_blockcost_interleave_split(int L, int p, int v, int *first, int *mid, int *last);
/* Is v (model chunks per stage) one a candidate of p stages and m micro-batches may have: 1, or
 * v > 1 with an interleaved split of the L layers and m % p = 0 (Megatron-LM's interleaved
 * schedule runs the micro-batches in groups of p). */
int pf_blockcost_v_ok(int L, int p, int v, int m);
/* Layers of model chunk `chunk` (0..v-1) on pipeline rank `rank` (0..p-1) under that split
 * (stage rank's chunk c is the (c p + rank)-th of the model); -1 when there is none. */
int pf_blockcost_chunk_layers(int L, int p, int v, int rank, int chunk);
/* Sets c's layer counts: v > 1 gives pf_blockcost_interleave_split's (PF_EINPUT without one);
 * else the first and last stages may hold fewer layers than the middle ones (which hold the
 * same), chosen to minimise the step time among those that fit memory (the one of least memory when none fits). Fills ev. */
int pf_blockcost_split(const pf_blockcost_problem_t *pr, pf_blockcost_cand_t *c,
                       const pf_blockcost_part_t parts[3], pf_blockcost_eval_t *ev);

#endif
