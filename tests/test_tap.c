/* tap: PRUNEGRAPH, the sliced enumeration, Megatron-LM rediscovered on GPT and BERT, the
 * rewrite onto every instance, T = 1, and a tiny block worked by hand. */
#include "planner/inputs/model.h"
#include "planner/inputs/model_build.h"
#include "planner/tp/tap.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdlib.h>
#include <string.h>

#define SH(...)                                                                                  \
    ((pf_shape_t){(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* b = 8, s = 512, h = 1024, 16 heads, fp16: one activation s b h 2 = 8388608 bytes. */
#define ACT_BYTES (8.0 * 512 * 1024 * 2)

static pf_graph_t *transformer(pf_model_kind_t kind, int layers)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, kind);
    mo.layers = layers, mo.hidden = 1024, mo.heads = 16, mo.seq = 512, mo.microbatch = 8;
    mo.vocab = 1024;
    if (pf_model_build(&mo, &g, err, sizeof err))
        fprintf(stderr, "\n  model: %s\n", err);
    return g;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int unit_named(const pf_tap_units_t *u, const char *name)
{
    pf_tap_units_info_t info;
    for (int k = 0; k < pf_tap_units_count(u); k++)
        if (pf_tap_units_info(u, k, &info) == PF_OK && !strcmp(info.name, name))
            return k;
    return -1;
}

/* Ops of layer 0 counted from the names, so dropout or other additions keep the test valid. */
static void layer0_counts(const pf_graph_t *g, int *nops, int *nweights)
{
    *nops = *nweights = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        if (!strncmp(pf_graph_op(g, v)->name, "layers.0.", 9)) {
            ++*nops;
            *nweights += pf_graph_op(g, v)->param_bytes > 0;
        }
}

static void test_prune_graph(void)
{
    char err[256];
    pf_graph_t *g = transformer(PF_MODEL_GPT, 4);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    int k = unit_named(u, "layers.#"), nops, nw;
    CU_ASSERT_FATAL(k >= 0);
    layer0_counts(g, &nops, &nw);
    pf_tap_units_info_t info;
    CU_ASSERT_EQUAL(pf_tap_units_info(u, k, &info), PF_OK);
    CU_ASSERT_EQUAL(info.ninstances, 4);
    CU_ASSERT_EQUAL(info.nops, nops);
    CU_ASSERT_EQUAL(info.nweights, nw); /* ln1, q, k, v, out, ln2, fc1, fc2 today: 3^8 plans */
    uint64_t p3 = 1;
    for (int i = 0; i < nw; i++)
        p3 *= 3;
    CU_ASSERT_EQUAL(info.nplans, p3);
    /* instance 2 holds exactly layers.2.*, in the representative's order */
    const int *i0 = pf_tap_units_instance(u, k, 0), *i2 = pf_tap_units_instance(u, k, 2);
    for (int j = 0; j < nops; j++) {
        const char *a = pf_graph_op(g, i0[j])->name, *b = pf_graph_op(g, i2[j])->name;
        CU_ASSERT(!strncmp(a, "layers.0.", 9) && !strncmp(b, "layers.2.", 9));
        CU_ASSERT_STRING_EQUAL(a + 9, b + 9);
        CU_ASSERT_EQUAL(pf_tap_units_of(u, i2[j]), k);
    }
    /* the rest: embed alone, final_ln with the head (one connected component) */
    CU_ASSERT_EQUAL(pf_tap_units_count(u), 3);
    CU_ASSERT(unit_named(u, "embed") >= 0 && unit_named(u, "final_ln") >= 0);
    CU_ASSERT_PTR_NULL(pf_tap_units_instance(u, k, 4));
    pf_tap_units_destroy(&u);
    pf_tap_units_destroy(&u);
    CU_ASSERT_PTR_NULL(u);
    pf_graph_destroy(&g);
}

/* in -> three "blk.N" blocks of lin -> lin; blk.1's first linear is wider: only blk.0 and
 * blk.2 share a plan. */
static void test_structural_hash(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("h", 1);
    pf_op_t in = {.id = 99, .name = "in", .type = "input", .output = SH(4, 16)};
    int prev = pf_graph_add_op(g, &in);
    for (int i = 0; i < 3; i++) {
        int64_t f = i == 1 ? 32 : 16;
        char n1[32], n2[32];
        snprintf(n1, sizeof n1, "blk.%d.lin", i);
        snprintf(n2, sizeof n2, "blk.%d.act", i);
        pf_op_t lin = {.id = 2 * i, .name = n1, .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                       .param_bytes = 16.0 * f * 2, .weight = SH(16, f), .input = SH(4, 16),
                       .output = SH(4, f)};
        pf_op_t act = {.id = 2 * i + 1, .name = n2, .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                       .param_bytes = 16.0 * f * 2, .weight = SH(f, 16), .input = SH(4, f),
                       .output = SH(4, 16)};
        int a = pf_graph_add_op(g, &lin), b = pf_graph_add_op(g, &act);
        pf_graph_add_edge(g, prev, a, 128);
        pf_graph_add_edge(g, a, b, 8.0 * f);
        prev = b;
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    CU_ASSERT_EQUAL_FATAL(pf_tap_units_count(u), 3); /* in, {blk.0, blk.2}, {blk.1} */
    pf_tap_units_info_t a, b;
    pf_tap_units_info(u, 1, &a);
    pf_tap_units_info(u, 2, &b);
    CU_ASSERT_STRING_EQUAL(a.name, "blk.#");
    CU_ASSERT_STRING_EQUAL(b.name, "blk.#");
    CU_ASSERT_EQUAL(a.ninstances, 2); /* blk.0 and blk.2 */
    CU_ASSERT_EQUAL(b.ninstances, 1);
    CU_ASSERT_NOT_EQUAL(a.hash, b.hash);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, pf_tap_units_instance(u, 1, 1)[0])->name, "blk.2.lin");
    pf_tap_units_destroy(&u);
    /* min_duplicate 4: no family repeats that often, every op is planned with its component */
    o.min_duplicate = 4;
    u = pf_tap_units_new(g, &o, err, sizeof err);
    CU_ASSERT_EQUAL(pf_tap_units_count(u), 1);
    pf_tap_units_destroy(&u);
    pf_graph_destroy(&g);
}

/* Megatron-LM: q, k, v and fc1 by column (weight S(1)), out and fc2 by row (S(0)), layer norms
 * replicated; per layer two all-reduces of s b h 2 bytes forward and two backward, nothing
 * else; every layer the same. */
static void check_megatron(pf_model_kind_t kind, int T)
{
    char err[256];
    pf_graph_t *g = transformer(kind, 3);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {100, 0, 0};
    pf_tap_result_t r;
    CU_ASSERT_EQUAL_FATAL(pf_tap_plan(g, T, &link, &o, &r, err, sizeof err), PF_OK);
    int checked = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *op = pf_graph_op(g, v);
        const pf_tap_op_t *t = &r.ops[v];
        if (strncmp(op->name, "layers.", 7))
            continue;
        if (ends_with(op->name, ".attn.q") || ends_with(op->name, ".attn.k") ||
            ends_with(op->name, ".attn.v") || ends_with(op->name, ".mlp.fc1")) {
            CU_ASSERT(pf_sharding_equal(t->weight, pf_sharding_s(1)));
            CU_ASSERT(pf_sharding_equal(t->output, pf_sharding_s(2)));
            /* column-parallel: compute / T, no collective charged here, weight / T */
            PF_ASSERT_CLOSE(t->fwd_ms, op->fwd_ms / T, 1e-12);
            PF_ASSERT_CLOSE(t->param_bytes, op->param_bytes / T, 1e-12);
            checked++;
        } else if (ends_with(op->name, ".attn.out") || ends_with(op->name, ".mlp.fc2")) {
            CU_ASSERT(pf_sharding_equal(t->weight, pf_sharding_s(0)));
            CU_ASSERT(pf_sharding_equal(t->output, pf_sharding_p()));
            checked++;
        } else if (ends_with(op->name, ".ln1") || ends_with(op->name, ".ln2")) {
            CU_ASSERT(pf_sharding_equal(t->weight, pf_sharding_b()) && !t->split);
        } else if (ends_with(op->name, ".attn.scores") || ends_with(op->name, ".attn.softmax")) {
            CU_ASSERT(pf_sharding_equal(t->output, pf_sharding_s(1)) && t->split); /* heads */
        }
    }
    CU_ASSERT_EQUAL(checked, 3 * 6);
    int k = -1;
    for (int i = 0; i < r.nunits; i++)
        if (!strcmp(r.units[i].name, "layers.#"))
            k = i;
    CU_ASSERT_FATAL(k >= 0);
    const pf_tap_unit_plan_t *up = &r.units[k];
    CU_ASSERT_EQUAL(up->ninstances, 3);
    int ar[2] = {0, 0};
    /* a ring all-reduce of 8388608 bytes on 100 GB/s: 2 (T-1)/T x 8388608 / 1e8 ms */
    double ar_ms = 2.0 * (T - 1) / T * ACT_BYTES / 1e8;
    for (int c = 0; c < up->ncolls; c++) {
        CU_ASSERT_EQUAL(up->colls[c].kind, PF_CONV_ALLREDUCE);
        CU_ASSERT_EQUAL(up->colls[c].weight_grad, 0);
        PF_ASSERT_CLOSE(up->colls[c].tensor_bytes, ACT_BYTES, 1e-15);
        PF_ASSERT_CLOSE(up->colls[c].ms, ar_ms, 1e-12);
        ar[up->colls[c].backward]++;
    }
    CU_ASSERT_EQUAL(up->ncolls, 4);
    CU_ASSERT_EQUAL(ar[0], 2);
    CU_ASSERT_EQUAL(ar[1], 2);
    /* the same plan on every instance: each op of layers.i matches its layers.0 op */
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *n = pf_graph_op(g, v)->name;
        if (strncmp(n, "layers.", 7) || !strncmp(n, "layers.0.", 9))
            continue;
        char twin[128];
        snprintf(twin, sizeof twin, "layers.0.%s", strchr(n + 7, '.') + 1);
        int w = -1;
        for (int x = 0; x < pf_graph_nops(g) && w < 0; x++)
            if (!strcmp(pf_graph_op(g, x)->name, twin))
                w = x;
        CU_ASSERT_FATAL(w >= 0);
        CU_ASSERT(pf_sharding_equal(r.ops[v].weight, r.ops[w].weight));
        CU_ASSERT(pf_sharding_equal(r.ops[v].output, r.ops[w].output));
        CU_ASSERT_EQUAL(r.ops[v].split, r.ops[w].split);
        PF_ASSERT_CLOSE(r.ops[v].fwd_ms, r.ops[w].fwd_ms, 1e-12);
    }
    pf_tap_result_free(&r);
    pf_graph_destroy(&g);
}

/* An MoE layer holds more weighted ops than a unit may (ln1, q, k, v, out, ln2, router and
 * three per expert: 7 + 3 x 8): each expert is a unit (5 ops, 3 weights), the rest of the layer
 * another, where a unit per op could not pair a column-parallel linear with a row-parallel one
 * (each op's output had to end whole). Under T = 2 every expert runs as Megatron-LM's MLP: gate
 * and up by column, down by row, one all-reduce of its tokens x hidden forward and one backward;
 * its gate and up read a slice of the dispatch's output, which their rules see at their own
 * input shape. */
static void test_moe_expert_units(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_MOE);
    mo.layers = 2, mo.hidden = 256, mo.heads = 4, mo.kv_heads = 4, mo.ffn = 512;
    mo.seq = 64, mo.vocab = 512, mo.experts = 8, mo.top_k = 2, mo.microbatch = 1;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    pf_tap_units_info_t info;
    int rest = unit_named(u, "layers.#");
    CU_ASSERT_FATAL(rest >= 0);
    pf_tap_units_info(u, rest, &info);
    CU_ASSERT_EQUAL(info.nweights, 7);
    CU_ASSERT_EQUAL(info.ninstances, 2);
    for (int e = 0; e < 8; e++) {
        char name[64];
        snprintf(name, sizeof name, "layers.#.moe.experts.%d", e);
        int k = unit_named(u, name);
        CU_ASSERT_FATAL(k >= 0);
        pf_tap_units_info(u, k, &info);
        CU_ASSERT(info.nops == 5 && info.nweights == 3 && info.ninstances == 2);
    }
    pf_tap_units_destroy(&u);
    pf_sharding_link_t link = {100, 0, 0};
    pf_tap_result_t r;
    CU_ASSERT_EQUAL_FATAL(pf_tap_plan(g, 2, &link, &o, &r, err, sizeof err), PF_OK);
    int column = 0, row = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *n = pf_graph_op(g, v)->name;
        if (!strstr(n, ".experts."))
            continue;
        if (ends_with(n, ".gate") || ends_with(n, ".up"))
            column += pf_sharding_equal(r.ops[v].weight, pf_sharding_s(1));
        else if (ends_with(n, ".down"))
            row += pf_sharding_equal(r.ops[v].weight, pf_sharding_s(0)) &&
                   pf_sharding_equal(r.ops[v].output, pf_sharding_p());
    }
    CU_ASSERT_EQUAL(column, 2 * 8 * 2);
    CU_ASSERT_EQUAL(row, 2 * 8);
    /* 64 tokens x 2 of 8 experts = 16 per expert: 16 x 256 x 2 bytes all-reduced */
    double bytes = 16.0 * 256 * 2, ar_ms = 2.0 * (2 - 1) / 2 * bytes / 1e8;
    for (int i = 0; i < r.nunits; i++) {
        if (!strstr(r.units[i].name, ".experts."))
            continue;
        const pf_tap_unit_plan_t *up = &r.units[i];
        CU_ASSERT_EQUAL(up->ncolls, 2);
        for (int c = 0; c < up->ncolls; c++) {
            CU_ASSERT_EQUAL(up->colls[c].kind, PF_CONV_ALLREDUCE);
            PF_ASSERT_CLOSE(up->colls[c].tensor_bytes, bytes, 1e-12);
            PF_ASSERT_CLOSE(up->colls[c].ms, ar_ms, 1e-12);
        }
    }
    pf_tap_result_free(&r);
    pf_graph_destroy(&g);
}

/* A convolution reading the graph's input (ResNet's stem: no in-edge) has plans under T = 2:
 * its weight whole, or split by output channels; not by input channels (3 do not divide by 2).
 * Its rules once saw no input and gave it none, so every T > 1 failed on ResNet. */
static void test_stem_conv(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_RESNET);
    mo.depth = 18, mo.image = 32, mo.classes = 10, mo.microbatch = 4;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {100, 0, 0};
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(u);
    int stem = pf_graph_topo(g)[0], k = pf_tap_units_of(u, stem);
    pf_tap_units_info_t info;
    pf_tap_units_info(u, k, &info);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(g, stem)->type, "conv");
    /* the stem's unit (the conv, its batch norm: 9 plans, the conv's weight the low digit:
     * B, S(0), S(1)); brute force over them: feasible exactly when the conv's weight is not
     * S(1) and the norm's ([2, C]: scale and shift per channel) is whole or split by channel,
     * S(1), never S(0) */
    CU_ASSERT_EQUAL_FATAL(info.nplans, 9);
    uint64_t feasible = 0;
    for (uint64_t p = 0; p < info.nplans; p++) {
        pf_tap_slice_t one;
        CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 2, &link, &o, p, p + 1, &one, err, sizeof err),
                        PF_OK);
        CU_ASSERT_EQUAL(one.feasible, (uint64_t)(p % 3 != 2 && p / 3 != 1));
        feasible += one.feasible;
    }
    CU_ASSERT_EQUAL(feasible, 4);
    pf_tap_units_destroy(&u);
    pf_tap_result_t r;
    CU_ASSERT_EQUAL(pf_tap_plan(g, 2, &link, &o, &r, err, sizeof err), PF_OK);
    pf_tap_result_free(&r);
    pf_graph_destroy(&g);
}

static void test_megatron_gpt(void)
{
    check_megatron(PF_MODEL_GPT, 2);
    check_megatron(PF_MODEL_GPT, 4);
}

static void test_megatron_bert(void)
{
    check_megatron(PF_MODEL_BERT, 2);
    check_megatron(PF_MODEL_BERT, 8);
}

/* A head size apart from hidden / heads: hidden 1004 in 8 heads of 128 (q, k, v 1024 wide).
 * T 8 divides the heads and the q, k, v width but not hidden: q, k, v go by column, out by
 * row (its 1024 rows split; its 1004 columns cannot), the scores by head. */
static void test_head_dim_split(void)
{
    char err[256];
    pf_model_opts_t mo;
    pf_graph_t *g = NULL;
    pf_model_opts_init(&mo, PF_MODEL_GPT);
    mo.layers = 2, mo.hidden = 1004, mo.heads = 8, mo.head_dim = 128, mo.seq = 512;
    mo.microbatch = 8, mo.vocab = 1024, mo.ffn = 4096;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&mo, &g, err, sizeof err), PF_OK);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {100, 0, 0};
    pf_tap_result_t r;
    CU_ASSERT_EQUAL_FATAL(pf_tap_plan(g, 8, &link, &o, &r, err, sizeof err), PF_OK);
    int checked = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const char *name = pf_graph_op(g, v)->name;
        const pf_tap_op_t *t = &r.ops[v];
        if (ends_with(name, ".attn.q") || ends_with(name, ".attn.k") || ends_with(name, ".attn.v"))
            checked += pf_sharding_equal(t->weight, pf_sharding_s(1));
        else if (ends_with(name, ".attn.out"))
            checked += pf_sharding_equal(t->weight, pf_sharding_s(0));
        else if (ends_with(name, ".attn.scores"))
            checked += pf_sharding_equal(t->output, pf_sharding_s(1)) && t->split;
    }
    CU_ASSERT_EQUAL(checked, 2 * 5);
    pf_tap_result_free(&r);
    pf_graph_destroy(&g);
}

/* Slices [0, 1000), [1000, 4000), [4000, 3^N) merged = the whole space at once. */
static void test_slices_merge(void)
{
    char err[256];
    pf_graph_t *g = transformer(PF_MODEL_GPT, 2);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {50, 3, 0};
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    int k = unit_named(u, "layers.#");
    pf_tap_units_info_t info;
    pf_tap_units_info(u, k, &info);
    CU_ASSERT_FATAL(info.nplans > 4000);
    pf_tap_slice_t whole, part[3], merged;
    uint64_t cut[4] = {0, 1000, 4000, info.nplans};
    CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 4, &link, &o, 0, info.nplans, &whole, err,
                                      sizeof err), PF_OK);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 4, &link, &o, cut[i], cut[i + 1], &part[i],
                                          err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_tap_merge(part, 3, &merged, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(merged.feasible, whole.feasible);
    CU_ASSERT(whole.feasible > 0 && whole.feasible < info.nplans); /* norms never split */
    CU_ASSERT_EQUAL(merged.nbest, PF_TAP_KEEP);
    CU_ASSERT_EQUAL(merged.lo, 0);
    CU_ASSERT_EQUAL(merged.hi, info.nplans);
    for (int i = 0; i < merged.nbest; i++) {
        CU_ASSERT_EQUAL(merged.best[i].plan, whole.best[i].plan);
        CU_ASSERT_EQUAL(merged.best[i].time_ms, whole.best[i].time_ms);
        CU_ASSERT_EQUAL(merged.best[i].mem_bytes, whole.best[i].mem_bytes);
    }
    /* bad slices and merges */
    CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 4, &link, &o, 5, info.nplans + 1, &whole, err,
                                      sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, 99, 4, &link, &o, 0, 1, &whole, err, sizeof err),
                    PF_EINPUT);
    part[1].T = 2;
    CU_ASSERT_EQUAL(pf_tap_merge(part, 3, &merged, err, sizeof err), PF_EINPUT);
    pf_tap_units_destroy(&u);
    pf_graph_destroy(&g);
}

/* in -> b.0.{A, gelu, C} -> b.1.{A, gelu, C} -> out. A = linear [16, 64], C = linear [64, 16];
 * A: 1 + 2 ms, gelu 0.1 + 0.2, C 1 + 2; bytes in and out of a block 1e8, inside 4e8.
 * T = 2 on 100 GB/s (an all-reduce of 1e8 bytes: 2 (1/2) 1e8 / 1e11 s = 1 ms):
 *   Megatron (A S(1), C S(0), plan 2 + 1 x 3 = 5): compute (3 + 0.3 + 3) / 2 = 3.15 ms, the
 *     output's all-reduce 1 ms forward, the input gradient's all-reduce 1 ms backward = 5.15
 *   all B: 6.3 ms; A S(1), C B: 1.65 + 3 + all-gather of 4e8 (2 ms) + 1 = 7.65; A B, C S(0):
 *     3.3 + 1.5 + 1 + all-gather of the gradient 2 = 7.8; the rest pay larger collectives. */
static pf_graph_t *tiny(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("tiny", 2);
    pf_op_t in = {.id = 0, .name = "in", .type = "input", .output = SH(2, 8, 16)};
    int prev = pf_graph_add_op(g, &in), id = 1;
    for (int i = 0; i < 2; i++) {
        char na[32], ng[32], nc[32];
        snprintf(na, sizeof na, "b.%d.A", i);
        snprintf(ng, sizeof ng, "b.%d.gelu", i);
        snprintf(nc, sizeof nc, "b.%d.C", i);
        pf_op_t a = {.id = id++, .name = na, .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                     .param_bytes = 1000, .mem_fwd_bytes = 5e8, .mem_bwd_bytes = 5e8,
                     .weight = SH(16, 64), .input = SH(2, 8, 16), .output = SH(2, 8, 64)};
        pf_op_t ge = {.id = id++, .name = ng, .type = "gelu", .fwd_ms = 0.1, .bwd_ms = 0.2,
                      .input = SH(2, 8, 64), .output = SH(2, 8, 64)};
        pf_op_t c = {.id = id++, .name = nc, .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                     .param_bytes = 1000, .weight = SH(64, 16), .input = SH(2, 8, 64),
                     .output = SH(2, 8, 16)};
        int va = pf_graph_add_op(g, &a), vg = pf_graph_add_op(g, &ge), vc = pf_graph_add_op(g, &c);
        pf_graph_add_edge(g, prev, va, 1e8);
        pf_graph_add_edge(g, va, vg, 4e8);
        pf_graph_add_edge(g, vg, vc, 4e8);
        prev = vc;
    }
    pf_op_t out = {.id = id, .name = "out", .type = "identity", .input = SH(2, 8, 16),
                   .output = SH(2, 8, 16)};
    pf_graph_add_edge(g, prev, pf_graph_add_op(g, &out), 1e8);
    if (pf_graph_finalize(g, err, sizeof err))
        pf_graph_destroy(&g);
    return g;
}

static void test_tiny_by_hand(void)
{
    char err[256];
    pf_graph_t *g = tiny();
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {100, 0, 0};
    pf_tap_units_t *u = pf_tap_units_new(g, &o, err, sizeof err);
    int k = unit_named(u, "b.#");
    CU_ASSERT_FATAL(k >= 0);
    /* brute force: each of the 3^2 plans priced alone, the best by hand = the enumeration's */
    pf_tap_slice_t whole, one[9];
    CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 2, &link, &o, 0, 9, &whole, err, sizeof err), PF_OK);
    double best = 1e300;
    uint64_t arg = 0, feasible = 0;
    for (uint64_t p = 0; p < 9; p++) {
        CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 2, &link, &o, p, p + 1, &one[p], err,
                                          sizeof err), PF_OK);
        feasible += one[p].feasible;
        if (one[p].nbest && one[p].best[0].time_ms < best)
            best = one[p].best[0].time_ms, arg = p;
    }
    CU_ASSERT_EQUAL(feasible, whole.feasible);
    CU_ASSERT_EQUAL(arg, 5);
    CU_ASSERT_EQUAL(whole.best[0].plan, 5);
    PF_ASSERT_CLOSE(whole.best[0].time_ms, 5.15, 1e-12);
    PF_ASSERT_CLOSE(one[0].best[0].time_ms, 6.3, 1e-12);  /* all B */
    PF_ASSERT_CLOSE(one[2].best[0].time_ms, 7.65, 1e-12); /* A S(1), C B */
    PF_ASSERT_CLOSE(one[3].best[0].time_ms, 7.8, 1e-12);  /* A B, C S(0) */
    pf_tap_slice_t merged;
    CU_ASSERT_EQUAL(pf_tap_merge(one, 9, &merged, err, sizeof err), PF_OK);
    for (int i = 0; i < PF_TAP_KEEP; i++)
        CU_ASSERT_EQUAL(merged.best[i].plan, whole.best[i].plan);
    /* a memory limit just below Megatron's need: the winner changes, and needs less */
    pf_tap_slice_t lim;
    o.mem_limit_bytes = whole.best[0].mem_bytes - 1;
    CU_ASSERT_EQUAL(pf_tap_enum_slice(g, u, k, 2, &link, &o, 0, 9, &lim, err, sizeof err), PF_OK);
    CU_ASSERT(lim.feasible < whole.feasible);
    CU_ASSERT(lim.nbest == 0 ||
              (lim.best[0].plan != 5 && lim.best[0].mem_bytes < o.mem_limit_bytes));
    o.mem_limit_bytes = 0;

    /* the rewrite on b.1: A = 0.5 fwd, 1 + 1 (its input gradient's all-reduce) bwd;
     * C = 0.5 + 1 (the output's all-reduce) fwd, 1 bwd; params / 2; A's mem_fwd 5e8 = 4e8
     * output (split: 2e8) + 1e8 saved input (whole) -> 3e8; edges inside the block / 2 */
    pf_tap_result_t r;
    CU_ASSERT_EQUAL_FATAL(pf_tap_plan(g, 2, &link, &o, &r, err, sizeof err), PF_OK);
    int a1 = pf_graph_find(g, 4), c1 = pf_graph_find(g, 6);
    PF_ASSERT_CLOSE(r.ops[a1].fwd_ms, 0.5, 1e-12);
    PF_ASSERT_CLOSE(r.ops[a1].bwd_ms, 2.0, 1e-12);
    PF_ASSERT_CLOSE(r.ops[a1].bwd_comm_ms, 1.0, 1e-12);
    PF_ASSERT_CLOSE(r.ops[c1].fwd_ms, 1.5, 1e-12);
    PF_ASSERT_CLOSE(r.ops[c1].bwd_ms, 1.0, 1e-12);
    PF_ASSERT_CLOSE(r.ops[c1].param_bytes, 500, 1e-12);
    PF_ASSERT_CLOSE(r.ops[a1].mem_fwd_bytes, 3e8, 1e-12);
    double want_edges[] = {1e8, 2e8, 2e8, 1e8, 2e8, 2e8, 1e8};
    for (int e = 0; e < pf_graph_nedges(g); e++)
        PF_ASSERT_CLOSE(r.edge_bytes[e], want_edges[e], 1e-12);
    pf_graph_t *tg = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_tap_graph(g, &r, &tg, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_graph_nops(tg), pf_graph_nops(g));
    CU_ASSERT_STRING_EQUAL(pf_graph_op(tg, c1)->name, "b.1.C");
    PF_ASSERT_CLOSE(pf_graph_op(tg, c1)->fwd_ms, 1.5, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_edge(tg, 1)->bytes, 2e8, 1e-12);
    pf_graph_destroy(&tg);
    pf_tap_result_free(&r);
    pf_tap_result_free(&r);
    pf_tap_units_destroy(&u);
    pf_graph_destroy(&g);
}

/* T = 1: every number back exactly, no collective, and the graph the DP sees is the original. */
static void test_t1_identity(void)
{
    char err[256];
    pf_graph_t *g = transformer(PF_MODEL_BERT, 2), *tg = NULL;
    pf_tap_opts_t o;
    pf_tap_opts_init(&o);
    pf_sharding_link_t link = {25, 10, 0};
    pf_tap_result_t r;
    CU_ASSERT_EQUAL_FATAL(pf_tap_plan(g, 1, &link, &o, &r, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_tap_graph(g, &r, &tg, err, sizeof err), PF_OK);
    for (int v = 0; v < pf_graph_nops(g); v++) {
        const pf_op_t *a = pf_graph_op(g, v), *b = pf_graph_op(tg, v);
        CU_ASSERT(a->fwd_ms == b->fwd_ms && a->bwd_ms == b->bwd_ms);
        CU_ASSERT(a->param_bytes == b->param_bytes && a->mem_fwd_bytes == b->mem_fwd_bytes &&
                  a->mem_bwd_bytes == b->mem_bwd_bytes);
        CU_ASSERT(a->id == b->id && !strcmp(a->name, b->name));
    }
    for (int e = 0; e < pf_graph_nedges(g); e++)
        CU_ASSERT(pf_graph_edge(g, e)->bytes == pf_graph_edge(tg, e)->bytes &&
                  pf_graph_edge(g, e)->src == pf_graph_edge(tg, e)->src);
    for (int k = 0; k < r.nunits; k++) {
        CU_ASSERT_EQUAL(r.units[k].ncolls, 0);
        CU_ASSERT_EQUAL(r.units[k].plan, 0);
    }
    pf_graph_destroy(&tg);
    pf_tap_result_free(&r);
    /* bad arguments */
    CU_ASSERT_EQUAL(pf_tap_plan(g, 0, &link, &o, &r, err, sizeof err), PF_EINPUT);
    link.gbps = 0;
    CU_ASSERT_EQUAL(pf_tap_plan(g, 2, &link, &o, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gbps"));
    pf_graph_destroy(&g);
}

void pf_suite_tap(void)
{
    CU_pSuite s = CU_add_suite("tap", NULL, NULL);
    CU_add_test(s, "PRUNEGRAPH on a generated GPT", test_prune_graph);
    CU_add_test(s, "structural hash splits unequal blocks", test_structural_hash);
    CU_add_test(s, "GPT: Megatron-LM found, 2 + 2 all-reduces per layer", test_megatron_gpt);
    CU_add_test(s, "a head size apart from hidden / heads splits by head at T 8",
                test_head_dim_split);
    CU_add_test(s, "BERT: Megatron-LM found, 2 + 2 all-reduces per layer", test_megatron_bert);
    CU_add_test(s, "MoE: a unit per expert, Megatron-LM's split in each", test_moe_expert_units);
    CU_add_test(s, "a stem convolution on the graph's input splits", test_stem_conv);
    CU_add_test(s, "slices merged = whole enumeration", test_slices_merge);
    CU_add_test(s, "tiny block: brute force and hand-worked costs", test_tiny_by_hand);
    CU_add_test(s, "T = 1 gives the original numbers back", test_t1_identity);
}
