/* tp_price: a split op's time by the device model's ratio, worked from the model's own GEMM and
 * roofline times; / T without a model. */
#include "planner/tp/tp_price.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

static pf_op_t gemm_op(int64_t m, int64_t n, int64_t k, int64_t batch)
{
    pf_op_t op = {.fwd_ms = 3.0, .bwd_ms = 6.0};
    op.work = (pf_op_work_t){.fwd_flops = 2.0 * m * n * k * batch,
                             .bwd_flops = 4.0 * m * n * k * batch,
                             .gemm_m = m, .gemm_n = n, .gemm_k = k, .gemm_batch = batch};
    return op;
}

static void test_gemm_ratio(void)
{
    const pf_devmodel_t *dm = pf_devmodel_preset("h100-sxm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(dm);
    pf_op_t op = gemm_op(1024, 4096, 4096, 1);
    double f, b;
    /* column parallel, T = 8: forward (1024 x 4096) @ (4096 x 512); backward dX (1024 x 512) @
     * (512 x 4096) and dW (4096 x 1024) @ (1024 x 512) */
    pf_tp_price_split(dm, &op, PF_TP_SPLIT_N, 8, &f, &b);
    double f0 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 4096, 4096, 1),
           f1 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 512, 4096, 1),
           b0 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 4096, 4096, 1) +
                pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 4096, 4096, 1024, 1),
           b1 = pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 1024, 4096, 512, 1) +
                pf_devmodel_gemm_ms(dm, PF_PREC_BF16, 4096, 512, 1024, 1);
    CU_ASSERT_DOUBLE_EQUAL(f, 3.0 * f1 / f0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(b, 6.0 * b1 / b0, 1e-12);
    CU_ASSERT(f > 3.0 / 8); /* a smaller GEMM is less efficient: more than an eighth */
    /* row parallel splits k; tokens split the batch of heads when there are T of them */
    pf_op_work_t w = pf_tp_price_split_work(&op.work, PF_TP_SPLIT_K, 8);
    CU_ASSERT_EQUAL(w.gemm_k, 512);
    CU_ASSERT_EQUAL(w.gemm_n, 4096);
    CU_ASSERT_DOUBLE_EQUAL(w.fwd_flops, op.work.fwd_flops / 8, 1e-3);
    pf_op_t heads = gemm_op(2048, 2048, 128, 32);
    w = pf_tp_price_split_work(&heads.work, PF_TP_SPLIT_TOKENS, 8);
    CU_ASSERT_EQUAL(w.gemm_batch, 4);
    CU_ASSERT_EQUAL(w.gemm_m, 2048);
    w = pf_tp_price_split_work(&op.work, PF_TP_SPLIT_TOKENS, 3); /* 1024 / 3 rounds up */
    CU_ASSERT_EQUAL(w.gemm_m, 342);
}

static void test_without_model(void)
{
    pf_op_t op = gemm_op(1024, 4096, 4096, 1);
    double f, b;
    pf_tp_price_split(NULL, &op, PF_TP_SPLIT_N, 4, &f, &b);
    CU_ASSERT_DOUBLE_EQUAL(f, 0.75, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(b, 1.5, 1e-12);
    pf_op_t none = {.fwd_ms = 2, .bwd_ms = 4}; /* no work: nothing to re-price */
    pf_tp_price_split(pf_devmodel_preset("a100-80g"), &none, PF_TP_SPLIT_N, 2, &f, &b);
    CU_ASSERT_DOUBLE_EQUAL(f, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(b, 2.0, 1e-12);
}

/* A memory-bound op: launch + bytes / bandwidth, so half the bytes is more than half the time. */
static void test_memory_bound(void)
{
    const pf_devmodel_t *dm = pf_devmodel_preset("a100-80g");
    pf_op_t op = {.fwd_ms = 1.0, .bwd_ms = 1.0};
    op.work.bytes_read = op.work.bytes_written = 8e6;
    double f, b;
    pf_tp_price_split(dm, &op, PF_TP_SPLIT_TOKENS, 2, &f, &b);
    double whole = pf_devmodel_memory_ms(dm, 16e6), half = pf_devmodel_memory_ms(dm, 8e6);
    CU_ASSERT_DOUBLE_EQUAL(f, half / whole, 1e-12);
    CU_ASSERT(f > 0.5);
}

static void test_graph_model(void)
{
    pf_graph_t *g = pf_graph_new("g", 1);
    CU_ASSERT_PTR_NULL(pf_tp_price_model(g));
    CU_ASSERT_EQUAL(pf_graph_set_device_model(g, "a100-80g"), PF_OK);
    CU_ASSERT_PTR_EQUAL(pf_tp_price_model(g), pf_devmodel_preset("a100-80g"));
    CU_ASSERT_EQUAL(pf_graph_set_device_model(g, "my-own-gpu"), PF_OK); /* not a preset: / T */
    CU_ASSERT_PTR_NULL(pf_tp_price_model(g));
    pf_graph_destroy(&g);
}

void pf_suite_tp_price(void)
{
    CU_pSuite s = CU_add_suite("tp_price", NULL, NULL);
    CU_add_test(s, "a split GEMM at its own efficiency", test_gemm_ratio);
    CU_add_test(s, "no device model, or no work: time / T", test_without_model);
    CU_add_test(s, "a memory-bound op keeps its launch cost", test_memory_bound);
    CU_add_test(s, "the graph names the model", test_graph_model);
}
