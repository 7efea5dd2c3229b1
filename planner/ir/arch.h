/* arch: what model a graph is, the graph file's optional "model" object (DESIGN.md "Files",
 * graph metadata). An operator graph has the costs of every op but not the architecture a
 * training framework builds it from: `planfarm export megatron` needs the layer count, the
 * widths, the heads and the block's kind (activation, norm, positions) to write Megatron-LM's
 * model flags, so that only data, tokenizer and optimizer settings are left to the user. The
 * generators (planfarm model) write it; an imported or traced graph may not have it.
 *
 * Every field is optional: 0 (numbers), "" (strings) or -1 (flags) = the file does not say. The
 * strings are checked against short closed lists, so that an exporter can map each value to a
 * framework's flag without guessing. */
#ifndef PF_ARCH_H
#define PF_ARCH_H

#include "planner/core/json.h"

#include <stddef.h>
#include <stdint.h>

#define PF_ARCH_NAME_MAX 32

typedef struct pf_arch pf_arch_t;
struct pf_arch {
    char kind[PF_ARCH_NAME_MAX]; /* required: "gpt", "bert", "llama", "moe", "vit", or a tool's */
    int64_t layers;              /* transformer blocks */
    int64_t hidden;              /* hidden size */
    int64_t heads;               /* attention (query) heads */
    int64_t kv_heads;            /* key/value heads: < heads is grouped-query attention */
    int64_t head_dim;            /* each head's size where it is not hidden / heads; 0: it is */
    int64_t ffn_hidden;          /* MLP inner size (per expert for MoE) */
    int64_t seq;                 /* tokens per sample the graph was built for */
    int64_t vocab;               /* vocabulary (language models) */
    int64_t experts, top_k;      /* MoE: experts per layer, experts per token */
    char activation[PF_ARCH_NAME_MAX]; /* "gelu" or "swiglu" */
    char norm[PF_ARCH_NAME_MAX];       /* "layernorm" or "rmsnorm" */
    char positions[PF_ARCH_NAME_MAX];  /* "learned" or "rope" */
    int tied_embeddings;         /* 1: the head shares the embedding table; 0: its own; -1 */
    int bias;                    /* 1: linears have biases; 0: none (Llama); -1 */
};

/* Nothing said: kind "", numbers 0, flags -1. */
void pf_arch_init(pf_arch_t *a);
/* Reads the "model" object at `path` ("graph.model"). PF_EINPUT with "<path>.<key>: ..." for a
 * missing kind, a wrong type, a number that is not a positive integer, a string not on its list,
 * kv_heads that do not divide heads or exceed them, hidden not divisible by heads (without a
 * head_dim), top_k > experts.
 * Unknown keys are ignored (as everywhere in the graph). */
int pf_arch_from_json(json_t *obj, const char *path, pf_arch_t *a, char *err, size_t errlen);
/* Writes the object (only what is said), one line. */
void pf_arch_write(const pf_arch_t *a, pf_json_writer_t *w);

#endif
