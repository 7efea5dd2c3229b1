/* export_megatron: Megatron-LM's model flags from the graph's "model" metadata
 * (planner/ir/arch.h), so that a launch needs only data, tokenizer and optimizer settings added,
 * and the flags that split the layers over the stages. Split from export.c (which writes the
 * other parallel flags) to keep that file under 900 lines.
 *
 * Names from NVIDIA/Megatron-LM megatron/training/arguments.py (tests/data/megatron_args.txt
 * lists them and says where): _add_network_size_args --hidden-size, --ffn-hidden-size,
 * --num-attention-heads, --group-query-attention, --num-query-groups, --max-position-embeddings,
 * --position-embedding-type (learned_absolute | rope), --normalization (LayerNorm | RMSNorm),
 * --swiglu, --untie-embeddings-and-output-weights, --bert-no-binary-head; _add_data_args
 * --seq-length; _add_training_args --disable-bias-linear; _add_regularization_args
 * --attention-dropout, --hidden-dropout; _add_moe_args --num-experts, --moe-router-topk. */
#ifndef PF_EXPORT_MEGATRON_H
#define PF_EXPORT_MEGATRON_H

#include "planner/ir/arch.h"

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

#endif
