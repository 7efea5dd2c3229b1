/* map_inst: the instantiations' names and Parmesan's selection between m and ar (V-B). */
#include "planner/map/map_inst.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

static void test_names(void)
{
    for (int i = PF_MAP_INST_M; i <= PF_MAP_INST_FULL; i++) {
        pf_map_inst_t back;
        CU_ASSERT_EQUAL(pf_map_inst_parse(pf_map_inst_name((pf_map_inst_t)i), &back), PF_OK);
        CU_ASSERT_EQUAL(back, (pf_map_inst_t)i);
    }
    pf_map_inst_t inst;
    CU_ASSERT_EQUAL(pf_map_inst_parse("bogus", &inst), PF_EINPUT);
}

/* Two stages, two replicas: all-reduce bytes grow with P, inter-stage bytes with M. */
static void test_auto(void)
{
    double cu[2] = {1, 1}, small_p[2] = {1e3, 1e3}, big_p[2] = {1e10, 1e10};
    double M[4] = {0, 1e8, 1e8, 0}, none[4] = {0};
    pf_stage_graph_t *sg = pf_stage_graph_new(2, 2, cu, small_p, M);
    CU_ASSERT_EQUAL(pf_map_inst_auto(sg), PF_MAP_INST_M);
    pf_stage_graph_destroy(&sg);
    sg = pf_stage_graph_new(2, 2, cu, big_p, M);
    CU_ASSERT_EQUAL(pf_map_inst_auto(sg), PF_MAP_INST_AR);
    pf_stage_graph_destroy(&sg);
    sg = pf_stage_graph_new(2, 2, cu, small_p, none);
    CU_ASSERT_EQUAL(pf_map_inst_auto(sg), PF_MAP_INST_AR);
    pf_stage_graph_destroy(&sg);
}

void pf_suite_map_inst(void)
{
    CU_pSuite s = CU_add_suite("map_inst", NULL, NULL);
    CU_add_test(s, "names parse back", test_names);
    CU_add_test(s, "auto: ar when all-reduce bytes dominate", test_auto);
}
