/* stagedeg: hand-worked cases, exhaustive search over chains x degrees x recomputation on tiny
 * DAGs, and the constant-R problem against pf_partition_dp. The model is re-derived here from
 * stagedeg.h's formulas, not called from the module. */
#include "planner/partition/stagedeg.h"
#include "planner/partition/partition.h"
#include "planner/core/rng.h"
#include "planner/core/util.h"
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pf_stagedeg_result_t *solve(const pf_graph_t *g, const pf_cost_model_t *cm,
                                   const pf_stagedeg_opts_t *o)
{
    char err[256];
    int capped;
    pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
    pf_stagedeg_result_t *r = NULL;
    if (ds && pf_stagedeg_run(g, ds, cm, o, &r, err, sizeof err) != PF_OK)
        fprintf(stderr, "stagedeg: %s\n", err);
    pf_downsets_destroy(&ds);
    return r;
}

/* A 3-op chain, cu = [6, 6, 3] ms, only op 2 has parameters (4e6 bytes), 1 GB/s, MB = 4, ring
 * all-reduce (ar = 2), D = 4, edges free. {0,1} on 3 replicas takes 12 / 3 = 4 ms, {2} on one
 * 3 ms (no all-reduce at d = 1): 4. Everything on 4 replicas: 15 / 4 + 2 x 3/4 x 4e6 / 4 bytes
 * = 3.75 + 1.5 = 5.25; {0,1} x 2 + {2} x 2: 6; any stage holding one heavy op alone on one
 * device: >= 6. With [Piper]'s rule (d | MB = 4) the 3 is not allowed and 5.25 wins. */
static void test_heavy_stage_three_replicas(void)
{
    double cu[] = {6, 6, 3}, param[] = {0, 0, 4e6};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, 1e30);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 4;
    o.degrees = PF_STAGEDEG_DEGREES_ANY;
    pf_stagedeg_result_t *r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 4, 1e-12);
    CU_ASSERT_EQUAL(r->stages, 2);
    CU_ASSERT_EQUAL(r->degree[0], 3);
    CU_ASSERT_EQUAL(r->degree[1], 1);
    CU_ASSERT(r->op_stage[0] == 0 && r->op_stage[1] == 0 && r->op_stage[2] == 1);
    PF_ASSERT_CLOSE(r->time_ms[1], 3, 1e-12);
    CU_ASSERT(r->tensor[0] == 1 && r->tensor[1] == 1); /* no tensor parallelism here */
    CU_ASSERT(r->op_tmpc[0] == -1 && r->op_tmpc[2] == -1);
    pf_stagedeg_result_destroy(&r);
    pf_stagedeg_result_destroy(&r); /* idempotent */

    o.degrees = PF_STAGEDEG_DEGREES_DIVIDE_MB;
    r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 5.25, 1e-12);
    CU_ASSERT_EQUAL(r->stages, 1);
    CU_ASSERT_EQUAL(r->degree[0], 4);
    pf_stagedeg_result_destroy(&r);
    pf_graph_destroy(&g);
}

/* Two ops of 4 ms storing 10 B per micro-batch (1 under recomputation, which costs 5 ms), op 1
 * with 4e6 parameter bytes (state factor 0 here: memory is activations alone), limit 15 B,
 * D = 2, MB = 4, 1 GB/s. Split on one device each: stage 0 holds ceil(2 / 1) = 2 micro-batches,
 * 20 B plainly (too much), 2 B recomputed (5 ms); stage 1 holds 1: 10 B plainly (4 ms). One
 * stage on 2 replicas holds ceil(2 / 2) = 1 micro-batch of 20 B: recomputed, 10 / 2 + the
 * all-reduce 2 x 1/2 x 4e6 / 4 B = 1 ms: 6. Optimum 5, recomputation on stage 0 only. */
static void test_memory_forces_recomputation(void)
{
    double cu[] = {4, 4}, param[] = {0, 4e6}, act[] = {10, 10};
    pf_graph_t *g = pf_test_chain(2, cu, param, act);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, 15);
    pf_stagedeg_opcost_t full[] = {{5, 1, 0}, {5, 1, 0}};
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 2;
    o.state_factor = -1; /* parameters weigh nothing */
    o.full = full;
    pf_stagedeg_result_t *r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 5, 1e-12);
    CU_ASSERT_EQUAL_FATAL(r->stages, 2);
    CU_ASSERT(r->degree[0] == 1 && r->degree[1] == 1);
    CU_ASSERT(r->recompute[0] == 1 && r->recompute[1] == 0);
    PF_ASSERT_CLOSE(r->mem_bytes[0], 2, 1e-12);
    PF_ASSERT_CLOSE(r->mem_bytes[1], 10, 1e-12);
    pf_stagedeg_result_destroy(&r);
    /* without recomputation nothing fits */
    o.full = NULL;
    r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(isinf(r->objective_ms));
    CU_ASSERT_EQUAL(r->stages, 0);
    pf_stagedeg_result_destroy(&r);
    pf_graph_destroy(&g);
}

/* One device, one stage of two 4 ms ops storing 10 B each, limit 12 B: 8 B must go. Recomputing
 * op 0 saves 9 B for 1 ms, op 1 9 B for 3 ms: [Piper]'s order takes op 0 alone (1/9 < 3/9 ms per
 * byte): 9 ms, where recomputing the whole stage costs 12 ms. */
static void test_recompute_some_ops(void)
{
    double cu[] = {4, 4}, param[] = {0, 0}, act[] = {10, 10};
    pf_graph_t *g = pf_test_chain(2, cu, param, act);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, 12);
    pf_stagedeg_opcost_t full[] = {{5, 1, 0}, {7, 1, 0}};
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 1;
    o.full = full;
    pf_stagedeg_result_t *r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 12, 1e-12); /* none or full per stage */
    CU_ASSERT(r->stages == 1 && r->recompute[0] == 1);
    pf_stagedeg_result_destroy(&r);
    o.recompute_ops = 1;
    r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 9, 1e-12);
    CU_ASSERT(r->stages == 1 && r->recompute[0] == 2);
    CU_ASSERT(r->op_recompute[0] == 1 && r->op_recompute[1] == 0);
    PF_ASSERT_CLOSE(r->mem_bytes[0], 11, 1e-12);
    pf_stagedeg_result_destroy(&r);
    pf_graph_destroy(&g);
}

/* ---- exhaustive search ---- */

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    const pf_stagedeg_opts_t *o;
    int n, kmax, nmodes;
    uint32_t mask[8];
    int d[8], r[8];
    double best;
} brute_t;

static pf_stagedeg_opcost_t cost_of(const brute_t *b, int r, int v)
{
    if (r)
        return b->o->full[v];
    return (pf_stagedeg_opcost_t){pf_graph_cu_ms(b->g, v), pf_graph_op(b->g, v)->mem_fwd_bytes, 0};
}

/* Mode "ops" of stage s as stagedeg.h describes it: the ops taken by extra time per byte saved
 * at y (ties by index) until the stage fits; the extra compute, INFINITY when it never fits. */
static double greedy_extra(const brute_t *b, int s, int y, double over)
{
    double extra = 0;
    int used[8] = {0};
    while (over > 1e-9) {
        int best = -1;
        double best_ratio = 0, best_save = 0;
        for (int v = 0; v < b->n; v++) {
            if (!((b->mask[s] >> v) & 1) || used[v])
                continue;
            pf_stagedeg_opcost_t a = cost_of(b, 0, v), f = cost_of(b, 1, v);
            double save = y * (a.act_bytes - f.act_bytes) + a.fixed_bytes - f.fixed_bytes;
            double ratio = (f.cu_ms - a.cu_ms) / save;
            if (save > 1e-9 && (best < 0 || ratio < best_ratio)) {
                best = v;
                best_ratio = ratio;
                best_save = save;
            }
        }
        if (best < 0)
            return INFINITY;
        used[best] = 1;
        over -= best_save;
        extra += cost_of(b, 1, best).cu_ms - cost_of(b, 0, best).cu_ms;
    }
    return extra;
}

/* The chain's objective from stagedeg.h's formulas, evaluated from scratch. */
static double brute_value(const brute_t *b, int S)
{
    int K = 0, mb = b->cm->microbatches;
    double worst = 0, B = b->cm->flat_gbps * 1e6; /* bytes per ms */
    for (int s = 0; s < S; s++)
        K += b->d[s];
    for (int s = 0; s < S; s++) {
        double cu = 0, act = 0, fixed = 0, P = 0, cut = 0;
        int d = b->d[s];
        for (int v = 0; v < b->n; v++)
            if ((b->mask[s] >> v) & 1) {
                pf_stagedeg_opcost_t c = cost_of(b, b->r[s] == 1, v);
                cu += c.cu_ms;
                act += c.act_bytes;
                fixed += c.fixed_bytes;
                P += pf_graph_op(b->g, v)->param_bytes;
            }
        for (int e = 0; e < pf_graph_nedges(b->g); e++) {
            const pf_edge_t *ed = pf_graph_edge(b->g, e);
            if (((b->mask[s] >> ed->src) & 1) != ((b->mask[s] >> ed->dst) & 1))
                cut += ed->bytes;
        }
        double t = (cu + b->o->edge_factor * cut / B) / d +
                   b->o->allreduce_factor * (d - 1.0) / d * P / (b->o->allreduce_per_microbatch ? d : mb) / B;
        double sf = b->o->state_factor > 0   ? b->o->state_factor
                    : b->o->state_factor < 0 ? 0
                                             : pf_training_state_factor(&b->cm->train, d);
        int y = (K + d - 1) / d;
        y = y < mb ? y : mb;
        double mem = sf * P + y * act + fixed + b->cm->reserve_bytes;
        if (b->r[s] == 2 && mem > b->cm->mem_limit_bytes) { /* ops: shave the excess */
            double extra = greedy_extra(b, s, y, mem - b->cm->mem_limit_bytes);
            t += extra / d;
            mem = isfinite(extra) ? b->cm->mem_limit_bytes : INFINITY;
        }
        if (mem > b->cm->mem_limit_bytes)
            return INFINITY;
        K -= d;
        worst = fmax(worst, t);
    }
    return worst;
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

/* Every next stage G \ F, degree and mode (0 none, 1 full, 2 ops), from F with `used` devices,
 * as stage s. */
static void brute(brute_t *b, uint32_t F, int used, int s)
{
    uint32_t all = (1u << b->n) - 1;
    if (F == all) {
        if (!b->o->exact_devices || used == b->o->devices)
            b->best = fmin(b->best, brute_value(b, s));
        return;
    }
    for (uint32_t G = all; G; G = (G - 1) & all) {
        if ((G & F) != F || G == F || !pf_test_is_downset(b->g, G))
            continue;
        b->mask[s] = G & ~F;
        for (int d = 1; used + d <= b->kmax; d++) {
            if (!degree_allowed(b, d))
                continue;
            b->d[s] = d;
            for (int r = 0; r < b->nmodes; r++) {
                b->r[s] = r;
                brute(b, G, used + d, s + 1);
            }
        }
    }
}

static void test_brute_force(void)
{
    int tested = 0, infeasible = 0, mismatches = 0, uneven = 0, recomputed = 0, some = 0;
    const int mbs[] = {2, 4, 6, 12};
    for (uint64_t seed = 1; seed <= 60; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 7919);
        int n = 5 + (int)(seed % 3), D = 1 + (int)(seed % 6);
        pf_graph_t *g = pf_test_random_dag(seed, n, 0.2 + 0.1 * (double)(seed % 3));
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        pf_stagedeg_opcost_t full[8];
        double total = 0;
        for (int v = 0; v < n; v++) {
            const pf_op_t *op = pf_graph_op(g, v);
            full[v] = (pf_stagedeg_opcost_t){pf_graph_cu_ms(g, v) + op->fwd_ms,
                                             0.1 * op->mem_fwd_bytes, pf_rng_range(&rng, 0, 5e7)};
            total += 8 * op->param_bytes + op->mem_fwd_bytes;
        }
        pf_cost_model_t cm;
        pf_test_cost_model(&cm, 0.5 + (double)(seed % 5), mbs[seed % 4], total * (0.3 + 0.25 * (double)(seed % 5)));
        cm.train.zero = (int)(seed % 2);
        pf_stagedeg_opts_t o;
        pf_stagedeg_opts_init(&o);
        o.devices = D;
        o.degrees = (pf_stagedeg_degrees_t)(seed % 3);
        o.exact_devices = seed % 5 == 0;
        o.edge_factor = seed % 2 ? 2 : 1;
        o.allreduce_factor = seed % 3 ? 2 : 4;
        o.allreduce_per_microbatch = seed % 4 == 1; /* [PipeDream]'s all-reduce */
        o.full = seed % 4 ? full : NULL;
        o.recompute_ops = seed % 3 == 1;
        o.state_factor = seed % 7 == 3 ? -1 : seed % 7 == 5 ? 3 : 0;
        o.threads = 1 + (int)(seed % 2);
        brute_t b = {.g = g, .cm = &cm, .o = &o, .n = n, .nmodes = o.full ? 2 + o.recompute_ops : 1,
                     .best = INFINITY};
        b.kmax = o.degrees == PF_STAGEDEG_DEGREES_DIVIDE_MB && cm.microbatches < D ? cm.microbatches : D;
        brute(&b, 0, 0, 0);
        pf_stagedeg_result_t *r = solve(g, &cm, &o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        tested++;
        if (!isfinite(b.best)) {
            infeasible++;
            CU_ASSERT(isinf(r->objective_ms));
            mismatches += isfinite(r->objective_ms);
        } else {
            PF_ASSERT_CLOSE(r->objective_ms, b.best, 1e-9);
            mismatches += fabs(r->objective_ms - b.best) > 1e-9 * b.best;
            for (int s = 1; s < r->stages; s++)
                uneven += r->degree[s] != r->degree[0];
            for (int s = 0; s < r->stages; s++) {
                recomputed += r->recompute[s] != 0;
                some += r->recompute[s] == 2;
            }
            if (o.recompute_ops) { /* never worse than none / full per stage */
                o.recompute_ops = 0;
                pf_stagedeg_result_t *r2 = solve(g, &cm, &o);
                CU_ASSERT(r->objective_ms <= r2->objective_ms * (1 + 1e-12));
                pf_stagedeg_result_destroy(&r2);
            }
        }
        pf_stagedeg_result_destroy(&r);
        pf_graph_destroy(&g);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT(infeasible >= 3 && infeasible <= 30); /* the limits bite, not always */
    CU_ASSERT(uneven >= 5);     /* the optimum does use different degrees */
    CU_ASSERT(recomputed >= 5); /* and recomputation */
    CU_ASSERT(some >= 1);       /* of some ops only */
    if (mismatches || infeasible < 3 || uneven < 5 || recomputed < 5 || some < 1)
        fprintf(stderr, "stagedeg brute force: %d tested, %d infeasible, %d uneven, %d recomputed, "
                "%d some\n", tested, infeasible, uneven, recomputed, some);
}

/* ---- [PipeDream]'s model (stagedeg.h allreduce_per_microbatch) ---- */

/* PipeDream's options: no transfers between stages, its parameter-server all-reduce (4 x), one
 * per micro-batch over d, any degree, exactly D workers, no memory limit. */
static void pd_opts(pf_stagedeg_opts_t *o, int D)
{
    pf_stagedeg_opts_init(o);
    o->devices = D;
    o->degrees = PF_STAGEDEG_DEGREES_ANY;
    o->exact_devices = 1;
    o->edge_factor = 0;
    o->allreduce_factor = 4;
    o->allreduce_per_microbatch = 1;
}

/* Chain cu = [12, 3, 3] ms, P = [1e6, 0, 2e6] bytes, 1 GB/s (1e6 bytes/ms), 3 workers.
 * PipeDream's stage time on m replicas, (C + 4 (m - 1) P / (B m)) / m:
 *   {0} x 2: (12 + 4 x 1/2 x 1) / 2 = 7;  {1,2} x 1: 6;          -> 7
 *   {0,1,2} x 3: (18 + 4 x 2/3 x 3) / 3 = 26/3;  {0,1} x 2 + {2}: (15 + 2) / 2 = 8.5;
 *   any stage holding op 0 on one worker: >= 12.                 -> optimum 7.
 * Once per MB = 4 micro-batches instead (the default) {0} x 2 is 6 + 4 x 1/2 x 1 / 4 = 6.5. */
static void test_pipedream_by_hand(void)
{
    double cu[] = {12, 3, 3}, param[] = {1e6, 0, 2e6};
    pf_graph_t *g = pf_test_chain(3, cu, param, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, INFINITY);
    pf_stagedeg_opts_t o;
    pd_opts(&o, 3);
    pf_stagedeg_result_t *r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 7, 1e-12);
    CU_ASSERT_EQUAL_FATAL(r->stages, 2);
    CU_ASSERT(r->degree[0] == 2 && r->degree[1] == 1);
    CU_ASSERT(r->op_stage[0] == 0 && r->op_stage[1] == 1 && r->op_stage[2] == 1);
    PF_ASSERT_CLOSE(r->time_ms[1], 6, 1e-12);
    /* every op on 3 replicas, priced by pf_stagedeg_eval */
    pf_stagedeg_result_t *e = pf_stagedeg_result_new(3, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    e->op_stage[0] = e->op_stage[1] = e->op_stage[2] = 0;
    e->degree[0] = 3;
    char err[256];
    CU_ASSERT_EQUAL(pf_stagedeg_eval(g, &cm, &o, e, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(e->objective_ms, 26.0 / 3, 1e-12);
    pf_stagedeg_result_destroy(&e);
    pf_stagedeg_result_destroy(&r);
    o.allreduce_per_microbatch = 0;
    r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 6.5, 1e-12);
    pf_stagedeg_result_destroy(&r);
    pf_graph_destroy(&g);
}

/* PipeDream's recurrence (optimizer_graph_hierarchical.py compute_partitioning, one level, no
 * --straight_pipeline, no memory constraint, no compression) re-derived for a chain, whose
 * states are its prefixes: A[j][m] = the best time of ops 0..j on exactly m + 1 workers,
 *   A[j][m] = min((C(0..j) + 4 m P(0..j) / (B (m + 1))) / (m + 1),
 *                 min over k < j, 1 <= m' <= m of max(A[k][m - m'], T(k+1..j, m')))
 *   T(H, m') = (C(H) + 4 (m' - 1) P(H) / (B m')) / m'. */
static double pd_stage(const double *pc, const double *pp, int i, int j, int m, double B)
{
    double C = pc[j + 1] - pc[i], P = pp[j + 1] - pp[i];
    return (C + 4.0 * (m - 1) * P / (B * m)) / m;
}

static double pd_recurrence(int n, const double *cu, const double *param, int D, double B)
{
    double pc[17] = {0}, pp[17] = {0}, A[16][16];
    for (int i = 0; i < n; i++) {
        pc[i + 1] = pc[i] + cu[i];
        pp[i + 1] = pp[i] + param[i];
    }
    for (int j = 0; j < n; j++)
        for (int m = 0; m < D; m++) {
            A[j][m] = pd_stage(pc, pp, 0, j, m + 1, B);
            for (int k = 0; k < j; k++)
                for (int mp = 1; mp <= m; mp++)
                    A[j][m] = fmin(A[j][m], fmax(A[k][m - mp], pd_stage(pc, pp, k + 1, j, mp, B)));
        }
    return A[n - 1][D - 1];
}

static void test_pipedream_recurrence(void)
{
    int differ = 0, uneven = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        pf_rng_t rng;
        pf_rng_seed(&rng, seed * 104729);
        int n = 2 + (int)(seed % 9), D = 1 + (int)(seed % 8);
        double cu[16], param[16], B = 0.5 + (double)(seed % 4);
        for (int v = 0; v < n; v++) {
            cu[v] = pf_rng_range(&rng, 0.5, 20);
            param[v] = seed % 3 ? pf_rng_range(&rng, 0, 4e7) : 0;
        }
        pf_graph_t *g = pf_test_chain(n, cu, param, NULL);
        CU_ASSERT_PTR_NOT_NULL_FATAL(g);
        pf_cost_model_t cm;
        pf_test_cost_model(&cm, B, 1 + (int)(seed % 5), INFINITY);
        pf_stagedeg_opts_t o;
        pd_opts(&o, D);
        pf_stagedeg_result_t *r = solve(g, &cm, &o);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        double want = pd_recurrence(n, cu, param, D, B * 1e6);
        PF_ASSERT_CLOSE(r->objective_ms, want, 1e-9);
        differ += fabs(r->objective_ms - want) > 1e-9 * want;
        int sum = 0;
        for (int s = 0; s < r->stages; s++) {
            sum += r->degree[s];
            uneven += r->degree[s] != r->degree[0];
        }
        CU_ASSERT_EQUAL(sum, D);
        pf_stagedeg_result_destroy(&r);
        pf_graph_destroy(&g);
    }
    CU_ASSERT_EQUAL(differ, 0);
    CU_ASSERT(uneven >= 5); /* the optima do replicate some stages more than others */
    if (uneven < 5)
        fprintf(stderr, "PipeDream recurrence: %d stages of another degree than the first\n", uneven);
}

/* ---- the constant-R problem ---- */

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

/* Every d_s = R on exactly S x R devices, no all-reduce, planfarm's edges: t(H, R) = t(H) / R
 * and the memory is cost.h's with k_s = min(MB, S - s), so the objective is pf_partition_dp's
 * divided by R (and infeasible where it is). */
static void test_constant_r_is_partition_dp(void)
{
    char err[256];
    int compared = 0, infeasible = 0;
    for (uint64_t seed = 1; seed <= 80; seed++) {
        int n = 5 + (int)(seed % 5), S = 1 + (int)(seed % 4), R = 1 + (int)((seed / 4) % 3);
        if (S > n)
            continue;
        pf_graph_t *g = pf_test_random_dag(seed + 1000, n, 0.25);
        double total = 0;
        for (int v = 0; v < n; v++)
            total += pf_graph_op(g, v)->param_bytes * 8 + pf_graph_op(g, v)->mem_fwd_bytes;
        pf_cluster_t *c = flat_cluster(S * R, total * (0.7 + 0.8 * (double)(seed % 4)) / S, 10);
        pf_cost_model_t cm;
        pf_training_t t;
        pf_training_init(&t);
        t.zero = (int)(seed % 3);
        pf_cost_model_init(&cm, c, S, 2 + (int)(seed % 3), 0);
        pf_cost_model_set_training(&cm, &t, R, 1e6 * (double)(seed % 2));
        int capped;
        pf_downsets_t *ds = pf_downsets_enumerate(g, 1 << 20, &capped);
        double want;
        int *st = malloc((size_t)n * sizeof *st);
        CU_ASSERT_EQUAL_FATAL(pf_partition_dp(g, ds, 0, &cm, S, 1, &want, st, err, sizeof err), PF_OK);
        pf_stagedeg_opts_t o;
        pf_stagedeg_opts_init(&o);
        o.devices = S * R;
        o.only_degree = R;
        o.exact_devices = 1;
        o.allreduce_factor = 0;
        pf_stagedeg_result_t *r = NULL;
        CU_ASSERT_EQUAL_FATAL(pf_stagedeg_run(g, ds, &cm, &o, &r, err, sizeof err), PF_OK);
        if (isfinite(want)) {
            PF_ASSERT_CLOSE(r->objective_ms * R, want, 1e-9);
            CU_ASSERT_EQUAL(r->stages, S);
            compared++;
        } else {
            CU_ASSERT(isinf(r->objective_ms));
            infeasible++;
        }
        pf_stagedeg_result_destroy(&r);
        free(st);
        pf_downsets_destroy(&ds);
        pf_cluster_destroy(&c);
        pf_graph_destroy(&g);
    }
    if (compared < 40 || infeasible < 3)
        fprintf(stderr, "constant R: %d compared, %d infeasible\n", compared, infeasible);
    CU_ASSERT(compared >= 40);
    CU_ASSERT(infeasible >= 3);
}

static void test_bad_options(void)
{
    double cu[] = {1, 1}, param[] = {0, 0};
    pf_graph_t *g = pf_test_chain(2, cu, param, NULL);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, 1e30);
    int capped;
    pf_downsets_t *ds = pf_downsets_enumerate(g, 100, &capped);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 0;
    pf_stagedeg_result_t *r = NULL;
    char err[256];
    CU_ASSERT_EQUAL(pf_stagedeg_run(g, ds, &cm, &o, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NULL(r);
    o.devices = 2;
    cm.train.schedule = PF_SCHEDULE_GPIPE;
    CU_ASSERT_EQUAL(pf_stagedeg_run(g, ds, &cm, &o, &r, err, sizeof err), PF_EINPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "gpipe"));
    pf_downsets_destroy(&ds);
    pf_graph_destroy(&g);
}

/* stash_inputs (planfarm's pipeline): a chain 0 -> 1 -> 2 with 1e9 and 2e9 bytes and a skip
 * edge 0 -> 2 of 3e9, each op 1 ms, one stage per op on one replica, 1 GB/s, edge_factor 2,
 * N = 4. The skip tensor is relayed through stage 1: it receives out({0}) = 4e9 and sends
 * out({0, 1}) = 5e9, so 1 + 2 x 9e9 B / 1 GB/s = 18001 ms, and holds its input 4e9 for each of
 * its K = 2 micro-batches in flight: 8e9 bytes. Stage 0: 1 + 2 x 4e9 -> 8001 ms, nothing
 * stashed; stage 2: 1 + 2 x 5e9 -> 10001 ms, 1 x 5e9 bytes. [Piper]'s model (the option off)
 * prices each edge between its own two stages: stage 1 only 1e9 in and 2e9 out, 6001 ms, and
 * stashes nothing. The DP with the option finds the chain's optimum under it: one stage, no
 * cut, on 2 replicas (d | N = 4, d <= 3 devices): 3 / 2 ms. */
static void test_stash_inputs_by_hand(void)
{
    char err[256], name[16]; /* room for any int: -O1 cannot prove i < 3 */
    pf_graph_t *g = pf_graph_new("skip", 1);
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "op%d", i);
        pf_op_t op = {.id = i, .name = name, .fwd_ms = 1};
        pf_graph_add_op(g, &op);
    }
    pf_graph_add_edge(g, 0, 1, 1e9);
    pf_graph_add_edge(g, 1, 2, 2e9);
    pf_graph_add_edge(g, 0, 2, 3e9);
    CU_ASSERT_EQUAL_FATAL(pf_graph_finalize(g, err, sizeof err), PF_OK);
    pf_cost_model_t cm;
    pf_test_cost_model(&cm, 1, 4, 1e30);
    pf_stagedeg_opts_t o;
    pf_stagedeg_opts_init(&o);
    o.devices = 3, o.edge_factor = 2, o.stash_inputs = 1;
    pf_stagedeg_result_t *e = pf_stagedeg_result_new(3, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(e);
    for (int v = 0; v < 3; v++)
        e->op_stage[v] = v, e->degree[v] = 1;
    CU_ASSERT_EQUAL_FATAL(pf_stagedeg_eval(g, &cm, &o, e, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(e->time_ms[0], 8001, 1e-9);
    PF_ASSERT_CLOSE(e->time_ms[1], 18001, 1e-9);
    PF_ASSERT_CLOSE(e->time_ms[2], 10001, 1e-9);
    PF_ASSERT_CLOSE(e->mem_bytes[0], 0, 1e-9);
    PF_ASSERT_CLOSE(e->mem_bytes[1], 8e9, 1e-9);
    PF_ASSERT_CLOSE(e->mem_bytes[2], 5e9, 1e-9);
    o.stash_inputs = 0;
    CU_ASSERT_EQUAL_FATAL(pf_stagedeg_eval(g, &cm, &o, e, err, sizeof err), PF_OK);
    PF_ASSERT_CLOSE(e->time_ms[1], 6001, 1e-9);
    PF_ASSERT_CLOSE(e->mem_bytes[1], 0, 1e-9);
    pf_stagedeg_result_destroy(&e);
    o.stash_inputs = 1;
    pf_stagedeg_result_t *r = solve(g, &cm, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    PF_ASSERT_CLOSE(r->objective_ms, 1.5, 1e-9);
    CU_ASSERT(r->stages == 1 && r->degree[0] == 2);
    pf_stagedeg_result_destroy(&r);
    pf_graph_destroy(&g);
}

void pf_suite_stagedeg(void)
{
    CU_pSuite s = CU_add_suite("stagedeg", NULL, NULL);
    CU_add_test(s, "heavy stage on 3 replicas, light on 1 (worked by hand)",
                test_heavy_stage_three_replicas);
    CU_add_test(s, "memory forces recomputation on one stage (worked by hand)",
                test_memory_forces_recomputation);
    CU_add_test(s, "recompute some ops of a stage (worked by hand)", test_recompute_some_ops);
    CU_add_test(s, "DP equals exhaustive chains x degrees x recomputation (60 DAGs)",
                test_brute_force);
    CU_add_test(s, "every d = R: pf_partition_dp's objective / R", test_constant_r_is_partition_dp);
    CU_add_test(s, "PipeDream's replicated stage time (worked by hand)", test_pipedream_by_hand);
    CU_add_test(s, "PipeDream's recurrence on chains (40 chains)", test_pipedream_recurrence);
    CU_add_test(s, "bad options", test_bad_options);
    CU_add_test(s, "planfarm's pipeline: relayed tensors, stashed inputs (by hand)",
                test_stash_inputs_by_hand);
}
