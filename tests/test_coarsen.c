/* coarsen: eq. 4 order, convexity and memory worked by hand; acyclicity after every fusion;
 * the hyper-op graph prices every union of hyper-ops as cost.h prices its ops. */
#include "planner/partition/coarsen.h"
#include "planner/ir/cost.h"
#include "planner/inputs/import.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_cost_model_t model(double mem_limit)
{
    pf_cost_model_t cm = {.flat_gbps = 1, .microbatches = 4, .stages = 2, .state_factor = 4,
                          .mem_limit_bytes = mem_limit};
    return cm;
}

static pf_graph_t *mk(int n, const double *cu, const double *param, int m, const int (*e)[2],
                      const double *bytes)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; i < n; i++) {
        pf_op_t op = {.id = i, .fwd_ms = cu[i], .param_bytes = param ? param[i] : 0};
        pf_graph_add_op(g, &op);
    }
    for (int j = 0; j < m; j++)
        pf_graph_add_edge(g, e[j][0], e[j][1], bytes[j]);
    pf_graph_finalize(g, err, sizeof err);
    return g;
}

static int coarsen(const pf_graph_t *g, const pf_cost_model_t *cm, int k, double alpha, int *group)
{
    char err[256];
    int ng = -1;
    pf_coarsen_opts_t o = {.k = k, .alpha = alpha};
    CU_ASSERT_EQUAL(pf_coarsen_run(g, cm, &o, group, &ng, err, sizeof err), PF_OK);
    return ng;
}

/* Chain 0 -> 1 -> 2 -> 3, c_u = 1, 1, 5, 5, bytes 0, 0, 1e9 (1000 ms at 1 GB/s).
 * eq. 4, alpha = 1: (0,1) 2, (1,2) 6, (2,3) 10 - 1000 = -990 -> fuse (2,3) first.
 * alpha = 0: (0,1) 2 first; then (01,2) 7 < (2,3) 10 -> {0,1,2}, {3}. */
static void test_eq4_order(void)
{
    const double cu[] = {1, 1, 5, 5}, bytes[] = {0, 0, 1e9};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 3, e, bytes);
    pf_cost_model_t cm = model(1e18);
    int group[4];
    CU_ASSERT_EQUAL(coarsen(g, &cm, 3, 1.0, group), 3);
    CU_ASSERT(group[0] == 0 && group[1] == 1 && group[2] == 2 && group[3] == 2);
    CU_ASSERT_EQUAL(coarsen(g, &cm, 3, 0.0, group), 3);
    CU_ASSERT(group[0] == 0 && group[1] == 0 && group[2] == 1 && group[3] == 2);
    CU_ASSERT_EQUAL(coarsen(g, &cm, 2, 0.0, group), 2);
    CU_ASSERT(group[0] == 0 && group[1] == 0 && group[2] == 0 && group[3] == 1);
    CU_ASSERT_EQUAL(coarsen(g, &cm, 1, 0.0, group), 1);
    CU_ASSERT(group[0] == 0 && group[3] == 0);
    pf_graph_destroy(&g);
}

/* 0 -> 1 -> 3, 0 -> 2 -> 3, 0 -> 3; c_u = 1, 10, 10, 1. The cheapest pair (0,3) (cost 2) is not
 * convex: 0 -> 1 -> 3 leaves it. The others cost 11; ties go to the lowest (tail, head): (0,1).
 * Hyper-ops in topological order: {0,1}, {2}, {3}. */
static void test_convexity(void)
{
    const double cu[] = {1, 10, 10, 1}, bytes[] = {1, 1, 1, 1, 1};
    const int e[][2] = {{0, 1}, {1, 3}, {0, 2}, {2, 3}, {0, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 5, e, bytes);
    pf_cost_model_t cm = model(1e18);
    int group[4];
    CU_ASSERT_EQUAL(coarsen(g, &cm, 3, 0.0, group), 3);
    CU_ASSERT(group[0] == 0 && group[1] == 0 && group[2] == 1 && group[3] == 2);
    pf_graph_destroy(&g);
}

/* Chain 0 -> 1 -> 2, c_u = 1 each, alpha = 0 (all pairs cost 2). Memory 4 x param: 8, 4, 4
 * bytes with a 10-byte device: (0,1) needs 12 and is skipped, (1,2) needs 8. */
static void test_memory(void)
{
    const double cu[] = {1, 1, 1}, param[] = {2, 1, 1}, bytes[] = {1, 1};
    const int e[][2] = {{0, 1}, {1, 2}};
    pf_graph_t *g = mk(3, cu, param, 2, e, bytes);
    pf_cost_model_t cm = model(10);
    int group[3];
    CU_ASSERT_EQUAL(coarsen(g, &cm, 2, 0.0, group), 2);
    CU_ASSERT(group[0] == 0 && group[1] == 1 && group[2] == 1);
    /* K = 1 is out of reach: nothing else fits, coarsening stops at 2 */
    CU_ASSERT_EQUAL(coarsen(g, &cm, 1, 0.0, group), 2);
    pf_graph_destroy(&g);
}

/* The hook keeps its own union-find and checks, after every fusion, that the two hyper-ops
 * were adjacent and that the quotient graph has no cycle (Kahn's algorithm over the hyper-ops). */
typedef struct {
    const pf_graph_t *g;
    int *uf, *root, *deg, *start, *adj, *queue;
    int fusions, cyclic, not_adjacent;
} hook_t;

static int uf_find(int *uf, int v)
{
    while (uf[v] != v)
        v = uf[v] = uf[uf[v]];
    return v;
}

static void on_fuse(void *ctx, int a, int b)
{
    hook_t *h = ctx;
    int n = pf_graph_nops(h->g), m = pf_graph_nedges(h->g);
    int ra = uf_find(h->uf, a), rb = uf_find(h->uf, b), adjacent = 0;
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(h->g, e);
        int x = uf_find(h->uf, ed->src), y = uf_find(h->uf, ed->dst);
        adjacent |= (x == ra && y == rb) || (x == rb && y == ra);
    }
    h->not_adjacent += !adjacent || ra == rb;
    h->uf[rb] = ra;
    h->fusions++;
    /* quotient adjacency (CSR over roots) and in-degrees */
    for (int v = 0; v < n; v++) {
        h->root[v] = uf_find(h->uf, v);
        h->deg[v] = 0;
        h->start[v] = 0;
    }
    h->start[n] = 0;
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(h->g, e);
        int x = h->root[ed->src], y = h->root[ed->dst];
        if (x != y) {
            h->start[x + 1]++;
            h->deg[y]++;
        }
    }
    for (int v = 0; v < n; v++)
        h->start[v + 1] += h->start[v];
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(h->g, e);
        int x = h->root[ed->src], y = h->root[ed->dst];
        if (x != y)
            h->adj[h->start[x]++] = y;
    }
    for (int v = n; v > 0; v--)
        h->start[v] = h->start[v - 1];
    h->start[0] = 0;
    int head = 0, tail = 0, roots = 0;
    for (int v = 0; v < n; v++)
        if (h->root[v] == v) {
            roots++;
            if (h->deg[v] == 0)
                h->queue[tail++] = v;
        }
    while (head < tail) {
        int x = h->queue[head++];
        for (int k = h->start[x]; k < h->start[x + 1]; k++)
            if (--h->deg[h->adj[k]] == 0)
                h->queue[tail++] = h->adj[k];
    }
    h->cyclic += tail != roots;
}

/* Acyclic after every fusion; the final numbering is topological and matches the hook's
 * union-find; the hyper-op graph builds (pf_graph_finalize finds no cycle). */
static void check_acyclic(const pf_graph_t *g, int k, double alpha)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g), ng = 0;
    char err[512];
    hook_t h = {.g = g};
    h.uf = malloc((size_t)n * sizeof *h.uf);
    h.root = malloc((size_t)n * sizeof *h.root);
    h.deg = malloc((size_t)n * sizeof *h.deg);
    h.start = malloc((size_t)(n + 1) * sizeof *h.start);
    h.adj = malloc((size_t)(m + 1) * sizeof *h.adj);
    h.queue = malloc((size_t)n * sizeof *h.queue);
    int *group = malloc((size_t)n * sizeof *group);
    int *rep = malloc((size_t)n * sizeof *rep);
    for (int v = 0; v < n; v++)
        h.uf[v] = v;
    pf_cost_model_t cm = model(1e18);
    pf_coarsen_opts_t o = {.k = k, .alpha = alpha, .on_fuse = on_fuse, .ctx = &h};
    CU_ASSERT_EQUAL_FATAL(pf_coarsen_run(g, &cm, &o, group, &ng, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(h.fusions, n - ng);
    CU_ASSERT_EQUAL(h.cyclic, 0);
    CU_ASSERT_EQUAL(h.not_adjacent, 0);
    CU_ASSERT(ng >= (k < n ? k : n));
    int backwards = 0, mismatch = 0;
    for (int e = 0; e < m; e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        backwards += group[ed->src] > group[ed->dst];
    }
    /* same partition of the ops: group <-> union-find root is a bijection */
    for (int x = 0; x < ng; x++)
        rep[x] = -1;
    for (int v = 0; v < n; v++) {
        int r = uf_find(h.uf, v);
        if (rep[group[v]] < 0)
            rep[group[v]] = r;
        mismatch += rep[group[v]] != r;
    }
    int roots = 0;
    for (int v = 0; v < n; v++)
        roots += uf_find(h.uf, v) == v;
    CU_ASSERT_EQUAL(roots, ng);
    CU_ASSERT_EQUAL(backwards, 0);
    CU_ASSERT_EQUAL(mismatch, 0);
    pf_graph_t *hg = NULL;
    CU_ASSERT_EQUAL(pf_coarsen_hyper_graph(g, group, ng, &hg, err, sizeof err), PF_OK);
    pf_graph_destroy(&hg);
    free(h.uf);
    free(h.root);
    free(h.deg);
    free(h.start);
    free(h.adj);
    free(h.queue);
    free(group);
    free(rep);
}

static void test_acyclic_random(void)
{
    for (uint64_t seed = 1; seed <= 30; seed++) {
        int n = 20 + (int)(seed * 7 % 150);
        pf_graph_t *g = pf_test_random_dag(seed, n, seed % 2 ? 0.03 : 0.1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        check_acyclic(g, 1 + (int)(seed % 12), (double)(seed % 3) * 50);
        pf_graph_destroy(&g);
    }
}

/* Stage costs of any assignment of hyper-ops to stages, on the hyper-op graph and on the ops. */
static void test_hyper_graph_prices(void)
{
    char err[256];
    for (uint64_t seed = 1; seed <= 20; seed++) {
        int n = 15 + (int)seed * 3;
        pf_graph_t *g = pf_test_random_dag(100 + seed, n, 0.15);
        pf_cost_model_t cm = model(1e18);
        cm.flat_gbps = 7.5;
        int *group = malloc((size_t)n * sizeof *group), ng;
        int *gs = malloc((size_t)n * sizeof *gs), *hs = malloc((size_t)n * sizeof *hs);
        ng = coarsen(g, &cm, 4 + (int)seed % 6, 1.0, group);
        pf_graph_t *h = NULL;
        CU_ASSERT_EQUAL_FATAL(pf_coarsen_hyper_graph(g, group, ng, &h, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(pf_graph_nops(h), ng);
        PF_ASSERT_CLOSE(pf_graph_total_cu_ms(h), pf_graph_total_cu_ms(g), 1e-12);
        uint64_t x = seed * 0x9e3779b97f4a7c15ull;
        for (int trial = 0; trial < 20; trial++) {
            for (int k = 0; k < ng; k++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                hs[k] = (int)(x % 3);
            }
            for (int v = 0; v < n; v++)
                gs[v] = hs[group[v]];
            for (int s = 0; s < 3; s++) {
                PF_ASSERT_CLOSE(pf_cost_stage_time_ms(h, hs, s, &cm),
                                pf_cost_stage_time_ms(g, gs, s, &cm), 1e-12);
                PF_ASSERT_CLOSE(pf_cost_stage_mem_bytes(h, hs, s, &cm),
                                pf_cost_stage_mem_bytes(g, gs, s, &cm), 1e-12);
            }
        }
        pf_graph_destroy(&h);
        pf_graph_destroy(&g);
        free(group);
        free(gs);
        free(hs);
    }
}

/* Every PipeDream profile, K in {1, 8, 32}, alpha in {0.01, 1, 100} (Parmesan's values). */
static void test_acyclic_pipedream(void)
{
    static const char *models[] = {"alexnet", "vgg16", "resnet18", "resnet50", "resnet101",
                                   "resnext50", "resnext101", "inception_v3", "densenet121",
                                   "squeezenet1_0", "nasnetamobile", "nasnetalarge", "gnmt",
                                   "gnmt_large"};
    static const double alphas[] = {0.01, 1, 100};
    char rel[128], path[1024], err[512];
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        snprintf(rel, sizeof rel, "pipedream/%s.txt", models[i]);
        pf_graph_t *g = NULL;
        int rc = pf_import_pipedream(pf_test_data(rel, path, sizeof path), 0, &g, err, sizeof err);
        CU_ASSERT_EQUAL(rc, PF_OK);
        if (rc != PF_OK) {
            fprintf(stderr, "%s\n", err);
            continue;
        }
        for (int a = 0; a < 3; a++)
            check_acyclic(g, a == 0 ? 1 : a == 1 ? 8 : 32, alphas[a]);
        pf_graph_destroy(&g);
    }
}

static void test_bad_grouping(void)
{
    const double cu[] = {1, 1, 1}, bytes[] = {1, 1};
    const int e[][2] = {{0, 1}, {1, 2}};
    pf_graph_t *g = mk(3, cu, NULL, 2, e, bytes), *h = NULL;
    char err[256];
    int cyc[] = {0, 1, 0}, empty[] = {0, 0, 2}, range[] = {0, 3, 1};
    CU_ASSERT_EQUAL(pf_coarsen_hyper_graph(g, cyc, 2, &h, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not convex"));
    CU_ASSERT_EQUAL(pf_coarsen_hyper_graph(g, empty, 3, &h, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_coarsen_hyper_graph(g, range, 2, &h, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(h);
    pf_graph_destroy(&g);
}

static void test_default_k(void)
{
    CU_ASSERT_EQUAL(pf_coarsen_default_k(2, 1000), 48);
    CU_ASSERT_EQUAL(pf_coarsen_default_k(8, 1000), 64);
    CU_ASSERT_EQUAL(pf_coarsen_default_k(16, 1000), 128);
    CU_ASSERT_EQUAL(pf_coarsen_default_k(4, 20), 20);
    CU_ASSERT_EQUAL(pf_coarsen_default_k(7, 1000), 56);
}

void pf_suite_coarsen(void)
{
    CU_pSuite s = CU_add_suite("coarsen", NULL, NULL);
    CU_add_test(s, "eq. 4 picks the cheapest pair, worked by hand", test_eq4_order);
    CU_add_test(s, "non-convex pairs are never fused", test_convexity);
    CU_add_test(s, "fused hyper-ops fit the device", test_memory);
    CU_add_test(s, "acyclic after every fusion (random DAGs)", test_acyclic_random);
    CU_add_test(s, "acyclic after every fusion (every PipeDream profile)",
                test_acyclic_pipedream);
    CU_add_test(s, "hyper-op graph prices unions exactly as cost.h", test_hyper_graph_prices);
    CU_add_test(s, "bad groupings are rejected", test_bad_grouping);
    CU_add_test(s, "default K", test_default_k);
}
