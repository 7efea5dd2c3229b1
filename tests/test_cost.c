/* cost: eq. 3 and eq. 14 on a hand-worked diamond. */
#include "planner/ir/cost.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

/* 0 -> {1, 2} -> 3. c_u = 3, 6, 9, 12 ms. Edge bytes: 0->1 1e9, 0->2 2e9, 1->3 3e9, 2->3 4e9.
 * param = 10, 20, 30, 40 bytes; mem_fwd = 100 v, mem_bwd = 50 v + 75. */
static pf_graph_t *diamond(void)
{
    char err[128];
    pf_graph_t *g = pf_graph_new("d", 1);
    for (int i = 0; i < 4; i++) {
        pf_op_t op = {.id = i, .fwd_ms = i + 1, .bwd_ms = 2 * (i + 1), .param_bytes = 10 * (i + 1),
                      .mem_fwd_bytes = 100 * i, .mem_bwd_bytes = 50 * i + 75};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 1e9);
    pf_graph_add_edge(g, 0, 2, 2e9);
    pf_graph_add_edge(g, 1, 3, 3e9);
    pf_graph_add_edge(g, 2, 3, 4e9);
    pf_graph_finalize(g, err, sizeof err);
    return g;
}

static void test_stage_costs(void)
{
    pf_graph_t *g = diamond();
    pf_cost_model_t cm = {.flat_gbps = 10, .microbatches = 4, .stages = 2, .state_factor = 4,
                          .mem_limit_bytes = 1e12};
    int st[4] = {0, 0, 1, 1}; /* {0,1} | {2,3} */
    /* stage 0: c_u 3 + 6 = 9; crossing edges 0->2 (2e9) and 1->3 (3e9): 5e9 B / 10 GB/s = 500 ms */
    PF_ASSERT_CLOSE(pf_cost_stage_time_ms(g, st, 0, &cm), 509.0, 1e-12);
    /* stage 1: 9 + 12 = 21, the same two edges cross: 521 */
    PF_ASSERT_CLOSE(pf_cost_stage_time_ms(g, st, 1, &cm), 521.0, 1e-12);
    /* memory (cost.h): state_factor x params + k_s x stored activations (mem_fwd); 1F1B holds
     * k_s = min(MB, S - s) micro-batches: stage 0 of 2 holds 2, stage 1 holds 1.
     * stage 1: 4 x (30 + 40) + 1 x (200 + 300) = 280 + 500 */
    PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(g, st, 1, &cm), 280 + 500, 1e-12);
    /* stage 0: 4 x (10 + 20) + 2 x (0 + 100) = 120 + 200 */
    PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(g, st, 0, &cm), 120 + 200, 1e-12);
    /* op 3 alone, as the last stage would hold it: 4 x 40 + 1 x 300 */
    PF_ASSERT_CLOSE(pf_cost_op_mem_bytes(g, 3, &cm), 160 + 300, 1e-12);
    cm.microbatches = 1; /* k_0 = min(1, 2) = 1 */
    PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(g, st, 0, &cm), 120 + 100, 1e-12);
    cm.train.schedule = PF_SCHEDULE_GPIPE; /* GPipe holds every micro-batch: MB = 3 */
    cm.microbatches = 3;
    PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(g, st, 1, &cm), 280 + 3 * 500, 1e-12);
    cm.train.schedule = PF_SCHEDULE_1F1B;
    cm.reserve_bytes = 7; /* full recomputation's reserve sits on every stage once */
    PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(g, st, 1, &cm), 280 + 500 + 7, 1e-12);
    cm.reserve_bytes = 0;

    pf_plan_t *p = pf_plan_new(2, 1);
    int a[] = {0, 1}, b[] = {2, 3};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    cm.microbatches = 4;
    CU_ASSERT_EQUAL(pf_cost_fill_plan(p, g, &cm), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 521.0, 1e-12);
    PF_ASSERT_CLOSE(p->stage_list[0].compute_ms, 9.0, 1e-12);
    PF_ASSERT_CLOSE(p->stage_list[1].time_ms, 521.0, 1e-12);
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
}

void pf_suite_cost(void)
{
    CU_pSuite s = CU_add_suite("cost", NULL, NULL);
    CU_add_test(s, "eq. 3 stage time and eq. 14 memory, worked by hand", test_stage_costs);
}
