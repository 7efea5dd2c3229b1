/* partition: the eq. 13 DP against exhaustive search, hand-worked cases, infeasibility messages,
 * options and the command line. */
#include "planner/ir/cost.h"
#include "planner/partition/downsets.h"
#include "planner/partition/partition.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_cluster_t *flat_cluster(int D, double mem_bytes, double gbps)
{
    pf_cluster_t *c = pf_cluster_new("flat", D);
    for (int i = 0; i < D; i++) {
        pf_device_t d = {.id = i, .host = 0, .mem_bytes = mem_bytes, .tflops = 100};
        pf_cluster_set_device(c, i, &d);
        for (int j = 0; j < i; j++)
            pf_cluster_set_link(c, i, j, gbps, 0);
    }
    return c;
}

/* A graph from arrays: op i has fwd_ms = cu[i], bwd_ms = 0, param_bytes = param[i] (or 0). */
static pf_graph_t *mk(int n, const double *cu, const double *param, int m, const int (*e)[2],
                      const double *bytes)
{
    char err[256], name[32];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .fwd_ms = cu[i], .param_bytes = param ? param[i] : 0};
        pf_graph_add_op(g, &op);
    }
    for (int j = 0; j < m; j++)
        pf_graph_add_edge(g, e[j][0], e[j][1], bytes[j]);
    if (pf_graph_finalize(g, err, sizeof err) != PF_OK) {
        fprintf(stderr, "%s\n", err);
        pf_graph_destroy(&g);
    }
    return g;
}

/* The cost model run() partitions with: fp32 Adam (state = 4 x parameter bytes). */
static void run_model(pf_cost_model_t *cm, const pf_cluster_t *c, int S, int mb)
{
    pf_training_t t;
    pf_training_init(&t);
    t.precision_bytes = 4;
    pf_cost_model_init(cm, c, S, mb, 0);
    pf_cost_model_set_training(cm, &t, 1, 0);
}

static int run(const pf_graph_t *g, const pf_cluster_t *c, int S, long long max_downsets,
               pf_plan_t **p, char *err, size_t errlen)
{
    pf_partition_opts_t o;
    pf_partition_opts_init(&o);
    o.stages = S;
    o.replicas = 1;
    o.coarsen_k = -1;
    o.refine = 0;
    o.train.precision_bytes = 4; /* fp32 Adam: 16 B per 4-byte parameter, state = 4 x params */
    if (max_downsets > 0)
        o.max_downsets = max_downsets;
    return pf_partition_run(g, c, &o, p, err, errlen);
}

/* ---- exhaustive search over chains of downsets ---- */

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    int n, nd, S;
    uint32_t full, *downs;
    double *memo; /* nd x nd x S stage values, NAN = not yet, INFINITY = does not fit */
    int *st;
    double best;
} bf_t;

static int closed(const pf_graph_t *g, uint32_t set)
{
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        if (((set >> ed->dst) & 1) && !((set >> ed->src) & 1))
            return 0;
    }
    return 1;
}

/* Stage downs[b] - downs[a] as stage `pos` (0-based: its memory holds that stage's micro-batches
 * in flight), priced by cost.h (the reference), +inf when it does not fit. */
static double bf_stage(bf_t *bf, int a, int b, int pos)
{
    double *m = &bf->memo[((size_t)a * bf->nd + b) * bf->S + pos];
    if (isnan(*m)) {
        uint32_t h = bf->downs[b] & ~bf->downs[a];
        for (int v = 0; v < bf->n; v++)
            bf->st[v] = ((h >> v) & 1) ? pos : -1;
        double mem = pf_cost_stage_mem_bytes(bf->g, bf->st, pos, bf->cm);
        *m = mem > bf->cm->mem_limit_bytes ? INFINITY
                                           : pf_cost_stage_time_ms(bf->g, bf->st, pos, bf->cm);
    }
    return *m;
}

/* Every chain downs[prev] < F < ... < V with `left` stages to go (branch and bound: a chain is
 * abandoned only when its max already reaches the best complete chain). */
static void bf_rec(bf_t *bf, int prev, int left, double curmax)
{
    uint32_t p = bf->downs[prev];
    if (left == 1) {
        if (p == bf->full)
            return;
        double v = fmax(curmax, bf_stage(bf, prev, bf->nd - 1, bf->S - 1));
        if (v < bf->best)
            bf->best = v;
        return;
    }
    for (int j = 0; j < bf->nd - 1; j++) {
        uint32_t f = bf->downs[j];
        if (f == p || (f & p) != p)
            continue;
        double v = fmax(curmax, bf_stage(bf, prev, j, bf->S - left));
        if (v < bf->best)
            bf_rec(bf, j, left - 1, v);
    }
}

/* Returns the count of downsets, or -1 when there are too many for the memo. */
static int brute_force(const pf_graph_t *g, const pf_cost_model_t *cm, int S, double *best)
{
    bf_t bf = {.g = g, .cm = cm, .n = pf_graph_nops(g), .S = S, .best = INFINITY};
    bf.full = (1u << bf.n) - 1;
    bf.downs = malloc(sizeof(uint32_t) << bf.n);
    for (uint32_t s = 0; s <= bf.full; s++)
        if (closed(g, s) && s != bf.full)
            bf.downs[bf.nd++] = s; /* the empty set first */
    bf.downs[bf.nd++] = bf.full;     /* V last */
    if (bf.nd > 700) {
        free(bf.downs);
        return -1;
    }
    bf.memo = malloc((size_t)bf.nd * bf.nd * S * sizeof *bf.memo);
    for (size_t i = 0; i < (size_t)bf.nd * bf.nd * S; i++)
        bf.memo[i] = NAN;
    bf.st = malloc((size_t)bf.n * sizeof *bf.st);
    bf_rec(&bf, 0, S, 0);
    *best = bf.best;
    free(bf.downs);
    free(bf.memo);
    free(bf.st);
    return bf.nd;
}

static double total_fixed_mem(const pf_graph_t *g, const pf_cost_model_t *cm)
{
    double m = 0;
    for (int v = 0; v < pf_graph_nops(g); v++)
        m += pf_cost_op_mem_bytes(g, v, cm);
    return m;
}

static void test_brute_force(void)
{
    static const double mem_factor[] = {INFINITY, 1.6, 1.1, 0.75};
    static const double p_edge[] = {0.15, 0.3, 0.5};
    int tested = 0, infeasible = 0, feasible = 0, mismatches = 0;
    char err[512];
    for (uint64_t seed = 1; seed <= 200; seed++) {
        int n = 4 + (int)(seed % 9);
        int S = 1 + (int)((seed / 9) % 4);
        pf_graph_t *g = pf_test_random_dag(seed, n, p_edge[seed % 3]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        pf_cost_model_t cm;
        pf_cluster_t *probe = flat_cluster(8, 1e18, 10);
        run_model(&cm, probe, S, 4);
        double limit = 1e18;
        if (isfinite(mem_factor[(seed / 3) % 4]))
            limit = mem_factor[(seed / 3) % 4] * total_fixed_mem(g, &cm) / S;
        pf_cluster_destroy(&probe);
        pf_cluster_t *c = flat_cluster(8, limit, 10);
        run_model(&cm, c, S, 4);

        double want;
        if (brute_force(g, &cm, S, &want) < 0) {
            pf_cluster_destroy(&c);
            pf_graph_destroy(&g);
            continue;
        }
        tested++;
        pf_plan_t *p = NULL;
        int rc = run(g, c, S, 0, &p, err, sizeof err);
        if (!isfinite(want)) {
            infeasible++;
            CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
            mismatches += rc != PF_EINFEASIBLE;
        } else {
            feasible++;
            CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
            PF_ASSERT_CLOSE(p->partition_objective_ms, want, 1e-9);
            mismatches += fabs(p->partition_objective_ms - want) > 1e-9 * want;
            CU_ASSERT_EQUAL(pf_plan_validate(p, g, c, err, sizeof err), PF_OK);
            CU_ASSERT(p->partition_search.exact);
            for (int s = 0; s < S; s++)
                CU_ASSERT(p->stage_list[s].peak_mem_bytes <= limit);
            /* The DP's own number equals cost.h's on the chain it returns. */
            int capped;
            pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
            int *st = malloc((size_t)n * sizeof *st);
            double obj;
            CU_ASSERT_EQUAL(pf_partition_dp(g, ds, 0, &cm, S, 1, &obj, st, err, sizeof err),
                            PF_OK);
            PF_ASSERT_CLOSE(obj, want, 1e-9);
            pf_downsets_destroy(&ds);
            free(st);
        }
        pf_plan_destroy(&p);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
    CU_ASSERT(tested >= 180);
    CU_ASSERT(infeasible >= 10); /* the memory limits bite in some seeds */
    CU_ASSERT(feasible >= 100);
    CU_ASSERT_EQUAL(mismatches, 0);
}

/* ---- edge cases against DESIGN.md's formulas, evaluated here from scratch ---- */

/* A small graph as plain arrays, ops indexed 0..n-1 in the order given to the graph. */
typedef struct {
    int n, m, src[48], dst[48];
    double bytes[48], cu[10], param[10], mfwd[10], mbwd[10];
} small_t;

/* t(H) = sum c_u + (bytes of edges crossing H) / (B GB/s x 1e9) s, in ms (eq. 3). */
static double indep_time_ms(const small_t *x, uint32_t h, double gbps)
{
    double t = 0, cut = 0;
    for (int v = 0; v < x->n; v++)
        if ((h >> v) & 1)
            t += x->cu[v];
    for (int e = 0; e < x->m; e++)
        if (((h >> x->src[e]) & 1) != ((h >> x->dst[e]) & 1))
            cut += x->bytes[e];
    return t + cut / (gbps * 1e9) * 1e3;
}

/* m(H) of stage pos (0-based) of S, DESIGN.md's memory with the default training (mixed-precision
 * Adam: 16 B per 2-byte parameter = 8 x param_bytes; 1F1B: min(MB, S - pos) micro-batches of
 * stored activations mem_fwd). mem_bwd plays no part. */
static double indep_mem_bytes(const small_t *x, uint32_t h, int mb, int S, int pos)
{
    double params = 0, act = 0;
    for (int v = 0; v < x->n; v++)
        if ((h >> v) & 1) {
            params += x->param[v];
            act += x->mfwd[v];
        }
    int k = S - pos < mb ? S - pos : mb;
    return 8 * params + k * act;
}

typedef struct {
    const small_t *x;
    uint32_t downs[1 << 10];
    int nd, S, mb;
    double gbps, limit, best;
    double memo[1 << 10][11]; /* NAN = not computed */
} chain_t;

/* The least max stage time over chains downs[i] = F_0 < F_1 < ... < F_left = V of nonempty
 * stages that fit (INFINITY when none): every chain, memoized on (F_0, left). */
static double indep_best(chain_t *c, int i, int left)
{
    double *m = &c->memo[i][left];
    if (!isnan(*m))
        return *m;
    uint32_t full = (1u << c->x->n) - 1, prev = c->downs[i];
    double best = INFINITY;
    for (int j = 0; j < c->nd; j++) {
        uint32_t f = c->downs[j], h = f & ~prev;
        if (f == prev || (f & prev) != prev || (left == 1) != (f == full))
            continue;
        if (indep_mem_bytes(c->x, h, c->mb, c->S, c->S - left) > c->limit)
            continue;
        double rest = left == 1 ? 0 : indep_best(c, j, left - 1);
        best = fmin(best, fmax(indep_time_ms(c->x, h, c->gbps), rest));
    }
    return *m = best;
}

/* Random DAGs of 1..9 ops with what the 200-DAG test above lacks: parallel edges, zero-byte
 * edges, zero-cost ops, integer costs (ties), S up to n + 1, a memory limit equal to some
 * stage's memory (feasible exactly at the limit), ops added in a shuffled order with file ids
 * neither 0..n-1 nor sorted; threads 1 and 2. Reference: the formulas above, not cost.h. */
static void test_edge_cases_independent(void)
{
    const double gbps = 10;
    const int mb = 4;
    int feasible = 0, at_limit = 0, too_few_ops = 0, mismatches = 0;
    char err[512];
    for (uint64_t seed = 1; seed <= 400; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed);
        small_t x = {.n = 1 + (int)pf_rng_below(&rng, 9)};
        int ties = seed % 2;
        for (int v = 0; v < x.n; v++) {
            x.cu[v] = ties                              ? (double)pf_rng_below(&rng, 4)
                      : pf_rng_uniform(&rng) < 0.2 ? 0
                                                        : pf_rng_range(&rng, 0.1, 5);
            x.param[v] = (double)pf_rng_below(&rng, 4) * 1e8;
            x.mfwd[v] = (double)pf_rng_below(&rng, 3) * 1e8;
            x.mbwd[v] = (double)pf_rng_below(&rng, 3) * 1e8;
        }
        /* edges between shuffled positions: op perm[i] -> op perm[j] for i < j */
        int perm[10];
        for (int i = 0; i < x.n; i++)
            perm[i] = i;
        for (int i = x.n - 1; i > 0; i--) {
            int j = (int)pf_rng_below(&rng, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int j = 1; j < x.n; j++)
            for (int i = 0; i < j; i++) {
                double u = pf_rng_uniform(&rng);
                for (int k = 0; k < (u < 0.25 ? 1 : u < 0.32 ? 2 : 0) && x.m < 48; k++) {
                    x.src[x.m] = perm[i];
                    x.dst[x.m] = perm[j];
                    x.bytes[x.m++] = pf_rng_uniform(&rng) < 0.2 ? 0
                                     : ties ? (double)(1 + pf_rng_below(&rng, 3)) * 1e7
                                            : pf_rng_range(&rng, 1e6, 5e7);
                }
            }
        pf_graph_t *g = pf_graph_new("edge", 1);
        for (int v = 0; v < x.n; v++) {
            pf_op_t op = {.id = 1000 - 7 * v, .fwd_ms = x.cu[v], .param_bytes = x.param[v],
                          .mem_fwd_bytes = x.mfwd[v], .mem_bwd_bytes = x.mbwd[v]};
            pf_graph_add_op(g, &op);
        }
        for (int e = 0; e < x.m; e++)
            pf_graph_add_edge(g, x.src[e], x.dst[e], x.bytes[e]);
        CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);

        static chain_t c;
        memset(&c, 0, sizeof c);
        c.x = &x;
        c.S = 1 + (int)pf_rng_below(&rng, (uint64_t)x.n + 1);
        c.mb = mb;
        c.gbps = gbps;
        c.limit = 1e30;
        for (uint32_t h = 0; h < (1u << x.n); h++) {
            int closed = 1;
            for (int e = 0; e < x.m; e++)
                closed &= !(((h >> x.dst[e]) & 1) && !((h >> x.src[e]) & 1));
            if (closed)
                c.downs[c.nd++] = h;
        }
        if (pf_rng_below(&rng, 3)) { /* the limit: some stage's own memory, at least every op */
            uint32_t a = c.downs[pf_rng_below(&rng, (uint64_t)c.nd)];
            uint32_t b = c.downs[pf_rng_below(&rng, (uint64_t)c.nd)];
            uint32_t h = (a | b) & ~(a & b);
            c.limit = indep_mem_bytes(&x, h ? h : (1u << x.n) - 1, mb, c.S,
                                      (int)pf_rng_below(&rng, (uint64_t)c.S));
            for (int v = 0; v < x.n; v++) /* the last stage holds one micro-batch */
                c.limit = fmax(c.limit, 8 * x.param[v] + x.mfwd[v]);
        }
        for (int i = 0; i < c.nd; i++)
            for (int k = 0; k <= c.S; k++)
                c.memo[i][k] = NAN;
        c.best = indep_best(&c, 0, c.S); /* downs[0] is the empty set */
        pf_cluster_t *cl = flat_cluster(12, c.limit, gbps);
        pf_partition_opts_t o;
        pf_partition_opts_init(&o);
        o.stages = c.S;
        o.replicas = 1;
        o.microbatches = mb;
        o.coarsen_k = -1;
        o.refine = 0;
        o.threads = 1 + (int)(seed % 2);
        pf_plan_t *p = NULL;
        int rc = pf_partition_run(g, cl, &o, &p, err, sizeof err);
        too_few_ops += c.S > x.n;
        if (!isfinite(c.best)) {
            CU_ASSERT_EQUAL(rc, PF_EINFEASIBLE);
            mismatches += rc != PF_EINFEASIBLE;
        } else {
            feasible++;
            CU_ASSERT_EQUAL_FATAL(rc, PF_OK);
            PF_ASSERT_CLOSE(p->partition_objective_ms, c.best, 1e-9);
            mismatches += fabs(p->partition_objective_ms - c.best) > 1e-9 * fmax(1, c.best);
            for (int s = 0; s < c.S; s++)
                at_limit += p->stage_list[s].peak_mem_bytes == c.limit;
        }
        pf_plan_destroy(&p);
        pf_cluster_destroy(&cl);
        pf_graph_destroy(&g);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT(feasible >= 200);
    CU_ASSERT(at_limit >= 10);    /* stages that fit exactly were accepted */
    CU_ASSERT(too_few_ops >= 20); /* S > ops: infeasible, named as such */
}

/* ---- hand-worked ---- */

/* Chain 0 -> 1 -> 2 -> 3, c_u = 6, 3, 6, 2 ms, edge bytes 1e6, 2e6, 4e6 at 1 GB/s = 1, 2, 4 ms.
 * S = 2: {0}|{1,2,3}: max(6+1, 11+1) = 12; {0,1}|{2,3}: max(9+2, 8+2) = 11;
 *        {0,1,2}|{3}: max(15+4, 2+4) = 19  -> 11, cut after op 1.
 * S = 3: {0}|{1}|{2,3}: max(7, 3+1+2, 8+2) = 10; {0}|{1,2}|{3}: max(7, 9+1+4, 6) = 14;
 *        {0,1}|{2}|{3}: max(11, 6+2+4, 6) = 12  -> 10.
 * S = 4: max(7, 6, 12, 6) = 12. */
static void test_chain(void)
{
    const double cu[] = {6, 3, 6, 2}, bytes[] = {1e6, 2e6, 4e6};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 3, e, bytes);
    pf_cluster_t *c = flat_cluster(4, 1e12, 1);
    pf_plan_t *p;
    char err[256];
    const double want[] = {17, 11, 10, 12};
    for (int S = 1; S <= 4; S++) {
        CU_ASSERT_EQUAL_FATAL(run(g, c, S, 0, &p, err, sizeof err), PF_OK);
        PF_ASSERT_CLOSE(p->partition_objective_ms, want[S - 1], 1e-12);
        if (S == 2) {
            CU_ASSERT_EQUAL(p->stage_list[0].nops, 2);
            CU_ASSERT_EQUAL(p->stage_list[0].ops[1], 1);
            PF_ASSERT_CLOSE(p->stage_list[0].compute_ms, 9, 1e-12);
            PF_ASSERT_CLOSE(p->stage_list[1].time_ms, 10, 1e-12);
            CU_ASSERT_EQUAL(p->partition_search.downsets, 5);
            CU_ASSERT_EQUAL(p->replicas, 1);
        }
        pf_plan_destroy(&p);
    }
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Diamond 0 -> {1, 2} -> 3, c_u = 5, 4, 4, 5, every edge 1e6 bytes = 1 ms at 1 GB/s.
 * S = 2: {0}|{1,2,3}: 13 + 2 = 15; {0,1}|{2,3}: 9 + 2 (0->2, 1->3) = 11 both sides;
 *        {0,2}|{1,3} the same; {0,1,2}|{3}: 15  -> 11.
 * S = 4: {0}|{1}|{2}|{3}: max(5+2, 4+2, 4+2, 5+2) = 7. */
static void test_diamond(void)
{
    const double cu[] = {5, 4, 4, 5}, bytes[] = {1e6, 1e6, 1e6, 1e6};
    const int e[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 4, e, bytes);
    pf_cluster_t *c = flat_cluster(4, 1e12, 1);
    pf_plan_t *p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(run(g, c, 2, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 11, 1e-12);
    CU_ASSERT_EQUAL(p->partition_search.downsets, 6);
    pf_plan_destroy(&p);
    CU_ASSERT_EQUAL_FATAL(run(g, c, 4, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 7, 1e-12);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* The DP clamps cells up to a lower bound of the answer (largest op, total / S); when the
 * optimum is that bound the chain must still be valid and reach it. Edges carry 0 bytes.
 *   c_u 1, 1, 1, 1, S = 2: total / S = 2 = {0,1}|{2,3}.
 *   c_u 10, 1, 1, 1, 1, S = 3: the largest op, 10: {0}|{...}|{...} with the rest split 2 + 2
 *   (or 1 + 3): the answer is 10 either way and every stage must be nonempty. */
static void test_lower_bound_binds(void)
{
    const double cu4[] = {1, 1, 1, 1}, cu5[] = {10, 1, 1, 1, 1}, zero[] = {0, 0, 0, 0};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}};
    pf_graph_t *a = mk(4, cu4, NULL, 3, e, zero), *b = mk(5, cu5, NULL, 4, e, zero);
    pf_cluster_t *c = flat_cluster(4, 1e12, 1);
    pf_plan_t *p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(run(a, c, 2, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 2, 1e-12);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 2);
    pf_plan_destroy(&p);
    for (int S = 2; S <= 4; S++) {
        CU_ASSERT_EQUAL_FATAL(run(b, c, S, 0, &p, err, sizeof err), PF_OK);
        PF_ASSERT_CLOSE(p->partition_objective_ms, 10, 1e-12);
        CU_ASSERT_EQUAL(pf_plan_validate(p, b, c, err, sizeof err), PF_OK);
        for (int s = 0; s < S; s++)
            CU_ASSERT(p->stage_list[s].nops >= 1);
        pf_plan_destroy(&p);
    }
    pf_cluster_destroy(&c);
    pf_graph_destroy(&a);
    pf_graph_destroy(&b);
}

/* Two branches: 0 -> {1, 2} -> 3, c_u = 1, 1, 10, 10, every edge 1 ms. Kahn's order is
 * 0, 1, 2, 3, so its prefixes miss {0, 2}.
 *   prefixes, S = 2: {0}|{1,2,3}: max(1+2, 21+2) = 23; {0,1}|{2,3}: max(2+2, 20+2) = 22;
 *                    {0,1,2}|{3}: max(12+2, 10+2) = 14  -> 14
 *   downsets: {0,2}|{1,3}: cut 0->1 and 2->3: max(11+2, 11+2) = 13  -> 13. */
static void test_needs_other_order(void)
{
    const double cu[] = {1, 1, 10, 10}, bytes[] = {1e6, 1e6, 1e6, 1e6};
    const int e[][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 4, e, bytes);
    pf_cluster_t *c = flat_cluster(2, 1e12, 1);
    pf_plan_t *p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(run(g, c, 2, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 13, 1e-12);
    CU_ASSERT(p->partition_search.exact);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 2);
    CU_ASSERT_EQUAL(p->stage_list[0].ops[1], 2);
    pf_plan_destroy(&p);
    /* 6 downsets; a cap of 5 forces the prefix fallback */
    CU_ASSERT_EQUAL_FATAL(run(g, c, 2, 5, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 14, 1e-12);
    CU_ASSERT_EQUAL(p->partition_search.exact, 0);
    CU_ASSERT_EQUAL(p->partition_search.downsets, 5);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Chain 0 -> 1 -> 2, c_u = 5, 5, 10, edges 1e6 bytes (1 ms), params 1e9, 1e9, 0 (x4: fp32
 * Adam's state), no activations. Time alone: {0}|{1,2}: max(6, 16) = 16; {0,1}|{2}:
 * max(11, 11) = 11. Memory ({0,1}): 4 x 2e9 = 8e9 > 6e9; {0}: 4e9; {1,2}: 4e9.
 * With 6e9 per device the boundary must follow op 0: 16. */
static void test_memory_forces_boundary(void)
{
    const double cu[] = {5, 5, 10}, param[] = {1e9, 1e9, 0}, bytes[] = {1e6, 1e6};
    const int e[][2] = {{0, 1}, {1, 2}};
    pf_graph_t *g = mk(3, cu, param, 2, e, bytes);
    pf_cluster_t *big = flat_cluster(2, 1e10, 1), *small = flat_cluster(2, 6e9, 1);
    pf_plan_t *p;
    char err[256];
    CU_ASSERT_EQUAL_FATAL(run(g, big, 2, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 11, 1e-12);
    pf_plan_destroy(&p);
    CU_ASSERT_EQUAL_FATAL(run(g, small, 2, 0, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 16, 1e-12);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 1);
    PF_ASSERT_CLOSE(p->stage_list[1].peak_mem_bytes, 4e9, 1e-12);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&big);
    pf_cluster_destroy(&small);
    pf_graph_destroy(&g);
}

/* An op whose parameter state alone (4 x 20 GiB) plus 10 GiB of activations exceeds 80 GiB. */
static void test_op_too_big(void)
{
    char err[512];
    double gib = 1024.0 * 1024 * 1024;
    pf_graph_t *g = pf_graph_new("big", 1);
    pf_op_t a = {.id = 16, .name = "layers.3.attn", .fwd_ms = 1, .param_bytes = gib};
    pf_op_t b = {.id = 17, .name = "layers.3.mlp.fc1", .fwd_ms = 1, .param_bytes = 20 * gib,
                 .mem_fwd_bytes = 10 * gib, .mem_bwd_bytes = 5 * gib};
    pf_graph_add_op(g, &a);
    pf_graph_add_op(g, &b);
    pf_graph_add_edge(g, 0, 1, 1e6);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = flat_cluster(2, 80 * gib, 100);
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL(run(g, c, 2, 0, &p, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(err, "op 17 (layers.3.mlp.fc1) needs 90.0 GiB with its parameter "
                                "state; devices have 80.0 GiB");
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Three ops of 4 x 0.75e9 = 3e9 bytes each, edges of 0 bytes, 4e9 per device: one op per
 * stage. S = 2: the best chain holds two ops in a stage, 6e9 = 5.6 GiB; 4e9 = 3.7 GiB. */
static void test_stage_count_infeasible(void)
{
    const double cu[] = {1, 1, 1}, param[] = {0.75e9, 0.75e9, 0.75e9}, bytes[] = {0, 0};
    const int e[][2] = {{0, 1}, {1, 2}};
    pf_graph_t *g = mk(3, cu, param, 2, e, bytes);
    pf_cluster_t *c = flat_cluster(3, 4e9, 1);
    pf_plan_t *p = NULL;
    char err[512];
    CU_ASSERT_EQUAL(run(g, c, 2, 0, &p, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_STRING_EQUAL(err, "no partition into 2 stages fits 3.7 GiB per device; the best "
                                "found needs 5.6 GiB on its largest stage");
    CU_ASSERT_EQUAL(run(g, c, 3, 0, &p, err, sizeof err), PF_OK);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* Chain 0 -> 1 -> 2 -> 3, c_u = 1 each, parameter state 4 x 0.25e9 = 1e9 each (fp32 Adam), op 0
 * stores 0.8e9 of activations, edges 1e6, 1e9, 1e6 bytes; 3.5e9 per device, S = 2, MB = 4, so
 * stage 0 holds k_0 = min(4, 2) = 2 micro-batches and stage 1 one:
 *   {0}|{1,2,3}: 1e9 + 2 x 0.8e9 = 2.6e9 and 3e9: fits.
 *   {0,1}|{2,3}: 2e9 + 2 x 0.8e9 = 3.6e9: does not.   {0,1,2}|{3}: 4.6e9: does not.
 * Coarsening to K = 2 with alpha = 0: all pairs cost 2, (0,1) fuses first (lowest index; alone
 * it needs 1.8e9 + 1e9, fits), then (2,3) costs 2 < (01,2) at 3: {0,1}|{2,3}, whose only cut does
 * not fit. The DP then retries on the ops and finds the cut that fits. */
static void test_coarsening_hides_cut(void)
{
    const double bytes[] = {1e6, 1e9, 1e6};
    char err[512], name[16];
    pf_graph_t *g = pf_graph_new("hide", 1);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .fwd_ms = 1, .param_bytes = 0.25e9,
                      .mem_fwd_bytes = i == 0 ? 0.8e9 : 0};
        pf_graph_add_op(g, &op);
    }
    for (int i = 0; i < 3; i++)
        pf_graph_add_edge(g, i, i + 1, bytes[i]);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cluster_t *c = flat_cluster(2, 3.5e9, 1000);
    pf_partition_opts_t o;
    pf_partition_opts_init(&o);
    o.stages = 2;
    o.coarsen_k = 2;
    o.alpha = 0;
    o.refine = 0;
    o.train.precision_bytes = 4;
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(p->partition_search.hyper_ops, 4);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 1);
    for (int s = 0; s < 2; s++)
        CU_ASSERT(p->stage_list[s].peak_mem_bytes <= 3.5e9);
    pf_plan_destroy(&p);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

static void test_options(void)
{
    const double cu[] = {1, 2, 3, 4, 5, 6}, bytes[] = {1, 1, 1, 1, 1};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}};
    pf_graph_t *g = mk(6, cu, NULL, 5, e, bytes);
    pf_cluster_t *c = flat_cluster(8, 1e12, 10);
    pf_partition_opts_t o;
    pf_plan_t *p = NULL;
    char err[512];
    pf_partition_opts_init(&o);
    o.stages = 9; /* more stages than devices */
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    o.stages = 3;
    o.replicas = 3; /* 9 > 8 devices */
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "3 x 3"));
    o.replicas = 0;
    o.coarsen_k = 2; /* fewer hyper-ops than stages */
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    o.coarsen_k = 0;
    o.alpha = -1;
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    o.alpha = 1;
    CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(p->replicas, 2); /* 8 / 3 */
    CU_ASSERT_EQUAL(p->microbatches, PF_DEFAULT_MICROBATCHES);
    CU_ASSERT_EQUAL(p->devices, 8);
    CU_ASSERT_STRING_EQUAL(p->model, "hand");
    CU_ASSERT(p->partition_search.present);
    CU_ASSERT_EQUAL(p->partition_search.ops, 6);
    CU_ASSERT_EQUAL(p->partition_search.hyper_ops, 6); /* K = clamp(24, 48, 6) = 6 */
    PF_ASSERT_CLOSE(p->partition_search.flat_gbps, 10, 1e-12);
    pf_plan_destroy(&p);
    o.stages = 7; /* more stages than ops */
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINFEASIBLE);
    /* a caller's grouping: {0,1,2} {3,4,5} into 2 stages = the one cut between them */
    int group[] = {0, 0, 0, 1, 1, 1};
    o.stages = 2;
    o.group = group;
    o.ngroups = 2;
    o.refine = 0;
    CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL(p->stage_list[0].nops, 3);
    CU_ASSERT_EQUAL(p->partition_search.hyper_ops, 2);
    pf_plan_destroy(&p);
    int bad[] = {0, 1, 0, 1, 1, 1}; /* not convex */
    o.group = bad;
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

/* ---- whole groups (the search's --layer-aligned) ---- */

/* embed -> layers.B.a -> layers.B.b (B = 0, 1, 2) -> head: c_u = 1 each, fp32 Adam state 4 x
 * params: a 2e9, b 1e9, embed and head 0; edges of 0 bytes, no activations. Groups: a block
 * each, embed with layers.0 and head with layers.2 (as search_partition.c groups them). At S = 2
 * whole blocks give 3e9 | 6e9 or 6e9 | 3e9; single ops reach 5e9 | 4e9 (cut after layers.1.a),
 * the cut the op-level retry finds when the limit is 5.5e9. */
static pf_graph_t *three_blocks(int *group)
{
    char err[256], name[32];
    pf_graph_t *g = pf_graph_new("blocks3", 1);
    for (int v = 0; v < 8; v++) {
        int b = (v - 1) / 2, in_block = v >= 1 && v <= 6;
        if (in_block)
            snprintf(name, sizeof name, "layers.%d.%s", b, v % 2 ? "a" : "b");
        else
            snprintf(name, sizeof name, "%s", v == 0 ? "embed" : "head");
        pf_op_t op = {.id = v, .name = name, .fwd_ms = 1,
                      .param_bytes = in_block ? (v % 2 ? 0.5e9 : 0.25e9) : 0};
        pf_graph_add_op(g, &op);
        group[v] = v == 0 ? 0 : v == 7 ? 2 : b;
    }
    for (int v = 0; v < 7; v++)
        pf_graph_add_edge(g, v, v + 1, 0);
    if (pf_graph_finalize(g, err, sizeof err) != PF_OK)
        pf_graph_destroy(&g);
    return g;
}

/* Every group in one stage, stages in group order (a chain: no other partition is convex). */
static int groups_whole(const pf_plan_t *p, const int *group, int n)
{
    int *at = malloc((size_t)n * sizeof *at), ok = 1, prev = -1;
    for (int v = 0; v < n; v++)
        at[v] = -1;
    for (int s = 0; s < p->stages; s++)
        for (int i = 0; i < p->stage_list[s].nops; i++) {
            int v = p->stage_list[s].ops[i];
            ok &= at[group[v]] < 0 || at[group[v]] == s;
            at[group[v]] = s;
        }
    for (int k = 0; k < n && at[k] >= 0; k++) {
        ok &= at[k] >= prev;
        prev = at[k];
    }
    free(at);
    return ok;
}

/* Brute force over the block boundaries: the least largest-stage state of S stages of whole
 * blocks (3 blocks of 3e9 each), INFINITY when S > 3. */
static double whole_blocks_best_mem(int S)
{
    return S == 1 ? 9e9 : S == 2 ? 6e9 : S == 3 ? 3e9 : INFINITY;
}

static void test_whole_groups(void)
{
    int group[8];
    pf_graph_t *g = three_blocks(group);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_partition_opts_t o;
    pf_partition_opts_init(&o);
    o.stages = 2;
    o.replicas = 1;
    o.train.precision_bytes = 4;
    o.group = group;
    o.ngroups = 3;
    pf_cluster_t *c = flat_cluster(4, 5.5e9, 100);
    pf_plan_t *p = NULL;
    char err[512];
    /* a coarsening (group_whole off): the retry on single ops cuts layers.1 where memory needs */
    CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_OK);
    CU_ASSERT_FALSE(groups_whole(p, group, 8));
    PF_ASSERT_CLOSE(p->stage_list[0].peak_mem_bytes, 5e9, 1e-12);
    pf_plan_destroy(&p);
    /* whole groups: no retry, and the message says what was kept whole */
    o.group_whole = 1;
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_PTR_NULL(p);
    CU_ASSERT_STRING_EQUAL(err, "no partition into 2 stages of whole groups fits 5.1 GiB per "
                                "device; the best found needs 5.6 GiB on its largest stage");
    o.stages = 4;
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINFEASIBLE);
    CU_ASSERT_STRING_EQUAL(err, "no partition into 4 stages: graph blocks3 has only 3 groups");
    o.group = NULL;
    CU_ASSERT_EQUAL(pf_partition_run(g, c, &o, &p, err, sizeof err), PF_EINPUT);
    o.group = group;
    pf_cluster_destroy(&c);
    /* every limit from 2.5e9 to 10e9 and S = 1..4, refinement on: whole groups or PF_EINFEASIBLE,
     * exactly when brute force finds no S whole-block stages under the limit */
    for (double mem = 2.5e9; mem <= 10e9; mem += 0.25e9)
        for (int S = 1; S <= 4; S++) {
            c = flat_cluster(4, mem, 100);
            o.stages = S;
            o.refine = 1;
            int rc = pf_partition_run(g, c, &o, &p, err, sizeof err);
            CU_ASSERT_EQUAL(rc, whole_blocks_best_mem(S) <= mem ? PF_OK : PF_EINFEASIBLE);
            if (rc == PF_OK) {
                CU_ASSERT(groups_whole(p, group, 8));
                for (int s = 0; s < S; s++)
                    CU_ASSERT(p->stage_list[s].peak_mem_bytes <= mem);
            }
            pf_plan_destroy(&p);
            pf_cluster_destroy(&c);
        }
    pf_graph_destroy(&g);
}

/* Thread count and coarsening/refinement on: same result with 1 and 2 threads, the plan's
 * numbers are cost.h's, and refinement never makes the objective worse. */
static void test_full_flow(void)
{
    char err[512];
    for (uint64_t seed = 1; seed <= 12; seed++) {
        pf_graph_t *g = pf_test_random_dag(1000 + seed, 60 + (int)seed * 10, 0.04);
        pf_cluster_t *c = flat_cluster(8, 1e18, 10);
        pf_partition_opts_t o;
        pf_partition_opts_init(&o);
        o.stages = 2 + (int)(seed % 3);
        o.coarsen_k = 20;
        pf_plan_t *p1 = NULL, *p2 = NULL;
        o.threads = 1;
        CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p1, err, sizeof err), PF_OK);
        o.threads = 2;
        CU_ASSERT_EQUAL_FATAL(pf_partition_run(g, c, &o, &p2, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL(p1->partition_objective_ms, p2->partition_objective_ms);
        CU_ASSERT(p1->partition_objective_ms <=
                  p1->partition_search.objective_before_refine_ms * (1 + 1e-12));
        CU_ASSERT_EQUAL(p1->partition_search.hyper_ops, 20);
        CU_ASSERT_EQUAL(pf_plan_validate(p1, g, c, err, sizeof err), PF_OK);
        pf_plan_t *copy = pf_plan_clone(p1);
        pf_cost_model_t cm;
        pf_cost_model_init(&cm, c, o.stages, 0, 0);
        pf_cost_fill_plan(copy, g, &cm);
        CU_ASSERT_EQUAL(copy->partition_objective_ms, p1->partition_objective_ms);
        pf_plan_destroy(&copy);
        pf_plan_destroy(&p1);
        pf_plan_destroy(&p2);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
}

/* The parallel path: DPs past the size that gets a thread team (partition.c, dp_threads: 10^5
 * candidate pairs; the DAGs here, 40 ops, edge probability 0.15, seeds 1 and 3, have 3,988 and 5,108 downsets, over 10^6 pairs)
 * give the same objective and the same stage of every op with 1, 2 and 3 threads, at every S. */
static void test_threads_large_dp(void)
{
    char err[512];
    int checked = 0;
    for (uint64_t seed = 1; seed <= 3; seed += 2) {
        pf_graph_t *g = pf_test_random_dag(7000 + seed, 40, 0.15);
        pf_cluster_t *c = flat_cluster(8, 1e18, 10);
        int capped = 0, n = pf_graph_nops(g);
        pf_downsets_t *ds = pf_downsets_enumerate(g, 200000, &capped);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ds);
        long long D = pf_downsets_size(ds);
        CU_ASSERT(D >= 2000); /* pairs >= D^2 / 4 when no size class holds half the downsets */
        int *st1 = malloc((size_t)n * sizeof *st1), *stk = malloc((size_t)n * sizeof *stk);
        for (int S = 1; S <= 4; S++) {
            pf_cost_model_t cm;
            pf_cost_model_init(&cm, c, S, 4, 0);
            double v1, vk;
            CU_ASSERT_EQUAL_FATAL(pf_partition_dp(g, ds, 0, &cm, S, 1, &v1, st1, err, sizeof err), PF_OK);
            CU_ASSERT(isfinite(v1));
            for (int t = 2; t <= 3; t++) {
                CU_ASSERT_EQUAL_FATAL(pf_partition_dp(g, ds, 0, &cm, S, t, &vk, stk, err, sizeof err), PF_OK);
                CU_ASSERT_EQUAL(memcmp(&v1, &vk, sizeof v1), 0);
                CU_ASSERT_EQUAL(memcmp(st1, stk, (size_t)n * sizeof *st1), 0);
                checked++;
            }
        }
        free(st1);
        free(stk);
        pf_downsets_destroy(&ds);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
    CU_ASSERT_EQUAL(checked, 16);
}

/* ---- command line ---- */

static void test_cli(void)
{
    char cmd[2048], out[4096], err[256];
    const double cu[] = {6, 3, 6, 2}, bytes[] = {1e6, 2e6, 4e6};
    const int e[][2] = {{0, 1}, {1, 2}, {2, 3}};
    pf_graph_t *g = mk(4, cu, NULL, 3, e, bytes);
    pf_cluster_t *c = flat_cluster(4, 1e12, 1);
    char gpath[600], cpath[600], ppath[600];
    snprintf(gpath, sizeof gpath, "%s/part_g.json", pf_test_tmpdir());
    snprintf(cpath, sizeof cpath, "%s/part_c.json", pf_test_tmpdir());
    snprintf(ppath, sizeof ppath, "%s/part_p.json", pf_test_tmpdir());
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(g, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(c, cpath, err, sizeof err), PF_OK);
    const char *bin = pf_test_bin();

    snprintf(cmd, sizeof cmd, "%s partition %s %s --stages 2 --no-refine -o %s", bin, gpath,
             cpath, ppath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    pf_plan_t *p = NULL;
    CU_ASSERT_EQUAL_FATAL(pf_plan_load(ppath, g, c, &p, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(p->partition_objective_ms, 11, 1e-12); /* test_chain's arithmetic */
    CU_ASSERT_EQUAL(p->replicas, 2);
    CU_ASSERT_PTR_NULL(p->stage_list[0].devices);
    pf_plan_destroy(&p);

    snprintf(cmd, sizeof cmd, "%s partition %s %s --stages 2 --coarsen -1 --threads 1", bin,
             gpath, cpath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"partition_objective_ms\": 11"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"exact\": true"));

    snprintf(cmd, sizeof cmd, "%s partition --help", bin);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--max-downsets"));
    const char *bad[] = {"", "--stages 0", "--stages 5", "--stages 2 --replicas 3",
                         "--stages 2 --coarsen x", "--stages 2 --alpha -1",
                         "--stages 2 --bogus"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s partition %s %s %s", bin, gpath, cpath, bad[i]);
        CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);
    }
    snprintf(cmd, sizeof cmd, "%s partition %s --stages 2", bin, gpath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 2);

    /* exit 3 names the constraint */
    const double param[] = {1e9, 0, 0, 0};
    pf_graph_t *heavy = mk(4, cu, param, 3, e, bytes);
    pf_cluster_t *small = flat_cluster(4, 3e9, 1);
    CU_ASSERT_EQUAL_FATAL(pf_graph_save(heavy, gpath, err, sizeof err), PF_OK);
    CU_ASSERT_EQUAL_FATAL(pf_cluster_save(small, cpath, err, sizeof err), PF_OK);
    snprintf(cmd, sizeof cmd, "%s partition %s %s --stages 2", bin, gpath, cpath);
    CU_ASSERT_EQUAL(pf_test_run(cmd, out, sizeof out), 3);
    /* the command's default training, mixed-precision Adam: 16 B per 2-byte parameter, 8e9 B */
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "op 0 (op0) needs 7.5 GiB"));
    pf_graph_destroy(&heavy);
    pf_cluster_destroy(&small);
    pf_cluster_destroy(&c);
    pf_graph_destroy(&g);
}

void pf_suite_partition(void)
{
    CU_pSuite s = CU_add_suite("partition", NULL, NULL);
    CU_add_test(s, "DP equals exhaustive search over downset chains (200 DAGs)", test_brute_force);
    CU_add_test(s, "parallel/zero-byte edges, zero costs, ties, S > ops, memory at the limit: "
                   "DESIGN.md's formulas by brute force",
                test_edge_cases_independent);
    CU_add_test(s, "chain, worked by hand", test_chain);
    CU_add_test(s, "diamond, worked by hand", test_diamond);
    CU_add_test(s, "the DP's lower-bound clamp when the bound is the answer",
                test_lower_bound_binds);
    CU_add_test(s, "best cut needs another topological order; prefixes do worse",
                test_needs_other_order);
    CU_add_test(s, "memory forces a stage boundary", test_memory_forces_boundary);
    CU_add_test(s, "op too big for any device names the op", test_op_too_big);
    CU_add_test(s, "too few stages for memory names the stage count",
                test_stage_count_infeasible);
    CU_add_test(s, "coarsening hides the cut memory needs: the ops are tried",
                test_coarsening_hides_cut);
    CU_add_test(s, "options and defaults", test_options);
    CU_add_test(s, "whole groups (--layer-aligned) under memory pressure: never cut, or "
                   "PF_EINFEASIBLE exactly when brute force finds none", test_whole_groups);
    CU_add_test(s, "coarsen + DP + refine: threads agree, numbers are cost.h's", test_full_flow);
    CU_add_test(s, "DPs large enough for a thread team: 1, 2, 3 threads give the same plan",
                test_threads_large_dp);
    CU_add_test(s, "command line: plan file, exit statuses 2 and 3", test_cli);
}
