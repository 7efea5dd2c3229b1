/* blockcpep: context parallelism C and expert parallelism E in the block-level search (issue 22;
 * planner/inputs/cpep.h says what each does and moves).
 *
 * The analytic model (blockcost.h) prices a CP candidate as the same model with every sequence
 * cut into C sub-sequences: a "sample" is s / C tokens, the global batch is C x the sequences,
 * and the data-parallel degree d' = d x C. Then, with Megatron-LM's rank order (t innermost, then
 * CP, then the rest of DP, then p: --context-parallel-size sits between TP and DP), every rule of
 * blockcost holds as it is: m = global / (d b) micro-batches, the gradient reduction (and ZeRO's
 * sharding) over the d x C devices of stride t as Megatron-LM does, pipeline neighbours t d C
 * apart. What changes per micro-batch, through the hook at the end of pf_blockcost_part:
 *   every part's times, stored activations and p2p bytes / C (each device runs s / C tokens),
 *     its GEMMs priced at the s / C shapes (a device model's efficiency falls with them, as the
 *     per-device graph's re-pricing has it);
 *   a block's attention adds the K/V ring: (C - 1) chunks of the device's K and V per layer
 *     forward (a ring over the C devices of the CP group, devices t apart: the collective
 *     model's ring all-gather of C chunks, which is exactly those C - 1 steps), twice that
 *     backward; it overlaps the attention core's compute of the same pass, so what exceeds the
 *     core is exposed; recomputation (selective or full) runs the forward's ring again;
 *   a block's MoE layers ([GShard]; E > 1) add 2 all-to-alls forward (dispatch, combine) and 2
 *     backward over the E devices t x C apart (EP inside DP, Megatron-LM's order), each of the
 *     device's tokens x top-k x hidden (tokens / t under sequence parallelism, which Megatron-LM
 *     requires for MoE with t > 1: a candidate without it is not well formed), priced by the
 *     collective model (all-to-all: direct, in and across hosts); full recomputation runs the
 *     forward's pair again;
 *   the expert weights (Megatron-LM's expert tensor parallelism = t: split by t as the block's
 *     other linears) / E in the parameter state.
 * Not modelled: the expert gradients' reduction over d C / E devices instead of d C (a ring's time
 * hardly depends on the group's size), imbalance of routing. */
#ifndef PF_BLOCKCPEP_H
#define PF_BLOCKCPEP_H

#include "planner/inputs/cpep.h"
#include "planner/partition/blockenum.h"

#include <stddef.h>

#define PF_BLOCKCPEP_CACHE 16

/* A candidate with C or E > 1 ranks as if its step were this much longer: what the model leaves
 * out costs it time (the mapping places a CP or EP group's replicas without knowing they talk
 * every layer, the ring's per-block kernels run below the whole attention's efficiency). Seen
 * on the 1T GPT (128 layers, seq 2048) on 3,072 A100: cp 2 ranked 5% ahead of the best cp 1
 * and simulated 21% behind it (bench/RESULTS.md). */
#define PF_BLOCKCPEP_MARGIN 0.10

/* The rank the merged pool orders by: the step, x (1 + PF_BLOCKCPEP_MARGIN) with C or E > 1. */
double pf_blockcpep_rank_ms(const pf_blockenum_item_t *it);

/* One (C, E) of the search, its facts and its collective groups (cached per t; one per thread). */
typedef struct pf_blockcpep {
    pf_cpep_facts_t f; /* of one block, at the graph's micro-batch b0 */
    int b0, C, E;
    const pf_cluster_t *cluster;
    struct {
        int t;
        pf_collective_group_t ring, a2a;
    } cache[PF_BLOCKCPEP_CACHE];
    int ncache;
} pf_blockcpep_t;

/* x for (C, E) on cluster c, f the facts of one block (pf_cpep_facts of its first instance) at
 * micro-batch b0. */
void pf_blockcpep_init(pf_blockcpep_t *x, const pf_cpep_facts_t *f, int b0, int C, int E,
                       const pf_cluster_t *c);

/* The hook of pf_blockcost_part (pr->cpep set): out, priced at (t, b, sp, rc) for whole
 * sequences, becomes the part's per-device cost under x's C and E (above). */
void pf_blockcpep_part(const pf_blockcost_problem_t *pr, const pf_blocks_part_t *part, int t,
                       int b, int sp, pf_training_recompute_t rc, pf_blockcost_part_t *out);

/* The hook of pf_blockcost_eval: PF_OK when candidate c (d = d x C, as the model sees it) is
 * well formed under x: C divides d, E divides d / C, sequence parallelism with E > 1 and t > 1;
 * else PF_EINPUT. */
int pf_blockcpep_check(const pf_blockcpep_t *x, const pf_blockcost_cand_t *c);

/* The per-layer pieces at (t, b) under x: K/V bytes one device sends forward, the ring's time
 * forward, the bytes of one all-to-all (a device's buffer) and its time. For tests and docs. */
typedef struct {
    double ring_fwd_bytes, ring_fwd_ms;
    double a2a_bytes, a2a_ms;
} pf_blockcpep_comm_t;
void pf_blockcpep_comm(pf_blockcpep_t *x, int t, int b, int sp, pf_blockcpep_comm_t *out);

/* pf_blockenum_run over every (C, E) as well: C dividing the GPUs with the sequence divisible
 * by 2C (pf_cpep_cp_ok), E dividing the experts (MoE graphs only), fixed ones only (fix_cp,
 * fix_ep > 0). Each (C, E) runs blockenum on the problem above (C x the global batch, the
 * hooks); the best k of all are merged, fastest first by rank (the step, + PF_BLOCKCPEP_MARGIN
 * with C or E > 1; ties: smaller C, then E). Candidates in
 * out carry cp, ep and the true d. C = E = 1 is blockenum's run unchanged. Errors as
 * pf_blockenum_run's (the C = E = 1 run's message when nothing fits anywhere). */
int pf_blockcpep_run(const pf_blockcost_problem_t *pr, const pf_cpep_facts_t *f, int b0,
                     const pf_cluster_t *c, const pf_blockenum_fix_t *fix, int fix_cp, int fix_ep,
                     int k, int prune, pf_blockenum_item_t *out, int *nout,
                     pf_blockenum_stats_t *stats, char *err, size_t errlen);

/* pf_blockenum_describe, then " cp C" and " ep E" when above 1. */
void pf_blockcpep_describe(const pf_blockcost_cand_t *c, char *buf, size_t len);

#endif
