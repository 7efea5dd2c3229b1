/* models: GPT/BERT, ResNet and U-Net graphs with analytic costs (definitions in models.h). */
#include "planner/models.h"
#include "planner/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A shape literal: SHAPE(b, s, h). The element count of the compound literal gives ndim. */
#define SHAPE(...)                                                                               \
    ((pf_shape_t){(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* FLOPs per output element of the memory-bound ops (models.h). */
#define FLOPS_ADD 1.0
#define FLOPS_RELU 1.0
#define FLOPS_SOFTMAX 5.0   /* max, subtract, exp, sum, divide */
#define FLOPS_NORM 8.0      /* mean, variance, normalise, scale and shift */
#define FLOPS_GELU 8.0      /* tanh approximation */
#define TOKEN_ID_BYTES 8.0  /* int64 token ids */

int pf_model_parse_kind(const char *s, pf_model_kind_t *kind)
{
    static const char *names[] = {"gpt", "bert", "resnet", "unet"};
    for (int k = 0; s && k < 4; k++) {
        if (!strcmp(s, names[k])) {
            *kind = (pf_model_kind_t)k;
            return PF_OK;
        }
    }
    return PF_EINPUT;
}

const char *pf_model_kind_name(pf_model_kind_t kind)
{
    switch (kind) {
    case PF_MODEL_GPT: return "gpt";
    case PF_MODEL_BERT: return "bert";
    case PF_MODEL_RESNET: return "resnet";
    case PF_MODEL_UNET: return "unet";
    }
    return "?";
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

static int64_t ffn_of(const pf_model_opts_t *o)
{
    return o->ffn ? o->ffn : 4 * (int64_t)o->hidden;
}

static int validate_transformer(const pf_model_opts_t *o, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_positive(err, errlen, "layers", o->layers)) ||
        (rc = check_positive(err, errlen, "hidden", o->hidden)) ||
        (rc = check_positive(err, errlen, "heads", o->heads)) ||
        (rc = check_positive(err, errlen, "seq", o->seq)) ||
        (rc = check_positive(err, errlen, "vocab", o->vocab)))
        return rc;
    if (o->ffn < 0)
        return pf_fail(err, errlen, PF_EINPUT, "ffn: must be positive (got %d)", o->ffn);
    if (o->layers > PF_MODEL_MAX_LAYERS)
        return pf_fail(err, errlen, PF_EINPUT, "layers: %d is more than %d", o->layers,
                       PF_MODEL_MAX_LAYERS);
    if (o->hidden % o->heads)
        return pf_fail(err, errlen, PF_EINPUT, "heads: hidden %d is not divisible by %d heads",
                       o->hidden, o->heads);
    int64_t b = o->microbatch, s = o->seq, h = o->hidden, a = o->heads, f = ffn_of(o),
            v = o->vocab;
    if (PRODUCT(b, s, h) < 0 || PRODUCT(b, s, f) < 0)
        return too_large(err, errlen, "microbatch x seq x hidden/ffn", "an activation");
    if (PRODUCT(b, a, s, s) < 0)
        return too_large(err, errlen, "microbatch x heads x seq^2", "the attention scores");
    if (PRODUCT(b, s, v) < 0)
        return too_large(err, errlen, "microbatch x seq x vocab", "the logits");
    if (PRODUCT(h, f) < 0 || PRODUCT(v + s + 2, h) < 0)
        return too_large(err, errlen, "hidden x ffn/vocab", "a weight");
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

static int validate(const pf_model_opts_t *o, char *err, size_t errlen)
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
    switch (o->kind) {
    case PF_MODEL_GPT:
    case PF_MODEL_BERT: return validate_transformer(o, err, errlen);
    case PF_MODEL_RESNET: return validate_resnet(o, err, errlen);
    case PF_MODEL_UNET: return validate_unet(o, err, errlen);
    }
    return pf_fail(err, errlen, PF_EINPUT, "unknown model kind %d", (int)o->kind);
}

/* ---- the builder ---- */

/* Errors are sticky: after the first failure (out of memory) every add returns -1 and the
 * build reports the failure once at the end, so the generators read as straight-line code. */
typedef struct {
    pf_graph_t *g;
    const pf_model_opts_t *o;
    int failed;
    char name[128];
} builder_t;

enum { MEMORY_BOUND = 0, COMPUTE_BOUND = 1 };

typedef struct {
    const char *type;
    int compute_bound;
    int keeps_input;       /* backward reads the input: kept from forward */
    double flops;          /* forward */
    double param_elems;
    double moved_bytes;    /* memory-bound: 0 = inputs + output + parameters */
    double graph_in_bytes; /* input from outside the graph (image, token ids) */
    int ninputs;
    int inputs[2];         /* producer op indices */
    pf_shape_t weight, input, output;
} op_spec_t;

static const char *nm(builder_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *nm(builder_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->name, sizeof b->name, fmt, ap);
    va_end(ap);
    return b->name;
}

static double shape_elems(const pf_shape_t *s)
{
    double n = 1;
    for (int i = 0; i < s->ndim; i++)
        n *= (double)s->dim[i];
    return s->ndim ? n : 0;
}

static double out_bytes(const builder_t *b, int v)
{
    return shape_elems(&pf_graph_op(b->g, v)->output) * b->o->precision_bytes;
}

/* Adds the op with its costs (models.h) and one edge from each producer; returns its index. */
static int add(builder_t *b, const char *name, const op_spec_t *s)
{
    if (b->failed)
        return -1;
    const pf_model_opts_t *o = b->o;
    double p = o->precision_bytes, in_grad_bytes = 0;
    for (int k = 0; k < s->ninputs; k++)
        in_grad_bytes += out_bytes(b, s->inputs[k]);
    double in_bytes = in_grad_bytes + s->graph_in_bytes;
    double out = shape_elems(&s->output) * p, params = s->param_elems * p;
    double flops_ms = s->flops / (o->tflops * 1e12 * o->efficiency) * 1e3;
    double fwd_ms = flops_ms;
    if (s->compute_bound == MEMORY_BOUND) {
        double moved = s->moved_bytes > 0 ? s->moved_bytes : in_bytes + out + params;
        fwd_ms = fmax(flops_ms, pf_bytes_ms(moved, o->hbm_gbps));
    }
    pf_op_t op = {.id = pf_graph_nops(b->g), .name = name, .type = s->type, .fwd_ms = fwd_ms,
                  .bwd_ms = 2 * fwd_ms, .param_bytes = params,
                  .mem_fwd_bytes = out + (s->keeps_input ? in_bytes : 0),
                  .mem_bwd_bytes = out + in_grad_bytes, .weight = s->weight, .input = s->input,
                  .output = s->output};
    int v = pf_graph_add_op(b->g, &op);
    for (int k = 0; v >= 0 && k < s->ninputs; k++)
        if (pf_graph_add_edge(b->g, s->inputs[k], v, out_bytes(b, s->inputs[k])) < 0)
            v = -1;
    if (v < 0)
        b->failed = 1;
    return v;
}

/* Unary helpers. `x` is the producer; its output shape is the op's input shape. */
static const pf_shape_t *shape_of(builder_t *b, int x)
{
    static const pf_shape_t none = {0, {0}};
    return x >= 0 ? &pf_graph_op(b->g, x)->output : &none;
}

/* y = x W + bias over the last dimension: 2 x rows x in x out FLOPs. */
static int linear(builder_t *b, const char *name, int x, int64_t in, int64_t out, int bias)
{
    if (b->failed)
        return -1;
    pf_shape_t os = *shape_of(b, x);
    double rows = shape_elems(&os) / (double)in;
    os.dim[os.ndim - 1] = out;
    op_spec_t s = {.type = "linear", .compute_bound = COMPUTE_BOUND, .keeps_input = 1,
                   .flops = 2 * rows * (double)in * (double)out,
                   .param_elems = (double)in * (double)out + (bias ? (double)out : 0),
                   .ninputs = 1, .inputs = {x}, .weight = SHAPE(in, out),
                   .input = *shape_of(b, x), .output = os};
    return add(b, name, &s);
}

/* Shape-preserving memory-bound op (add takes a second producer y, else y < 0). */
static int pointwise(builder_t *b, const char *name, const char *type, int x, int y,
                     double flops_per_elem, int keeps_input, int64_t norm_channels)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    op_spec_t s = {.type = type, .keeps_input = keeps_input,
                   .flops = flops_per_elem * shape_elems(xs),
                   .param_elems = 2 * (double)norm_channels, .ninputs = y >= 0 ? 2 : 1,
                   .inputs = {x, y}, .input = *xs, .output = *xs};
    if (norm_channels)
        s.weight = SHAPE(2, norm_channels);
    return add(b, name, &s);
}

static int layernorm(builder_t *b, const char *name, int x, int64_t h)
{
    return pointwise(b, name, "layernorm", x, -1, FLOPS_NORM, 1, h);
}

static int add2(builder_t *b, const char *name, int x, int y)
{
    return pointwise(b, name, "add", x, y, FLOPS_ADD, 0, 0);
}

/* ---- GPT / BERT ---- */

/* One block in the order the issue lists (pre-LN): x -> ln1 -> q, k, v -> scores(q, k) ->
 * softmax -> context(softmax, v) -> out -> add(out, x) -> ln2 -> fc1 -> gelu -> fc2 -> add.
 * Forward matmul FLOPs: q, k, v, out 4 x 2bsh^2; scores and context 2 x 2bs^2h; fc1, fc2
 * 2 x 2bshf; = 24bsh^2 + 4bs^2h for f = 4h (the count of Narayanan et al. 2021, Megatron-LM
 * on GPU clusters, before its 3x / 4x for backward and recomputation). The causal mask
 * of gpt changes no cost: dense kernels compute the whole s x s score matrix either way. */
static int transformer_layer(builder_t *b, int i, int x)
{
    const pf_model_opts_t *o = b->o;
    int64_t bs = o->microbatch, s = o->seq, h = o->hidden, a = o->heads, f = ffn_of(o);
    int ln1 = layernorm(b, nm(b, "layers.%d.ln1", i), x, h);
    int q = linear(b, nm(b, "layers.%d.attn.q", i), ln1, h, h, 1);
    int k = linear(b, nm(b, "layers.%d.attn.k", i), ln1, h, h, 1);
    int v = linear(b, nm(b, "layers.%d.attn.v", i), ln1, h, h, 1);
    /* per head: (s x d) x (d x s), d = h / a, over b x a heads = 2bs^2h */
    op_spec_t sc = {.type = "matmul", .compute_bound = COMPUTE_BOUND, .keeps_input = 1,
                    .flops = 2.0 * bs * s * s * h, .ninputs = 2, .inputs = {q, k},
                    .input = SHAPE(bs, s, h), .output = SHAPE(bs, a, s, s)};
    int scores = add(b, nm(b, "layers.%d.attn.scores", i), &sc);
    int soft = pointwise(b, nm(b, "layers.%d.attn.softmax", i), "softmax", scores, -1,
                         FLOPS_SOFTMAX, 0, 0);
    /* per head: (s x s) x (s x d) = 2bs^2h */
    op_spec_t cx = {.type = "matmul", .compute_bound = COMPUTE_BOUND, .keeps_input = 1,
                    .flops = 2.0 * bs * s * s * h, .ninputs = 2, .inputs = {soft, v},
                    .input = SHAPE(bs, a, s, s), .output = SHAPE(bs, s, h)};
    int ctx = add(b, nm(b, "layers.%d.attn.context", i), &cx);
    int out = linear(b, nm(b, "layers.%d.attn.out", i), ctx, h, h, 1);
    int res1 = add2(b, nm(b, "layers.%d.attn.residual", i), out, x);
    int ln2 = layernorm(b, nm(b, "layers.%d.ln2", i), res1, h);
    int fc1 = linear(b, nm(b, "layers.%d.mlp.fc1", i), ln2, h, f, 1);
    int act = pointwise(b, nm(b, "layers.%d.mlp.gelu", i), "gelu", fc1, -1, FLOPS_GELU, 1, 0);
    int fc2 = linear(b, nm(b, "layers.%d.mlp.fc2", i), act, f, h, 1);
    return add2(b, nm(b, "layers.%d.mlp.residual", i), fc2, res1);
}

static void build_transformer(builder_t *b)
{
    const pf_model_opts_t *o = b->o;
    int bert = o->kind == PF_MODEL_BERT;
    int64_t bs = o->microbatch, s = o->seq, h = o->hidden, v = o->vocab;
    /* Token and position tables (and BERT's two token-type rows); one row of each table is
     * read per token and the sum is written. */
    int tables = bert ? 3 : 2;
    double ids_bytes = (double)bs * s * TOKEN_ID_BYTES;
    double act_bytes = (double)bs * s * h * o->precision_bytes;
    op_spec_t emb = {.type = "embedding", .keeps_input = 1,
                     .param_elems = (double)(v + s + (bert ? 2 : 0)) * h,
                     .moved_bytes = ids_bytes + (tables + 1) * act_bytes,
                     .graph_in_bytes = ids_bytes, .weight = SHAPE(v, h), .input = SHAPE(bs, s),
                     .output = SHAPE(bs, s, h)};
    int x = add(b, "embed", &emb);
    for (int i = 0; i < o->layers; i++)
        x = transformer_layer(b, i, x);
    x = layernorm(b, "final_ln", x, h);
    /* The head keeps its own copy of the h x V projection (untied): with pipeline stages the
     * embedding and the head sit on different devices, each holding the matrix. */
    if (!bert) {
        linear(b, "head", x, h, v, 0);
        return;
    }
    /* BERT's masked-LM head: dense, gelu, layernorm, decoder with a bias over the vocabulary. */
    x = linear(b, "head.dense", x, h, h, 1);
    x = pointwise(b, "head.gelu", "gelu", x, -1, FLOPS_GELU, 1, 0);
    x = layernorm(b, "head.ln", x, h);
    linear(b, "head.decoder", x, h, v, 1);
}

/* ---- convolutional pieces (NCHW) ---- */

static int64_t conv_side(int64_t side, int k, int stride, int pad)
{
    return (side + 2 * pad - k) / stride + 1;
}

/* k x k conv, im2col matmul: 2 x (b Ho Wo) x Cout x (Cin k k) FLOPs. x < 0 reads the image. */
static int conv(builder_t *b, const char *name, int x, int64_t cin, int64_t side, int64_t cout,
                int k, int stride, int pad, int bias)
{
    const pf_model_opts_t *o = b->o;
    int64_t bs = o->microbatch, so = conv_side(side, k, stride, pad);
    op_spec_t s = {.type = "conv", .compute_bound = COMPUTE_BOUND, .keeps_input = 1,
                   .flops = 2.0 * bs * so * so * cout * ((double)cin * k * k),
                   .param_elems = (double)cout * cin * k * k + (bias ? (double)cout : 0),
                   .ninputs = x >= 0, .inputs = {x},
                   .graph_in_bytes = x >= 0 ? 0 : (double)bs * cin * side * side *
                                                      o->precision_bytes,
                   .weight = SHAPE(cout, cin, k, k), .input = SHAPE(bs, cin, side, side),
                   .output = SHAPE(bs, cout, so, so)};
    return add(b, name, &s);
}

static int batchnorm(builder_t *b, const char *name, int x)
{
    return pointwise(b, name, "batchnorm", x, -1, FLOPS_NORM, 1, shape_of(b, x)->dim[1]);
}

static int relu(builder_t *b, const char *name, int x)
{
    return pointwise(b, name, "relu", x, -1, FLOPS_RELU, 0, 0);
}

static int maxpool(builder_t *b, const char *name, int x, int k, int stride, int pad)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    int64_t so = conv_side(xs->dim[2], k, stride, pad);
    pf_shape_t os = SHAPE(xs->dim[0], xs->dim[1], so, so);
    op_spec_t s = {.type = "maxpool", .keeps_input = 1, .flops = (double)k * k * shape_elems(&os),
                   .ninputs = 1, .inputs = {x}, .input = *xs, .output = os};
    return add(b, name, &s);
}

/* ---- ResNet (He et al. 2016; torchvision v1.5: the stride sits on the 3x3 conv) ---- */

typedef struct {
    int x;            /* producer op */
    int64_t c, side;  /* its channels and spatial side */
} tensor_t;

/* One residual block; `width` = the block's inner channels, out = width x expansion. */
static tensor_t resnet_block(builder_t *b, const char *pre, tensor_t in, int64_t width,
                             int stride, int bottleneck)
{
    const char *p = pre; /* never b->name: nm() rewrites that */
    int64_t cout = bottleneck ? 4 * width : width;
    int y;
    int64_t side;
    if (bottleneck) {
        y = conv(b, nm(b, "%s.conv1", p), in.x, in.c, in.side, width, 1, 1, 0, 0);
        y = batchnorm(b, nm(b, "%s.bn1", p), y);
        y = relu(b, nm(b, "%s.relu1", p), y);
        y = conv(b, nm(b, "%s.conv2", p), y, width, in.side, width, 3, stride, 1, 0);
        side = conv_side(in.side, 3, stride, 1);
        y = batchnorm(b, nm(b, "%s.bn2", p), y);
        y = relu(b, nm(b, "%s.relu2", p), y);
        y = conv(b, nm(b, "%s.conv3", p), y, width, side, cout, 1, 1, 0, 0);
        y = batchnorm(b, nm(b, "%s.bn3", p), y);
    } else {
        y = conv(b, nm(b, "%s.conv1", p), in.x, in.c, in.side, width, 3, stride, 1, 0);
        side = conv_side(in.side, 3, stride, 1);
        y = batchnorm(b, nm(b, "%s.bn1", p), y);
        y = relu(b, nm(b, "%s.relu1", p), y);
        y = conv(b, nm(b, "%s.conv2", p), y, width, side, width, 3, 1, 1, 0);
        y = batchnorm(b, nm(b, "%s.bn2", p), y);
    }
    int skip = in.x;
    if (stride != 1 || in.c != cout) { /* projection shortcut: 1x1 conv with the block's stride */
        skip = conv(b, nm(b, "%s.downsample.conv", p), in.x, in.c, in.side, cout, 1, stride, 0,
                    0);
        skip = batchnorm(b, nm(b, "%s.downsample.bn", p), skip);
    }
    y = add2(b, nm(b, "%s.add", p), y, skip);
    y = relu(b, nm(b, "%s.relu", p), y);
    return (tensor_t){y, cout, side};
}

static void build_resnet(builder_t *b)
{
    const pf_model_opts_t *o = b->o;
    static const struct {
        int depth, bottleneck, blocks[4];
    } cfg[] = {{18, 0, {2, 2, 2, 2}},
               {34, 0, {3, 4, 6, 3}},
               {50, 1, {3, 4, 6, 3}},
               {101, 1, {3, 4, 23, 3}},
               {152, 1, {3, 8, 36, 3}}};
    int c = 0;
    while (cfg[c].depth != o->depth)
        c++;
    int y = conv(b, "stem.conv", -1, 3, o->image, 64, 7, 2, 3, 0);
    y = batchnorm(b, "stem.bn", y);
    y = relu(b, "stem.relu", y);
    y = maxpool(b, "stem.pool", y, 3, 2, 1);
    tensor_t t = {y, 64, conv_side(conv_side(o->image, 7, 2, 3), 3, 2, 1)};
    char pre[32];
    for (int st = 0; st < 4; st++) {
        for (int j = 0; j < cfg[c].blocks[st]; j++) {
            snprintf(pre, sizeof pre, "layer%d.%d", st + 1, j);
            t = resnet_block(b, pre, t, (int64_t)64 << st, j == 0 && st > 0 ? 2 : 1,
                             cfg[c].bottleneck);
        }
    }
    int64_t bs = o->microbatch;
    op_spec_t pool = {.type = "avgpool", .flops = (double)bs * t.c * t.side * t.side,
                      .ninputs = 1, .inputs = {t.x}, .input = *shape_of(b, t.x),
                      .output = SHAPE(bs, t.c)};
    y = add(b, "avgpool", &pool);
    linear(b, "fc", y, t.c, o->classes, 1);
}

/* ---- U-Net (Ronneberger et al. 2015, with padded convs so that skips need no crop) ---- */

static int conv_relu_pair(builder_t *b, const char *pre, int x, int64_t cin, int64_t side,
                          int64_t cout)
{
    const char *p = pre; /* never b->name: nm() rewrites that */
    x = conv(b, nm(b, "%s.conv1", p), x, cin, side, cout, 3, 1, 1, 1);
    x = relu(b, nm(b, "%s.relu1", p), x);
    x = conv(b, nm(b, "%s.conv2", p), x, cout, side, cout, 3, 1, 1, 1);
    return relu(b, nm(b, "%s.relu2", p), x);
}

static void build_unet(builder_t *b)
{
    const pf_model_opts_t *o = b->o;
    int L = o->levels;
    int64_t bs = o->microbatch, c0 = o->channels;
    int skip[PF_MODEL_MAX_LEVELS];
    int x = -1;
    int64_t cin = PF_MODEL_UNET_IN_CHANNELS, side = o->image;
    char pre[32];
    for (int i = 0; i < L; i++) {
        snprintf(pre, sizeof pre, "enc.%d", i);
        skip[i] = conv_relu_pair(b, pre, x, cin, side, c0 << i);
        x = maxpool(b, nm(b, "enc.%d.pool", i), skip[i], 2, 2, 0);
        cin = c0 << i;
        side /= 2;
    }
    x = conv_relu_pair(b, "mid", x, cin, side, c0 << L);
    for (int i = L - 1; i >= 0; i--) {
        int64_t cup = c0 << (i + 1), c = c0 << i;
        side *= 2;
        /* 2x2 stride-2 transposed conv: each output pixel gets one tap of cup inputs */
        op_spec_t up = {.type = "conv", .compute_bound = COMPUTE_BOUND, .keeps_input = 1,
                        .flops = 2.0 * bs * side * side * c * cup,
                        .param_elems = (double)cup * c * 4 + (double)c, .ninputs = 1,
                        .inputs = {x}, .weight = SHAPE(cup, c, 2, 2),
                        .input = SHAPE(bs, cup, side / 2, side / 2),
                        .output = SHAPE(bs, c, side, side)};
        int u = add(b, nm(b, "dec.%d.up", i), &up);
        /* the long skip: encoder level i's output joins decoder level i */
        op_spec_t cat = {.type = "concat", .ninputs = 2, .inputs = {u, skip[i]},
                         .input = SHAPE(bs, c, side, side),
                         .output = SHAPE(bs, 2 * c, side, side)};
        x = add(b, nm(b, "dec.%d.concat", i), &cat);
        snprintf(pre, sizeof pre, "dec.%d", i);
        x = conv_relu_pair(b, pre, x, 2 * c, side, c);
    }
    conv(b, "head", x, c0, side, o->classes, 1, 1, 0, 1);
}

/* ---- entry point ---- */

static void default_name(const pf_model_opts_t *o, char *buf, size_t len)
{
    switch (o->kind) {
    case PF_MODEL_GPT:
    case PF_MODEL_BERT:
        snprintf(buf, len, "%s-%dl-%dh", pf_model_kind_name(o->kind), o->layers, o->hidden);
        break;
    case PF_MODEL_RESNET: snprintf(buf, len, "resnet%d", o->depth); break;
    case PF_MODEL_UNET: snprintf(buf, len, "unet-%dl-%dc", o->levels, o->channels); break;
    }
}

int pf_model_build(const pf_model_opts_t *o, pf_graph_t **out, char *err, size_t errlen)
{
    builder_t b = {.o = o};
    char name[64];
    int rc;
    *out = NULL;
    if ((rc = validate(o, err, errlen)) != PF_OK)
        return rc;
    default_name(o, name, sizeof name);
    b.g = pf_graph_new(o->name ? o->name : name, o->microbatch);
    if (!b.g)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    switch (o->kind) {
    case PF_MODEL_GPT:
    case PF_MODEL_BERT: build_transformer(&b); break;
    case PF_MODEL_RESNET: build_resnet(&b); break;
    case PF_MODEL_UNET: build_unet(&b); break;
    }
    if (b.failed) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory building the %s graph",
                     pf_model_kind_name(o->kind));
        goto fail;
    }
    if ((rc = pf_graph_finalize(b.g, err, errlen)) != PF_OK)
        goto fail;
    *out = b.g;
    return PF_OK;
fail:
    pf_graph_destroy(&b.g);
    return rc;
}
