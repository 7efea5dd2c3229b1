/* model_build: the graphs of model.h's kinds (GPT/BERT, Llama, MoE, ViT, ResNet, U-Net) with
 * analytic costs, from options model.c has validated. */
#include "planner/inputs/model_build.h"
#include "planner/core/util.h"
#include "planner/ir/arch.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A shape literal: SHAPE(b, s, h). The element count of the compound literal gives ndim. */
#define SHAPE(...)                                                                               \
    ((pf_shape_t){(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* FLOPs per output element of the memory-bound ops (model.h). */
#define FLOPS_ADD 1.0
#define FLOPS_MUL 1.0
#define FLOPS_RELU 1.0
#define FLOPS_DROPOUT 2.0   /* compare with a random draw, scale the kept elements */
#define FLOPS_ROTARY 3.0    /* x cos + rotate_half(x) sin */
#define FLOPS_SOFTMAX 5.0   /* max, subtract, exp, sum, divide */
#define FLOPS_SILU 5.0      /* x / (1 + exp(-x)): negate, exp, add, divide, ... */
#define FLOPS_NORM 8.0      /* mean, variance, normalise, scale and shift */
#define FLOPS_RMSNORM 6.0   /* square, mean, rsqrt, normalise, scale */
#define FLOPS_GELU 8.0      /* tanh approximation */
#define TOKEN_ID_BYTES 8.0  /* int64 token ids */
#define MASK_BYTES 1.0      /* a dropout mask: one byte per element (Korthikanti et al. 2022) */

/* ---- the builder ---- */

/* Errors are sticky: after the first failure (out of memory) every add returns -1 and the
 * build reports the failure once at the end, so the generators read as straight-line code. */
typedef struct {
    pf_graph_t *g;
    const pf_model_opts_t *o;
    int64_t seq;        /* tokens per sample (transformer kinds) */
    int outputs_saved;  /* conv kinds: mem_fwd counts every output (model.h) */
    int failed;
    char name[128];
} builder_t;

enum { MEMORY_BOUND = 0, COMPUTE_BOUND = 1 };
/* Which inputs an op saves for its backward (model.h, mem_fwd_bytes). */
enum { KEEP_NONE = 0, KEEP_ALL = 1, KEEP_LAST = 2 };
/* pointwise(): what a shape-preserving op saves. */
enum { SAVE_NOTHING = 0, SAVE_INPUT = 1, SAVE_OUTPUT = 2 };
#define MAX_INPUTS (PF_MODEL_MAX_EXPERTS + 1) /* an MoE combine: every expert + the router */

typedef struct {
    const char *type;
    int compute_bound;
    int keeps_input;       /* KEEP_*: inputs saved for the backward */
    int keeps_output;      /* the output is saved for the backward (softmax, dropout) */
    double mask_elems;     /* 1-byte dropout mask elements saved */
    double flops;          /* forward */
    double param_elems;
    double moved_bytes;    /* memory-bound: 0 = inputs + output + parameters + mask */
    double moved_written;  /* of moved_bytes, the bytes written (the rest are read) */
    double graph_in_bytes; /* input from outside the graph (image, token ids) */
    double edge_bytes;     /* bytes read from each producer; 0 = its whole output */
    int ninputs;
    int inputs[MAX_INPUTS]; /* producer op indices */
    pf_shape_t weight, input, output;
    /* GEMM-like ops: gemm_batch products of (m x k) @ (k x n), 2 m n k batch = flops */
    int64_t gemm_m, gemm_n, gemm_k, gemm_batch;
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

static double read_bytes(const builder_t *b, const op_spec_t *s, int k)
{
    return s->edge_bytes > 0 ? s->edge_bytes : out_bytes(b, s->inputs[k]);
}

/* The backward's FLOPs per forward FLOP (model.h): a GEMM or conv computes the gradients of
 * both its operands (dX and dW, or both inputs of an activation matmul), each as many FLOPs as
 * the forward; a normalisation recomputes its statistics and reduces over the same elements
 * again for its scale and shift (about 2x); every other op is about one pass (1x). */
static double bwd_factor(const op_spec_t *s)
{
    if (s->compute_bound == COMPUTE_BOUND)
        return 2.0;
    if (!strcmp(s->type, "layernorm") || !strcmp(s->type, "rmsnorm") ||
        !strcmp(s->type, "batchnorm"))
        return 2.0;
    return 1.0;
}

/* The op's work (graph.h): FLOPs and the bytes its forward kernel reads (inputs, parameters)
 * and writes (output, dropout mask); `in_bytes` counts its inputs. */
static pf_op_work_t work_of(const op_spec_t *s, double in_bytes, double out, double params,
                            double mask)
{
    pf_op_work_t w = {.fwd_flops = s->flops, .bwd_flops = bwd_factor(s) * s->flops,
                      .bytes_read = in_bytes + params, .bytes_written = out + mask,
                      .gemm_m = s->gemm_m, .gemm_n = s->gemm_n, .gemm_k = s->gemm_k,
                      .gemm_batch = s->gemm_batch};
    if (s->moved_bytes > 0) {
        w.bytes_read = s->moved_bytes - s->moved_written;
        w.bytes_written = s->moved_written;
    }
    return w;
}

/* Adds the op with its costs (model.h) and one edge from each producer; returns its index. */
static int add(builder_t *b, const char *name, const op_spec_t *s)
{
    if (b->failed)
        return -1;
    const pf_model_opts_t *o = b->o;
    double p = o->precision_bytes, in_grad_bytes = 0;
    for (int k = 0; k < s->ninputs; k++)
        in_grad_bytes += read_bytes(b, s, k);
    double in_bytes = in_grad_bytes + s->graph_in_bytes;
    double out = shape_elems(&s->output) * p, params = s->param_elems * p;
    double mask = s->mask_elems * MASK_BYTES;
    double flops_ms = s->flops / (o->tflops * 1e12 * o->efficiency) * 1e3;
    double fwd_ms = flops_ms;
    if (s->compute_bound == MEMORY_BOUND) {
        double moved = s->moved_bytes > 0 ? s->moved_bytes : in_bytes + out + params + mask;
        fwd_ms = fmax(flops_ms, pf_bytes_ms(moved, o->hbm_gbps));
    }
    double saved = mask + (s->keeps_output || b->outputs_saved ? out : 0);
    if (s->keeps_input == KEEP_ALL)
        saved += in_bytes;
    else if (s->keeps_input == KEEP_LAST && s->ninputs > 0)
        saved += read_bytes(b, s, s->ninputs - 1);
    pf_op_t op = {.id = pf_graph_nops(b->g), .name = name, .type = s->type, .fwd_ms = fwd_ms,
                  .bwd_ms = 2 * fwd_ms, .param_bytes = params, .mem_fwd_bytes = saved,
                  .mem_bwd_bytes = out + in_grad_bytes, .weight = s->weight, .input = s->input,
                  .output = s->output, .work = work_of(s, in_bytes, out, params, mask)};
    int v = pf_graph_add_op(b->g, &op);
    for (int k = 0; v >= 0 && k < s->ninputs; k++)
        if (pf_graph_add_edge(b->g, s->inputs[k], v, read_bytes(b, s, k)) < 0)
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

/* y = x W + bias over the last dimension: 2 x rows x in x out FLOPs. `saves_input` = 0 for a
 * linear that reads a tensor another op already saves (k and v beside q). */
static int linear(builder_t *b, const char *name, int x, int64_t in, int64_t out, int bias,
                  int saves_input)
{
    if (b->failed)
        return -1;
    pf_shape_t os = *shape_of(b, x);
    double rows = shape_elems(&os) / (double)in;
    os.dim[os.ndim - 1] = out;
    op_spec_t s = {.type = "linear", .compute_bound = COMPUTE_BOUND,
                   .keeps_input = saves_input ? KEEP_ALL : KEEP_NONE,
                   .flops = 2 * rows * (double)in * (double)out,
                   .param_elems = (double)in * (double)out + (bias ? (double)out : 0),
                   .ninputs = 1, .inputs = {x}, .weight = SHAPE(in, out),
                   .input = *shape_of(b, x), .output = os, .gemm_m = (int64_t)rows,
                   .gemm_n = out, .gemm_k = in, .gemm_batch = 1};
    return add(b, name, &s);
}

/* Shape-preserving memory-bound op (add and mul take a second producer y, else y < 0).
 * `saves` is SAVE_INPUT and/or SAVE_OUTPUT. */
static int pointwise(builder_t *b, const char *name, const char *type, int x, int y,
                     double flops_per_elem, int saves, int64_t norm_channels)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    op_spec_t s = {.type = type, .keeps_input = saves & SAVE_INPUT ? KEEP_ALL : KEEP_NONE,
                   .keeps_output = !!(saves & SAVE_OUTPUT),
                   .flops = flops_per_elem * shape_elems(xs),
                   .param_elems = 2 * (double)norm_channels, .ninputs = y >= 0 ? 2 : 1,
                   .inputs = {x, y}, .input = *xs, .output = *xs};
    if (norm_channels)
        s.weight = SHAPE(2, norm_channels);
    return add(b, name, &s);
}

static int layernorm(builder_t *b, const char *name, int x, int64_t h)
{
    return pointwise(b, name, "layernorm", x, -1, FLOPS_NORM, SAVE_INPUT, h);
}

/* RMSNorm (Zhang and Sennrich 2019): a scale, no shift; saves its input. */
static int rmsnorm(builder_t *b, const char *name, int x, int64_t h)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    op_spec_t s = {.type = "rmsnorm", .keeps_input = KEEP_ALL,
                   .flops = FLOPS_RMSNORM * shape_elems(xs), .param_elems = (double)h,
                   .ninputs = 1, .inputs = {x}, .weight = SHAPE(h), .input = *xs,
                   .output = *xs};
    return add(b, name, &s);
}

static int add2(builder_t *b, const char *name, int x, int y)
{
    return pointwise(b, name, "add", x, y, FLOPS_ADD, SAVE_NOTHING, 0);
}

/* Dropout saves its 1-byte mask; `saves_output` when the next op's backward reads the dropped
 * tensor (the attention probabilities, read by attn.context). */
static int dropout(builder_t *b, const char *name, int x, int saves_output)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    op_spec_t s = {.type = "dropout", .keeps_output = saves_output,
                   .mask_elems = shape_elems(xs), .flops = FLOPS_DROPOUT * shape_elems(xs),
                   .ninputs = 1, .inputs = {x}, .input = *xs, .output = *xs};
    return add(b, name, &s);
}

/* ---- transformer layers ---- */

/* The attention core: scores(q, k) -> softmax [-> dropout] -> context(probabilities, v).
 * Per head (s x d) x (d x s) and (s x s) x (s x d), d the head size (h / a unless --head-dim),
 * over b x a heads: 2bs^2 ad each.
 * With grouped-query attention a group of a / kv query heads shares one K and V head: the
 * FLOPs are the same, K and V are kv x d wide. Saves as model.h lists. */
static int attention_core(builder_t *b, int i, int q, int k, int v, int with_dropout)
{
    const pf_model_opts_t *o = b->o;
    int64_t bs = o->microbatch, s = b->seq, a = o->heads, d = pf_model_head_dim(o), ad = a * d;
    /* per (sample, head): scores (s x d) @ (d x s), context (s x s) @ (s x d) */
    op_spec_t sc = {.type = "matmul", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                    .flops = 2.0 * bs * s * s * ad, .ninputs = 2, .inputs = {q, k},
                    .input = SHAPE(bs, s, ad), .output = SHAPE(bs, a, s, s), .gemm_m = s,
                    .gemm_n = s, .gemm_k = d, .gemm_batch = bs * a};
    int scores = add(b, nm(b, "layers.%d.attn.scores", i), &sc);
    int probs = pointwise(b, nm(b, "layers.%d.attn.softmax", i), "softmax", scores, -1,
                          FLOPS_SOFTMAX, SAVE_OUTPUT, 0);
    if (with_dropout)
        probs = dropout(b, nm(b, "layers.%d.attn.dropout", i), probs, 1);
    op_spec_t cx = {.type = "matmul", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_LAST,
                    .flops = 2.0 * bs * s * s * ad, .ninputs = 2, .inputs = {probs, v},
                    .input = SHAPE(bs, a, s, s), .output = SHAPE(bs, s, ad), .gemm_m = s,
                    .gemm_n = d, .gemm_k = s, .gemm_batch = bs * a};
    return add(b, nm(b, "layers.%d.attn.context", i), &cx);
}

/* GPT/BERT/ViT block (pre-LN): x -> ln1 -> q, k, v -> scores(q, k) -> softmax -> dropout ->
 * context(dropout, v) -> out -> out_dropout -> add(., x) -> ln2 -> fc1 -> gelu -> fc2 ->
 * dropout -> add. Forward matmul FLOPs: q, k, v, out 4 x 2bsh^2; scores and context 2 x 2bs^2h;
 * fc1, fc2 2 x 2bshf; = 24bsh^2 + 4bs^2h for f = 4h (the count of Narayanan et al. 2021,
 * Megatron-LM on GPU clusters, before its 3x / 4x for backward and recomputation). The causal
 * mask of gpt changes no cost: dense kernels compute the whole s x s score matrix either way.
 * Saved activations: Korthikanti et al. 2022 Sec. 4.1, sbh(34 + 5as/h) (model.h). With a head
 * size apart (--head-dim), q, k, v and the context are w = a d wide: forward 2bs(4hw + 2sw +
 * 2hf), saved 26sbh + 8sbw + 5as^2b. */
static int transformer_layer(builder_t *b, int i, int x)
{
    const pf_model_opts_t *o = b->o;
    int64_t h = o->hidden, f = pf_model_ffn(o), ad = pf_model_attn_width(o);
    int ln1 = layernorm(b, nm(b, "layers.%d.ln1", i), x, h);
    int q = linear(b, nm(b, "layers.%d.attn.q", i), ln1, h, ad, 1, 1);
    int k = linear(b, nm(b, "layers.%d.attn.k", i), ln1, h, ad, 1, 0);
    int v = linear(b, nm(b, "layers.%d.attn.v", i), ln1, h, ad, 1, 0);
    int ctx = attention_core(b, i, q, k, v, 1);
    int out = linear(b, nm(b, "layers.%d.attn.out", i), ctx, ad, h, 1, 1);
    out = dropout(b, nm(b, "layers.%d.attn.out_dropout", i), out, 0);
    int res1 = add2(b, nm(b, "layers.%d.attn.residual", i), out, x);
    int ln2 = layernorm(b, nm(b, "layers.%d.ln2", i), res1, h);
    int fc1 = linear(b, nm(b, "layers.%d.mlp.fc1", i), ln2, h, f, 1, 1);
    int act = pointwise(b, nm(b, "layers.%d.mlp.gelu", i), "gelu", fc1, -1, FLOPS_GELU,
                        SAVE_INPUT, 0);
    int fc2 = linear(b, nm(b, "layers.%d.mlp.fc2", i), act, f, h, 1, 1);
    fc2 = dropout(b, nm(b, "layers.%d.mlp.dropout", i), fc2, 0);
    return add2(b, nm(b, "layers.%d.mlp.residual", i), fc2, res1);
}

/* SwiGLU (Shazeer 2020): down(silu(gate(x)) * up(x)). `pre` names the block ("layers.3.mlp",
 * "layers.3.moe.experts.5"); x < 0 is never passed. For an expert, `rows` tokens are routed to
 * it out of the dispatch op x, and only they are read. */
static int swiglu(builder_t *b, const char *pre, int x, int64_t rows, int64_t h, int64_t f)
{
    if (b->failed)
        return -1;
    char p[96];
    snprintf(p, sizeof p, "%s", pre); /* nm() rewrites b->name, which pre may be */
    double bytes = (double)rows * h * b->o->precision_bytes;
    pf_shape_t in = rows ? SHAPE(rows, h) : *shape_of(b, x);
    pf_shape_t mid = in;
    mid.dim[mid.ndim - 1] = f;
    double n = shape_elems(&in) / (double)h; /* tokens */
    op_spec_t gs = {.type = "linear", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                    .flops = 2 * n * h * f, .param_elems = (double)h * f,
                    .edge_bytes = rows ? bytes : 0, .ninputs = 1, .inputs = {x},
                    .weight = SHAPE(h, f), .input = in, .output = mid, .gemm_m = (int64_t)n,
                    .gemm_n = f, .gemm_k = h, .gemm_batch = 1};
    int gate = add(b, nm(b, "%s.gate", p), &gs);
    gs.keeps_input = KEEP_NONE; /* up reads the tensor gate saved */
    int up = add(b, nm(b, "%s.up", p), &gs);
    int act = pointwise(b, nm(b, "%s.silu", p), "silu", gate, -1, FLOPS_SILU, SAVE_INPUT, 0);
    int prod = pointwise(b, nm(b, "%s.mul", p), "mul", act, up, FLOPS_MUL, SAVE_INPUT, 0);
    op_spec_t ds = {.type = "linear", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                    .flops = 2 * n * f * h, .param_elems = (double)f * h, .ninputs = 1,
                    .inputs = {prod}, .weight = SHAPE(f, h), .input = mid, .output = in,
                    .gemm_m = (int64_t)n, .gemm_n = h, .gemm_k = f, .gemm_batch = 1};
    return add(b, nm(b, "%s.down", p), &ds);
}

/* Top-k routing (Shazeer et al. 2017; Fedus et al. 2022): router logits, a dispatch that sends
 * each token to its k experts (tokens x k / E rows each: balanced routing, the case capacity
 * factors aim for), E SwiGLU experts, and a combine that sums each token's k expert outputs
 * weighted by the router's probabilities. */
static int moe_block(builder_t *b, int i, int x)
{
    const pf_model_opts_t *o = b->o;
    int64_t bs = o->microbatch, s = b->seq, h = o->hidden, f = pf_model_ffn(o), E = o->experts;
    int64_t rows = bs * s * o->top_k / E;
    double p = o->precision_bytes;
    int router = linear(b, nm(b, "layers.%d.moe.router", i), x, h, E, 0, 1);
    /* Reads each token k times and writes it k times; saves the routing probabilities. */
    op_spec_t ds = {.type = "moe_dispatch", .keeps_input = KEEP_LAST,
                    .moved_bytes = 2.0 * o->top_k * bs * s * h * p + (double)bs * s * E * p,
                    .moved_written = (double)o->top_k * bs * s * h * p,
                    .ninputs = 2, .inputs = {x, router}, .input = SHAPE(bs, s, h),
                    .output = SHAPE(E, rows, h)};
    int dispatch = add(b, nm(b, "layers.%d.moe.dispatch", i), &ds);
    if (b->failed)
        return -1;
    op_spec_t cb = {.type = "moe_combine", .keeps_input = KEEP_ALL,
                    .flops = (double)o->top_k * bs * s * h, .ninputs = (int)E + 1,
                    .input = SHAPE(E, rows, h), .output = SHAPE(bs, s, h)};
    char pre[96];
    for (int e = 0; e < E; e++) {
        snprintf(pre, sizeof pre, "layers.%d.moe.experts.%d", i, e);
        cb.inputs[e] = swiglu(b, pre, dispatch, rows, h, f);
    }
    cb.inputs[E] = router;
    return add(b, nm(b, "layers.%d.moe.combine", i), &cb);
}

/* Llama block (Touvron et al. 2023): x -> ln1 (RMSNorm) -> q, k, v (k, v: kv_heads x d wide)
 * -> rotary on q and k -> scores -> softmax -> context -> out -> add -> ln2 -> SwiGLU MLP (or
 * the MoE block) -> add. No biases, no dropout. */
static int llama_layer(builder_t *b, int i, int x)
{
    const pf_model_opts_t *o = b->o;
    int64_t h = o->hidden, ad = pf_model_attn_width(o);
    int64_t kvd = pf_model_head_dim(o) * pf_model_kv_heads(o);
    int ln1 = rmsnorm(b, nm(b, "layers.%d.ln1", i), x, h);
    int q = linear(b, nm(b, "layers.%d.attn.q", i), ln1, h, ad, 0, 1);
    int k = linear(b, nm(b, "layers.%d.attn.k", i), ln1, h, kvd, 0, 0);
    int v = linear(b, nm(b, "layers.%d.attn.v", i), ln1, h, kvd, 0, 0);
    /* Rotary embeddings (Su et al. 2021): a fixed rotation; the backward needs no tensor. */
    int rq = pointwise(b, nm(b, "layers.%d.attn.rotary_q", i), "rotary", q, -1, FLOPS_ROTARY,
                       SAVE_NOTHING, 0);
    int rk = pointwise(b, nm(b, "layers.%d.attn.rotary_k", i), "rotary", k, -1, FLOPS_ROTARY,
                       SAVE_NOTHING, 0);
    int ctx = attention_core(b, i, rq, rk, v, 0);
    int out = linear(b, nm(b, "layers.%d.attn.out", i), ctx, ad, h, 0, 1);
    int res1 = add2(b, nm(b, "layers.%d.attn.residual", i), out, x);
    int ln2 = rmsnorm(b, nm(b, "layers.%d.ln2", i), res1, h);
    int mlp = o->kind == PF_MODEL_MOE ? moe_block(b, i, ln2)
                                      : swiglu(b, nm(b, "layers.%d.mlp", i), ln2, 0, h, pf_model_ffn(o));
    return add2(b, nm(b, "layers.%d.mlp.residual", i), mlp, res1);
}

/* The loss is not an op: a head saves its input (linear) and its logits, which the loss's
 * backward reads. */
static int head(builder_t *b, const char *name, int x, int64_t in, int64_t out, int bias)
{
    if (b->failed)
        return -1;
    pf_shape_t os = *shape_of(b, x);
    double rows = shape_elems(&os) / (double)in;
    os.dim[os.ndim - 1] = out;
    op_spec_t s = {.type = "linear", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                   .keeps_output = 1, .flops = 2 * rows * (double)in * (double)out,
                   .param_elems = (double)in * (double)out + (bias ? (double)out : 0),
                   .ninputs = 1, .inputs = {x}, .weight = SHAPE(in, out),
                   .input = *shape_of(b, x), .output = os, .gemm_m = (int64_t)rows,
                   .gemm_n = out, .gemm_k = in, .gemm_batch = 1};
    return add(b, name, &s);
}

static void build_transformer(builder_t *b)
{
    const pf_model_opts_t *o = b->o;
    int bert = o->kind == PF_MODEL_BERT, llama = pf_model_is_llama_like(o->kind);
    int64_t bs = o->microbatch, s = o->seq, h = o->hidden, v = o->vocab;
    /* Token and position tables (BERT: and two token-type rows; llama: the token table only,
     * positions are rotary); one row of each table is read per token and the sum written. */
    int tables = llama ? 1 : bert ? 3 : 2;
    double ids_bytes = (double)bs * s * TOKEN_ID_BYTES;
    double act_bytes = (double)bs * s * h * o->precision_bytes;
    op_spec_t emb = {.type = "embedding", .keeps_input = KEEP_ALL,
                     .param_elems = (double)(v + (llama ? 0 : s) + (bert ? 2 : 0)) * h,
                     .moved_bytes = ids_bytes + (tables + 1) * act_bytes,
                     .moved_written = act_bytes,
                     .graph_in_bytes = ids_bytes, .weight = SHAPE(v, h), .input = SHAPE(bs, s),
                     .output = SHAPE(bs, s, h)};
    int x = add(b, "embed", &emb);
    for (int i = 0; i < o->layers; i++)
        x = llama ? llama_layer(b, i, x) : transformer_layer(b, i, x);
    x = llama ? rmsnorm(b, "final_ln", x, h) : layernorm(b, "final_ln", x, h);
    /* The head keeps its own copy of the h x V projection (untied): with pipeline stages the
     * embedding and the head sit on different devices, each holding the matrix (Llama 2 and 3
     * do not tie them either). */
    if (!bert) {
        head(b, "head", x, h, v, 0);
        return;
    }
    /* BERT's masked-LM head: dense, gelu, layernorm, decoder with a bias over the vocabulary. */
    x = linear(b, "head.dense", x, h, h, 1, 1);
    x = pointwise(b, "head.gelu", "gelu", x, -1, FLOPS_GELU, SAVE_INPUT, 0);
    x = layernorm(b, "head.ln", x, h);
    head(b, "head.decoder", x, h, v, 1);
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
    op_spec_t s = {.type = "conv", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                   .flops = 2.0 * bs * so * so * cout * ((double)cin * k * k),
                   .param_elems = (double)cout * cin * k * k + (bias ? (double)cout : 0),
                   .ninputs = x >= 0, .inputs = {x},
                   .graph_in_bytes = x >= 0 ? 0 : (double)bs * cin * side * side *
                                                      o->precision_bytes,
                   .weight = SHAPE(cout, cin, k, k), .input = SHAPE(bs, cin, side, side),
                   .output = SHAPE(bs, cout, so, so), .gemm_m = bs * so * so, .gemm_n = cout,
                   .gemm_k = cin * k * k, .gemm_batch = 1};
    return add(b, name, &s);
}

static int batchnorm(builder_t *b, const char *name, int x)
{
    return pointwise(b, name, "batchnorm", x, -1, FLOPS_NORM, SAVE_INPUT, shape_of(b, x)->dim[1]);
}

static int relu(builder_t *b, const char *name, int x)
{
    return pointwise(b, name, "relu", x, -1, FLOPS_RELU, SAVE_NOTHING, 0);
}

static int maxpool(builder_t *b, const char *name, int x, int k, int stride, int pad)
{
    if (b->failed)
        return -1;
    const pf_shape_t *xs = shape_of(b, x);
    int64_t so = conv_side(xs->dim[2], k, stride, pad);
    pf_shape_t os = SHAPE(xs->dim[0], xs->dim[1], so, so);
    op_spec_t s = {.type = "maxpool", .keeps_input = KEEP_ALL, .flops = (double)k * k * shape_elems(&os),
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
    linear(b, "fc", y, t.c, o->classes, 1, 1);
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
        op_spec_t up = {.type = "conv", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                        .flops = 2.0 * bs * side * side * c * cup,
                        .param_elems = (double)cup * c * 4 + (double)c, .ninputs = 1,
                        .inputs = {x}, .weight = SHAPE(cup, c, 2, 2),
                        .input = SHAPE(bs, cup, side / 2, side / 2),
                        .output = SHAPE(bs, c, side, side), .gemm_m = bs * side * side,
                        .gemm_n = c, .gemm_k = cup, .gemm_batch = 1};
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


/* ---- ViT (Dosovitskiy et al. 2021): patches as tokens, the GPT/BERT encoder block ---- */

static void build_vit(builder_t *b)
{
    const pf_model_opts_t *o = b->o;
    int64_t bs = o->microbatch, h = o->hidden, n = b->seq;
    double p = o->precision_bytes;
    /* A P x P conv with stride P: one h-vector per patch, 2 x (b n') x h x (3 P P) FLOPs. */
    int x = conv(b, "patch_embed", -1, PF_MODEL_VIT_IN_CHANNELS, o->image, h, o->patch,
                 o->patch, 0, 1);
    /* Flatten, prepend the learned class token, add the learned position table (n x h); an
     * add's backward reads nothing. */
    op_spec_t emb = {.type = "embedding", .flops = (double)bs * n * h,
                     .param_elems = (double)(n + 1) * h, .ninputs = 1, .inputs = {x},
                     .weight = SHAPE(n, h), .input = *shape_of(b, x), .output = SHAPE(bs, n, h)};
    x = add(b, "embed", &emb);
    for (int i = 0; i < o->layers; i++)
        x = transformer_layer(b, i, x);
    x = layernorm(b, "final_ln", x, h);
    /* The classifier reads the class token only and saves it and its logits. */
    op_spec_t hd = {.type = "linear", .compute_bound = COMPUTE_BOUND, .keeps_input = KEEP_ALL,
                    .keeps_output = 1, .flops = 2.0 * bs * h * o->classes,
                    .param_elems = (double)h * o->classes + o->classes,
                    .edge_bytes = (double)bs * h * p, .ninputs = 1, .inputs = {x},
                    .weight = SHAPE(h, o->classes), .input = SHAPE(bs, h),
                    .output = SHAPE(bs, o->classes), .gemm_m = bs, .gemm_n = o->classes,
                    .gemm_k = h, .gemm_batch = 1};
    add(b, "head", &hd);
}

/* ---- entry point ---- */

static void default_name(const pf_model_opts_t *o, char *buf, size_t len)
{
    switch (o->kind) {
    case PF_MODEL_GPT:
    case PF_MODEL_BERT:
    case PF_MODEL_LLAMA:
    case PF_MODEL_VIT:
        snprintf(buf, len, "%s-%dl-%dh", pf_model_kind_name(o->kind), o->layers, o->hidden);
        break;
    case PF_MODEL_MOE:
        snprintf(buf, len, "moe-%dl-%dh-%de", o->layers, o->hidden, o->experts);
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
    if ((rc = pf_model_validate(o, err, errlen)) != PF_OK)
        return rc;
    default_name(o, name, sizeof name);
    b.seq = pf_model_is_transformer(o->kind) ? pf_model_seq(o) : 0;
    b.outputs_saved = !pf_model_is_transformer(o->kind);
    b.g = pf_graph_new(o->name ? o->name : name, o->microbatch);
    if (!b.g)
        return pf_fail(err, errlen, PF_ERR, "out of memory");
    switch (o->kind) {
    case PF_MODEL_GPT:
    case PF_MODEL_BERT:
    case PF_MODEL_LLAMA:
    case PF_MODEL_MOE: build_transformer(&b); break;
    case PF_MODEL_VIT: build_vit(&b); break;
    case PF_MODEL_RESNET: build_resnet(&b); break;
    case PF_MODEL_UNET: build_unet(&b); break;
    }
    if (b.failed) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory building the %s graph",
                     pf_model_kind_name(o->kind));
        goto fail;
    }
    pf_arch_t arch;
    if (pf_model_arch(o, &arch) == PF_OK && pf_graph_set_arch(b.g, &arch) != PF_OK) {
        rc = pf_fail(err, errlen, PF_ERR, "out of memory");
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
