/* models: generated graphs checked against hand-worked FLOPs, bytes, parameter counts and
 * published figures. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/ir/training.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_graph_t *build(const pf_model_opts_t *o)
{
    char err[256] = "";
    pf_graph_t *g = NULL;
    int rc = pf_model_build(o, &g, err, sizeof err);
    if (rc != PF_OK)
        fprintf(stderr, "\n  build failed: %s\n", err);
    CU_ASSERT_EQUAL(rc, PF_OK);
    return g;
}

static int op_named(const pf_graph_t *g, const char *name)
{
    for (int v = 0; v < pf_graph_nops(g); v++)
        if (!strcmp(pf_graph_op(g, v)->name, name))
            return v;
    return -1;
}

/* Bytes of the edge src -> dst (by names), or -1 when there is no such edge. */
static double edge_bytes(const pf_graph_t *g, const char *src, const char *dst)
{
    int s = op_named(g, src), d = op_named(g, dst), n;
    if (s < 0 || d < 0)
        return -1;
    const int *out = pf_graph_out(g, s, &n);
    for (int k = 0; k < n; k++)
        if (pf_graph_edge(g, out[k])->dst == d)
            return pf_graph_edge(g, out[k])->bytes;
    return -1;
}

static int in_degree(const pf_graph_t *g, const char *name)
{
    int n = -1, v = op_named(g, name);
    if (v >= 0)
        pf_graph_in(g, v, &n);
    return n;
}

static const pf_op_t *op(const pf_graph_t *g, const char *name)
{
    int v = op_named(g, name);
    CU_ASSERT_FATAL(v >= 0);
    return pf_graph_op(g, v);
}

/* b = 2, s = 8, h = 16, a = 4, f = 4h = 64, V = 32, fp16. tflops x efficiency = 1e12 FLOP/s,
 * so time_ms = FLOPs x 1e-9 exactly as the formula reads. */
static void tiny_gpt(pf_model_opts_t *o, int layers)
{
    pf_model_opts_init(o, PF_MODEL_GPT);
    o->layers = layers, o->hidden = 16, o->heads = 4, o->seq = 8, o->vocab = 32;
    o->microbatch = 2, o->tflops = 2, o->efficiency = 0.5;
}

static void test_layer_flops(void)
{
    pf_model_opts_t o;
    tiny_gpt(&o, 1);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* q, k, v, out: 2 b s h h = 2*2*8*16*16 = 8192 FLOPs -> 8.192e-6 ms
     * scores, context: 2 b s^2 h = 2*2*64*16 = 4096 -> 4.096e-6 ms
     * fc1, fc2: 2 b s h f = 2*2*8*16*64 = 32768 -> 3.2768e-5 ms */
    static const struct {
        const char *name;
        double ms;
    } want[] = {{"layers.0.attn.q", 8.192e-6},       {"layers.0.attn.k", 8.192e-6},
                {"layers.0.attn.v", 8.192e-6},       {"layers.0.attn.scores", 4.096e-6},
                {"layers.0.attn.context", 4.096e-6}, {"layers.0.attn.out", 8.192e-6},
                {"layers.0.mlp.fc1", 3.2768e-5},     {"layers.0.mlp.fc2", 3.2768e-5}};
    double sum_ms = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const pf_op_t *x = op(g, want[i].name);
        PF_ASSERT_CLOSE(x->fwd_ms, want[i].ms, 1e-12);
        PF_ASSERT_CLOSE(x->bwd_ms, 2 * want[i].ms, 1e-12);
        sum_ms += x->fwd_ms;
    }
    /* 24 b s h^2 + 4 b s^2 h = 24*2*8*256 + 4*2*64*16 = 98304 + 8192 = 106496 FLOPs */
    PF_ASSERT_CLOSE(sum_ms, 106496e-9, 1e-12);
    /* the head: 2 b s h V = 2*2*8*16*32 = 16384 FLOPs, no bias */
    PF_ASSERT_CLOSE(op(g, "head")->fwd_ms, 16384e-9, 1e-12);
    pf_graph_destroy(&g);
}

static void test_roofline(void)
{
    pf_model_opts_t o;
    tiny_gpt(&o, 1);
    o.hbm_gbps = 1; /* 1 byte = 1e-6 ms: the bytes side wins */
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* activations [2, 8, 16] fp16 = 512 B; scores [2, 4, 8, 8] = 1024 B; fc1 out [2, 8, 64] = 2048 B
     * ln1: in 512 + out 512 + params 2*16*2 = 64 -> 1088 B (FLOPs 8*256 = 2048 -> 2.048e-6 ms) */
    PF_ASSERT_CLOSE(op(g, "layers.0.ln1")->fwd_ms, 1088e-6, 1e-12);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.softmax")->fwd_ms, 2048e-6, 1e-12); /* 1024 + 1024 */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.residual")->fwd_ms, 1536e-6, 1e-12); /* 2 x 512 + 512 */
    PF_ASSERT_CLOSE(op(g, "layers.0.mlp.gelu")->fwd_ms, 4096e-6, 1e-12);    /* 2048 + 2048 */
    PF_ASSERT_CLOSE(op(g, "layers.0.mlp.gelu")->bwd_ms, 8192e-6, 1e-12);
    /* embed: ids 2*8 x 8 B = 128, token row + position row read and the sum written 3 x 512 */
    PF_ASSERT_CLOSE(op(g, "embed")->fwd_ms, 1664e-6, 1e-12);
    /* compute-bound ops ignore bandwidth */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.q")->fwd_ms, 8.192e-6, 1e-12);
    pf_graph_destroy(&g);

    o.hbm_gbps = 1e6; /* now the FLOPs side wins */
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(op(g, "layers.0.ln1")->fwd_ms, 2048e-9, 1e-12);        /* 8 x 256 */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.softmax")->fwd_ms, 2560e-9, 1e-12); /* 5 x 512 */
    PF_ASSERT_CLOSE(op(g, "layers.0.mlp.gelu")->fwd_ms, 8192e-9, 1e-12);   /* 8 x 1024 */
    pf_graph_destroy(&g);
}

static void test_memory_and_shapes(void)
{
    pf_model_opts_t o;
    tiny_gpt(&o, 1);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_op_t *q = op(g, "layers.0.attn.q");
    /* saves its input (the Q/K/V input, 512); backward: grad out 512 + grad in 512 */
    PF_ASSERT_CLOSE(q->mem_fwd_bytes, 512, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.k")->mem_fwd_bytes, 0, 0); /* q saved the tensor */
    PF_ASSERT_CLOSE(q->mem_bwd_bytes, 1024, 0);
    PF_ASSERT_CLOSE(q->param_bytes, (16 * 16 + 16) * 2, 0);
    CU_ASSERT(q->weight.ndim == 2 && q->weight.dim[0] == 16 && q->weight.dim[1] == 16);
    CU_ASSERT(q->input.ndim == 3 && q->input.dim[0] == 2 && q->input.dim[2] == 16);
    CU_ASSERT_STRING_EQUAL(q->type, "linear");
    const pf_op_t *sm = op(g, "layers.0.attn.softmax");
    /* saves only its output (1024); backward 1024 + 1024 */
    PF_ASSERT_CLOSE(sm->mem_fwd_bytes, 1024, 0);
    PF_ASSERT_CLOSE(sm->mem_bwd_bytes, 2048, 0);
    CU_ASSERT(sm->output.ndim == 4 && sm->output.dim[1] == 4 && sm->output.dim[3] == 8);
    /* embed: saves the ids 2 x 8 x 8 B = 128; the ids get no gradient */
    PF_ASSERT_CLOSE(op(g, "embed")->mem_fwd_bytes, 128, 0);
    PF_ASSERT_CLOSE(op(g, "embed")->mem_bwd_bytes, 512, 0);
    /* the head saves its input 512 and its logits [2, 8, 32] x 2 = 1024 */
    PF_ASSERT_CLOSE(op(g, "head")->mem_fwd_bytes, 1536, 0);
    /* residual add saves nothing; gradients of both inputs */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.residual")->mem_fwd_bytes, 0, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.residual")->mem_bwd_bytes, 1536, 0);
    pf_graph_destroy(&g);

    o.precision_bytes = 4; /* fp32 doubles every byte count */
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.q")->mem_fwd_bytes, 1024, 0);
    /* a dropout mask stays 1 byte per element: out_dropout saves 2 x 8 x 16 = 256 either way */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.out_dropout")->mem_fwd_bytes, 256, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.attn.scores", "layers.0.attn.softmax"), 2048, 0);
    pf_graph_destroy(&g);
}

static void test_transformer_wiring(void)
{
    pf_model_opts_t o;
    tiny_gpt(&o, 2);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* embed + 17 per layer + final_ln + head = 1 + 34 + 2 = 37 ops.
     * Edges per layer: into ln1 and the skip into attn.residual 2, ln1 -> q,k,v 3, q,k -> scores
     * 2, -> softmax -> dropout 2, dropout,v -> context 2, -> out -> out_dropout -> residual 3,
     * residual -> ln2 and the skip 2, ln2 -> fc1 -> gelu -> fc2 -> dropout -> residual 5: 21;
     * plus -> final_ln -> head 2: 44. */
    CU_ASSERT_EQUAL(pf_graph_nops(g), 37);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 44);
    /* the residual skips: the block input -> the add, around attention and around the MLP */
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.mlp.residual", "layers.1.ln1"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.mlp.residual", "layers.1.attn.residual"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.residual", "layers.1.mlp.residual"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "embed", "layers.0.attn.residual"), 512, 0);
    CU_ASSERT_EQUAL(in_degree(g, "layers.1.attn.residual"), 2);
    CU_ASSERT_EQUAL(in_degree(g, "layers.1.mlp.residual"), 2);
    /* Q, K, V each read the layernorm output */
    const char *qkv[] = {"layers.1.attn.q", "layers.1.attn.k", "layers.1.attn.v"};
    for (int i = 0; i < 3; i++) {
        PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.ln1", qkv[i]), 512, 0);
        CU_ASSERT_EQUAL(in_degree(g, qkv[i]), 1);
    }
    /* scores read Q and K; context reads the dropped probabilities (b a s^2 x 2 = 1024 B) and V */
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.q", "layers.1.attn.scores"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.k", "layers.1.attn.scores"), 512, 0);
    CU_ASSERT_EQUAL(in_degree(g, "layers.1.attn.scores"), 2);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.softmax", "layers.1.attn.dropout"), 1024, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.dropout", "layers.1.attn.context"), 1024, 0);
    CU_ASSERT(edge_bytes(g, "layers.1.attn.softmax", "layers.1.attn.context") < 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.out_dropout", "layers.1.attn.residual"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.mlp.dropout", "layers.1.mlp.residual"), 512, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.attn.v", "layers.1.attn.context"), 512, 0);
    CU_ASSERT_EQUAL(in_degree(g, "layers.1.attn.context"), 2);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.1.mlp.fc1", "layers.1.mlp.gelu"), 2048, 0);
    CU_ASSERT(edge_bytes(g, "layers.1.attn.v", "layers.1.attn.scores") < 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "final_ln", "head"), 512, 0);
    pf_graph_destroy(&g);

    /* BERT: the same blocks, the MLM head adds dense, gelu, ln, decoder: 40 ops, 47 edges */
    o.kind = PF_MODEL_BERT;
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 40);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 47);
    CU_ASSERT(op_named(g, "head.decoder") >= 0);
    /* bidirectional and causal attention cost the same (model_build.c: dense kernels) */
    PF_ASSERT_CLOSE(op(g, "layers.1.attn.scores")->fwd_ms, 4.096e-6, 1e-12);
    pf_graph_destroy(&g);
}

static void test_bert_large_params(void)
{
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_BERT);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_EQUAL(pf_graph_microbatch(g), 8);
    /* Per layer 12h^2 + 13h: q, k, v, out 4(h^2 + h); fc1 4h^2 + 4h; fc2 4h^2 + h; two
     * layernorms 2 x 2h. h = 1024: 12582912 + 13312 = 12596224 elements, x 2 bytes. */
    double per_layer = 12596224.0 * 2;
    for (int l = 0; l < 24; l++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "layers.%d.", l);
        double sum = 0;
        for (int v = 0; v < pf_graph_nops(g); v++)
            if (!strncmp(pf_graph_op(g, v)->name, prefix, strlen(prefix)))
                sum += pf_graph_op(g, v)->param_bytes;
        PF_ASSERT_CLOSE(sum, per_layer, 0);
    }
    /* + embed (30522 + 512 + 2) x 1024 = 31780864, final_ln 2048, head.dense 1049600,
     * head.ln 2048, head.decoder 1024 x 30522 + 30522 = 31285050:
     * 31780864 + 24 x 12596224 + 2048 + 1049600 + 2048 + 31285050 = 366428986 (Parmesan
     * Table VII lists 365M for BERT-L) */
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), 366428986.0 * 2, 0);
    pf_graph_destroy(&g);
}

static double compute_flops(const pf_graph_t *g, double flops_per_ms)
{
    double ms = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *t = pf_graph_op(g, v)->type;
        if (!strcmp(t, "conv") || !strcmp(t, "linear"))
            ms += pf_graph_op(g, v)->fwd_ms;
    }
    return ms * flops_per_ms;
}

static void test_resnet(void)
{
    /* torchvision's counts (conv weights, batchnorm scale and shift, fc weight and bias; no
     * running statistics) and forward multiply-adds per image in GMACs */
    static const struct {
        int depth, ops;
        double params, gmacs;
    } want[] = {{18, 68, 11689512, 1.814}, {50, 174, 25557032, 4.089},
                {101, 344, 44549160, 7.801}, {152, 514, 60192808, 11.514}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        pf_model_opts_t o;
        pf_model_opts_init(&o, PF_MODEL_RESNET);
        o.depth = want[i].depth, o.microbatch = 1, o.tflops = 2, o.efficiency = 0.5;
        pf_graph_t *g = build(&o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g), want[i].params * 2, 0);
        CU_ASSERT_EQUAL(pf_graph_nops(g), want[i].ops);
        /* 1e12 FLOP/s = 1e9 FLOPs per ms; 2 FLOPs per MAC */
        PF_ASSERT_CLOSE(compute_flops(g, 1e9) / 2e9, want[i].gmacs, 1e-3);
        pf_graph_destroy(&g);
    }
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_RESNET);
    o.microbatch = 1, o.tflops = 2, o.efficiency = 0.5;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* the yardstick: ResNet-50 within 1 % of 25.56M */
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g) / 2, 25.56e6, 0.01);
    /* stem: 7x7/2 conv 3 -> 64 at 224: 2 x 112^2 x 64 x 3*49 = 236027904 FLOPs */
    PF_ASSERT_CLOSE(op(g, "stem.conv")->fwd_ms, 236027904e-9, 1e-12);
    /* bottleneck: 4 x 64 = 256 channels out of layer1, so layer1.0 projects; layer2.0 strides */
    const pf_op_t *ds = op(g, "layer2.0.downsample.conv");
    CU_ASSERT(ds->weight.dim[0] == 512 && ds->weight.dim[1] == 256 && ds->weight.dim[2] == 1);
    CU_ASSERT(ds->output.dim[2] == 28);
    CU_ASSERT(op_named(g, "layer1.0.downsample.conv") >= 0);
    CU_ASSERT(op_named(g, "layer1.1.downsample.conv") < 0);
    const pf_op_t *c2 = op(g, "layer2.1.conv2");
    CU_ASSERT(c2->weight.dim[0] == 128 && c2->weight.dim[3] == 3 && c2->output.dim[2] == 28);
    CU_ASSERT(op(g, "layer4.2.conv3")->output.dim[1] == 2048);
    CU_ASSERT(op(g, "layer4.2.conv3")->output.dim[3] == 7);
    /* residual add reads bn3 and the block input (an identity skip in layer1.1) */
    CU_ASSERT_EQUAL(in_degree(g, "layer1.1.add"), 2);
    /* [1, 256, 56, 56] fp16 = 1605632 B */
    PF_ASSERT_CLOSE(edge_bytes(g, "layer1.0.relu", "layer1.1.add"), 1605632, 0);
    PF_ASSERT_CLOSE(op(g, "fc")->param_bytes, (2048.0 * 1000 + 1000) * 2, 0);
    pf_graph_destroy(&g);

    o.depth = 18; /* basic blocks: 64 -> 64 in layer1 needs no projection */
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT(op_named(g, "layer1.0.downsample.conv") < 0);
    CU_ASSERT(op_named(g, "layer2.0.downsample.conv") >= 0);
    CU_ASSERT(op_named(g, "layer1.0.conv3") < 0);
    pf_graph_destroy(&g);
}

static void test_unet_skips(void)
{
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_UNET);
    o.levels = 3, o.channels = 4, o.image = 16, o.microbatch = 2;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* per level: enc conv,relu,conv,relu,pool 5 + dec up,concat,conv,relu,conv,relu 6;
     * mid 4; head 1: 11 x 3 + 5 = 38 ops. A chain through them (37 edges) + 3 skips = 40. */
    CU_ASSERT_EQUAL(pf_graph_nops(g), 38);
    CU_ASSERT_EQUAL(pf_graph_nedges(g), 40);
    /* skip i: [b, 4 x 2^i, 16 / 2^i, 16 / 2^i] fp16 = 2 x 4 x 256 x 2 / 2^i = 4096 / 2^i B */
    int skips = 0;
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        const char *s = pf_graph_op(g, ed->src)->name, *d = pf_graph_op(g, ed->dst)->name;
        if (!strncmp(s, "enc.", 4) && !strncmp(d, "dec.", 4)) {
            int i = s[4] - '0';
            char want_s[32], want_d[32];
            snprintf(want_s, sizeof want_s, "enc.%d.relu2", i);
            snprintf(want_d, sizeof want_d, "dec.%d.concat", i);
            CU_ASSERT_STRING_EQUAL(s, want_s);
            CU_ASSERT_STRING_EQUAL(d, want_d);
            PF_ASSERT_CLOSE(ed->bytes, 4096 >> i, 0);
            skips++;
        }
    }
    CU_ASSERT_EQUAL(skips, 3);
    PF_ASSERT_CLOSE(edge_bytes(g, "enc.0.relu2", "dec.0.concat"), 4096, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "enc.2.relu2", "dec.2.concat"), 1024, 0);
    /* up-conv of level 2: [2, 32, 2, 2] -> [2, 16, 4, 4]; concat doubles the channels */
    const pf_op_t *up = op(g, "dec.2.up");
    CU_ASSERT(up->output.dim[1] == 16 && up->output.dim[2] == 4);
    CU_ASSERT(op(g, "dec.2.concat")->output.dim[1] == 32);
    CU_ASSERT(op(g, "enc.2.conv1")->weight.dim[0] == 16 && op(g, "enc.2.conv1")->weight.dim[1] == 8);
    CU_ASSERT(op(g, "head")->output.dim[1] == 2);
    pf_graph_destroy(&g);
}

static void test_names_and_types(void)
{
    static const char *types[] = {"matmul",  "linear",  "embedding", "conv",   "layernorm",
                                  "batchnorm", "softmax", "add",     "gelu",   "relu",
                                  "maxpool", "avgpool", "concat",    "dropout", "rmsnorm",
                                  "rotary",  "silu",    "mul",       "moe_dispatch",
                                  "moe_combine"};
    pf_model_opts_t o;
    for (int kind = 0; kind < PF_MODEL_NKINDS; kind++) {
        pf_model_opts_init(&o, (pf_model_kind_t)kind);
        if (kind <= PF_MODEL_BERT)
            tiny_gpt(&o, 4), o.kind = (pf_model_kind_t)kind;
        if (kind == PF_MODEL_UNET)
            o.levels = 3, o.channels = 8, o.image = 64;
        if (kind == PF_MODEL_LLAMA || kind == PF_MODEL_MOE || kind == PF_MODEL_VIT)
            o.layers = 4, o.hidden = 16, o.heads = 4, o.kv_heads = 2, o.ffn = 32, o.seq = 8,
            o.vocab = 32, o.microbatch = 2, o.image = 32, o.patch = 8, o.experts = 4;
        pf_graph_t *g = build(&o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        for (int v = 0; v < pf_graph_nops(g); v++) {
            const pf_op_t *x = pf_graph_op(g, v);
            int known = 0;
            for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
                known |= !strcmp(x->type, types[t]);
            CU_ASSERT(known);
            CU_ASSERT_EQUAL(x->id, v);
            CU_ASSERT(x->fwd_ms > 0 && x->output.ndim > 0);
        }
        const char *names[PF_MODEL_NKINDS][3] = {
            {"embed", "layers.3.attn.q", "layers.3.mlp.fc1"},
            {"embed", "layers.3.attn.q", "head.decoder"},
            {"layer2.1.conv2", "layer3.5.bn3", "fc"},
            {"enc.2.conv1", "dec.2.up", "mid.conv2"},
            {"layers.3.attn.rotary_k", "layers.3.mlp.gate", "layers.3.mlp.down"},
            {"layers.3.moe.router", "layers.3.moe.experts.3.down", "layers.3.moe.combine"},
            {"patch_embed", "layers.3.attn.dropout", "head"}};
        for (int i = 0; i < 3; i++)
            CU_ASSERT(op_named(g, names[kind][i]) >= 0);
        pf_graph_destroy(&g);
    }
    pf_model_kind_t k;
    CU_ASSERT_EQUAL(pf_model_parse_kind("unet", &k), PF_OK);
    CU_ASSERT_EQUAL(k, PF_MODEL_UNET);
    CU_ASSERT_EQUAL(pf_model_parse_kind("moe", &k), PF_OK);
    CU_ASSERT_EQUAL(k, PF_MODEL_MOE);
    CU_ASSERT_STRING_EQUAL(pf_model_kind_name(PF_MODEL_VIT), "vit");
    CU_ASSERT_EQUAL(pf_model_parse_kind("swin", &k), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_model_parse_kind(NULL, &k), PF_EINPUT);
}

/* Each bad option and the flag its message must name. */
static void test_bad_options(void)
{
    static const struct {
        pf_model_kind_t kind;
        const char *field;
        long long value;
        const char *expect;
    } bad[] = {
        {PF_MODEL_BERT, "hidden", 1000, "heads: hidden 1000 is not divisible by 16 heads"},
        {PF_MODEL_GPT, "hidden", 0, "hidden: must be positive (got 0)"},
        {PF_MODEL_GPT, "layers", -3, "layers: must be positive"},
        {PF_MODEL_GPT, "layers", 10001, "layers: 10001 is more than 10000"},
        {PF_MODEL_BERT, "microbatch", 0, "microbatch: must be positive"},
        /* 8 x 16 x (2^30)^2 scores; 2^30 x 2^32 weight; 8 x 2^30 x 2^30 logits */
        {PF_MODEL_BERT, "seq", 1 << 30, "microbatch x heads x seq^2"},
        {PF_MODEL_BERT, "hidden", 1 << 30, "hidden x ffn/vocab"},
        {PF_MODEL_GPT, "ffn", -1, "ffn: must be positive"},
        {PF_MODEL_RESNET, "depth", 42, "depth: 42 is not one of 18, 34, 50, 101, 152"},
        {PF_MODEL_RESNET, "image", 0, "image: must be positive"},
        {PF_MODEL_RESNET, "image", 2000000000, "microbatch x image^2"},
        {PF_MODEL_UNET, "image", 100, "image: 100 is not divisible by 2^levels = 16"},
        {PF_MODEL_UNET, "levels", 31, "levels: 31 is more than 30"},
        {PF_MODEL_UNET, "channels", 1 << 30, "channels x 2^levels"},
        {PF_MODEL_UNET, "classes", 0, "classes: must be positive"},
        {PF_MODEL_GPT, "precision", 3, "precision_bytes: 3 bytes"},
        {PF_MODEL_GPT, "efficiency", 2, "efficiency: must lie in (0, 1]"},
        {PF_MODEL_GPT, "tflops", 0, "tflops: must be positive"},
        {PF_MODEL_UNET, "hbm", -1, "hbm_gbps: must be positive"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pf_model_opts_t o;
        pf_model_opts_init(&o, bad[i].kind);
        const char *f = bad[i].field;
        int v = (int)bad[i].value;
        if (!strcmp(f, "hidden")) o.hidden = v;
        else if (!strcmp(f, "layers")) o.layers = v;
        else if (!strcmp(f, "microbatch")) o.microbatch = v;
        else if (!strcmp(f, "seq")) o.seq = v;
        else if (!strcmp(f, "vocab")) o.vocab = v;
        else if (!strcmp(f, "ffn")) o.ffn = v;
        else if (!strcmp(f, "depth")) o.depth = v;
        else if (!strcmp(f, "image")) o.image = v;
        else if (!strcmp(f, "levels")) o.levels = v;
        else if (!strcmp(f, "channels")) o.channels = v;
        else if (!strcmp(f, "classes")) o.classes = v;
        else if (!strcmp(f, "precision")) o.precision_bytes = v;
        else if (!strcmp(f, "efficiency")) o.efficiency = v;
        else if (!strcmp(f, "tflops")) o.tflops = v;
        else if (!strcmp(f, "hbm")) o.hbm_gbps = v;
        char err[256] = "";
        pf_graph_t *g = (pf_graph_t *)&o; /* must come back NULL */
        CU_ASSERT_EQUAL(pf_model_build(&o, &g, err, sizeof err), PF_EINPUT);
        CU_ASSERT_PTR_NULL(g);
        if (strncmp(err, bad[i].expect, strlen(bad[i].expect)) != 0)
            fprintf(stderr, "\n  case %zu: got '%s', want prefix '%s'\n", i, err, bad[i].expect);
        CU_ASSERT(strncmp(err, bad[i].expect, strlen(bad[i].expect)) == 0);
    }
}

/* Same options, same file; the file reads back to a graph with the same numbers. */
static void test_deterministic_round_trip(void)
{
    char err[256], a[700], b[700];
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_UNET);
    o.levels = 3, o.channels = 8, o.image = 32;
    snprintf(a, sizeof a, "%s/u1.json", pf_test_tmpdir());
    snprintf(b, sizeof b, "%s/u2.json", pf_test_tmpdir());
    pf_graph_t *g1 = build(&o), *g2 = build(&o), *back = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(g1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g2);
    CU_ASSERT_EQUAL(pf_graph_save(g1, a, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_save(g2, b, err, sizeof err), PF_OK);
    char cmd[1500], out[256];
    snprintf(cmd, sizeof cmd, "cmp '%s' '%s'", a, b);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_load(a, &back, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_nedges(back), pf_graph_nedges(g1));
    CU_ASSERT_EQUAL(pf_graph_total_cu_ms(back), pf_graph_total_cu_ms(g1)); /* bit for bit */
    CU_ASSERT_STRING_EQUAL(pf_graph_name(back), "unet-3l-8c");
    pf_graph_destroy(&back);
    pf_graph_destroy(&g1);
    pf_graph_destroy(&g2);
}

static void test_cli(void)
{
    static const struct {
        const char *args;
        int status;
        const char *expect; /* in the output, or NULL */
    } cases[] = {
        {"model --help", 0, "usage: planfarm model"},
        {"model bert --layers 2 -o %s/b.json", 0, NULL},
        {"check %s/b.json", 0, "graph bert-2l-1024h: 40 ops, 47 edges, micro-batch 8"},
        /* 1 + 80 x 18 + 2 ops */
        {"model llama --preset 70b | %s check -", 0, "graph llama-80l-8192h: 1443 ops"},
        /* patch_embed, embed, 2 x 17, final_ln, head */
        {"model vit --preset l --layers 2 | %s check -", 0, "graph vit-2l-1024h: 38 ops"},
        /* 1 + (16 + 5 x 4) + 2 */
        {"model moe --layers 1 --experts 4 | %s check -", 0, "graph moe-1l-4096h-4e: 39 ops"},
        {"model llama --preset 8b", 2, "--preset: '8b' is not a llama preset (7b, 13b, 70b, 405b)"},
        {"model gpt --preset 7b", 2, "--preset: gpt has no presets"},
        {"model gpt --kv-heads 2", 2, "--kv-heads does not apply to gpt"},
        {"model llama --kv-heads 5", 2, "--kv-heads: 5 does not divide 32 heads"},
        {"model moe --top-k 9", 2, "--top-k: 9 is not in [1, 8 experts]"},
        {"model vit --patch 15", 2, "--patch: image 224 is not divisible by patch 15"},
        {"model unet --levels 2 --image 32 --channels 4 --name u -o - | %s check -", 0,
         "graph u: 27 ops, 28 edges"},
        {"model bert --hidden 1000", 2, "--heads: hidden 1000 is not divisible by 16 heads"},
        {"model resnet --depth 42", 2, "--depth: 42 is not one of"},
        {"model gpt --depth 50", 2, "--depth does not apply to gpt"},
        {"model gpt --hidden 0", 2, "--hidden: 0 is outside"},
        {"model gpt --precision fp64", 2, "--precision: 'fp64'"},
        {"model swin", 2, "'swin' is not a model kind"},
        {"model", 2, "expected one model kind"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[600], cmd[1500], out[4096];
        if (strstr(cases[i].args, "| %s"))
            snprintf(args, sizeof args, cases[i].args, pf_test_bin());
        else
            snprintf(args, sizeof args, cases[i].args, pf_test_tmpdir());
        snprintf(cmd, sizeof cmd, "%s %s", pf_test_bin(), args);
        int st = pf_test_run(cmd, out, sizeof out);
        if (st != cases[i].status || (cases[i].expect && !strstr(out, cases[i].expect)))
            fprintf(stderr, "\n  '%s': status %d, output:\n%s\n", cmd, st, out);
        CU_ASSERT_EQUAL(st, cases[i].status);
        if (cases[i].expect)
            CU_ASSERT_PTR_NOT_NULL(strstr(out, cases[i].expect));
    }
}

/* Sum of mem_fwd_bytes over the ops whose name starts with `prefix`; `which` selects:
 * 0 all, 1 replicated under tensor parallelism, 2 the rest, 3 the attention core. */
enum { ALL_OPS, REPLICATED, SHARDED, CORE };
static double saved_bytes(const pf_graph_t *g, const char *prefix, int which)
{
    /* what stays whole on every rank under Megatron's split: the layernorm inputs, the Q/K/V
     * input (saved by q), the fc1 input and the two dropout masks on the residual path */
    static const char *replicated[] = {".ln1", ".ln2", ".attn.q", ".mlp.fc1",
                                       ".attn.out_dropout", ".mlp.dropout"};
    double sum = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *x = pf_graph_op(g, v);
        if (strncmp(x->name, prefix, strlen(prefix)))
            continue;
        int rep = 0;
        for (size_t k = 0; k < sizeof replicated / sizeof replicated[0]; k++) {
            size_t n = strlen(x->name), m = strlen(replicated[k]);
            rep |= n >= m && !strcmp(x->name + n - m, replicated[k]);
        }
        if (which == ALL_OPS || (which == REPLICATED && rep) || (which == SHARDED && !rep) ||
            (which == CORE && pf_training_selective_op(g, v)))
            sum += x->mem_fwd_bytes;
    }
    return sum;
}

static void test_korthikanti_layer(void)
{
    pf_model_opts_t o;
    tiny_gpt(&o, 2);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* b = 2, s = 8, h = 16, a = 4: sbh = 256, as^2b = 4 x 64 x 2 = 512; fp16, 1-byte masks.
     *   ln1 2sbh 512, q 2sbh 512, k 0, v 0, scores (Q, K) 4sbh 1024, softmax 2as^2b 1024,
     *   attn.dropout mask as^2b 512 + output 2as^2b 1024, context V 2sbh 512, out 2sbh 512,
     *   out_dropout mask sbh 256, ln2 512, fc1 512, gelu 8sbh 2048, fc2 8sbh 2048,
     *   mlp.dropout 256, residuals 0.
     * Sum 11264 = sbh(34 + 5as/h) = 256 x (34 + 5 x 4 x 8 / 16) = 256 x 44. */
    static const struct {
        const char *op;
        double bytes;
    } want[] = {{"ln1", 512},          {"attn.q", 512},        {"attn.k", 0},
                {"attn.v", 0},         {"attn.scores", 1024},  {"attn.softmax", 1024},
                {"attn.dropout", 1536}, {"attn.context", 512}, {"attn.out", 512},
                {"attn.out_dropout", 256}, {"attn.residual", 0}, {"ln2", 512},
                {"mlp.fc1", 512},      {"mlp.gelu", 2048},     {"mlp.fc2", 2048},
                {"mlp.dropout", 256},  {"mlp.residual", 0}};
    double sum = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "layers.1.%s", want[i].op);
        PF_ASSERT_CLOSE(op(g, name)->mem_fwd_bytes, want[i].bytes, 0);
        sum += want[i].bytes;
    }
    PF_ASSERT_CLOSE(sum, 11264, 0);
    PF_ASSERT_CLOSE(saved_bytes(g, "layers.1.", ALL_OPS), 11264, 0); /* no op left out */
    /* Tensor parallelism: replicated 10sbh = 2560, the rest 24sbh + 5as^2b = 6144 + 2560;
     * selective recomputation drops exactly 5as^2b = 2560 (softmax and attn.dropout). */
    PF_ASSERT_CLOSE(saved_bytes(g, "layers.1.", REPLICATED), 2560, 0);
    PF_ASSERT_CLOSE(saved_bytes(g, "layers.1.", SHARDED), 8704, 0);
    PF_ASSERT_CLOSE(saved_bytes(g, "layers.1.", CORE), 2560, 0);
    /* the generator's layer and the planner's selective-recomputation rule agree */
    CU_ASSERT(pf_training_selective_op(g, op_named(g, "layers.1.attn.softmax")));
    CU_ASSERT(pf_training_selective_op(g, op_named(g, "layers.1.attn.dropout")));
    CU_ASSERT(!pf_training_selective_op(g, op_named(g, "layers.1.attn.out_dropout")));
    CU_ASSERT(!pf_training_selective_op(g, op_named(g, "layers.1.mlp.dropout")));
    pf_graph_destroy(&g);

    /* Other shapes, GPT and BERT: sbh(34 + 5as/h) per layer; under t-way tensor parallelism
     * replicated + rest / t = sbh(10 + 24/t + 5as/(ht)). */
    static const struct {
        pf_model_kind_t kind;
        int b, s, h, a;
    } shapes[] = {{PF_MODEL_GPT, 3, 32, 64, 8}, {PF_MODEL_BERT, 1, 24, 96, 6},
                  {PF_MODEL_GPT, 2, 128, 48, 4}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        pf_model_opts_init(&o, shapes[i].kind);
        o.layers = 3, o.microbatch = shapes[i].b, o.seq = shapes[i].s, o.hidden = shapes[i].h;
        o.heads = shapes[i].a, o.vocab = 50;
        g = build(&o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        double sbh = (double)shapes[i].s * shapes[i].b * shapes[i].h;
        double ratio = 5.0 * shapes[i].a * shapes[i].s / shapes[i].h;
        for (int l = 0; l < 3; l++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "layers.%d.", l);
            PF_ASSERT_CLOSE(saved_bytes(g, prefix, ALL_OPS), sbh * (34 + ratio), 0);
            for (int t = 1; t <= 8; t *= 2)
                PF_ASSERT_CLOSE(saved_bytes(g, prefix, REPLICATED) +
                                    saved_bytes(g, prefix, SHARDED) / t,
                                sbh * (10 + 24.0 / t + ratio / t), 1e-12);
            PF_ASSERT_CLOSE(saved_bytes(g, prefix, CORE), sbh * ratio, 0);
        }
        pf_graph_destroy(&g);
    }
}

static double total_params(pf_model_kind_t kind, const char *preset, int *nops)
{
    pf_model_opts_t o;
    char err[256] = "";
    pf_model_opts_init(&o, kind);
    CU_ASSERT_EQUAL(pf_model_apply_preset(&o, preset, err, sizeof err), PF_OK);
    pf_graph_t *g = build(&o);
    if (!g)
        return -1;
    double p = pf_graph_total_param_bytes(g) / o.precision_bytes;
    *nops = pf_graph_nops(g);
    pf_graph_destroy(&g);
    return p;
}

static void test_llama(void)
{
    /* 7B: per layer q, out 2h^2 + k, v 2h(kv d) + gate, up, down 3hf + two RMSNorm scales 2h
     * = 2 x 4096^2 x 2 + 3 x 4096 x 11008 + 8192 = 67108864 + 135266304 + 8192 = 202383360;
     * x 32 = 6476267520; + embed and head 2 x 32000 x 4096 = 262144000 + final norm 4096
     * = 6738415616 (published: 6.74e9). Ops: embed + 18 per layer + final_ln + head. */
    static const struct {
        const char *preset;
        double published;
        int layers;
    } want[] = {{"7b", 6.74e9, 32}, {"13b", 13.0e9, 40}, {"70b", 69e9, 80}, {"405b", 405e9, 126}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int nops = 0;
        double p = total_params(PF_MODEL_LLAMA, want[i].preset, &nops);
        PF_ASSERT_CLOSE(p / want[i].published, 1.0, 0.02);
        CU_ASSERT_EQUAL(nops, 1 + 18 * want[i].layers + 2);
        if (i == 0)
            PF_ASSERT_CLOSE(p, 6738415616.0, 0);
    }

    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    CU_ASSERT_EQUAL(o.hidden, 4096); /* the default is 7b */
    char err[256];
    CU_ASSERT_EQUAL(pf_model_apply_preset(&o, "70b", err, sizeof err), PF_OK);
    o.layers = 2;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    /* 64 heads of d = 128, 8 kv heads: k and v are 8192 -> 1024 */
    const pf_op_t *k = op(g, "layers.1.attn.k");
    CU_ASSERT(k->weight.ndim == 2 && k->weight.dim[0] == 8192 && k->weight.dim[1] == 1024);
    CU_ASSERT(k->output.ndim == 3 && k->output.dim[1] == 4096 && k->output.dim[2] == 1024);
    PF_ASSERT_CLOSE(k->param_bytes, 8192.0 * 1024 * 2, 0); /* no bias */
    const pf_op_t *sc = op(g, "layers.1.attn.scores");
    CU_ASSERT(sc->output.ndim == 4 && sc->output.dim[1] == 64 && sc->output.dim[3] == 4096);
    const pf_op_t *gate = op(g, "layers.1.mlp.gate");
    CU_ASSERT(gate->weight.dim[0] == 8192 && gate->weight.dim[1] == 28672);
    CU_ASSERT(op(g, "layers.1.mlp.down")->weight.dim[0] == 28672);
    const pf_op_t *norm = op(g, "layers.1.ln1");
    CU_ASSERT_STRING_EQUAL(norm->type, "rmsnorm");
    CU_ASSERT(norm->weight.ndim == 1 && norm->weight.dim[0] == 8192);
    PF_ASSERT_CLOSE(norm->param_bytes, 8192 * 2, 0);
    CU_ASSERT_EQUAL(in_degree(g, "layers.1.mlp.mul"), 2); /* silu(gate) * up */
    CU_ASSERT(op_named(g, "layers.1.attn.dropout") < 0);  /* no dropout in llama */
    pf_graph_destroy(&g);

    /* Tiny GQA: b 2, s 8, h 16, a 4, kv 2 (d 4): K is [2, 8, 8] = 256 B. scores save the
     * rotated Q 512 + K 256; context saves V 256; the rotations save nothing.
     * FLOPs with f 32: q 2bsh^2 = 8192, k 2bsh(kv d) = 4096, scores 2bs^2h = 4096. */
    pf_model_opts_init(&o, PF_MODEL_LLAMA);
    o.layers = 1, o.hidden = 16, o.heads = 4, o.kv_heads = 2, o.ffn = 32, o.seq = 8;
    o.vocab = 32, o.microbatch = 2, o.tflops = 2, o.efficiency = 0.5;
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.scores")->mem_fwd_bytes, 768, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.context")->mem_fwd_bytes, 256, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.rotary_k")->mem_fwd_bytes, 0, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.softmax")->mem_fwd_bytes, 1024, 0); /* 2as^2b */
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.q")->fwd_ms, 8192e-9, 1e-12);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.k")->fwd_ms, 4096e-9, 1e-12);
    PF_ASSERT_CLOSE(op(g, "layers.0.attn.scores")->fwd_ms, 4096e-9, 1e-12);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.attn.rotary_k", "layers.0.attn.scores"), 256, 0);
    pf_graph_destroy(&g);
}

static void test_moe(void)
{
    /* Mixtral 8x7B: per layer attention 2 x 4096^2 + 2 x 4096 x 1024 = 41943040, experts
     * 8 x 3 x 4096 x 14336 = 1409286144, router 4096 x 8 = 32768, norms 8192: 1451270144;
     * x 32 = 46440644608 + 2 x 32000 x 4096 + 4096 = 46702792704 (published 46.7B).
     * Ops: 1 + 32 x (16 + 5 x 8) + 2 = 1795. */
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_MOE);
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(pf_graph_total_param_bytes(g) / 2, 46702792704.0, 0);
    CU_ASSERT_EQUAL(pf_graph_nops(g), 1795);
    /* tokens x k / E = 4096 x 2 / 8 = 1024 rows per expert */
    const pf_op_t *gate = op(g, "layers.5.moe.experts.3.gate");
    CU_ASSERT(gate->input.ndim == 2 && gate->input.dim[0] == 1024 && gate->input.dim[1] == 4096);
    CU_ASSERT(gate->weight.dim[0] == 4096 && gate->weight.dim[1] == 14336);
    CU_ASSERT(pf_model_op_expert(gate));
    CU_ASSERT(!pf_model_op_expert(op(g, "layers.5.moe.router")));
    CU_ASSERT(!pf_model_op_expert(op(g, "layers.5.moe.experts.3.silu"))); /* no weight */
    int experts = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        experts += pf_model_op_expert(pf_graph_op(g, v));
    CU_ASSERT_EQUAL(experts, 32 * 8 * 3);
    CU_ASSERT_EQUAL(in_degree(g, "layers.5.moe.combine"), 9); /* 8 experts + the router */
    pf_graph_destroy(&g);

    /* Tiny: b 2, s 8, h 16, f 32, E 4, k 2: 2 x 8 x 2 / 4 = 8 rows per expert.
     * gate 2 x 8 x 16 x 32 = 8192 FLOPs (a dense MLP over all 16 tokens: 16384; k / E = 1/2).
     * The dispatch -> gate edge carries the 8 routed rows: 8 x 16 x 2 = 256 B. */
    pf_model_opts_init(&o, PF_MODEL_MOE);
    o.layers = 1, o.hidden = 16, o.heads = 4, o.kv_heads = 2, o.ffn = 32, o.seq = 8;
    o.vocab = 32, o.microbatch = 2, o.experts = 4, o.top_k = 2, o.tflops = 2;
    o.efficiency = 0.5;
    g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    PF_ASSERT_CLOSE(op(g, "layers.0.moe.experts.2.gate")->fwd_ms, 8192e-9, 1e-12);
    PF_ASSERT_CLOSE(op(g, "layers.0.moe.experts.2.down")->fwd_ms, 8192e-9, 1e-12);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.moe.dispatch", "layers.0.moe.experts.2.gate"), 256, 0);
    PF_ASSERT_CLOSE(edge_bytes(g, "layers.0.moe.experts.2.down", "layers.0.moe.combine"), 256, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.moe.experts.2.gate")->mem_fwd_bytes, 256, 0);
    PF_ASSERT_CLOSE(op(g, "layers.0.moe.experts.2.up")->mem_fwd_bytes, 0, 0);
    pf_graph_destroy(&g);

    char err[256] = "";
    pf_model_opts_init(&o, PF_MODEL_MOE);
    o.seq = 4095; /* 4095 x 2 = 8190 routed tokens over 8 experts */
    CU_ASSERT_EQUAL(pf_model_build(&o, &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "experts: 8190 routed tokens"));
    o.seq = 4096, o.experts = 0;
    CU_ASSERT_EQUAL(pf_model_build(&o, &g, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "experts: 0 is not in [1, 1024]"));
}

static void test_vit(void)
{
    /* ViT-B/16: patch conv 768 x 3 x 16 x 16 + 768 = 590592; class token 768 and positions
     * 197 x 768 = 151296; 12 layers of 12h^2 + 13h = 7087872; final_ln 1536; head
     * 768 x 1000 + 1000 = 769000: 86567656 (timm's vit_base_patch16_224 count; "86M" in
     * Dosovitskiy et al. Table 1). L/16 304326632 ("307M"), H/14 632045800 ("632M"). */
    static const struct {
        const char *preset;
        double params;
        int layers;
    } want[] = {{"b", 86567656, 12}, {"l", 304326632, 24}, {"h", 632045800, 32}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int nops = 0;
        PF_ASSERT_CLOSE(total_params(PF_MODEL_VIT, want[i].preset, &nops), want[i].params, 0);
        CU_ASSERT_EQUAL(nops, 2 + 17 * want[i].layers + 2);
    }
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_VIT);
    o.layers = 1;
    pf_graph_t *g = build(&o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    const pf_op_t *pe = op(g, "patch_embed");
    CU_ASSERT(pe->weight.dim[0] == 768 && pe->weight.dim[2] == 16 && pe->output.dim[2] == 14);
    /* (224 / 16)^2 + 1 = 197 tokens */
    CU_ASSERT(op(g, "embed")->output.dim[1] == 197);
    const pf_op_t *sc = op(g, "layers.0.attn.scores");
    CU_ASSERT(sc->output.dim[0] == 32 && sc->output.dim[1] == 12 && sc->output.dim[3] == 197);
    const pf_op_t *hd = op(g, "head");
    CU_ASSERT(hd->input.ndim == 2 && hd->input.dim[1] == 768 && hd->output.dim[1] == 1000);
    /* the head reads the class token only: 32 x 768 x 2 B */
    PF_ASSERT_CLOSE(edge_bytes(g, "final_ln", "head"), 32.0 * 768 * 2, 0);
    pf_graph_destroy(&g);
    char err[256] = "";
    pf_model_opts_init(&o, PF_MODEL_VIT);
    CU_ASSERT_EQUAL(pf_model_apply_preset(&o, "g", err, sizeof err), PF_EINPUT);
    CU_ASSERT_STRING_EQUAL(err, "preset: 'g' is not a vit preset (b, l, h)");
}

void pf_suite_models(void)
{
    CU_pSuite s = CU_add_suite("models", NULL, NULL);
    CU_add_test(s, "per-op FLOPs of one layer = 24bsh^2 + 4bs^2h", test_layer_flops);
    CU_add_test(s, "roofline of memory-bound ops, both sides", test_roofline);
    CU_add_test(s, "mem_fwd / mem_bwd / params / shapes by hand", test_memory_and_shapes);
    CU_add_test(s, "2-layer op and edge counts, residual and attention wiring",
                test_transformer_wiring);
    CU_add_test(s, "saved activations per layer = sbh(34 + 5as/h), TP and selective split",
                test_korthikanti_layer);
    CU_add_test(s, "BERT-Large: 12h^2 + 13h per layer, total", test_bert_large_params);
    CU_add_test(s, "Llama 2/3.1 presets: parameters, ops, GQA shapes and bytes", test_llama);
    CU_add_test(s, "MoE (Mixtral 8x7B): parameters, expert rows and marks", test_moe);
    CU_add_test(s, "ViT-B/L/H: parameters, ops, patch tokens", test_vit);
    CU_add_test(s, "ResNet-18/50/101/152 params and MACs vs torchvision", test_resnet);
    CU_add_test(s, "U-Net long skips carry the activation bytes", test_unet_skips);
    CU_add_test(s, "hierarchical names and known types", test_names_and_types);
    CU_add_test(s, "bad options name the flag", test_bad_options);
    CU_add_test(s, "deterministic, round trip", test_deterministic_round_trip);
    CU_add_test(s, "planfarm model: output, check, exit statuses", test_cli);
}
