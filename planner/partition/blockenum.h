/* blockenum: the block-level search's candidate space, enumerated with pruning, the best K by
 * the analytic step time of blockcost.h (issue 22).
 *
 * Space: t dividing the GPUs of a host (and every split dimension of the block: heads, the MLP's
 * width), p dividing GPUs / t with p <= L, d = GPUs / (t p) dividing the global batch, b dividing
 * the replica's batch, sequence parallelism when t > 1, recomputation none | selective | full
 * for every stage when fixed, else (auto) per stage the lightest that fits that stage
 * (pf_blockcost_split_auto: the first stages hold more micro-batches in flight),
 * ZeRO 0..3 (0 only when d = 1; 0 or 1 when p > 1: DeepSpeed refuses ZeRO-2 and -3 with
 * pipeline parallelism, and Megatron-LM's distributed optimizer is ZeRO-1), v = 1 or v > 1 with
 * an interleaved split of the L layers (L % (p v) = 0, or (L + 2) % (p v) = 0 with the embedding
 * and the head each in a layer's place: blockcost.h) and m % p = 0 (Megatron-LM's interleaving
 * requires both), and the layer counts of blockcost's split. Any of these can be
 * fixed.
 *
 * Pruning, each exact under the model:
 *   memory: a (t, p, ZeRO) whose parameter state on an average stage exceeds a device is skipped;
 *     the least memory a b can have (full recomputation, sequence parallelism when t > 1, v = 1,
 *     the highest ZeRO searched) only grows with b (micro-batches in flight x b never shrinks),
 *     so the first b that cannot fit ends the b loop;
 *   time: m x (L / p) x the block's forward + backward (sequence parallelism when t > 1, the
 *     cheaper memory-bound ops; no collective, no recomputation) bounds the step from below:
 *     past the K-th best, the b is skipped;
 *   dominance: recomputation only adds time, so once a fixed recomputation level fits with the
 *     layer counts that memory did not constrain, the heavier levels are skipped (auto needs no
 *     such rule: it evaluates one candidate whose every stage is at its lightest); tensor-parallel
 *     communication overlap (searched with sequence parallelism) never adds time nor memory, so
 *     the candidates without it are skipped.
 * With prune = 0 every candidate is evaluated: the reference the tests hold the pruned search
 * against. */
#ifndef PF_BLOCKENUM_H
#define PF_BLOCKENUM_H

#include "planner/partition/blockcost.h"

#include <stddef.h>

/* 0 (or -1 for sp, zero, recompute) = searched. */
typedef struct {
    int t, p, b, v;
    int sp, zero, recompute;
    int tpo; /* tensor-parallel communication overlap (with sp): -1 searched, 0 off, 1 on */
} pf_blockenum_fix_t;

void pf_blockenum_fix_init(pf_blockenum_fix_t *f); /* everything searched */

typedef struct {
    pf_blockcost_cand_t cand;
    pf_blockcost_eval_t eval;
} pf_blockenum_item_t;

typedef struct {
    long evaluated; /* candidates whose layer counts were searched */
    long skipped;   /* candidates pruned before evaluation */
} pf_blockenum_stats_t;

/* The best k (<= k written to out, fastest first, ties in enumeration order: t, p, b, sp,
 * recompute, v, ZeRO) of the candidates that fit; with pruning, of those no faster candidate
 * dominates (a heavier recomputation of a fitting one is never worth simulating), so the best
 * is the same and the k-th is never faster than without. PF_EINFEASIBLE when none fits ("no configuration of the
 * 96 blocks fits 80 GB per device"), PF_EINPUT when no candidate is well formed. */
int pf_blockenum_run(const pf_blockcost_problem_t *pr, const pf_blockenum_fix_t *fix, int k,
                     int prune, pf_blockenum_item_t *out, int *nout, pf_blockenum_stats_t *stats,
                     char *err, size_t errlen);

/* The stages' recomputation: "full" when every stage has it, else runs in stage order,
 * "full x3+selective x1+none x4" (--recompute auto). */
void pf_blockenum_recompute_describe(const pf_blockcost_cand_t *c, char *buf, size_t len);

/* "t 8 p 8 d 1 b 1 v 1 full sp tpo zero 1 layers 12/12/12" */
void pf_blockenum_describe(const pf_blockcost_cand_t *c, char *buf, size_t len);

#endif
