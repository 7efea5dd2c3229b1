/* plan: validation and the file format. */
#include "planner/plan.h"
#include "planner/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <string.h>

static pf_cluster_t *four_devices(void)
{
    pf_cluster_t *c = pf_cluster_new("four", 4);
    for (int i = 0; i < 4; i++) {
        pf_device_t d = {.id = 10 + i, .mem_bytes = 1e9};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, 10, 0);
    }
    return c;
}

static void test_round_trip_and_errors(void)
{
    char err[512], path[700];
    pf_graph_t *g = pf_test_random_dag(7, 6, 0.2);
    pf_cluster_t *c = four_devices();
    pf_plan_t *p = pf_plan_new(2, 2);
    int a[] = {0, 1, 2}, b[] = {3, 4, 5};
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    int *d0 = pf_plan_stage_devices(p, 0), *d1 = pf_plan_stage_devices(p, 1);
    d0[0] = 3; d0[1] = 0; d1[0] = 1; d1[1] = 2;
    p->objective_ms = 12.5;
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
    CU_ASSERT(pf_plan_is_mapped(p));
    snprintf(path, sizeof path, "%s/plan.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_plan_save(p, g, c, path, err, sizeof err), PF_OK);
    pf_plan_t *q;
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(path, g, c, &q, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(q->stages, 2);
    CU_ASSERT_EQUAL(q->replicas, 2);
    CU_ASSERT_EQUAL(q->stage_list[1].nops, 3);
    CU_ASSERT_EQUAL(q->stage_list[0].devices[0], 3);
    CU_ASSERT_EQUAL(q->stage_list[1].devices[1], 2);
    pf_plan_destroy(&q);

    /* an op in no stage; an edge going backwards; a device used twice */
    pf_plan_set_stage_ops(p, 1, b, 2);
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "op 5 (op5) is in no stage"));
    int back0[] = {0, 1, 2, 5}, back1[] = {3, 4};
    pf_plan_set_stage_ops(p, 0, back0, 4);
    pf_plan_set_stage_ops(p, 1, back1, 2);
    if (pf_graph_nedges(g) > 0) {
        int rc = pf_plan_validate(p, g, c, err, sizeof err);
        /* op 5 has a predecessor among 3, 4 iff the random graph put one there */
        int has_back = 0;
        for (int e = 0; e < pf_graph_nedges(g); e++)
            has_back |= pf_graph_edge(g, e)->dst == 5 && pf_graph_edge(g, e)->src >= 3;
        CU_ASSERT_EQUAL(rc, has_back ? PF_EINPUT : PF_OK);
        if (has_back)
            CU_ASSERT_PTR_NOT_NULL(strstr(err, "feeds op 5 in earlier stage 0"));
    }
    pf_plan_set_stage_ops(p, 0, a, 3);
    pf_plan_set_stage_ops(p, 1, b, 3);
    d1[1] = 3;
    CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "device 13 used twice"));

    pf_plan_t *bad;
    const char *txt = "{\"stages\": 1, \"replicas\": 1, \"stage_list\": [{\"ops\": [0, 77]}]}";
    CU_ASSERT_EQUAL(pf_plan_load(pf_test_write("p.json", txt), g, c, &bad, err, sizeof err),
                    PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "p.json: stage_list[0].ops[1]: not an op id of graph"));
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_plan(void)
{
    CU_pSuite s = CU_add_suite("plan", NULL, NULL);
    CU_add_test(s, "round trip, validation errors", test_round_trip_and_errors);
}
