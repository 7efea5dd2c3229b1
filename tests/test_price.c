/* price: a hand-built graph whose ops carry work (a GEMM, a memory-bound op, a fused kernel)
 * and one that does not, priced on a one-cell device model. */
#include "planner/core/util.h"
#include "planner/inputs/price.h"
#include "tests/testutil.h"

static void test_price_graph(void)
{
    static const double g1[1] = {1024}, eff[1] = {0.5};
    pf_devmodel_spec_t s = {"one", {100, 100, 10, 50, 200}, {1, 1, 1, 1, 1}, 1000, 10, 80e9,
                            0.5, 0.25, 0, 0, 8};
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

void pf_suite_price(void)
{
    CU_pSuite s = CU_add_suite("price", NULL, NULL);
    CU_add_test(s, "ops with work re-priced, ops without kept", test_price_graph);
}
