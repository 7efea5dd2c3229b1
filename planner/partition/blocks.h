/* blocks: a graph made of repeated blocks (a GPT or Llama: embedding, L identical transformer
 * layers, final norm and head) seen as prologue + L blocks + epilogue, each part summarised
 * once: its ops, parameter and activation bytes, the work of its ops and its GEMM list with the
 * Megatron-LM split of each GEMM under tensor parallelism ([Megatron-LM] §3: column-parallel
 * first linear, row-parallel second; attention heads split). The block-level search
 * (blockcost.h, blockenum.h) prices a part once per (t, micro-batch) instead of op by op.
 *
 * The blocks are TAP's largest repeated unit (tap_units.h: PRUNEGRAPH on dotted names,
 * confirmed by a structural hash), so only truly identical layers count; the ops before the
 * first block (in topological order) are the prologue, every other op outside a block the
 * epilogue.
 *
 * The split of every op follows Megatron-LM's propagation: the part's input is whole on every
 * rank; a linear that reads a whole activation is column-parallel (splits n, its output is
 * split); a linear that reads a split one is row-parallel (splits k; an all-reduce makes its
 * output whole); an embedding is vocabulary-parallel (splits its table; an all-reduce makes
 * its output whole); a matmul without weights on split inputs splits its batch (the heads);
 * any other op's output is split when one of its inputs is. An op stores a split tensor for
 * backward when one of its inputs is split, so its mem_fwd_bytes divides by t; the rest (layer
 * norms, the dropouts after row-parallel linears, the inputs of column-parallel linears) is
 * what Korthikanti et al. 2022 ([Korthikanti22] §4, Table 2) call the 10 s b h not parallelised
 * without sequence parallelism. */
#ifndef PF_BLOCKS_H
#define PF_BLOCKS_H

#include "planner/ir/graph.h"

#include <stddef.h>
#include <stdint.h>

typedef struct pf_blocks pf_blocks_t;

typedef enum {
    PF_BLOCKS_WHOLE,  /* replicated on every tensor-parallel rank */
    PF_BLOCKS_COLUMN, /* n / t */
    PF_BLOCKS_ROW,    /* k / t, an all-reduce of its output follows */
    PF_BLOCKS_HEADS,  /* batch / t (attention heads) */
    PF_BLOCKS_VOCAB   /* an embedding's table / t, an all-reduce of its output follows */
} pf_blocks_split_t;

/* One GEMM: `batch` products (m x k) @ (k x n), at the graph's micro-batch. */
typedef struct {
    int op;
    int64_t m, n, k, batch;
    int samples_in_batch; /* 1: the micro-batch's samples are in batch (attention), 0: in m */
    int core;             /* selective recomputation recomputes it (pf_training_selective_op) */
    pf_blocks_split_t split;
} pf_blocks_gemm_t;

/* A memory-bound op: bytes moved at the graph's micro-batch. */
typedef struct {
    int op;
    double bytes;
    int split; /* runs on 1/t of the data (an input is split) */
    int core;
} pf_blocks_memop_t;

typedef struct {
    int nops;
    const int *ops; /* op indices in topological order (a block: its first instance) */
    double param_bytes, param_split_bytes; /* all, and the part that divides by t */
    /* Bytes stored for backward per graph micro-batch (mem_fwd_bytes): whole tensors, split
     * ones, and the split ones selective recomputation drops (the attention core). */
    double act_whole_bytes, act_split_bytes, act_core_bytes;
    double input_bytes;  /* distinct tensors entering the part from outside */
    double output_bytes; /* distinct tensors leaving it (the pipeline's p2p) */
    /* Tensor-parallel all-reduces: forward after row-parallel and vocabulary-parallel ops,
     * backward before column-parallel ones (one per distinct input tensor), bytes summed. */
    int nar_fwd, nar_bwd;
    double ar_fwd_bytes, ar_bwd_bytes;
    int ngemms, nmem;
    const pf_blocks_gemm_t *gemms;
    const pf_blocks_memop_t *mem;
    pf_op_work_t work;     /* the sum of its ops' work (zero where the graph gives none) */
    double fwd_ms, bwd_ms; /* the graph's own sums */
} pf_blocks_part_t;

/* NULL with the reason when the graph has no repeated block of two ops or more (PF_EINPUT:
 * "no repeated blocks") or memory runs out. precision_bytes sizes the bytes a memory-bound op
 * moves when its work does not say (input + output elements). */
pf_blocks_t *pf_blocks_new(const pf_graph_t *g, int precision_bytes, char *err, size_t errlen);
void pf_blocks_destroy(pf_blocks_t **b);

int pf_blocks_count(const pf_blocks_t *b); /* L */
int pf_blocks_microbatch(const pf_blocks_t *b);
const char *pf_blocks_name(const pf_blocks_t *b); /* "layers.#" */
const pf_blocks_part_t *pf_blocks_prologue(const pf_blocks_t *b);
const pf_blocks_part_t *pf_blocks_block(const pf_blocks_t *b); /* one, all are identical */
const pf_blocks_part_t *pf_blocks_epilogue(const pf_blocks_t *b);
/* Op indices of block i (0..L-1) in topological order, NULL out of range. */
const int *pf_blocks_instance(const pf_blocks_t *b, int i, int *nops);
/* The part of op v: -1 prologue, L epilogue, else its block. */
int pf_blocks_of(const pf_blocks_t *b, int v);

#endif
