/* model: the model kinds, their options and published presets, and what a valid model is;
 * model_build.c builds the graphs (costs defined in model.h). */
#include "planner/inputs/model.h"
#include "planner/core/util.h"
#include "planner/ir/arch.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[PF_MODEL_NKINDS] = {"gpt",   "bert", "resnet", "unet",
                                                        "llama", "moe",  "vit"};

int pf_model_parse_kind(const char *s, pf_model_kind_t *kind)
{
    for (int k = 0; s && k < PF_MODEL_NKINDS; k++) {
        if (!strcmp(s, kind_names[k])) {
            *kind = (pf_model_kind_t)k;
            return PF_OK;
        }
    }
    return PF_EINPUT;
}

const char *pf_model_kind_name(pf_model_kind_t kind)
{
    return (unsigned)kind < PF_MODEL_NKINDS ? kind_names[kind] : "?";
}

bool pf_model_is_transformer(pf_model_kind_t k)
{
    return k == PF_MODEL_GPT || k == PF_MODEL_BERT || k == PF_MODEL_LLAMA || k == PF_MODEL_MOE ||
           k == PF_MODEL_VIT;
}

/* Llama-style blocks: RMSNorm, rotary, grouped-query attention, SwiGLU, no biases. */
bool pf_model_is_llama_like(pf_model_kind_t k)
{
    return k == PF_MODEL_LLAMA || k == PF_MODEL_MOE;
}

static const struct {
    pf_model_kind_t kind;
    const char *name;
    int layers, hidden, heads, kv_heads, ffn, vocab, seq, image, patch;
} presets[] = {
    /* Llama 2 (Touvron et al. 2023, Table 1 and the released configs) */
    {PF_MODEL_LLAMA, "7b", 32, 4096, 32, 32, 11008, 32000, 4096, 0, 0},
    {PF_MODEL_LLAMA, "13b", 40, 5120, 40, 40, 13824, 32000, 4096, 0, 0},
    {PF_MODEL_LLAMA, "70b", 80, 8192, 64, 8, 28672, 32000, 4096, 0, 0},
    /* Llama 3.1 405B (Dubey et al. 2024, Table 3; pre-training sequence 8192) */
    {PF_MODEL_LLAMA, "405b", 126, 16384, 128, 8, 53248, 128256, 8192, 0, 0},
    /* ViT (Dosovitskiy et al. 2021, Table 1): B/16, L/16, H/14 at 224 x 224 */
    {PF_MODEL_VIT, "b", 12, 768, 12, 0, 3072, 0, 0, 224, 16},
    {PF_MODEL_VIT, "l", 24, 1024, 16, 0, 4096, 0, 0, 224, 16},
    {PF_MODEL_VIT, "h", 32, 1280, 16, 0, 5120, 0, 0, 224, 14},
};
#define NPRESETS (int)(sizeof presets / sizeof presets[0])

int pf_model_apply_preset(pf_model_opts_t *o, const char *preset, char *err, size_t errlen)
{
    char names[64] = "";
    for (int i = 0; i < NPRESETS; i++) {
        if (presets[i].kind != o->kind)
            continue;
        if (preset && !strcmp(preset, presets[i].name)) {
            o->layers = presets[i].layers, o->hidden = presets[i].hidden;
            o->heads = presets[i].heads, o->kv_heads = presets[i].kv_heads;
            o->ffn = presets[i].ffn;
            if (o->kind == PF_MODEL_VIT)
                o->image = presets[i].image, o->patch = presets[i].patch;
            else
                o->vocab = presets[i].vocab, o->seq = presets[i].seq;
            return PF_OK;
        }
        size_t len = strlen(names);
        snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", presets[i].name);
    }
    if (!*names)
        return pf_fail(err, errlen, PF_EINPUT, "preset: %s has no presets (llama and vit do)",
                       pf_model_kind_name(o->kind));
    return pf_fail(err, errlen, PF_EINPUT, "preset: '%s' is not a %s preset (%s)",
                   preset ? preset : "(null)", pf_model_kind_name(o->kind), names);
}

void pf_model_opts_init(pf_model_opts_t *o, pf_model_kind_t kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->precision_bytes = 2;
    o->tflops = PF_MODEL_DEFAULT_TFLOPS;
    o->efficiency = PF_MODEL_DEFAULT_EFFICIENCY;
    o->hbm_gbps = PF_MODEL_DEFAULT_HBM_GBPS;
    switch (kind) {
    case PF_MODEL_GPT: /* GPT-2 XL (Radford et al. 2019) */
        o->layers = 48, o->hidden = 1600, o->heads = 25, o->seq = 1024, o->vocab = 50257;
        o->microbatch = 4;
        break;
    case PF_MODEL_BERT: /* BERT-Large (Devlin et al. 2018); micro-batch 8 as Parmesan Table VIII */
        o->layers = 24, o->hidden = 1024, o->heads = 16, o->seq = 512, o->vocab = 30522;
        o->microbatch = 8;
        break;
    case PF_MODEL_RESNET: /* micro-batch 64 as Parmesan Table VII */
        o->depth = 50, o->image = 224, o->classes = 1000, o->microbatch = 64;
        break;
    case PF_MODEL_UNET:
        o->levels = 4, o->channels = 64, o->image = 256, o->classes = 2, o->microbatch = 8;
        break;
    case PF_MODEL_LLAMA:
        pf_model_apply_preset(o, "7b", NULL, 0);
        o->microbatch = 1;
        break;
    case PF_MODEL_MOE: /* Mixtral 8x7B (Jiang et al. 2024, Table 1) */
        o->layers = 32, o->hidden = 4096, o->heads = 32, o->kv_heads = 8, o->ffn = 14336;
        o->vocab = 32000, o->seq = 4096, o->experts = 8, o->top_k = 2, o->microbatch = 1;
        break;
    case PF_MODEL_VIT:
        pf_model_apply_preset(o, "b", NULL, 0);
        o->classes = 1000, o->microbatch = 32;
        break;
    }
}

/* ---- validation ---- */

/* The product of n factors, or -1 past PF_MODEL_MAX_ELEMENTS (or int64 overflow). */
static int64_t checked_product(int n, const int64_t *f)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (f[i] < 0 || __builtin_mul_overflow(p, f[i], &p) || p > PF_MODEL_MAX_ELEMENTS)
            return -1;
    }
    return p;
}

#define PRODUCT(...)                                                                             \
    checked_product((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),                \
                    (int64_t[]){__VA_ARGS__})

static int too_large(char *err, size_t errlen, const char *fields, const char *what)
{
    return pf_fail(err, errlen, PF_EINPUT, "%s: %s would hold more than 2^53 elements", fields,
                   what);
}

static int check_positive(char *err, size_t errlen, const char *field, long long v)
{
    if (v <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "%s: must be positive (got %lld)", field, v);
    return PF_OK;
}

int64_t pf_model_ffn(const pf_model_opts_t *o)
{
    return o->ffn ? o->ffn : 4 * (int64_t)o->hidden;
}

int64_t pf_model_head_dim(const pf_model_opts_t *o)
{
    return o->head_dim > 0 ? o->head_dim : o->hidden / o->heads;
}

int64_t pf_model_attn_width(const pf_model_opts_t *o)
{
    return (int64_t)o->heads * pf_model_head_dim(o);
}

int64_t pf_model_kv_heads(const pf_model_opts_t *o)
{
    return pf_model_is_llama_like(o->kind) && o->kv_heads ? o->kv_heads : o->heads;
}

/* Tokens per sample: ViT's patches + the class token, else --seq. Valid after the checks. */
int64_t pf_model_seq(const pf_model_opts_t *o)
{
    if (o->kind != PF_MODEL_VIT)
        return o->seq;
    int64_t side = o->image / o->patch;
    return side * side + 1;
}

static int validate_vit_image(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_positive(err, errlen, "image", o->image)) ||
        (rc = check_positive(err, errlen, "patch", o->patch)) ||
        (rc = check_positive(err, errlen, "classes", o->classes)))
        return rc;
    if (o->image % o->patch)
        return pf_fail(err, errlen, PF_EINPUT, "patch: image %d is not divisible by patch %d",
                       o->image, o->patch);
    if (PRODUCT(o->microbatch, PF_MODEL_VIT_IN_CHANNELS, o->image, o->image) < 0)
        return too_large(err, errlen, "microbatch x image^2", "the image");
    if (PRODUCT(o->hidden, o->classes) < 0 || PRODUCT(o->microbatch, o->classes) < 0)
        return too_large(err, errlen, "hidden x classes", "the head");
    return PF_OK;
}

static int validate_moe(const pf_model_opts_t *o, char *err, size_t errlen)
{
    if (o->experts < 1 || o->experts > PF_MODEL_MAX_EXPERTS)
        return pf_fail(err, errlen, PF_EINPUT, "experts: %d is not in [1, %d]", o->experts,
                       PF_MODEL_MAX_EXPERTS);
    if (o->top_k < 1 || o->top_k > o->experts)
        return pf_fail(err, errlen, PF_EINPUT, "top_k: %d is not in [1, %d experts]", o->top_k,
                       o->experts);
    /* Balanced routing: every expert gets tokens x top_k / experts rows. */
    int64_t routed = (int64_t)o->microbatch * o->seq * o->top_k;
    if (routed % o->experts)
        return pf_fail(err, errlen, PF_EINPUT,
                       "experts: %lld routed tokens (microbatch x seq x top-k) are not "
                       "divisible by %d experts",
                       (long long)routed, o->experts);
    if (PRODUCT(o->experts, o->hidden, pf_model_ffn(o)) < 0)
        return too_large(err, errlen, "experts x hidden x ffn", "a layer's experts");
    return PF_OK;
}

static int validate_transformer(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc, vit = o->kind == PF_MODEL_VIT;
    if ((rc = check_positive(err, errlen, "layers", o->layers)) ||
        (rc = check_positive(err, errlen, "hidden", o->hidden)) ||
        (rc = check_positive(err, errlen, "heads", o->heads)))
        return rc;
    if (vit && (rc = validate_vit_image(o, err, errlen)))
        return rc;
    if (!vit && ((rc = check_positive(err, errlen, "seq", o->seq)) ||
                 (rc = check_positive(err, errlen, "vocab", o->vocab))))
        return rc;
    if (o->ffn < 0)
        return pf_fail(err, errlen, PF_EINPUT, "ffn: must be positive (got %d)", o->ffn);
    if (o->layers > PF_MODEL_MAX_LAYERS)
        return pf_fail(err, errlen, PF_EINPUT, "layers: %d is more than %d", o->layers,
                       PF_MODEL_MAX_LAYERS);
    if (o->head_dim < 0)
        return pf_fail(err, errlen, PF_EINPUT, "head_dim: must be positive (got %d)",
                       o->head_dim);
    if (!o->head_dim && o->hidden % o->heads)
        return pf_fail(err, errlen, PF_EINPUT, "heads: hidden %d is not divisible by %d heads "
                       "(give --head-dim)", o->hidden, o->heads);
    if (pf_model_is_llama_like(o->kind) && (o->kv_heads < 0 || (o->kv_heads && o->heads % o->kv_heads)))
        return pf_fail(err, errlen, PF_EINPUT,
                       "kv_heads: %d does not divide %d heads (grouped-query attention)",
                       o->kv_heads, o->heads);
    int64_t b = o->microbatch, s = pf_model_seq(o), h = o->hidden, a = o->heads, f = pf_model_ffn(o),
            v = vit ? o->classes : o->vocab;
    if (PRODUCT(b, s, h) < 0 || PRODUCT(b, s, f) < 0)
        return too_large(err, errlen, "microbatch x seq x hidden/ffn", "an activation");
    if (PRODUCT(b, s, a, o->head_dim) < 0)
        return too_large(err, errlen, "microbatch x seq x heads x head_dim", "q, k or v");
    if (PRODUCT(h, a, o->head_dim) < 0)
        return too_large(err, errlen, "hidden x heads x head_dim", "a weight");
    if (PRODUCT(b, a, s, s) < 0)
        return too_large(err, errlen, "microbatch x heads x seq^2", "the attention scores");
    if (PRODUCT(b, s, v) < 0)
        return too_large(err, errlen, "microbatch x seq x vocab", "the logits");
    if (PRODUCT(h, f) < 0 || PRODUCT(v + s + 2, h) < 0)
        return too_large(err, errlen, "hidden x ffn/vocab", "a weight");
    if (o->kind == PF_MODEL_MOE)
        return validate_moe(o, err, errlen);
    return PF_OK;
}
static int validate_resnet(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc;
    if (o->depth != 18 && o->depth != 34 && o->depth != 50 && o->depth != 101 &&
        o->depth != 152)
        return pf_fail(err, errlen, PF_EINPUT,
                       "depth: %d is not one of 18, 34, 50, 101, 152", o->depth);
    if ((rc = check_positive(err, errlen, "image", o->image)) ||
        (rc = check_positive(err, errlen, "classes", o->classes)))
        return rc;
    /* Every activation has at most 2048 channels on at most (image + 1)^2 pixels. */
    int64_t side = (int64_t)o->image + 1;
    if (PRODUCT(o->microbatch, 2048, side, side) < 0)
        return too_large(err, errlen, "microbatch x image^2", "an activation");
    if (PRODUCT(2049, o->classes) < 0 || PRODUCT(o->microbatch, o->classes) < 0)
        return too_large(err, errlen, "classes", "the classifier");
    return PF_OK;
}

static int validate_unet(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_positive(err, errlen, "levels", o->levels)) ||
        (rc = check_positive(err, errlen, "channels", o->channels)) ||
        (rc = check_positive(err, errlen, "image", o->image)) ||
        (rc = check_positive(err, errlen, "classes", o->classes)))
        return rc;
    if (o->levels > PF_MODEL_MAX_LEVELS)
        return pf_fail(err, errlen, PF_EINPUT, "levels: %d is more than %d", o->levels,
                       PF_MODEL_MAX_LEVELS);
    int64_t scale = (int64_t)1 << o->levels;
    if (o->image % scale)
        return pf_fail(err, errlen, PF_EINPUT,
                       "image: %d is not divisible by 2^levels = %lld (each level halves it)",
                       o->image, (long long)scale);
    int64_t deepest = PRODUCT(o->channels, scale); /* channels at the bottom */
    if (deepest < 0 || PRODUCT(deepest, deepest, 9) < 0)
        return too_large(err, errlen, "channels x 2^levels", "the deepest conv's weight");
    /* The largest activation is dec.0.concat: 2 x channels on the full image. */
    int64_t c = (int64_t)o->channels > o->classes ? o->channels : o->classes;
    if (PRODUCT(o->microbatch, 2, c, o->image, o->image) < 0 ||
        PRODUCT(o->microbatch, PF_MODEL_UNET_IN_CHANNELS, o->image, o->image) < 0)
        return too_large(err, errlen, "microbatch x channels x image^2", "an activation");
    return PF_OK;
}

int pf_model_validate(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_positive(err, errlen, "microbatch", o->microbatch)))
        return rc;
    if (o->precision_bytes != 2 && o->precision_bytes != 4)
        return pf_fail(err, errlen, PF_EINPUT,
                       "precision_bytes: %d bytes is none of fp16, bf16 (2) or fp32 (4)",
                       o->precision_bytes);
    if (!isfinite(o->tflops) || o->tflops <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "tflops: must be positive (got %g)", o->tflops);
    if (!isfinite(o->efficiency) || o->efficiency <= 0 || o->efficiency > 1)
        return pf_fail(err, errlen, PF_EINPUT, "efficiency: must lie in (0, 1] (got %g)",
                       o->efficiency);
    if (!isfinite(o->hbm_gbps) || o->hbm_gbps <= 0)
        return pf_fail(err, errlen, PF_EINPUT, "hbm_gbps: must be positive (got %g)",
                       o->hbm_gbps);
    if (pf_model_is_transformer(o->kind))
        return validate_transformer(o, err, errlen);
    if (o->kind == PF_MODEL_RESNET)
        return validate_resnet(o, err, errlen);
    if (o->kind == PF_MODEL_UNET)
        return validate_unet(o, err, errlen);
    return pf_fail(err, errlen, PF_EINPUT, "unknown model kind %d", (int)o->kind);
}

bool pf_model_op_expert(const pf_op_t *op)
{
    return op && op->type && op->name && !strcmp(op->type, "linear") &&
           strstr(op->name, ".experts.") != NULL;
}

/* The generators' blocks (model_build.c): GPT, BERT and ViT are the original transformer
 * (LayerNorm, GELU, learned positions, biased linears); llama and moe the Llama block (RMSNorm,
 * SwiGLU, rotary, no biases, Touvron et al. 2023). The language models' head keeps its own
 * h x V matrix (model_build.c: untied), so a framework must not tie it to the embedding or
 * its memory would differ from the plan's. */
int pf_model_arch(const pf_model_opts_t *o, pf_arch_t *a)
{
    pf_arch_init(a);
    if (!pf_model_is_transformer(o->kind))
        return PF_EINPUT;
    int llama = pf_model_is_llama_like(o->kind);
    snprintf(a->kind, sizeof a->kind, "%s", pf_model_kind_name(o->kind));
    a->layers = o->layers, a->hidden = o->hidden, a->heads = o->heads;
    a->kv_heads = pf_model_kv_heads(o), a->ffn_hidden = pf_model_ffn(o), a->seq = pf_model_seq(o);
    a->head_dim = pf_model_attn_width(o) != o->hidden ? pf_model_head_dim(o) : 0;
    snprintf(a->activation, sizeof a->activation, "%s", llama ? "swiglu" : "gelu");
    snprintf(a->norm, sizeof a->norm, "%s", llama ? "rmsnorm" : "layernorm");
    snprintf(a->positions, sizeof a->positions, "%s", llama ? "rope" : "learned");
    a->bias = !llama;
    if (o->kind != PF_MODEL_VIT)
        a->vocab = o->vocab, a->tied_embeddings = 0;
    if (o->kind == PF_MODEL_MOE)
        a->experts = o->experts, a->top_k = o->top_k;
    return PF_OK;
}
