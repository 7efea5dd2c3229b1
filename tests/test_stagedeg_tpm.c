/* stagedeg_tpm: one stage's prices worked by hand: [Piper]'s swaps in their order (ties by op
 * index), the infeasible case, a boundary edge's bytes and sync counted on the right end, and a
 * fastest configuration that changes with d. */
#include "planner/partition/stagedeg_tpm.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

/* A chain of n ops (edge bytes e) and a cost model: 1 GB/s, MB, memory limit. */
static pf_graph_t *chain(int n, double e)
{
    char err[256], name[16];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .fwd_ms = 1};
        pf_graph_add_op(g, &op);
    }
    for (int i = 1; i < n; i++)
        pf_graph_add_edge(g, i - 1, i, e);
    if (pf_graph_finalize(g, err, sizeof err) != PF_OK)
        pf_graph_destroy(&g);
    return g;
}

static void model(pf_cost_model_t *cm, int mb, double limit)
{
    memset(cm, 0, sizeof *cm);
    pf_training_t t;
    pf_training_init(&t);
    cm->flat_gbps = 1;
    cm->microbatches = mb;
    cm->mem_limit_bytes = limit;
    pf_cost_model_set_training(cm, &t, 1, 0);
}

/* The whole graph as the stage in sc. */
static void whole(pf_stagedeg_tpm_scratch_t *sc, int n)
{
    sc->nh = n;
    sc->cti = -1;
    for (int i = 0; i < n; i++) {
        sc->ops[i] = i;
        sc->h[0] |= 1ULL << i;
    }
}

/* Three ops, t = 1, d = 1, y = 1, edges free, no parameters. Plain: 1 ms and 10 B each. The
 * other: op 0 2 ms / 4 B (saves 6 B for 1 ms: 1/6 ms per B), op 1 4 ms / 1 B (9 B for 3 ms:
 * 1/3), op 2 1.5 ms / 7 B (3 B for 0.5 ms: 1/6, after op 0 on the tie). Limit 21 B: 9 B must go;
 * op 0 then op 2 save exactly 9: 2 + 1 + 1.5 = 4.5 ms at 21 B. Limit 12: every swap, 7.5 ms.
 * Limit 11: even the least memory (12 B) does not fit. Limit 30: the plain 3 ms. */
static void test_swaps(void)
{
    char err[256];
    pf_graph_t *g = chain(3, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_stagedeg_tmpc_t opt[] = {{1, 1, 0, 10, 0, NULL}, {1, 2, 0, 4, 0, NULL},
                                {1, 1, 0, 10, 0, NULL}, {1, 4, 0, 1, 0, NULL},
                                {1, 1, 0, 10, 0, NULL}, {1, 1.5, 0, 7, 0, NULL}};
    int first[] = {0, 2, 4, 6};
    pf_stagedeg_tmpcs_t tab = {opt, first};
    pf_cost_model_t cm;
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 1;
    const double limits[] = {21, 12, 11, 30}, want[] = {4.5, 7.5, INFINITY, 3};
    const int picks[][3] = {{1, 0, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}}, modes[] = {2, 2, -1, 0};
    for (int c = 0; c < 4; c++) {
        model(&cm, 4, limits[c]);
        pf_stagedeg_tpm_t m;
        pf_stagedeg_tpm_scratch_t sc;
        CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tpm_init(&m, g, &cm, &o, &tab, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tpm_scratch_init(&sc, 3, 1), PF_OK);
        whole(&sc, 3);
        int mode = -1;
        double p = pf_stagedeg_tpm_choose(&m, &sc, 0, 1, 1, &mode);
        if (isinf(want[c])) {
            CU_ASSERT(isinf(p));
        } else {
            PF_ASSERT_CLOSE(p, want[c], 1e-12);
            CU_ASSERT_EQUAL(mode, modes[c]);
            for (int i = 0; i < 3; i++)
                CU_ASSERT_EQUAL(sc.pick[i], picks[c][i]);
        }
        pf_stagedeg_tpm_scratch_free(&sc);
        pf_stagedeg_tpm_free(&m);
    }
    pf_graph_destroy(&g);
}

/* Ops 0 -> 1 -> 2, edges of 1e6 bytes; op 1's configuration syncs 2e6 bytes on its edge in and
 * 3e6 on its edge out. Stage {1}: X = 1e6 + 2e6 + 1e6 + 3e6 = 7e6 bytes; stage {1, 2}: the edge
 * in alone, 3e6 (op 2's configuration has no sync). With ef = 2 at 1 GB/s and 1 ms of compute:
 * 1 + 14 = 15 ms and 2 + 6 = 8 ms on one replica. */
static void test_boundary_sync(void)
{
    char err[256];
    pf_graph_t *g = chain(3, 1e6);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    double sync[] = {2e6, 3e6};
    pf_stagedeg_tmpc_t opt[] = {{1, 1, 0, 0, 0, NULL}, {1, 1, 0, 0, 0, sync}, {1, 1, 0, 0, 0, NULL}};
    int first[] = {0, 1, 2, 3};
    pf_stagedeg_tmpcs_t tab = {opt, first};
    pf_cost_model_t cm;
    model(&cm, 1, 1e30);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.edge_factor = 2;
    pf_stagedeg_tpm_t m;
    CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tpm_init(&m, g, &cm, &o, &tab, err, sizeof err), PF_OK);
    uint64_t h = 1ULL << 1;
    pf_stagedeg_tpm_sums_t s = pf_stagedeg_tpm_op_sums(&m, &h, 1, &opt[1]);
    PF_ASSERT_CLOSE(s.x, 7e6, 1e-6);
    PF_ASSERT_CLOSE(pf_stagedeg_tpm_price(&m, &s, 1), 15, 1e-12);
    h = (1ULL << 1) | (1ULL << 2);
    s = pf_stagedeg_tpm_op_sums(&m, &h, 1, &opt[1]);
    pf_stagedeg_tpm_sums_t s2 = pf_stagedeg_tpm_op_sums(&m, &h, 2, &opt[2]);
    pf_stagedeg_tpm_add(&s, &s2);
    PF_ASSERT_CLOSE(s.x, 3e6, 1e-6);
    PF_ASSERT_CLOSE(pf_stagedeg_tpm_price(&m, &s, 1), 8, 1e-12);
    CU_ASSERT(m.stable[0]); /* one configuration each: the fastest is fixed */
    pf_stagedeg_tpm_free(&m);
    pf_graph_destroy(&g);
}

/* One op, two configurations for t = 1: 10 ms without parameters, or 6 ms with 8e6 bytes of
 * them. Ring all-reduce (ar = 2), MB = 1, 1 GB/s: on one replica 10 against 6 (the second); on 4,
 * 2.5 against 1.5 + 2 x 3/4 x 8e6 bytes = 1.5 + 12 = 13.5 (the first). Their parameters differ,
 * so the fastest is not fixed. */
static void test_fastest_moves_with_d(void)
{
    char err[256];
    pf_graph_t *g = chain(1, 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_stagedeg_tmpc_t opt[] = {{1, 10, 0, 0, 0, NULL}, {1, 6, 8e6, 0, 0, NULL}};
    int first[] = {0, 2};
    pf_stagedeg_tmpcs_t tab = {opt, first};
    pf_cost_model_t cm;
    model(&cm, 1, 1e30);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 4;
    pf_stagedeg_tpm_t m;
    pf_stagedeg_tpm_scratch_t sc;
    CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tpm_init(&m, g, &cm, &o, &tab, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tpm_scratch_init(&sc, 1, 1), PF_OK);
    CU_ASSERT(!m.stable[0]);
    whole(&sc, 1);
    pf_stagedeg_tpm_sums_t f = pf_stagedeg_tpm_fastest(&m, &sc, 0, 1);
    CU_ASSERT_EQUAL(sc.fast[0], 1);
    PF_ASSERT_CLOSE(pf_stagedeg_tpm_price(&m, &f, 1), 6, 1e-12);
    f = pf_stagedeg_tpm_fastest(&m, &sc, 0, 4);
    CU_ASSERT_EQUAL(sc.fast[0], 0);
    PF_ASSERT_CLOSE(pf_stagedeg_tpm_price(&m, &f, 4), 2.5, 1e-12);
    pf_stagedeg_tpm_scratch_free(&sc);
    pf_stagedeg_tpm_free(&m);
    pf_graph_destroy(&g);
}

void pf_suite_stagedeg_tpm(void)
{
    CU_pSuite s = CU_add_suite("stagedeg_tpm", NULL, NULL);
    CU_add_test(s, "[Piper]'s swaps in order, ties by op, infeasible (worked by hand)", test_swaps);
    CU_add_test(s, "boundary edges: bytes + the configuration's sync (worked by hand)",
                test_boundary_sync);
    CU_add_test(s, "the fastest configuration changes with d (worked by hand)",
                test_fastest_moves_with_d);
}
