/* stagedeg: the downset DP with per-stage data-parallel degree and recomputation (stagedeg.h
 * gives the model and the recurrence).
 *
 * Pricing a pair (F_i inside F_j, stage H = F_j \ F_i) without walking the graph, as partition.c
 * does: per downset X its sums over ops (c_u, act and fixed per mode, parameter bytes), out(X) =
 * bytes of edges leaving X and the list of those edges; then
 *   sum(H) = sum(F_j) - sum(F_i),  cut(H) = out(F_j) - out(F_i) + 2 w(F_i -> H)
 * with w(F_i -> H) read from F_i's leaving edges whose head is in F_j. */
#include "planner/partition/stagedeg.h"
#include "planner/core/util.h"

#include <math.h>
#include <stdbool.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { NMODES = 2 };

void pf_stagedeg_opts_init(pf_stagedeg_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->devices = 1;
    o->degrees = PF_STAGEDEG_DEGREES_DIVIDE_MB;
    o->edge_factor = 1;
    o->allreduce_factor = 2;
}

static pf_stagedeg_opcost_t opcost(const pf_graph_t *g, const pf_stagedeg_opts_t *o, int r, int v)
{
    const pf_stagedeg_opcost_t *tab = r ? o->full : o->none;
    if (tab)
        return tab[v];
    return (pf_stagedeg_opcost_t){pf_graph_cu_ms(g, v), pf_graph_op(g, v)->mem_fwd_bytes, 0};
}

static int degree_ok(const pf_stagedeg_opts_t *o, int mb, int d)
{
    if (o->only_degree > 0)
        return d == o->only_degree;
    switch (o->degrees) {
    case PF_STAGEDEG_DEGREES_DIVIDE_MB: return mb % d == 0;
    case PF_STAGEDEG_DEGREES_POW2: return (d & (d - 1)) == 0;
    default: return 1;
    }
}

/* The most devices a chain may use: D, and at most MB under [Piper]'s rules. */
static int max_devices(const pf_stagedeg_opts_t *o, int mb)
{
    return o->degrees == PF_STAGEDEG_DEGREES_DIVIDE_MB && o->only_degree <= 0 && mb < o->devices
               ? mb
               : o->devices;
}

static int check_opts(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o,
                      char *err, size_t errlen)
{
    if (o->devices < 1)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: %d devices", o->devices);
    if (o->edge_factor < 0 || o->allreduce_factor < 0)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: negative factor");
    if (cm->train.schedule != PF_SCHEDULE_1F1B && cm->train.schedule != PF_SCHEDULE_SIGNAL)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: schedule %s is not modelled (1F1B only)",
                       pf_training_schedule_name(cm->train.schedule));
    if (pf_graph_nops(g) < 1)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: empty graph");
    return PF_OK;
}

/* ---- the model, shared by the DP and pf_stagedeg_eval ---- */

typedef struct {
    double cu[NMODES], act[NMODES], fixed[NMODES], params;
    double in; /* bytes of the edges entering the stage (its stashed input) */
} sums_t;

typedef struct {
    const pf_graph_t *g;
    const pf_cost_model_t *cm;
    const pf_stagedeg_opts_t *o;
    int mb;
    double *sf; /* sf[d], d = 1..D */
} model_t;

static int model_init(model_t *m, const pf_graph_t *g, const pf_cost_model_t *cm,
                      const pf_stagedeg_opts_t *o)
{
    m->g = g;
    m->cm = cm;
    m->o = o;
    m->mb = cm->microbatches > 0 ? cm->microbatches : 1;
    m->sf = malloc(((size_t)o->devices + 1) * sizeof *m->sf);
    if (!m->sf)
        return PF_ERR;
    for (int d = 1; d <= o->devices; d++)
        m->sf[d] = o->state_factor > 0   ? o->state_factor
                   : o->state_factor < 0 ? 0
                                         : pf_training_state_factor(&cm->train, d);
    return PF_OK;
}

/* t(H, d, r) from H's sums and cut (stagedeg.h). */
static double stage_ms(const model_t *m, const sums_t *h, double cut_bytes, int d, int r)
{
    double gbps = m->cm->flat_gbps, per = h->cu[r] + pf_bytes_ms(m->o->edge_factor * cut_bytes, gbps);
    double ar = m->o->allreduce_factor * (d - 1) / d * h->params /
                (m->o->allreduce_per_microbatch ? d : m->mb);
    return per / d + pf_bytes_ms(ar, gbps);
}

/* m of H on each of its devices, the stage's degrees K from it to the end of the chain. */
static double stage_mem(const model_t *m, const sums_t *h, int d, int r, int k)
{
    int y = (k + d - 1) / d;
    if (y > m->mb)
        y = m->mb;
    double act = h->act[r] + (m->o->stash_inputs ? h->in : 0);
    return m->sf[d] * h->params + y * act + h->fixed[r] + m->cm->reserve_bytes;
}

/* ---- [Piper]'s per-op choice (stagedeg.h "ops") ---- */

typedef struct {
    double ratio, save, extra;
    int v;
} cand_t;

static int cand_cmp(const void *a, const void *b)
{
    const cand_t *x = a, *y = b;
    if (x->ratio != y->ratio)
        return x->ratio < y->ratio ? -1 : 1;
    return (x->v > y->v) - (x->v < y->v);
}

/* t of stage H (its ops[0..nh), sums h, cut bytes) on d replicas holding y micro-batches, under
 * the "ops" choice; INFINITY when it fits without recomputation (mode none covers that) or not
 * even with every op recomputed. mark, when given, gets 1 for each op recomputed. */
static double greedy_ms(const model_t *m, const int *ops, int nh, const sums_t *h, double cut,
                        int d, int y, cand_t *c, int *mark)
{
    double limit = m->cm->mem_limit_bytes;
    double act = h->act[0] + (m->o->stash_inputs ? h->in : 0);
    double need = m->sf[d] * h->params + y * act + h->fixed[0] + m->cm->reserve_bytes - limit;
    if (need <= 0)
        return INFINITY;
    int nc = 0;
    double most = 0;
    for (int i = 0; i < nh; i++) {
        pf_stagedeg_opcost_t a = opcost(m->g, m->o, 0, ops[i]), b = opcost(m->g, m->o, 1, ops[i]);
        double save = y * (a.act_bytes - b.act_bytes) + a.fixed_bytes - b.fixed_bytes;
        if (save > 1e-9) {
            c[nc] = (cand_t){(b.cu_ms - a.cu_ms) / save, save, b.cu_ms - a.cu_ms, ops[i]};
            most += c[nc++].save;
        }
    }
    if (need - most > 0)
        return INFINITY;
    qsort(c, (size_t)nc, sizeof *c, cand_cmp);
    sums_t mix = *h;
    for (int i = 0; i < nc && need > 1e-9; i++) {
        need -= c[i].save;
        mix.cu[0] += c[i].extra;
        if (mark)
            mark[c[i].v] = 1;
    }
    return stage_ms(m, &mix, cut, d, 0);
}

/* ---- per-downset sums ---- */

typedef struct {
    long long D;
    int words, n, nmodes;
    sums_t *s;
    double *out;
    long long *estart;
    int *edst;
    double *ebytes;
    int *pop;
} dsinfo_t;

static void dsinfo_free(dsinfo_t *in)
{
    free(in->s);
    free(in->out);
    free(in->estart);
    free(in->edst);
    free(in->ebytes);
    free(in->pop);
    memset(in, 0, sizeof *in);
}

/* Sums over the ops of bitset b; with dst also its leaving edges. Returns how many leave. */
static long long set_sums(const pf_graph_t *g, const pf_stagedeg_opts_t *o, const uint64_t *b,
                          int words, sums_t *s, double *out, int *dst, double *bytes)
{
    long long k = 0;
    memset(s, 0, sizeof *s);
    *out = 0;
    for (int w = 0; w < words; w++)
        for (uint64_t x = b[w]; x; x &= x - 1) {
            int v = w * 64 + __builtin_ctzll(x), cnt;
            for (int r = 0; r < NMODES; r++) {
                pf_stagedeg_opcost_t c = opcost(g, o, r && o->full, v);
                s->cu[r] += c.cu_ms;
                s->act[r] += c.act_bytes;
                s->fixed[r] += c.fixed_bytes;
            }
            s->params += pf_graph_op(g, v)->param_bytes;
            const int *e = pf_graph_out(g, v, &cnt);
            for (int i = 0; i < cnt; i++) {
                const pf_edge_t *ed = pf_graph_edge(g, e[i]);
                if (pf_bit_test(b, ed->dst))
                    continue;
                *out += ed->bytes;
                if (dst) {
                    dst[k] = ed->dst;
                    bytes[k] = ed->bytes;
                }
                k++;
            }
        }
    return k;
}

static int dsinfo_build(const pf_graph_t *g, const pf_downsets_t *ds, const pf_stagedeg_opts_t *o,
                        dsinfo_t *in)
{
    long long D = pf_downsets_size(ds);
    memset(in, 0, sizeof *in);
    in->D = D;
    in->n = pf_graph_nops(g);
    in->words = pf_downsets_words(ds);
    in->nmodes = o->full ? 2 : 1;
    in->s = malloc((size_t)D * sizeof *in->s);
    in->out = malloc((size_t)D * sizeof *in->out);
    in->estart = calloc((size_t)D + 1, sizeof *in->estart);
    in->pop = malloc((size_t)D * sizeof *in->pop);
    if (!in->s || !in->out || !in->estart || !in->pop)
        goto oom;
    for (long long i = 0; i < D; i++) {
        in->pop[i] = pf_downsets_popcount(ds, i);
        in->estart[i + 1] = in->estart[i] + set_sums(g, o, pf_downsets_get(ds, i), in->words,
                                                     &in->s[i], &in->out[i], NULL, NULL);
    }
    size_t ne = (size_t)in->estart[D];
    in->edst = malloc((ne ? ne : 1) * sizeof *in->edst);
    in->ebytes = malloc((ne ? ne : 1) * sizeof *in->ebytes);
    if (!in->edst || !in->ebytes)
        goto oom;
    for (long long i = 0; i < D; i++) {
        sums_t s;
        double out;
        set_sums(g, o, pf_downsets_get(ds, i), in->words, &s, &out, in->edst + in->estart[i],
                 in->ebytes + in->estart[i]);
    }
    return PF_OK;
oom:
    dsinfo_free(in);
    return PF_ERR;
}

/* ---- the DP ---- */

typedef struct {
    const pf_downsets_t *ds;
    const dsinfo_t *in;
    const model_t *m;
    int K;          /* most devices a chain uses */
    int *degs, ndeg; /* allowed degrees, ascending */
    double *T;       /* T[i (K + 1) + k] */
    long long *argj; /* the G of cell (i, k) */
    int *argd, *argr;
    atomic_int oom;  /* a thread's scratch could not be had */
} dp_t;

static int is_subset(const uint64_t *a, const uint64_t *b, int words)
{
    for (int w = 0; w < words; w++)
        if (a[w] & ~b[w])
            return 0;
    return 1;
}

/* H = F_j \ F_i: its sums and cut bytes. */
static void pair_sums(const dp_t *dp, long long i, long long j, sums_t *h, double *cut)
{
    const dsinfo_t *in = dp->in;
    const uint64_t *fj = pf_downsets_get(dp->ds, j);
    double into = 0;
    for (long long e = in->estart[i]; e < in->estart[i + 1]; e++)
        if (pf_bit_test(fj, in->edst[e]))
            into += in->ebytes[e];
    for (int r = 0; r < NMODES; r++) {
        h->cu[r] = in->s[j].cu[r] - in->s[i].cu[r];
        h->act[r] = in->s[j].act[r] - in->s[i].act[r];
        h->fixed[r] = in->s[j].fixed[r] - in->s[i].fixed[r];
    }
    h->params = in->s[j].params - in->s[i].params;
    if (dp->m->o->stash_inputs) { /* planfarm's pipeline: everything crossing is relayed */
        h->in = in->out[i];
        *cut = in->out[i] + in->out[j];
        return;
    }
    h->in = into;
    *cut = in->out[j] - in->out[i] + 2 * into;
}

/* Cell (i, k) takes G = F_j, degree d, mode r with value v when it is strictly better. */
static void take(dp_t *dp, long long i, int k, double v, long long j, int d, int r)
{
    size_t c = (size_t)i * (dp->K + 1) + k;
    dp->T[c] = v;
    dp->argj[c] = j;
    dp->argd[c] = d;
    dp->argr[c] = r;
}

/* Stage H = F_j \ F_i (its ops[0..nh)) as the first stage of the chain from F_i, every degree
 * and mode, into the cells T[i][k]. */
static void dp_pair(dp_t *dp, long long i, long long j, const int *ops, int nh, cand_t *cand)
{
    const model_t *m = dp->m;
    int K = dp->K;
    const double *Ti = dp->T + (size_t)i * (K + 1), *Tj = dp->T + (size_t)j * (K + 1);
    sums_t h;
    double cut;
    pair_sums(dp, i, j, &h, &cut);
    for (int di = 0; di < dp->ndeg; di++) {
        int d = dp->degs[di], yprev = -1;
        for (int r = 0; r < dp->in->nmodes; r++) {
            double t = stage_ms(m, &h, cut, d, r);
            for (int k = d; k <= K; k++) {
                double v = pf_max_nonan(t, Tj[k - d]);
                if (v < Ti[k] && stage_mem(m, &h, d, r, k) <= m->cm->mem_limit_bytes)
                    take(dp, i, k, v, j, d, r);
            }
        }
        if (!m->o->recompute_ops || !m->o->full)
            continue;
        /* the greedy's time is at least mode none's: run it (once per y) only where that bound
         * could still improve the cell */
        double t = INFINITY, t0 = stage_ms(m, &h, cut, d, 0);
        for (int k = d; k <= K; k++) {
            if (!(pf_max_nonan(t0, Tj[k - d]) < Ti[k]))
                continue;
            int y = (k + d - 1) / d < m->mb ? (k + d - 1) / d : m->mb;
            if (y != yprev)
                t = greedy_ms(m, ops, nh, &h, cut, d, y, cand, NULL);
            yprev = y;
            double v = pf_max_nonan(t, Tj[k - d]);
            if (v < Ti[k])
                take(dp, i, k, v, j, d, 2);
        }
    }
}

/* Cells T[i][k] for every k: every G = F_j strictly above F_i, degree and mode. Pairs are
 * visited in a fixed order with strict improvement: the result does not depend on threads. */
static void dp_cell(dp_t *dp, long long i, int *ops, cand_t *cand)
{
    const dsinfo_t *in = dp->in;
    const uint64_t *fi = pf_downsets_get(dp->ds, i);
    for (long long j = i + 1; j < in->D; j++) {
        const uint64_t *fj = pf_downsets_get(dp->ds, j);
        if (in->pop[j] == in->pop[i] || !is_subset(fi, fj, in->words))
            continue;
        int nh = 0;
        for (int w = 0; w < in->words && dp->m->o->recompute_ops; w++)
            for (uint64_t x = fj[w] & ~fi[w]; x; x &= x - 1)
                ops[nh++] = w * 64 + __builtin_ctzll(x);
        dp_pair(dp, i, j, ops, nh, cand);
    }
}

static int dp_solve(dp_t *dp, int nt)
{
    const dsinfo_t *in = dp->in;
    long long D = in->D;
    int K = dp->K;
    for (size_t c = 0; c < (size_t)D * (K + 1); c++)
        dp->T[c] = INFINITY;
    dp->T[(size_t)(D - 1) * (K + 1)] = 0;
    /* size classes from the largest proper one down; a class reads only larger ones */
    long long hi = D - 1;
    while (hi > 0) {
        long long lo = hi;
        while (lo > 0 && in->pop[lo - 1] == in->pop[hi - 1])
            lo--;
        /* cells [lo, hi) share a size */
#pragma omp parallel num_threads(nt) if (nt > 1 && hi - lo > 1)
        {
            int *ops = malloc((size_t)in->n * sizeof *ops);
            cand_t *cand = malloc((size_t)in->n * sizeof *cand);
            if (!ops || !cand)
                atomic_store(&dp->oom, 1);
#pragma omp for schedule(dynamic, 1)
            for (long long i = lo; i < hi; i++)
                if (ops && cand)
                    dp_cell(dp, i, ops, cand);
            free(ops);
            free(cand);
        }
        hi = lo;
    }
    return atomic_load(&dp->oom) ? PF_ERR : PF_OK;
}

pf_stagedeg_result_t *pf_stagedeg_result_new(int n, int S)
{
    pf_stagedeg_result_t *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->nops = n;
    r->stages = S;
    r->objective_ms = INFINITY;
    int cap = S > 0 ? S : 1;
    r->op_stage = calloc((size_t)n, sizeof *r->op_stage);
    r->op_recompute = calloc((size_t)n, sizeof *r->op_recompute);
    r->op_tmpc = malloc((size_t)n * sizeof *r->op_tmpc);
    r->degree = calloc((size_t)cap, sizeof *r->degree);
    r->tensor = malloc((size_t)cap * sizeof *r->tensor);
    r->recompute = calloc((size_t)cap, sizeof *r->recompute);
    r->time_ms = calloc((size_t)cap, sizeof *r->time_ms);
    r->mem_bytes = calloc((size_t)cap, sizeof *r->mem_bytes);
    if (!r->op_stage || !r->op_recompute || !r->op_tmpc || !r->degree || !r->tensor ||
        !r->recompute || !r->time_ms || !r->mem_bytes) {
        pf_stagedeg_result_destroy(&r);
        return NULL;
    }
    for (int v = 0; v < n; v++)
        r->op_tmpc[v] = -1;
    for (int s = 0; s < cap; s++)
        r->tensor[s] = 1;
    return r;
}

void pf_stagedeg_result_destroy(pf_stagedeg_result_t **r)
{
    if (!r || !*r)
        return;
    free((*r)->op_stage);
    free((*r)->op_recompute);
    free((*r)->op_tmpc);
    free((*r)->degree);
    free((*r)->tensor);
    free((*r)->recompute);
    free((*r)->time_ms);
    free((*r)->mem_bytes);
    free(*r);
    *r = NULL;
}

/* Stage s of r, H = F_j \ F_i: its ops, and which of them are recomputed under mode r at the
 * chain's k devices from it on. */
static int chain_stage(const dp_t *dp, pf_stagedeg_result_t *res, int s, long long i, long long j,
                       int k)
{
    const dsinfo_t *in = dp->in;
    size_t c = (size_t)i * (dp->K + 1) + k;
    int d = dp->argd[c], r = dp->argr[c], nh = 0, *ops = malloc((size_t)in->n * sizeof *ops);
    cand_t *cand = malloc((size_t)in->n * sizeof *cand);
    if (!ops || !cand) {
        free(ops);
        free(cand);
        return PF_ERR;
    }
    const uint64_t *fi = pf_downsets_get(dp->ds, i), *fj = pf_downsets_get(dp->ds, j);
    for (int w = 0; w < in->words; w++)
        for (uint64_t x = fj[w] & ~fi[w]; x; x &= x - 1) {
            int v = w * 64 + __builtin_ctzll(x);
            ops[nh++] = v;
            res->op_stage[v] = s;
            res->op_recompute[v] = r == 1;
        }
    res->degree[s] = d;
    res->recompute[s] = r;
    if (r == 2) {
        sums_t h;
        double cut;
        int y = (k + d - 1) / d < dp->m->mb ? (k + d - 1) / d : dp->m->mb;
        pair_sums(dp, i, j, &h, &cut);
        greedy_ms(dp->m, ops, nh, &h, cut, d, y, cand, res->op_recompute);
    }
    free(ops);
    free(cand);
    return PF_OK;
}

/* The chain from {} with k devices, as a result (stages, ops, degrees, modes). */
static pf_stagedeg_result_t *dp_chain(const dp_t *dp, int k)
{
    const dsinfo_t *in = dp->in;
    int K = dp->K, S = 0;
    for (long long i = 0, kk = k; i != in->D - 1; S++) {
        size_t c = (size_t)i * (K + 1) + kk;
        kk -= dp->argd[c];
        i = dp->argj[c];
    }
    pf_stagedeg_result_t *r = pf_stagedeg_result_new(in->n, S);
    long long i = 0;
    for (int s = 0; r && s < S; s++) {
        long long j = dp->argj[(size_t)i * (K + 1) + k];
        if (chain_stage(dp, r, s, i, j, k) != PF_OK)
            pf_stagedeg_result_destroy(&r);
        k -= dp->argd[(size_t)i * (K + 1) + k];
        i = j;
    }
    return r;
}

/* The allowed degrees into dp->degs. */
static int dp_degrees(dp_t *dp)
{
    dp->degs = malloc((size_t)dp->K * sizeof *dp->degs);
    if (!dp->degs)
        return PF_ERR;
    dp->ndeg = 0;
    for (int d = 1; d <= dp->K; d++)
        if (degree_ok(dp->m->o, dp->m->mb, d))
            dp->degs[dp->ndeg++] = d;
    return PF_OK;
}

static void dp_free(dp_t *dp)
{
    free(dp->degs);
    free(dp->T);
    free(dp->argj);
    free(dp->argd);
    free(dp->argr);
}

int pf_stagedeg_run(const pf_graph_t *g, const pf_downsets_t *ds, const pf_cost_model_t *cm,
                    const pf_stagedeg_opts_t *o, pf_stagedeg_result_t **out, char *err,
                    size_t errlen)
{
    dsinfo_t in = {0};
    model_t m = {0};
    dp_t dp = {.ds = ds, .in = &in, .m = &m};
    pf_stagedeg_result_t *r = NULL;
    int rc;
    *out = NULL;
    if ((rc = check_opts(g, cm, o, err, errlen)) != PF_OK)
        return rc;
    long long D = pf_downsets_size(ds);
    if (D < 2 || pf_downsets_popcount(ds, D - 1) != pf_graph_nops(g) ||
        pf_downsets_popcount(ds, 0) != 0)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: downsets must run from {} to V");
    if (model_init(&m, g, cm, o) != PF_OK || dsinfo_build(g, ds, o, &in) != PF_OK)
        goto oom;
    dp.K = max_devices(o, m.mb);
    size_t cells = (size_t)D * ((size_t)dp.K + 1);
    dp.T = malloc(cells * sizeof *dp.T);
    dp.argj = malloc(cells * sizeof *dp.argj);
    dp.argd = malloc(cells * sizeof *dp.argd);
    dp.argr = malloc(cells * sizeof *dp.argr);
    if (!dp.T || !dp.argj || !dp.argd || !dp.argr || dp_degrees(&dp) != PF_OK)
        goto oom;
    if (dp_solve(&dp, o->threads > 0 ? o->threads : omp_get_max_threads()) != PF_OK)
        goto oom;
    int best = -1;
    for (int k = o->exact_devices ? o->devices : 1; k <= dp.K; k++)
        if (isfinite(dp.T[k]) && (best < 0 || dp.T[k] < dp.T[best]))
            best = k;
    r = best < 0 ? pf_stagedeg_result_new(in.n, 0) : dp_chain(&dp, best);
    if (!r || (best >= 0 && pf_stagedeg_eval(g, cm, o, r, err, errlen) != PF_OK))
        goto oom;
    *out = r;
    rc = PF_OK;
    goto done;
oom:
    pf_stagedeg_result_destroy(&r);
    rc = pf_fail(err, errlen, PF_ERR, "stagedeg: out of memory (%lld downsets)", D);
done:
    dp_free(&dp);
    dsinfo_free(&in);
    free(m.sf);
    return rc;
}

/* ---- pricing a given assignment ---- */

/* Sums (mode 0 = the mix op_recompute gives) and cut bytes of stage s of r. */
static void stage_sums(const pf_graph_t *g, const pf_stagedeg_opts_t *o,
                       const pf_stagedeg_result_t *r, int s, sums_t *h, double *cut)
{
    memset(h, 0, sizeof *h);
    *cut = 0;
    for (int v = 0; v < pf_graph_nops(g); v++) {
        if (r->op_stage[v] != s)
            continue;
        pf_stagedeg_opcost_t c = opcost(g, o, r->op_recompute[v] != 0, v);
        h->cu[0] += c.cu_ms;
        h->act[0] += c.act_bytes;
        h->fixed[0] += c.fixed_bytes;
        h->params += pf_graph_op(g, v)->param_bytes;
    }
    for (int e = 0; e < pf_graph_nedges(g); e++) {
        const pf_edge_t *ed = pf_graph_edge(g, e);
        int a = r->op_stage[ed->src], b = r->op_stage[ed->dst];
        bool enters = a < s && b >= s, leaves = a <= s && b > s; /* relayed through s too */
        if (o->stash_inputs)
            *cut += (enters ? ed->bytes : 0) + (leaves ? ed->bytes : 0);
        else if ((a == s) != (b == s))
            *cut += ed->bytes;
        h->in += enters ? ed->bytes : 0;
    }
}

int pf_stagedeg_eval(const pf_graph_t *g, const pf_cost_model_t *cm, const pf_stagedeg_opts_t *o,
                     pf_stagedeg_result_t *r, char *err, size_t errlen)
{
    model_t m = {0};
    int rc, k = 0;
    if ((rc = check_opts(g, cm, o, err, errlen)) != PF_OK)
        return rc;
    for (int s = 0; s < r->stages; s++) {
        if (r->degree[s] < 1 || r->degree[s] > o->devices)
            return pf_fail(err, errlen, PF_EINPUT, "stagedeg: stage %d: degree %d", s,
                           r->degree[s]);
        k += r->degree[s];
    }
    if (k > o->devices)
        return pf_fail(err, errlen, PF_EINPUT, "stagedeg: %d devices used of %d", k, o->devices);
    if (model_init(&m, g, cm, o) != PF_OK)
        return pf_fail(err, errlen, PF_ERR, "stagedeg: out of memory");
    r->objective_ms = 0;
    for (int s = 0; s < r->stages; s++) {
        sums_t h;
        double cut;
        stage_sums(g, o, r, s, &h, &cut);
        r->time_ms[s] = stage_ms(&m, &h, cut, r->degree[s], 0);
        r->mem_bytes[s] = stage_mem(&m, &h, r->degree[s], 0, k);
        k -= r->degree[s];
        r->objective_ms = r->mem_bytes[s] > cm->mem_limit_bytes
                              ? INFINITY
                              : fmax(r->objective_ms, r->time_ms[s]);
    }
    if (r->stages == 0)
        r->objective_ms = INFINITY;
    free(m.sf);
    return PF_OK;
}
