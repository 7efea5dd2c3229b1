/* models: graph generators with analytic op costs (issue "foundation", item 3).
 *
 * Every op gets, from its shapes (b = microbatch, p = precision bytes):
 *   FLOPs      forward: 2mnk per matmul; a conv is the im2col matmul 2 x (b Ho Wo) x Cout x
 *              (Cin k k); a transposed 2x2/2 conv 2 x (b Ho Wo) x Cout x Cin. Bias adds are not
 *              counted. Memory-bound ops count per output element: add 1, relu 1, softmax 5,
 *              layernorm 8, batchnorm 8, gelu 8, maxpool k*k; global avgpool 1 per input
 *              element; embedding and concat 0.
 *   fwd_ms     compute-bound ops (linear, matmul, conv):  FLOPs / (tflops x 1e12 x efficiency)
 *              memory-bound ops (all others), a roofline: max(that, moved bytes / hbm_gbps),
 *              moved = inputs read + output written + parameters read (an embedding reads one
 *              row per token from each table instead of the whole table).
 *   bwd_ms     2 x fwd_ms for every op.
 *   param_bytes   parameter elements x p: linear = in x out + out (bias); conv = Cout Cin k k
 *              (+ Cout for the biased U-Net convs; ResNet convs have none); layernorm and
 *              batchnorm = 2C (scale, shift; running statistics are buffers, not counted).
 *              `weight` is the weight tensor's shape ([in, out] for a linear, [Cout, Cin, k, k]
 *              for a conv, [2, C] for a norm); a linear's bias is in param_bytes, not in `weight`.
 *   mem_fwd_bytes = output bytes + the input bytes the op keeps for its backward (linear,
 *              matmul, conv, embedding, layernorm, batchnorm, gelu, maxpool keep their inputs;
 *              add, relu, softmax, concat, avgpool keep nothing more: their backward needs only
 *              the output or nothing).
 *   mem_bwd_bytes = gradient of the output + gradients of the inputs produced by other ops
 *              (= output bytes + bytes of the producers' outputs; graph inputs such as the image
 *              or the token ids get no gradient). Weight gradients are parameter state (eq. 14's
 *              opt_factor), not counted here.
 *   edge bytes = the source op's output tensor bytes (token ids are int64: 8 bytes each).
 * Ops are added in a topological order with ids 0..n-1; names are hierarchical
 * ("layers.3.mlp.fc1", "layer2.1.conv2", "enc.2.conv1") so TAP can find repeated blocks.
 * Output is deterministic: the same options give the same graph, bit for bit. */
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
    /* transformers; ffn 0 = 4 x hidden */
    int layers, hidden, heads, seq, vocab, ffn;
    /* resnet: depth 18, 34, 50, 101 or 152; unet: levels, base channels; both: image side */
    int depth, image, levels, channels, classes;
} pf_model_opts_t;

/* Device defaults for every kind: V100-like (125 TFLOPs fp16 tensor-core peak, 50 % of it
 * reached, 900 GB/s HBM2), fp16. */
#define PF_MODEL_DEFAULT_TFLOPS 125.0
#define PF_MODEL_DEFAULT_EFFICIENCY 0.5
#define PF_MODEL_DEFAULT_HBM_GBPS 900.0
#define PF_MODEL_MAX_LAYERS 10000
#define PF_MODEL_MAX_LEVELS 30
/* No tensor or weight may hold more elements than this (doubles count them exactly). */
#define PF_MODEL_MAX_ELEMENTS (1LL << 53)
#define PF_MODEL_UNET_IN_CHANNELS 3

/* "gpt", "bert", "resnet", "unet" -> kind. PF_OK / PF_EINPUT */
int pf_model_parse_kind(const char *s, pf_model_kind_t *kind);
const char *pf_model_kind_name(pf_model_kind_t kind);
/* Defaults for a kind:
 *   gpt    GPT-2 XL: 48 layers, hidden 1600, 25 heads, seq 1024, vocab 50257, microbatch 4
 *   bert   BERT-Large: 24 layers, hidden 1024, 16 heads, seq 512, vocab 30522, microbatch 8
 *   resnet ResNet-50, image 224, 1000 classes, microbatch 64 (Parmesan Table VII)
 *   unet   4 levels, 64 base channels, image 256, 2 classes, microbatch 8
 * plus the device defaults above and fp16. */
void pf_model_opts_init(pf_model_opts_t *o, pf_model_kind_t kind);
/* Validate and build a finalized graph. PF_EINPUT for impossible shapes (hidden not divisible by
 * heads, a depth not in the list, zero sizes, tensors past PF_MODEL_MAX_ELEMENTS); the message
 * names the command-line flag ("--heads: hidden 1000 is not divisible by 16 heads"). PF_ERR when
 * out of memory. */
int pf_model_build(const pf_model_opts_t *o, pf_graph_t **out, char *err, size_t errlen);

#endif
