/* model: graph generators with analytic op costs (model.c: kinds, options, validation;
 * model_build.c: the graphs).
 *
 * Every op gets, from its shapes (b = microbatch, p = precision bytes):
 *   FLOPs      forward: 2mnk per matmul; a conv is the im2col matmul 2 x (b Ho Wo) x Cout x
 *              (Cin k k); a transposed 2x2/2 conv 2 x (b Ho Wo) x Cout x Cin. Bias adds are not
 *              counted. Memory-bound ops count per output element: add 1, relu 1, mul 1,
 *              dropout 2 (compare with a random draw, scale), rotary 3 (x cos + rot(x) sin),
 *              softmax 5, silu 5, layernorm 8, rmsnorm 6, batchnorm 8, gelu 8, maxpool k*k;
 *              global avgpool 1 per input element; embedding, concat, MoE dispatch and
 *              combine 0 (data movement; combine's weighted sum is k FLOPs per output element).
 *   fwd_ms     compute-bound ops (linear, matmul, conv):  FLOPs / (tflops x 1e12 x efficiency)
 *              memory-bound ops (all others), a roofline: max(that, moved bytes / hbm_gbps),
 *              moved = inputs read + output written + parameters read (an embedding reads one
 *              row per token from each table instead of the whole table; a dropout also
 *              writes its 1-byte mask; an MoE expert reads only the tokens routed to it).
 *   bwd_ms     2 x fwd_ms for every op.
 *   work       (graph.h pf_op_work_t; DESIGN.md "Files") what the times above were made of, for a
 *              device model to re-price: fwd_flops = the FLOPs above; bwd_flops = 2 x fwd_flops
 *              for linear, matmul and conv (the gradients of both operands: dX and dW, or both
 *              activations of scores and context; Narayanan et al. 2021's 2x) and for the norms
 *              (statistics again, then the scale and shift gradients), 1 x for every other op
 *              (one pass over the same elements); bytes_read = inputs read + parameters (an
 *              embedding: its token ids and one row per token of each table; an MoE dispatch:
 *              each token once per expert it goes to + the routing probabilities), bytes_written
 *              = output + dropout mask, so that read + written is the roofline's moved bytes;
 *              gemm (linear, matmul, conv only; 2 m n k batch = fwd_flops): a linear m = token
 *              rows, k = in, n = out, batch 1; scores m = n = s, k = d (the head size: h / heads
 *              unless --head-dim), batch = b x heads; context m = s, k = s, n = d, batch = b x
 *              heads (GQA shares K and V heads,
 *              not FLOPs); a conv its im2col product m = b Ho Wo, n = Cout, k = Cin k k (the
 *              transposed 2x2/2 conv: k = Cin). Attention is not one fused op here.
 *   param_bytes   parameter elements x p: linear = in x out + out (bias); conv = Cout Cin k k
 *              (+ Cout for the biased U-Net convs; ResNet convs have none); layernorm and
 *              batchnorm = 2C (scale, shift; running statistics are buffers, not counted);
 *              rmsnorm = C (scale only). Llama-style linears (llama, moe) have no bias.
 *              `weight` is the weight tensor's shape ([in, out] for a linear, [Cout, Cin, k, k]
 *              for a conv, [2, C] for a layernorm or batchnorm, [C] for an rmsnorm); a linear's
 *              bias is in param_bytes, not in `weight`.
 *   mem_fwd_bytes = the activation bytes the op saves for its backward. Transformer kinds (gpt,
 *              bert, llama, moe, vit) attribute them as Korthikanti et al. 2022 ("Reducing
 *              activation recomputation in large transformer models", Sec. 4.1) do: every tensor
 *              is saved once, by the op whose backward reads it:
 *                ln1, ln2                input 2sbh each (layernorm / rmsnorm)
 *                attn.q                  the Q/K/V input 2sbh (k and v read the same tensor and
 *                                        save nothing: one fused QKV input, attributed to q)
 *                attn.scores             Q and K, 4sbh (GQA: K is 2sbh x kv_heads / heads; with
 *                                        --head-dim, Q and K are heads x d wide, not h)
 *                attn.softmax            its output 2as^2b
 *                attn.dropout            its mask as^2b (1 byte per element) and its output
 *                                        2as^2b, which attn.context's backward reads
 *                attn.context            V 2sbh (the probabilities are saved by the dropout, or by
 *                                        the softmax where there is no dropout: llama, moe)
 *                attn.out                input 2sbh;   attn.out_dropout  mask sbh
 *                mlp.fc1                 input 2sbh;   mlp.gelu  input 8sbh (2sbf)
 *                mlp.fc2                 input 8sbh;   mlp.dropout  mask sbh
 *                residual adds           nothing
 *              One GPT/BERT layer with f = 4h sums to sbh(34 + 5as/h) bytes at 2-byte activations:
 *              attention 11sbh + 5as^2b, MLP 19sbh, layernorms 4sbh. Under t-way tensor
 *              parallelism (Megatron split) the layernorm inputs, attn.q, mlp.fc1 and the two
 *              residual-path dropout masks (10sbh) stay whole and every other op's bytes divide
 *              by t: sbh(10 + 24/t + 5as/(ht)). The ops selective recomputation drops (5as^2b)
 *              are exactly those pf_training_selective_op() (training.h) recomputes: the
 *              "softmax" and the "dropout" fed by it (layers.N.attn.dropout). The activation bytes are 2 per element for
 *              fp16/bf16 and 4 for fp32 (a mask is 1 byte either way), so fp32 doubles all but
 *              the masks. Outside the layers: embed saves its token ids, final_ln its input, a
 *              head its input, and gpt/llama/moe/vit's last linear also its logits (the loss,
 *              not an op here, reads them in its backward).
 *              Conv kinds (resnet, unet) keep the older, larger count: output bytes + the input
 *              bytes of ops whose backward reads their input (conv, batchnorm, maxpool, linear).
 *   mem_bwd_bytes = gradient of the output + gradients of the inputs produced by other ops
 *              (= output bytes + bytes of the producers' outputs; graph inputs such as the image
 *              or the token ids get no gradient), for every kind. Weight gradients are parameter
 *              state (eq. 14's opt_factor), not counted here.
 *   edge bytes = the source op's output tensor bytes (token ids are int64: 8 bytes each).
 * Ops are added in a topological order with ids 0..n-1; names are hierarchical
 * ("layers.3.mlp.fc1", "layer2.1.conv2", "enc.2.conv1") so TAP can find repeated blocks.
 * Output is deterministic: the same options give the same graph, bit for bit. */
#ifndef PF_MODEL_H
#define PF_MODEL_H

#include "planner/ir/graph.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    PF_MODEL_GPT,
    PF_MODEL_BERT,
    PF_MODEL_RESNET,
    PF_MODEL_UNET,
    PF_MODEL_LLAMA,
    PF_MODEL_MOE,
    PF_MODEL_VIT
} pf_model_kind_t;
#define PF_MODEL_NKINDS 7

typedef struct pf_model_opts {
    pf_model_kind_t kind;
    const char *name;         /* graph name; NULL = derived from the kind and shape */
    int microbatch;           /* samples per micro-batch */
    int precision_bytes;      /* 2 = fp16/bf16, 4 = fp32 */
    double tflops;            /* device peak used for op times */
    double efficiency;        /* fraction of peak a kernel reaches */
    double hbm_gbps;          /* device memory bandwidth, for memory-bound ops (roofline) */
    /* transformers; ffn 0 = 4 x hidden; kv_heads (llama, moe) 0 = heads (no grouping) */
    int layers, hidden, heads, seq, vocab, ffn, kv_heads;
    int head_dim; /* each head's size; 0 = hidden / heads (which must then divide) */
    /* moe: experts per layer and experts per token */
    int experts, top_k;
    /* resnet: depth 18, 34, 50, 101 or 152; unet: levels, base channels; resnet, unet, vit:
     * image side; vit: patch side (seq = (image / patch)^2 + 1, the class token) */
    int depth, image, levels, channels, classes, patch;
} pf_model_opts_t;

/* Device defaults for every kind: V100-like (125 TFLOPs fp16 tensor-core peak, 50 % of it
 * reached, 900 GB/s HBM2), fp16. */
#define PF_MODEL_DEFAULT_TFLOPS 125.0
#define PF_MODEL_DEFAULT_EFFICIENCY 0.5
#define PF_MODEL_DEFAULT_HBM_GBPS 900.0
#define PF_MODEL_MAX_LAYERS 10000
#define PF_MODEL_MAX_LEVELS 30
#define PF_MODEL_MAX_EXPERTS 1024
#define PF_MODEL_VIT_IN_CHANNELS 3
/* No tensor or weight may hold more elements than this (doubles count them exactly). */
#define PF_MODEL_MAX_ELEMENTS (1LL << 53)
#define PF_MODEL_UNET_IN_CHANNELS 3

/* "gpt", "bert", "resnet", "unet", "llama", "moe", "vit" -> kind. PF_OK / PF_EINPUT */
int pf_model_parse_kind(const char *s, pf_model_kind_t *kind);
const char *pf_model_kind_name(pf_model_kind_t kind);
/* Defaults for a kind:
 *   gpt    GPT-2 XL: 48 layers, hidden 1600, 25 heads, seq 1024, vocab 50257, microbatch 4
 *   bert   BERT-Large: 24 layers, hidden 1024, 16 heads, seq 512, vocab 30522, microbatch 8
 *   resnet ResNet-50, image 224, 1000 classes, microbatch 64 (Parmesan Table VII)
 *   unet   4 levels, 64 base channels, image 256, 2 classes, microbatch 8
 *   llama  preset 7b, microbatch 1
 *   moe    Mixtral 8x7B (Jiang et al. 2024): llama-7b-like attention with 8 kv heads, 32 layers,
 *          hidden 4096, 32 heads, ffn 14336 per expert, 8 experts, top-2, seq 4096, vocab
 *          32000, microbatch 1 (46.7B parameters, 12.9B active per token)
 *   vit    preset b, microbatch 32
 * plus the device defaults above and fp16. */
void pf_model_opts_init(pf_model_opts_t *o, pf_model_kind_t kind);
/* Published shapes (sets layers, hidden, heads, kv_heads, ffn, vocab, seq or image/patch):
 *   llama  7b, 13b (Llama 2, Touvron et al. 2023: 32/40 layers, hidden 4096/5120, 32/40 heads,
 *          ffn 11008/13824, vocab 32000, seq 4096), 70b (80 layers, 8192, 64 heads, 8 kv heads,
 *          ffn 28672), 405b (Llama 3.1, Dubey et al. 2024: 126 layers, 16384, 128 heads, 8 kv
 *          heads, ffn 53248, vocab 128256, seq 8192)
 *   vit    b, l, h (Dosovitskiy et al. 2021 Table 1: ViT-B/16 12 layers, 768, 12 heads, MLP
 *          3072; L/16 24, 1024, 16, 4096; H/14 32, 1280, 16, 5120; image 224, 1000 classes)
 * PF_EINPUT (message names --preset and the choices) for another kind or an unknown name. */
int pf_model_apply_preset(pf_model_opts_t *o, const char *preset, char *err, size_t errlen);
/* Checks the options as pf_model_build() does (its PF_EINPUT messages). */
int pf_model_validate(const pf_model_opts_t *o, char *err, size_t errlen);
/* Shape helpers, valid after pf_model_validate(). */
bool pf_model_is_transformer(pf_model_kind_t k);
/* Llama-style blocks: RMSNorm, rotary, grouped-query attention, SwiGLU, no biases. */
bool pf_model_is_llama_like(pf_model_kind_t k);
int64_t pf_model_ffn(const pf_model_opts_t *o);      /* ffn, or 4 x hidden */
int64_t pf_model_kv_heads(const pf_model_opts_t *o); /* kv heads (llama, moe), else heads */
/* Each head's size (--head-dim, else hidden / heads) and the query heads' width, heads x it:
 * what q produces and out reads, which need not be hidden (Gemma; GPT-3 13B as Calculon
 * writes it, 40 heads of 128 in a hidden of 5140; Megatron-LM's --kv-channels). */
int64_t pf_model_head_dim(const pf_model_opts_t *o);
int64_t pf_model_attn_width(const pf_model_opts_t *o);
int64_t pf_model_seq(const pf_model_opts_t *o);      /* tokens per sample (ViT: patches + 1) */

/* The graph's "model" metadata (planner/ir/arch.h) of a transformer kind: its shapes, and
 * activation, norm, positions, biases and untied head as the generator builds them. PF_EINPUT
 * (and `a` says nothing) for resnet and unet. Valid after pf_model_validate(). */
typedef struct pf_arch pf_arch_t;
int pf_model_arch(const pf_model_opts_t *o, pf_arch_t *a);

/* An MoE expert weight: a linear whose name holds ".experts.<e>." (layers.N.moe.experts.E.gate,
 * .up, .down). Each expert sees tokens x top_k / experts rows; expert (or tensor) parallelism
 * may place or shard each expert on its own devices. */
bool pf_model_op_expert(const pf_op_t *op);

#endif
