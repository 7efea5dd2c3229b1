/* models: graph generators with analytic op costs (issue "foundation", item 3).
 *
 * FLOPs from the shapes (2mnk per matmul forward, backward = 2 x forward); time = FLOPs /
 * (tflops x efficiency); memory and parameter bytes from the shapes and the precision; names are
 * hierarchical ("layers.3.mlp.fc1") so TAP can find repeated blocks. */
#ifndef PF_MODELS_H
#define PF_MODELS_H

#include "planner/graph.h"

typedef enum { PF_MODEL_GPT, PF_MODEL_BERT, PF_MODEL_RESNET, PF_MODEL_UNET } pf_model_kind_t;

typedef struct {
    pf_model_kind_t kind;
    const char *name;         /* graph name; NULL = derived from the kind and shape */
    int microbatch;           /* samples per micro-batch */
    int precision_bytes;      /* 2 = fp16/bf16, 4 = fp32 */
    double tflops;            /* device peak used for op times */
    double efficiency;        /* fraction of peak a kernel reaches */
    double hbm_gbps;          /* device memory bandwidth, for memory-bound ops (roofline) */
    /* transformers */
    int layers, hidden, heads, seq, vocab, ffn;
    /* resnet: depth 18, 50, 101 or 152; unet: levels, base channels; both: image side */
    int depth, image, levels, channels, classes;
} pf_model_opts_t;

/* Defaults for a kind (BERT-Large shapes for bert, ResNet-50 for resnet, ...). */
int pf_model_parse_kind(const char *s, pf_model_kind_t *kind); /* PF_OK / PF_EINPUT */
void pf_model_opts_init(pf_model_opts_t *o, pf_model_kind_t kind);
/* PF_EINPUT for impossible shapes (hidden not divisible by heads, ...). */
int pf_model_build(const pf_model_opts_t *o, pf_graph_t **out, char *err, size_t errlen);

#endif
