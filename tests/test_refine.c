/* refine: reconverging ops, the three gains worked by hand, and a property test: refinement
 * never worsens the objective and keeps the pipeline order, nonempty stages and memory. */
#include "planner/ir/cost.h"
#include "planner/partition/partition.h"
#include "planner/partition/refine.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_graph_t *mk(int n, const double *cu, int m, const int (*e)[2], const double *bytes)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; i < n; i++) {
        pf_op_t op = {.id = i, .fwd_ms = cu ? cu[i] : 1};
        pf_graph_add_op(g, &op);
    }
    for (int j = 0; j < m; j++)
        pf_graph_add_edge(g, e[j][0], e[j][1], bytes ? bytes[j] : 1);
    pf_graph_finalize(g, err, sizeof err);
    return g;
}

static pf_cost_model_t model(double mem_limit)
{
    pf_cost_model_t cm = {.flat_gbps = 1, .microbatches = 4, .stages = 2, .state_factor = 4,
                          .mem_limit_bytes = mem_limit};
    return cm;
}

/* Residual block 0 -> 1 -> 2 -> 3 -> 4 with the skip 1 -> 3: 1 (out-degree 2) and 3
 * (in-degree 2) are cut vertices of the undirected graph; 2 is not (1-2-3-1 is a cycle);
 * 0 and 4 are leaves. Distances: 1, 0, 1, 0, 1.
 * Diamond 0 -> {1, 2} -> 3 with 4 -> 0 and 3 -> 5: 0 and 3 are reconverging; a chain has none
 * (cut vertices, but in- and out-degree 1), so every distance is 0 there. */
static void test_reconverging(void)
{
    unsigned char rc[6];
    int dist[6];
    const int res[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {1, 3}};
    pf_graph_t *g = mk(5, NULL, 5, res, NULL);
    CU_ASSERT_EQUAL(pf_refine_reconverging(g, rc, dist), PF_OK);
    const unsigned char want_rc[] = {0, 1, 0, 1, 0};
    const int want_d[] = {1, 0, 1, 0, 1};
    CU_ASSERT_EQUAL(memcmp(rc, want_rc, 5), 0);
    CU_ASSERT_EQUAL(memcmp(dist, want_d, sizeof want_d), 0);
    pf_graph_destroy(&g);

    const int dia[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {4, 0}, {3, 5}};
    g = mk(6, NULL, 6, dia, NULL);
    CU_ASSERT_EQUAL(pf_refine_reconverging(g, rc, dist), PF_OK);
    const unsigned char want_rc2[] = {1, 0, 0, 1, 0, 0};
    const int want_d2[] = {0, 1, 1, 0, 1, 1};
    CU_ASSERT_EQUAL(memcmp(rc, want_rc2, 6), 0);
    CU_ASSERT_EQUAL(memcmp(dist, want_d2, sizeof want_d2), 0);
    pf_graph_destroy(&g);

    const int chain[][2] = {{0, 1}, {1, 2}, {2, 3}};
    g = mk(4, NULL, 3, chain, NULL);
    CU_ASSERT_EQUAL(pf_refine_reconverging(g, rc, dist), PF_OK);
    for (int v = 0; v < 4; v++)
        CU_ASSERT(rc[v] == 0 && dist[v] == 0);
    pf_graph_destroy(&g);
}

/* Chain, c_u = 1 each, bytes 4e6, 1e6, 4e6 (4, 1, 4 ms at 1 GB/s); start {0}|{1,2,3}:
 * times 1+4 = 5 and 3+4 = 7. No reconverging ops (g1 = 0). Moving op 1 to stage 0 cuts 1 -> 2
 * instead: 3e6 bytes less (g2 > 0), times 2+1 = 3 and 2+1 = 3. After it every move adds
 * traffic: one move, objective 7 -> 3. */
static void test_comm_gain(void)
{
    const double bytes[] = {4e6, 1e6, 4e6};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}};
    pf_graph_t *g = mk(4, NULL, 3, e, bytes);
    pf_cost_model_t cm = model(1e18);
    int st[] = {0, 1, 1, 1};
    pf_refine_stats_t rs;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_refine_run(g, &cm, 2, 100, st, &rs, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rs.moves, 1);
    CU_ASSERT(st[0] == 0 && st[1] == 0 && st[2] == 1 && st[3] == 1);
    PF_ASSERT_CLOSE(rs.objective_before_ms, 7, 1e-12);
    PF_ASSERT_CLOSE(rs.objective_after_ms, 3, 1e-12);
    PF_ASSERT_CLOSE(rs.cut_bytes_after, 1e6, 1e-12);
    pf_graph_destroy(&g);
}

/* Chain, c_u = 1, 10, 1, 2, bytes 1e6, 2e6, 5e6; start {0,1}|{2,3}: 11+2 = 13 and 3+2 = 5.
 * Moving op 1 later saves 1e6 bytes but makes stage 1 13+1 = 14 > 13: rejected. Moving op 2
 * earlier adds 3e6 bytes: no positive gain. No move. */
static void test_objective_guard(void)
{
    const double cu[] = {1, 10, 1, 2}, bytes[] = {1e6, 2e6, 5e6};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}};
    pf_graph_t *g = mk(4, cu, 3, e, bytes);
    pf_cost_model_t cm = model(1e18);
    int st[] = {0, 0, 1, 1};
    pf_refine_stats_t rs;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_refine_run(g, &cm, 2, 100, st, &rs, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rs.moves, 0);
    CU_ASSERT(st[0] == 0 && st[1] == 0 && st[2] == 1 && st[3] == 1);
    PF_ASSERT_CLOSE(rs.objective_after_ms, 13, 1e-12);
    pf_graph_destroy(&g);
}

/* Diamond 0 -> {1, 2} -> 3, then 3 -> 4 -> 5 -> 6; c_u = 1 each; bytes 1e6 except 3 -> 4 = 2e6.
 * Reconverging: 3 only (0 is no cut vertex). Distances 2, 1, 1, 0, 1, 2, 3.
 * Start {0..4}|{5,6}: boundary ops 4 and 5, D = 1 + 2 = 3; times 5+1 = 6, 2+1 = 3.
 * Moving op 4 later: boundary 3 and 4, D = 0 + 1 = 1 (g1 = 2) although the cut grows to 2e6
 * (g2 < 0); times 4+2 = 6 and 3+2 = 5: not worse, so it is made. Then moving 3 later raises D
 * to 2, and nothing else is valid or positive: one move. */
static void test_reconverging_gain(void)
{
    const double bytes[] = {1e6, 1e6, 1e6, 1e6, 2e6, 1e6, 1e6};
    const int e[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 5}, {5, 6}};
    pf_graph_t *g = mk(7, NULL, 7, e, bytes);
    pf_cost_model_t cm = model(1e18);
    int st[] = {0, 0, 0, 0, 0, 1, 1};
    pf_refine_stats_t rs;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_refine_run(g, &cm, 2, 100, st, &rs, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rs.moves, 1);
    CU_ASSERT_EQUAL(st[4], 1);
    CU_ASSERT_EQUAL(st[3], 0);
    CU_ASSERT_EQUAL(rs.distance_before, 3);
    CU_ASSERT_EQUAL(rs.distance_after, 1);
    PF_ASSERT_CLOSE(rs.cut_bytes_before, 1e6, 1e-12);
    PF_ASSERT_CLOSE(rs.cut_bytes_after, 2e6, 1e-12);
    PF_ASSERT_CLOSE(rs.objective_after_ms, 6, 1e-12);
    /* with I = 0 nothing moves */
    int st2[] = {0, 0, 0, 0, 0, 1, 1};
    CU_ASSERT_EQUAL(pf_refine_run(g, &cm, 2, 0, st2, &rs, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rs.moves, 0);
    CU_ASSERT_EQUAL(st2[4], 0);
    pf_graph_destroy(&g);
}

/* A candidate evaluated in one step must be evaluated again in the next. Chain 0 -> ... -> 11,
 * c_u = 0, 1 GB/s (1e6 bytes = 1 ms); bytes of edge i -> i+1: 10e6 for i <= 3, 5e6 for
 * 4 <= i <= 6, 20e6 for i >= 7. Start {0..3}|{4..7}|{8..11}: stage times 10, 10 + 20 = 30, 20.
 * No reconverging ops (g1 = 0). Step 1: moving op 7 to stage 2 saves 20e6 - 5e6 (g2 = 15e6,
 * the best; moving op 4 to stage 0 saves only 5e6): times 10, 15, 5. Step 2: moving op 4 to
 * stage 0 saves 10e6 - 5e6 (g2 = 5e6): times 5, 10, 5. Then every move saves nothing (0 bytes,
 * max compute 0) or adds traffic: two moves, objective 30 -> 10, cut 30e6 -> 10e6 bytes. */
static void test_candidate_reevaluated(void)
{
    double bytes[11];
    int e[11][2];
    for (int i = 0; i < 11; i++) {
        e[i][0] = i;
        e[i][1] = i + 1;
        bytes[i] = i <= 3 ? 10e6 : i <= 6 ? 5e6 : 20e6;
    }
    const double cu[12] = {0};
    pf_graph_t *g = mk(12, cu, 11, (const int(*)[2])e, bytes);
    pf_cost_model_t cm = model(1e18);
    int st[] = {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2};
    const int want[] = {0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2};
    pf_refine_stats_t rs;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(pf_refine_run(g, &cm, 3, 100, st, &rs, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(rs.moves, 2);
    CU_ASSERT_EQUAL(memcmp(st, want, sizeof want), 0);
    PF_ASSERT_CLOSE(rs.objective_before_ms, 30, 1e-12);
    PF_ASSERT_CLOSE(rs.objective_after_ms, 10, 1e-12);
    PF_ASSERT_CLOSE(rs.cut_bytes_after, 10e6, 1e-12);
    pf_graph_destroy(&g);
}

static void test_bad_input(void)
{
    const int e[][2] = {{0, 1}};
    pf_graph_t *g = mk(2, NULL, 1, e, NULL);
    pf_cost_model_t cm = model(1e18);
    pf_refine_stats_t rs;
    char err[256];
    int back[] = {1, 0}, range[] = {0, 2};
    CU_ASSERT_EQUAL(pf_refine_run(g, &cm, 2, 100, back, &rs, err, sizeof err), PF_EINPUT);
    CU_ASSERT_EQUAL(pf_refine_run(g, &cm, 2, 100, range, &rs, err, sizeof err), PF_EINPUT);
    pf_graph_destroy(&g);
}

/* ---- an independent check that refinement stopped at a local optimum ---- */

typedef struct {
    long long dist_sum;
    double cut_bytes, max_cu, objective;
    int fits;
} snapshot_t;

/* D (boundary ops' distances), traffic, max compute, max t(H) and memory of a partition, all
 * recomputed from scratch with cost.h (the hand-checked reference). */
static snapshot_t snapshot(const pf_graph_t *g, const pf_cost_model_t *cm, int S, const int *st,
                           const int *dist)
{
    snapshot_t x = {0, 0, 0, 0, 1};
    int n = pf_graph_nops(g);
    for (int v = 0; v < n; v++) {
        int boundary = 0;
        for (int e = 0; e < pf_graph_nedges(g); e++) {
            const pf_edge_t *ed = pf_graph_edge(g, e);
            if ((ed->src == v || ed->dst == v) && st[ed->src] != st[ed->dst])
                boundary = 1;
        }
        x.dist_sum += boundary ? dist[v] : 0;
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (st[ed->src] != st[ed->dst])
            x.cut_bytes += ed->bytes;
    }
    for (int s = 0; s < S; s++) {
        double cu = 0;
        for (int v = 0; v < n; v++)
            if (st[v] == s)
                cu += pf_graph_cu_ms(g, v);
        x.max_cu = fmax(x.max_cu, cu);
        x.objective = fmax(x.objective, pf_cost_stage_time_ms(g, st, s, cm));
        x.fits &= pf_cost_stage_mem_bytes(g, st, s, cm) <= cm->mem_limit_bytes;
    }
    return x;
}

/* Valid moves (refine.h's rules) whose gain (g1, g2, g3) is clearly positive, by brute force
 * over every op and every stage of one of its neighbours. Moves within rounding of the
 * objective guard or of a zero gain are not counted. */
static int improving_moves(const pf_graph_t *g, const pf_cost_model_t *cm, int S, int *st)
{
    int n = pf_graph_nops(g), m = pf_graph_nedges(g), found = 0;
    unsigned char *rc = malloc((size_t)n);
    int *dist = malloc((size_t)n * sizeof *dist), *cnt = calloc((size_t)S, sizeof *cnt);
    pf_refine_reconverging(g, rc, dist);
    for (int v = 0; v < n; v++)
        cnt[st[v]]++;
    double total_bytes = 0;
    for (int e = 0; e < m; e++)
        total_bytes += pf_graph_edge(g, e)->bytes;
    snapshot_t now = snapshot(g, cm, S, st, dist);
    for (int v = 0; v < n; v++) {
        int s = st[v];
        for (int e = 0; e < m; e++) {
            const pf_edge_t *ed = pf_graph_edge(g, e);
            int t = ed->src == v ? st[ed->dst] : ed->dst == v ? st[ed->src] : s;
            if (t == s || cnt[s] <= 1)
                continue;
            int order_ok = 1;
            for (int f = 0; f < m; f++) {
                const pf_edge_t *x = pf_graph_edge(g, f);
                if ((x->src == v && st[x->dst] < t) || (x->dst == v && st[x->src] > t))
                    order_ok = 0;
            }
            if (!order_ok)
                continue;
            st[v] = t;
            snapshot_t after = snapshot(g, cm, S, st, dist);
            st[v] = s;
            if (!after.fits || after.objective > now.objective * (1 - 1e-9))
                continue;
            long long g1 = now.dist_sum - after.dist_sum;
            double g2 = now.cut_bytes - after.cut_bytes, g3 = now.max_cu - after.max_cu;
            if (g1 > 0 || (g1 == 0 && g2 > 1e-9 * total_bytes) ||
                (g1 == 0 && fabs(g2) <= 1e-12 * total_bytes && g3 > 1e-9 * now.max_cu))
                found++;
        }
    }
    free(rc);
    free(dist);
    free(cnt);
    return found;
}

/* Property: random DAGs, a coarsened DP partition (so there is room to improve), memory limits
 * that bite. After refinement: objective not worse, every edge goes forward, stages nonempty,
 * every stage fits, at most I moves; the internal bookkeeping matches cost.h; and when it
 * stopped before I moves, no valid move with a clearly positive gain is left (brute force). */
static void test_property(void)
{
    char err[512];
    int improved = 0, moved = 0, had_moves = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        int n = 30 + (int)(seed * 13 % 90), S = 2 + (int)(seed % 4);
        pf_graph_t *g = pf_test_random_dag(500 + seed, n, seed % 2 ? 0.02 : 0.06);
        pf_cluster_t *c = pf_cluster_new("c", 8);
        pf_cost_model_t cm;
        double total = 0;
        for (int v = 0; v < n; v++)
            total += 4 * pf_graph_op(g, v)->param_bytes +
                     fmax(pf_graph_op(g, v)->mem_fwd_bytes, pf_graph_op(g, v)->mem_bwd_bytes);
        for (int i = 0; i < 8; i++) {
            pf_device_t d = {.id = i, .mem_bytes = seed % 3 ? 1.5 * total / S : 1e18};
            pf_cluster_set_device(c, i, &d);
            for (int j = 0; j < i; j++)
                pf_cluster_set_link(c, i, j, 5, 0);
        }
        pf_partition_opts_t o;
        pf_partition_opts_init(&o);
        o.stages = S;
        o.coarsen_k = S + 4;
        o.refine = 0;
        pf_plan_t *p = NULL;
        int rc = pf_partition_run(g, c, &o, &p, err, sizeof err);
        if (rc != PF_OK) {
            CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
            pf_cluster_destroy(&c);
            pf_graph_destroy(&g);
            continue;
        }
        pf_cost_model_init(&cm, c, S, 0, 0);
        int *st = pf_plan_op_stage(p, n);
        double before = p->partition_objective_ms;
        int max_moves = seed % 5 ? 100 : 2;
        had_moves += improving_moves(g, &cm, S, st) > 0; /* the check below can fail */
        pf_refine_stats_t rs;
        CU_ASSERT_EQUAL_FATAL(pf_refine_run(g, &cm, S, max_moves, st, &rs, err, sizeof err),
                              PF_OK);
        CU_ASSERT(rs.moves <= max_moves);
        moved += rs.moves > 0;
        if (rs.moves < max_moves) /* it stopped because no valid move has a positive gain */
            CU_ASSERT_EQUAL(improving_moves(g, &cm, S, st), 0);
        int *ops = malloc((size_t)n * sizeof *ops);
        for (int s = 0; s < S; s++) {
            int k = 0;
            for (int v = 0; v < n; v++)
                if (st[v] == s)
                    ops[k++] = v;
            pf_plan_set_stage_ops(p, s, ops, k);
            CU_ASSERT(k > 0);
        }
        free(ops);
        int total_ops = 0;
        for (int s = 0; s < S; s++)
            total_ops += p->stage_list[s].nops;
        CU_ASSERT_EQUAL_FATAL(total_ops, n);
        CU_ASSERT_EQUAL(pf_cost_fill_plan(p, g, &cm), PF_OK);
        CU_ASSERT(p->partition_objective_ms <= before * (1 + 1e-12));
        improved += p->partition_objective_ms < before * (1 - 1e-9);
        PF_ASSERT_CLOSE(rs.objective_after_ms, p->partition_objective_ms, 1e-9);
        PF_ASSERT_CLOSE(rs.objective_before_ms, before, 1e-9);
        for (int s = 0; s < S; s++)
            CU_ASSERT(p->stage_list[s].peak_mem_bytes <= cm.mem_limit_bytes);
        for (int e = 0; e < pf_graph_nedges(g); e++)
            CU_ASSERT(st[pf_graph_edge(g, e)->src] <= st[pf_graph_edge(g, e)->dst]);
        free(st);
        pf_plan_destroy(&p);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
    CU_ASSERT(moved >= 10); /* the property is not vacuous */
    CU_ASSERT(had_moves >= 10);
    (void)improved;
}

void pf_suite_refine(void)
{
    CU_pSuite s = CU_add_suite("refine", NULL, NULL);
    CU_add_test(s, "reconverging ops and distances, worked by hand", test_reconverging);
    CU_add_test(s, "gain 2: less traffic, worked by hand", test_comm_gain);
    CU_add_test(s, "a move that worsens the objective is rejected", test_objective_guard);
    CU_add_test(s, "gain 1 (reconverging distance) beats gain 2", test_reconverging_gain);
    CU_add_test(s, "a move skipped by one step is a candidate in the next", test_candidate_reevaluated);
    CU_add_test(s, "bad partitions are rejected", test_bad_input);
    CU_add_test(s, "never worse, valid, fits memory (random DAGs)", test_property);
}
