/* stage_graph: the stage graph G' built from a plan, checked by hand. */
#include "planner/map/mapping.h"
#include "planner/core/rng.h"
#include "planner/inputs/topology.h"
#include "planner/core/util.h"
#include "tests/map_fixtures.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- stage graph */

/* ops 0..5, stages {0,1} {2,3} {4,5}; edges 0->1 (5), 1->2 (7), 0->3 (11), 3->4 (13), 1->5 (17).
 * M(0,1) = 7 + 11 = 18, M(1,2) = 13, M(0,2) = 17. c_u(v) = 3 (v + 1) ms (fwd v+1, bwd 2(v+1)),
 * so c_u(s0) = 3 + 6 = 9, c_u(s1) = 9 + 12 = 21, c_u(s2) = 15 + 18 = 33; P(v) = 100 v. */
static void test_stage_graph_from_plan(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("six", 1);
    for (int v = 0; v < 6; v++) {
        pf_op_t op = {.id = 10 + v, .fwd_ms = v + 1, .bwd_ms = 2 * (v + 1),
                      .param_bytes = 100 * v};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 5);
    pf_graph_add_edge(g, 1, 2, 7);
    pf_graph_add_edge(g, 0, 3, 11);
    pf_graph_add_edge(g, 3, 4, 13);
    pf_graph_add_edge(g, 1, 5, 17);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_plan_t *p = pf_plan_new(3, 2);
    int a[] = {0, 1}, b[] = {2, 3}, c[] = {4, 5};
    pf_plan_set_stage_ops(p, 0, a, 2);
    pf_plan_set_stage_ops(p, 1, b, 2);
    pf_plan_set_stage_ops(p, 2, c, 2);
    pf_stage_graph_t *sg = pf_stage_graph_from_plan(g, p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(sg);
    CU_ASSERT_EQUAL(pf_stage_graph_stages(sg), 3);
    CU_ASSERT_EQUAL(pf_stage_graph_replicas(sg), 2);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 0), 9, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 1), 21, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_cu_ms(sg, 2), 33, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_param_bytes(sg, 2), 900, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 0, 1), 18, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 1, 0), 18, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 1, 2), 13, 1e-15);
    PF_ASSERT_CLOSE(pf_stage_graph_msg_bytes(sg, 2, 0), 17, 1e-15);
    /* 2 (R-1)/R P = P for R = 2 */
    PF_ASSERT_CLOSE(pf_stage_graph_allreduce_bytes(sg, 1), 500, 1e-15);
    int k;
    const int *nb = pf_stage_graph_neighbors(sg, 0, &k);
    CU_ASSERT(k == 2 && nb[0] == 1 && nb[1] == 2);
    pf_stage_graph_destroy(&sg);
    pf_stage_graph_destroy(&sg); /* idempotent */

    /* raw numbers: M must be symmetric and finite, counts positive */
    double cu2[2] = {1, 1}, P2[2] = {0, 0}, Masym[4] = {0, 1, 2, 0}, Mneg[4] = {0, -1, -1, 0};
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(2, 1, cu2, P2, Masym));
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(2, 1, cu2, P2, Mneg));
    CU_ASSERT_PTR_NULL(pf_stage_graph_new(0, 1, cu2, P2, Mneg));
    pf_plan_destroy(&p);
    pf_graph_destroy(&g);
}

void pf_suite_stage_graph(void)
{
    CU_pSuite s = CU_add_suite("stage_graph", NULL, NULL);
    CU_add_test(s, "stage graph from a plan", test_stage_graph_from_plan);
}
