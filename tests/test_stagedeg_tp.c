/* stagedeg_tp: a hand-worked case where tensor parallelism wins, exhaustive search over chains x
 * (d, t) per stage on tiny DAGs with two configurations per op and t (the stage's choice
 * re-derived here from stagedeg_tp.h's text; also the exact optimum over every configuration,
 * which bounds the DP from below), and the t = 1 case against stagedeg's `notp` DP. */
#include "planner/partition/stagedeg_tp.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_stagedeg_result_t *solve(const pf_graph_t *g, const pf_cost_model_t *cm,
                                   const pf_stagedeg_opts_t *o, const pf_stagedeg_tmpcs_t *tab)
{
    char err[256];
    int capped;
    pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
    pf_stagedeg_result_t *r = NULL;
    if (ds && pf_stagedeg_tp_run(g, ds, cm, o, tab, &r, err, sizeof err) != PF_OK)
        fprintf(stderr, "stagedeg_tp: %s\n", err);
    pf_downsets_destroy(&ds);
    return r;
}

/* Two ops in a chain, each 4 ms on one device and 2.5 ms on a replica of two, 2e6 parameter bytes
 * on one device and 1e6 on each of two, the edge between them 3e6 bytes; 1 GB/s, MB = 2, D = 2,
 * ring all-reduce, memory free. One stage on 2 replicas: 8 / 2 + 2 x 1/2 x 4e6 / 2 bytes = 4 + 2
 * = 6 ms; two stages of one device: 4 + 3 (the edge) = 7; one stage, t = 2: 5 + nothing (the edge
 * is inside, its 1e6 sync bytes are not paid) = 5. */
static void test_tensor_parallel_wins(void)
{
    char err[256];
    pf_graph_t *g = pf_graph_new("hand", 1);
    for (int i = 0; i < 2; i++) {
        pf_op_t op = {.id = i, .name = i ? "b" : "a", .fwd_ms = 4, .param_bytes = 2e6};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 3e6);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    double sync[] = {1e6};
    pf_stagedeg_tmpc_t opt[] = {{1, 4, 2e6, 0, 0, NULL}, {2, 2.5, 1e6, 0, 0, sync},
                                {1, 4, 2e6, 0, 0, NULL}, {2, 2.5, 1e6, 0, 0, sync}};
    int first[] = {0, 2, 4};
    pf_stagedeg_tmpcs_t tab = {opt, first};
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 2, 1e30);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 2;
    pf_stagedeg_result_t *r = solve(g, &cm, &o, &tab);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 5, 1e-12);
    CU_ASSERT_EQUAL_FATAL(r->stages, 1);
    CU_ASSERT(r->tensor[0] == 2 && r->degree[0] == 1);
    CU_ASSERT(r->op_tmpc[0] == 1 && r->op_tmpc[1] == 1);
    /* the same plan cut in two stages of t = 1 is priced 7 (a result sized for two stages) */
    pf_stagedeg_result_destroy(&r);
    r = pf_stagedeg_result_new(2, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    r->op_stage[0] = 0, r->op_stage[1] = 1;
    r->tensor[0] = r->tensor[1] = 1;
    r->degree[0] = r->degree[1] = 1;
    r->op_tmpc[0] = r->op_tmpc[1] = 0;
    CU_ASSERT_EQUAL(pf_stagedeg_tp_eval(g, &cm, &o, &tab, r, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(r->objective_ms, 7, 1e-12);
    /* t = 2 for both: 3 devices... 4 of 2: refused */
    r->tensor[0] = r->tensor[1] = 2;
    r->op_tmpc[0] = r->op_tmpc[1] = 1;
    CU_ASSERT_EQUAL(pf_stagedeg_tp_eval(g, &cm, &o, &tab, r, err, sizeof err), PF_EINPUT);
    /* a configuration for another t: refused */
    r->tensor[0] = r->tensor[1] = 1;
    CU_ASSERT_EQUAL(pf_stagedeg_tp_eval(g, &cm, &o, &tab, r, err, sizeof err), PF_EINPUT);
    pf_stagedeg_result_destroy(&r);
    /* three configurations for one t: refused (the heuristic's limit) */
    pf_stagedeg_tmpc_t three[] = {{1, 4, 0, 0, 0, NULL}, {1, 5, 0, 0, 0, NULL}, {1, 6, 0, 0, 0, NULL},
                                  {1, 4, 0, 0, 0, NULL}};
    int first3[] = {0, 3, 4};
    pf_stagedeg_tmpcs_t tab3 = {three, first3};
    int capped;
    pf_downsets_t *ds = pf_downsets_enumerate(g, 100, &capped);
    CU_ASSERT_EQUAL(pf_stagedeg_tp_run(g, ds, &cm, &o, &tab3, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(r);
    /* [PipeDream]'s per-micro-batch all-reduce is stagedeg.c's alone: refused, not ignored */
    o.allreduce_per_microbatch = 1;
    CU_ASSERT_EQUAL(pf_stagedeg_tp_run(g, ds, &cm, &o, &tab, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "allreduce_per_microbatch"));
    CU_ASSERT_PTR_NULL(r);
    pf_downsets_destroy(&ds);
    pf_graph_destroy(&g);
}

/* ---- exhaustive search ---- */

enum { NMAX = 6, TS = 3 };

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    const pf_stagedeg_opts_t *o;
    const pf_stagedeg_tmpcs_t *tab;
    int n, S;
    uint32_t mask[NMAX];
    int d[NMAX], t[NMAX];
    double best, exact;
} brute_t;

/* The configurations of v for t (absolute indices into tab->opt): how many, at most 2. */
static int confs(const brute_t *b, int v, int t, int *c)
{
    int k = 0;
    for (int x = b->tab->first[v]; x < b->tab->first[v + 1]; x++)
        if (b->tab->opt[x].t == t)
            c[k++] = x;
    return k;
}

/* Op v's time, boundary bytes, parameters, act and fixed under configuration x in stage mask. */
static void terms(const brute_t *b, uint32_t mask, int v, int x, double *out)
{
    const pf_stagedeg_tmpc_t *c = &b->tab->opt[x];
    int nin, nout;
    const int *in = pf_graph_in(b->g, v, &nin), *ou = pf_graph_out(b->g, v, &nout);
    out[0] = c->time_ms;
    out[1] = 0;
    for (int i = 0; i < nin; i++)
        if (!((mask >> pf_graph_edge(b->g, in[i])->src) & 1))
            out[1] += pf_graph_edge(b->g, in[i])->bytes + (c->sync_bytes ? c->sync_bytes[i] : 0);
    for (int i = 0; i < nout; i++)
        if (!((mask >> pf_graph_edge(b->g, ou[i])->dst) & 1))
            out[1] += pf_graph_edge(b->g, ou[i])->bytes + (c->sync_bytes ? c->sync_bytes[nin + i] : 0);
    out[2] = c->param_bytes;
    out[3] = c->act_bytes;
    out[4] = c->fixed_bytes;
}

static double sf_of(const brute_t *b, int d)
{
    return b->o->state_factor > 0   ? b->o->state_factor
           : b->o->state_factor < 0 ? 0
                                    : pf_training_state_factor(&b->cm->train, d);
}

static double tps(const brute_t *b, const double *s, int d)
{
    double B = b->cm->flat_gbps * 1e6;
    return (s[0] + b->o->edge_factor * s[1] / B) / d +
           b->o->allreduce_factor * (d - 1.0) / d * s[2] / b->cm->microbatches / B;
}

static double mem(const brute_t *b, const double *s, int d, int y)
{
    return sf_of(b, d) * s[2] + y * s[3] + s[4] + b->cm->reserve_bytes;
}

/* Stage (mask, t, d) at y: the heuristic's price (*heur) and the exact least over every
 * choice (*exact); INFINITY where nothing fits. */
static void stage_price(const brute_t *b, uint32_t mask, int t, int d, int y, double *heur,
                        double *exact)
{
    int nc[NMAX], c[NMAX][2], n = 0;
    double tm[NMAX][2][5];
    *heur = *exact = INFINITY;
    for (int v = 0; v < b->n; v++)
        if ((mask >> v) & 1) {
            nc[n] = confs(b, v, t, c[n]);
            if (!nc[n])
                return;
            for (int l = 0; l < nc[n]; l++)
                terms(b, mask, v, c[n][l], tm[n][l]);
            n++;
        }
    /* exact: every choice */
    for (int bits = 0; bits < (1 << n); bits++) {
        double s[5] = {0};
        int ok = 1;
        for (int i = 0; i < n; i++) {
            int l = (bits >> i) & 1;
            ok &= l < nc[i];
            for (int k = 0; ok && k < 5; k++)
                s[k] += tm[i][l][k];
        }
        if (ok && mem(b, s, d, y) <= b->cm->mem_limit_bytes)
            *exact = fmin(*exact, tps(b, s, d));
    }
    /* the heuristic: fastest; else swaps by extra time per byte saved */
    int pick[NMAX], low[NMAX], used[NMAX] = {0};
    double f[5] = {0}, lo[5] = {0}, zero[5] = {0};
    for (int i = 0; i < n; i++) {
        double v0 = tps(b, tm[i][0], d), m0 = mem(b, tm[i][0], d, y) - mem(b, zero, d, y);
        pick[i] = nc[i] == 2 && tps(b, tm[i][1], d) < v0;
        low[i] = nc[i] == 2 && mem(b, tm[i][1], d, y) - mem(b, zero, d, y) < m0;
        for (int k = 0; k < 5; k++) {
            f[k] += tm[i][pick[i]][k];
            lo[k] += tm[i][low[i]][k];
        }
    }
    double over = mem(b, f, d, y) - b->cm->mem_limit_bytes;
    if (over <= 0) {
        *heur = tps(b, f, d);
        return;
    }
    if (mem(b, lo, d, y) > b->cm->mem_limit_bytes)
        return;
    while (over >= 1e-9) {
        int best = -1;
        double br = 0, bs = 0;
        for (int i = 0; i < n; i++) {
            if (nc[i] < 2 || used[i])
                continue;
            int a = pick[i], o = 1 - a;
            double save = mem(b, tm[i][a], d, y) - mem(b, tm[i][o], d, y);
            double r = (tps(b, tm[i][o], d) - tps(b, tm[i][a], d)) / save;
            if (save > 1e-9 && (best < 0 || r < br)) {
                best = i;
                br = r;
                bs = save;
            }
        }
        if (best < 0)
            break;
        used[best] = 1;
        pick[best] = 1 - pick[best];
        over -= bs;
    }
    double s[5] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 5; k++)
            s[k] += tm[i][pick[i]][k];
    *heur = tps(b, s, d);
}

static void brute_value(brute_t *b, int S)
{
    int K = 0;
    double h = 0, x = 0;
    for (int s = 0; s < S; s++)
        K += b->d[s];
    for (int s = 0; s < S; s++) {
        int d = b->d[s], y = (K + d - 1) / d;
        double hs, xs;
        y = y < b->cm->microbatches ? y : b->cm->microbatches;
        stage_price(b, b->mask[s], b->t[s], d, y, &hs, &xs);
        h = fmax(h, hs);
        x = fmax(x, xs);
        K -= d;
    }
    b->best = fmin(b->best, h);
    b->exact = fmin(b->exact, x);
}

static int degree_allowed(const brute_t *b, int d)
{
    if (b->o->only_degree > 0)
        return d == b->o->only_degree;
    if (b->o->degrees == PF_STAGEDEG_DEGREES_DIVIDE_MB)
        return b->cm->microbatches % d == 0;
    if (b->o->degrees == PF_STAGEDEG_DEGREES_POW2)
        return (d & (d - 1)) == 0;
    return 1;
}

static void brute(brute_t *b, uint32_t F, int used, int dsum, int s)
{
    static const int tv[TS] = {1, 2, 4};
    uint32_t all = (1u << b->n) - 1;
    if (F == all) {
        if (!b->o->exact_devices || used == b->o->devices)
            brute_value(b, s);
        return;
    }
    for (uint32_t G = all; G; G = (G - 1) & all) {
        if ((G & F) != F || G == F || !pf_test_is_downset(b->g, G))
            continue;
        b->mask[s] = G & ~F;
        for (int ti = 0; ti < TS; ti++)
            for (int d = 1; used + d * tv[ti] <= b->o->devices && dsum + d <= b->S; d++) {
                if (!degree_allowed(b, d))
                    continue;
                b->d[s] = d;
                b->t[s] = tv[ti];
                brute(b, G, used + d * tv[ti], dsum + d, s + 1);
            }
    }
}

/* Random configurations: per op, t = 1 always, t = 2 mostly, t = 4 sometimes; per (op, t) a
 * plain one and, mostly, one that stores less for more time; on some ops the second also moves
 * other parameters and sync bytes (its fastest then depends on d and the boundary). */
static int random_tab(const pf_graph_t *g, pf_rng_t *rng, pf_stagedeg_tmpc_t *opt, int *first,
                      double *sync)
{
    int n = pf_graph_nops(g), k = 0, ns = 0;
    for (int v = 0; v < n; v++) {
        int nin, nout;
        pf_graph_in(g, v, &nin);
        pf_graph_out(g, v, &nout);
        const pf_op_t *op = pf_graph_op(g, v);
        first[v] = k;
        for (int t = 1; t <= 4; t *= 2) {
            if ((t == 2 && pf_rng_uniform(rng) < 0.2) || (t == 4 && pf_rng_uniform(rng) < 0.6))
                continue;
            double *sy = sync + ns;
            for (int i = 0; i < nin + nout; i++)
                sy[i] = t > 1 ? pf_rng_range(rng, 0, 5e7) : 0;
            ns += nin + nout;
            double time = (op->fwd_ms + op->bwd_ms) / pow(t, 0.8), act = op->mem_fwd_bytes / t;
            opt[k++] = (pf_stagedeg_tmpc_t){t, time, op->param_bytes / t, act, 0, sy};
            if (pf_rng_uniform(rng) < 0.2)
                continue;
            pf_stagedeg_tmpc_t r = {t, time + op->fwd_ms / t, op->param_bytes / t, 0.1 * act,
                                    pf_rng_range(rng, 0, 2e7), sy};
            if (pf_rng_uniform(rng) < 0.3) { /* unstable */
                r.param_bytes *= pf_rng_range(rng, 0.3, 1.5);
                r.time_ms = time * pf_rng_range(rng, 0.9, 1.3);
                r.sync_bytes = sync + ns;
                for (int i = 0; i < nin + nout; i++)
                    sync[ns + i] = pf_rng_range(rng, 0, 5e7);
                ns += nin + nout;
            }
            opt[k++] = r;
        }
    }
    first[n] = k;
    return ns;
}

static void test_brute_force(void)
{
    int tested = 0, infeasible = 0, mism = 0, tensor = 0, chosen = 0, greedy = 0, below = 0;
    const int mbs[] = {2, 4, 6, 12};
    for (uint64_t seed = 1; seed <= 70; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 104729);
        int n = 3 + (int)(seed % 3), D = 1 + (int)(seed % 6);
        pf_graph_t *g = pf_test_random_dag(seed + 500, n, 0.3);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        pf_stagedeg_tmpc_t opt[NMAX * 6];
        int first[NMAX + 1];
        double sync[NMAX * 6 * 2 * NMAX];
        random_tab(g, &rng, opt, first, sync);
        pf_stagedeg_tmpcs_t tab = {opt, first};
        double total = 0;
        for (int v = 0; v < n; v++)
            total += 4 * pf_graph_op(g, v)->param_bytes + pf_graph_op(g, v)->mem_fwd_bytes;
        pf_cost_model_t cm;
        pf_test_cost_model(&cm, 0.5 + (double)(seed % 5), mbs[seed % 4], total * (0.25 + 0.25 * (double)(seed % 5)));
        cm.train.zero = (int)(seed % 2);
        pf_stagedeg_opts_t o;
        pf_stagedeg_opts_init(&o);
        o.devices = D;
        o.degrees = (pf_stagedeg_degrees_t)(seed % 3);
        o.exact_devices = seed % 5 == 0;
        o.edge_factor = seed % 2 ? 2 : 1;
        o.allreduce_factor = seed % 3 ? 2 : 4;
        o.state_factor = seed % 7 == 3 ? -1 : seed % 7 == 5 ? 3 : 0;
        o.threads = 1 + (int)(seed % 2);
        brute_t b = {.g = g, .cm = &cm, .o = &o, .tab = &tab, .n = n, .best = INFINITY,
                     .exact = INFINITY};
        b.S = o.degrees == PF_STAGEDEG_DEGREES_DIVIDE_MB && cm.microbatches < D ? cm.microbatches : D;
        brute(&b, 0, 0, 0, 0);
        pf_stagedeg_result_t *r = solve(g, &cm, &o, &tab);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        tested++;
        if (!isfinite(b.best)) {
            infeasible++;
            CU_ASSERT(isinf(r->objective_ms));
            mism += isfinite(r->objective_ms);
        } else {
            PF_ASSERT_CLOSE(r->objective_ms, b.best, 1e-9);
            mism += !(fabs(r->objective_ms - b.best) <= 1e-9 * b.best);
            CU_ASSERT(b.exact <= r->objective_ms * (1 + 1e-12));
            below += b.exact < r->objective_ms * (1 - 1e-9);
            for (int s = 0; s < r->stages; s++) {
                tensor += r->tensor[s] > 1;
                chosen += r->recompute[s] != 0;
                greedy += r->recompute[s] == 2;
                CU_ASSERT(r->recompute[s] == 0 || r->recompute[s] == 2);
            }
        }
        pf_stagedeg_result_destroy(&r);
        pf_graph_destroy(&g);
    }
    CU_ASSERT_EQUAL(mism, 0);
    CU_ASSERT(infeasible >= 3 && infeasible <= 35);
    CU_ASSERT(tensor >= 5); /* the optimum does use t > 1 */
    CU_ASSERT(chosen >= 4); /* and the choice under memory, */
    CU_ASSERT(greedy >= 1); /* [Piper]'s swaps among them */
    if (mism || infeasible < 3 || infeasible > 35 || tensor < 5 || chosen < 4 || greedy < 1)
        fprintf(stderr, "stagedeg_tp brute force: %d tested, %d mismatches, %d infeasible, "
                "%d stages with t > 1, %d chosen under memory (%d by swaps), %d below the "
                "heuristic\n", tested, mism, infeasible, tensor, chosen, greedy, below);
}

/* Configurations for t = 1 only, "none" and "full" as stagedeg's (the full one stores strictly
 * less): the same optimum as stagedeg's DP with recompute_ops, on random DAGs. */
static void test_t1_is_notp(void)
{
    int compared = 0, infeasible = 0;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 31337);
        int n = 5 + (int)(seed % 4), D = 1 + (int)(seed % 8);
        pf_graph_t *g = pf_test_random_dag(seed + 900, n, 0.25);
        pf_stagedeg_opcost_t none[NMAX + 4], full[NMAX + 4];
        pf_stagedeg_tmpc_t opt[2 * (NMAX + 4)];
        int first[NMAX + 5];
        double total = 0;
        for (int v = 0; v < n; v++) {
            const pf_op_t *op = pf_graph_op(g, v);
            none[v] = (pf_stagedeg_opcost_t){pf_graph_cu_ms(g, v), op->mem_fwd_bytes,
                                             pf_rng_range(&rng, 0, 1e7)};
            full[v] = (pf_stagedeg_opcost_t){none[v].cu_ms + op->fwd_ms, 0.2 * op->mem_fwd_bytes,
                                             none[v].fixed_bytes * 0.5};
            first[v] = 2 * v;
            opt[2 * v] = (pf_stagedeg_tmpc_t){1, none[v].cu_ms, op->param_bytes, none[v].act_bytes,
                                              none[v].fixed_bytes, NULL};
            opt[2 * v + 1] = (pf_stagedeg_tmpc_t){1, full[v].cu_ms, op->param_bytes,
                                                  full[v].act_bytes, full[v].fixed_bytes, NULL};
            total += 4 * op->param_bytes + op->mem_fwd_bytes;
        }
        first[n] = 2 * n;
        pf_stagedeg_tmpcs_t tab = {opt, first};
        pf_cost_model_t cm;
        pf_test_cost_model(&cm, 1 + (double)(seed % 3), 2 + (int)(seed % 5), total * (0.3 + 0.2 * (double)(seed % 4)));
        pf_stagedeg_opts_t o;
        pf_stagedeg_opts_init(&o);
        o.devices = D;
        o.degrees = (pf_stagedeg_degrees_t)(seed % 3);
        o.edge_factor = 2;
        o.allreduce_factor = 4;
        o.state_factor = seed % 2 ? -1 : 0;
        o.none = none;
        o.full = full;
        o.recompute_ops = 1;
        char err[256];
        int capped;
        pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
        pf_stagedeg_result_t *a = NULL, *b = NULL;
        CU_ASSERT_EQUAL_FATAL(pf_stagedeg_run(g, ds, &cm, &o, &a, err, sizeof err), PF_OK);
        CU_ASSERT_EQUAL_FATAL(pf_stagedeg_tp_run(g, ds, &cm, &o, &tab, &b, err, sizeof err), PF_OK);
        if (isfinite(a->objective_ms)) {
            PF_ASSERT_CLOSE(b->objective_ms, a->objective_ms, 1e-9 * a->objective_ms);
            compared++;
        } else {
            CU_ASSERT(isinf(b->objective_ms));
            infeasible++;
        }
        pf_stagedeg_result_destroy(&a);
        pf_stagedeg_result_destroy(&b);
        pf_downsets_destroy(&ds);
        pf_graph_destroy(&g);
    }
    if (compared < 30 || infeasible < 2)
        fprintf(stderr, "t = 1 against notp: %d compared, %d infeasible\n", compared, infeasible);
    CU_ASSERT(compared >= 30);
    CU_ASSERT(infeasible >= 2);
}

void pf_suite_stagedeg_tp(void)
{
    CU_pSuite s = CU_add_suite("stagedeg_tp", NULL, NULL);
    CU_add_test(s, "tensor parallelism wins over pipeline and data parallelism (worked by hand)",
                test_tensor_parallel_wins);
    CU_add_test(s, "DP equals exhaustive chains x (d, t) with the configuration heuristic (70 DAGs)",
                test_brute_force);
    CU_add_test(s, "t = 1 configurations: stagedeg's notp optimum (50 DAGs)", test_t1_is_notp);
}
