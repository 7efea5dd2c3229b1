/* price: a hand-built graph whose ops carry work (a GEMM, a memory-bound op, a fused kernel)
 * and one that does not, priced on a one-cell device model. */
#include "planner/core/util.h"
#include "planner/inputs/model_build.h"
#include "planner/inputs/price.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_price_graph(void)
{
    static const double g1[1] = {1024}, eff[1] = {0.5};
    pf_devmodel_spec_t s = {"one", {100, 100, 10, 50, 200}, {1, 1, 1, 1, 1}, 1000, 10, 80e9,
                            0.5, 0.25, 0, 0, 8, 0, 0, 0, 0};
    char err[256];
    pf_devmodel_t *dm = pf_devmodel_new(&s, 1, g1, 1, g1, 1, g1, eff, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm);
    pf_graph_t *g = pf_graph_new("hand", 2), *h = NULL;
    pf_op_t ops[4] = {
        {.id = 10, .name = "fc", .type = "linear", .fwd_ms = 9, .bwd_ms = 9,
         .work = {.gemm_m = 4096, .gemm_n = 1024, .gemm_k = 2048, .gemm_batch = 1}},
        {.id = 11, .name = "gelu", .type = "gelu", .fwd_ms = 9, .bwd_ms = 9,
         .work = {.bytes_read = 1e9, .bytes_written = 1e9}},
        {.id = 12, .name = "attn", .type = "attention", .fwd_ms = 9, .bwd_ms = 9,
         .work = {.fwd_flops = 1e12, .bwd_flops = 2.5e12, .bytes_read = 3e6}},
        {.id = 13, .name = "embed", .type = "embedding", .fwd_ms = 1.5, .bwd_ms = 2.5},
    };
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(pf_graph_add_op(g, &ops[i]), i);
        if (i)
            CU_ASSERT_EQUAL(pf_graph_add_edge(g, i - 1, i, 100.0 * i), i - 1);
    }
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    int n = -1;
    CU_ASSERT_EQUAL_FATAL(pf_price_graph(g, dm, PF_PREC_BF16, &h, &n, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(n, 3);
    /* every GEMM is at efficiency 0.5 of 100 TFLOP/s: 2 x 4096 x 1024 x 2048 FLOPs = 0.343597 ms
     * forward, twice that backward (dX and dW do as many FLOPs) */
    double f = 2.0 * 4096 * 1024 * 2048 / 50e12 * 1e3;
    PF_ASSERT_CLOSE(pf_graph_op(h, 0)->fwd_ms, f, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_op(h, 0)->bwd_ms, 2 * f, 1e-12);
    /* 2e9 bytes at 1000 GB/s + 10 us; backward 3e9 bytes */
    PF_ASSERT_CLOSE(pf_graph_op(h, 1)->fwd_ms, 2.01, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_op(h, 1)->bwd_ms, 3.01, 1e-12);
    /* 1e12 / (100e12 x 0.5) = 20 ms; 2.5e12 / (100e12 x 0.25) = 100 ms */
    PF_ASSERT_CLOSE(pf_graph_op(h, 2)->fwd_ms, 20.01, 1e-12);
    PF_ASSERT_CLOSE(pf_graph_op(h, 2)->bwd_ms, 100.01, 1e-12);
    /* no work: kept; the rest of the graph as it was */
    CU_ASSERT_EQUAL(pf_graph_op(h, 3)->fwd_ms, 1.5);
    CU_ASSERT_EQUAL(pf_graph_op(h, 3)->bwd_ms, 2.5);
    CU_ASSERT_STRING_EQUAL(pf_graph_op(h, 2)->name, "attn");
    CU_ASSERT_EQUAL(pf_graph_op(h, 0)->work.gemm_k, 2048);
    CU_ASSERT_EQUAL(pf_graph_nedges(h), 3);
    CU_ASSERT_EQUAL(pf_graph_edge(h, 2)->bytes, 300);
    CU_ASSERT_EQUAL(pf_graph_microbatch(h), 2);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);
    pf_devmodel_destroy(&dm);
}

/* A 1-layer GPT (hidden 64, 4 heads, seq 32, vocab 100, bf16) at micro-batch b, priced on
 * a100-80g when `device`. */
static pf_graph_t *tiny_gpt(int b, int device)
{
    pf_model_opts_t o;
    pf_model_opts_init(&o, PF_MODEL_GPT);
    o.layers = 1, o.hidden = 64, o.heads = 4, o.seq = 32, o.vocab = 100, o.microbatch = b;
    o.precision_bytes = 2;
    char err[256];
    pf_graph_t *g = NULL, *h = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_model_build(&o, &g, err, sizeof err), PF_OK);
    if (!device)
        return g;
    CU_ASSERT_EQUAL_FATAL(pf_price_graph(g, pf_devmodel_preset("a100-80g"), PF_PREC_BF16, &h,
                                         NULL, err, sizeof err), PF_OK);
    pf_graph_destroy(&g);
    return h;
}

static int op_named(const pf_graph_t *g, const char *name)
{
    for (int v = 0; v < pf_graph_nops(g); v++)
        if (!strcmp(pf_graph_op(g, v)->name, name))
            return v;
    CU_FAIL("no such op");
    return 0;
}

/* Micro-batch 1 -> 4 by hand: fc1 (GEMM rows 32 -> 128), the attention scores (batch = b x 4
 * heads -> 16), the embedding (a lookup: all its bytes scale), every time by a100-80g's ratio. */
static void test_microbatch_by_hand(void)
{
    const pf_devmodel_t *dm = pf_devmodel_preset("a100-80g");
    pf_graph_t *g = tiny_gpt(1, 1), *h = NULL;
    char err[256];
    int linear = -1;
    CU_ASSERT_EQUAL_FATAL(pf_price_microbatch_ex(g, 4, &h, &linear, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(linear, 0);
    CU_ASSERT_EQUAL(pf_graph_microbatch(h), 4);
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(h), "a100-80g");
    int v = op_named(g, "layers.0.mlp.fc1");
    const pf_op_t *a = pf_graph_op(g, v), *n = pf_graph_op(h, v);
    /* fc1: (32 x 64) @ (64 x 256), 33280 parameter bytes; reads 4096 + 33280, writes 16384 */
    CU_ASSERT_EQUAL(n->work.gemm_m, 128);
    CU_ASSERT_EQUAL(n->work.gemm_n, 256);
    CU_ASSERT_EQUAL(n->work.gemm_k, 64);
    CU_ASSERT_EQUAL(n->work.gemm_batch, 1);
    PF_ASSERT_CLOSE(n->work.fwd_flops, 4 * 2.0 * 32 * 64 * 256, 1e-9);
    PF_ASSERT_CLOSE(n->work.bytes_read, 4 * 4096.0 + 33280, 1e-9);
    PF_ASSERT_CLOSE(n->work.bytes_written, 4 * 16384.0, 1e-9);
    PF_ASSERT_CLOSE(n->param_bytes, 33280, 1e-9);
    PF_ASSERT_CLOSE(n->mem_fwd_bytes, 4 * 4096.0, 1e-9);
    PF_ASSERT_CLOSE(n->mem_bwd_bytes, 4 * 20480.0, 1e-9);
    CU_ASSERT_EQUAL(n->input.dim[0], 4);
    CU_ASSERT_EQUAL(n->output.dim[0], 4);
    CU_ASSERT_EQUAL(n->output.dim[2], 256);
    /* forward gemm(m, n, k); backward dX = gemm(m, k, n) + dW = gemm(k, n, m) (devmodel.h) */
    double f1 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 128, 256, 64, 1);
    double f0 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 32, 256, 64, 1);
    double b1 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 128, 64, 256, 1) +
                pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 64, 256, 128, 1);
    double b0 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 32, 64, 256, 1) +
                pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 64, 256, 32, 1);
    PF_ASSERT_CLOSE(n->fwd_ms, a->fwd_ms * f1 / f0, 1e-12);
    PF_ASSERT_CLOSE(n->bwd_ms, a->bwd_ms * b1 / b0, 1e-12);
    PF_ASSERT_CLOSE(n->fwd_ms, f1, 1e-12); /* priced on the preset: its price of the new work */
    /* scores: 4 heads x (32 x 16) @ (16 x 32) -> batch 16 */
    v = op_named(g, "layers.0.attn.scores");
    a = pf_graph_op(g, v), n = pf_graph_op(h, v);
    CU_ASSERT_EQUAL(n->work.gemm_batch, 16);
    CU_ASSERT_EQUAL(n->work.gemm_m, 32);
    PF_ASSERT_CLOSE(n->fwd_ms, a->fwd_ms * pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 32, 32, 16, 16) /
                                   pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 32, 32, 16, 4), 1e-12);
    PF_ASSERT_CLOSE(n->work.bytes_read, 4 * 8192.0, 1e-9);
    CU_ASSERT_EQUAL(n->output.dim[0], 4);
    CU_ASSERT_EQUAL(n->output.dim[1], 4);
    /* embedding: reads 8448 bytes of its 16896 (the rows its 32 tokens name): all scale */
    v = op_named(g, "embed");
    a = pf_graph_op(g, v), n = pf_graph_op(h, v);
    PF_ASSERT_CLOSE(n->work.bytes_read, 4 * 8448.0, 1e-9);
    PF_ASSERT_CLOSE(n->work.bytes_written, 4 * 4096.0, 1e-9);
    PF_ASSERT_CLOSE(n->mem_fwd_bytes, 4 * 256.0, 1e-9);
    /* memory roofline: launch + bytes / hbm, forward read + written, backward 2 x read + written */
    PF_ASSERT_CLOSE(n->fwd_ms, a->fwd_ms * pf_devmodel_memory_ms(dm, 4 * (8448.0 + 4096)) /
                                   pf_devmodel_memory_ms(dm, 8448.0 + 4096), 1e-12);
    PF_ASSERT_CLOSE(n->bwd_ms, a->bwd_ms * pf_devmodel_memory_ms(dm, 4 * (2 * 8448.0 + 4096)) /
                                   pf_devmodel_memory_ms(dm, 2 * 8448.0 + 4096), 1e-12);
    /* edges: 4 x */
    for (int e = 0; e < pf_graph_nedges(g); e++)
        PF_ASSERT_CLOSE(pf_graph_edge(h, e)->bytes, 4 * pf_graph_edge(g, e)->bytes, 1e-9);
    pf_graph_destroy(&h);
    pf_graph_destroy(&g);
}

/* Brute force: re-priced from 1 to 4 = generated at 4 and priced on the preset, op by op. */
static void test_microbatch_as_generated(void)
{
    pf_graph_t *g = tiny_gpt(1, 1), *w = tiny_gpt(4, 1), *h = NULL;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_price_microbatch(g, 4, &h, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_graph_nops(h), pf_graph_nops(w));
    for (int v = 0; v < pf_graph_nops(w); v++) {
        const pf_op_t *a = pf_graph_op(h, v), *b = pf_graph_op(w, v);
        PF_ASSERT_CLOSE(a->fwd_ms, b->fwd_ms, 1e-12 * b->fwd_ms);
        PF_ASSERT_CLOSE(a->bwd_ms, b->bwd_ms, 1e-12 * b->bwd_ms);
        PF_ASSERT_CLOSE(a->work.bytes_read, b->work.bytes_read, 1e-9);
        PF_ASSERT_CLOSE(a->work.bytes_written, b->work.bytes_written, 1e-9);
        PF_ASSERT_CLOSE(a->mem_fwd_bytes, b->mem_fwd_bytes, 1e-9);
        PF_ASSERT_CLOSE(a->mem_bwd_bytes, b->mem_bwd_bytes, 1e-9);
        CU_ASSERT_EQUAL(a->work.gemm_m * a->work.gemm_batch, b->work.gemm_m * b->work.gemm_batch);
        CU_ASSERT_EQUAL(a->output.dim[0], b->output.dim[0]);
    }
    for (int e = 0; e < pf_graph_nedges(w); e++)
        PF_ASSERT_CLOSE(pf_graph_edge(h, e)->bytes, pf_graph_edge(w, e)->bytes, 1e-9);
    pf_graph_destroy(&h);
    pf_graph_destroy(&w);
    pf_graph_destroy(&g);
}

/* No device model: times x B / b0 and the caller is told; 4 -> 2 halves; B < 1 refused. */
static void test_microbatch_linear(void)
{
    pf_graph_t *g = tiny_gpt(4, 0), *h = NULL;
    char err[256];
    int linear = 0;
    CU_ASSERT_PTR_NULL(pf_graph_device_model(g));
    CU_ASSERT_EQUAL_FATAL(pf_price_microbatch_ex(g, 2, &h, &linear, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(linear, 1);
    for (int v = 0; v < pf_graph_nops(g); v++) {
        PF_ASSERT_CLOSE(pf_graph_op(h, v)->fwd_ms, pf_graph_op(g, v)->fwd_ms / 2, 1e-15);
        PF_ASSERT_CLOSE(pf_graph_op(h, v)->bwd_ms, pf_graph_op(g, v)->bwd_ms / 2, 1e-15);
        PF_ASSERT_CLOSE(pf_graph_op(h, v)->param_bytes, pf_graph_op(g, v)->param_bytes, 0);
    }
    /* fc1 rows 128 -> 64 */
    CU_ASSERT_EQUAL(pf_graph_op(h, op_named(g, "layers.0.mlp.fc1"))->work.gemm_m, 64);
    /* scores: batch 4 x 4 heads = 16, a multiple of 4 -> 8 */
    CU_ASSERT_EQUAL(pf_graph_op(h, op_named(g, "layers.0.attn.scores"))->work.gemm_batch, 8);
    pf_graph_destroy(&h);
    CU_ASSERT_EQUAL(pf_price_microbatch(g, 0, &h, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(h);
    pf_graph_destroy(&g);
}

/* h100-sxm with every table cell x 0.8 and HBM x 0.5: a calibrated GPU under a preset's name. */
static pf_devmodel_t *calibrated(void)
{
    const pf_devmodel_t *p = pf_devmodel_preset("h100-sxm");
    int nm, nn, nk;
    const double *gm, *gn, *gk, *eff;
    pf_devmodel_table(p, &nm, &gm, &nn, &gn, &nk, &gk, &eff);
    double cells[16 * 16 * 16];
    for (int c = 0; c < nm * nn * nk; c++)
        cells[c] = eff[c] * 0.8;
    pf_devmodel_spec_t s = *pf_devmodel_spec(p);
    s.hbm_gbps *= 0.5;
    return pf_devmodel_new(&s, nm, gm, nn, gn, nk, gk, cells, NULL, 0);
}

static pf_graph_t *priced_on(const pf_devmodel_t *dm, int b)
{
    pf_graph_t *g = tiny_gpt(b, 0), *h = NULL;
    char err[256];
    CU_ASSERT_EQUAL(pf_price_graph(g, dm, PF_PREC_BF16, &h, NULL, err, sizeof err), PF_OK);
    pf_graph_destroy(&g);
    return h;
}

static int same_model(const pf_devmodel_t *a, const pf_devmodel_t *b)
{
    char *x = a ? pf_devmodel_to_text(a) : NULL, *y = b ? pf_devmodel_to_text(b) : NULL;
    int same = x && y && !strcmp(x, y);
    free(x);
    free(y);
    return same;
}

/* A graph priced on a model that is no preset carries it (in memory, in its file), and
 * re-pricing it at micro-batch 4 is pricing the graph generated at 4 on that model, op by op,
 * not on the preset whose name it bears; a copy of a preset travels by name. */
static void test_carried_model(void)
{
    char err[256], path[512];
    pf_devmodel_t *m = calibrated(), *copy = pf_devmodel_copy(pf_devmodel_preset("h100-sxm"));
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    pf_graph_t *g = priced_on(m, 1), *w = priced_on(m, 4), *h = NULL, *back = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_STRING_EQUAL(pf_graph_device_model(g), "h100-sxm");
    CU_ASSERT(pf_graph_device(g) != pf_devmodel_preset("h100-sxm"));
    CU_ASSERT(same_model(pf_graph_device(g), m));
    snprintf(path, sizeof path, "%s/carried.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL(pf_graph_save(g, path, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_graph_load(path, &back, err, sizeof err), PF_OK);
    CU_ASSERT(same_model(pf_graph_device(back), m));
    CU_ASSERT_EQUAL_FATAL(pf_price_microbatch(back, 4, &h, err, sizeof err), PF_OK);
    CU_ASSERT(same_model(pf_graph_device(h), m));
    for (int v = 0; v < pf_graph_nops(w); v++) {
        PF_ASSERT_CLOSE(pf_graph_op(h, v)->fwd_ms, pf_graph_op(w, v)->fwd_ms,
                        1e-12 * pf_graph_op(w, v)->fwd_ms);
        PF_ASSERT_CLOSE(pf_graph_op(h, v)->bwd_ms, pf_graph_op(w, v)->bwd_ms,
                        1e-12 * pf_graph_op(w, v)->bwd_ms);
    }
    pf_graph_destroy(&g);
    g = priced_on(copy, 1);
    CU_ASSERT_PTR_EQUAL(pf_graph_device(g), pf_devmodel_preset("h100-sxm"));
    pf_graph_destroy(&g);
    pf_graph_destroy(&h);
    pf_graph_destroy(&w);
    pf_graph_destroy(&back);
    pf_devmodel_destroy(&m);
    pf_devmodel_destroy(&copy);
}

/* A carried model must bear the graph's device_model name. */
static void test_carried_model_named(void)
{
    char err[256], *model = pf_devmodel_to_text(pf_devmodel_preset("a100-80g")), text[65536];
    pf_graph_t *g = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(model);
    snprintf(text, sizeof text, "{\"name\":\"d\",\"device_model\":\"h100-sxm\",\"device\":%s,"
             "\"ops\":[{\"id\":0,\"fwd_ms\":1,\"bwd_ms\":2}],\"edges\":[]}", model);
    CU_ASSERT_EQUAL(pf_graph_load_buffer(text, strlen(text), "d.json", &g, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "d.json: graph.device: its name 'a100-80g' is not the "
                                       "graph's device_model ('h100-sxm')"));
    CU_ASSERT_PTR_NULL(g);
    free(model);
}

void pf_suite_price(void)
{
    CU_pSuite s = CU_add_suite("price", NULL, NULL);
    CU_add_test(s, "ops with work re-priced, ops without kept", test_price_graph);
    CU_add_test(s, "micro-batch 1 -> 4 by hand", test_microbatch_by_hand);
    CU_add_test(s, "micro-batch 1 -> 4 = generated at 4", test_microbatch_as_generated);
    CU_add_test(s, "micro-batch without a device model: linear", test_microbatch_linear);
    CU_add_test(s, "a model that is no preset travels with the graph", test_carried_model);
    CU_add_test(s, "a carried model bears the graph's model name", test_carried_model_named);
}
