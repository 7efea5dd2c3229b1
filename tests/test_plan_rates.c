/* plan_rates: samples/s, tokens/s and MFU of a hand-made plan. */
#include "planner/ir/plan.h"
#include "planner/ir/plan_rates.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rates by hand: an embedding [2, 128] -> [2, 128, 64] and a linear, 1e12 + 2e12 FLOPs per
 * micro-batch; 2 stages x 2 replicas (4 GPUs), 4 micro-batches, a 0.5 s step on 100-TFLOP/s
 * devices: 2 x 4 x 2 = 16 samples / 0.5 s = 32 samples/s, x 128 = 4096 tokens/s; MFU = 3e12 x
 * 4 x 2 / (0.5 s x 4 x 1e14 FLOP/s) = 0.12. Devices of unequal or unknown peak, or a graph
 * without FLOPs: no MFU; no step time: nothing. The plan file carries the same numbers. */
static void test_rates(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("lm", 2);
    pf_op_t emb = {.id = 0, .name = "embed", .type = "embedding", .fwd_ms = 1, .bwd_ms = 1,
                   .input = {2, {2, 128}}, .output = {3, {2, 128, 64}},
                   .work = {.fwd_flops = 1e12}};
    pf_op_t lin = {.id = 1, .name = "head", .type = "linear", .fwd_ms = 1, .bwd_ms = 2,
                   .work = {.fwd_flops = 0.5e12, .bwd_flops = 1.5e12}};
    CU_ASSERT_EQUAL_FATAL(pf_graph_add_op(g, &emb), 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_add_op(g, &lin), 1);
    CU_ASSERT_EQUAL_FATAL(pf_graph_add_edge(g, 0, 1, 100), 0);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = pf_cluster_new("four", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = i, .mem_bytes = 1e9, .tflops = 100};
        pf_cluster_set_device(c, i, &d);
    }
    pf_plan_rates_t r = pf_plan_rates(g, c, 500, 4, 2, 4);
    CU_ASSERT_DOUBLE_EQUAL(r.samples_per_s, 32, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.tokens_per_s, 4096, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(r.mfu, 0.12, 1e-12);
    /* in the plan file too */
    pf_plan_t *p = pf_plan_new(2, 2);
    int a[] = {0}, b[] = {1};
    pf_plan_set_stage_ops(p, 0, a, 1);
    pf_plan_set_stage_ops(p, 1, b, 1);
    p->microbatches = 4;
    p->simulated_step_ms = 500;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL(pf_plan_write(p, g, c, f, err, sizeof err), PF_OK);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"throughput_samples_per_s\": 32,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"tokens_per_s\": 4096,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"mfu\": 0.12"));
    free(buf);
    pf_plan_destroy(&p);
    pf_device_t faster = {.id = 3, .mem_bytes = 1e9, .tflops = 200}, unknown = {.id = 3};
    pf_cluster_set_device(c, 3, &faster);
    CU_ASSERT(isnan(pf_plan_rates(g, c, 500, 4, 2, 4).mfu));
    pf_cluster_set_device(c, 3, &unknown);
    CU_ASSERT(isnan(pf_plan_rates(g, c, 500, 4, 2, 4).mfu));
    r = pf_plan_rates(g, c, NAN, 4, 2, 4);
    CU_ASSERT(isnan(r.samples_per_s) && isnan(r.tokens_per_s) && isnan(r.mfu));
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_plan_rates(void)
{
    CU_pSuite s = CU_add_suite("plan_rates", NULL, NULL);
    CU_add_test(s, "samples/s, tokens/s and MFU by hand", test_rates);
}
