/* export_megatron: Megatron-LM's model flags from the graph's "model" metadata
 * (planner/ir/arch.h), so that a launch needs only data, tokenizer and optimizer settings added,
 * and the flags that split the layers over the stages. Split from export.c (which writes the
 * other parallel flags) to keep that file under 900 lines.
 *
 * Names from NVIDIA/Megatron-LM megatron/training/arguments.py (tests/data/megatron_args.txt
 * lists them and says where): _add_network_size_args --hidden-size, --ffn-hidden-size,
 * --num-attention-heads, --kv-channels, --group-query-attention, --num-query-groups,
 * --max-position-embeddings,
 * --position-embedding-type (learned_absolute | rope), --normalization (LayerNorm | RMSNorm),
 * --swiglu, --untie-embeddings-and-output-weights, --bert-no-binary-head; _add_data_args
 * --seq-length; _add_training_args --disable-bias-linear; _add_regularization_args
 * --attention-dropout, --hidden-dropout; _add_moe_args --num-experts, --moe-router-topk. */
#ifndef PF_EXPORT_MEGATRON_H
#define PF_EXPORT_MEGATRON_H

#include "planner/ir/arch.h"
#include "planner/ir/training.h"

#include <stddef.h>
#include <stdio.h>

/* What Megatron-LM's validate_args and TransformerConfig refuse for this model at tensor-parallel
 * size T over `layers` blocks: heads (and query groups) not divisible by T, the metadata's layer
 * count other than the plan's blocks. PF_EINPUT with the reason, PF_OK when it runs (or a is
 * NULL: nothing known to check). */
int pf_export_megatron_check(const pf_arch_t *a, int layers, int T, char *err, size_t errlen);
/* The bash array MEGATRON_MODEL_ARGS: the shape and block flags of `a`, with a comment per
 * choice; a NULL `a` (an imported or traced graph) gives an empty array and a comment naming the
 * flags the user must add. --num-layers is the parallel array's (it comes from the plan). */
void pf_export_megatron_model(const pf_arch_t *a, FILE *f);

/* A plan's layers over its pipeline stages, for the flags that split them. */
typedef struct {
    int S;                    /* stages */
    int layers;               /* L, the plan's blocks */
    const int *stage_layers;  /* per stage */
    int v;                    /* virtual stages per stage (1: none) */
} pf_export_split_t;
/* The split's flags (inside MEGATRON_PARALLEL_ARGS): nothing when even; uneven ends by
 * --decoder-first/last-pipeline-num-layers; unequal middle stages by
 * --pipeline-model-parallel-layout; interleaving by --num-layers-per-virtual-pipeline-stage
 * (equal stages, or with --account-for-embedding/loss-in-pipeline-split the ends one layer
 * short). PF_EINPUT when Megatron-LM cannot run the split (unequal interleaved stages). */
int pf_export_megatron_layers(const pf_export_split_t *x, FILE *f, char *err, size_t errlen);

/* Megatron-LM's recomputation for stages that recompute rc[s] over stage_layers[s] blocks (v
 * model chunks each). Its flags hold for every stage (no per-stage granularity), so a plan whose
 * stages differ (`--recompute auto`) has no exact form; the nearest at least as memory-safe one:
 *   - none and selective only: --recompute-granularity selective everywhere;
 *   - some full: --recompute-granularity full --recompute-method block --recompute-num-layers N,
 *     N the most blocks per model chunk of any stage that recomputes: each stage recomputes its
 *     first min(N, its blocks) blocks, so every stage that recomputed still does it at least
 *     fully for those blocks and a stage the plan left lighter only recomputes more (more time,
 *     less memory than planned).
 * granularity none (no flag) / selective / full; block_layers 0: the uniform form (full: method
 * uniform, 1 layer per group); exact 1 when the stages agree. */
typedef struct {
    pf_training_recompute_t granularity;
    int block_layers;
    int exact;
} pf_export_recompute_t;
void pf_export_megatron_recompute(int S, const pf_training_recompute_t *rc,
                                  const int *stage_layers, int v, pf_export_recompute_t *out);

#endif
