/* map_context: what one instantiation precomputes, checked on random stage graphs and clusters:
 * the lower bound is the one the search starts from, the objective equals eq. 5's evaluation bit
 * for bit, the mapping order is a permutation whose major order follows the instantiation, and
 * the checking scheme completes every stage replica exactly once, no earlier than it is placed. */
#include "planner/map/map_context.h"
#include "planner/map/mapping.h"
#include "tests/map_fixtures.h"
#include "tests/testutil.h"

#include <string.h>

static void check_context(const pf_stage_graph_t *sg, const pf_cluster_t *c, pf_map_inst_t inst)
{
    char err[256];
    int S = pf_stage_graph_stages(sg), R = pf_stage_graph_replicas(sg), N = S * R;
    int D = pf_cluster_ndevices(c), dev[MAXN], seen[MAXN] = {0};
    double lo, hi;
    pf_map_context_t *cx = pf_map_context_new(sg, c, inst, PF_MAP_SYM_ALL, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(cx);
    CU_ASSERT_EQUAL_FATAL(pf_mapping_bounds(sg, c, inst, 1, &lo, &hi, dev, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(pf_map_context_lower_bound_ms(cx), lo);
    CU_ASSERT(pf_map_context_objective_ms(cx, dev) == pf_mapping_objective_ms(sg, c, inst, dev));
    CU_ASSERT(lo <= pf_map_context_objective_ms(cx, dev));

    bool stage_major;
    const int *order = pf_map_context_order(cx, &stage_major);
    CU_ASSERT_EQUAL(stage_major, inst == PF_MAP_INST_AR ||
                                     (inst == PF_MAP_INST_FULL &&
                                      pf_map_inst_auto(sg) == PF_MAP_INST_AR));
    for (int k = 0; k < N; k++) {
        CU_ASSERT_FATAL(order[k] >= 0 && order[k] < N && !seen[order[k]]);
        seen[order[k]] = 1;
        CU_ASSERT_EQUAL(cx->pos[order[k]], k);
    }
    CU_ASSERT_EQUAL(cx->chk_off[0], 0);
    CU_ASSERT_EQUAL(cx->chk_off[N], N);
    memset(seen, 0, sizeof seen);
    for (int k = 0; k < N; k++)
        for (int i = cx->chk_off[k]; i < cx->chk_off[k + 1]; i++) {
            int x = cx->chk[i];
            CU_ASSERT(!seen[x] && cx->pos[x] <= k);
            seen[x] = 1;
        }
    CU_ASSERT(D >= N);
    pf_map_context_destroy(&cx);
    CU_ASSERT_PTR_NULL(cx);
    pf_map_context_destroy(&cx);
}

static void test_context(void)
{
    for (uint64_t seed = 1; seed <= 6; seed++) {
        int S = 2 + (int)(seed % 3), R = 1 + (int)(seed % 2) * 2;
        pf_stage_graph_t *sg = random_stage_graph(seed, S, R);
        pf_cluster_t *c = random_cluster(seed, S * R + (int)(seed % 2));
        for (int inst = PF_MAP_INST_M; inst <= PF_MAP_INST_FULL; inst++)
            check_context(sg, c, (pf_map_inst_t)inst);
        pf_stage_graph_destroy(&sg);
        pf_cluster_destroy(&c);
    }
}

static void test_context_too_few_devices(void)
{
    char err[256];
    pf_stage_graph_t *sg = random_stage_graph(3, 3, 2);
    pf_cluster_t *c = random_cluster(3, 5);
    CU_ASSERT_PTR_NULL(pf_map_context_new(sg, c, PF_MAP_INST_M, PF_MAP_SYM_ALL, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "5 devices"));
    pf_stage_graph_destroy(&sg);
    pf_cluster_destroy(&c);
}

void pf_suite_map_context(void)
{
    CU_pSuite s = CU_add_suite("map_context", NULL, NULL);
    CU_add_test(s, "bound, objective, order and checking scheme of random instances",
                test_context);
    CU_add_test(s, "more stage replicas than devices", test_context_too_few_devices);
}
